"""One host mixing Iluvatar, MetaX and NVIDIA: one session, every device with its vendor.

Iluvatar and MetaX answer from a replay of their shared samples (one runner serves both
tools: ``ixsmi`` and ``mx-smi`` never collide); NVIDIA runs on its fake NVML scenario.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.cli import main
from accel.discovery import open_session
from accel.plugin import BackendConfig
from accel.tools import ReplayRunner

REPLAY = Path(__file__).resolve().parent / "replay-iluvatar-metax"


def _configs() -> dict[str, BackendConfig]:
    runner = ReplayRunner(REPLAY)
    return {
        "iluvatar": BackendConfig(runner=runner, enrich_from_sysfs=False),
        "metax": BackendConfig(runner=runner, enrich_from_sysfs=False),
        "nvidia": BackendConfig(options={"scenario": "rtx4090-4"}, enrich_from_sysfs=False),
    }


def test_one_session_lists_every_device_with_its_vendor() -> None:
    with open_session(_configs(), backends=["iluvatar", "metax", "nvidia"]) as session:
        inv = session.inventory()
        health = session.health()
        telemetry = session.telemetry()
    vendors = [d.vendor for d in inv.devices]
    assert vendors.count("iluvatar") == 16 and vendors.count("metax") == 8 and vendors.count("nvidia") == 4
    assert len({d.id for d in inv.devices}) == 28  # vendor-qualified ids compose
    assert {d.vendor for d in inv.devices if d.id.startswith("metax:")} == {"metax"}
    assert {s.backend for s in inv.sources} >= {"iluvatar", "metax", "nvidia"}
    # MetaXLink islands and BI-V150 boards survive the merge.
    kinds = sorted(d.kind for d in inv.domains)
    assert kinds.count("metaxlink_group") == 2 and kinds.count("die_pair") == 8
    assert set(health) == {d.id for d in inv.devices}
    assert {t.device_id for t in telemetry} == {d.id for d in inv.devices}


def test_one_backend_failing_never_hides_the_others(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "mx-smi.json").write_text(json.dumps({"argv": ["mx-smi"], "stdout": "mx-smi: driver not loaded\n"}))
    configs = _configs()
    configs["metax"] = BackendConfig(runner=ReplayRunner(broken), enrich_from_sysfs=False)
    with open_session(configs, backends=["iluvatar", "metax", "nvidia"]) as session:
        inv = session.inventory()
        failed = session.report.entry("metax")
    assert {d.vendor for d in inv.devices} == {"iluvatar", "nvidia"}
    assert failed.status == "failed" and "mx-smi" in failed.reason


def test_accel_ls_lists_the_mixed_host(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ls", "-b", "iluvatar", "-b", "metax", "-b", "nvidia", "--replay", str(REPLAY)]
    rc = main([*argv, "--option", "scenario=rtx4090-4", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    by_vendor: dict[str, list[str]] = {}
    for dev in data["devices"]:
        by_vendor.setdefault(dev["vendor"], []).append(dev["model"])
    assert by_vendor["iluvatar"] == ["Iluvatar BI-V150"] * 16
    assert by_vendor["metax"] == ["MetaX C550"] * 8
    assert by_vendor["nvidia"] == ["NVIDIA GeForce RTX 4090"] * 4
