"""The fake-library scenarios the conformance kit certifies ``amd`` on (a test facility).

amdsmi is an in-process library read field by field: a cold ``inventory()`` of 8 MI300X is
about 8 x 50 amdsmi calls, 8 x 12 pyrsmi calls and 28 link queries (~530); in CPX mode each of
the 64 partition handles is read (~3.5k).  Each call takes microseconds, not a process start, so
the budgets are larger than the kit's default, which is sized for CLI tools.
``driver-not-live`` and ``no-library`` cannot open, by design.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AMDSMI_BUDGET", "AMDSMI_CPX_BUDGET", "CONFORMANCE_SCENARIOS"]

AMDSMI_BUDGET = 800
AMDSMI_CPX_BUDGET = 4000

_SCENARIOS = {
    "mi300x-8": ("8x MI300X, one xGMI hive.", AMDSMI_BUDGET),
    "mi300x-8-cpx": ("8x MI300X in CPX/NPS4 mode: 64 partition handles.", AMDSMI_CPX_BUDGET),
    "amdsmi-absent": ("pyrsmi only: topology from sysfs and the core.", AMDSMI_BUDGET),
    "ras-uncorrectable": ("An uncorrectable RAS error on one GPU.", AMDSMI_BUDGET),
    "bad-pages": ("Retired bad pages over the threshold on one GPU.", AMDSMI_BUDGET),
    "radeon-rx7800xt": ("A consumer Radeon RX 7800 XT: no ECC.", AMDSMI_BUDGET),
}


def _oracle(name: str) -> Any:
    """Bus ids and VRAM totals read from the fake's scenario data, not through the backend."""
    from accel.conformance import Oracle
    from accel.model import Device

    class FakeDataOracle(Oracle):
        def _gpus(self) -> list[Any]:
            from .testing import scenario

            return list(scenario(name).gpus)

        def pci_bus_ids(self) -> frozenset[str] | None:
            return frozenset(g.bus_id.lower() for g in self._gpus()) or None

        def memory_total_bytes(self, device: Device) -> int | None:
            bus = device.pci.bus_id if device.pci else None
            return next((int(g.vram_total) for g in self._gpus() if g.bus_id.lower() == bus), None)

    return FakeDataOracle()


def _scenarios() -> dict[str, Any]:
    from accel.conformance import Scenario

    return {
        name: Scenario(name=name, options={"scenario": name}, snapshot_budget=budget, description=text,
                       oracle=_oracle(name))
        for name, (text, budget) in _SCENARIOS.items()
    }


CONFORMANCE_SCENARIOS: dict[str, Any] = _scenarios()
