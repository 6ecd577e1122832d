"""The kit's scenarios for ``ppu``, each with an oracle reading its device state (not via the plugin)."""

from __future__ import annotations

import tomllib
from importlib import resources

from accel.conformance import Oracle, Scenario
from accel.model import Device

__all__ = ["CONFORMANCE_SCENARIOS"]


class RecordedState(Oracle):
    def __init__(self, scenario: str) -> None:
        path = resources.files(__package__ or "accel_ppu").joinpath("scenarios", scenario, "native.toml")
        state = tomllib.loads(path.read_text())
        total = state.get("defaults", {}).get("memory_total_mib")
        self.totals = {d["bus_id"][4:].lower(): d.get("memory_total_mib", total) << 20 for d in state["device"]}

    def pci_bus_ids(self) -> frozenset[str] | None:
        return frozenset(self.totals)

    def memory_total_bytes(self, device: Device) -> int | None:
        return self.totals.get(device.pci.bus_id) if device.pci else None


CONFORMANCE_SCENARIOS = {
    "ppu-8": Scenario(
        options={"scenario": "ppu-8", "read": "native"},
        oracle=RecordedState("ppu-8"),
        description="8x PPU-ZW810E over the fake libhgml, GPU 3 counting uncorrectable ECC errors",
    )
}
