"""Enflame's management library, EFML (``libefml.so``), read with ctypes.

Signatures, structs and enums are restated from the header Enflame ships in its own exporter:
EnflameTechnology/gcu-exporter ``vendor/go-eflib/efml/efml.h`` at commit
0e6e15c9cb8034e85b70959cc30f702ac56114ed (go-eflib 1.2.3.5); the library names and search
directories are those of ``vendor/go-eflib/efml/efml_dl.go``, the units those its callers use
(``vendor/go-eflib/device.go``: ``mem_total_size`` in bytes, ``mem_used`` in MiB; power in W and
temperatures in degrees C as floats).  Conventions: devices by ``uint32_t dev_idx``;
``efmlReturn_t`` (an enum, ``0`` = ``EFML_SUCCESS``); strings into caller buffers of
``MAX_CHAR_BUFF_LEN`` (128) bytes; ``EfmlShutdown`` returns nothing.

Events: ``EfmlGetEventV2(dev_idx, efmlEvent_t *)`` is the header's non-blocking per-device
read; as the Go binding does for ``EfmlGetEvent``, ``EFML_ERROR_TIMEOUT`` (and
``NOT_SUPPORTED``) mean "no event".  Nothing here loads the library at import time.
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

from ._parse import normalise_model

__all__ = [
    "ENV_VAR",
    "ERRORS",
    "LIBRARY",
    "SOURCE",
    "TABLE",
    "EfmlRead",
    "load_efml",
    "read_efml",
    "read_event",
]

LIBRARY: Final = "libefml.so"
ENV_VAR: Final = "ACCEL_ENFLAME_LIB"
#: ``efml_dl.go``'s names and directories, in its order.
LIBRARY_NAMES: Final = ("libefml.so", "libefml.so.1", "libefml.so.2")
LIBRARY_DIRS: Final = ("/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu")

SOURCE: Final = SignatureSource(
    "EnflameTechnology/gcu-exporter", "vendor/go-eflib/efml/efml.h", "0e6e15c9cb8034e85b70959cc30f702ac56114ed"
)

BUF: Final = 128  # MAX_CHAR_BUFF_LEN
SUCCESS: Final = 0
NOT_SUPPORTED: Final = 3
TIMEOUT: Final = 253
#: ``efmlGcuVirtMode_t`` as ``efsmi``'s ``GCU Virt`` column prints it.
VIRT_MODES: Final[dict[int, str]] = {0: "Disable", 1: "vGCU", 2: "MDEV", 3: "SRIOV-PF", 4: "SRIOV"}
#: ``efmlEventType_t``: (name, severity).
EVENT_TYPES: Final[dict[int, tuple[str, Severity]]] = {
    3: ("DTU_SUSPEND", Severity.ERROR),
    10: ("DTU_RESET_START", Severity.WARNING),
    11: ("DTU_RESET_FINISH", Severity.INFO),
    20: ("DTU_EID", Severity.ERROR),
}


class DeviceInfo(ctypes.Structure):
    """``efmlDeviceInfo_t``."""

    _fields_ = [
        ("name", ctypes.c_char * BUF),
        ("vendor_id", ctypes.c_uint32),
        ("device_id", ctypes.c_uint32),
        ("domain_id", ctypes.c_uint32),
        ("bus_id", ctypes.c_uint32),
        ("dev_id", ctypes.c_uint32),
        ("func_id", ctypes.c_uint32),
        ("logic_id", ctypes.c_uint32),
    ]


class PowerInfo(ctypes.Structure):
    """``efmlDevPowerInfo_t`` (W)."""

    _fields_ = [("pwr_capability", ctypes.c_float), ("cur_pwr_consumption", ctypes.c_float)]


class MemInfo(ctypes.Structure):
    """``efmlDevMemInfo_t``: total in bytes, used in MiB."""

    _fields_ = [("mem_total_size", ctypes.c_uint64), ("mem_used", ctypes.c_uint32)]


class ThermalInfoV2(ctypes.Structure):
    """``efmlDevThermalInfoV2_t`` (degrees C)."""

    _fields_ = [("cur_asic_temp", ctypes.c_float), ("cur_mem_temp", ctypes.c_float), ("cur_board_temp", ctypes.c_float)]


class EccStatus(ctypes.Structure):
    """``efmlEccStatus_t``."""

    _fields_ = [
        ("enabled", ctypes.c_bool),
        ("pending", ctypes.c_bool),
        ("pdblack", ctypes.c_bool),
        ("ecnt_sb", ctypes.c_uint32),
        ("ecnt_db", ctypes.c_uint32),
    ]


class Event(ctypes.Structure):
    """``efmlEvent_t``."""

    _fields_ = [("event_id", ctypes.c_uint32), ("event_type", ctypes.c_int), ("event_msg", ctypes.c_char * BUF)]


_U32 = ctypes.c_uint32
_PC = ctypes.POINTER(ctypes.c_char)
_RET = ctypes.c_int  # efmlReturn_t


def _fn(name: str, argtypes: tuple[Any, ...], restype: Any = _RET) -> NativeFunction:
    return NativeFunction(name, argtypes, restype, SOURCE)


TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("EfmlInit", (ctypes.c_bool,)),
    _fn("EfmlShutdown", (), None),
    _fn("EfmlGetDriverVer", (_PC,)),
    _fn("EfmlGetDevCount", (ctypes.POINTER(_U32),)),
    _fn("EfmlGetDevTempV2", (_U32, ctypes.POINTER(ThermalInfoV2))),
    _fn("EfmlGetDevPwr", (_U32, ctypes.POINTER(PowerInfo))),
    _fn("EfmlGetDevMem", (_U32, ctypes.POINTER(MemInfo))),
    _fn("EfmlGetDevDtuUsage", (_U32, ctypes.POINTER(ctypes.c_float))),
    _fn("EfmlGetDevInfo", (_U32, ctypes.POINTER(DeviceInfo))),
    _fn("EfmlGetFwVersion", (_U32, _PC)),
    _fn("EfmlGetDevUuid", (_U32, _PC)),
    _fn("EfmlGetDevSn", (_U32, _PC)),
    _fn("EfmlGetDevHealth", (_U32, ctypes.POINTER(ctypes.c_bool))),
    _fn("EfmlGetDevEccStatus", (_U32, ctypes.POINTER(EccStatus))),
    _fn("EfmlGetEventV2", (_U32, ctypes.POINTER(Event))),
    _fn("EfmlGetGcuVirtStatus", (_U32, ctypes.POINTER(ctypes.c_int))),
)

#: ``efmlReturn_t`` (header lines 22-40).
ERRORS: Final = ErrorTable(
    "enflame.efml",
    {
        1: ("uninitialized", "UNINITIALIZED"),
        2: ("invalid-argument", "INVALID_ARGUMENT"),
        3: ("not-supported", "NOT_SUPPORTED"),
        4: ("driver-not-loaded", "LIBRARY_NOT_FOUND"),
        5: ("unknown", "INVALID_ERROR_CODE"),
        6: ("driver-not-loaded", "DRIVER_NOT_LOADED"),
        7: ("invalid-argument", "GCU_LARE_PORT_NUMBER_ERR"),
        8: ("invalid-argument", "INVALID_INPUT"),
        9: ("not-supported", "FUNCTION_NOT_FOUND"),
        10: ("version", "OPEN_DRIVER_VERSION"),
        11: ("version", "DRIVER_NOT_COMPATIBLE"),
        12: ("not-found", "NO_DEVICE"),
        13: ("not-supported", "DEPRECATION"),
        253: ("timeout", "TIMEOUT"),
        254: ("unknown", "FAIL"),
    },
)


def load_efml() -> object:
    """Load ``libefml.so`` (``$ACCEL_ENFLAME_LIB``, the driver directories, the loader)."""
    return load_library("enflame", LIBRARY_NAMES, env_var=ENV_VAR, dirs=LIBRARY_DIRS)


@dataclass
class EfmlRead:
    """One pass over EFML: the units (as the ``efsmi`` parsers give them), the driver version,
    the fields never readable per index, and the calls that failed."""

    readings: list[UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    never: dict[int, set[str]] = field(default_factory=dict)
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: bytes) -> str | None:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return text or None


class _Device:
    def __init__(self, lib: NativeLibrary, index: int, out: EfmlRead) -> None:
        self.lib, self.index, self.out = lib, index, out
        self.did = str(index)
        self.never = out.never.setdefault(index, set())
        self.missed = False

    def read(self, name: str, field_path: str | None, *args: Any) -> bool:
        try:
            self.lib.call(name, self.index, *args, device_id=self.did)
        except NotSupportedError:
            if field_path is not None:
                self.never.add(field_path)
            return False
        except AccelError as exc:
            self.out.problems.append(exc)
            self.missed = True
            return False
        return True

    def string(self, name: str, field_path: str | None) -> str | None:
        buf = ctypes.create_string_buffer(BUF)
        return _text(buf.raw) if self.read(name, field_path, buf) else None


def _unit(lib: NativeLibrary, index: int, out: EfmlRead) -> UnitReading | None:
    dev = _Device(lib, index, out)
    info = DeviceInfo()
    if not dev.read("EfmlGetDevInfo", "pci.bus_id", ctypes.byref(info)):
        return None
    r = UnitReading(index=index, bus_id=f"{info.domain_id:04x}:{info.bus_id:02x}:{info.dev_id:02x}.{info.func_id:x}")
    raw = _text(info.name)
    r.model = normalise_model(raw)
    if raw is not None and r.model != raw:
        r.extras["enflame.com/rawName"] = raw
    if info.vendor_id:
        r.pci_vendor_id, r.pci_device_id = f"{info.vendor_id:04x}", f"{info.device_id:04x}"
    r.uuid = dev.string("EfmlGetDevUuid", None)
    r.serial_number = dev.string("EfmlGetDevSn", None)
    fw = dev.string("EfmlGetFwVersion", None)
    if fw:
        r.firmware["fw"] = fw
    virt = ctypes.c_int()
    if dev.read("EfmlGetGcuVirtStatus", None, ctypes.byref(virt)):
        r.extras["enflame.com/gcuVirt"] = VIRT_MODES.get(virt.value, str(virt.value))
        if virt.value == 4:
            r.is_virtual_function = True
    mem = MemInfo()
    if dev.read("EfmlGetDevMem", "memory", ctypes.byref(mem)):
        r.memory_total_bytes = mem.mem_total_size
        r.memory_used_bytes = mem.mem_used * 2**20
    usage = ctypes.c_float()
    if dev.read("EfmlGetDevDtuUsage", "utilization_ratio", ctypes.byref(usage)):
        r.utilization_ratio = round(usage.value, 3) / 100
    temp = ThermalInfoV2()
    if dev.read("EfmlGetDevTempV2", "temperature_celsius", ctypes.byref(temp)):
        r.temperature_celsius = float(temp.cur_asic_temp)
    pwr = PowerInfo()
    if dev.read("EfmlGetDevPwr", "power_watts", ctypes.byref(pwr)):
        r.power_watts, r.power_limit_watts = float(pwr.cur_pwr_consumption), float(pwr.pwr_capability)
    _health(dev, r)
    if dev.missed:
        r.dropped.add("*")
    return r


def _health(dev: _Device, r: UnitReading) -> None:
    """Health is earned: ``EfmlGetDevHealth`` must answer; ECC double-bit counts add to it."""
    healthy = ctypes.c_bool()
    if dev.read("EfmlGetDevHealth", None, ctypes.byref(healthy)):
        r.health_read = True
        if not healthy.value:
            r.conditions.append(
                condition(
                    Subsystem.DEVICE,
                    "DeviceUnhealthy",
                    Severity.CRITICAL,
                    Action.INVESTIGATE,
                    "EFML reports the device unhealthy (EfmlGetDevHealth)",
                    code="enflame.efml:unhealthy",
                )
            )
    ecc = EccStatus()
    if dev.read("EfmlGetDevEccStatus", "ecc_uncorrected_total", ctypes.byref(ecc)):
        r.ecc_enabled, r.ecc_pending = bool(ecc.enabled), bool(ecc.pending)
        r.ecc_uncorrected_total = int(ecc.ecnt_db)
        r.extras["enflame.com/eccSingleBit"] = int(ecc.ecnt_sb)
        if ecc.ecnt_db:
            r.conditions.append(
                condition(
                    Subsystem.MEMORY,
                    "UncorrectableMemoryError",
                    Severity.ERROR,
                    Action.RESET_DEVICE,
                    f"EFML counts {ecc.ecnt_db} double-bit ECC error(s)",
                    code="enflame.efml:ecc-double-bit",
                    count=int(ecc.ecnt_db),
                )
            )


def read_event(lib: NativeLibrary, index: int) -> HealthCondition | None:
    """The next pending event of device ``index`` as a condition (``None`` when none is
    pending: ``EFML_ERROR_TIMEOUT`` or ``NOT_SUPPORTED``); other failures raise."""
    ev = Event()
    rc = lib.call("EfmlGetEventV2", index, ctypes.byref(ev), device_id=str(index), check=False)
    if rc in (TIMEOUT, NOT_SUPPORTED):
        return None
    assert lib.errors is not None
    lib.errors.check(rc, fn="EfmlGetEventV2", device_id=str(index))
    name, severity = EVENT_TYPES.get(ev.event_type, (f"type {ev.event_type}", Severity.WARNING))
    msg = _text(ev.event_msg)
    return condition(
        Subsystem.DEVICE,
        "DeviceEvent",
        severity,
        Action.INVESTIGATE if severity is not Severity.INFO else Action.NONE,
        f"EFML event {name} (id {ev.event_id}){': ' + msg if msg else ''}",
        code=f"enflame.efml:event-{ev.event_type}",
    )


def read_efml(lib: NativeLibrary) -> EfmlRead:
    """One full read: init (with the driver), the driver version, each device."""
    out = EfmlRead()
    lib.call("EfmlInit", False)
    buf = ctypes.create_string_buffer(BUF)
    with contextlib.suppress(NotSupportedError):
        lib.call("EfmlGetDriverVer", buf)
        out.driver_version = _text(buf.raw)
    count = ctypes.c_uint32()
    lib.call("EfmlGetDevCount", ctypes.byref(count))
    for index in range(count.value):
        unit = _unit(lib, index, out)
        if unit is not None:
            out.readings.append(unit)
    return out
