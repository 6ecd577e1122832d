"""Invariants: bookkeeping checks (tests, crash tests and ``accel sched`` call them).

:func:`check_invariants` checks devices, gangs, free-device counts, tenant usage and limits,
reservations and metering against the journal; :func:`verify_reservations` checks the backfill
guarantee (no job started in a cycle delays a reservation).
"""

from __future__ import annotations

import math

import numpy as np

from accel.scheduler import SchedulerStateError

from ._order import queue
from ._state import EngineState
from ._tiers import TierViews
from ._types import JobState

__all__ = ["check_invariants", "segment_seconds", "verify_reservations", "verify_tiered"]


def check_invariants(st: EngineState) -> None:
    """Raise :class:`SchedulerStateError` if any bookkeeping invariant is broken."""
    cl = st.cluster
    if (cl.dev_left < 0).any() or (cl.dev_mem_left < 0).any():
        raise SchedulerStateError("a device is over-allocated")
    held: dict[tuple[int, int], int] = {}
    for job in st.jobs.values():
        if job.active:
            devs = sum(len(a.devices) for a in job.allocs)
            if devs != job.spec.devices:
                raise SchedulerStateError(f"gang {job.id} holds {devs} of {job.spec.devices} devices")
            for a in job.allocs:
                for s in a.devices:
                    held[(a.host, s)] = held.get((a.host, s), 0) + a.milli
        elif job.allocs:
            raise SchedulerStateError(f"job {job.id} is {job.state.value} but holds devices")
    for (h, s), milli in held.items():
        if milli > cl.dev_cap[h, s]:
            raise SchedulerStateError(f"device {cl.dev_ids[h][s]} holds {milli} milli")
    for h in range(cl.n_hosts):
        before = st.host_free[h].copy()
        st.refresh_host(h)
        if not np.array_equal(before, st.host_free[h]):
            raise SchedulerStateError(f"free-device count of host {cl.host_names[h]} drifted")
    for tname, t in st.book.tenants.items():
        running = sum(1 for j in st.jobs.values() if j.active and j.spec.tenant == tname)
        if st.book.running.get(tname, 0) != running:
            raise SchedulerStateError(f"tenant {tname}: running count drifted")
        if t.max_running_jobs is not None and running > t.max_running_jobs:
            raise SchedulerStateError(f"tenant {tname} runs {running} jobs, above its limit")
        for key, per in st.book.usage.get(tname, {}).items():
            lim = t.limit.get(key) or (t.guaranteed.get(key) if t.cohort is None else None)
            if lim is not None and not lim.allows(per):
                raise SchedulerStateError(f"tenant {tname} is above its limit in {key}")
    for jid, (_pool, at, _n) in st.reservations.items():
        rjob = st.jobs.get(jid)
        if rjob is None or rjob.state not in (JobState.QUEUED, JobState.SUSPENDED):
            continue
        if not math.isfinite(at):
            raise SchedulerStateError(f"reservation of {jid} has no time")
    # accounting: metered device-seconds equal the run segments of every job
    metered = sum(u.device_seconds for u in st.meter.totals(st.now).values())
    ran = segment_seconds(st)
    if not math.isclose(metered, ran, rel_tol=1e-9, abs_tol=1e-6):
        raise SchedulerStateError(f"metered {metered} device-seconds, jobs ran {ran}")


def verify_reservations(st: EngineState, now: float | None = None) -> None:
    """Every reservation still holds: replaying them in queue order over the current running
    jobs (with their expected ends), each job fits at its reserved time.  Called right after
    a cycle, this is the backfill guarantee: no job started in the cycle delays a reservation."""
    t = st.now if now is None else now
    if st.policy.demote_after_device_s:
        verify_tiered(st, t)
        return
    profiles = st.profiles(t)
    for job in queue(st, t):
        r = st.reservations.get(job.id)
        if r is None:
            continue
        pool, at, n = r
        d = st.duration(job)
        if not profiles[pool].fits(at, d, n):
            raise SchedulerStateError(f"reservation of {job.id} at {at} in {pool} is delayed")
        profiles[pool].add(at, at + d, n)


def verify_tiered(st: EngineState, now: float) -> None:
    views = TierViews(st, now)
    for job in queue(st, now):
        r = st.reservations.get(job.id)
        if r is None:
            continue
        pool, at, n = r
        if not views.pair(job, pool).fits(at, n):
            raise SchedulerStateError(f"reservation of {job.id} at {at} in {pool} is delayed")
        views.book(pool, at, job)


def segment_seconds(st: EngineState) -> float:
    total = 0.0
    starts: dict[str, tuple[float, int]] = {}
    for ev in st.journal.events():
        if ev.kind in ("placed", "resumed"):
            starts[str(ev.job)] = (ev.t, sum(len(s) for _, s in ev.data["chunks"]))
        elif ev.kind in ("preempted", "finished", "failed", "cancelled") and ev.job in starts:
            t0, n = starts.pop(str(ev.job))
            total += n * (ev.t - t0)
    for t0, n in starts.values():
        total += n * (st.now - t0)
    return total
