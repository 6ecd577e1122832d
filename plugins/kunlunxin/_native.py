"""Kunlunxin's management library, XPUML (``libxpuml.so``), read with ctypes.

Signatures, structs, enums and units are restated from the header the official Go binding
ships: kunlunxin/go-xpuml ``pkg/xpuml/xpuml.h`` at commit
e2a72e07b3b48f1f23cd5b64387b1522771beee9 (library name from ``pkg/xpuml/init.go``).  XPUML is
an NVML clone: ``xpumlReturn_t`` (``0`` = success, NVML's numbering), a device handle
``xpumlDevice_t`` (a struct holding one pointer, passed by value), strings into caller buffers
of a stated ``length``, memory in bytes, temperature in degrees C, power in mW.

That header comments out ``xpumlDeviceGetName``, ``xpumlDeviceGetUUID`` and
``xpumlDeviceGetPowerManagementLimit`` (the prototypes stand, behind ``//``).  They are declared
here from those prototypes and called only where the loaded library has them: without them the
model comes from ``xpumlDeviceGetAttributes``' model id, and the id from the PCI address.  The
header has no ECC, topology or event call: the device state (``xpumlDeviceGetState``) is the
health reading.  Nothing here loads the library at import time.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass, field
from typing import Any, Final

from accel.errors import AccelError, NotSupportedError
from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    ErrorTable,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    UnitReading,
    condition,
    load_library,
)

__all__ = [
    "ENV_VAR",
    "ERRORS",
    "LIBRARY",
    "SOURCE",
    "TABLE",
    "XpumlRead",
    "load_xpuml",
    "read_xpuml",
    "state_condition",
]

LIBRARY: Final = "libxpuml.so"
ENV_VAR: Final = "ACCEL_KUNLUNXIN_LIB"
#: Where the driver package installs it (the loader's search comes after).
LIBRARY_DIRS: Final = ("/usr/local/xpu/lib64", "/usr/lib64")

SOURCE: Final = SignatureSource("kunlunxin/go-xpuml", "pkg/xpuml/xpuml.h", "e2a72e07b3b48f1f23cd5b64387b1522771beee9")

NAME_SIZE: Final = 96  # XPUML_DEVICE_NAME_BUFFER_SIZE
UUID_SIZE: Final = 96  # XPUML_DEVICE_UUID_BUFFER_SIZE
DRIVER_VERSION_SIZE: Final = 80  # XPUML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
TEMPERATURE_XPU: Final = 0

#: ``xpumlDeviceState_t``: (name, severity of a condition, or None for a working device).
DEVICE_STATES: Final[dict[int, tuple[str, Severity | None]]] = {
    0: ("UNUSED", None),
    201: ("RUNNING", None),
    205: ("IN_RESET", Severity.WARNING),
    207: ("ERROR", Severity.CRITICAL),
    208: ("IN_EXCEPTION", Severity.CRITICAL),
}
#: ``xpumlDeviceModel_t`` as the name ``xpu_smi`` prints (K200/K100, R200/R300).
MODELS: Final[dict[int, str]] = {0: "K200", 1: "K100", 2: "R200", 3: "R300", 4: "R200-8F"}


class XpumlDevice(ctypes.Structure):
    """``xpumlDevice_t``: ``struct { struct xpumlDevice_st *handle; }``, passed by value."""

    _fields_ = [("handle", ctypes.c_void_p)]


class PciInfo(ctypes.Structure):
    """``xpumlPciInfo_t``."""

    _fields_ = [
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("function", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
        ("reserved", ctypes.c_ulonglong * 9),
    ]


class Memory(ctypes.Structure):
    """``xpumlMemory_t`` (bytes)."""

    _fields_ = [
        ("pageSizeGlobalMemory", ctypes.c_ulonglong),
        ("totalGlobalMemory", ctypes.c_ulonglong),
        ("freeGlobalMemory", ctypes.c_ulonglong),
        ("usedGlobalMemory", ctypes.c_ulonglong),
        ("pageSizeL3Memory", ctypes.c_ulonglong),
        ("totalL3Memory", ctypes.c_ulonglong),
        ("freeL3Memory", ctypes.c_ulonglong),
        ("usedL3Memory", ctypes.c_ulonglong),
        ("reserved", ctypes.c_ulonglong * 8),
    ]


class Utilization(ctypes.Structure):
    """``xpumlUtilization_t`` (percent)."""

    _fields_ = [("xpu", ctypes.c_uint), ("memory", ctypes.c_uint), ("reserved", ctypes.c_ulonglong * 15)]


class DeviceAttributes(ctypes.Structure):
    """``xpumlDeviceAttributes_t``."""

    _fields_ = [
        ("archId", ctypes.c_int),
        ("boardId", ctypes.c_int),
        ("modelId", ctypes.c_int),
        ("clusterCount", ctypes.c_uint),
        ("sdnnCount", ctypes.c_uint),
        ("dmaEngineCount", ctypes.c_uint),
        ("decoderCount", ctypes.c_uint),
        ("encoderCount", ctypes.c_uint),
        ("imgProcCount", ctypes.c_uint),
        ("maxVFCount", ctypes.c_uint),
        ("globalMemorySizeMB", ctypes.c_ulonglong),
        ("l3MemorySizeMB", ctypes.c_ulonglong),
        ("sn", ctypes.c_ulonglong * 2),
        ("reserved", ctypes.c_ulonglong * 7),
    ]


_RET = ctypes.c_int  # xpumlReturn_t (an enum)
_DEV = XpumlDevice
_PC = ctypes.POINTER(ctypes.c_char)
_PU = ctypes.POINTER(ctypes.c_uint)


def _fn(name: str, argtypes: tuple[Any, ...]) -> NativeFunction:
    return NativeFunction(name, argtypes, _RET, SOURCE)


TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("xpumlInit", ()),
    _fn("xpumlShutdown", ()),
    _fn("xpumlSystemGetDriverVersion", (_PC, ctypes.c_uint)),
    _fn("xpumlDeviceGetCount", (_PU,)),
    _fn("xpumlDeviceGetHandleByIndex", (ctypes.c_uint, ctypes.POINTER(XpumlDevice))),
    _fn("xpumlDeviceGetName", (_DEV, _PC, ctypes.c_uint)),  # commented-out prototype
    _fn("xpumlDeviceGetUUID", (_DEV, _PC, ctypes.c_uint)),  # commented-out prototype
    _fn("xpumlDeviceGetAttributes", (_DEV, ctypes.POINTER(DeviceAttributes))),
    _fn("xpumlDeviceGetPciInfo", (_DEV, ctypes.POINTER(PciInfo))),
    _fn("xpumlDeviceGetMemoryInfo", (_DEV, ctypes.POINTER(Memory))),
    _fn("xpumlDeviceGetUtilizationRates", (_DEV, ctypes.POINTER(Utilization))),
    _fn("xpumlDeviceGetTemperature", (_DEV, ctypes.c_int, _PU)),
    _fn("xpumlDeviceGetPowerUsage", (_DEV, _PU)),
    _fn("xpumlDeviceGetPowerManagementLimit", (_DEV, _PU)),  # commented-out prototype
    _fn("xpumlDeviceGetState", (_DEV, ctypes.POINTER(ctypes.c_int))),
)

#: ``xpumlReturn_t`` (header lines 438-467).
ERRORS: Final = ErrorTable(
    "kunlunxin.xpuml",
    {
        1: ("uninitialized", "UNINITIALIZED"),
        2: ("invalid-argument", "INVALID_ARGUMENT"),
        3: ("not-supported", "NOT_SUPPORTED"),
        4: ("no-permission", "NO_PERMISSION"),
        5: ("unknown", "ALREADY_INITIALIZED"),
        6: ("not-found", "NOT_FOUND"),
        7: ("invalid-argument", "INSUFFICIENT_SIZE"),
        8: ("unknown", "INSUFFICIENT_POWER"),
        9: ("driver-not-loaded", "DRIVER_NOT_LOADED"),
        10: ("timeout", "TIMEOUT"),
        11: ("unknown", "IRQ_ISSUE"),
        12: ("driver-not-loaded", "LIBRARY_NOT_FOUND"),
        13: ("not-supported", "FUNCTION_NOT_FOUND"),
        14: ("unknown", "CORRUPTED_INFOROM"),
        15: ("lost", "XPU_IS_LOST"),
        16: ("lost", "RESET_REQUIRED"),
        17: ("no-permission", "OPERATING_SYSTEM"),
        18: ("version", "LIB_RM_VERSION_MISMATCH"),
        19: ("unknown", "IN_USE"),
        20: ("unknown", "MEMORY"),
        21: ("not-supported", "NO_DATA"),
        22: ("not-supported", "VXPU_ECC_NOT_SUPPORTED"),
        23: ("unknown", "INSUFFICIENT_RESOURCES"),
        24: ("not-supported", "FREQ_NOT_SUPPORTED"),
        999: ("unknown", "UNKNOWN"),
    },
)


def load_xpuml() -> object:
    """Load ``libxpuml.so`` (``$ACCEL_KUNLUNXIN_LIB``, the driver directories, the loader)."""
    return load_library("kunlunxin", [LIBRARY], env_var=ENV_VAR, dirs=LIBRARY_DIRS)


@dataclass
class XpumlRead:
    """One pass over XPUML: the units (as the ``xpu_smi`` parser gives them), the driver
    version, the handles by index, the fields never readable per index, and the calls that
    failed."""

    readings: list[UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    handles: dict[int, XpumlDevice] = field(default_factory=dict)
    never: dict[int, set[str]] = field(default_factory=dict)
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: bytes) -> str | None:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return text or None


class _Device:
    """One device's calls: NOT_SUPPORTED (or a symbol the library lacks) makes a field "never";
    any other failure is a problem and the field is empty this time."""

    def __init__(self, lib: NativeLibrary, index: int, handle: XpumlDevice, out: XpumlRead) -> None:
        self.lib, self.handle, self.out = lib, handle, out
        self.did = str(index)
        self.never = out.never.setdefault(index, set())
        self.missed = False

    def read(self, name: str, field_path: str | None, *args: Any) -> bool:
        try:
            self.lib.call(name, self.handle, *args, device_id=self.did)
        except NotSupportedError:
            if field_path is not None:
                self.never.add(field_path)
            return False
        except AccelError as exc:
            self.out.problems.append(exc)
            self.missed = True
            return False
        return True

    def string(self, name: str, size: int) -> str | None:
        buf = ctypes.create_string_buffer(size)
        return _text(buf.raw) if self.read(name, None, buf, size) else None


def _unit(lib: NativeLibrary, index: int, out: XpumlRead) -> UnitReading | None:
    handle = XpumlDevice()
    try:
        lib.call("xpumlDeviceGetHandleByIndex", index, ctypes.byref(handle), device_id=str(index))
    except AccelError as exc:
        out.problems.append(exc)
        return None
    out.handles[index] = handle
    dev = _Device(lib, index, handle, out)
    pci = PciInfo()
    if not dev.read("xpumlDeviceGetPciInfo", "pci.bus_id", ctypes.byref(pci)):
        return None  # the id is the PCI address: without it the device cannot be named
    r = UnitReading(index=index, bus_id=f"{pci.domain & 0xFFFF:04x}:{pci.bus:02x}:{pci.device:02x}.{pci.function:x}")
    r.pci_device_id = f"{pci.pciDeviceId >> 16:04x}" if pci.pciDeviceId else None
    r.uuid = dev.string("xpumlDeviceGetUUID", UUID_SIZE)
    r.model = dev.string("xpumlDeviceGetName", NAME_SIZE)
    attrs = DeviceAttributes()
    if dev.read("xpumlDeviceGetAttributes", None, ctypes.byref(attrs)) and r.model is None:
        r.model = MODELS.get(attrs.modelId)
    mem = Memory()
    if dev.read("xpumlDeviceGetMemoryInfo", "memory", ctypes.byref(mem)):
        r.memory_total_bytes, r.memory_used_bytes = mem.totalGlobalMemory, mem.usedGlobalMemory
        if mem.totalL3Memory:
            r.extras["kunlunxin.com/l3TotalBytes"] = mem.totalL3Memory
    util = Utilization()
    if dev.read("xpumlDeviceGetUtilizationRates", "utilization_ratio", ctypes.byref(util)):
        r.utilization_ratio = util.xpu / 100
    value = ctypes.c_uint()
    if dev.read("xpumlDeviceGetTemperature", "temperature_celsius", TEMPERATURE_XPU, ctypes.byref(value)):
        r.temperature_celsius = float(value.value)
    if dev.read("xpumlDeviceGetPowerUsage", "power_watts", ctypes.byref(value)):
        r.power_watts = value.value / 1000
    if dev.read("xpumlDeviceGetPowerManagementLimit", "power.enforced_watts", ctypes.byref(value)):
        r.power_limit_watts = value.value / 1000
    state = ctypes.c_int()
    if dev.read("xpumlDeviceGetState", None, ctypes.byref(state)):
        r.health_read = True  # the device state is XPUML's health reading
        r.extras["kunlunxin.com/deviceState"] = DEVICE_STATES.get(state.value, (str(state.value), None))[0]
        cond = state_condition(state.value)
        if cond is not None:
            r.conditions.append(cond)
    if dev.missed:
        r.dropped.add("*")
    return r


def state_condition(state: int) -> HealthCondition | None:
    """The condition of an ``xpumlDeviceState_t`` (``None`` for a working device); an unknown
    value is a warning, never read as healthy."""
    name, severity = DEVICE_STATES.get(state, (f"unknown state {state}", Severity.WARNING))
    if severity is None:
        return None
    return condition(
        Subsystem.DEVICE,
        "DeviceState",
        severity,
        Action.RESET_DEVICE if severity is Severity.CRITICAL else Action.INVESTIGATE,
        f"XPUML device state is {name}",
        code=f"kunlunxin.xpuml:state-{state}",
    )


def read_xpuml(lib: NativeLibrary) -> XpumlRead:
    """One full read: init, the driver version, each device.  A device without a handle or a
    PCI address is left out with a problem; any other failed call leaves its field empty."""
    out = XpumlRead()
    lib.call("xpumlInit")
    buf = ctypes.create_string_buffer(DRIVER_VERSION_SIZE)
    with contextlib.suppress(NotSupportedError):
        lib.call("xpumlSystemGetDriverVersion", buf, DRIVER_VERSION_SIZE)
        out.driver_version = _text(buf.raw)
    count = ctypes.c_uint()
    lib.call("xpumlDeviceGetCount", ctypes.byref(count))
    for index in range(count.value):
        unit = _unit(lib, index, out)
        if unit is not None:
            out.readings.append(unit)
    return out
