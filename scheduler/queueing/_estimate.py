"""Wait estimates: when a queued job would start in each pool, and why it waits.

The planning walk (:mod:`._walk`, planning mode) books the jobs ahead of the target and asks
:func:`estimate_in` for the target's start in each pool: on the walk's profile (or, in a tiered
walk, the :class:`TierFit` of its class and tier), after the fluid work planned beyond the exact
depth, and after the tenant's own jobs free its quota (:func:`quota_frees_at`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ._profile import Profile
from ._records import Job
from ._state import EngineState
from ._tenants import Admission, Usage
from ._tiers import TierFit
from ._types import WaitReason

__all__ = ["WaitEstimate", "estimate_in", "quota_frees_at"]


@dataclass(frozen=True, slots=True)
class WaitEstimate:
    """When a queued job would start in one pool, and why it waits.

    ``wait_s`` is the planned wait (every job ahead booked at its expected hold); ``p50_s`` and
    ``p90_s`` are the median and 90th percentile of the wait given the spread of the durations
    the duration model predicts for the jobs ahead (``_intervals``; equal to ``wait_s`` with
    declared durations taken as exact), ``log_spread`` the log-normal spread they come from and
    ``basis`` the duration assumption in words.  None until the engine fills them (it always
    does in :meth:`QueueingScheduler.estimate`)."""

    pool: str
    start_at: float
    wait_s: float
    reason: WaitReason
    price_per_hour: float
    p50_s: float | None = None
    p90_s: float | None = None
    log_spread: float = 0.0
    basis: str = ""

    def describe(self) -> str:
        if self.reason == WaitReason.PLACEMENT:
            when = "not now: enough devices are free but the placement pipeline refused it"
        elif not math.isfinite(self.wait_s):
            when = "not with the current capacity"
        elif (self.wait_s if self.p50_s is None else self.p50_s) < 30:
            when = "now"
        else:
            when = _span(self.wait_s if self.p50_s is None else self.p50_s)
        why = "" if self.reason == WaitReason.NONE else f" ({self.reason.value})"
        if self.p90_s is not None and self.p50_s is not None and math.isfinite(self.p90_s) \
                and self.p90_s >= 30 and self.p90_s > self.p50_s * 1.05:
            when += f" (p90 {_span(self.p90_s)})"
        return f"{self.pool} pool: {when}{why}, {self.price_per_hour:.2f}/h"


def _span(s: float) -> str:
    return f"about {round(s / 60)} minutes" if s < 5400 else f"about {s / 3600:.1f} hours"


def estimate_in(st: EngineState, job: Job, pool: str, prof: Profile, now: float, work_ahead: float,
                 adm: Admission, blocked: Mapping[str, float], *, hold: float | None = None,
                 alone_prof: Profile | None = None, fit: TierFit | None = None) -> WaitEstimate:
    n, d = job.spec.devices, (st.duration(job) if hold is None else hold)
    price = st.meter.prices.device_hour(pool) * job.spec.compute_milli / 1000.0
    if n > st.pool_capacity(pool):
        return WaitEstimate(pool, math.inf, math.inf, WaitReason.CAPACITY, price)
    after = prof.area_time(work_ahead, now) if work_ahead > 0 else now
    after = max(after, blocked.get(pool, now))
    t = prof.earliest(n, d, after=after) if fit is None else fit.earliest(n, after=after)
    reason = WaitReason.NONE
    if not adm.ok:
        reason = WaitReason.QUOTA
        t = max(t, quota_frees_at(st, job, pool, now))
    elif t > now + 1e-9:
        # alone on the running jobs it would start at ``alone``: later means jobs ahead of it
        alone = (alone_prof if alone_prof is not None else st.profiles(now)[pool]).earliest(n, d)
        if alone >= t - 1e-9:
            reason = WaitReason.CAPACITY
        elif prof.free_now >= n:
            reason = WaitReason.RESERVATION  # devices are free now but held for jobs ahead
        else:
            reason = WaitReason.PRIORITY
    return WaitEstimate(pool, t, t - now, reason, price)


def quota_frees_at(st: EngineState, job: Job, pool: str, now: float) -> float:
    """Earliest expected end of the tenant's own running jobs after which its quota admits ``job``."""
    tenant = job.spec.tenant
    mine = sorted((st.expected_end(j, now), j.seq, j) for j in st.running() if j.spec.tenant == tenant)
    freed: dict[str, Usage] = {}
    for k, (end, _seq, j) in enumerate(mine):
        for key in (j.pool or pool, "*"):
            freed[key] = freed.get(key, Usage()).plus(st.usage(j))
        if st.book.admit(tenant, pool, st.need(job, pool), minus=freed, running_minus=k + 1).ok:
            return end
    return math.inf
