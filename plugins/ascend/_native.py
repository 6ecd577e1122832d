"""Huawei Ascend through DCMI (``libdcmi.so``): the bindings and the reader of the native path.

Every signature is restated from the DCMI header Huawei publishes in ``hicann/driver``
(:data:`SOURCE`); the structs are the header's, field for field (``dcmi_ecc_info`` is allocated
with the two trailing fields mind-cluster's copy of the header adds, so an older or newer library
never writes past it).  DCMI's conventions: chips are ``(card_id, device_id)`` pairs, not
handles; calls return ``int``, ``0`` = ``DCMI_OK``, errors ``-8000 - n``; ``dcmi_get_device_logic_id``
puts its out-pointer first.  Memory is MB (read as MiB, as ``npu-smi`` prints it), power 0.1 W,
temperature degrees Celsius, utilisation percent.

The reader turns what DCMI answers into the same :class:`~._parse.NpuChip` /
:class:`~._parse.ChipMapping` records the ``npu-smi`` parser gives, so both paths go through one
assembly (ids, logic ids, health rules, board relation); health codes 0-3 are DCMI's (ok, minor,
major, critical), which ``npu-smi`` prints as OK / Warning / Alarm / Critical.

Nothing here loads the library at import time: :func:`load_dcmi` is called from the backend.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Final

from accel.errors import AccelError, NotSupportedError
from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    ErrorTable,
    NativeCalls,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    SourceLine,
    condition,
    load_library,
)

from ._parse import ChipMapping, NpuChip

__all__ = ["ERRORS", "LIBRARY", "SOURCE", "TABLE", "DcmiChip", "DcmiRead", "load_dcmi", "read_dcmi"]

LIBRARY: Final = "libdcmi.so"
SOURCE: Final = SignatureSource(
    "hicann/driver", "src/custom/include/dcmi_interface_api.h", "999c25d7406900c7c55e747bbc59a8817f8d5650"
)

MAX_CARDS: Final = 64  # MAX_CARD_NUM
MAX_ERROR_CODES: Final = 128
MAX_EVENTS: Final = 128
#: enum dcmi_device_type, for dcmi_get_device_ecc_info.
ECC_DDR, ECC_HBM = 0, 2
#: dcmi_get_device_utilization_rate input_type 2: AI core.
UTIL_AICORE: Final = 2
#: Health codes (dcmi_get_device_health) as npu-smi prints them.
HEALTH_NAMES: Final = {0: "OK", 1: "Warning", 2: "Alarm", 3: "Critical"}
#: enum dcmi_topo_type -> the npu-smi topology code (SELF and BUTT give no code).
TOPO_CODES: Final = {1: "SYS", 2: "PHB", 3: "HCCS", 4: "PXB", 5: "PIX", 6: "SIO", 7: "HCCS_SW"}

c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_ulonglong = ctypes.c_ulonglong


class ChipInfo(ctypes.Structure):
    """``struct dcmi_chip_info``."""

    _fields_ = [
        ("chip_type", ctypes.c_ubyte * 32),
        ("chip_name", ctypes.c_ubyte * 32),
        ("chip_ver", ctypes.c_ubyte * 32),
        ("aicore_cnt", c_uint),
    ]


class PcieInfoAll(ctypes.Structure):
    """``struct dcmi_pcie_info_all`` (64 bytes)."""

    _fields_ = [
        ("venderid", c_uint),
        ("subvenderid", c_uint),
        ("deviceid", c_uint),
        ("subdeviceid", c_uint),
        ("domain", c_int),
        ("bdf_busid", c_uint),
        ("bdf_deviceid", c_uint),
        ("bdf_funcid", c_uint),
        ("reserve", ctypes.c_ubyte * 32),
    ]


class HbmInfo(ctypes.Structure):
    """``struct dcmi_hbm_info``; memory in MB."""

    _fields_ = [
        ("memory_size", c_ulonglong),
        ("freq", c_uint),
        ("memory_usage", c_ulonglong),
        ("temp", c_int),
        ("bandwith_util_rate", c_uint),
    ]


class MemoryInfoV3(ctypes.Structure):
    """``struct dcmi_get_memory_info_stru`` (96 bytes); memory in MB, huge page size in KB."""

    _fields_ = [
        ("memory_size", c_ulonglong),
        ("memory_available", c_ulonglong),
        ("freq", c_uint),
        ("hugepagesize", ctypes.c_ulong),
        ("hugepages_total", ctypes.c_ulong),
        ("hugepages_free", ctypes.c_ulong),
        ("utiliza", c_uint),
        ("reserve", ctypes.c_ubyte * 60),
    ]


class EccInfo(ctypes.Structure):
    """``struct dcmi_ecc_info``: hicann/driver's 7 fields plus the 2 mind-cluster's header adds."""

    _fields_ = [
        ("enable_flag", c_int),
        ("single_bit_error_cnt", c_uint),
        ("double_bit_error_cnt", c_uint),
        ("total_single_bit_error_cnt", c_uint),
        ("total_double_bit_error_cnt", c_uint),
        ("single_bit_isolated_pages_cnt", c_uint),
        ("double_bit_isolated_pages_cnt", c_uint),
        ("single_bit_next_isolated_pages_cnt", c_uint),
        ("double_bit_next_isolated_pages_cnt", c_uint),
    ]


class DmsFaultEvent(ctypes.Structure):
    """``struct dcmi_dms_fault_event``."""

    _fields_ = [
        ("event_id", c_uint),
        ("deviceid", ctypes.c_ushort),
        ("node_type", ctypes.c_ubyte),
        ("node_id", ctypes.c_ubyte),
        ("sub_node_type", ctypes.c_ubyte),
        ("sub_node_id", ctypes.c_ubyte),
        ("severity", ctypes.c_ubyte),
        ("assertion", ctypes.c_ubyte),
        ("event_serial_num", c_int),
        ("notify_serial_num", c_int),
        ("alarm_raised_time", c_ulonglong),
        ("event_name", ctypes.c_char * 256),
        ("additional_info", ctypes.c_char * 32),
        ("os_id", ctypes.c_ubyte),
        ("resv_1", ctypes.c_ubyte * 1),
        ("node_type_ex", ctypes.c_ushort),
        ("sub_node_type_ex", ctypes.c_ushort),
        ("resv_2", ctypes.c_ubyte * 2),
        ("resv", ctypes.c_ubyte * 24),
    ]


class _EventUnion(ctypes.Union):
    _fields_ = [("dms_event", DmsFaultEvent)]


class Event(ctypes.Structure):
    """``struct dcmi_event``: ``type`` 0 (DCMI_DMS_FAULT_EVENT) and the event."""

    _fields_ = [("type", c_int), ("event_t", _EventUnion)]


def _fn(name: str, *argtypes: object) -> NativeFunction:
    return NativeFunction(name, tuple(argtypes), c_int, SOURCE)


_P = ctypes.POINTER
_CARD_DEV = (c_int, c_int)

TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("dcmi_init"),
    _fn("dcmi_get_driver_version", ctypes.c_char_p, c_uint),
    _fn("dcmi_get_card_list", _P(c_int), _P(c_int), c_int),
    _fn("dcmi_get_device_num_in_card", c_int, _P(c_int)),
    _fn("dcmi_get_device_logic_id", _P(c_int), c_int, c_int),
    _fn("dcmi_get_device_chip_info", *_CARD_DEV, _P(ChipInfo)),
    _fn("dcmi_get_device_pcie_info_v2", *_CARD_DEV, _P(PcieInfoAll)),
    _fn("dcmi_get_device_health", *_CARD_DEV, _P(c_uint)),
    _fn("dcmi_get_device_errorcode_v2", *_CARD_DEV, _P(c_int), _P(c_uint), c_uint),
    _fn("dcmi_get_device_temperature", *_CARD_DEV, _P(c_int)),
    _fn("dcmi_get_device_power_info", *_CARD_DEV, _P(c_int)),
    _fn("dcmi_get_device_utilization_rate", *_CARD_DEV, c_int, _P(c_uint)),
    _fn("dcmi_get_device_hbm_info", *_CARD_DEV, _P(HbmInfo)),
    _fn("dcmi_get_device_memory_info_v3", *_CARD_DEV, _P(MemoryInfoV3)),
    _fn("dcmi_get_device_ecc_info", *_CARD_DEV, c_int, _P(EccInfo)),
    _fn("dcmi_get_topo_info_by_device_id", c_int, c_int, c_int, c_int, _P(c_int)),
    _fn("dcmi_get_affinity_cpu_info_by_device_id", *_CARD_DEV, ctypes.c_char_p, _P(c_int)),
    _fn("dcmi_get_device_current_fault_event", *_CARD_DEV, _P(Event), c_int, _P(c_int)),
)

_ERR: Final = -8000
#: DCMI_ERR_CODE_* (dcmi_interface_api.h, DCMI_ERROR_CODE_BASE -8000).
ERRORS: Final = ErrorTable(
    "huawei.dcmi",
    {
        _ERR - 1: ("invalid-argument", "DCMI_ERR_CODE_INVALID_PARAMETER"),
        _ERR - 2: ("no-permission", "DCMI_ERR_CODE_OPER_NOT_PERMITTED"),
        _ERR - 3: ("unknown", "DCMI_ERR_CODE_MEM_OPERATE_FAIL"),
        _ERR - 4: ("unknown", "DCMI_ERR_CODE_SECURE_FUN_FAIL"),
        _ERR - 5: ("unknown", "DCMI_ERR_CODE_INNER_ERR"),
        _ERR - 6: ("timeout", "DCMI_ERR_CODE_TIME_OUT"),
        _ERR - 7: ("not-found", "DCMI_ERR_CODE_INVALID_DEVICE_ID"),
        _ERR - 8: ("lost", "DCMI_ERR_CODE_DEVICE_NOT_EXIST"),
        _ERR - 9: ("unknown", "DCMI_ERR_CODE_IOCTL_FAIL"),
        _ERR - 10: ("unknown", "DCMI_ERR_CODE_SEND_MSG_FAIL"),
        _ERR - 11: ("unknown", "DCMI_ERR_CODE_RECV_MSG_FAIL"),
        _ERR - 12: ("driver-not-loaded", "DCMI_ERR_CODE_NOT_REDAY"),
        _ERR - 13: ("not-supported", "DCMI_ERR_CODE_NOT_SUPPORT_IN_CONTAINER"),
        _ERR - 14: ("unknown", "DCMI_ERR_CODE_FILE_OPERATE_FAIL"),
        _ERR - 15: ("unknown", "DCMI_ERR_CODE_RESET_FAIL"),
        _ERR - 16: ("unknown", "DCMI_ERR_CODE_ABORT_OPERATE"),
        _ERR - 17: ("unknown", "DCMI_ERR_CODE_IS_UPGRADING"),
        _ERR - 20: ("unknown", "DCMI_ERR_CODE_RESOURCE_OCCUPIED"),
        _ERR - 22: ("invalid-argument", "DCMI_ERR_CODE_PARTITION_NOT_RIGHT"),
        _ERR - 23: ("not-supported", "DCMI_ERR_CODE_CONFIG_INFO_NOT_EXIST"),
        _ERR - 255: ("not-supported", "DCMI_ERR_CODE_NOT_SUPPORT"),
    },
)

_SEVERITY: Final = {0: Severity.WARNING, 1: Severity.WARNING, 2: Severity.ERROR, 3: Severity.CRITICAL}


def load_dcmi() -> object:
    """Load ``libdcmi.so``: ``$ACCEL_ASCEND_LIB``, else the driver's and DCMI's directories,
    then the loader's search."""
    return load_library(
        "ascend",
        [LIBRARY],
        env_var="ACCEL_ASCEND_LIB",
        dirs=["/usr/local/Ascend/driver/lib64/driver", "/usr/local/dcmi"],
    )


@dataclass
class DcmiChip:
    """One chip as DCMI answered: the record the assembly takes, and what only DCMI reads."""

    chip: NpuChip
    mapping: ChipMapping
    error_codes: tuple[str, ...] = ()
    cpu_affinity: str | None = None
    ecc_uncorrected_total: int | None = None
    ecc_enabled: bool | None = None
    conditions: list[HealthCondition] = field(default_factory=list)
    health_read: bool = False


@dataclass
class DcmiRead:
    """A whole native read: the chips, the driver version, the topology codes between chips
    (``(card, dev), (card, dev)`` -> npu-smi code) and the problems of calls that failed."""

    chips: list[DcmiChip] = field(default_factory=list)
    driver_version: str | None = None
    topo: dict[tuple[tuple[int, int], tuple[int, int]], str] = field(default_factory=dict)
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: object) -> str | None:
    data = bytes(raw) if not isinstance(raw, bytes) else raw  # type: ignore[call-overload]
    value = data.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return value or None


def _chip_calls(lib: NativeLibrary, out: DcmiRead, card: int, dev: int) -> NativeCalls:
    """A chip's calls: unsupported -> ``False`` (never readable), another failure -> a problem."""
    return NativeCalls(lib, out.problems, f"NPU {card} chip {dev}")


def read_dcmi(lib: NativeLibrary, *, topology: bool = True) -> DcmiRead:
    """Read every chip ``lib`` (the real ``libdcmi.so`` or its fake) reports.

    ``dcmi_init`` and the card list must answer (their failure is raised); a card whose chip
    count cannot be read is a problem, a field whose call fails is missed this time.
    """
    out = DcmiRead()
    lib.call("dcmi_init")
    buf = ctypes.create_string_buffer(64)
    try:
        lib.call("dcmi_get_driver_version", buf, 64)
        out.driver_version = _text(buf.raw)
    except NotSupportedError:
        pass
    num = c_int()
    cards = (c_int * MAX_CARDS)()
    lib.call("dcmi_get_card_list", ctypes.byref(num), cards, MAX_CARDS)
    position = 0
    for card in list(cards)[: max(0, min(num.value, MAX_CARDS))]:
        count = c_int()
        try:
            lib.call("dcmi_get_device_num_in_card", card, ctypes.byref(count), device_id=f"NPU {card}")
        except AccelError as exc:
            if exc.code == "driver.timeout":
                raise
            out.problems.append(exc)
            continue
        for dev in range(count.value):
            chip = _read_chip(lib, out, card, dev, position)
            if chip is not None:
                out.chips.append(chip)
                position += 1
    if topology:
        keys = [(c.chip.npu_id, c.chip.chip_id) for c in out.chips]
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                kind = c_int()
                if _chip_calls(lib, out, *a)("dcmi_get_topo_info_by_device_id", *a, *b, ctypes.byref(kind)):
                    code = TOPO_CODES.get(kind.value)
                    if code is not None:
                        out.topo[(a, b)] = code
    return out


def _read_chip(lib: NativeLibrary, out: DcmiRead, card: int, dev: int, position: int) -> DcmiChip | None:
    call = _chip_calls(lib, out, card, dev)
    logic = c_int()
    if not call("dcmi_get_device_logic_id", ctypes.byref(logic), card, dev):
        return None  # an MCU or a chip the runtime does not see
    info = ChipInfo()
    name = _text(info.chip_name) if call("dcmi_get_device_chip_info", card, dev, ctypes.byref(info)) else None
    pcie = PcieInfoAll()
    bus_id = None
    if call("dcmi_get_device_pcie_info_v2", card, dev, ctypes.byref(pcie)):
        bus_id = f"{pcie.domain:04x}:{pcie.bdf_busid:02x}:{pcie.bdf_deviceid:02x}.{pcie.bdf_funcid:x}"
    health = c_uint()
    health_name = (
        HEALTH_NAMES.get(health.value, f"code {health.value}")
        if call("dcmi_get_device_health", card, dev, ctypes.byref(health))
        else None
    )
    temp = c_int()
    temperature = float(temp.value) if call("dcmi_get_device_temperature", card, dev, ctypes.byref(temp)) else None
    power = c_int()
    power_w = power.value / 10.0 if call("dcmi_get_device_power_info", card, dev, ctypes.byref(power)) else None
    util = c_uint()
    aicore = (
        util.value / 100.0
        if call("dcmi_get_device_utilization_rate", card, dev, UTIL_AICORE, ctypes.byref(util))
        else None
    )
    hbm = HbmInfo()
    hbm_total = hbm_used = None
    if call("dcmi_get_device_hbm_info", card, dev, ctypes.byref(hbm)):
        hbm_total, hbm_used = hbm.memory_size * 2**20, hbm.memory_usage * 2**20
    mem = MemoryInfoV3()
    ddr_total = ddr_used = pages_total = pages_used = None
    if call("dcmi_get_device_memory_info_v3", card, dev, ctypes.byref(mem)):
        ddr_total = mem.memory_size * 2**20
        ddr_used = max(0, mem.memory_size - mem.memory_available) * 2**20
        pages_total, pages_used = mem.hugepages_total, mem.hugepages_total - mem.hugepages_free
    chip = NpuChip(
        npu_id=card,
        chip_id=dev,
        name=name,
        health=health_name,
        bus_id=bus_id,
        line=SourceLine(f"dcmi card {card} device {dev}", position + 1),
        position=position,
        power_watts=power_w,
        temperature_celsius=temperature,
        hugepages_used=pages_used,
        hugepages_total=pages_total,
        aicore_ratio=aicore,
        ddr_used_bytes=ddr_used,
        ddr_total_bytes=ddr_total,
        hbm_used_bytes=hbm_used,
        hbm_total_bytes=hbm_total,
    )
    mapping = ChipMapping(npu_id=card, chip_id=dev, logic_id=logic.value, name=name, line=chip.line)
    got = DcmiChip(chip, mapping)
    if health_name not in (None, "OK"):
        count = c_int()
        codes = (c_uint * MAX_ERROR_CODES)()
        if call("dcmi_get_device_errorcode_v2", card, dev, ctypes.byref(count), codes, MAX_ERROR_CODES):
            got.error_codes = tuple(f"0x{c:08X}" for c in list(codes)[: max(0, min(count.value, MAX_ERROR_CODES))])
    cpus = ctypes.create_string_buffer(32)
    length = c_int(32)
    if call("dcmi_get_affinity_cpu_info_by_device_id", card, dev, cpus, ctypes.byref(length)):
        got.cpu_affinity = _text(cpus.raw)
    ecc = EccInfo()
    if call("dcmi_get_device_ecc_info", card, dev, ECC_HBM if hbm_total else ECC_DDR, ctypes.byref(ecc)):
        got.ecc_enabled = bool(ecc.enable_flag)
        got.ecc_uncorrected_total = int(ecc.total_double_bit_error_cnt)
        got.health_read = True
        if ecc.double_bit_error_cnt:
            got.conditions.append(
                condition(
                    Subsystem.MEMORY,
                    "EccErrors",
                    Severity.ERROR,
                    Action.INVESTIGATE,
                    f"DCMI reports {ecc.double_bit_error_cnt} double-bit ECC errors on NPU {card} chip {dev}",
                    code="huawei.dcmi:ecc-double-bit",
                    count=int(ecc.double_bit_error_cnt),
                )
            )
    return got


class FaultEvents:
    """DCMI's current fault events (``dcmi_get_device_current_fault_event``) as conditions: each
    raised (or one-off) event not seen before is delivered once, by its serial number."""

    def __init__(self, lib: NativeLibrary) -> None:
        self.lib = lib
        self.seen: set[tuple[int, int, int]] = set()
        self.unsupported = False

    def poll(self, chips: dict[tuple[int, int], str]) -> list[tuple[str, HealthCondition]]:
        if self.unsupported:
            return []
        out: list[tuple[str, HealthCondition]] = []
        for (card, dev), dev_id in chips.items():
            buf = (Event * MAX_EVENTS)()
            count = c_int()
            try:
                self.lib.call(
                    "dcmi_get_device_current_fault_event", card, dev, buf, MAX_EVENTS, ctypes.byref(count),
                    device_id=dev_id,
                )  # fmt: skip
            except NotSupportedError:
                self.unsupported = True
                return out
            for ev in list(buf)[: max(0, min(count.value, MAX_EVENTS))]:
                e = ev.event_t.dms_event
                key = (card, dev, e.event_serial_num)
                if ev.type != 0 or e.assertion == 0 or key in self.seen:
                    continue
                self.seen.add(key)
                name = _text(e.event_name) or f"event 0x{e.event_id:08X}"
                out.append(
                    (
                        dev_id,
                        condition(
                            Subsystem.DEVICE,
                            "FaultEvent",
                            _SEVERITY.get(e.severity, Severity.ERROR),
                            Action.INVESTIGATE,
                            f"DCMI fault event 0x{e.event_id:08X} on NPU {card} chip {dev}: {name}",
                            code=f"huawei.dcmi:event-0x{e.event_id:08X}",
                        ),
                    )
                )
        return out
