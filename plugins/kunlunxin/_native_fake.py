"""A faithful fake ``libxpuml.so`` rendered from the same device state the ``xpu_smi`` replay shows.

The state of a scenario is what its ``xpu_smi`` recording shows (parsed by the CLI path's own
parser; ``xpu_smi -L`` for UUIDs when recorded), plus what only the library sees, from the
scenario's ``native.toml`` (:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[device]]
    xpu = 1                    # the xpu_smi index
    state = 207                # xpumlDeviceGetState (xpumlDeviceState_t; 201 RUNNING otherwise)

:class:`FakeXpuml` answers with XPUML's conventions: handles (``xpumlDevice_t``, a struct
holding one pointer) from ``xpumlDeviceGetHandleByIndex``, passed by value; ``xpumlReturn_t``
codes; caller buffers with a ``length`` (too short: ``INSUFFICIENT_SIZE``); bytes, degrees C
and mW.  A value the recording does not hold (``xpu_smi`` 4.x prints no temperature, power or
cap) is ``XPUML_ERROR_NOT_SUPPORTED``.  The fake is of a library that exports the three calls
the Go binding's header comments out (name, UUID, power limit).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accel.errors import ConfigError, ToolError
from accel.toolkit import FakeLibrary, ParseContext, deref, parse_listing, read_native_state, set_out
from accel.tools import Runner

from . import _native as n
from ._parse import TOOLS, XpuSmi, parse_xpu_smi

__all__ = ["FakeXpuml", "XpuState", "XpumlState", "fake_of_replay", "state_from_xpu_smi"]

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, INSUFFICIENT_SIZE = 0, 1, 2, 3, 7
RUNNING = 201
_HANDLE_BASE = 0x1000  # handles are opaque pointers; the fake's are small distinct numbers


@dataclass
class XpuState:
    """One XPU as XPUML would report it (``None``: not held, NOT_SUPPORTED)."""

    index: int
    bus_id: str
    name: str | None = None
    uuid: str | None = None
    util_percent: int | None = None
    temperature_c: int | None = None
    power_mw: int | None = None
    power_cap_mw: int | None = None
    memory_total: int | None = None
    memory_used: int | None = None
    l3_total: int = 0
    state: int = RUNNING


@dataclass
class XpumlState:
    xpus: list[XpuState]
    driver: str | None = None


def _round(value: float | None, scale: int = 1) -> int | None:
    return None if value is None else round(value * scale)


def state_from_xpu_smi(
    smi: XpuSmi, *, uuids: Mapping[int, str] | None = None, native: Mapping[str, Any] | None = None
) -> XpumlState:
    """The device state behind an ``xpu_smi`` output, with the scenario's native-only extras."""
    xpus: list[XpuState] = []
    for r in smi.readings:
        if r.index is None or r.bus_id is None:
            continue
        l3 = r.extras.get("kunlunxin.com/l3TotalBytes")
        xpus.append(
            XpuState(
                index=r.index,
                bus_id=r.bus_id,
                name=r.model,
                uuid=(uuids or {}).get(r.index),
                util_percent=_round(r.utilization_ratio, 100),
                temperature_c=_round(r.temperature_celsius),
                power_mw=_round(r.power_watts, 1000),
                power_cap_mw=_round(r.power_limit_watts, 1000),
                memory_total=r.memory_total_bytes,
                memory_used=r.memory_used_bytes,
                l3_total=l3 if isinstance(l3, int) else 0,
            )
        )
    by_index = {x.index: x for x in xpus}
    for entry in (native or {}).get("device", []):
        try:
            xpu = by_index[int(entry["xpu"])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[device]] names no XPU of the scenario: {entry!r}") from exc
        if "state" in entry:
            xpu.state = int(entry["state"])
        if "uuid" in entry:
            xpu.uuid = str(entry["uuid"])
    return XpumlState(xpus, smi.driver_version)


def _recorded(runner: Runner, *argv: str) -> str | None:
    try:
        return runner.run(list(argv)).stdout
    except ToolError:
        return None


def fake_of_replay(runner: Runner) -> FakeXpuml:
    """The fake of the host a replay ``runner`` answers from (whichever of ``xpu_smi`` /
    ``xpu-smi`` it recorded), plus the scenario's ``native.toml``."""
    for tool in TOOLS:
        text = _recorded(runner, tool)
        if text is not None:
            break
    else:
        raise ConfigError(f"the replay recorded neither of {', '.join(TOOLS)}")
    smi = parse_xpu_smi(text, command=tool)
    uuids: dict[int, str] = {}
    listing = _recorded(runner, tool, "-L")
    if listing is not None:
        for x in parse_listing(listing, words=("XPU",), ctx=ParseContext(tool, f"{tool} -L")):
            if x.index is not None and x.uuid:
                uuids[x.index] = x.uuid
    return FakeXpuml(state_from_xpu_smi(smi, uuids=uuids, native=read_native_state(runner)))


def _bdf(bus_id: str) -> tuple[int, int, int, int]:
    dom, bus, rest = bus_id.split(":")
    dev, fn = rest.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)


def _put(buf: Any, length: int, text: str | None) -> int:
    if text is None:
        return NOT_SUPPORTED
    raw = text.encode()
    if length < len(raw) + 1:
        return INSUFFICIENT_SIZE
    ctypes.memmove(buf, raw + b"\0", len(raw) + 1)
    return SUCCESS


class FakeXpuml(FakeLibrary):
    """``libxpuml.so`` answering from an :class:`XpumlState`."""

    TABLE = n.TABLE

    def __init__(self, state: XpumlState) -> None:
        super().__init__()
        self.state = state
        self.inited = 0

    def _xpu(self, device: Any) -> XpuState | None:
        handle = getattr(device, "handle", None) or 0
        i = handle - _HANDLE_BASE
        if not self.inited or not 0 <= i < len(self.state.xpus):
            return None
        return self.state.xpus[i]

    def xpumlInit(self) -> int:
        self.inited += 1  # reference counted, as NVML's
        return SUCCESS

    def xpumlShutdown(self) -> int:
        if not self.inited:
            return UNINITIALIZED
        self.inited -= 1
        return SUCCESS

    def xpumlSystemGetDriverVersion(self, buf: Any, length: int) -> int:
        return _put(buf, length, self.state.driver) if self.inited else UNINITIALIZED

    def xpumlDeviceGetCount(self, count: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        set_out(count, len(self.state.xpus))
        return SUCCESS

    def xpumlDeviceGetHandleByIndex(self, index: int, device: Any) -> int:
        if not self.inited:
            return UNINITIALIZED
        if not 0 <= index < len(self.state.xpus):
            return INVALID_ARGUMENT
        deref(device).handle = _HANDLE_BASE + index
        return SUCCESS

    def xpumlDeviceGetName(self, device: Any, buf: Any, length: int) -> int:
        xpu = self._xpu(device)
        return INVALID_ARGUMENT if xpu is None else _put(buf, length, xpu.name)

    def xpumlDeviceGetUUID(self, device: Any, buf: Any, length: int) -> int:
        xpu = self._xpu(device)
        return INVALID_ARGUMENT if xpu is None else _put(buf, length, xpu.uuid)

    def xpumlDeviceGetAttributes(self, device: Any, attrs: Any) -> int:
        xpu = self._xpu(device)
        if xpu is None:
            return INVALID_ARGUMENT
        out = deref(attrs)
        out.modelId = next((k for k, v in n.MODELS.items() if v == xpu.name), 9999)  # 9999: UNKNOWN
        out.globalMemorySizeMB = (xpu.memory_total or 0) >> 20
        out.l3MemorySizeMB = xpu.l3_total >> 20
        return SUCCESS

    def xpumlDeviceGetPciInfo(self, device: Any, pci: Any) -> int:
        xpu = self._xpu(device)
        if xpu is None:
            return INVALID_ARGUMENT
        out = deref(pci)
        out.domain, out.bus, out.device, out.function = _bdf(xpu.bus_id)
        out.busId = b"%08X:%02X:%02X.%01X" % (out.domain, out.bus, out.device, out.function)
        return SUCCESS

    def xpumlDeviceGetMemoryInfo(self, device: Any, memory: Any) -> int:
        xpu = self._xpu(device)
        if xpu is None:
            return INVALID_ARGUMENT
        if xpu.memory_total is None or xpu.memory_used is None:
            return NOT_SUPPORTED
        out = deref(memory)
        out.pageSizeGlobalMemory = out.pageSizeL3Memory = 4096
        out.totalGlobalMemory, out.usedGlobalMemory = xpu.memory_total, xpu.memory_used
        out.freeGlobalMemory = xpu.memory_total - xpu.memory_used
        out.totalL3Memory, out.usedL3Memory, out.freeL3Memory = xpu.l3_total, 0, xpu.l3_total
        return SUCCESS

    def xpumlDeviceGetUtilizationRates(self, device: Any, util: Any) -> int:
        xpu = self._xpu(device)
        if xpu is None:
            return INVALID_ARGUMENT
        if xpu.util_percent is None:
            return NOT_SUPPORTED
        out = deref(util)
        out.xpu, out.memory = xpu.util_percent, 0
        return SUCCESS

    def xpumlDeviceGetTemperature(self, device: Any, sensor: int, temp: Any) -> int:
        xpu = self._xpu(device)
        if xpu is None or sensor != n.TEMPERATURE_XPU:
            return INVALID_ARGUMENT
        if xpu.temperature_c is None:
            return NOT_SUPPORTED
        set_out(temp, xpu.temperature_c)
        return SUCCESS

    def _scalar(self, device: Any, out: Any, value: int | None) -> int:
        if self._xpu(device) is None:
            return INVALID_ARGUMENT
        if value is None:
            return NOT_SUPPORTED
        set_out(out, value)
        return SUCCESS

    def xpumlDeviceGetPowerUsage(self, device: Any, power: Any) -> int:
        xpu = self._xpu(device)
        return self._scalar(device, power, None if xpu is None else xpu.power_mw)

    def xpumlDeviceGetPowerManagementLimit(self, device: Any, limit: Any) -> int:
        xpu = self._xpu(device)
        return self._scalar(device, limit, None if xpu is None else xpu.power_cap_mw)

    def xpumlDeviceGetState(self, device: Any, state: Any) -> int:
        xpu = self._xpu(device)
        return self._scalar(device, state, None if xpu is None else xpu.state)
