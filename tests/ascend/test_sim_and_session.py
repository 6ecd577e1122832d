"""The simulator's Ascend profile agrees with the 910B replay; a hung npu-smi never hides others."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from accel.discovery import EntryStatus, Stage, open_session
from accel.errors import ToolTimeoutError
from accel.model import HostInventory
from accel.plugin import BackendConfig
from accel.plugins.ascend import PLUGIN as ASCEND
from accel.sim import PLUGIN as SIM
from accel.toolkit import scenario_path
from accel.tools import ReplayRunner


def _facts(inv: HostInventory) -> dict[str, object]:
    return {
        "devices": [
            (d.id, d.model, d.kind.value, d.memory_total_bytes, d.pci.bus_id if d.pci else None, d.cpu_affinity,
             d.binding.visible_env, d.binding.torch_device_type, d.binding.collective_backend)
            for d in inv.devices
        ],
        "hccs_pairs": sorted(tuple(sorted((x.a, x.b))) for x in inv.links if x.type.value == "hccs"),
        "domains": sorted((d.kind.value, tuple(sorted(d.members))) for d in inv.domains),
    }


def test_sim_profile_agrees_with_the_910b_replay() -> None:
    with ASCEND.open(BackendConfig(options={"scenario": "910b-8"})) as replay:
        real = _facts(replay.inventory())
    with SIM.open(BackendConfig(options={"profile": "ascend-910b-8"})) as sim:
        simulated = _facts(sim.inventory())
    assert real == simulated
    assert len(real["hccs_pairs"]) == 28  # type: ignore[arg-type]


def test_hung_npu_smi_times_out_while_the_other_backends_report(tmp_path: Path) -> None:
    replay = tmp_path / "hung"
    shutil.copytree(scenario_path("accel.plugins.ascend", "910b-8"), replay)
    info = replay / "npu-smi_info.json"
    data = json.loads(info.read_text())
    data["delay_s"] = 60.0  # npu-smi hangs
    info.write_text(json.dumps(data))
    configs = {
        "ascend": BackendConfig(runner=ReplayRunner(replay), tool_timeout_s=0.3, enrich_from_sysfs=False),
        "sim": BackendConfig(options={"profile": "dgx-h100"}, enrich_from_sysfs=False),
    }
    with open_session(configs, backends=["ascend", "sim"]) as session:
        inv = session.inventory()
        assert {d.vendor for d in inv.devices} == {"nvidia"} and len(inv.devices) == 8
        entry = session.report.entry("ascend")
        assert entry.status is EntryStatus.FAILED and entry.stage is Stage.READ
        assert isinstance(entry.error, ToolTimeoutError) and "npu-smi" in entry.reason
