"""The fake's event sets: scripted events popped by ``nvmlEventSetWait``, never a sleep."""

from __future__ import annotations

import ctypes
from typing import Any

from ._fake_core import FakeCore

__all__ = ["EventCalls"]


class EventCalls(FakeCore):
    """``nvmlEventSetCreate`` / ``RegisterEvents`` / ``Wait`` / ``Free``."""

    def nvmlEventSetCreate(self) -> Any:
        self._enter("nvmlEventSetCreate")
        buf = (ctypes.c_int * 1)(len(self._event_bufs))
        self._event_bufs.append(buf)
        self._event_sets[ctypes.addressof(buf)] = {}
        return ctypes.cast(buf, self.pynvml.c_nvmlEventSet_t)

    def _set(self, event_set: Any) -> dict[int, int]:
        addr = ctypes.cast(event_set, ctypes.c_void_p).value
        if addr not in self._event_sets:
            raise self._err(2)
        return self._event_sets[addr]

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        return self._gpu("nvmlDeviceGetSupportedEventTypes", handle).supported_events

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        gpu, _mig, index = self._enter("nvmlDeviceRegisterEvents", handle)
        assert gpu is not None
        registered = self._set(eventSet)
        if eventTypes & ~gpu.supported_events:
            raise self._err(3)
        registered[index] = registered.get(index, 0) | eventTypes

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int, _fn: str = "nvmlEventSetWait_v2") -> Any:
        self._enter(_fn)
        registered = self._set(eventSet)
        for _ in range(len(self._events)):
            ev = self._events.popleft()
            if registered.get(ev.gpu, 0) & ev.event_type:
                data = self.pynvml.c_nvmlEventData_t()
                data.device = self._handle(ev.gpu)
                data.eventType, data.eventData = ev.event_type, ev.xid
                data.gpuInstanceId, data.computeInstanceId = ev.gi_id, ev.ci_id
                return data
            self._events.append(ev)
        # No event: NVML_ERROR_TIMEOUT, raised at once (the fake never sleeps).
        raise self._err(10)

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:
        return self.nvmlEventSetWait_v2(eventSet, timeoutms, _fn="nvmlEventSetWait")

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        self._enter("nvmlEventSetFree")
        addr = ctypes.cast(eventSet, ctypes.c_void_p).value
        self._event_sets.pop(addr or 0, None)
