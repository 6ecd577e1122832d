"""A faithful fake ``libixml.so`` rendered from the same device state the CLI replay shows.

The state is what the scenario's ``ixsmi`` recordings show (the table, and ``ixsmi -L`` where
recorded), parsed by the CLI path's own parsers: one :class:`~accel.toolkit.UnitReading` per
GPU; the scenario's ``native.toml`` adds the ``ixmlDeviceGetHealth`` bitmask of a GPU
(``[[gpu]]`` ``index = 3``, ``health = 0x10``).  :class:`FakeIxml` answers with NVML's
conventions as IXML exports them (``nvmlDevice_t`` handles, caller buffers with their size,
bytes, mW, ``nvmlReturn_t`` codes, init and shutdown reference-counted) plus
``ixmlDeviceGetHealth``.  A GPU the table showed hung answers the sentinel values it printed
(65535 W, 0 C at 100 %); a value the state does not hold is ``NVML_ERROR_NOT_SUPPORTED``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from accel.errors import ConfigError, ToolError
from accel.toolkit import (
    FakeLibrary,
    ParseContext,
    UnitReading,
    deref,
    merge_readings,
    parse_listing,
    read_native_state,
    set_out,
)
from accel.tools import Runner

from . import _native as n
from ._parse import TOOL, parse_table

__all__ = ["FakeIxml", "IxmlState", "fake_of_replay"]

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, INSUFFICIENT_SIZE = 0, 1, 2, 3, 7


@dataclass
class IxmlState:
    driver_version: str | None
    gpus: list[UnitReading]
    #: ixmlDeviceGetHealth bitmask by GPU position (0 when not given).
    health: dict[int, int]


def fake_of_replay(runner: Runner) -> FakeIxml:
    """The fake of the host a replay ``runner`` answers from."""
    table = parse_table(runner.run([TOOL]).stdout)
    readings = list(table.readings)
    try:
        listed = parse_listing(runner.run([TOOL, "-L"]).stdout, words=("GPU",), ctx=ParseContext(TOOL, "ixsmi -L"))
        readings = merge_readings(readings, [UnitReading(index=x.index, uuid=x.uuid, bus_id=x.bus_id) for x in listed])
    except ToolError:
        pass
    health: dict[int, int] = {}
    for entry in read_native_state(runner).get("gpu", []):
        try:
            pos = next(i for i, g in enumerate(readings) if g.index == int(entry["index"]))
        except (KeyError, StopIteration, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[gpu]] names no GPU index of the scenario: {entry!r}") from exc
        health[pos] = int(entry.get("health", 0))
    return FakeIxml(IxmlState(table.driver_version, readings, health))


def _wedged(g: UnitReading) -> bool:
    return any(c.reason == "DeviceWedged" for c in g.conditions)


def _write(buf: Any, text: str | None, size: int) -> int:
    if text is None:
        return NOT_SUPPORTED
    raw = text.encode()
    if len(raw) + 1 > size:
        return INSUFFICIENT_SIZE
    ctypes.memmove(buf, raw + b"\0", len(raw) + 1)
    return SUCCESS


class FakeIxml(FakeLibrary):
    """``libixml.so`` answering from an :class:`IxmlState`."""

    TABLE = n.TABLE

    def __init__(self, state: IxmlState) -> None:
        self.state = state
        #: nvmlInit* / nvmlShutdown are reference-counted: the library stays up until the last
        #: shutdown (two readers in two threads do not end each other's session).
        self.refs = 0
        super().__init__()

    @property
    def inited(self) -> bool:
        return self.refs > 0

    def _gpu(self, handle: Any) -> UnitReading | None:
        value = int(getattr(handle, "value", handle) or 0)
        pos = value - 0x100
        if not self.inited or not 0 <= pos < len(self.state.gpus):
            return None
        return self.state.gpus[pos]

    def nvmlInitWithFlags(self, flags: int) -> int:
        self.refs += 1
        return SUCCESS

    def nvmlShutdown(self) -> int:
        if not self.inited:
            return UNINITIALIZED
        self.refs -= 1
        return SUCCESS

    def nvmlSystemGetDriverVersion(self, buf: Any, size: int) -> int:
        return _write(buf, self.state.driver_version, size) if self.inited else UNINITIALIZED

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        set_out(count, len(self.state.gpus))
        return SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        if not 0 <= index < len(self.state.gpus):
            return INVALID_ARGUMENT
        set_out(handle, 0x100 + index)
        return SUCCESS

    def nvmlDeviceGetIndex(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        if g.index is None:
            return NOT_SUPPORTED
        set_out(out, g.index)
        return SUCCESS

    def nvmlDeviceGetName(self, dev: Any, buf: Any, size: int) -> int:
        g = self._gpu(dev)
        return INVALID_ARGUMENT if g is None else _write(buf, g.model, size)

    def nvmlDeviceGetUUID(self, dev: Any, buf: Any, size: int) -> int:
        g = self._gpu(dev)
        return INVALID_ARGUMENT if g is None else _write(buf, g.uuid, size)

    def nvmlDeviceGetPciInfo_v3(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        if g.bus_id is None:
            return NOT_SUPPORTED
        p = deref(out)
        dom, bus, rest = g.bus_id.split(":")
        device, _function = rest.split(".")
        p.domain, p.bus, p.device = int(dom, 16), int(bus, 16), int(device, 16)
        p.busId = f"{int(dom, 16):08X}:{bus.upper()}:{rest.upper()}".encode()
        return SUCCESS

    def nvmlDeviceGetMemoryInfo(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        if g.memory_total_bytes is None or g.memory_used_bytes is None:
            return NOT_SUPPORTED
        m = deref(out)
        m.total, m.used = g.memory_total_bytes, g.memory_used_bytes
        m.free = max(0, g.memory_total_bytes - g.memory_used_bytes)
        return SUCCESS

    def nvmlDeviceGetUtilizationRates(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        value = 1.0 if _wedged(g) else g.utilization_ratio
        if value is None:
            return NOT_SUPPORTED
        deref(out).gpu = round(value * 100)
        return SUCCESS

    def nvmlDeviceGetTemperature(self, dev: Any, sensor: int, out: Any) -> int:
        g = self._gpu(dev)
        if g is None or sensor != n.TEMPERATURE_GPU:
            return INVALID_ARGUMENT
        value = 0.0 if _wedged(g) else g.temperature_celsius
        if value is None:
            return NOT_SUPPORTED
        set_out(out, round(value))
        return SUCCESS

    def nvmlDeviceGetPowerUsage(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        value = 65535.0 if _wedged(g) else g.power_watts
        if value is None:
            return NOT_SUPPORTED
        set_out(out, round(value * 1000))
        return SUCCESS

    def nvmlDeviceGetPowerManagementDefaultLimit(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        if g.power_limit_watts is None:
            return NOT_SUPPORTED
        set_out(out, round(g.power_limit_watts * 1000))
        return SUCCESS

    def nvmlDeviceGetFanSpeed(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        if g.fan_ratio is None:
            return NOT_SUPPORTED
        set_out(out, round(g.fan_ratio * 100))
        return SUCCESS

    def ixmlDeviceGetHealth(self, dev: Any, out: Any) -> int:
        g = self._gpu(dev)
        if g is None:
            return INVALID_ARGUMENT
        set_out(out, self.state.health.get(self.state.gpus.index(g), 0))
        return SUCCESS
