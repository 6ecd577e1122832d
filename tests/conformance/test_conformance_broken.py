"""A deliberately broken backend fails the rows it should, and no others.

Every breakage in ``conformance_fake.BREAKS`` violates one requirement on purpose; the whole
suite runs once per breakage (one child pytest session, one suite class each) and each class
must fail exactly the expected rows, with a message that names the device or call and says
what to fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accel.conformance import REQUIREMENTS
from tests.conformance import conformance_fake as fake
from tests.conformance._kit import failing_rows, run_suite_module

SOURCE = """
from pathlib import Path
from accel.conformance import REQUIREMENTS
from accel.conformance import ConformanceSuite
from accel.plugin import BackendConfig
from accel.conformance import REQUIREMENTS
from tests.conformance import conformance_fake as fake


def suite(brk):
    class Suite(ConformanceSuite):
        backend = "acme"
        plugin = fake.plugin_for(brk)
        scenario = brk or "good"

        @classmethod
        def backend_config(cls, tmp_path: Path) -> BackendConfig:
            config = fake.make_config(tmp_path, brk)
            cls.oracle = fake.AcmeOracle(vendor_ids=[fake.VENDOR_ID], root=config.sysfs_root)
            return config

    Suite.__name__ = Suite.__qualname__ = "Test_" + (brk or "good").replace("-", "_")
    return Suite

"""


@pytest.fixture(scope="module")
def broken_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    lines = [SOURCE, 'Test_good = suite("")']
    lines += [f"Test_{b.replace('-', '_')} = suite({b!r})" for b in fake.BREAKS]
    rc, output, results = run_suite_module(tmp_path_factory.mktemp("broken"), "\n".join(lines))
    assert results is not None, output[-3000:]
    assert rc == 1, output[-3000:]
    return {run["scenario"]: run for run in results["runs"]}


def test_the_unbroken_fake_passes_every_row(broken_runs: dict[str, dict[str, Any]]) -> None:
    run = broken_runs["good"]
    assert {r["status"] for r in run["rows"].values()} == {"pass"}
    assert len(run["rows"]) == len(REQUIREMENTS)


@pytest.mark.parametrize("brk", sorted(fake.BREAKS))
def test_breakage_fails_exactly_its_rows(brk: str, broken_runs: dict[str, dict[str, Any]]) -> None:
    run = broken_runs[brk]
    assert failing_rows(run) == fake.BREAKS[brk], {
        rid: r["message"] for rid, r in run["rows"].items() if r["status"] != "pass"
    }
    for rid in fake.BREAKS[brk]:
        message = run["rows"][rid]["message"]
        # Actionable: says what is wrong and what to change, without a traceback.
        assert "Fix:" in message or "raised" in message, message
        assert "Traceback" not in message


def test_messages_name_the_device_and_the_fix(broken_runs: dict[str, dict[str, Any]]) -> None:
    msg = broken_runs["memory-mib"]["rows"]["memory.total-bytes"]["message"]
    assert "acme:GPU-0000-acme: memory total 81920 bytes is outside 64 MiB..16 TiB" in msg
    assert "MiB * 1048576" in msg
    msg = broken_runs["clock-mhz"]["rows"]["telemetry.units-sane"]["message"]
    assert "clock sm 1410.0 Hz (MHz?)" in msg
    msg = broken_runs["keyerror"]["rows"]["errors.unknown-id"]["message"]
    assert "raised BackendUnavailableError" in msg and "KeyError" in msg and "not accel.errors.DeviceError" in msg
    msg = broken_runs["import-slow-thread"]["rows"]["discovery.entry-point-light"]["message"]
    assert "importing tests.conformance.conformance_slow_import:PLUGIN took" in msg and "budget 1 s" in msg
    assert "slowest: tests.conformance.conformance_slow_import" in msg
    assert "started 1 thread(s)" in msg and "acme-watchdog" in msg
    msg = broken_runs["probe-runs-own-replay"]["rows"]["discovery.probe-cheap"]["message"]
    assert "probe() ran 2 vendor tools (acme-smi -q; acme-smi -q)" in msg
    msg = broken_runs["lost-breaks-all"]["rows"]["health.lost-device-isolated"]["message"]
    assert "health() raised BackendUnavailableError" in msg and "VendorLibError: ACME_ERROR_GPU_IS_LOST" in msg


def test_results_file_records_the_run(broken_runs: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    run = broken_runs["good"]
    assert run["label"] == "acme[good]"
    assert run["plugin"]["version"] == "0.3.1"
    assert run["plugin"]["api_version_negotiated"] == "1.0"
    assert run["driver_versions"] == ["535.104.05"]
    assert run["device_count"] == 4
    assert "partitions" in run["declared"] and "partitions" in run["observed"]
