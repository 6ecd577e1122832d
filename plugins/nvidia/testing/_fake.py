"""A faithful fake of the ``pynvml`` module (nvidia-ml-py), driven by a :class:`Scenario`.

The fake has the same function names and return shapes as the ``pynvml`` wrappers and reuses the
binding's real error classes and ctypes structs, so ``except pynvml.NVMLError_NotSupported`` in
production code catches what the fake raises.  Faithful quirks:

* every call before ``nvmlInit`` (or after the balancing ``nvmlShutdown``) raises
  ``NVMLError_Uninitialized``; init/shutdown are reference-counted and extra shutdowns succeed;
* device handles are real ``c_nvmlDevice_t`` pointers, a new (unhashable, identity-compared)
  object on every lookup;
* ``nvmlDeviceGetMemoryInfo(h)`` (v1) reports ``used`` including the reserved memory, as R510+
  drivers do; ``version=nvmlMemory_v2`` gives ``reserved`` separately;
* NOT_SUPPORTED per device profile, FunctionNotFound for symbols an old driver lacks,
  ``NVMLLibraryMismatchError`` from the unversioned process wrappers, NoPermission, GpuIsLost
  (``lose_gpu``) including from ``GetHandleByUUID`` for *any* GPU while one is lost;
* ``nvmlEventSetWait`` pops scripted events and raises ``NVMLError_Timeout`` without sleeping;
* ``nvmlDeviceGetFieldValues`` reports per-field failures in ``nvmlReturn`` and never raises
  for them; ``nvmlDeviceGetMigDeviceHandleByIndex`` raises NotFound for empty (sparse) slots;
* ``nvmlDeviceIsMigDeviceHandle`` returns a ``c_uint``; ``nvmlDeviceGetP2PStatus`` rejects a
  non-int index as ctypes would (catching the ``NVML_P2P_CAPS_INDEX_READ == (0,)`` bug);
* out-parameters the real wrapper forwards to C unchanged (``nvmlDeviceGetGpuFabricInfoV``,
  ``nvmlDeviceGetGpuFabricInfo``, ``nvmlDeviceGetGpuInstancePossiblePlacements``) are checked
  as the C function sees them: a struct by value or a versioned struct without a known
  ``.version`` is ARGUMENT_VERSION_MISMATCH, NULL or a too-small buffer INVALID_ARGUMENT, an
  object ctypes cannot convert ``ctypes.ArgumentError``; wrapper-level ``version=`` arguments
  (``GetMemoryInfo``, ``GetTemperatureV``, ``GetGpuInstanceProfileInfo``) answer as the wrapper.

:attr:`FakeNVML.calls` counts calls per function: the cost benchmark reads it.
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from .._nvml import load_pynvml
from ._profiles import GpuSpec, MigSlot, Scenario, get_scenario

__all__ = ["FakeNVML"]

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
_FIELD_UINT = 1
_FIELD_ULL = 3
#: Pure-Python helpers of the binding (no driver call): :meth:`FakeNVML.install` leaves them alone.
_PURE_HELPERS = frozenset({"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"})


def _nvml_bus_id(bus_id: str) -> str:
    """``0000:18:00.0`` -> NVML's ``00000000:18:00.0`` (8 domain digits, upper case)."""
    dom, bus, rest = bus_id.split(":")
    return f"{int(dom, 16):08X}:{bus.upper()}:{rest.upper()}"


def _cpus(cpulist: str) -> list[int]:
    out: list[int] = []
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


class FakeNVML:
    """A module-like fake of ``pynvml`` for one :class:`Scenario` (or scenario name).

    Pass it as the library object (``Nvml(lib=fake)``) or :meth:`install` it over the real
    module's functions.  Names the fake does not define fall through to the real module for
    constants, structs and error classes; an ``nvml*`` function it does not implement raises
    ``NVMLError_FunctionNotFound``, as a driver without the symbol would.
    """

    def __init__(self, scenario: Scenario | str) -> None:
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.pynvml: ModuleType = load_pynvml()
        self.calls: Counter[str] = Counter()
        self._refcount = 0
        self._loaded = False
        self._fail: Callable[[], BaseException] | None = None
        # One buffer per GPU and MIG slot: a handle points at it, its address identifies it.
        self._gpu_bufs = [(ctypes.c_int * 1)(i) for i in range(len(self.scenario.gpus))]
        self._addr: dict[int, tuple[int, int | None]] = {
            ctypes.addressof(b): (i, None) for i, b in enumerate(self._gpu_bufs)
        }
        self._mig_bufs: dict[tuple[int, int], Any] = {}
        for i, gpu in enumerate(self.scenario.gpus):
            for slot in gpu.mig_slots:
                buf = (ctypes.c_int * 1)(1000 * (i + 1) + slot)
                self._mig_bufs[(i, slot)] = buf
                self._addr[ctypes.addressof(buf)] = (i, slot)
        self._gi_bufs: list[Any] = []
        self._gi_addr: dict[int, tuple[int, MigSlot]] = {}
        self._event_sets: dict[int, dict[int, int]] = {}
        self._event_bufs: list[Any] = []
        self._events = deque(self.scenario.events)
        self._clock_us = 1_700_000_000_000_000
        self._installed: dict[str, Any] = {}

    # -- module-like behaviour ----------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name.startswith("nvml") and callable(getattr(self.pynvml, name, None)) and name[4:5].isupper():
            def missing(*_args: Any, **_kwargs: Any) -> Any:
                self.calls[name] += 1
                raise self.pynvml.NVMLError_FunctionNotFound()
            return missing
        return getattr(self.pynvml, name)

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return {n: getattr(self, n) for n in dir(type(self)) if n.startswith("nvml") and n[4:5].isupper()}

    def install(self) -> FakeNVML:
        """Replace every ``nvml*`` function of the real ``pynvml`` module; :meth:`uninstall` undoes it."""
        if self._installed:
            return self
        mine = self._functions()
        for name in dir(self.pynvml):
            if not (name.startswith("nvml") and name[4:5].isupper()) or name in _PURE_HELPERS:
                continue
            orig = getattr(self.pynvml, name)
            if not callable(orig) or isinstance(orig, type):
                continue
            self._installed[name] = orig
            setattr(self.pynvml, name, mine.get(name) or self.__getattr__(name))
        return self

    def uninstall(self) -> None:
        for name, orig in self._installed.items():
            setattr(self.pynvml, name, orig)
        self._installed.clear()

    @contextmanager
    def installed(self) -> Iterator[FakeNVML]:
        self.install()
        try:
            yield self
        finally:
            self.uninstall()

    # -- fault controls -----------------------------------------------------------------------
    def lose_gpu(self, index: int) -> None:
        """GPU ``index`` falls off the bus now: GpuIsLost from everything that touches it."""
        self.scenario.gpus[index].lost = True

    def make_health_unsupported(self, index: int) -> None:
        """Health queries of GPU ``index`` answer NOT_SUPPORTED from now on (fields included)."""
        gpu = self.scenario.gpus[index]
        gpu.not_supported |= {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
                              "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature", "nvmlDeviceGetRemappedRows",
                              "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages",
                              "nvmlDeviceGetRetiredPagesPendingStatus"}
        for fid in (3, 4, 5, 6, 29, 30, 31, 38, 52, 59, 142, 143, 144, 145, 161, 162, 163, 165, 230):
            gpu.errors[f"field:{fid}"] = 3

    def fail_all(self, code: int | None = None, exc: Callable[[], BaseException] | None = None) -> None:
        """Make every call raise ``NVMLError(code)`` (or ``exc()``); ``fail_all()`` clears it."""
        if exc is not None:
            self._fail = exc
        elif code is not None:
            self._fail = lambda: self.pynvml.NVMLError(code)
        else:
            self._fail = None

    def push_event(self, gpu: int, xid: int, *, gi_id: int = 0xFFFFFFFF, ci_id: int = 0xFFFFFFFF) -> None:
        from ._profiles import EventSpec

        self._events.append(EventSpec(gpu=gpu, xid=xid, gi_id=gi_id, ci_id=ci_id))

    def reset_calls(self) -> None:
        self.calls.clear()

    @property
    def refcount(self) -> int:
        return self._refcount

    # -- machinery ----------------------------------------------------------------------------
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
        buf = self._gpu_bufs[index] if slot is None else self._mig_bufs[(index, slot)]
        return ctypes.cast(buf, self.pynvml.c_nvmlDevice_t)

    def _pci(self, bus_id: str, device_id: int = 0, subsystem: int = 0) -> Any:
        info = self.pynvml.nvmlPciInfo_t()
        dom, bus, rest = bus_id.split(":")
        dev, _fn = rest.split(".")
        info.busId = _nvml_bus_id(bus_id).encode()
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

    # -- init and system ----------------------------------------------------------------------
    def nvmlInitWithFlags(self, flags: int) -> None:
        self.calls["nvmlInitWithFlags"] += 1
        self._init()

    def _init(self) -> None:
        if self._fail is not None:
            raise self._fail()
        code = self.scenario.init_error
        if code is not None:
            raise self._err(code)
        self._loaded = True
        self._refcount += 1

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        self._init()

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1
        if self._fail is not None:
            raise self._fail()
        if not self._loaded:
            raise self._err(1)
        # nvml.h: no error when shutdown is called more often than init.
        self._refcount = max(0, self._refcount - 1)

    def nvmlErrorString(self, result: int) -> str:
        names = {v: k for k, v in vars(self.pynvml).items() if k.startswith("NVML_ERROR_") and isinstance(v, int)}
        return names.get(result, "Unknown Error")

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.scenario.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return self.scenario.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.scenario.cuda_driver_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.scenario.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.scenario.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.scenario.gpus):
            raise self._err(2)
        gpu = self.scenario.gpus[index]
        if gpu.lost:
            raise self._err(15)
        if "nvmlDeviceGetHandleByIndex" in gpu.errors:
            raise self._err(gpu.errors["nvmlDeviceGetHandleByIndex"])
        return self._handle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        self._enter("nvmlDeviceGetHandleByUUID")
        if any(g.lost for g in self.scenario.gpus):
            # nvml.h: fails with GPU_IS_LOST if *any* GPU is lost.
            raise self._err(15)
        for i, gpu in enumerate(self.scenario.gpus):
            if gpu.uuid == uuid:
                return self._handle(i)
            for slot, mig in gpu.mig_slots.items():
                if mig.uuid == uuid:
                    return self._handle(i, slot)
        raise self._err(6)

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str) -> Any:
        self._enter("nvmlDeviceGetHandleByPciBusId")
        m = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?",
                         pciBusId.strip())
        if not m:
            raise self._err(2)
        want = (int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4) or "0"))
        for i, gpu in enumerate(self.scenario.gpus):
            d, b, rest = gpu.bus_id.split(":")
            dv, f = rest.split(".")
            if (int(d, 16), int(b, 16), int(dv, 16), int(f)) == want:
                if gpu.lost:
                    raise self._err(15)
                return self._handle(i)
        raise self._err(6)

    # -- identity -----------------------------------------------------------------------------
    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        _gpu, _mig, index = self._enter("nvmlDeviceGetIndex", handle)
        return index

    def nvmlDeviceGetName(self, handle: Any) -> str:
        gpu, mig, _ = self._enter("nvmlDeviceGetName", handle)
        assert gpu is not None
        return f"{gpu.name} MIG {mig.profile}" if mig is not None else gpu.name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        gpu, mig, _ = self._enter("nvmlDeviceGetUUID", handle)
        assert gpu is not None
        return mig.uuid if mig is not None else gpu.uuid

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetSerial", handle)
        if gpu.serial is None:
            raise self._err(3)
        return gpu.serial

    def nvmlDeviceGetPciInfo_v3(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetPciInfo_v3", handle)
        return self._pci(gpu.bus_id, gpu.pci_device_id, gpu.pci_subsystem_id)

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetPciInfo", handle)
        return self._pci(gpu.bus_id, gpu.pci_device_id, gpu.pci_subsystem_id)

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        return self._gpu("nvmlDeviceGetCudaComputeCapability", handle).cuda_cc

    def nvmlDeviceGetArchitecture(self, device: Any) -> int:
        return self._gpu("nvmlDeviceGetArchitecture", device).architecture

    def nvmlDeviceGetBrand(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetBrand", handle).brand

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetMinorNumber", handle).minor

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPersistenceMode", handle).persistence

    def nvmlDeviceGetVbiosVersion(self, handle: Any) -> str:
        return self._gpu("nvmlDeviceGetVbiosVersion", handle).vbios

    def nvmlDeviceGetInforomImageVersion(self, handle: Any) -> str:
        gpu = self._gpu("nvmlDeviceGetInforomImageVersion", handle)
        if gpu.inforom is None:
            raise self._err(3)
        return gpu.inforom

    def nvmlDeviceGetNumGpuCores(self, device: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetNumGpuCores", device)
        if gpu.cores is None:
            raise self._err(3)
        return gpu.cores

    # -- memory -------------------------------------------------------------------------------
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        gpu, mig, _ = self._enter("nvmlDeviceGetMemoryInfo", handle)
        assert gpu is not None
        if version:
            if "nvmlDeviceGetMemoryInfo_v2" in self.scenario.missing:
                raise self.pynvml.NVMLError_FunctionNotFound()
            if version != self.pynvml.nvmlMemory_v2:
                raise self._err(25)
        if mig is not None:
            prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
            total, reserved, used = prof.memory_mib * 1024 * 1024, 0, mig.memory_used_bytes
        else:
            if gpu.mig_mode and gpu.mig_mode[0] == 1 and not gpu.mig_privileged:
                raise self._err(4)
            total, reserved, used = gpu.memory_total, gpu.memory_reserved, gpu.memory_used
        if version:
            mem = self.pynvml.c_nvmlMemory_v2_t()
            mem.version, mem.total, mem.reserved = version, total, reserved
            mem.used, mem.free = used, total - reserved - used
            return mem
        mem = self.pynvml.c_nvmlMemory_t()
        # R510+: v1 "used" includes the memory the driver reserves.
        mem.total, mem.used, mem.free = total, used + reserved, total - reserved - used
        return mem

    def nvmlDeviceGetBAR1MemoryInfo(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetBAR1MemoryInfo", handle)
        bar = self.pynvml.c_nvmlBAR1Memory_t()
        bar.bar1Total, bar.bar1Used, bar.bar1Free = gpu.bar1_total, 2 * 1024 * 1024, gpu.bar1_total - 2 * 1024 * 1024
        return bar

    # -- power, thermal, clocks ---------------------------------------------------------------
    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", handle).power_default_mw

    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerManagementLimit", handle).power_default_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", handle).power_default_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        return [gpu.power_min_mw, gpu.power_max_mw]

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", handle).power_usage_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle).energy_mj

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperature", handle)
        if sensor != 0:
            raise self._err(2)
        return gpu.temperature_c

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int | None = None) -> int:
        """``version`` defaults to ``nvmlTemperature_v1``; any other is ARGUMENT_VERSION_MISMATCH (as the wrapper)."""
        if version is not None and version != self.pynvml.nvmlTemperature_v1:
            self.calls["nvmlDeviceGetTemperatureV"] += 1
            raise self._err(25)
        gpu = self._gpu("nvmlDeviceGetTemperatureV", handle)
        if sensor != 0:
            raise self._err(2)
        return gpu.temperature_c

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperatureThreshold", handle)
        if threshold not in gpu.thresholds_c:
            raise self._err(3)
        return gpu.thresholds_c[threshold]

    def nvmlDeviceGetFanSpeed(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetFanSpeed", handle)
        if gpu.fan_percent is None:
            raise self._err(3)
        return gpu.fan_percent

    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetClockInfo", handle)
        if type not in gpu.clocks_mhz:
            raise self._err(2)
        return gpu.clocks_mhz[type]

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, type: int) -> int:
        gpu = self._gpu("nvmlDeviceGetMaxClockInfo", handle)
        if type not in gpu.max_clocks_mhz:
            raise self._err(2)
        return gpu.max_clocks_mhz[type]

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPerformanceState", handle).pstate

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        util = self.pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = gpu.utilization
        return util

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", handle).throttle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", handle).throttle

    # -- PCIe ---------------------------------------------------------------------------------
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", handle).pcie_gen[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width[1]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetMaxPcieLinkWidth", handle).pcie_width[0]

    def nvmlDeviceGetPcieThroughput(self, device: Any, counter: int) -> int:
        gpu = self._gpu("nvmlDeviceGetPcieThroughput", device)
        return gpu.pcie_kbps[counter]

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetPcieReplayCounter", handle).pcie_replay

    # -- ECC, retirement, remapping -----------------------------------------------------------
    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetEccMode", handle)
        if gpu.ecc_mode is None:
            raise self._err(3)
        return list(gpu.ecc_mode)

    def _ecc(self, gpu: GpuSpec, err_type: int, counter: int) -> int:
        key = ("sbe" if err_type == 0 else "dbe") + ("_vol" if counter == 0 else "_agg")
        return gpu.ecc_counts.get(key, 0)

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTotalEccErrors", handle)
        if gpu.ecc_mode is None or gpu.ecc_mode[0] == 0:
            raise self._err(3)
        return self._ecc(gpu, errorType, counterType)

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetRetiredPages", device)
        return list(gpu.retired_sbe if sourceFilter == 0 else gpu.retired_dbe)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        return self._gpu("nvmlDeviceGetRetiredPagesPendingStatus", device).retired_pending

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        gpu = self._gpu("nvmlDeviceGetRemappedRows", device)
        if gpu.mig_mode and gpu.mig_mode[0] == 1:
            raise self._err(3)
        return gpu.remapped

    def _field(self, gpu: GpuSpec, mig: MigSlot | None, fid: int, scope: int) -> tuple[int, int, float | int]:
        """(nvmlReturn, valueType, value) for one field."""
        if fid > self.scenario.max_field_id:
            return 2, 0, 0
        if f"field:{fid}" in gpu.errors:
            return gpu.errors[f"field:{fid}"], 0, 0
        ecc_on = gpu.ecc_mode is not None and gpu.ecc_mode[0] == 1
        links = gpu.nvlinks if "nvmlDeviceGetNvLinkState" not in gpu.not_supported else []
        retire_ok = "nvmlDeviceGetRetiredPages" not in gpu.not_supported
        remap_ok = "nvmlDeviceGetRemappedRows" not in gpu.not_supported and not (
            gpu.mig_mode and gpu.mig_mode[0] == 1)
        ns = (3, 0, 0)
        table: dict[int, Callable[[], tuple[int, int, float | int]]] = {
            3: lambda: (0, _FIELD_ULL, self._ecc(gpu, 0, 0)) if ecc_on else ns,
            4: lambda: (0, _FIELD_ULL, self._ecc(gpu, 1, 0)) if ecc_on else ns,
            5: lambda: (0, _FIELD_ULL, self._ecc(gpu, 0, 1)) if ecc_on else ns,
            6: lambda: (0, _FIELD_ULL, self._ecc(gpu, 1, 1)) if ecc_on else ns,
            29: lambda: (0, _FIELD_ULL, len(gpu.retired_sbe)) if retire_ok else ns,
            30: lambda: (0, _FIELD_ULL, len(gpu.retired_dbe)) if retire_ok else ns,
            31: lambda: (0, _FIELD_ULL, gpu.retired_pending) if retire_ok else ns,
            38: lambda: (0, _FIELD_ULL, sum(lk.crc for lk in links)) if links else ns,
            45: lambda: (0, _FIELD_ULL, 0) if links else ns,
            52: lambda: (0, _FIELD_ULL, sum(lk.replay for lk in links)) if links else ns,
            59: lambda: (0, _FIELD_ULL, sum(lk.recovery for lk in links)) if links else ns,
            82: lambda: (0, _FIELD_UINT, gpu.memory_temperature_c) if gpu.memory_temperature_c is not None else ns,
            83: lambda: (0, _FIELD_ULL, gpu.energy_mj),
            91: lambda: (0, _FIELD_UINT, len(links)) if links else ns,
            94: lambda: (0, _FIELD_UINT, gpu.pcie_replay),
            142: lambda: (0, _FIELD_UINT, gpu.remapped[0]) if remap_ok else ns,
            143: lambda: (0, _FIELD_UINT, gpu.remapped[1]) if remap_ok else ns,
            144: lambda: (0, _FIELD_UINT, gpu.remapped[2]) if remap_ok else ns,
            145: lambda: (0, _FIELD_UINT, gpu.remapped[3]) if remap_ok else ns,
            186: lambda: (0, _FIELD_UINT, gpu.power_usage_mw),
            230: lambda: (0, _FIELD_UINT, 0),
        }
        if fid in (161, 162, 163, 165):
            if not links:
                return ns
            if scope >= len(links):
                return 2, 0, 0
            lk = links[scope]
            return 0, _FIELD_UINT if fid == 165 else _FIELD_ULL, {
                161: lk.replay, 162: lk.recovery, 163: lk.crc, 165: int(lk.active)}[fid]
        getter = table.get(fid)
        return getter() if getter is not None else ns

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        gpu, mig, _ = self._enter("nvmlDeviceGetFieldValues", handle)
        assert gpu is not None
        values = (self.pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        self._clock_us += 1000
        for i, item in enumerate(fieldIds):
            fid, scope = item if isinstance(item, tuple) else (item, 0)
            ret, vtype, value = self._field(gpu, mig, fid, scope)
            v = values[i]
            v.fieldId, v.scopeId, v.timestamp, v.latencyUsec = fid, scope, self._clock_us, 0
            v.nvmlReturn, v.valueType = ret, vtype
            if ret == 0:
                if vtype == _FIELD_UINT:
                    v.value.uiVal = int(value)
                else:
                    v.value.ullVal = int(value)
        return values

    # -- NUMA and affinity --------------------------------------------------------------------
    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:
        gpu = self._gpu("nvmlDeviceGetMemoryAffinity", handle)
        arr = (ctypes.c_ulonglong * nodeSetSize)()
        if gpu.numa_node // 64 < nodeSetSize:
            arr[gpu.numa_node // 64] = 1 << (gpu.numa_node % 64)
        return arr

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> Any:
        gpu = self._gpu("nvmlDeviceGetCpuAffinity", handle)
        arr = (ctypes.c_ulonglong * cpuSetSize)()
        for cpu in _cpus(gpu.cpus):
            if cpu // 64 < cpuSetSize:
                arr[cpu // 64] |= 1 << (cpu % 64)
        return arr

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetNumaNodeId", handle)
        # Only coherent (Grace) platforms make GPUs NUMA nodes.
        raise self._err(3)

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        self._gpu("nvmlDeviceGetTopologyCommonAncestor", device1)
        a = self._resolve(device1)[0]
        b = self._resolve(device2)[0]
        if self.scenario.gpus[b].lost:
            raise self._err(15)
        if a == b:
            return 0
        key = (min(a, b), max(a, b))
        if key in self.scenario.ancestors:
            return self.scenario.ancestors[key]
        same = self.scenario.gpus[a].numa_node == self.scenario.gpus[b].numa_node
        return 40 if same else 50

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        if not isinstance(p2pIndex, int):
            # ctypes cannot convert NVML_P2P_CAPS_INDEX_READ, which the bindings define as (0,).
            raise ctypes.ArgumentError("argument 3: <class 'TypeError'>: wrong type")
        gpu = self._gpu("nvmlDeviceGetP2PStatus", device1)
        b = self._resolve(device2)[0]
        if self.scenario.gpus[b].lost:
            raise self._err(15)
        return 2 if gpu.brand == 5 else 0

    # -- NVLink -------------------------------------------------------------------------------
    def _link(self, fn: str, device: Any, link: int) -> Any:
        gpu = self._gpu(fn, device)
        if not 0 <= link < len(gpu.nvlinks):
            raise self._err(2)
        return gpu.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        return 1 if self._link("nvmlDeviceGetNvLinkState", device, link).active else 0

    def nvmlDeviceGetNvLinkVersion(self, device: Any, link: int) -> int:
        return self._link("nvmlDeviceGetNvLinkVersion", device, link).version  # type: ignore[no-any-return]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        return self._pci(self._link("nvmlDeviceGetNvLinkRemotePciInfo", device, link).remote_bus_id)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        return self._link("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link).remote_type  # type: ignore[no-any-return]

    def nvmlDeviceGetNvLinkCapability(self, device: Any, link: int, capability: int) -> int:
        self._link("nvmlDeviceGetNvLinkCapability", device, link)
        return 1

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        lk = self._link("nvmlDeviceGetNvLinkErrorCounter", device, link)
        return {0: lk.replay, 1: lk.recovery, 2: lk.crc}.get(counter, 0)  # type: ignore[no-any-return]

    def _fill_fabric(self, gpu: GpuSpec, info: Any) -> None:
        state, cluster, clique = gpu.fabric  # type: ignore[misc]
        info.state = state
        info.status = gpu.fabric_status
        info.cliqueId = clique
        for i, byte in enumerate(cluster[:16]):
            info.clusterUuid[i] = byte
        if hasattr(info, "healthMask"):
            info.healthMask = 0

    def nvmlDeviceGetGpuFabricInfoV(self, device: Any, gpuFabricInfo: Any) -> int:
        """Versioned: ``gpuFabricInfo`` is ``byref(c_nvmlGpuFabricInfo_v2_t)`` (or v3) with ``.version`` set.

        The wrapper forwards it to C unchanged, so the fake checks what the C function would see
        (:meth:`_out_struct`): by value or a wrong/absent version is ARGUMENT_VERSION_MISMATCH,
        ``None`` is INVALID_ARGUMENT, an object ctypes cannot convert is ``ctypes.ArgumentError``.
        """
        fn = "nvmlDeviceGetGpuFabricInfoV"
        py = self.pynvml
        versions = {py.nvmlGpuFabricInfo_v2: py.c_nvmlGpuFabricInfo_v2_t}
        if hasattr(py, "nvmlGpuFabricInfo_v3"):
            versions[py.nvmlGpuFabricInfo_v3] = py.c_nvmlGpuFabricInfo_v3_t
        # The driver checks its arguments before the device: a bad call fails on every GPU.
        info = self._counted(fn, lambda: self._out_struct(fn, 2, gpuFabricInfo, versions=versions))
        gpu = self._gpu(fn, device)
        if gpu.fabric is None:
            raise self._err(3)
        self._fill_fabric(gpu, info)
        if hasattr(info, "healthSummary"):
            info.healthSummary = 0
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, device: Any, gpuFabricInfo: Any) -> int:
        """Unversioned (deprecated in 13.x): ``byref(c_nvmlGpuFabricInfo_t)``."""
        fn = "nvmlDeviceGetGpuFabricInfo"
        info = self._counted(fn, lambda: self._out_struct(fn, 2, gpuFabricInfo,
                                                          struct=self.pynvml.c_nvmlGpuFabricInfo_t))
        gpu = self._gpu(fn, device)
        if gpu.fabric is None or "nvmlDeviceGetGpuFabricInfoV" in gpu.not_supported:
            raise self._err(3)
        self._fill_fabric(gpu, info)
        return 0

    # -- MIG ----------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetMigMode", device)
        if gpu.mig_mode is None:
            raise self._err(3)
        return list(gpu.mig_mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetMaxMigDeviceCount", device)
        if gpu.mig_mode is None:
            raise self._err(3)
        return gpu.mig_max if gpu.mig_mode[0] == 1 else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        gpu, _mig, gi = self._enter("nvmlDeviceGetMigDeviceHandleByIndex", device)
        assert gpu is not None
        if gpu.mig_mode is None or gpu.mig_mode[0] != 1 or not 0 <= index < gpu.mig_max:
            raise self._err(2)
        if index not in gpu.mig_slots:
            raise self._err(6)  # an empty slot: callers must continue, not stop
        return self._handle(gi, index)

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:
        _gpu, mig, _ = self._enter("nvmlDeviceIsMigDeviceHandle", device)
        return ctypes.c_uint(1 if mig is not None else 0)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        _gpu, mig, gi = self._enter("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", migDevice)
        if mig is None:
            raise self._err(2)
        return self._handle(gi)

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        _gpu, mig, _ = self._enter("nvmlDeviceGetGpuInstanceId", device)
        if mig is None:
            raise self._err(3)
        return mig.gi_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        _gpu, mig, _ = self._enter("nvmlDeviceGetComputeInstanceId", device)
        if mig is None:
            raise self._err(3)
        return mig.ci_id

    def nvmlDeviceGetAttributes_v2(self, device: Any) -> Any:
        return self.nvmlDeviceGetAttributes(device, _fn="nvmlDeviceGetAttributes_v2")

    def nvmlDeviceGetAttributes(self, device: Any, _fn: str = "nvmlDeviceGetAttributes") -> Any:
        gpu, mig, _ = self._enter(_fn, device)
        assert gpu is not None
        if mig is None:
            raise self._err(3)  # "currently only supports MIG device handles"
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        attrs = self.pynvml.c_nvmlDeviceAttributes()
        attrs.multiprocessorCount = prof.sm_count
        attrs.gpuInstanceSliceCount = prof.slices
        attrs.computeInstanceSliceCount = prof.slices
        attrs.memorySizeMB = prof.memory_mib
        attrs.sharedCopyEngineCount = max(1, prof.slices)
        return attrs

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        """``version`` 2 (default) gives the v2 struct with ``name``, 1 the v1 struct; others FunctionNotFound."""
        if version not in (1, 2):
            self.calls["nvmlDeviceGetGpuInstanceProfileInfo"] += 1
            raise self.pynvml.NVMLError_FunctionNotFound()  # what the wrapper raises
        gpu = self._gpu("nvmlDeviceGetGpuInstanceProfileInfo", device)
        if gpu.mig_mode is None:
            raise self._err(3)
        for p in gpu.mig_profiles:
            if p.profile_index == profile:
                info = (self.pynvml.c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2
                        else self.pynvml.c_nvmlGpuInstanceProfileInfo_t())
                info.id, info.sliceCount, info.instanceCount = p.profile_id, p.slices, p.max_instances
                info.multiprocessorCount, info.memorySizeMB = p.sm_count, p.memory_mib
                if version == 2:
                    info.name = f"MIG {p.name}".encode()
                return info
        raise self._err(3)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, device: Any, profileId: int, placementsRef: Any,
                                                   countRef: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetGpuInstancePossiblePlacements", device)
        prof = next((p for p in gpu.mig_profiles if p.profile_id == profileId), None)
        if prof is None:
            raise self._err(2)
        # Both are forwarded to C unchanged: an array (or pointer) of placements, or None to ask
        # for the count, and ``byref(c_uint())``.
        count = self._out_uint("nvmlDeviceGetGpuInstancePossiblePlacements", 4, countRef)
        if placementsRef is None:
            count.value = len(prof.placements)
            return 0
        addr, size = self._pointee("nvmlDeviceGetGpuInstancePossiblePlacements", 3, placementsRef)
        item = self.pynvml.c_nvmlGpuInstancePlacement_t
        if addr < 0:
            raise self._err(2)
        if size < ctypes.sizeof(item) * len(prof.placements):
            raise self._err(7)  # the fake refuses what the driver would write past the buffer
        arr = (item * len(prof.placements)).from_address(addr)
        for i, (start, psize) in enumerate(prof.placements):
            arr[i].start, arr[i].size = start, psize
        count.value = len(prof.placements)
        return 0

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        gpu, _mig, gi = self._enter("nvmlDeviceGetGpuInstanceById", device)
        assert gpu is not None
        if not gpu.mig_privileged:
            raise self._err(4)
        for mig in gpu.mig_slots.values():
            if mig.gi_id == gpuInstanceId:
                buf = (ctypes.c_int * 1)(gpuInstanceId)
                self._gi_bufs.append(buf)
                self._gi_addr[ctypes.addressof(buf)] = (gi, mig)
                return ctypes.cast(buf, self.pynvml.c_nvmlGpuInstance_t)
        raise self._err(6)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        self._enter("nvmlGpuInstanceGetInfo")
        addr = ctypes.cast(gpuInstance, ctypes.c_void_p).value
        if addr not in self._gi_addr:
            raise self._err(2)
        gi, mig = self._gi_addr[addr]
        gpu = self.scenario.gpus[gi]
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        info = self.pynvml.c_nvmlGpuInstanceInfo_t()
        info.device = self._handle(gi)
        info.id, info.profileId = mig.gi_id, prof.profile_id
        info.placement.start, info.placement.size = mig.placement
        return info

    # -- processes ----------------------------------------------------------------------------
    def _procs(self, fn: str, handle: Any, kind: str) -> list[Any]:
        gpu, mig, _ = self._enter(fn, handle)
        assert gpu is not None
        out = []
        for p in gpu.processes:
            if p.kind != kind or (mig is not None and p.gi_id != mig.gi_id):
                continue
            out.append(self.pynvml.nvmlFriendlyObject({
                "pid": p.pid, "usedGpuMemory": p.used_bytes, "gpuInstanceId": p.gi_id,
                "computeInstanceId": p.ci_id}))
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses", handle, "compute")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses_v2", handle, "compute")

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses_v3", handle, "compute")

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetGraphicsRunningProcesses", handle, "graphics")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetGraphicsRunningProcesses_v2", handle, "graphics")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetGraphicsRunningProcesses_v3", handle, "graphics")

    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[Any]:
        """Samples newer than ``timeStamp`` (µs); NOT_FOUND when there are none (no processes)."""
        gpu = self._gpu("nvmlDeviceGetProcessUtilization", handle)
        if not gpu.processes:
            raise self._err(6)  # the driver's answer for "no sample since timeStamp"
        self._clock_us += 1000
        share = max(1, len(gpu.processes))
        out = []
        for p in gpu.processes:
            s = self.pynvml.c_nvmlProcessUtilizationSample_t()
            s.pid, s.timeStamp = p.pid, max(int(timeStamp), self._clock_us)
            s.smUtil, s.memUtil = gpu.utilization[0] // share, gpu.utilization[1] // share
            s.encUtil = s.decUtil = 0
            out.append(s)
        return out

    # -- video engines, display and modes (read by gpustat and nvitop) --------------------------
    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        """``[utilization %, sampling period µs]``; the fake's encoders are idle."""
        self._gpu("nvmlDeviceGetEncoderUtilization", handle)
        return [0, 167_000]

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        self._gpu("nvmlDeviceGetDecoderUtilization", handle)
        return [0, 167_000]

    def nvmlDeviceGetComputeMode(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetComputeMode", handle)
        return 0  # NVML_COMPUTEMODE_DEFAULT

    def nvmlDeviceGetDisplayMode(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetDisplayMode", handle)
        return 0  # headless servers: no display attached

    def nvmlDeviceGetDisplayActive(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetDisplayActive", handle)
        return 0

    def nvmlDeviceGetDriverModel_v2(self, handle: Any, _fn: str = "nvmlDeviceGetDriverModel_v2") -> list[int]:
        self._gpu(_fn, handle)
        raise self._err(3)  # WDDM/TCC driver models exist on Windows only; Linux says NOT_SUPPORTED

    def nvmlDeviceGetDriverModel(self, handle: Any) -> list[int]:
        return self.nvmlDeviceGetDriverModel_v2(handle, _fn="nvmlDeviceGetDriverModel")

    def nvmlDeviceGetCurrentDriverModel(self, handle: Any) -> int:
        return self.nvmlDeviceGetDriverModel_v2(handle, _fn="nvmlDeviceGetCurrentDriverModel")[0]

    def nvmlDeviceGetPendingDriverModel(self, handle: Any) -> int:
        return self.nvmlDeviceGetDriverModel_v2(handle, _fn="nvmlDeviceGetPendingDriverModel")[1]

    # -- events -------------------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> Any:
        self._enter("nvmlEventSetCreate")
        buf = (ctypes.c_int * 1)(len(self._event_bufs))
        self._event_bufs.append(buf)
        self._event_sets[ctypes.addressof(buf)] = {}
        return ctypes.cast(buf, self.pynvml.c_nvmlEventSet_t)

    def _set(self, event_set: Any) -> dict[int, int]:
        addr = ctypes.cast(event_set, ctypes.c_void_p).value
        if addr not in self._event_sets:
            raise self._err(2)
        return self._event_sets[addr]

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetSupportedEventTypes", handle).supported_events

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        gpu, _mig, index = self._enter("nvmlDeviceRegisterEvents", handle)
        assert gpu is not None
        registered = self._set(eventSet)
        if eventTypes & ~gpu.supported_events:
            raise self._err(3)
        registered[index] = registered.get(index, 0) | eventTypes

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int, _fn: str = "nvmlEventSetWait_v2") -> Any:
        self._enter(_fn)
        registered = self._set(eventSet)
        for _ in range(len(self._events)):
            ev = self._events.popleft()
            if registered.get(ev.gpu, 0) & ev.event_type:
                data = self.pynvml.c_nvmlEventData_t()
                data.device = self._handle(ev.gpu)
                data.eventType, data.eventData = ev.event_type, ev.xid
                data.gpuInstanceId, data.computeInstanceId = ev.gi_id, ev.ci_id
                return data
            self._events.append(ev)
        # No event: NVML_ERROR_TIMEOUT, raised at once (the fake never sleeps).
        raise self._err(10)

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:
        return self.nvmlEventSetWait_v2(eventSet, timeoutms, _fn="nvmlEventSetWait")

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        self._enter("nvmlEventSetFree")
        addr = ctypes.cast(eventSet, ctypes.c_void_p).value
        self._event_sets.pop(addr or 0, None)
