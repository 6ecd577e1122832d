"""Moore Threads through MTML (``libmtml.so.2`` / ``libmtml.so``): bindings and the native reader.

Every signature is restated from Moore Threads' own Python binding, PyPI ``mthreads-ml-py``
2.4.3, module ``pymtml.py`` (:data:`SOURCE`: the file's SHA-1), by how it calls each C function
(``fn(...)`` after ``_mtmlGetFunctionPointer(name)``); the PCI struct is its
``c_mtmlPciInfo_t`` field for field.  A test runs the real module's wrappers against
:class:`~._native_fake.FakeMtml` (see ``tests/mthreads/test_native_mthreads.py``).

MTML's handle chain: ``mtmlLibraryInit(&lib)`` -> ``mtmlLibraryCountDevice(lib, &n)`` ->
``mtmlLibraryInitDeviceByIndex(lib, i, &dev)`` -> ``mtmlDeviceInitGpu(dev, &gpu)`` /
``mtmlDeviceInitMemory(dev, &mem)``; handles are opaque pointers (``c_void_p`` here, which
takes the real module's typed pointers as well).  Memory is bytes; the power unit is not
documented in the binding (read as mW, NVML's convention; unconfirmed).

Health is earned from the memory ECC error counters (``mtmlMemoryGetEccErrorCounter``,
aggregate, DRAM), which ``mthreads-gmi`` does not print: a card whose counters answer is
healthy unless an uncorrectable error was counted (a critical ``EccUncorrectable`` condition,
vendor code ``mthreads.mtml:ecc-uncorrectable``); a card whose counters are not supported
stays ``unknown``.

Nothing here loads the library at import time: :func:`load_mtml` is called from the backend.
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
)

__all__ = [
    "ERRORS",
    "LIBRARY",
    "SOURCE",
    "TABLE",
    "MtmlRead",
    "PciInfo",
    "ecc_condition",
    "load_mtml",
    "read_mtml",
]

LIBRARY: Final = "libmtml.so"
#: pymtml.py of the mthreads-ml-py 2.4.3 wheel, named by the file's SHA-1.
SOURCE: Final = SignatureSource("pypi/mthreads-ml-py", "pymtml.py", "71077231b888579c355bd5dbcf9b414f064f37d5")

NAME_SIZE: Final = 32  # MTML_DEVICE_NAME_BUFFER_SIZE
UUID_SIZE: Final = 48  # MTML_DEVICE_UUID_BUFFER_SIZE
SERIAL_SIZE: Final = 64  # MTML_DEVICE_SERIAL_NUMBER_BUFFER_SIZE
BIOS_SIZE: Final = 64  # MTML_DEVICE_MTBIOS_VERSION_BUFFER_SIZE
DRIVER_SIZE: Final = 80  # MTML_DRIVER_VERSION_BUFFER_SIZE (MTML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE)
SBDF_SIZE: Final = 32  # MTML_DEVICE_PCI_SBDF_BUFFER_SIZE
ERROR_CORRECTED: Final = 0  # MTML_MEMORY_ERROR_TYPE_CORRECTED
ERROR_UNCORRECTED: Final = 1  # MTML_MEMORY_ERROR_TYPE_UNCORRECTED
VOLATILE_ECC: Final = 0  # MTML_VOLATILE_ECC
AGGREGATE_ECC: Final = 1  # MTML_AGGREGATE_ECC
LOCATION_DRAM: Final = 0x1  # MTML_MEMORY_LOCATION_DRAM (the only location pymtml defines)

c_uint = ctypes.c_uint
Handle = ctypes.c_void_p


class PciInfo(ctypes.Structure):
    """``mtmlPciInfo_t`` (pymtml ``c_mtmlPciInfo_t``)."""

    _fields_ = [
        ("sbdf", ctypes.c_char * SBDF_SIZE),
        ("segment", c_uint),
        ("bus", c_uint),
        ("device", c_uint),
        ("pciDeviceId", c_uint),
        ("pciSubsystemId", c_uint),
        ("busWidth", c_uint),
        ("pciMaxSpeed", ctypes.c_float),
        ("pciCurSpeed", ctypes.c_float),
        ("pciMaxWidth", c_uint),
        ("pciCurWidth", c_uint),
        ("pciMaxGen", c_uint),
        ("pciCurGen", c_uint),
        ("rsvd", ctypes.c_int * 6),
    ]


def _fn(name: str, *argtypes: object) -> NativeFunction:
    return NativeFunction(name, tuple(argtypes), ctypes.c_int, SOURCE)


_P = ctypes.POINTER
#: An out-parameter holding a handle (``byref(handle)``).
OutHandle = ctypes.c_void_p

TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("mtmlLibraryInit", OutHandle),
    _fn("mtmlLibraryShutDown", Handle),
    _fn("mtmlLibraryCountDevice", Handle, _P(c_uint)),
    _fn("mtmlLibraryInitDeviceByIndex", Handle, c_uint, OutHandle),
    _fn("mtmlLibraryInitSystem", Handle, OutHandle),
    _fn("mtmlLibraryFreeSystem", Handle),
    _fn("mtmlLibraryFreeDevice", Handle),
    _fn("mtmlSystemGetDriverVersion", Handle, ctypes.c_char_p, c_uint),
    _fn("mtmlDeviceGetIndex", Handle, _P(c_uint)),
    _fn("mtmlDeviceGetName", Handle, ctypes.c_char_p, c_uint),
    _fn("mtmlDeviceGetUUID", Handle, ctypes.c_void_p, c_uint),
    _fn("mtmlDeviceGetSerialNumber", Handle, c_uint, ctypes.c_char_p),
    _fn("mtmlDeviceGetMtBiosVersion", Handle, ctypes.c_char_p, c_uint),
    _fn("mtmlDeviceGetPciInfo", Handle, _P(PciInfo)),
    _fn("mtmlDeviceGetPowerUsage", Handle, _P(c_uint)),
    _fn("mtmlDeviceInitMemory", Handle, OutHandle),
    _fn("mtmlDeviceFreeMemory", Handle),
    _fn("mtmlMemoryGetTotal", Handle, _P(ctypes.c_uint64)),
    _fn("mtmlMemoryGetUsed", Handle, _P(ctypes.c_uint64)),
    _fn("mtmlMemoryGetEccMode", Handle, _P(c_uint), _P(c_uint)),
    # (memory, mtmlMemoryErrorType_t, mtmlEccCounterType_t, mtmlMemoryLocation_t, &count)
    _fn("mtmlMemoryGetEccErrorCounter", Handle, c_uint, c_uint, c_uint, _P(ctypes.c_uint64)),
    _fn("mtmlDeviceInitGpu", Handle, OutHandle),
    _fn("mtmlDeviceFreeGpu", Handle),
    _fn("mtmlGpuGetUtilization", Handle, _P(c_uint)),
    _fn("mtmlGpuGetTemperature", Handle, _P(c_uint)),
)

#: ``mtmlReturn_t`` (pymtml ``MTML_ERROR_*``).
ERRORS: Final = ErrorTable(
    "mthreads.mtml",
    {
        1: ("driver-not-loaded", "MTML_ERROR_DRIVER_NOT_LOADED"),
        2: ("unknown", "MTML_ERROR_DRIVER_FAILURE"),
        3: ("invalid-argument", "MTML_ERROR_INVALID_ARGUMENT"),
        4: ("not-supported", "MTML_ERROR_NOT_SUPPORTED"),
        5: ("no-permission", "MTML_ERROR_NO_PERMISSION"),
        6: ("invalid-argument", "MTML_ERROR_INSUFFICIENT_SIZE"),
        7: ("not-found", "MTML_ERROR_NOT_FOUND"),
        8: ("unknown", "MTML_ERROR_INSUFFICIENT_MEMORY"),
        9: ("version", "MTML_ERROR_DRIVER_TOO_OLD"),
        10: ("version", "MTML_ERROR_DRIVER_TOO_NEW"),
        11: ("timeout", "MTML_ERROR_TIMEOUT"),
        12: ("unknown", "MTML_ERROR_RESOURCE_IS_BUSY"),
        999: ("unknown", "MTML_ERROR_UNKNOWN"),
    },
)


def load_mtml() -> object:
    """Load MTML: ``$ACCEL_MTHREADS_LIB``, else ``libmtml.so.2`` then ``libmtml.so`` by the
    loader's search (the order of the vendor's binding)."""
    return load_library(
        "mthreads", ["libmtml.so.2", LIBRARY], env_var="ACCEL_MTHREADS_LIB", dirs=["/usr/lib/x86_64-linux-gnu/musa"]
    )


@dataclass
class MtmlRead:
    readings: list[UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    problems: list[AccelError] = field(default_factory=list)


def _text(buf: object) -> str | None:
    raw = bytes(buf) if not isinstance(buf, bytes) else buf  # type: ignore[call-overload]
    value = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return value or None


def read_mtml(lib: NativeLibrary) -> MtmlRead:
    """Read every GPU ``lib`` (the real MTML or its fake) reports; frees every handle it took."""
    out = MtmlRead()
    handle = Handle()
    lib.call("mtmlLibraryInit", ctypes.byref(handle))
    try:
        system = Handle()
        if NativeCalls(lib, out.problems, "system")("mtmlLibraryInitSystem", handle, ctypes.byref(system)):
            buf = ctypes.create_string_buffer(DRIVER_SIZE)
            if NativeCalls(lib, out.problems, "system")("mtmlSystemGetDriverVersion", system, buf, DRIVER_SIZE):
                out.driver_version = _text(buf.raw)
            lib.call("mtmlLibraryFreeSystem", system, check=False)
        count = c_uint()
        lib.call("mtmlLibraryCountDevice", handle, ctypes.byref(count))
        for i in range(count.value):
            dev = Handle()
            call = NativeCalls(lib, out.problems, f"MTML device {i}")
            if not call("mtmlLibraryInitDeviceByIndex", handle, i, ctypes.byref(dev)):
                continue
            try:
                out.readings.append(_read_device(lib, call, dev, i))
            finally:
                lib.call("mtmlLibraryFreeDevice", dev, check=False)
    finally:
        lib.call("mtmlLibraryShutDown", handle, check=False)
    return out


def _read_device(lib: NativeLibrary, call: NativeCalls, dev: ctypes.c_void_p, position: int) -> UnitReading:
    r = UnitReading(index=position)
    idx = c_uint()
    if call("mtmlDeviceGetIndex", dev, ctypes.byref(idx)):
        r.index = idx.value
    name = ctypes.create_string_buffer(NAME_SIZE)
    if call("mtmlDeviceGetName", dev, name, NAME_SIZE):
        r.model = _text(name.raw)
    uuid = (ctypes.c_char * UUID_SIZE)()
    if call("mtmlDeviceGetUUID", dev, ctypes.byref(uuid), UUID_SIZE):
        r.uuid = _text(uuid.raw)
    serial = ctypes.create_string_buffer(SERIAL_SIZE)
    if call("mtmlDeviceGetSerialNumber", dev, SERIAL_SIZE, serial):
        r.serial_number = _text(serial.raw)
    bios = ctypes.create_string_buffer(BIOS_SIZE)
    if call("mtmlDeviceGetMtBiosVersion", dev, bios, BIOS_SIZE) and _text(bios.raw):
        r.firmware["mtbios"] = _text(bios.raw) or ""
    pci = PciInfo()
    if call("mtmlDeviceGetPciInfo", dev, ctypes.byref(pci)):
        r.bus_id = f"{pci.segment:04x}:{pci.bus:02x}:{pci.device:02x}.0"
        sbdf = _text(pci.sbdf)
        if sbdf and "." in sbdf:
            r.bus_id = f"{r.bus_id[:-2]}.{sbdf.rsplit('.', 1)[1].lower()}"
        r.pci_device_id = f"{pci.pciDeviceId:04x}" if pci.pciDeviceId else None
        r.link_width_current = pci.pciCurWidth or None
        r.link_width_max = pci.pciMaxWidth or None
    power = c_uint()
    if call("mtmlDeviceGetPowerUsage", dev, ctypes.byref(power)):
        r.power_watts = power.value / 1000.0
    mem = Handle()
    if call("mtmlDeviceInitMemory", dev, ctypes.byref(mem)):
        total, used = ctypes.c_uint64(), ctypes.c_uint64()
        if call("mtmlMemoryGetTotal", mem, ctypes.byref(total)):
            r.memory_total_bytes = total.value
        if call("mtmlMemoryGetUsed", mem, ctypes.byref(used)):
            r.memory_used_bytes = used.value
        cur, pending = c_uint(), c_uint()
        if call("mtmlMemoryGetEccMode", mem, ctypes.byref(cur), ctypes.byref(pending)):
            r.ecc_enabled = bool(cur.value)
            r.ecc_pending = bool(pending.value) if pending.value != cur.value else None
        _ecc_counters(call, mem, r)
        lib.call("mtmlDeviceFreeMemory", mem, check=False)
    gpu = Handle()
    if call("mtmlDeviceInitGpu", dev, ctypes.byref(gpu)):
        util, temp = c_uint(), c_uint()
        if call("mtmlGpuGetUtilization", gpu, ctypes.byref(util)):
            r.utilization_ratio = util.value / 100.0
        if call("mtmlGpuGetTemperature", gpu, ctypes.byref(temp)):
            r.temperature_celsius = float(temp.value)
        lib.call("mtmlDeviceFreeGpu", gpu, check=False)
    return r


def _ecc_counters(call: NativeCalls, mem: ctypes.c_void_p, r: UnitReading) -> None:
    """Health is earned: the aggregate DRAM uncorrected counter must answer."""
    uncorrected, corrected = ctypes.c_uint64(), ctypes.c_uint64()
    args = (AGGREGATE_ECC, LOCATION_DRAM)
    if not call("mtmlMemoryGetEccErrorCounter", mem, ERROR_UNCORRECTED, *args, ctypes.byref(uncorrected)):
        return
    r.health_read = True
    r.ecc_uncorrected_total = uncorrected.value
    r.extras["mthreads.com/eccUncorrected"] = uncorrected.value
    if call("mtmlMemoryGetEccErrorCounter", mem, ERROR_CORRECTED, *args, ctypes.byref(corrected)):
        r.extras["mthreads.com/eccCorrected"] = corrected.value
    if uncorrected.value:
        r.conditions.append(ecc_condition(uncorrected.value))


def ecc_condition(uncorrected: int) -> HealthCondition:
    """The condition of a nonzero aggregate uncorrectable DRAM ECC count."""
    return condition(
        Subsystem.MEMORY,
        "EccUncorrectable",
        Severity.CRITICAL,
        Action.DRAIN_AND_RESET,
        f"MTML counts {uncorrected} uncorrectable DRAM ECC errors (aggregate)",
        code="mthreads.mtml:ecc-uncorrectable",
    )
