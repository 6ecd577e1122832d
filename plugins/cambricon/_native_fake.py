"""A faithful fake ``libcndev.so`` rendered from the same device state the CLI replay shows.

The state of a scenario is what its ``cnmon`` recording shows (parsed by the CLI path's own
parser), plus what only the library sees, from the scenario's ``native.toml``
(:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[device]]
    card = 0
    ecc_uncorrected = 3        # cndevGetECCInfo (cnmon's Ecc-Error column when absent here)
    ecc_corrected = 12
    uuid = "..."               # cndevGetUUID
    events = [48]              # XID events cndevEventWait delivers, in order
    [[device.incident]]        # cndevGetCardHealthStateV2 incidents
    system = 16                # cndevHealthSystem_t bit (0x10 MEM)
    health = 20                # cndevHealthResult_t (10 WARN, 20 FAIL)
    code = 5
    msg = "..."

:class:`FakeCndev` answers with CNDev's conventions (out-struct first, versioned structs whose
``version`` must be ``CNDEV_VERSION_6``, ``cndevRet_t`` codes, MB and W units).  A value the
state does not hold (cnmon printed ``N/A``, the sample masked it) is
``CNDEV_ERROR_NOT_SUPPORTED``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ConfigError
from accel.toolkit import FakeLibrary, deref, read_native_state, set_out
from accel.tools import Runner

from . import _native as n
from ._parse import TOOL, CnmonInfo, parse_cnmon

__all__ = ["ChipState", "CndevState", "FakeCndev", "fake_of_replay", "state_from_cnmon"]

SUCCESS, INVALID_ARGUMENT, INVALID_DEVICE_ID, NOT_SUPPORTED, UNSUPPORTED_API_VERSION = 0, 5, 6, 10, 3
UNINITIALIZED, TIMEOUT = 4, 17
MiB = 2**20


@dataclass
class Incident:
    system: int
    health: int
    code: int
    msg: str


@dataclass
class ChipState:
    """One MLU chip as the library would report it (``None``: not held, NOT_SUPPORTED)."""

    card: int
    name: str | None = None
    bus_id: str | None = None
    firmware: tuple[int, int, int] | None = None
    driver: tuple[int, int, int] | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    vmemory_total_mib: int = 0
    vmemory_used_mib: int = 0
    util_percent: int | None = None
    temperature_c: int | None = None
    power_w: int | None = None
    power_cap_w: int | None = None
    ecc_uncorrected: int | None = None
    ecc_corrected: int = 0
    uuid: str | None = None
    incidents: list[Incident] = field(default_factory=list)
    events: list[int] = field(default_factory=list)


@dataclass
class CndevState:
    chips: list[ChipState]


def _version(text: str | None) -> tuple[int, int, int] | None:
    if not text:
        return None
    parts = text.lstrip("vV").split(".")
    try:
        nums = [int(p) for p in parts[:3]]
    except ValueError:
        return None
    major, minor, build = [*nums, 0, 0, 0][:3]
    return major, minor, build


def _mib(value: int | None) -> int | None:
    return None if value is None else value // MiB


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def state_from_cnmon(info: CnmonInfo, native: Mapping[str, Any] | None = None) -> CndevState:
    """The device state behind a ``cnmon`` output, with the scenario's native-only extras."""
    chips: list[ChipState] = []
    for c in info.chips:
        chips.append(
            ChipState(
                card=c.card,
                name=c.name,
                bus_id=c.bus_id,
                firmware=_version(c.firmware),
                driver=_version(c.driver or info.driver_version),
                memory_total_mib=_mib(c.memory_total_bytes),
                memory_used_mib=_mib(c.memory_used_bytes) if c.memory_total_bytes is not None else None,
                vmemory_total_mib=_mib(c.vmemory_total_bytes) or 0,
                vmemory_used_mib=_mib(c.vmemory_used_bytes) or 0,
                util_percent=_int(c.utilization_ratio * 100) if c.utilization_ratio is not None else None,
                temperature_c=_int(c.temperature_celsius),
                power_w=_int(c.power_watts),
                power_cap_w=_int(c.power_cap_watts),
                ecc_uncorrected=c.ecc_errors,
            )
        )
    by_card = {c.card: c for c in chips}
    for entry in (native or {}).get("device", []):
        try:
            chip = by_card[int(entry["card"])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[device]] names no card of the scenario: {entry!r}") from exc
        for key in ("ecc_uncorrected", "ecc_corrected", "uuid"):
            if key in entry:
                setattr(chip, key, entry[key])
        chip.events.extend(int(x) for x in entry.get("events", []))
        chip.incidents.extend(
            Incident(int(i["system"]), int(i["health"]), int(i.get("code", 0)), str(i.get("msg", "")))
            for i in entry.get("incident", [])
        )
    return CndevState(chips)


def fake_of_replay(runner: Runner) -> FakeCndev:
    """The fake of the host a replay ``runner`` answers from: its ``cnmon`` recording parsed by
    the CLI path's parser, plus the scenario's ``native.toml``."""
    text = runner.run([TOOL]).stdout
    return FakeCndev(state_from_cnmon(parse_cnmon(text), read_native_state(runner)))


def _key(handle: Any) -> int:
    value = getattr(handle, "value", handle)
    return int(value or 0)


def _bdf(bus_id: str) -> tuple[int, int, int, int]:
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)


class FakeCndev(FakeLibrary):
    """``libcndev.so`` answering from a :class:`CndevState`."""

    TABLE = n.TABLE

    def __init__(self, state: CndevState) -> None:
        super().__init__()
        self.state = state
        self.inited = False
        self.handles: dict[int, list[int]] = {}
        self._next_handle = 1

    # -- helpers --------------------------------------------------------------------------
    def _chip(self, handle: int) -> ChipState | None:
        if not self.inited:
            return None
        return next((c for i, c in enumerate(self.state.chips) if i == handle), None)

    def _versioned(self, obj: Any) -> bool:
        return int(obj.version) == n.CNDEV_VERSION_6

    # -- the C functions ------------------------------------------------------------------
    def cndevInit(self, reserved: int) -> int:
        self.inited = True
        return SUCCESS

    def cndevRelease(self) -> int:
        self.inited = False
        return SUCCESS

    def cndevGetDeviceCount(self, info: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        card = deref(info)
        if not self._versioned(card):
            return UNSUPPORTED_API_VERSION
        card.number = len(self.state.chips)
        return SUCCESS

    def cndevGetDeviceHandleByIndex(self, index: int, handle: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        if not 0 <= index < len(self.state.chips):
            return INVALID_DEVICE_ID
        set_out(handle, index)
        return SUCCESS

    def cndevGetCardNameStringByDevId(self, device: int) -> bytes | None:
        chip = self._chip(device)
        return chip.name.encode() if chip is not None and chip.name else None

    def cndevGetUUID(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        u = deref(out)
        if not self._versioned(u):
            return UNSUPPORTED_API_VERSION
        if chip.uuid is None:
            return NOT_SUPPORTED
        raw = chip.uuid.encode()[:36]
        ctypes.memmove(u.uuid, raw, len(raw))
        return SUCCESS

    def cndevGetVersionInfo(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        v = deref(out)
        if not self._versioned(v):
            return UNSUPPORTED_API_VERSION
        if chip.firmware is None or chip.driver is None:
            return NOT_SUPPORTED
        v.mcuMajorVersion, v.mcuMinorVersion, v.mcuBuildVersion = chip.firmware
        v.driverMajorVersion, v.driverMinorVersion, v.driverBuildVersion = chip.driver
        return SUCCESS

    def cndevGetPCIeInfoV2(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.bus_id is None:
            return NOT_SUPPORTED
        p = deref(out)
        p.domain, p.bus, p.device, p.function = _bdf(chip.bus_id)
        p.vendor = 0xCABC
        return SUCCESS

    def cndevGetMemoryUsageV2(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.memory_total_mib is None or chip.memory_used_mib is None:
            return NOT_SUPPORTED
        m = deref(out)
        m.physicalMemoryTotal, m.physicalMemoryUsed = chip.memory_total_mib, chip.memory_used_mib
        m.virtualMemoryTotal, m.virtualMemoryUsed = chip.vmemory_total_mib, chip.vmemory_used_mib
        return SUCCESS

    def cndevGetDeviceUtilizationInfo(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        u = deref(out)
        if not self._versioned(u):
            return UNSUPPORTED_API_VERSION
        if chip.util_percent is None:
            return NOT_SUPPORTED
        u.averageCoreUtilization = chip.util_percent
        return SUCCESS

    def cndevGetTemperatureInfo(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        t = deref(out)
        if not self._versioned(t):
            return UNSUPPORTED_API_VERSION
        if chip.temperature_c is None:
            return NOT_SUPPORTED
        t.board = t.chip = chip.temperature_c
        return SUCCESS

    def cndevGetDevicePowerInfo(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        if chip.power_w is None:
            return NOT_SUPPORTED
        p = deref(out)
        p.usage, p.cap = chip.power_w, chip.power_cap_w or 0
        return SUCCESS

    def cndevGetECCInfo(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        e = deref(out)
        if not self._versioned(e):
            return UNSUPPORTED_API_VERSION
        if chip.ecc_uncorrected is None:
            return NOT_SUPPORTED
        e.uncorrectedError, e.correctedError = chip.ecc_uncorrected, chip.ecc_corrected
        e.totalError = chip.ecc_uncorrected + chip.ecc_corrected
        return SUCCESS

    def cndevGetCardHealthStateV2(self, out: Any, device: int) -> int:
        chip = self._chip(device)
        if chip is None:
            return INVALID_DEVICE_ID
        h = deref(out)
        worst = max((i.health for i in chip.incidents), default=n.HEALTH_PASS)
        h.health = 0 if worst == n.HEALTH_FAIL else 1
        h.overallHealth = worst
        h.driverState = 4  # RUNNING
        h.incident_count = min(len(chip.incidents), 64)
        for slot, inc in zip(h.incidents, chip.incidents, strict=False):
            slot.system, slot.health = inc.system, inc.health
            slot.error.code = inc.code
            slot.error.msg = inc.msg.encode()[:511]
        return SUCCESS

    def cndevEventHandleCreate(self, handle: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        value = self._next_handle
        self._next_handle += 1
        self.handles[value] = []
        set_out(handle, value)
        return SUCCESS

    def cndevEventHandleDestroy(self, handle: Any) -> int:
        self.handles.pop(_key(handle), None)
        return SUCCESS

    def cndevRegisterEvents(self, handle: Any, types: int, device: int) -> int:
        key = _key(handle)
        if key not in self.handles or self._chip(device) is None:
            return INVALID_ARGUMENT
        if types & n.EVENT_XID:
            self.handles[key].append(device)
        return SUCCESS

    def cndevEventWait(self, handle: Any, out: Any, timeout: int) -> int:
        key = _key(handle)
        if key not in self.handles:
            return INVALID_ARGUMENT
        for device in self.handles[key]:
            chip = self.state.chips[device]
            if chip.events:
                d = deref(out)
                d.device, d.eventType, d.eventData = device, n.EVENT_XID, chip.events.pop(0)
                return SUCCESS
        return TIMEOUT
