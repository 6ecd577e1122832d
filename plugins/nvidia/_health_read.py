"""One GPU's health from a sample, its throttle and temperature reads, and the events seen.

The rules (which counter, XID or throttle reason means what) are :mod:`._health`'s; this reads
what they judge.  Health is earned: a GPU none of whose health queries answered is unmonitored,
never healthy.
"""

from __future__ import annotations

from datetime import datetime

from ...model import Action as Act
from ...model import Health, HealthCondition, Operational, Severity, Subsystem
from ._events import Events
from ._handles import Handles, NvmlPart
from ._health import (
    RECOVERY_ACTIONS,
    Counters,
    counter_conditions,
    lost_condition,
    temperature_conditions,
    throttle_conditions,
)
from ._nvml import C
from ._samples import Sample
from ._static import Static, StaticReader

__all__ = ["HealthReader"]


def counters(st: Static, s: Sample) -> Counters:
    """The health counters of one sample."""
    f = s.fields

    def num(fid: int) -> int | None:
        v = f.get(fid)
        return int(v) if v is not None else None

    def flag(fid: int) -> bool | None:
        v = f.get(fid)
        return bool(v) if v is not None else None

    return Counters(
        dbe_volatile=num(C.FI_ECC_DBE_VOL_TOTAL), sbe_volatile=num(C.FI_ECC_SBE_VOL_TOTAL),
        dbe_aggregate=num(C.FI_ECC_DBE_AGG_TOTAL), retired_sbe=num(C.FI_RETIRED_SBE),
        retired_dbe=num(C.FI_RETIRED_DBE), retired_pending=flag(C.FI_RETIRED_PENDING),
        remap_pending=flag(C.FI_REMAPPED_PENDING), remap_failure=flag(C.FI_REMAPPED_FAILURE),
        nvlink_replay=num(C.FI_NVLINK_REPLAY_TOTAL), nvlink_recovery=num(C.FI_NVLINK_RECOVERY_TOTAL),
        nvlink_crc=num(C.FI_NVLINK_CRC_FLIT_TOTAL), links_down=s.down_links([lk.index for lk in st.nvlinks]),
    )


class HealthReader(NvmlPart):
    """Builds each GPU's :class:`Health`; remembers the last counters to tell what grew."""

    def __init__(self, handles: Handles, statics: StaticReader, events: Events) -> None:
        super().__init__(handles)
        self._statics = statics
        self._events = events
        self._previous: dict[str, Counters] = {}

    def health(self, index: int, s: Sample | None, at: datetime) -> Health:
        """GPU ``index``'s health from sample ``s`` (``None``: it could not be sampled)."""
        st = self._statics.statics.get(index)
        device_id = st.device_id if st else f"nvidia:index-{index}"
        events = self._events
        xids = list(events.xids.get(device_id, {}).values())
        monitored = events.monitored.get(index, False) and events.failure is None
        if index in self._lost or s is None or s.lost:
            since = self._lost.get(index, at)
            return Health(operational=Operational.LOST, monitored=monitored,
                          conditions=(lost_condition(since), *xids), checked_at=at)
        conds: list[HealthCondition] = []
        if st is not None:
            readable = self._conditions(st, s, at, conds)
            if not readable:
                # Every health query answered NOT_SUPPORTED (or no permission): unknown, never healthy.
                monitored = False
        conds += s.read.conditions
        if events.failure is not None:
            conds.append(HealthCondition(subsystem=Subsystem.MONITORING, reason="EventsUnavailable",
                                         severity=Severity.INFO, message=events.failure))
        return Health(operational=Operational.ONLINE, monitored=monitored, conditions=(*conds, *xids),
                      checked_at=at)

    def _conditions(self, st: Static, s: Sample, at: datetime, conds: list[HealthCondition]) -> bool:
        """Adds the counter, throttle, temperature and recovery conditions; whether any was readable."""
        now_counters = counters(st, s)
        conds += counter_conditions(now_counters, at=at, previous=self._previous.get(st.device_id))
        self._previous[st.device_id] = now_counters
        h = self._handle(st.index)
        throttle = self._get(s.read, None, "nvmlDeviceGetCurrentClocksEventReasons", h,
                             fallback="nvmlDeviceGetCurrentClocksThrottleReasons")
        if throttle is not None:
            conds += throttle_conditions(int(throttle), at=at)
        temp = self._get(s.read, None, "nvmlDeviceGetTemperatureV", h, C.TEMPERATURE_GPU,
                         fallback="nvmlDeviceGetTemperature")
        conds += temperature_conditions(temp, *st.thresholds, at=at)
        readable = temp is not None or throttle is not None or any(
            v is not None for k, v in vars(now_counters).items() if k != "links_down")
        action = s.fields.get(C.FI_GPU_RECOVERY_ACTION)
        if action:
            act = RECOVERY_ACTIONS.get(int(action), Act.INVESTIGATE)
            conds.append(HealthCondition(subsystem=Subsystem.DEVICE, reason="RecoveryActionRequired",
                                         severity=Severity.CRITICAL, action=act,
                                         vendor_code=f"nvidia.recovery_action:{int(action)}",
                                         message=f"NVML recovery action {int(action)}",
                                         first_seen=at, last_seen=at))
        return readable
