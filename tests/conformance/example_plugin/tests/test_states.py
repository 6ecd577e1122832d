"""How example-smi's own states read: a lost board, a board whose health it cannot tell, a
mangled entry."""

import json
from importlib import resources
from pathlib import Path

from accel_backend_example import PLUGIN

from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.tools import ReplayRunner


def _first(scenario: str):  # type: ignore[no-untyped-def]
    backend = PLUGIN.open(BackendConfig(options={"scenario": scenario}))
    try:
        return backend.inventory().devices[0]
    finally:
        backend.close()


def test_lost_board_is_unhealthy_with_the_tool_code() -> None:
    dev = _first("two-gpu-lost")
    assert dev.health.state is HealthState.UNHEALTHY
    assert [c.vendor_code for c in dev.health.conditions] == ["example.xid:79"]


def test_health_not_supported_is_unknown_not_healthy() -> None:
    assert _first("two-gpu-nohealth").health.state is HealthState.UNKNOWN


def test_binding_by_uuid() -> None:
    dev = _first("two-gpu")
    assert (dev.binding.visible_env, dev.binding.visible_id) == ("EXAMPLE_VISIBLE_DEVICES", dev.uuid)


def test_a_mangled_entry_is_one_unread_device_not_a_lost_table(tmp_path: Path) -> None:
    src = Path(str(resources.files("accel_backend_example").joinpath("scenarios", "two-gpu")))
    data = json.loads((src / "example-smi-query.txt").read_text())
    del data["gpus"][1]["memory_total_mib"]
    (tmp_path / "out.txt").write_text(json.dumps(data))
    recording = {"argv": ["example-smi", "--query", "--format=json"], "returncode": 0, "stdout_file": "out.txt"}
    (tmp_path / "query.json").write_text(json.dumps(recording))
    backend = PLUGIN.open(BackendConfig(runner=ReplayRunner(tmp_path)))
    try:
        inv = backend.inventory()
    finally:
        backend.close()
    assert [d.index for d in inv.devices] == [0, 1]
    assert inv.devices[1].health.state is HealthState.UNKNOWN
    assert [p.kind.value for p in inv.problems] == ["record"]
