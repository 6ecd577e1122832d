"""A faithful fake ``libhgml.so`` for tests, answering from a scenario's device state.

The state is the scenario's ``native.toml`` (:data:`accel.toolkit.NATIVE_STATE_FILE`): a
``driver`` version, ``[defaults]`` for every device, and one ``[[device]]`` per PPU with its
``index``, ``bus_id``, ``uuid`` and any value that differs (``ecc_uncorrected``...).  The fake
keeps HGML's conventions: calls before ``hgmlInitWithFlags`` are ``UNINITIALIZED``, devices are
opaque handles, a stale handle is ``INVALID_ARGUMENT``, a string that does not fit its buffer is
``INSUFFICIENT_SIZE``, memory in bytes, power in mW, a value the state lacks ``NOT_SUPPORTED``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

from accel.errors import ConfigError
from accel.toolkit import FakeLibrary, deref, read_native_state, set_out

from ._backend import TABLE

__all__ = ["FakeHgml", "fake_of_replay"]

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED, INSUFFICIENT_SIZE = 0, 1, 2, 3, 7
_HANDLE_BASE = 0x5000  # handles are opaque pointers; the fake's are this plus the index


class FakeHgml(FakeLibrary):
    """``libhgml.so`` over ``state`` (the parsed ``native.toml``)."""

    TABLE = TABLE

    def __init__(self, state: Mapping[str, Any]) -> None:
        super().__init__()
        defaults = dict(state.get("defaults", {}))
        try:
            self.devices = [{**defaults, **d} for d in sorted(state["device"], key=lambda d: int(d["index"]))]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"native state: every [[device]] needs an index: {exc}") from exc
        if [int(d["index"]) for d in self.devices] != list(range(len(self.devices))):
            raise ConfigError("native state: device indices must be 0..N-1")
        self.driver = state.get("driver")
        self.initialized = False

    def _dev(self, handle: Any) -> dict[str, Any] | None:
        index = (handle.value or 0) - _HANDLE_BASE
        return self.devices[index] if self.initialized and 0 <= index < len(self.devices) else None

    def _bad(self, handle: Any) -> int:
        return UNINITIALIZED if not self.initialized else INVALID_ARGUMENT

    @staticmethod
    def _put(buf: Any, size: int, text: object) -> int:
        if text is None:
            return NOT_SUPPORTED
        raw = str(text).encode()
        if len(raw) + 1 > size:
            return INSUFFICIENT_SIZE
        ctypes.memmove(buf, raw + b"\0", len(raw) + 1)
        return SUCCESS

    def hgmlInitWithFlags(self, flags: int) -> int:
        self.initialized = True
        return SUCCESS

    def hgmlSystemGetDriverVersion(self, buf: Any, size: int) -> int:
        return self._put(buf, size, self.driver) if self.initialized else UNINITIALIZED

    def hgmlDeviceGetCount_v2(self, count: Any) -> int:
        if not self.initialized:
            return UNINITIALIZED
        set_out(count, len(self.devices))
        return SUCCESS

    def hgmlDeviceGetHandleByIndex_v2(self, index: int, handle: Any) -> int:
        if not self.initialized:
            return UNINITIALIZED
        if not 0 <= index < len(self.devices):
            return INVALID_ARGUMENT
        set_out(handle, _HANDLE_BASE + index)
        return SUCCESS

    def hgmlDeviceGetName(self, handle: Any, buf: Any, size: int) -> int:
        dev = self._dev(handle)
        return self._bad(handle) if dev is None else self._put(buf, size, dev.get("name"))

    def hgmlDeviceGetUUID(self, handle: Any, buf: Any, size: int) -> int:
        dev = self._dev(handle)
        return self._bad(handle) if dev is None else self._put(buf, size, dev.get("uuid"))

    def hgmlDeviceGetPciInfo_v3(self, handle: Any, info: Any) -> int:
        dev = self._dev(handle)
        if dev is None:
            return self._bad(handle)
        pci, bus_id = deref(info), str(dev["bus_id"])
        pci.busId, pci.busIdLegacy = bus_id.encode(), bus_id[4:].encode()
        domain, bus, rest = bus_id.split(":")
        pci.domain, pci.bus, pci.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        return SUCCESS

    def hgmlDeviceGetMemoryInfo(self, handle: Any, info: Any) -> int:
        dev = self._dev(handle)
        if dev is None:
            return self._bad(handle)
        if "memory_total_mib" not in dev:
            return NOT_SUPPORTED
        mem = deref(info)
        mem.total, mem.used = dev["memory_total_mib"] << 20, dev.get("memory_used_mib", 0) << 20
        mem.free = mem.total - mem.used
        return SUCCESS

    def hgmlDeviceGetUtilizationRates(self, handle: Any, util: Any) -> int:
        dev = self._dev(handle)
        if dev is None:
            return self._bad(handle)
        if "util_gpu" not in dev:
            return NOT_SUPPORTED
        out = deref(util)
        out.gpu, out.memory = dev["util_gpu"], dev.get("util_memory", 0)
        return SUCCESS

    def _scalar(self, handle: Any, key: str, out: Any) -> int:
        dev = self._dev(handle)
        if dev is None:
            return self._bad(handle)
        if key not in dev:
            return NOT_SUPPORTED
        set_out(out, int(dev[key]))
        return SUCCESS

    def hgmlDeviceGetTemperature(self, handle: Any, sensor: int, temp: Any) -> int:
        return self._scalar(handle, "temperature_c", temp) if sensor == 0 else INVALID_ARGUMENT

    def hgmlDeviceGetPowerUsage(self, handle: Any, power: Any) -> int:
        return self._scalar(handle, "power_mw", power)

    def hgmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int, count: Any) -> int:
        dev = self._dev(handle)
        if dev is None:
            return self._bad(handle)
        if error_type not in (0, 1) or counter_type not in (0, 1):
            return INVALID_ARGUMENT
        set_out(count, int(dev.get("ecc_uncorrected" if error_type else "ecc_corrected", 0)))
        return SUCCESS


def fake_of_replay(runner: Any) -> FakeHgml:
    """The fake of the scenario ``runner`` answers from (its ``native.toml``)."""
    state = read_native_state(runner)
    if not state:
        raise ConfigError("the ppu scenario has no native.toml: nothing for the fake libhgml to answer")
    return FakeHgml(state)
