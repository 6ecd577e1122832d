"""The scenarios the accel conformance kit certifies ``gaudi`` on, each with an oracle that
reads the recorded ``hl-smi`` text directly (not through the plugin's parser)."""

from __future__ import annotations

import re
from importlib import resources

from accel.conformance import Oracle, Scenario
from accel.model import Device

__all__ = ["CONFORMANCE_SCENARIOS"]

# "|   0  HL-225   N/A  | 0000:b3:00.0     N/A |" then the next line's "768MiB / 98304MiB".
_UNIT = re.compile(r"\|\s*\d+\s+\S+.*?\|\s*([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s.*\n.*?/\s*(\d+)MiB")


class RecordedTable(Oracle):
    """Bus ids and memory totals as the recorded table prints them."""

    def __init__(self, scenario: str, sample: str) -> None:
        text = resources.files(__package__ or "accel_gaudi").joinpath("scenarios", scenario, sample).read_text()
        self.totals = {bus: int(mib) * 2**20 for bus, mib in _UNIT.findall(text)}

    def pci_bus_ids(self) -> frozenset[str] | None:
        return frozenset(self.totals)

    def memory_total_bytes(self, device: Device) -> int | None:
        return self.totals.get(device.pci.bus_id) if device.pci else None


CONFORMANCE_SCENARIOS = {
    name: Scenario(options={"scenario": name}, oracle=RecordedTable(name, sample), description=text)
    for name, sample, text in (
        ("hl225-8", "hl-smi-1.16.0-hl225x8.txt", "8x HL-225 (Gaudi 2), hl-smi 1.16.0, one process row unclosed"),
        ("hl325l-8", "hl-smi-1.21.0-hl325lx8.txt", "8x HL-325L (Gaudi 3), hl-smi 1.21.0, Uncor-Events header"),
    )
}
