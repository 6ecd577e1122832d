"""What a vendor may plug into the suite besides the backend: an oracle and fault hooks.

* :class:`Oracle`: an independent reading of the truth (sysfs, the vendor CLI, a spec sheet)
  that does **not** go through the plugin's own code path.  Override only the methods you can
  answer; the default ``None`` means "cannot tell", and the rows that need it skip with a reason.
* :class:`FaultInjector`: a backend (usually a simulator or a fake vendor library) that can break
  one of its devices on request, so the suite can check that a lost device stays isolated.
  A suite may instead set ``lose_device`` / ``make_health_unreadable`` to plain functions.
* :class:`ReportsCost`: a backend that counts its own vendor library calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from accel.model import Device
from accel.sysfs import scan_pci

__all__ = ["Fault", "FaultInjector", "Oracle", "ReportsCost", "SysfsOracle"]


class Fault(StrEnum):
    """Faults the suite asks a :class:`FaultInjector` for."""

    #: The device falls off the bus (NVML ``GPU_IS_LOST``, XID 79, ``npu-smi`` no longer lists it).
    DEVICE_LOST = "device_lost"
    #: Health queries for the device answer "not supported" (NVML ``NOT_SUPPORTED``).
    HEALTH_NOT_SUPPORTED = "health_not_supported"


@runtime_checkable
class FaultInjector(Protocol):
    """A backend that can inject a fault into one of its own devices, for conformance tests."""

    def inject_fault(self, fault: Fault, device_id: str) -> None:
        """Make ``device_id`` behave as under ``fault`` from now on (raise NotSupportedError if unknown)."""
        ...


@runtime_checkable
class ReportsCost(Protocol):
    """A backend that counts the vendor library calls it made (cumulative, never reset)."""

    @property
    def vendor_call_count(self) -> int: ...


class Oracle:
    """Independent truth for the rows that compare against one.  Every answer may be ``None``.

    Subclass it and override what you can read without the plugin: the bus ids from sysfs
    (:class:`SysfsOracle` does that), memory totals from the vendor CLI, a spec sheet...
    """

    def device_ids(self) -> frozenset[str] | None:
        """The ids the backend should report, when the oracle can compute them."""
        return None

    def pci_bus_ids(self) -> frozenset[str] | None:
        """Canonical bus ids (``dddd:bb:dd.f``) of the devices the backend should report."""
        return None

    def memory_total_bytes(self, device: Device) -> int | None:
        """Total memory of ``device`` in bytes, read independently (``None``: cannot tell)."""
        return None


class SysfsOracle(Oracle):
    """Bus ids from ``/sys/bus/pci/devices``, filtered by PCI vendor id and class prefix.

    ``SysfsOracle(vendor_ids=["10de"], class_prefixes=["0302", "0300"])`` is the NVIDIA oracle;
    point ``root`` at a :class:`accel.testing.FakeSysfs` tree in tests.
    """

    def __init__(
        self,
        *,
        vendor_ids: Iterable[str],
        class_prefixes: Iterable[str] = ("03", "12"),
        root: Path = Path("/sys"),
    ) -> None:
        self.vendor_ids = tuple(vendor_ids)
        self.class_prefixes = tuple(class_prefixes)
        self.root = Path(root)

    def pci_bus_ids(self) -> frozenset[str] | None:
        found = scan_pci(self.root, vendor_ids=self.vendor_ids, class_prefixes=self.class_prefixes)
        return frozenset(fn.bus_id for fn in found if not fn.is_virtual_function) or None
