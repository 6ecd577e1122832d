"""Iluvatar CoreX through IXML (``libixml.so``): the bindings and the reader of the native path.

IXML exports NVML's symbol names and ABI plus ``ixmlDeviceGetHealth``.  Every signature is
restated from gpustack-runtime's ``pyixml`` (:data:`SOURCE`), a fork of pynvml that loads
``libixml.so``, by how it calls each function; the structs are its ``nvmlPciInfo_t``,
``c_nvmlMemory_t`` and ``c_nvmlUtilization_t``.  Memory is bytes, power mW (NVML semantics),
temperature degrees Celsius, utilisation percent.  Hung-card sentinels (power 65535 W, 0 C at
100 %) are read by the same rule as the ``ixsmi`` path (:func:`~._parse.wedged_condition`).

Nothing here loads the library at import time: :func:`load_ixml` is called from the backend.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Final

from accel.errors import AccelError
from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    ErrorTable,
    NativeCalls,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    UnitReading,
    condition,
    load_library,
    parse_bus_id,
)

from ._parse import wedged_condition

__all__ = ["ERRORS", "LIBRARY", "SOURCE", "TABLE", "IxmlRead", "load_ixml", "read_ixml"]

LIBRARY: Final = "libixml.so"
SOURCE: Final = SignatureSource(
    "gpustack/runtime", "gpustack_runtime/detector/pyixml/__init__.py", "88026d62a1c16d644fae0ee83943767c897cf9fb"
)
NAME_SIZE: Final = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE
UUID_SIZE: Final = 96  # NVML_DEVICE_UUID_V2_BUFFER_SIZE
DRIVER_SIZE: Final = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
TEMPERATURE_GPU: Final = 0  # NVML_TEMPERATURE_GPU
#: ixmlDeviceGetHealth bits (pyixml IXML_HEALTH_*).
HEALTH_BITS: Final = {
    0x1: ("SyshubError", Subsystem.INTERCONNECT),
    0x2: ("MemoryControllerError", Subsystem.MEMORY),
    0x10: ("EccError", Subsystem.MEMORY),
    0x20: ("MemoryError", Subsystem.MEMORY),
    0x40: ("PcieError", Subsystem.PCIE),
}

c_uint = ctypes.c_uint
Device = ctypes.c_void_p  # nvmlDevice_t: an opaque pointer


class PciInfo(ctypes.Structure):
    """``nvmlPciInfo_t`` (pyixml)."""

    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubSystemId", c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class Memory(ctypes.Structure):
    """``nvmlMemory_t`` (pyixml ``c_nvmlMemory_t``); bytes."""

    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Utilization(ctypes.Structure):
    """``nvmlUtilization_t``; percent."""

    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


def _fn(name: str, *argtypes: object) -> NativeFunction:
    return NativeFunction(name, tuple(argtypes), ctypes.c_int, SOURCE)


_P = ctypes.POINTER

TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("nvmlInitWithFlags", c_uint),
    _fn("nvmlShutdown"),
    _fn("nvmlSystemGetDriverVersion", ctypes.c_char_p, c_uint),
    _fn("nvmlDeviceGetCount_v2", _P(c_uint)),
    _fn("nvmlDeviceGetHandleByIndex_v2", c_uint, _P(Device)),
    _fn("nvmlDeviceGetIndex", Device, _P(c_uint)),
    _fn("nvmlDeviceGetName", Device, ctypes.c_char_p, c_uint),
    _fn("nvmlDeviceGetUUID", Device, ctypes.c_char_p, c_uint),
    _fn("nvmlDeviceGetPciInfo_v3", Device, _P(PciInfo)),
    _fn("nvmlDeviceGetMemoryInfo", Device, _P(Memory)),
    _fn("nvmlDeviceGetUtilizationRates", Device, _P(Utilization)),
    _fn("nvmlDeviceGetTemperature", Device, c_uint, _P(c_uint)),
    _fn("nvmlDeviceGetPowerUsage", Device, _P(c_uint)),
    _fn("nvmlDeviceGetPowerManagementDefaultLimit", Device, _P(c_uint)),
    _fn("nvmlDeviceGetFanSpeed", Device, _P(c_uint)),
    _fn("ixmlDeviceGetHealth", Device, _P(ctypes.c_longlong)),
)

#: nvmlReturn_t (pyixml NVML_ERROR_*).
ERRORS: Final = ErrorTable(
    "iluvatar.ixml",
    {
        1: ("uninitialized", "NVML_ERROR_UNINITIALIZED"),
        2: ("invalid-argument", "NVML_ERROR_INVALID_ARGUMENT"),
        3: ("not-supported", "NVML_ERROR_NOT_SUPPORTED"),
        4: ("no-permission", "NVML_ERROR_NO_PERMISSION"),
        5: ("unknown", "NVML_ERROR_ALREADY_INITIALIZED"),
        6: ("not-found", "NVML_ERROR_NOT_FOUND"),
        7: ("invalid-argument", "NVML_ERROR_INSUFFICIENT_SIZE"),
        8: ("unknown", "NVML_ERROR_INSUFFICIENT_POWER"),
        9: ("driver-not-loaded", "NVML_ERROR_DRIVER_NOT_LOADED"),
        10: ("timeout", "NVML_ERROR_TIMEOUT"),
        11: ("unknown", "NVML_ERROR_IRQ_ISSUE"),
        12: ("driver-not-loaded", "NVML_ERROR_LIBRARY_NOT_FOUND"),
        13: ("not-supported", "NVML_ERROR_FUNCTION_NOT_FOUND"),
        14: ("unknown", "NVML_ERROR_CORRUPTED_INFOROM"),
        15: ("lost", "NVML_ERROR_GPU_IS_LOST"),
        16: ("unknown", "NVML_ERROR_RESET_REQUIRED"),
        17: ("unknown", "NVML_ERROR_OPERATING_SYSTEM"),
        18: ("version", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
        19: ("unknown", "NVML_ERROR_IN_USE"),
        20: ("unknown", "NVML_ERROR_MEMORY"),
        21: ("not-supported", "NVML_ERROR_NO_DATA"),
        25: ("version", "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"),
        26: ("not-supported", "NVML_ERROR_DEPRECATED"),
        999: ("unknown", "NVML_ERROR_UNKNOWN"),
    },
)


def load_ixml() -> object:
    """Load ``libixml.so``: ``$ACCEL_ILUVATAR_LIB``, else ``$COREX_HOME/lib64`` and ``lib``,
    ``/usr/local/corex/lib64`` and ``lib``, then the loader's search."""
    return load_library(
        "iluvatar",
        [LIBRARY],
        env_var="ACCEL_ILUVATAR_LIB",
        dirs=["$COREX_HOME/lib64", "$COREX_HOME/lib", "/usr/local/corex/lib64", "/usr/local/corex/lib"],
    )


@dataclass
class IxmlRead:
    readings: list[UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: bytes) -> str | None:
    value = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return value or None


def read_ixml(lib: NativeLibrary) -> IxmlRead:
    """Read every GPU ``lib`` (the real ``libixml.so`` or its fake) reports."""
    out = IxmlRead()
    lib.call("nvmlInitWithFlags", 0)
    try:
        buf = ctypes.create_string_buffer(DRIVER_SIZE)
        if NativeCalls(lib, out.problems, "system")("nvmlSystemGetDriverVersion", buf, DRIVER_SIZE):
            out.driver_version = _text(buf.raw)
        count = c_uint()
        lib.call("nvmlDeviceGetCount_v2", ctypes.byref(count))
        for i in range(count.value):
            dev = Device()
            call = NativeCalls(lib, out.problems, f"IXML device {i}")
            if call("nvmlDeviceGetHandleByIndex_v2", i, ctypes.byref(dev)):
                out.readings.append(_read_device(call, dev, i))
    finally:
        lib.call("nvmlShutdown", check=False)
    return out


def _read_device(call: NativeCalls, dev: ctypes.c_void_p, index: int) -> UnitReading:
    r = UnitReading(index=index)
    idx = c_uint()
    if call("nvmlDeviceGetIndex", dev, ctypes.byref(idx)):
        r.index = idx.value  # what ixsmi and CUDA_VISIBLE_DEVICES number it by
    name = ctypes.create_string_buffer(NAME_SIZE)
    if call("nvmlDeviceGetName", dev, name, NAME_SIZE):
        r.model = _text(name.raw)
    uuid = ctypes.create_string_buffer(UUID_SIZE)
    if call("nvmlDeviceGetUUID", dev, uuid, UUID_SIZE):
        r.uuid = _text(uuid.raw)
    pci = PciInfo()
    if call("nvmlDeviceGetPciInfo_v3", dev, ctypes.byref(pci)):
        r.bus_id = parse_bus_id(_text(pci.busId)) or f"{pci.domain:04x}:{pci.bus:02x}:{pci.device:02x}.0"
        r.pci_device_id = f"{pci.pciDeviceId >> 16:04x}" if pci.pciDeviceId else None
    mem = Memory()
    if call("nvmlDeviceGetMemoryInfo", dev, ctypes.byref(mem)):
        r.memory_total_bytes, r.memory_used_bytes = mem.total, mem.used
    util = Utilization()
    if call("nvmlDeviceGetUtilizationRates", dev, ctypes.byref(util)):
        r.utilization_ratio = util.gpu / 100.0
    temp, power, limit, fan = c_uint(), c_uint(), c_uint(), c_uint()
    if call("nvmlDeviceGetTemperature", dev, TEMPERATURE_GPU, ctypes.byref(temp)):
        r.temperature_celsius = float(temp.value)
    raw_power: int | None = None
    if call("nvmlDeviceGetPowerUsage", dev, ctypes.byref(power)):
        raw_power = power.value
        r.power_watts = power.value / 1000.0
    if call("nvmlDeviceGetPowerManagementDefaultLimit", dev, ctypes.byref(limit)):
        r.power_limit_watts = limit.value / 1000.0
    if call("nvmlDeviceGetFanSpeed", dev, ctypes.byref(fan)):
        r.fan_ratio = fan.value / 100.0
    health = ctypes.c_longlong()
    if call("ixmlDeviceGetHealth", dev, ctypes.byref(health)):
        r.health_read = True
        r.conditions.extend(_health(health.value, index))
    sentinels = []
    if raw_power is not None and raw_power // 1000 == 65535:
        sentinels.append(f"power {raw_power // 1000}")
    if r.temperature_celsius == 0 and r.utilization_ratio == 1.0:
        sentinels.append("0 C at 100% utilisation")
    if sentinels:
        r.conditions.append(wedged_condition(sentinels))
        r.power_watts = r.temperature_celsius = r.utilization_ratio = r.fan_ratio = None
        r.dropped |= {"power_watts", "temperature_celsius", "utilization_ratio", "clocks_hertz"}
    return r


def _health(mask: int, index: int) -> list[HealthCondition]:
    out = []
    for bit, (reason, subsystem) in HEALTH_BITS.items():
        if mask & bit:
            out.append(
                condition(
                    subsystem,
                    reason,
                    Severity.ERROR,
                    Action.INVESTIGATE,
                    f"ixmlDeviceGetHealth reports {reason} (0x{bit:x}) on GPU {index}",
                    code=f"iluvatar.ixml:health-0x{bit:x}",
                )
            )
    unknown = mask & ~sum(HEALTH_BITS)
    if unknown:
        out.append(
            condition(
                Subsystem.DEVICE,
                "HealthError",
                Severity.ERROR,
                Action.INVESTIGATE,
                f"ixmlDeviceGetHealth reports unknown bits 0x{unknown:x} on GPU {index}",
                code=f"iluvatar.ixml:health-0x{unknown:x}",
            )
        )
    return out
