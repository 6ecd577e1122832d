"""Scenarios the accel conformance kit certifies this plugin on (``CONFORMANCE_SCENARIOS``).

``python -m accel.conformance.matrix --all`` finds this module next to the entry-point module
and runs the kit once per scenario.  Keep it as light as the package ``__init__``.
"""

from __future__ import annotations

import json
from pathlib import Path

from accel.conformance import Fault, Oracle, Scenario
from accel.model import Device
from accel.plugin import BackendConfig

from . import recordings

__all__ = ["CONFORMANCE_SCENARIOS"]

#: Recorded scenarios that show a fault on the first device (how a real failure looked).
_FAULTED = {Fault.DEVICE_LOST: "two-gpu-lost", Fault.HEALTH_NOT_SUPPORTED: "two-gpu-nohealth"}


class RecordingOracle(Oracle):
    """Independent truth: the recorded JSON read directly, not through the backend's parser."""

    def __init__(self, scenario: str) -> None:
        raw = json.loads((recordings(scenario) / "example-smi-query.txt").read_text(encoding="utf-8"))
        self._gpus = raw["gpus"]

    def pci_bus_ids(self) -> frozenset[str] | None:
        return frozenset(g["bus_id"].lower() for g in self._gpus)

    def memory_total_bytes(self, device: Device) -> int | None:
        for g in self._gpus:
            if g["uuid"] == device.uuid:
                return int(g["memory_total_mib"]) * 2**20
        return None


def _faulted(tmp_path: Path, fault: Fault, position: int) -> BackendConfig | None:
    scenario = _FAULTED.get(fault)
    return BackendConfig(options={"scenario": scenario}) if scenario and position == 0 else None


CONFORMANCE_SCENARIOS = {
    "two-gpu": Scenario(options={"scenario": "two-gpu"}, faulted_config=_faulted, oracle=RecordingOracle("two-gpu"),
                        description="two Example X1 boards, recorded example-smi output"),
}
