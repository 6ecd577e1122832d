"""The replay scenarios the conformance kit certifies ``mthreads`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_PACKAGE = __package__ or "accel.plugins.mthreads"
_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "s5000-8": ("MTT S5000 x8, mthreads-gmi 2.4.1 table; MTLink not enabled.", {}),
    "s4000-iommu": ("MTT S4000 with IOMMU misconfigured: used above total, clamped with a condition.", {}),
    "s5000-query-json": (
        "MTT S5000, mthreads-gmi -q -j (3.3.5) only: vendor UUIDs, units inside strings.",
        {"inventory.ids-match-pci": "the sample is abridged upstream: GPU 1 has no PCI block"},
    ),
    "s5000-8-faults": (
        "The s5000-8 mthreads-gmi sample plus what only MTML sees (native.toml, made up): DRAM ECC "
        "counters on every GPU, uncorrectable errors on GPU 5.",
        {},
    ),
}

#: Both paths: the CLI replays and MTML's fake of each (``<name>@native``).
CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **conformance_scenarios(_PACKAGE, _NOTES),
    **native_scenarios(_PACKAGE, _NOTES),
}
