"""Cambricon through CNDev (``libcndev.so``): the bindings and the reader of the native path.

Every signature below is restated from Cambricon's public ``cndev.h`` (:data:`SOURCE`); the
structs are the header's, field for field.  CNDev's conventions: the out-struct comes first and
the device handle second (``cndevGetX(out*, device)``); a versioned struct's first field is an
IN ``version`` set to ``CNDEV_VERSION_n`` (:func:`~accel.toolkit.versioned`); the ``V2`` structs
carry no version field.  Memory is MB (read as MiB, as ``cnmon`` prints it), power W,
temperature degrees Celsius, utilisation percent.

Nothing here loads the library at import time: :func:`load_cndev` is called from the backend.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from accel.errors import AccelError, NotSupportedError
from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.plugin import DeviceEvent
from accel.toolkit import (
    ErrorTable,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    UnitReading,
    condition,
    load_library,
    versioned,
)

__all__ = [
    "ERRORS",
    "LIBRARY",
    "SOURCE",
    "TABLE",
    "CndevRead",
    "load_cndev",
    "read_cndev",
]

LIBRARY: Final = "libcndev.so"
#: cndev.h as the Cambricon device plugin shipped it (v2.0.22; the next release dropped it).
SOURCE: Final = SignatureSource(
    "Cambricon/cambricon-k8s-device-plugin",
    "device-plugin/pkg/cndev/include/cndev.h",
    "b875556ad3aee096396c1a2ca027bc0055a31b7c",
)

CNDEV_VERSION_6: Final = 6
#: ``cndevEventTypeXidError``.
EVENT_XID: Final = 0x1
CNDEV_ERROR_TIMEOUT: Final = 17

c_int32 = ctypes.c_int32
c_uint32 = ctypes.c_uint32
c_uint16 = ctypes.c_uint16
# cndev.h: __uint64_t is ``unsigned long``, __int64_t ``long`` (64-bit on the Linux LP64 hosts).
c_uint64 = ctypes.c_ulong
c_int64 = ctypes.c_long


class CardInfo(ctypes.Structure):
    """``cndevCardInfo_t`` (versioned)."""

    _fields_ = [("version", c_int32), ("number", c_uint32)]


class UUIDInfo(ctypes.Structure):
    """``cndevUUID_t`` (versioned)."""

    _fields_ = [("version", c_int32), ("uuid", ctypes.c_uint8 * 37), ("ncsUUID64", c_uint64)]


class VersionInfo(ctypes.Structure):
    """``cndevVersionInfo_t`` (versioned): MCU (firmware) and driver versions."""

    _fields_ = [
        ("version", c_int32),
        ("mcuMajorVersion", c_uint32),
        ("mcuMinorVersion", c_uint32),
        ("mcuBuildVersion", c_uint32),
        ("driverMajorVersion", c_uint32),
        ("driverMinorVersion", c_uint32),
        ("driverBuildVersion", c_uint32),
    ]


class MemoryInfoV2(ctypes.Structure):
    """``cndevMemoryInfoV2_t`` (no version field); MB."""

    _fields_ = [
        ("physicalMemoryTotal", c_int64),
        ("physicalMemoryUsed", c_int64),
        ("reservedMemory", c_int64),
        ("virtualMemoryTotal", c_int64),
        ("virtualMemoryUsed", c_int64),
        ("globalMemory", c_uint64),
        ("reserved", c_uint64 * 16),
    ]


class PCIeInfoV2(ctypes.Structure):
    """``cndevPCIeInfoV2_t`` (no version field)."""

    _fields_ = [
        ("subsystemId", c_uint32),
        ("deviceId", c_uint32),
        ("vendor", c_uint16),
        ("subsystemVendor", c_uint16),
        ("domain", c_uint32),
        ("bus", c_uint32),
        ("device", c_uint32),
        ("function", c_uint32),
        ("moduleId", c_uint16),
        ("slotId", c_uint16),
        ("reserved", c_uint32 * 8),
    ]


class UtilizationInfo(ctypes.Structure):
    """``cndevUtilizationInfo_t`` (versioned); percent."""

    _fields_ = [("version", c_int32), ("averageCoreUtilization", c_int32), ("coreUtilization", c_int32 * 80)]


class TemperatureInfo(ctypes.Structure):
    """``cndevTemperatureInfo_t`` (versioned); degrees Celsius."""

    _fields_ = [
        ("version", c_int32),
        ("board", c_int32),
        ("cluster", c_int32 * 20),
        ("memoryDie", c_int32 * 8),
        ("chip", c_int32),
        ("airInlet", c_int32),
        ("airOutlet", c_int32),
        ("memory", c_int32),
        ("videoInput", c_int32),
        ("cpu", c_int32),
        ("isp", c_int32),
    ]


class DevicePowerInfo(ctypes.Structure):
    """``cndevDevicePowerInfo_t`` (no version field); W."""

    _fields_ = [
        ("usage", c_int32),
        ("cap", c_int32),
        ("machine", c_int32),
        ("tdp", c_int32),
        ("maxPower", c_int32),
        ("reserved", c_int32 * 16),
    ]


class ECCInfo(ctypes.Structure):
    """``cndevECCInfo_t`` (versioned); counts."""

    _fields_ = [
        ("version", c_int32),
        ("oneBitError", c_uint64),
        ("multipleOneError", c_uint64),
        ("multipleError", c_uint64),
        ("multipleMultipleError", c_uint64),
        ("correctedError", c_uint64),
        ("uncorrectedError", c_uint64),
        ("totalError", c_uint64),
        ("addressForbiddenError", c_uint64),
    ]


class DiagErrorDetail(ctypes.Structure):
    """``cndevDiagErrorDetail_t``."""

    _fields_ = [
        ("msg", ctypes.c_char * 512),
        ("device_id", c_uint32),
        ("bdf", c_uint32),
        ("code", ctypes.c_int),
        ("category", c_uint32),
        ("severity", c_uint32),
    ]


class IncidentInfo(ctypes.Structure):
    """``cndevIncidentInfo_t``: the system (a bit of ``cndevHealthSystem_t``) and its result."""

    _fields_ = [("system", ctypes.c_int), ("health", ctypes.c_int), ("error", DiagErrorDetail)]


class CardHealthStateV2(ctypes.Structure):
    """``cndevCardHealthStateV2_t`` (no version field)."""

    _fields_ = [
        ("health", c_int32),
        ("deviceState", ctypes.c_int),
        ("driverState", ctypes.c_int),
        ("overallHealth", ctypes.c_int),
        ("incident_count", c_uint32),
        ("incidents", IncidentInfo * 64),
        ("reserved", c_uint32 * 8),
    ]


class EventData(ctypes.Structure):
    """``cndevEventData_t`` (versioned)."""

    _fields_ = [
        ("version", c_uint32),
        ("device", c_int32),
        ("eventData", c_uint64),
        ("eventType", c_uint64),
        ("timestamp", c_uint64),
        ("computeInstanceId", c_uint32),
        ("mluInstanceId", c_uint32),
        ("reserved", c_uint64 * 8),
    ]


def _fn(name: str, argtypes: tuple[object, ...], restype: object = ctypes.c_int) -> NativeFunction:
    return NativeFunction(name, argtypes, restype, SOURCE)


_P = ctypes.POINTER
#: ``cndevEventHandle`` is ``void *``.
EventHandle = ctypes.c_void_p

TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("cndevInit", (c_int32,)),
    _fn("cndevRelease", ()),
    _fn("cndevGetDeviceCount", (_P(CardInfo),)),
    _fn("cndevGetDeviceHandleByIndex", (c_int32, _P(c_int32))),
    _fn("cndevGetCardNameStringByDevId", (c_int32,), ctypes.c_char_p),
    _fn("cndevGetUUID", (_P(UUIDInfo), c_int32)),
    _fn("cndevGetVersionInfo", (_P(VersionInfo), c_int32)),
    _fn("cndevGetPCIeInfoV2", (_P(PCIeInfoV2), c_int32)),
    _fn("cndevGetMemoryUsageV2", (_P(MemoryInfoV2), c_int32)),
    _fn("cndevGetDeviceUtilizationInfo", (_P(UtilizationInfo), c_int32)),
    _fn("cndevGetTemperatureInfo", (_P(TemperatureInfo), c_int32)),
    _fn("cndevGetDevicePowerInfo", (_P(DevicePowerInfo), c_int32)),
    _fn("cndevGetECCInfo", (_P(ECCInfo), c_int32)),
    _fn("cndevGetCardHealthStateV2", (_P(CardHealthStateV2), c_int32)),
    _fn("cndevEventHandleCreate", (_P(EventHandle),)),
    _fn("cndevEventHandleDestroy", (EventHandle,)),
    _fn("cndevRegisterEvents", (EventHandle, ctypes.c_ulonglong, c_int32)),
    _fn("cndevEventWait", (EventHandle, _P(EventData), c_int32)),
)

#: ``cndevRet_t`` (cndev.h).  TIMEOUT is an answer of ``cndevEventWait`` (no event), checked there.
ERRORS: Final = ErrorTable(
    "cambricon.cndev",
    {
        1: ("driver-not-loaded", "CNDEV_ERROR_NO_DRIVER"),
        2: ("version", "CNDEV_ERROR_LOW_DRIVER_VERSION"),
        3: ("version", "CNDEV_ERROR_UNSUPPORTED_API_VERSION"),
        4: ("uninitialized", "CNDEV_ERROR_UNINITIALIZED"),
        5: ("invalid-argument", "CNDEV_ERROR_INVALID_ARGUMENT"),
        6: ("not-found", "CNDEV_ERROR_INVALID_DEVICE_ID"),
        7: ("unknown", "CNDEV_ERROR_UNKNOWN"),
        8: ("unknown", "CNDEV_ERROR_MALLOC"),
        9: ("unknown", "CNDEV_ERROR_INSUFFICIENT_SPACE"),
        10: ("not-supported", "CNDEV_ERROR_NOT_SUPPORTED"),
        11: ("invalid-argument", "CNDEV_ERROR_INVALID_LINK"),
        12: ("driver-not-loaded", "CNDEV_ERROR_NO_DEVICES"),
        13: ("no-permission", "CNDEV_ERROR_NO_PERMISSION"),
        14: ("not-found", "CNDEV_ERROR_NOT_FOUND"),
        15: ("unknown", "CNDEV_ERROR_IN_USE"),
        16: ("unknown", "CNDEV_ERROR_DUPLICATE"),
        17: ("timeout", "CNDEV_ERROR_TIMEOUT"),
        18: ("lost", "CNDEV_ERROR_IN_PROBLEM"),
    },
)

#: ``cndevHealthSystem_t`` bits -> the subsystem a condition names.
_SYSTEMS: Final = {
    0x1: Subsystem.PCIE,
    0x2: Subsystem.INTERCONNECT,
    0x4: Subsystem.POWER,
    0x8: Subsystem.FIRMWARE,
    0x10: Subsystem.MEMORY,
    0x20: Subsystem.THERMAL,
    0x40: Subsystem.POWER,
    0x80: Subsystem.DRIVER,
}
#: ``cndevHealthResult_t``.
HEALTH_PASS, HEALTH_WARN, HEALTH_FAIL = 0, 10, 20


def load_cndev() -> object:
    """Load ``libcndev.so``: ``$ACCEL_CAMBRICON_LIB``, else ``$NEUWARE_HOME/lib64`` and ``lib``,
    ``/usr/local/neuware/lib64`` and ``lib``, then the loader's search."""
    return load_library(
        "cambricon",
        [LIBRARY],
        env_var="ACCEL_CAMBRICON_LIB",
        dirs=["$NEUWARE_HOME/lib64", "$NEUWARE_HOME/lib", "/usr/local/neuware/lib64", "/usr/local/neuware/lib"],
    )


@dataclass
class CndevRead:
    """What one native read gave: one reading per device, the driver version, the fields each
    device can never report (by index), and the problems of calls that failed this time."""

    readings: list[UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    never: dict[int, set[str]] = field(default_factory=dict)
    problems: list[AccelError] = field(default_factory=list)


class _Dev:
    """One device's calls: a field whose call is unsupported is remembered as never readable,
    one that fails otherwise as a problem of this read (the field is missed this time)."""

    def __init__(self, lib: NativeLibrary, out: CndevRead, index: int, handle: int) -> None:
        self.lib, self.out, self.index, self.handle = lib, out, index, handle
        self.never = out.never.setdefault(index, set())
        self.missed: set[str] = set()

    def get(self, fn: str, struct: ctypes.Structure, fields: Iterable[str]) -> bool:
        try:
            self.lib.call(fn, ctypes.byref(struct), self.handle, device_id=f"cndev device {self.index}")
        except NotSupportedError:
            self.never.update(fields)
            return False
        except AccelError as exc:
            if exc.code == "driver.timeout":
                raise
            self.out.problems.append(exc)
            self.missed.update(fields)
            return False
        return True


def _bus_id(p: PCIeInfoV2) -> str:
    return f"{p.domain:04x}:{p.bus:02x}:{p.device:02x}.{p.function:x}"


def _uuid(raw: ctypes.Array[ctypes.c_uint8]) -> str | None:
    text = bytes(raw).split(b"\0", 1)[0].decode("ascii", "replace").strip()
    return text or None


def read_cndev(lib: NativeLibrary, *, board_of: object = None) -> CndevRead:
    """Read every device ``lib`` (the real ``libcndev.so`` or its fake) reports.

    ``cndevInit`` and the device count must answer (their failure is raised: no device list);
    a device whose handle cannot be had is a problem and left out, a field whose call fails is
    missed this time.  Health is earned from ``cndevGetCardHealthStateV2`` (its incidents become
    conditions) and the ECC counters (uncorrected errors, code ``cambricon.mlu:ecc-error`` as on
    the CLI path).
    """
    out = CndevRead()
    lib.call("cndevInit", 0)
    info = versioned(CardInfo, CNDEV_VERSION_6)
    lib.call("cndevGetDeviceCount", ctypes.byref(info))
    for index in range(info.number):
        handle = c_int32()
        try:
            lib.call("cndevGetDeviceHandleByIndex", index, ctypes.byref(handle), device_id=f"cndev device {index}")
        except AccelError as exc:
            if exc.code == "driver.timeout":
                raise
            out.problems.append(exc)
            continue
        out.readings.append(_read_one(lib, out, index, handle.value))
    return out


def _read_one(lib: NativeLibrary, out: CndevRead, index: int, handle: int) -> UnitReading:
    dev = _Dev(lib, out, index, handle)
    r = UnitReading(index=index, fallback_id=f"card-{index}")
    name = lib.call("cndevGetCardNameStringByDevId", handle)
    r.model = name.decode("utf-8", "replace").strip() or None if isinstance(name, bytes) else None
    pcie = PCIeInfoV2()
    if dev.get("cndevGetPCIeInfoV2", pcie, ("pci.bus_id",)):
        r.bus_id = _bus_id(pcie)
        r.pci_vendor_id = f"{pcie.vendor:04x}"
        r.pci_device_id = f"{pcie.deviceId:04x}"
    uuid = versioned(UUIDInfo, CNDEV_VERSION_6)
    if dev.get("cndevGetUUID", uuid, ()):
        # Not the device's id: cnmon prints no UUID, and both paths must name a device alike.
        value = _uuid(uuid.uuid)
        if value:
            r.extras["cambricon.com/uuid"] = value
    ver = versioned(VersionInfo, CNDEV_VERSION_6)
    if dev.get("cndevGetVersionInfo", ver, ()):
        r.firmware = {"mlu": f"v{ver.mcuMajorVersion}.{ver.mcuMinorVersion}.{ver.mcuBuildVersion}"}
        driver = f"{ver.driverMajorVersion}.{ver.driverMinorVersion}.{ver.driverBuildVersion}"
        r.extras["cambricon.com/driver"] = driver
        out.driver_version = out.driver_version or driver
    mem = MemoryInfoV2()
    if dev.get("cndevGetMemoryUsageV2", mem, ("memory.total_bytes", "memory_used_bytes")):
        r.memory_total_bytes = mem.physicalMemoryTotal * 2**20
        r.memory_used_bytes = mem.physicalMemoryUsed * 2**20
        if mem.virtualMemoryTotal > 0:
            r.extras["cambricon.com/vMemoryTotalBytes"] = mem.virtualMemoryTotal * 2**20
    util = versioned(UtilizationInfo, CNDEV_VERSION_6)
    if dev.get("cndevGetDeviceUtilizationInfo", util, ("utilization_ratio",)):
        r.utilization_ratio = util.averageCoreUtilization / 100.0
    temp = versioned(TemperatureInfo, CNDEV_VERSION_6)
    if dev.get("cndevGetTemperatureInfo", temp, ("temperature_celsius",)):
        r.temperature_celsius = float(temp.chip)
    power = DevicePowerInfo()
    if dev.get("cndevGetDevicePowerInfo", power, ("power_watts", "power.enforced_watts")):
        r.power_watts = float(power.usage)
        r.power_limit_watts = float(power.cap) if power.cap > 0 else None
    ecc = versioned(ECCInfo, CNDEV_VERSION_6)
    ecc_read = dev.get("cndevGetECCInfo", ecc, ("ecc_errors_uncorrected_total",))
    if ecc_read:
        r.ecc_uncorrected_total = int(ecc.uncorrectedError)
        r.extras["cambricon.com/eccCorrected"] = int(ecc.correctedError)
        if ecc.uncorrectedError:
            r.conditions.append(
                condition(
                    Subsystem.MEMORY,
                    "EccErrors",
                    Severity.ERROR,
                    Action.INVESTIGATE,
                    f"CNDev reports {ecc.uncorrectedError} uncorrected ECC errors on card {index}",
                    code="cambricon.mlu:ecc-error",
                    count=int(ecc.uncorrectedError),
                )
            )
    health = CardHealthStateV2()
    health_read = dev.get("cndevGetCardHealthStateV2", health, ())
    if health_read:
        r.conditions.extend(_incidents(health, index))
    r.health_read = health_read or ecc_read
    r.dropped |= {f for f in dev.missed if "." not in f}
    r.extras["cambricon.com/card"] = index
    return r


def _incidents(h: CardHealthStateV2, index: int) -> list[HealthCondition]:
    out: list[HealthCondition] = []
    for inc in h.incidents[: min(h.incident_count, 64)]:
        if inc.health == HEALTH_PASS:
            continue
        sev = Severity.WARNING if inc.health == HEALTH_WARN else Severity.ERROR
        msg = bytes(inc.error.msg).split(b"\0", 1)[0].decode("utf-8", "replace").strip()
        out.append(
            condition(
                _SYSTEMS.get(inc.system, Subsystem.DEVICE),
                "HealthIncident",
                sev,
                Action.INVESTIGATE if sev is Severity.WARNING else Action.RESET_DEVICE,
                f"CNDev health incident on card {index}: {msg or 'no message'}",
                code=f"cambricon.cndev:incident-{inc.error.code}",
            )
        )
    if not out and (h.health == 0 or h.overallHealth == HEALTH_FAIL):
        out.append(
            condition(
                Subsystem.DEVICE,
                "CardUnhealthy",
                Severity.ERROR,
                Action.INVESTIGATE,
                f"CNDev reports card {index} unhealthy (overall {h.overallHealth}) without an incident",
                code="cambricon.cndev:unhealthy",
            )
        )
    return out


class EventReader:
    """CNDev's event subscription (XID errors) as :class:`DeviceEvent` conditions.

    Registered on first :meth:`poll`; a library without event support yields nothing.
    ``ids`` maps a CNDev device index to the accel device id.
    """

    def __init__(self, lib: NativeLibrary) -> None:
        self.lib = lib
        self.handle: ctypes.c_void_p | None = None
        self.unsupported = False

    def _register(self, count: int) -> None:
        handle = EventHandle()
        self.lib.call("cndevEventHandleCreate", ctypes.byref(handle))
        self.handle = handle
        for index in range(count):
            self.lib.call("cndevRegisterEvents", handle, EVENT_XID, index)

    def poll(self, timeout_s: float, ids: dict[int, str], now: datetime) -> list[DeviceEvent]:
        if self.unsupported or not ids:
            return []
        try:
            if self.handle is None:
                self._register(max(ids) + 1)
        except NotSupportedError:
            self.unsupported = True
            return []
        out: list[DeviceEvent] = []
        wait_ms = max(0, int(timeout_s * 1000))
        while True:
            data = versioned(EventData, CNDEV_VERSION_6)
            rc = self.lib.call(
                "cndevEventWait", self.handle, ctypes.byref(data), wait_ms, check=False, deadline_s=timeout_s + 5.0
            )
            if rc == CNDEV_ERROR_TIMEOUT:
                return out
            ERRORS.check(rc, fn="cndevEventWait")
            dev_id = ids.get(data.device)
            if dev_id is not None:
                out.append(
                    DeviceEvent(
                        device_id=dev_id,
                        timestamp=now,
                        condition=condition(
                            Subsystem.DEVICE,
                            "XidError",
                            Severity.ERROR,
                            Action.INVESTIGATE,
                            f"CNDev XID event {data.eventData} on card {data.device}",
                            code=f"cambricon.cndev:xid-{data.eventData}",
                        ),
                    )
                )
            wait_ms = 0

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(AccelError):
                self.lib.call("cndevEventHandleDestroy", self.handle, check=False)
            self.handle = None
