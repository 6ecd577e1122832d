"""The fake NVML's calling convention: what every call checks before it answers.

:class:`FakeCore` holds the fake driver's state that is not a device's (init reference count,
the handle table, event sets, the call counter) and the checks a real call goes through: counted,
refused before ``nvmlInit``, FunctionNotFound for symbols the scenario's driver lacks, GpuIsLost,
the per-device error table, NOT_SUPPORTED on MIG handles, and the C view of pointer arguments
(:meth:`FakeCore._pointee`, :meth:`FakeCore._out_struct`).  The pynvml-shaped functions live in
the ``_fake_*`` modules by job and are gathered on :class:`._fake.FakeNVML`.
"""

from __future__ import annotations

import ctypes
from collections import Counter, deque
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .._nvml import load_pynvml
from ._profiles import GpuSpec, MigSlot, Scenario, get_scenario

if TYPE_CHECKING:
    from ._fake_mig import MigState

__all__ = ["FakeCore", "nvml_bus_id"]

#: Calls a GPU answers even after falling off the bus "after identity" (cached by the driver).
_IDENTITY = frozenset({
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetSerial", "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetIndex", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetBrand",
    "nvmlDeviceGetArchitecture", "nvmlDeviceGetCudaComputeCapability",
    # The framebuffer size is learned at enumeration too; the "lost after identity" scenario
    # models a GPU that drops off the bus right after the first inventory read it.
    "nvmlDeviceGetMemoryInfo",
})
#: What a MIG device handle answers; everything else is NOT_SUPPORTED on a MIG handle.
_MIG_OK = frozenset({
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetAttributes", "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", "nvmlDeviceGetIndex",
    "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetFieldValues",
})


def nvml_bus_id(bus_id: str) -> str:
    """``0000:18:00.0`` -> NVML's ``00000000:18:00.0`` (8 domain digits, upper case)."""
    dom, bus, rest = bus_id.split(":")
    return f"{int(dom, 16):08X}:{bus.upper()}:{rest.upper()}"


class FakeCore:
    """The state and the checks every fake call shares (see the module docstring)."""

    #: The MIG objects of the fake driver (set by :class:`._fake.FakeNVML`).
    _migs: MigState

    def __init__(self, scenario: Scenario | str) -> None:
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.pynvml: ModuleType = load_pynvml()
        self.calls: Counter[str] = Counter()
        self._refcount = 0
        self._loaded = False
        self._fail: Callable[[], BaseException] | None = None
        # One buffer per GPU (and MIG slot, :class:`MigState`): a handle points at it, its address
        # identifies it.
        self._gpu_bufs = [(ctypes.c_int * 1)(i) for i in range(len(self.scenario.gpus))]
        self._addr: dict[int, tuple[int, int | None]] = {
            ctypes.addressof(b): (i, None) for i, b in enumerate(self._gpu_bufs)
        }
        self._event_sets: dict[int, dict[int, int]] = {}
        self._event_bufs: list[Any] = []
        self._events = deque(self.scenario.events)
        self._clock_us = 1_700_000_000_000_000
        self._installed: dict[str, Any] = {}

    def _err(self, code: int) -> BaseException:
        return self.pynvml.NVMLError(code)  # type: ignore[no-any-return]

    def _enter(self, fn: str, handle: Any = None) -> tuple[GpuSpec | None, MigSlot | None, int]:
        self.calls[fn] += 1
        if self._fail is not None:
            raise self._fail()
        if not self._loaded or self._refcount == 0:
            raise self._err(1)
        sc = self.scenario
        if fn in sc.missing:
            raise self.pynvml.NVMLError_FunctionNotFound()
        if fn in sc.library_mismatch:
            raise self.pynvml.NVMLLibraryMismatchError(f"Unversioned function {fn} called")
        if handle is None:
            return None, None, -1
        index, slot = self._resolve(handle)
        gpu = sc.gpus[index]
        if gpu.lost or (gpu.lost_after_identity and fn not in _IDENTITY):
            raise self._err(15)
        if fn in gpu.errors:
            raise self._err(gpu.errors[fn])
        mig = None
        if slot is not None:
            mig = gpu.mig_slots[slot]
            if fn not in _MIG_OK:
                raise self._err(3)
        elif fn in gpu.not_supported:
            raise self._err(3)
        return gpu, mig, index

    def _resolve(self, handle: Any) -> tuple[int, int | None]:
        if not isinstance(handle, self.pynvml.c_nvmlDevice_t):
            raise ctypes.ArgumentError(f"argument 1: wrong type {type(handle).__name__}")
        addr = ctypes.cast(handle, ctypes.c_void_p).value
        if addr is None or addr not in self._addr:
            raise self._err(2)
        return self._addr[addr]

    def _handle(self, index: int, slot: int | None = None) -> Any:
        buf = self._gpu_bufs[index] if slot is None else self._migs.buffer(index, slot)
        return ctypes.cast(buf, self.pynvml.c_nvmlDevice_t)

    def _pci(self, bus_id: str, device_id: int = 0, subsystem: int = 0) -> Any:
        info = self.pynvml.nvmlPciInfo_t()
        dom, bus, rest = bus_id.split(":")
        dev, _fn = rest.split(".")
        info.busId = nvml_bus_id(bus_id).encode()
        info.busIdLegacy = f"{int(dom, 16):04X}:{bus.upper()}:{rest.upper()}".encode()
        info.domain, info.bus, info.device = int(dom, 16), int(bus, 16), int(dev, 16)
        info.pciDeviceId = (device_id << 16) | 0x10DE
        info.pciSubSystemId = subsystem
        return info

    def _gpu(self, fn: str, handle: Any) -> GpuSpec:
        gpu, _mig, _i = self._enter(fn, handle)
        assert gpu is not None
        return gpu

    def _pointee(self, fn: str, pos: int, arg: Any) -> tuple[int, int]:
        """(address, size in bytes) of what a pointer argument forwarded to C points at.

        What ctypes would hand the C function: ``byref(x)``, ``pointer(x)`` and arrays are
        pointers; ``None`` is NULL (INVALID_ARGUMENT, as NVML answers); a struct or an int passed
        by value is not a pointer (raised by the caller as the driver's answer); anything else
        ctypes cannot convert raises ``ctypes.ArgumentError`` as a real call would.
        """
        if arg is None or (type(arg) is int and arg == 0):  # NULL
            raise self._err(2)
        if type(arg).__name__ == "CArgObject":  # ctypes.byref(obj): ``_obj`` is the referent
            obj = arg._obj
            return ctypes.addressof(obj), ctypes.sizeof(obj)
        if isinstance(arg, ctypes._Pointer):
            addr = ctypes.cast(arg, ctypes.c_void_p).value
            if not addr:
                raise self._err(2)
            return addr, ctypes.sizeof(arg._type_)
        if isinstance(arg, ctypes.Array):
            return ctypes.addressof(arg), ctypes.sizeof(arg)
        if isinstance(arg, ctypes.Structure | ctypes.Union | ctypes._SimpleCData | int):
            return -1, 0
        raise ctypes.ArgumentError(f"argument {pos}: TypeError: Don't know how to convert parameter {pos}")

    def _out_struct(self, fn: str, pos: int, arg: Any, *, versions: dict[int, Any] | None = None,
                    struct: Any = None) -> Any:
        """The struct a C out-parameter points at, checked as the driver would check it.

        ``versions`` (versioned structs): the first ``unsigned int`` must be one of the versions
        the driver knows, else ARGUMENT_VERSION_MISMATCH, which is also the answer for a struct
        passed by value (the driver reads its version through a garbage pointer: the best case).
        A buffer smaller than the struct the version names is INVALID_ARGUMENT (the real driver
        would write past it).  ``struct`` (unversioned): the buffer must hold one such struct.
        """
        addr, size = self._pointee(fn, pos, arg)
        if versions is not None:
            if addr < 0:
                raise self._err(25)
            if size < 4:
                raise self._err(2)
            version = ctypes.c_uint.from_address(addr).value
            if version not in versions:
                raise self._err(25)
            target = versions[version]
        else:
            if addr < 0:
                raise self._err(2)
            target = struct
        if size < ctypes.sizeof(target):
            raise self._err(2)
        return target.from_address(addr)

    def _counted(self, fn: str, check: Callable[[], Any]) -> Any:
        """Run an argument check before :meth:`_enter`; a call it refuses still counts."""
        try:
            return check()
        except BaseException:
            self.calls[fn] += 1
            raise

    def _out_uint(self, fn: str, pos: int, arg: Any) -> Any:
        """An ``unsigned int *`` out-parameter (``byref(c_uint())``)."""
        addr, size = self._pointee(fn, pos, arg)
        if addr < 0 or size < ctypes.sizeof(ctypes.c_uint):
            raise self._err(2)
        return ctypes.c_uint.from_address(addr)

