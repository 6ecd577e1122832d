"""A faithful fake MTML rendered from the same device state the CLI replay shows.

The state is what the scenario's ``mthreads-gmi`` recordings show (the table and ``-q -j``,
parsed and merged by the CLI path's own parsers), one :class:`~accel.toolkit.UnitReading` per
GPU.  :class:`FakeMtml` answers with MTML's conventions: the library -> device -> GPU / memory
handle chain (opaque pointers; each handle the fake hands out is tracked and must be freed),
caller buffers with their size, the serial number's size before its buffer, bytes of memory,
``mtmlReturn_t`` codes.  A value the state does not hold is ``MTML_ERROR_NOT_SUPPORTED``.

What only MTML sees comes from the scenario's ``native.toml``
(:data:`~accel.toolkit.NATIVE_STATE_FILE`)::

    [[device]]
    gpu = 5                                    # the mthreads-gmi GPU index
    ecc = { corrected = 31, uncorrected = 3 }  # DRAM ECC error counts (aggregate)

``mthreads-gmi`` prints no ECC counters, so a GPU ``native.toml`` gives none for answers
``mtmlMemoryGetEccErrorCounter`` with ``MTML_ERROR_NOT_SUPPORTED`` (its health stays unknown
on both paths).  The fake gives the volatile counters the aggregate values (no reset recorded).
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
from ._parse import TOOL, parse_query_json, parse_table

__all__ = ["FakeMtml", "MtmlState", "fake_of_replay"]

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, INSUFFICIENT_SIZE, NOT_FOUND = 0, 3, 4, 6, 7
UNINITIALIZED = 666


@dataclass
class MtmlState:
    driver_version: str | None
    gpus: list[UnitReading]
    #: GPU position -> (corrected, uncorrected) DRAM ECC counts; absent: not supported.
    ecc: dict[int, tuple[int, int]] = field(default_factory=dict)


def _native_ecc(gpus: list[UnitReading], native: Mapping[str, Any]) -> dict[int, tuple[int, int]]:
    """``native.toml``'s ECC counts by GPU position; a ``[[device]]`` naming no GPU of the
    scenario, or counts that are not non-negative integers, is a :class:`ConfigError`."""
    positions = {g.index: i for i, g in enumerate(gpus) if g.index is not None}
    out: dict[int, tuple[int, int]] = {}
    for entry in native.get("device", []):
        try:
            pos = positions[int(entry["gpu"])]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: a [[device]] names no GPU of the scenario: {entry!r}") from exc
        ecc = entry.get("ecc")
        bad = ConfigError(f"native state: GPU {entry['gpu']}: ecc needs non-negative integer counts: {entry!r}")
        if not isinstance(ecc, dict) or not ecc.keys() <= {"corrected", "uncorrected"}:
            raise bad
        values = (ecc.get("corrected", 0), ecc.get("uncorrected", 0))
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            raise bad
        counts = (int(values[0]), int(values[1]))
        out[pos] = counts
    return out


def fake_of_replay(runner: Runner) -> FakeMtml:
    """The fake of the host a replay ``runner`` answers from (table and ``-q -j``, as recorded)."""
    readings: list[UnitReading] = []
    driver = None
    try:
        table = parse_table(runner.run([TOOL]).stdout)
        readings = [u.reading for u in table.units if u.partition is None]
        driver = table.driver_version
    except ToolError:
        pass
    try:
        query = parse_query_json(runner.run([TOOL, "-q", "-j"]).stdout)
        readings = merge_readings(readings, query.readings)
        driver = driver or query.driver_version
    except ToolError:
        pass
    return FakeMtml(MtmlState(driver, readings, _native_ecc(readings, read_native_state(runner))))


def _handle(value: Any) -> int:
    """A handle as the C function sees it: the pointer's value, whatever ctypes type carries it."""
    if isinstance(value, ctypes._Pointer):
        return ctypes.cast(value, ctypes.c_void_p).value or 0
    return int(getattr(value, "value", value) or 0)


def _int(value: Any) -> int:
    """A scalar argument as C sees it (a caller may pass ``c_uint(n)`` or ``n``)."""
    return int(getattr(value, "value", value))


def _set_handle(out: Any, value: int) -> None:
    """Write a handle through ``byref(handle)``, whatever pointer type the caller's handle is."""
    target = deref(out)
    ctypes.memmove(ctypes.addressof(target), ctypes.byref(ctypes.c_void_p(value)), ctypes.sizeof(ctypes.c_void_p))


def _write(buf: Any, text: str, size: Any) -> int:
    size = _int(size)
    raw = text.encode()
    if len(raw) + 1 > size:
        return INSUFFICIENT_SIZE
    target = deref(buf) if not isinstance(buf, ctypes.Array) else buf
    ctypes.memmove(target, raw + b"\0", len(raw) + 1)
    return SUCCESS


class FakeMtml(FakeLibrary):
    """MTML answering from an :class:`MtmlState`; ``handles`` holds what was not freed."""

    TABLE = n.TABLE

    def __init__(self, state: MtmlState) -> None:
        super().__init__()
        self.state = state
        self._next = 0x1000
        #: handle -> ("library" | "system" | "device" | "gpu" | "memory", GPU position)
        self.handles: dict[int, tuple[str, int]] = {}

    def _new(self, out: Any, kind: str, pos: int = -1) -> int:
        self._next += 0x10
        self.handles[self._next] = (kind, pos)
        _set_handle(out, self._next)
        return SUCCESS

    def _get(self, handle: Any, kind: str) -> UnitReading | int | None:
        entry = self.handles.get(_handle(handle))
        if entry is None or entry[0] != kind:
            return INVALID_ARGUMENT
        return self.state.gpus[entry[1]] if entry[1] >= 0 else None

    def _free(self, handle: Any, kind: str) -> int:
        entry = self.handles.get(_handle(handle))
        if entry is None or entry[0] != kind:
            return INVALID_ARGUMENT
        del self.handles[_handle(handle)]
        return SUCCESS

    # -- library, system, device ----------------------------------------------------------
    def mtmlLibraryInit(self, lib: Any) -> int:
        return self._new(lib, "library")

    def mtmlLibraryShutDown(self, lib: Any) -> int:
        return self._free(lib, "library")

    def mtmlLibraryCountDevice(self, lib: Any, count: Any) -> int:
        if _handle(lib) not in self.handles:
            return UNINITIALIZED
        set_out(count, len(self.state.gpus))
        return SUCCESS

    def mtmlLibraryInitDeviceByIndex(self, lib: Any, index: Any, dev: Any) -> int:
        index = _int(index)
        if _handle(lib) not in self.handles:
            return UNINITIALIZED
        if not 0 <= index < len(self.state.gpus):
            return NOT_FOUND
        return self._new(dev, "device", index)

    def mtmlLibraryFreeDevice(self, dev: Any) -> int:
        return self._free(dev, "device")

    def mtmlLibraryInitSystem(self, lib: Any, system: Any) -> int:
        if _handle(lib) not in self.handles:
            return UNINITIALIZED
        return self._new(system, "system")

    def mtmlLibraryFreeSystem(self, system: Any) -> int:
        return self._free(system, "system")

    def mtmlSystemGetDriverVersion(self, system: Any, buf: Any, size: int) -> int:
        if self._get(system, "system") == INVALID_ARGUMENT:
            return INVALID_ARGUMENT
        if self.state.driver_version is None:
            return NOT_SUPPORTED
        return _write(buf, self.state.driver_version, size)

    def _dev(self, dev: Any) -> UnitReading | int:
        got = self._get(dev, "device")
        return INVALID_ARGUMENT if got is None else got

    def mtmlDeviceGetIndex(self, dev: Any, out: Any) -> int:
        g = self._dev(dev)
        if isinstance(g, int):
            return g
        if g.index is None:
            return NOT_SUPPORTED
        set_out(out, g.index)
        return SUCCESS

    def _text(self, dev: Any, value: str | None, buf: Any, size: int) -> int:
        g = self._dev(dev)
        if isinstance(g, int):
            return g
        return NOT_SUPPORTED if value is None else _write(buf, value, size)

    def mtmlDeviceGetName(self, dev: Any, buf: Any, size: int) -> int:
        g = self._dev(dev)
        return self._text(dev, None if isinstance(g, int) else g.model, buf, size)

    def mtmlDeviceGetUUID(self, dev: Any, buf: Any, size: int) -> int:
        g = self._dev(dev)
        return self._text(dev, None if isinstance(g, int) else g.uuid, buf, size)

    def mtmlDeviceGetSerialNumber(self, dev: Any, size: int, buf: Any) -> int:
        g = self._dev(dev)
        return self._text(dev, None if isinstance(g, int) else g.serial_number, buf, size)

    def mtmlDeviceGetMtBiosVersion(self, dev: Any, buf: Any, size: int) -> int:
        g = self._dev(dev)
        return self._text(dev, None if isinstance(g, int) else g.firmware.get("mtbios"), buf, size)

    def mtmlDeviceGetPciInfo(self, dev: Any, out: Any) -> int:
        g = self._dev(dev)
        if isinstance(g, int):
            return g
        if g.bus_id is None:
            return NOT_SUPPORTED
        p = deref(out)
        dom, bus, rest = g.bus_id.split(":")
        device, _function = rest.split(".")  # the function travels in sbdf
        p.sbdf = g.bus_id.encode()
        p.segment, p.bus, p.device = int(dom, 16), int(bus, 16), int(device, 16)
        p.pciDeviceId = int(g.pci_device_id, 16) if g.pci_device_id else 0
        p.pciCurWidth, p.pciMaxWidth = g.link_width_current or 0, g.link_width_max or 0
        return SUCCESS

    def mtmlDeviceGetPowerUsage(self, dev: Any, out: Any) -> int:
        g = self._dev(dev)
        if isinstance(g, int):
            return g
        if g.power_watts is None:
            return NOT_SUPPORTED
        set_out(out, round(g.power_watts * 1000))
        return SUCCESS

    # -- memory and GPU sub-handles -------------------------------------------------------
    def mtmlDeviceInitMemory(self, dev: Any, mem: Any) -> int:
        entry = self.handles.get(_handle(dev))
        if entry is None or entry[0] != "device":
            return INVALID_ARGUMENT
        return self._new(mem, "memory", entry[1])

    def mtmlDeviceFreeMemory(self, mem: Any) -> int:
        return self._free(mem, "memory")

    def mtmlDeviceInitGpu(self, dev: Any, gpu: Any) -> int:
        entry = self.handles.get(_handle(dev))
        if entry is None or entry[0] != "device":
            return INVALID_ARGUMENT
        return self._new(gpu, "gpu", entry[1])

    def mtmlDeviceFreeGpu(self, gpu: Any) -> int:
        return self._free(gpu, "gpu")

    def _of(self, handle: Any, kind: str, attr: str, out: Any, scale: float = 1.0) -> int:
        g = self._get(handle, kind)
        if not isinstance(g, UnitReading):
            return INVALID_ARGUMENT
        value = getattr(g, attr)
        if value is None:
            return NOT_SUPPORTED
        set_out(out, round(value * scale))
        return SUCCESS

    def mtmlMemoryGetTotal(self, mem: Any, out: Any) -> int:
        return self._of(mem, "memory", "memory_total_bytes", out)

    def mtmlMemoryGetUsed(self, mem: Any, out: Any) -> int:
        return self._of(mem, "memory", "memory_used_bytes", out)

    def mtmlMemoryGetEccMode(self, mem: Any, cur: Any, pending: Any) -> int:
        g = self._get(mem, "memory")
        if not isinstance(g, UnitReading):
            return INVALID_ARGUMENT
        if g.ecc_enabled is None:
            return NOT_SUPPORTED
        set_out(cur, int(g.ecc_enabled))
        set_out(pending, int(g.ecc_enabled if g.ecc_pending is None else g.ecc_pending))
        return SUCCESS

    def mtmlGpuGetUtilization(self, gpu: Any, out: Any) -> int:
        return self._of(gpu, "gpu", "utilization_ratio", out, 100.0)

    def mtmlGpuGetTemperature(self, gpu: Any, out: Any) -> int:
        return self._of(gpu, "gpu", "temperature_celsius", out)

    def mtmlMemoryGetEccErrorCounter(
        self, mem: Any, error_type: Any, counter_type: Any, location: Any, out: Any
    ) -> int:
        g = self._get(mem, "memory")
        if not isinstance(g, UnitReading):
            return INVALID_ARGUMENT
        error_type, counter_type, location = _int(error_type), _int(counter_type), _int(location)
        if error_type not in (n.ERROR_CORRECTED, n.ERROR_UNCORRECTED):
            return INVALID_ARGUMENT
        if counter_type not in (n.VOLATILE_ECC, n.AGGREGATE_ECC) or location != n.LOCATION_DRAM:
            return INVALID_ARGUMENT
        counts = self.state.ecc.get(self.handles[_handle(mem)][1])
        if counts is None:
            return NOT_SUPPORTED
        set_out(out, counts[error_type])
        return SUCCESS
