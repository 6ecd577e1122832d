"""A real Prometheus scrapes the exporter over the simulator with a fault injected and fires the alert."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel.exporter import rules_yaml
from tests.exporter._procs import alerts, exporter, free_port, prometheus, query, wait_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus; .ci/run installs it)"
)
#: dgx-h100's device at position 1 (the simulator's ids are stable).
DEVICE_1 = "nvidia:GPU-7b1e0c01-1d2a-4c3b-9e4f-000000000001"


def test_prometheus_scrapes_and_fires_the_unhealthy_alert(tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    port = free_port()
    # Each read is one simulator tick (its inventory, telemetry and health are one instant): from the fifth
    # read on (after the readiness probe and a few Prometheus scrapes saw the counter at 0), device 1 has an
    # uncorrectable ECC error.
    with exporter(["--sim", "dgx-h100", "-o", "faults=ecc_uncorrectable:1@4"], port) as exp, \
            prometheus(PROMETHEUS, tmp_path, port, rules) as (base, prom):

        def up() -> list[dict[str, object]] | None:
            got = query(base, 'accel_exporter_backend_up{backend="sim"}')
            return got if got and got[0]["value"][1] == "1" else None  # type: ignore[index]

        wait_for("accel_exporter_backend_up == 1 in Prometheus", up, 60, prom)
        info = query(base, "accel_device_info")
        assert len(info) == 8
        assert {r["metric"]["model"] for r in info} == {"NVIDIA H100 80GB HBM3"}
        assert all(r["metric"]["job"] == "accel" and r["metric"]["hostname"] for r in info)
        total = query(base, f'accel_memory_total_bytes{{device="{DEVICE_1}"}}')
        assert float(total[0]["value"][1]) == 85520809984

        def unhealthy_firing() -> dict[str, object] | None:
            for alert in alerts(base):
                if alert["labels"]["alertname"] == "AccelDeviceUnhealthy" and alert["state"] == "firing":
                    return alert
            return None

        alert = wait_for("AccelDeviceUnhealthy firing", unhealthy_firing, 60, prom)
        assert alert["labels"]["device"] == DEVICE_1  # type: ignore[index]
        assert alert["labels"]["severity"] == "critical"  # type: ignore[index]
        cond = query(base, f'accel_health_condition{{device="{DEVICE_1}"}}')
        assert cond[0]["metric"]["reason"] == "UncorrectableMemoryError"
        assert cond[0]["metric"]["severity"] == "critical"

        def ecc_firing() -> bool | None:
            names = {(a["labels"]["alertname"], a["state"]) for a in alerts(base)}
            return True if ("AccelUncorrectableECCErrors", "firing") in names else None

        wait_for("AccelUncorrectableECCErrors firing", ecc_firing, 60, prom)
        assert exp.poll() is None
