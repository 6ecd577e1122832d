"""MetaX's management library, MXSML (``libmxsml.so``), read with ctypes.

Signatures, struct layouts, enums and units are restated from the public ctypes binding in
gpustack/runtime (``gpustack_runtime/detector/pymxsml/__init__.py`` at commit
88026d62a1c16d644fae0ee83943767c897cf9fb, and its user ``gpustack_runtime/detector/metax.py``
for the units); no vendor header was read (see ``docs/native-signatures.md``).  Conventions:

* every call is indexed by ``unsigned int device_id`` (no handles) and returns
  ``mxSmlReturn_t`` (an ``unsigned int``, ``0`` = ``MXSML_SUCCESS``), except
  ``mxSmlGetDeviceCount``, which returns the count itself;
* strings are caller buffers with an in/out ``unsigned int *size``;
* ``mxSmlGetBoardPowerInfo`` is a two-call read: with too small a ``size`` it answers
  ``MXSML_ERROR_INSUFFICIENT_SIZE`` (10) and sets ``size`` to the number of board power ways;
* units: memory in KiB, temperature in hundredths of a degree Celsius, power in mW,
  utilization in percent.

MXSML structs carry no version field.  Nothing here loads the library at import time:
:func:`load_mxsml` is called when a backend opens.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from accel.errors import AccelError, NotSupportedError
from accel.model import Action, HealthCondition, MemoryKind, Severity, Subsystem
from accel.toolkit import (
    ErrorTable,
    Matrix,
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
    "TOPOLOGY_CODES",
    "MxsmlRead",
    "ecc_condition",
    "load_mxsml",
    "read_mxsml",
]

LIBRARY: Final = "libmxsml.so"
ENV_VAR: Final = "ACCEL_METAX_LIB"
#: Where the driver packages install the library (gpustack-runtime's search order), before the
#: loader's own search.
LIBRARY_DIRS: Final = ("/opt/mxdriver/lib", "/opt/maca/lib", "/opt/mxn100/lib")

SOURCE: Final = SignatureSource(
    "gpustack/runtime", "gpustack_runtime/detector/pymxsml/__init__.py", "88026d62a1c16d644fae0ee83943767c897cf9fb"
)

# Buffer sizes (the binding's MXSML_*_SIZE constants).
BDF_SIZE: Final = 32
UUID_SIZE: Final = 96
NAME_SIZE: Final = 32
VERSION_SIZE: Final = 64
REASON_SIZE: Final = 64

# Enum values the reader passes.
VERSION_BIOS: Final = 0
VERSION_DRIVER: Final = 1
USAGE_XCORE: Final = 4
TEMPERATURE_HOTSPOT: Final = 0

SUCCESS: Final = 0
INSUFFICIENT_SIZE: Final = 10
#: ``mxSmlGpuTopologyLevel_t`` as the ``mx-smi topo -m`` code of the same relation (``MX`` for
#: METAXLINK, the NVML-style PCIe codes for the rest); INTERNAL (0) is the diagonal, UNDEFINED
#: (7) no relation.
TOPOLOGY_CODES: Final[dict[int, str]] = {0: "X", 1: "PIX", 2: "PXB", 3: "PHB", 4: "NODE", 5: "MX", 6: "SYS"}


class DeviceInfo(ctypes.Structure):
    """``mxSmlDeviceInfo_t``."""

    _fields_ = [
        ("deviceId", ctypes.c_uint),
        ("type", ctypes.c_uint),
        ("bdfId", ctypes.c_char * BDF_SIZE),
        ("gpuId", ctypes.c_uint),
        ("nodeId", ctypes.c_uint),
        ("uuid", ctypes.c_char * UUID_SIZE),
        ("brand", ctypes.c_uint),
        ("mode", ctypes.c_uint),
        ("deviceName", ctypes.c_char * NAME_SIZE),
    ]


class MemoryInfo(ctypes.Structure):
    """``mxSmlMemoryInfo_t`` (KiB)."""

    _fields_ = [
        ("visVramTotal", ctypes.c_long),
        ("visVramUse", ctypes.c_long),
        ("vramTotal", ctypes.c_long),
        ("vramUse", ctypes.c_long),
        ("xttTotal", ctypes.c_long),
        ("xttUse", ctypes.c_long),
    ]


class BoardWayElectricInfo(ctypes.Structure):
    """``mxSmlBoardWayElectricInfo_t``: one power way of the board (mV, mA, mW)."""

    _fields_ = [("voltage", ctypes.c_uint), ("current", ctypes.c_uint), ("power", ctypes.c_uint)]


class EccErrorCount(ctypes.Structure):
    """``mxSmlEccErrorCount_t``."""

    _fields_ = [
        ("sramCE", ctypes.c_uint),
        ("sramUE", ctypes.c_uint),
        ("dramCE", ctypes.c_uint),
        ("dramUE", ctypes.c_uint),
        ("retiredPage", ctypes.c_uint),
    ]


class UnavailableReason(ctypes.Structure):
    """``mxSmlDeviceUnavailableReasonInfo_t``."""

    _fields_ = [("unavailableCode", ctypes.c_int), ("unavailableReason", ctypes.c_char * REASON_SIZE)]


_U = ctypes.c_uint
_PU = ctypes.POINTER(ctypes.c_uint)
_PI = ctypes.POINTER(ctypes.c_int)
_PC = ctypes.POINTER(ctypes.c_char)
_RET = ctypes.c_uint  # mxSmlReturn_t


def _fn(name: str, argtypes: tuple[Any, ...], restype: Any = _RET) -> NativeFunction:
    return NativeFunction(name, argtypes, restype, SOURCE)


TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("mxSmlInit", ()),
    _fn("mxSmlGetMacaVersion", (_PC, _PU)),
    _fn("mxSmlGetDeviceCount", (), ctypes.c_uint),  # the count, not a status
    _fn("mxSmlGetDeviceInfo", (_U, ctypes.POINTER(DeviceInfo))),
    _fn("mxSmlGetDeviceVersion", (_U, _U, _PC, _PU)),
    _fn("mxSmlGetMemoryInfo", (_U, ctypes.POINTER(MemoryInfo))),
    _fn("mxSmlGetDeviceIpUsage", (_U, _U, _PI)),
    _fn("mxSmlGetTemperatureInfo", (_U, _U, _PI)),
    _fn("mxSmlGetBoardPowerInfo", (_U, _PU, ctypes.POINTER(BoardWayElectricInfo))),
    _fn("mxSmlGetBoardPowerLimit", (_U, _PU)),
    _fn("mxSmlGetEccState", (_U, _PU)),
    _fn("mxSmlGetTotalEccErrors", (_U, ctypes.POINTER(EccErrorCount))),
    _fn("mxSmlGetDeviceUnavailableReason", (_U, ctypes.POINTER(UnavailableReason))),
    _fn("mxSmlGetDeviceTopology", (_U, _U, _PU)),
)

#: ``mxSmlReturn_t`` (the binding's MXSML_ERROR_* values).
ERRORS: Final = ErrorTable(
    "metax.mxsml",
    {
        1: ("unknown", "FAILURE"),
        2: ("not-found", "NO_DEVICE"),
        3: ("not-supported", "OPERATION_NOT_SUPPORT"),
        4: ("unknown", "SYSFS_ERROR"),
        5: ("unknown", "SYSFS_WRITE_ERROR"),
        6: ("not-found", "INVALID_DEVICE_ID"),
        7: ("not-found", "INVALID_DID_ID"),
        8: ("no-permission", "PERMISSION_DENIED"),
        9: ("invalid-argument", "INVALID_INPUT"),
        10: ("invalid-argument", "INSUFFICIENT_SIZE"),
        12: ("unknown", "IO_CONTROL_FAILURE"),
        13: ("unknown", "MMAP_FAILURE"),
        14: ("unknown", "UN_MMAP_FAILURE"),
        15: ("invalid-argument", "INVALID_INPUT_FOR_MMAP"),
        18: ("not-found", "TARGET_VF_NOT_FOUND"),
        19: ("invalid-argument", "INVALID_FREQUENCY"),
        20: ("lost", "FLR_NOT_READY"),
        21: ("driver-not-loaded", "OPEN_DEVICE_FILE_FAILURE"),
        22: ("unknown", "CLOSE_DEVICE_FILE_FAILURE"),
        23: ("unknown", "BUSY_DEVICE"),
        24: ("unknown", "MMIO_NOT_ENOUGH"),
        25: ("unknown", "GET_PCI_BRIDGE_FAILURE"),
        26: ("driver-not-loaded", "LOAD_DLL_FAILURE"),
    },
)


def load_mxsml() -> object:
    """Load ``libmxsml.so`` (``$ACCEL_METAX_LIB``, the driver directories, the loader)."""
    return load_library("metax", [LIBRARY], env_var=ENV_VAR, dirs=LIBRARY_DIRS)


@dataclass
class MxsmlRead:
    """What one pass over MXSML read: the units (as the ``mx-smi`` parser gives them), the
    versions, the topology as a ``topo -m`` matrix (``None`` when the library gave none),
    the fields it can never read per device index, and the calls that failed."""

    readings: list[UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    maca_version: str | None = None
    bios_version: str | None = None
    topology: Matrix | None = None
    never: dict[int, set[str]] = field(default_factory=dict)
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: bytes) -> str | None:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return text or None


def _string(lib: NativeLibrary, name: str, *args: Any, device_id: str | None = None) -> str | None:
    buf = ctypes.create_string_buffer(VERSION_SIZE)
    size = ctypes.c_uint(VERSION_SIZE)
    lib.call(name, *args, buf, ctypes.byref(size), device_id=device_id)
    return _text(buf.raw)


class _Device:
    """One device's calls: a failure other than NOT_SUPPORTED is a problem of the read, the
    field stays empty "this time"; NOT_SUPPORTED makes it "never"."""

    def __init__(self, lib: NativeLibrary, index: int, out: MxsmlRead) -> None:
        self.lib, self.index, self.out = lib, index, out
        self.did = str(index)
        self.never: set[str] = out.never.setdefault(index, set())
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


def _unit(lib: NativeLibrary, index: int, out: MxsmlRead) -> UnitReading | None:
    dev = _Device(lib, index, out)
    info = DeviceInfo()
    if not dev.read("mxSmlGetDeviceInfo", "pci.bus_id", ctypes.byref(info)):
        return None  # no identity: the device cannot be named (the problem says why)
    r = UnitReading(index=index, model=_text(info.deviceName), bus_id=_text(info.bdfId), uuid=_text(info.uuid))
    r.is_virtual_function = info.mode == 2 or None
    mem = MemoryInfo()
    if dev.read("mxSmlGetMemoryInfo", "memory", ctypes.byref(mem)):
        r.memory_kind = MemoryKind.HBM
        r.memory_total_bytes, r.memory_used_bytes = mem.vramTotal * 1024, mem.vramUse * 1024
    usage = ctypes.c_int()
    if dev.read("mxSmlGetDeviceIpUsage", "utilization_ratio", USAGE_XCORE, ctypes.byref(usage)):
        r.utilization_ratio = usage.value / 100
    temp = ctypes.c_int()
    if dev.read("mxSmlGetTemperatureInfo", "temperature_celsius", TEMPERATURE_HOTSPOT, ctypes.byref(temp)):
        r.temperature_celsius = temp.value / 100
    r.power_watts = _board_power_w(dev)
    limit = ctypes.c_uint()
    if dev.read("mxSmlGetBoardPowerLimit", "power.enforced_watts", ctypes.byref(limit)):
        r.power_limit_watts = limit.value / 1000
    _health(dev, r)
    if dev.missed:
        r.dropped.add("*")
    return r


def _board_power_w(dev: _Device) -> float | None:
    """The sum of the board's power ways (the two-call read)."""
    size = ctypes.c_uint(0)
    try:
        rc = dev.lib.call(
            "mxSmlGetBoardPowerInfo", dev.index, ctypes.byref(size), (BoardWayElectricInfo * 0)(),
            device_id=dev.did, check=False,
        )  # fmt: skip
        if rc not in (SUCCESS, INSUFFICIENT_SIZE):
            assert dev.lib.errors is not None
            dev.lib.errors.check(rc, fn="mxSmlGetBoardPowerInfo", device_id=dev.did)
    except NotSupportedError:
        dev.never.add("power_watts")
        return None
    except AccelError as exc:
        dev.out.problems.append(exc)
        dev.missed = True
        return None
    if size.value == 0:
        return None
    ways = (BoardWayElectricInfo * size.value)()
    if not dev.read("mxSmlGetBoardPowerInfo", "power_watts", ctypes.byref(size), ways):
        return None
    total_mw: int = sum(int(w.power) for w in ways[: size.value])
    return total_mw / 1000


def _health(dev: _Device, r: UnitReading) -> None:
    """Health is earned: the ECC counters or the unavailable reason must answer."""
    ecc = EccErrorCount()
    if dev.read("mxSmlGetTotalEccErrors", "ecc_uncorrected_total", ctypes.byref(ecc)):
        r.health_read = True
        r.ecc_uncorrected_total = ecc.sramUE + ecc.dramUE
        r.extras.update(
            {
                "metax-tech.com/eccSramCorrected": ecc.sramCE,
                "metax-tech.com/eccSramUncorrected": ecc.sramUE,
                "metax-tech.com/eccDramCorrected": ecc.dramCE,
                "metax-tech.com/eccDramUncorrected": ecc.dramUE,
                "metax-tech.com/retiredPages": ecc.retiredPage,
            }
        )
        if ecc.dramUE or ecc.sramUE:
            r.conditions.append(ecc_condition(ecc))
    state = ctypes.c_uint()
    if dev.read("mxSmlGetEccState", "ecc_enabled", ctypes.byref(state)):
        r.ecc_enabled = bool(state.value)
    reason = UnavailableReason()
    if dev.read("mxSmlGetDeviceUnavailableReason", None, ctypes.byref(reason)):
        r.health_read = True
        if reason.unavailableCode != 0:
            r.conditions.append(_unavailable_condition(reason.unavailableCode, _text(reason.unavailableReason)))


def ecc_condition(ecc: EccErrorCount) -> HealthCondition:
    """The condition of uncorrectable ECC counts."""
    return condition(
        Subsystem.MEMORY,
        "EccUncorrectable",
        Severity.CRITICAL,
        Action.DRAIN_AND_RESET,
        f"MXSML counts {ecc.dramUE} uncorrectable DRAM and {ecc.sramUE} uncorrectable SRAM ECC errors "
        f"({ecc.retiredPage} retired pages)",
        code="metax.mxsml:ecc-uncorrectable",
    )


def _unavailable_condition(code: int, reason: str | None) -> HealthCondition:
    return condition(
        Subsystem.DEVICE,
        "DeviceUnavailable",
        Severity.CRITICAL,
        Action.INVESTIGATE,
        f"MXSML reports the device unavailable (code {code}: {reason or 'no reason given'})",
        code=f"metax.mxsml:unavailable-{code}",
    )


def _topology(lib: NativeLibrary, indices: Sequence[int], out: MxsmlRead) -> Matrix | None:
    labels = tuple(f"GPU{i}" for i in indices)
    codes: dict[tuple[str, str], str] = {}
    level = ctypes.c_uint()
    for a in indices:
        for b in indices:
            if a == b:
                continue
            try:
                lib.call("mxSmlGetDeviceTopology", a, b, ctypes.byref(level), device_id=str(a))
            except NotSupportedError:
                return None
            except AccelError as exc:
                out.problems.append(exc)
                return None
            code = TOPOLOGY_CODES.get(level.value)
            if code is not None:
                codes[(f"GPU{a}", f"GPU{b}")] = code
    return Matrix(labels=labels, codes=codes)


def read_mxsml(lib: NativeLibrary) -> MxsmlRead:
    """One full read: init, versions, each device, the topology.  A device whose identity
    cannot be read is left out with a problem; any other failed call leaves its field empty."""
    out = MxsmlRead()
    lib.call("mxSmlInit")
    with contextlib.suppress(NotSupportedError):
        out.maca_version = _string(lib, "mxSmlGetMacaVersion")
    count = int(lib.call("mxSmlGetDeviceCount", check=False))
    for index in range(count):
        unit = _unit(lib, index, out)
        if unit is not None:
            out.readings.append(unit)
    if out.readings:
        first = out.readings[0].index or 0
        for attr, unit_id in (("driver_version", VERSION_DRIVER), ("bios_version", VERSION_BIOS)):
            try:
                setattr(out, attr, _string(lib, "mxSmlGetDeviceVersion", first, unit_id, device_id=str(first)))
            except NotSupportedError:
                pass
            except AccelError as exc:
                out.problems.append(exc)
        out.topology = _topology(lib, [r.index for r in out.readings if r.index is not None], out)
    return out
