"""Scenarios the accel conformance kit certifies this plugin on (``CONFORMANCE_SCENARIOS``).

``python -m accel.conformance.matrix --all`` finds this module next to the entry-point module
and runs the kit once per scenario.  This is the only module that imports the kit.
"""

from __future__ import annotations

import json
from importlib import resources

from accel.conformance import Oracle, Scenario
from accel.model import Device

__all__ = ["CONFORMANCE_SCENARIOS"]


class RecordingOracle(Oracle):
    """Independent truth: the recorded JSON read directly, not through the backend's parser."""

    def __init__(self, scenario: str) -> None:
        files = resources.files(__package__ or "accel_backend_example").joinpath("scenarios", scenario)
        self._gpus = json.loads(files.joinpath("example-smi-query.txt").read_text(encoding="utf-8"))["gpus"]

    def pci_bus_ids(self) -> frozenset[str] | None:
        return frozenset(g["bus_id"].lower() for g in self._gpus)

    def memory_total_bytes(self, device: Device) -> int | None:
        return next((int(g["memory_total_mib"]) * 2**20 for g in self._gpus if g["uuid"] == device.uuid), None)


# Lost devices and unreadable health are simulated over the replay by the toolkit's backend;
# the two-gpu-lost and two-gpu-nohealth scenarios show how example-smi itself prints them.
CONFORMANCE_SCENARIOS = {
    "two-gpu": Scenario(options={"scenario": "two-gpu"}, oracle=RecordingOracle("two-gpu"),
                        description="two Example X1 boards, recorded example-smi output"),
}
