"""A fake ``libamd_smi.so`` at the ctypes boundary, for pyrsmi's ctypes mode.

pyrsmi calls ``rocm_lib.<C symbol>(...)`` with ctypes arguments and reads results back through
``byref`` pointers.  This object provides those symbols as *plain functions stored as instance
attributes* (never bound methods): each returns an ``amdsmi_status_t`` int and writes outputs
through ``byref(x)._obj``.  A symbol that is missing raises ``AttributeError``, as a
``CDLL`` does for a symbol the library lacks (pyrsmi swallows it into ``-1`` for most calls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._fake_amdsmi import STATUS
from ._profiles import FakeGpu, FakeHost

__all__ = ["FakeAmdSmiLib"]

_HANDLE_BASE = 0x2000


def _bdf_uint(bus_id: str) -> int:
    # amdsmi_bdf_t: function 3 bits, device 5, bus 8, domain 48 (from bit 16).
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16) << 16) | (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)


def _index(handle: Any) -> int:
    return int(handle if isinstance(handle, int) else getattr(handle, "value", None) or 0) - _HANDLE_BASE


def _asic_info(gpu: FakeGpu, pinfo: Any) -> int:
    info = pinfo._obj
    info.market_name = gpu.market_name.encode()
    info.vendor_id = 0x1002
    info.device_id = gpu.device_id
    info.rev_id = gpu.rev_id
    info.asic_serial = f"0x{gpu.unique_id:016X}".encode()
    info.num_of_compute_units = gpu.compute_units
    info.subsystem_id = gpu.subsystem_id
    return _OK


def _device_bdf(gpu: FakeGpu, pbdf: Any) -> int:
    pbdf._obj.as_uint = _bdf_uint(gpu.bus_id)
    return _OK


def _device_uuid(gpu: FakeGpu, plen: Any, buf: Any) -> int:
    if not gpu.uuid:
        return STATUS["NOT_SUPPORTED"]
    buf.value = gpu.uuid.encode()
    return _OK


def _activity(gpu: FakeGpu, pusage: Any) -> int:
    pusage._obj.gfx_activity = gpu.gfx_activity
    pusage._obj.umc_activity = gpu.umc_activity
    pusage._obj.mm_activity = 0xFFFF
    return _OK


def _memory_total(gpu: FakeGpu, mem_type: Any, ptotal: Any) -> int:
    ptotal._obj.value = gpu.vram_total if mem_type in (0, 1) else 512 * 2**30
    return _OK


def _memory_usage(gpu: FakeGpu, mem_type: Any, pused: Any) -> int:
    pused._obj.value = gpu.vram_used if mem_type in (0, 1) else 15 * 2**20
    return _OK


def _power_info(gpu: FakeGpu, ppower: Any) -> int:
    ppower._obj.socket_power = gpu.power_w
    ppower._obj.current_socket_power = gpu.power_w
    ppower._obj.power_limit = gpu.power_cap_w
    return _OK


def _pcie_info(gpu: FakeGpu, pinfo: Any) -> int:
    info = pinfo._obj
    info.pcie_static.max_pcie_width = gpu.pcie_width
    info.pcie_static.max_pcie_speed = 32000
    info.pcie_static.pcie_interface_version = gpu.pcie_gen
    info.pcie_metric.pcie_width = gpu.pcie_width
    info.pcie_metric.pcie_speed = 32000
    return _OK


_OK = STATUS["SUCCESS"]

#: The per-handle symbols: C name -> what it does for a GPU that is found.  An unknown handle
#: answers INVAL (the UUID query NOT_SUPPORTED), a lost GPU NOT_FOUND.
_PER_HANDLE: dict[str, Callable[..., int]] = {
    "amdsmi_get_gpu_asic_info": _asic_info,
    "amdsmi_get_gpu_device_bdf": _device_bdf,
    "amdsmi_get_gpu_device_uuid": _device_uuid,
    "amdsmi_get_gpu_activity": _activity,
    "amdsmi_get_gpu_memory_total": _memory_total,
    "amdsmi_get_gpu_memory_usage": _memory_usage,
    "amdsmi_get_power_info": _power_info,
    "amdsmi_get_pcie_info": _pcie_info,
}


class FakeAmdSmiLib:
    """``rocml.rocm_lib`` stand-in driven by a :class:`FakeHost` (SPX handles only)."""

    def __init__(self, host: FakeHost) -> None:
        self.host = host
        self.calls: list[str] = []
        self.inits = 0
        #: GPU indices that fell off the bus: every per-handle call answers NOT_FOUND.
        self.lost: set[int] = set()
        for name, make in (("amdsmi_init", self._init), ("amdsmi_shut_down", self._shut_down),
                           ("amdsmi_status_code_to_string", self._status_string),
                           ("amdsmi_get_processor_handles_by_type", self._handles)):
            setattr(self, name, make())
        for name, fn in _PER_HANDLE.items():
            setattr(self, name, self._per_handle(name, fn))

    # Each symbol is a plain function stored on the instance (see the module docstring).
    def _init(self) -> Callable[..., int]:
        def amdsmi_init(flags: Any) -> int:
            self.calls.append("amdsmi_init")
            if not self.host.driver_live:
                return STATUS["DRIVER_NOT_LOADED"]
            self.inits += 1
            return _OK

        return amdsmi_init

    def _shut_down(self) -> Callable[..., int]:
        def amdsmi_shut_down() -> int:
            self.calls.append("amdsmi_shut_down")
            self.inits = max(self.inits - 1, 0)
            return _OK

        return amdsmi_shut_down

    def _status_string(self) -> Callable[..., int]:
        def amdsmi_status_code_to_string(code: Any, pstr: Any) -> int:
            pstr._obj.value = f"AMDSMI_STATUS_{code}".encode()
            return _OK

        return amdsmi_status_code_to_string

    def _handles(self) -> Callable[..., int]:
        gpus = list(self.host.gpus)

        def amdsmi_get_processor_handles_by_type(ptype: Any, handles: Any, pcount: Any) -> int:
            self.calls.append("amdsmi_get_processor_handles_by_type")
            if self.inits <= 0:
                return STATUS["NOT_INIT"]
            if handles is None:
                pcount._obj.value = len(gpus)
                return _OK
            for i in range(min(pcount._obj.value, len(gpus))):
                handles[i] = _HANDLE_BASE + i
            return _OK

        return amdsmi_get_processor_handles_by_type

    def _per_handle(self, name: str, fn: Callable[..., int]) -> Callable[..., int]:
        gpus = list(self.host.gpus)
        unknown = STATUS["NOT_SUPPORTED"] if fn is _device_uuid else STATUS["INVAL"]

        def call(handle: Any, *args: Any) -> int:
            self.calls.append(name)
            idx = _index(handle)
            # A lost GPU keeps its handle (enumerated at init); the library no longer finds it.
            if idx in self.lost:
                return STATUS["NOT_FOUND"]
            if not 0 <= idx < len(gpus):
                return unknown
            return int(fn(gpus[idx], *args))

        call.__name__ = name
        return call

    def lose_gpu(self, index: int) -> None:
        """GPU ``index`` falls off the bus: its handle's calls answer ``AMDSMI_STATUS_NOT_FOUND``."""
        if not 0 <= index < len(self.host.gpus):
            raise IndexError(f"no fake GPU {index}")
        self.lost.add(index)
