"""Attained-service tiers (``Policy.demote_after_device_s``) and the starvation guard.

A job's tier is how many service thresholds it passed (the engine's ``tier``); a tiered walk
plans each job on the free-device view of its own class and tier (:class:`TierViews`), where
its class's later-tier jobs are preemptible and the others hold their devices only until they
would leave that tier.  The starvation guard (``Policy.promote_after_wait_*``) promotes a job
that waited too long and restarts its tiers; :func:`next_wakeup` says when either change next
needs a cycle.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ._estimators import DeclaredModel, capped_remaining
from ._events import emit
from ._order import waiting_tiers
from ._profile import Profile
from ._records import Job
from ._state import EngineState
from ._types import JobState

__all__ = ["TierFit", "TierViews", "budget", "hold", "journal_demotion", "next_wakeup", "profiles", "promote_at",
           "promote_starving", "releasable", "view_end"]


def promote_at(st: EngineState, job: Job) -> float:
    """When the starvation guard promotes a waiting job (``inf``: never, or already promoted).

    A function of journaled state only: when the job last entered the queue and how long its
    last run lasted; the guard is Tiresias' STARVELIMIT (ratio x last run) and/or an absolute
    wait, whichever comes first.  A job that never ran is promoted only by the absolute wait."""
    if job.promoted or job.state not in (JobState.QUEUED, JobState.SUSPENDED):
        return math.inf
    pol = st.policy
    at = math.inf
    if pol.promote_after_wait_s is not None:
        at = job.queued_at + pol.promote_after_wait_s
    if pol.promote_after_wait_ratio is not None and job.last_run_s > 0:
        at = min(at, job.queued_at + pol.promote_after_wait_ratio * job.last_run_s)
    return at


def promote_starving(st: EngineState, now: float) -> None:
    """Journal a ``promoted`` event for every waiting job whose promotion time has come."""
    due = [j for j in st.waiting.values() if promote_at(st, j) <= now + 1e-9]
    for job in sorted(due, key=lambda j: j.seq):
        waited = now - job.queued_at
        emit(st, now, job.id, "promoted",
                   f"waited {waited:.0f} s (last run {job.last_run_s:.0f} s): first in its class",
                   {"waited_s": waited, "base_device_s": st.attained(job, now)})


def journal_demotion(st: EngineState, job: Job, now: float) -> None:
    """A ``demoted`` event when a job's tier change first matters (it is about to be preempted
    for a job of an earlier tier), so ``accel sched history`` shows why it went behind.  Not
    journaled on every crossing: a storm of them would cost more than the cycle."""
    q = st.tier(job, now)
    if q > job.tier_seen:
        th = st.policy.demote_after_device_s
        att = st.attained(job, now)
        emit(st, now, job.id, "demoted",
                   f"tier {job.tier_seen} -> {q}: {att:.0f} device-s of service passed {th[q - 1]:g}",
                   {"tier": q, "attained_device_s": att})


def budget(st: EngineState, job: Job, now: float, q: int) -> float:
    """Run seconds before ``job`` leaves tiers <= ``q`` (infinite from the last tier)."""
    th = st.policy.demote_after_device_s
    if q >= len(th):
        return math.inf
    return max(0.0, (th[q] - st.attained(job, now) + job.service_base) / (job.spec.compute_milli / 1000.0))


def hold(st: EngineState, job: Job, done: float, more: float) -> float:
    """Expected run time of a job that has ``done`` seconds of work, counted up to ``more`` more."""
    return capped_remaining(st.durations, (job.spec.tenant, job.spec.devices), job.spec.estimate_s, done,
                            done + more, st.policy.overrun_margin_s)


def releasable(st: EngineState, v: Job, level: int, q: int, now: float) -> bool:
    """A running job a tier-``q`` job of class ``level`` may preempt: same class, later tier."""
    return (v.state == JobState.RUNNING and v.klass.level == level and v.spec.preemptible
            and v.klass.preemptible and st.tier(v, now) > q)


def profiles(st: EngineState, now: float, level: int, q: int) -> dict[str, Profile]:
    """Free devices as a tier-``q`` job of class ``level`` sees them: running jobs of its class
    in a later tier are preemptible (free after the grace period), the others of its class
    hold their devices only until they would leave tiers <= ``q``."""
    rel: dict[str, list[tuple[float, int]]] = {p: [] for p in st.pools}
    for v in st.active.values():
        if v.pool is not None:
            rel[v.pool].append((view_end(st, v, now, level, q), v.spec.devices))
    return {p: Profile(now, st.pool_free(p), rel[p]) for p in st.pools}


def view_end(st: EngineState, v: Job, now: float, level: int, q: int) -> float:
    """When active job ``v`` gives its devices back as a tier-``q`` job of class ``level`` sees it."""
    if v.state == JobState.PREEMPTING and v.stop_at is not None:
        return v.stop_at
    if releasable(st, v, level, q, now):
        # preempted, it gives its devices back when the grace period ends; one expected to end
        # sooner is never a victim (:func:`~._preempt.tier_victims`): it frees them then
        return min(now + st.policy.grace_s, st.expected_end(v, now))
    if v.klass.level == level:
        return now + hold(st, v, v.progress(now), budget(st, v, now, q))
    return st.expected_end(v, now)


def next_wakeup(st: EngineState, now: float | None = None) -> float | None:
    """When the next cycle should run even if nothing else happens: the earliest time a
    running job leaves its tier while a job of an earlier tier of its class waits (it may then
    be preempted), or the starvation guard promotes a waiting job.  ``None`` without tiers
    or guard, or when no such change is ahead."""
    t = st.now if now is None else now
    promote = min((promote_at(st, j) for j in st.waiting.values()), default=math.inf) \
        if st.guard else math.inf
    if not st.policy.demote_after_device_s or not st.waiting:
        return promote if math.isfinite(promote) and promote > t else None
    lowest: dict[int, int] = {}
    for level, q in waiting_tiers(st, t):  # kept by the engine: a waiting job's tier is fixed while it waits
        lowest[level] = min(q, lowest.get(level, q))
    best = promote
    th = st.policy.demote_after_device_s
    for v in st.active.values():
        if v.state != JobState.RUNNING or v.klass.level not in lowest:
            continue
        # QueueingScheduler.tier and budget() written out on one reading of the attained
        # service (term for term the same arithmetic): this runs over every running job per cycle
        att = st.attained(v, t)
        q = bisect.bisect_right(th, att - v.service_base + 1e-6)
        if q >= lowest[v.klass.level]:
            left = math.inf if q >= len(th) else \
                max(0.0, (th[q] - att + v.service_base) / (v.spec.compute_milli / 1000.0))
            best = min(best, t + left)
    return best if math.isfinite(best) and best > t else None


class TierViews:
    """The free-device profiles of one tiered walk, one per (class level, tier), built from the
    state when first asked for.  Every start or reservation of the walk is booked on each view it
    affects, for as long as that job holds its devices against jobs of that view: inside its own
    class until it leaves the view's tier, against any other class for its whole duration.  It
    is not booked on its own class's earlier-tier views: those jobs may preempt it."""

    __slots__ = ("_active", "_base", "_bookings", "_columns", "_holds", "_pairs", "_upfront", "_views", "now", "st")

    def __init__(self, st: EngineState, now: float, keys: Iterable[tuple[int, int]] = ()) -> None:
        self.st, self.now = st, now
        # what every base view reads of each active job, once per walk: (job, pool, stop_at if
        # winding down, preemptible by its class, tier, progress, attained service)
        self._active: list[tuple[Job, str, float | None, bool, int, float, float]] | None = None
        self._base: dict[tuple[int, int], dict[str, Profile]] = {}
        self._columns: tuple[Any, ...] | None = None  # _declared_profiles' columns of ``_active``
        self._upfront = False
        self._holds: dict[tuple[Job, int, int], tuple[float, float, float, float | None, float]] = {}
        self._views: dict[tuple[int, int], dict[str, Profile]] = {}
        self._bookings: list[tuple[str, float, Job]] = []
        self._pairs: dict[tuple[Job, str], tuple[int, float, float, float, float | None, TierFit]] = {}
        # a walk builds its views up front: one built later from the live state would count
        # the walk's own starts twice (running, and booked)
        # (built up front, before the walk changes anything, the views may read the active jobs'
        # ends as columns: ``_declared_profiles``)
        self._upfront = True
        for level, q in sorted(keys):
            self.get(level, q)
        self._upfront, self._columns = False, None

    def items(self) -> list[tuple[tuple[int, int], dict[str, Profile]]]:
        return list(self._views.items())

    def release(self, v: Job) -> None:
        """``v`` is about to be preempted: its devices are free on every view after the grace period."""
        if v.pool is None:
            return
        t = self.now + self.st.policy.grace_s
        for (level, q), view in self._views.items():
            end = view_end(self.st, v, self.now, level, q)
            if end > t:
                view[v.pool].add(t, end, -v.spec.devices)
            elif end < t:  # it was to stop before the grace period ends: it now holds them until then
                view[v.pool].add(end, t, v.spec.devices)

    def base(self, level: int, q: int) -> dict[str, Profile]:
        """The view without this walk's bookings."""
        key = (level, q)
        if key not in self._base:
            self._base[key] = self._profiles(level, q)
        return self._base[key]

    def _profiles(self, level: int, q: int) -> dict[str, Profile]:
        """:func:`profiles` for this walk's instant: the same ends as :func:`view_end`, with what
        does not depend on the view (each active job's tier, progress, attained service) read once
        per walk instead of once per view."""
        st, now = self.st, self.now
        th = st.policy.demote_after_device_s
        rows = self._active
        if rows is None:
            rows = self._active = []
            running, winding = JobState.RUNNING, JobState.PREEMPTING
            for v in st.active.values():
                if v.pool is None:
                    continue
                state = v.state
                if state == winding and v.stop_at is not None:
                    rows.append((v, v.pool, v.stop_at, False, 0, 0.0, 0.0))
                    continue
                # Job.progress, QueueingScheduler.attained and .tier, written out: this loop runs
                # over every active job at every walk, and the arithmetic is theirs, term for term
                started = v.started_at
                done = v.work_s + max(0.0, now - started) if state in (running, winding) \
                    and started is not None else v.work_s
                att = (done + v.lost_s) * v.spec.compute_milli / 1000.0
                tier = bisect.bisect_right(th, att - v.service_base + 1e-6) if th else 0
                pre = state == running and v.spec.preemptible and v.klass.preemptible
                rows.append((v, v.pool, None, pre, tier, done, att))
        grace = st.policy.grace_s
        if self._upfront and type(st.durations) is DeclaredModel:
            return self._declared_profiles(rows, level, q)
        rel: dict[str, list[tuple[float, int]]] = {p: [] for p in st.pools}
        for v, pool, stop, pre, tier, done, att in rows:
            if stop is not None:
                end = stop
            elif v.klass.level != level:
                end = st.expected_end(v, now)
            elif pre and tier > q:
                end = now + grace
            else:
                more = math.inf if q >= len(th) else \
                    max(0.0, (th[q] - att + v.service_base) / (v.spec.compute_milli / 1000.0))
                end = now + hold(st, v, done, more)
            rel[pool].append((end, v.spec.devices))
        return {p: Profile(now, st.pool_free(p), rel[p]) for p in st.pools}

    def _declared_profiles(self, rows: list[tuple[Job, str, float | None, bool, int, float, float]],
                           level: int, q: int) -> dict[str, Profile]:
        """:meth:`_profiles` under the :class:`DeclaredModel` (the default), as array arithmetic.

        Each active job's end is the loop's, operation for operation in float64: another class's
        job ends at ``expected_end`` (declared estimate - work done, ``overrun_margin_s`` once past
        it; at least 1 s for a job that started this instant), a later-tier preemptible job of
        the class when the grace period ends, one of its class in tiers <= ``q`` after
        ``capped_remaining`` (that remaining time, at most its budget left in the tier).  The
        columns that do not depend on the view are read once, while the views are built up front
        (``expected_end`` reads the live job, so a view built later in the walk takes the loop)."""
        st, now = self.st, self.now
        cols = self._columns
        if cols is None:
            pool_ix = {p: i for i, p in enumerate(st.pools)}
            n = len(rows)
            pix = np.fromiter((pool_ix[r[1]] for r in rows), dtype=np.int64, count=n)
            stop = np.fromiter((math.nan if r[2] is None else r[2] for r in rows), dtype=np.float64, count=n)
            pre = np.fromiter((r[3] for r in rows), dtype=bool, count=n)
            tier = np.fromiter((r[4] for r in rows), dtype=np.int64, count=n)
            done = np.fromiter((r[5] for r in rows), dtype=np.float64, count=n)
            att = np.fromiter((r[6] for r in rows), dtype=np.float64, count=n)
            lvl = np.fromiter((r[0].klass.level for r in rows), dtype=np.int64, count=n)
            devs = np.fromiter((r[0].spec.devices for r in rows), dtype=np.int64, count=n)
            est = np.fromiter((r[0].spec.estimate_s for r in rows), dtype=np.float64, count=n)
            work = np.fromiter((r[0].work_s for r in rows), dtype=np.float64, count=n)
            base = np.fromiter((r[0].service_base for r in rows), dtype=np.float64, count=n)
            share = np.fromiter((r[0].spec.compute_milli for r in rows), dtype=np.float64, count=n) / 1000.0
            # DeclaredModel.remaining from the work done now
            left = est - done
            left = np.where(left > 0, left, st.policy.overrun_margin_s)
            # expected_end (a winding-down job with a stop time ends then: ``stop`` below)
            ends = np.where(done == work, now + np.maximum(1.0, left), now + left)
            cols = self._columns = (pix, stop, pre, tier, done, att, lvl, devs, base, share, left, ends)
        pix, stop, pre, tier, done, att, lvl, devs, base, share, left, ends = cols
        th = st.policy.demote_after_device_s
        end = ends.copy()
        mine = lvl == level
        if mine.any():
            if q >= len(th):
                own = now + left  # capped_remaining with no cap: the remaining time
            else:
                more = np.maximum(0.0, (th[q] - att + base) / share)
                budget = (done + more) - done
                own = now + np.where(budget <= 0, 0.0, np.minimum(budget, left))
            own = np.where(pre & (tier > q), now + st.policy.grace_s, own)
            end = np.where(mine, own, end)
        end = np.where(np.isnan(stop), end, stop)
        out: dict[str, Profile] = {}
        for i, p in enumerate(st.pools):
            sel = pix == i
            out[p] = Profile(now, st.pool_free(p), zip(end[sel].tolist(), devs[sel].tolist(), strict=True))
        return out

    def get(self, level: int, q: int) -> dict[str, Profile]:
        key = (level, q)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = {p: prof.copy() for p, prof in self.base(level, q).items()}
            for pool, at, job in self._bookings:
                if self._applies(job, level, q):
                    view[pool].add(at, at + self.hold(job, level, q), job.spec.devices)
        return view

    def _applies(self, job: Job, level: int, q: int) -> bool:
        return job.klass.level != level or self.st.tier(job, self.now) <= q

    def hold(self, job: Job, level: int, q: int) -> float:
        """How long a queued ``job`` holds its devices against a tier-``q`` job of class ``level``."""
        # A walk asks this for the same job several times (its own view, its fit, each booking);
        # within one walk the duration model does not change (it learns only from finished
        # jobs), so the answer is a function of the fields checked here.
        key = (job, level, q)
        seen = self._holds.get(key)
        if seen is not None and seen[0] == job.work_s and seen[1] == job.lost_s and seen[2] == job.service_base \
                and seen[3] == job.started_at:
            return seen[4]
        st = self.st
        if job.klass.level != level:
            out = st.duration(job)
        else:
            out = max(1.0, hold(st, job, job.work_s, budget(st, job, self.now, q)))
        self._holds[key] = (job.work_s, job.lost_s, job.service_base, job.started_at, out)
        return out

    def pair(self, job: Job, pool: str) -> TierFit:
        """What ``job`` must fit: its own view for its tier hold, and every higher class's view
        already planned (their reservations) for its whole duration."""
        # A walk asks this twice for each job it plans (to start it, then for its earliest
        # start): the fit is made of the views' profiles (changed in place, never replaced), the
        # job's tier and hold (fixed while it waits: see ``hold``) and its duration (the model
        # learns only from finished jobs), so it is kept while the set of views is the same.
        key = (job, pool)
        seen = self._pairs.get(key)
        if seen is not None and seen[0] == len(self._views) and seen[1] == job.work_s \
                and seen[2] == job.lost_s and seen[3] == job.service_base and seen[4] == job.started_at:
            return seen[5]
        level, q = job.klass.level, self.st.tier(job, self.now)
        own = self.get(level, q)[pool]
        higher = [v[pool] for (lv, _q), v in self._views.items() if lv > level]
        fit = TierFit(own, higher, self.hold(job, level, q), self.st.duration(job))
        self._pairs[key] = (len(self._views), job.work_s, job.lost_s, job.service_base, job.started_at, fit)
        return fit

    def fits_after(self, job: Job, pool: str, victims: Sequence[Job]) -> bool:
        """Would ``job`` fit every higher class's view for its whole duration from the end of the
        grace period, once ``victims`` (its class's later-tier jobs) have given their devices back?"""
        st = self.st
        at = self.now + st.policy.grace_s
        full = max(st.duration(job), self.hold(job, job.klass.level, st.tier(job, self.now)))
        for (level, q), view in self._views.items():
            if level <= job.klass.level:
                continue
            extra = [(view_end(st, v, self.now, level, q), v.spec.devices) for v in victims]
            if not view[pool].fits_with(at, full, job.spec.devices, extra):
                return False
        return True

    def book(self, pool: str, at: float, job: Job) -> None:
        self._bookings.append((pool, at, job))
        for (level, q), view in self._views.items():
            if self._applies(job, level, q):
                view[pool].add(at, at + self.hold(job, level, q), job.spec.devices)


class TierFit:
    """A job's fit in a tiered walk: ``own`` (its class and tier) for ``hold`` seconds and every
    profile of ``higher`` (higher classes' views) for its whole duration ``full``, all at once."""

    __slots__ = ("full", "higher", "hold", "own")

    def __init__(self, own: Profile, higher: list[Profile], hold: float, full: float) -> None:
        self.own, self.higher, self.hold, self.full = own, higher, hold, max(hold, full)

    @property
    def free_now(self) -> int:
        return min([self.own.free_now, *(h.free_now for h in self.higher)])

    def fits(self, start: float, n: int) -> bool:
        return self.own.fits(start, self.hold, n) and all(h.fits(start, self.full, n) for h in self.higher)

    def earliest(self, n: int, after: float | None = None) -> float:
        t = self.own.now if after is None else after
        if not self.higher:
            # one profile: its earliest start from ``t`` is a fixed point (asked again from
            # there it answers the same instant), so the loop below would only repeat it
            return self.own.earliest(n, self.hold, after=t)
        for _ in range(10_000):  # each round moves t to a later breakpoint of one of the profiles
            t0 = t
            t = self.own.earliest(n, self.hold, after=t)
            for h in self.higher:
                if math.isfinite(t):
                    t = h.earliest(n, self.full, after=t)
            if not math.isfinite(t) or t <= t0:
                return t
        return math.inf
