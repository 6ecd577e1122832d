"""XID and ECC events: the NVML event set, which GPUs it monitors, and the XIDs seen so far.

A GPU whose event registration fails (NOT_SUPPORTED, NO_PERMISSION) is unmonitored: its health
is then not claimed healthy.  An XID whose rule says the GPU is lost marks it lost.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ...errors import AccelError
from ...model import HealthCondition
from ...plugin import DeviceEvent
from ._handles import Handles, NvmlPart, now, text
from ._health import xid_condition, xid_rule
from ._nvml import C, nvml_code_of
from ._static import StaticReader

__all__ = ["NOT_ATTRIBUTED", "Events"]

#: The GPU / compute instance id of an event or a process that no MIG instance owns.
NOT_ATTRIBUTED = C.EVENT_NONE_ATTRIBUTED


class Events(NvmlPart):
    """The event set of the first ``count`` GPUs and what it delivered."""

    def __init__(self, handles: Handles, statics: StaticReader, count: int) -> None:
        super().__init__(handles)
        self._statics = statics
        self._count = count
        self._event_set: Any = None
        #: GPU index -> whether its XID events are registered.
        self.monitored: dict[int, bool] = {}
        #: Why events are not delivered at all (``None``: they are).
        self.failure: str | None = None
        #: Device id -> (XID, partition) -> the condition it raised (counted, first and last seen).
        self.xids: dict[str, dict[tuple[int, str | None], HealthCondition]] = {}

    def register(self) -> None:
        try:
            self._event_set = self._nv.call("nvmlEventSetCreate")
        except AccelError as err:
            self.failure = f"cannot create an NVML event set: {err}"
            return
        want = C.EVENT_XID_CRITICAL | C.EVENT_DOUBLE_BIT_ECC | C.EVENT_SINGLE_BIT_ECC
        for i in range(self._count):
            try:
                h = self._handle(i)
                mask = int(self._nv.call("nvmlDeviceGetSupportedEventTypes", h)) & want
                if mask & C.EVENT_XID_CRITICAL:
                    self._nv.call("nvmlDeviceRegisterEvents", h, mask, self._event_set)
                    self.monitored[i] = True
                else:
                    self.monitored[i] = False
            except AccelError:
                # NOT_SUPPORTED / NO_PERMISSION: this GPU's health is unmonitored (state unknown).
                self.monitored[i] = False

    def poll(self, timeout_s: float) -> tuple[DeviceEvent, ...]:
        """XID and ECC events since the last poll; waits up to ``timeout_s`` for the first."""
        if self._event_set is None:
            return ()
        out: list[DeviceEvent] = []
        wait_ms = max(0, int(timeout_s * 1000))
        for _ in range(10_000):
            try:
                data = self._nv.call("nvmlEventSetWait", self._event_set, wait_ms)
            except AccelError as err:
                if nvml_code_of(err) != C.ERROR_TIMEOUT:
                    self.failure = f"nvmlEventSetWait failed: {err}"
                break
            wait_ms = 0
            event = self._event(data)
            if event is not None:
                out.append(event)
        return tuple(out)

    def _event(self, data: Any) -> DeviceEvent | None:
        at = now()
        try:
            uuid = text(self._nv.call("nvmlDeviceGetUUID", data.device))
        except AccelError:
            return None
        device_id = f"nvidia:{uuid}"
        index = self._statics.index_of(uuid, self._count)
        etype, payload = int(data.eventType), int(data.eventData)
        gi, ci = int(data.gpuInstanceId), int(data.computeInstanceId)
        partition = None
        if gi != NOT_ATTRIBUTED:
            partition = f"GI {gi}" + (f"/CI {ci}" if ci != NOT_ATTRIBUTED else "")
        if etype & C.EVENT_XID_CRITICAL:
            xid = payload
        elif etype & C.EVENT_DOUBLE_BIT_ECC:
            xid = 48
        else:
            return None  # single-bit ECC events are counted by the ECC counters, not conditions
        store = self.xids.setdefault(device_id, {})
        key = (xid, partition)
        prev = store.get(key)
        cond = xid_condition(xid, at=at, count=(prev.count + 1) if prev else 1,
                             first_seen=prev.first_seen if prev else at, partition=partition)
        store[key] = cond
        if xid_rule(xid).lost and index is not None:
            self._lost.setdefault(index, at)
        return DeviceEvent(device_id=device_id, timestamp=at, condition=cond)

    def close(self) -> None:
        if self._event_set is not None:
            with contextlib.suppress(AccelError):  # nothing to release if the driver refuses
                self._nv.call("nvmlEventSetFree", self._event_set)
            self._event_set = None
