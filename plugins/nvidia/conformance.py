"""The fake-NVML scenarios the conformance kit certifies ``nvidia`` on (a test facility).

NVML is an in-process library: a cold ``inventory()`` of a DGX H100 reads identity, 18 NVLinks
and pair topology once (about 1.1k calls of microseconds each; see ``benchmarks/nvml_calls``),
so the snapshot budget is larger than the kit's default, which is sized for CLI tools that
start one process per call.  The scenarios that start with a lost GPU (``gpu-lost``,
``xid-stream``) or with every GPU unmonitored (``container-no-perm``) contradict the kit's
"lose one device" and NOT_SUPPORTED rows by construction; ``tests/nvidia`` covers them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONFORMANCE_SCENARIOS", "NVML_COLD_BUDGET"]

NVML_COLD_BUDGET = 1500

_SCENARIOS = {
    "h100-nvswitch-8": "DGX H100: 8x H100 80GB HBM3 over NVSwitch, two sockets.",
    "rtx4090-4": "Consumer RTX 4090 x4: no ECC, no MIG, no serial.",
    "a100-mig": "A100-SXM4-80GB in MIG mode with sparse slots.",
    "old-driver-r470": "R470-era driver: no v2 memory, FunctionNotFound fallbacks.",
    "ecc-dbe": "A double-bit ECC error on one GPU.",
    "retired-pending": "Page retirement pending on one GPU.",
    "row-remap-failure": "A row-remap failure on one GPU.",
    "nvlink-replay": "NVLink replay errors on one GPU.",
    "gb200-nvl72-tray": "GB200 NVL72 tray: 4 GPUs in one multi-node NVLink clique (fabric info).",
}


def _oracle(name: str) -> Any:
    """Bus ids and memory totals read from the fake's scenario data, not through the backend."""
    from accel.conformance import Oracle
    from accel.model import Device

    class FakeDataOracle(Oracle):
        def _gpus(self) -> list[Any]:
            from .testing import SCENARIOS  # loads pynvml: only when the kit asks

            return list(SCENARIOS[name]().gpus)

        def pci_bus_ids(self) -> frozenset[str] | None:
            return frozenset(g.bus_id.lower() for g in self._gpus()) or None

        def memory_total_bytes(self, device: Device) -> int | None:
            bus = device.pci.bus_id if device.pci else None
            return next((int(g.memory_total) for g in self._gpus() if g.bus_id.lower() == bus), None)

    return FakeDataOracle()


def _scenarios() -> dict[str, Any]:
    from accel.conformance import Scenario

    return {
        name: Scenario(name=name, options={"scenario": name}, snapshot_budget=NVML_COLD_BUDGET, description=text,
                       oracle=_oracle(name))
        for name, text in _SCENARIOS.items()
    }


CONFORMANCE_SCENARIOS: dict[str, Any] = _scenarios()
