"""A faithful fake ``libefml.so`` rendered from the same device state the ``efsmi`` replay shows.

The state of a scenario is what its ``efsmi`` and ``efsmi -q`` recordings show, parsed and
merged by bus id as the CLI path does, plus what only the library sees, from the scenario's
``native.toml`` (:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[device]]
    dev = 1                     # the efsmi index
    healthy = false             # EfmlGetDevHealth
    ecc = { single_bit = 12, double_bit = 1 }
    events = [[20, "EID 0x51 on cluster 2"]]   # (efmlEventType_t, message) EfmlGetEventV2 delivers

:class:`FakeEfml` answers with EFML's conventions: ``uint32_t dev_idx``, ``efmlReturn_t``
codes, 128-byte caller buffers, ``mem_total_size`` in bytes and ``mem_used`` in MiB, W and
degrees C as floats, ``EFML_ERROR_TIMEOUT`` when no event is pending.  A value the recordings do
not hold (a table-only replay prints no UUID and no used memory, so ``EfmlGetDevMem``, which
returns total and used together, is unanswerable; ``N/A`` power) is ``EFML_ERROR_NOT_SUPPORTED``.
A ``DEV ID`` section elided from an ``efsmi -q`` sample is not a device of the fake (nothing
of it was recorded).  Health is ``True`` unless the recording or ``native.toml`` says otherwise.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ConfigError, ToolError
from accel.toolkit import FakeLibrary, UnitReading, deref, merge_readings, read_native_state, set_out
from accel.tools import Runner

from . import _native as n
from ._parse import TOOL, parse_query, parse_table

__all__ = ["EfmlState", "FakeEfml", "GcuState", "fake_of_replay", "state_from_readings"]

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, TIMEOUT = 0, 1, 2, 3, 253
_VIRT = {v.upper(): k for k, v in n.VIRT_MODES.items()}


@dataclass
class GcuState:
    """One GCU as EFML would report it (``None``: not held, NOT_SUPPORTED)."""

    index: int
    bus_id: str
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    firmware: str | None = None
    virt: str | None = None
    vendor_id: int = 0
    device_id: int = 0
    util_percent: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_cap_w: float | None = None
    memory_total: int | None = None
    memory_used_mib: int | None = None
    healthy: bool = True
    ecc_enabled: bool | None = None
    ecc_pending: bool = False
    ecc_single: int = 0
    ecc_double: int = 0
    events: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class EfmlState:
    gcus: list[GcuState]
    driver: str | None = None


def state_from_readings(
    readings: list[UnitReading], driver: str | None, native: Mapping[str, Any] | None = None
) -> EfmlState:
    """The device state behind the merged ``efsmi`` readings, with the native-only extras."""
    gcus: list[GcuState] = []
    for r in sorted(readings, key=lambda x: x.index or 0):
        if r.index is None or r.bus_id is None:
            continue
        raw = r.extras.get("enflame.com/rawName")
        virt = r.extras.get("enflame.com/gcuVirt")
        unhealthy = any(c.vendor_code and c.vendor_code.startswith("enflame.health:") for c in r.conditions)
        gcus.append(
            GcuState(
                index=r.index,
                bus_id=r.bus_id,
                name=raw if isinstance(raw, str) else r.model,
                uuid=r.uuid,
                serial=r.serial_number,
                firmware=r.firmware.get("fw"),
                virt=virt if isinstance(virt, str) else None,
                vendor_id=int(r.pci_vendor_id, 16) if r.pci_vendor_id else 0,
                device_id=int(r.pci_device_id, 16) if r.pci_device_id else 0,
                util_percent=None if r.utilization_ratio is None else r.utilization_ratio * 100,
                temperature_c=r.temperature_celsius,
                power_w=r.power_watts,
                power_cap_w=r.power_limit_watts,
                memory_total=r.memory_total_bytes,
                memory_used_mib=None if r.memory_used_bytes is None else r.memory_used_bytes >> 20,
                healthy=not unhealthy,
                ecc_enabled=r.ecc_enabled,
                ecc_pending=bool(r.ecc_pending),
                ecc_double=r.ecc_uncorrected_total or 0,
            )
        )
    by_index = {g.index: g for g in gcus}
    for entry in (native or {}).get("device", []):
        try:
            gcu = by_index[int(entry["dev"])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[device]] names no GCU of the scenario: {entry!r}") from exc
        if "healthy" in entry:
            gcu.healthy = bool(entry["healthy"])
        ecc = dict(entry.get("ecc", {}))
        gcu.ecc_single = int(ecc.get("single_bit", gcu.ecc_single))
        gcu.ecc_double = int(ecc.get("double_bit", gcu.ecc_double))
        gcu.events.extend((int(t), str(msg)) for t, msg in entry.get("events", []))
    return EfmlState(gcus, driver)


def _recorded(runner: Runner, *args: str) -> str | None:
    try:
        return runner.run([TOOL, *args]).stdout
    except ToolError:
        return None


def fake_of_replay(runner: Runner) -> FakeEfml:
    """The fake of the host a replay ``runner`` answers from: its ``efsmi`` / ``efsmi -q``
    recordings parsed and merged as the CLI path does, plus the scenario's ``native.toml``."""
    readings: list[UnitReading] = []
    driver: str | None = None
    text = _recorded(runner)
    if text is not None:
        table = parse_table(text)
        readings, driver = table.readings, table.driver_version
    text = _recorded(runner, "-q")
    if text is not None:
        query = parse_query(text)
        readings = merge_readings(readings, query.readings)
        driver = driver or query.driver_version
    if not readings:
        raise ConfigError("the replay recorded no readable efsmi view to render a fake libefml.so from")
    return FakeEfml(state_from_readings(readings, driver, read_native_state(runner)))


def _bdf(bus_id: str) -> tuple[int, int, int, int]:
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)


def _put(buf: Any, text: str | None) -> int:
    if text is None:
        return NOT_SUPPORTED
    raw = text.encode()[: n.BUF - 1]
    ctypes.memmove(buf, raw + b"\0", len(raw) + 1)
    return SUCCESS


class FakeEfml(FakeLibrary):
    """``libefml.so`` answering from an :class:`EfmlState`."""

    TABLE = n.TABLE

    def __init__(self, state: EfmlState) -> None:
        super().__init__()
        self.state = state
        self.inited = False

    def _gcu(self, dev_idx: int) -> GcuState | None:
        if not self.inited or not 0 <= dev_idx < len(self.state.gcus):
            return None
        return self.state.gcus[dev_idx]

    def EfmlInit(self, no_driver: bool) -> int:
        self.inited = True
        return SUCCESS

    def EfmlShutdown(self) -> None:
        self.inited = False

    def EfmlGetDriverVer(self, buf: Any) -> int:
        return _put(buf, self.state.driver) if self.inited else UNINITIALIZED

    def EfmlGetDevCount(self, count: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        set_out(count, len(self.state.gcus))
        return SUCCESS

    def EfmlGetDevInfo(self, dev_idx: int, info: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        out = deref(info)
        out.name = (gcu.name or "").encode()
        out.vendor_id, out.device_id = gcu.vendor_id, gcu.device_id
        out.domain_id, out.bus_id, out.dev_id, out.func_id = _bdf(gcu.bus_id)
        out.logic_id = dev_idx
        return SUCCESS

    def _string(self, dev_idx: int, buf: Any, attr: str) -> int:
        gcu = self._gcu(dev_idx)
        return INVALID_ARGUMENT if gcu is None else _put(buf, getattr(gcu, attr))

    def EfmlGetDevUuid(self, dev_idx: int, buf: Any) -> int:
        return self._string(dev_idx, buf, "uuid")

    def EfmlGetDevSn(self, dev_idx: int, buf: Any) -> int:
        return self._string(dev_idx, buf, "serial")

    def EfmlGetFwVersion(self, dev_idx: int, buf: Any) -> int:
        return self._string(dev_idx, buf, "firmware")

    def EfmlGetGcuVirtStatus(self, dev_idx: int, mode: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if gcu.virt is None or gcu.virt.upper() not in _VIRT:
            return NOT_SUPPORTED
        set_out(mode, _VIRT[gcu.virt.upper()])
        return SUCCESS

    def EfmlGetDevMem(self, dev_idx: int, mem: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if gcu.memory_total is None or gcu.memory_used_mib is None:
            return NOT_SUPPORTED  # the pair comes in one struct: the fake invents no used size
        out = deref(mem)
        out.mem_total_size, out.mem_used = gcu.memory_total, gcu.memory_used_mib
        return SUCCESS

    def EfmlGetDevDtuUsage(self, dev_idx: int, value: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if gcu.util_percent is None:
            return NOT_SUPPORTED
        set_out(value, gcu.util_percent)
        return SUCCESS

    def EfmlGetDevTempV2(self, dev_idx: int, temp: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if gcu.temperature_c is None:
            return NOT_SUPPORTED
        out = deref(temp)
        out.cur_asic_temp = out.cur_mem_temp = out.cur_board_temp = gcu.temperature_c
        return SUCCESS

    def EfmlGetDevPwr(self, dev_idx: int, pwr: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if gcu.power_w is None or gcu.power_cap_w is None:
            return NOT_SUPPORTED
        out = deref(pwr)
        out.cur_pwr_consumption, out.pwr_capability = gcu.power_w, gcu.power_cap_w
        return SUCCESS

    def EfmlGetDevHealth(self, dev_idx: int, health: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        set_out(health, gcu.healthy)
        return SUCCESS

    def EfmlGetDevEccStatus(self, dev_idx: int, status: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if gcu.ecc_enabled is None:
            return NOT_SUPPORTED
        out = deref(status)
        out.enabled, out.pending, out.pdblack = gcu.ecc_enabled, gcu.ecc_pending, False
        out.ecnt_sb, out.ecnt_db = gcu.ecc_single, gcu.ecc_double
        return SUCCESS

    def EfmlGetEventV2(self, dev_idx: int, event: Any) -> int:
        gcu = self._gcu(dev_idx)
        if gcu is None:
            return INVALID_ARGUMENT
        if not gcu.events:
            return TIMEOUT
        kind, msg = gcu.events.pop(0)
        out = deref(event)
        out.event_id, out.event_type, out.event_msg = dev_idx, kind, msg.encode()[: n.BUF - 1]
        return SUCCESS
