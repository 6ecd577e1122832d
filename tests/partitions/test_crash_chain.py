"""A process SIGKILLed half-way through a create or destroy leaves no orphan: the next one
reconciles its intent (the long random chain: benchmarks/partitions/crash_chain.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._helpers import loaded_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "partitions" / "crash_chain.py"


def _killed_between(profile: str, state: Path) -> dict[str, object]:
    """Run a worker that is SIGKILLed between the two steps of its first create or destroy."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--worker", profile, "--state", str(state), "--seed", "3",
                           "--kill-between"], capture_output=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    raw: dict[str, object] = json.loads(state.read_text())
    return raw


@pytest.mark.parametrize("profile,op", [("ascend-910b-8", "create"), ("a100-mig", "destroy")])
def test_a_process_killed_between_the_two_steps_leaves_no_orphan(tmp_path: Path, profile: str, op: str) -> None:
    state = tmp_path / "state.json"
    raw = _killed_between(profile, state)
    (intent,) = raw["intents"]  # type: ignore[misc]
    assert intent["op"] == op and intent["ids"]
    with loaded_script(SCRIPT, "accel_crash_chain") as chain:
        assert chain.violations(profile, str(state)) == []
    after = json.loads(state.read_text())
    assert after["intents"] == []
    ids = set(intent["ids"])
    assert not {d["id"] for d in after["made"]} & ids  # undone (create) or completed (destroy)
    if op == "destroy":  # the profile's own partition it was destroying stays destroyed
        assert ids <= set(after["removed"])


def test_the_intent_of_a_live_process_is_left_alone(tmp_path: Path) -> None:
    """A process between its two steps is alive: another one must not undo its work."""
    import os

    from accel.plugin import BackendConfig
    from accel.sim import SimPlugin

    state = tmp_path / "state.json"
    part = {"id": "huawei:pci-0000:c1:00.0/vnpu100", "parent_id": "huawei:pci-0000:c1:00.0",
            "profile": "vir05_1c_16g", "memory_bytes": 16 * 1024**3, "compute_units": 5}
    state.write_text(json.dumps({"version": 1, "made": [part], "removed": [], "modes": {}, "seq": 1,
                                 "intents": [{"op": "create", "pid": os.getpid(), "ids": [part["id"]], "mode": None}]}))
    backend = SimPlugin().open(BackendConfig(options={"profile": "ascend-910b-8", "state": str(state)}))
    assert [p.id for p in backend.partitions()] == [part["id"]]
    assert json.loads(state.read_text())["intents"] != []
