"""The planning walk: the queue in order, once, driven by a view and a mode.

One walk serves both uses of the plan.  Its *mode* says what a decision does: :class:`Commit`
(a scheduling cycle) starts jobs, preempts, records reservations and honours the backfill
mode's limits (``max_tests``, EASY's one reservation per pool, conservative ``plan_depth``);
:class:`Plan` (an estimate) only books each decision on the view, stops exactly at the target,
and approximates the jobs beyond ``depth`` as fluid work.  Its *view* says what a job must fit:
:class:`PlainView` has one profile of free devices per pool (a policy without tiers);
:class:`TieredView` has one per class and attained-service tier (:class:`._tiers.TierViews`),
where a job may preempt its class's later-tier jobs.  A policy without tiers is the one-view
case of the same walk.

An exact estimate (every job ahead planned) keeps its plan (:class:`PlanCache`) for the next
one, which carries it forward instead of walking again where that provably plans the same
(:func:`_fast_plan` says when; ``PLAN_CHECK`` compares every such answer with the full walk).
"""

from __future__ import annotations

import functools
import math
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ._estimate import WaitEstimate, estimate_in
from ._estimators import DeclaredModel
from ._order import queue, waiting_tiers
from ._preempt import claim, grace_holds, may_preempt, preempt_tier, tier_victims, try_preempt, try_preempt_booked
from ._profile import Profile
from ._records import CycleResult, GraceHold, Job, Reservation
from ._starts import start as start_job
from ._state import EngineState
from ._tenants import Admission, Usage
from ._tiers import TierFit, TierViews
from ._types import BackfillMode, WaitReason

__all__ = ["EXACT", "Commit", "PlainView", "Plan", "PlanCache", "TieredView", "View", "WalkState", "exact_case", "run",
           "view_for"]


@dataclass(slots=True)
class WalkState:
    """Scratch state of one walk."""

    holds: dict[str, GraceHold]  # preemptors whose victims are winding down: what they free is held
    planned_work: dict[str, float]  # planning beyond the exact depth: fluid device-seconds per pool
    blocked: dict[str, float] = field(default_factory=dict)  # strict order (no backfill): pool -> no start before
    easy_reserved: set[str] = field(default_factory=set)  # pools holding a reservation
    plan_usage: dict[tuple[str, str], Usage] = field(default_factory=dict)  # quota the plan already claimed
    reservations: int = 0
    tests: int = 0


class Commit:
    """A scheduling cycle: decisions are journaled and recorded in ``res``."""

    planning = False
    __slots__ = ("now", "refused", "res", "st")

    def __init__(self, st: EngineState, now: float, res: CycleResult) -> None:
        self.st, self.now, self.res = st, now, res
        # (job, pool) where the counts said "fits now" and the placement pipeline said no
        self.refused: set[tuple[str, str]] = set()

    def begin(self) -> None:
        self.st.reservations.clear()  # this cycle makes them again

    def start(self, job: Job, pool: str, adm: Admission) -> bool:
        if start_job(self.st, job, pool, self.now, adm, "fits now"):
            self.res.started.append(job.id)
            return True
        self.refused.add((job.id, pool))  # _start set the wait reason (placement)
        return False

    def was_refused(self, job: Job, pool: str) -> bool:
        """Did the pipeline refuse ``job`` in ``pool`` during this walk?"""
        return (job.id, pool) in self.refused

    def planned(self, job: Job, pool: str, w: WalkState) -> None:
        pass  # a real start: the tenant book already counts it

    def reserve(self, job: Job, pool: str, at: float) -> None:
        self.st.reservations[job.id] = Reservation(pool, at, job.spec.devices)
        self.res.reservations[job.id] = at


class Plan:
    """An estimate for ``target``: decisions are only booked on the view; jobs ahead of it past
    ``depth`` reservations count as fluid work.

    ``depth=None`` (the default): every job ahead exactly where the kept plan serves the case
    (:func:`exact_case`: conservative backfill, no grace period, no quotas, every job ahead in
    the target's own view and with one pool), where an exact estimate costs about one pass over
    the queue; elsewhere the policy's ``plan_depth`` (a full exact walk there costs a cycle)."""

    planning = True
    __slots__ = ("auto", "depth", "now", "res", "st", "target")

    def __init__(self, st: EngineState, now: float, target: str, depth: int | None) -> None:
        self.st, self.now, self.target = st, now, target
        self.res = CycleResult()  # never filled: nothing is started or preempted
        self.auto = depth is None  # exact where cheap (see the class docstring), decided by ``run``
        self.depth = st.policy.plan_depth if depth is None else depth

    def begin(self) -> None:
        pass

    def start(self, job: Job, pool: str, adm: Admission) -> bool:
        return True

    def was_refused(self, job: Job, pool: str) -> bool:
        return False  # planning assumes a job that fits by counts is placed

    def planned(self, job: Job, pool: str, w: WalkState) -> None:
        key = (job.spec.tenant, pool)
        w.plan_usage[key] = w.plan_usage.get(key, Usage()).plus(self.st.need(job, pool))

    def reserve(self, job: Job, pool: str, at: float) -> None:
        pass


Mode = Commit | Plan


class View(Protocol):
    """What a job must fit during one walk (see :class:`PlainView` and :class:`TieredView`)."""

    # a cycle under strict order (no backfill) ends once every pool is blocked; the tiered view
    # keeps walking (as the engine always has: a later job may still preempt across classes)
    stops_when_blocked: bool

    def for_job(self, job: Job) -> tuple[dict[str, Profile], float]:
        """The job's own profiles (one per pool) and how long it holds devices on them."""
        ...

    def start_now(self, job: Job, pool: str, hold: float, held: bool, adm: Admission, mode: Mode) -> float | None:
        """Start ``job`` in ``pool`` now (through ``mode``) if it fits; when it starts (or ``None``)."""
        ...

    def earliest(self, job: Job, pool: str, hold: float, after: float | None) -> float:
        """Earliest start of ``job`` in ``pool`` at or after ``after`` (default: now)."""
        ...

    def book(self, job: Job, pool: str, at: float, hold: float) -> None:
        """Book ``job`` from ``at`` on every profile it affects."""
        ...

    def preempt(self, job: Job, pools: Sequence[str], res: CycleResult) -> bool:
        """Preempt lower-class (or borrowing) jobs for ``job`` (a cycle only)."""
        ...

    def estimate(self, job: Job, pool: str, hold: float, work_ahead: float, adm: Admission,
                 blocked: Mapping[str, float]) -> WaitEstimate:
        """The target's estimate in ``pool`` (planning only)."""
        ...


class PlainView:
    """One free-device profile per pool, from the running jobs' expected ends."""

    stops_when_blocked = True  # strict order with every pool blocked: nothing else can start
    __slots__ = ("_holds", "now", "pristine", "profiles", "st")

    def __init__(self, st: EngineState, now: float) -> None:
        self.st, self.now = st, now
        self.profiles = st.profiles(now)
        # the running jobs alone, before the walk books anything: what an estimate compares with
        # (a copy of two small arrays per pool, instead of building the profiles again from every job)
        self.pristine = {p: prof.copy() for p, prof in self.profiles.items()}
        # a job's hold depends only on these (nothing a walk does changes the duration model)
        self._holds: dict[tuple[str, int, float, float], float] = {}

    def for_job(self, job: Job) -> tuple[dict[str, Profile], float]:
        spec = job.spec
        key = (spec.tenant, spec.devices, spec.estimate_s, job.work_s)
        hold = self._holds.get(key)
        if hold is None:
            hold = self._holds[key] = self.st.duration(job)
        return self.profiles, hold

    def start_now(self, job: Job, pool: str, hold: float, held: bool, adm: Admission, mode: Mode) -> float | None:
        if self.profiles[pool].fits(self.now, hold, job.spec.devices) and mode.start(job, pool, adm):
            return self.now
        return None

    def earliest(self, job: Job, pool: str, hold: float, after: float | None) -> float:
        return self.profiles[pool].earliest(job.spec.devices, hold, after=after)

    def book(self, job: Job, pool: str, at: float, hold: float) -> None:
        self.profiles[pool].add(at, at + hold, job.spec.devices)

    def preempt(self, job: Job, pools: Sequence[str], res: CycleResult) -> bool:
        return try_preempt(self.st, job, pools, self.profiles, self.now, res)

    def estimate(self, job: Job, pool: str, hold: float, work_ahead: float, adm: Admission,
                 blocked: Mapping[str, float]) -> WaitEstimate:
        return estimate_in(self.st, job, pool, self.profiles[pool], self.now, work_ahead, adm, blocked,
                           alone_prof=self.pristine[pool])


class TieredView:
    """Attained-service tiers: each job is planned on the view of its own class and tier
    (:class:`TierViews`), and starts by preempting later-tier jobs of its class when only they
    hold the devices it needs."""

    # the walk goes on with every pool blocked: a later job may still preempt across classes
    stops_when_blocked = False
    __slots__ = ("_job", "now", "st", "taken", "victims", "views")

    def __init__(self, st: EngineState, now: float) -> None:
        self.st, self.now = st, now
        # every view the walk will use, built now from the state before anything changes
        self.views = TierViews(st, now, waiting_tiers(st, now))
        self.taken: dict[str, int] = {p: 0 for p in st.pools}  # planning: devices its starts took
        # victim candidates per (class, pool, tier): only shrink during a walk (later tiers start after)
        self.victims: dict[tuple[int, str, int], deque[Job]] = {}
        self._job: tuple[Job | None, int, int] = (None, 0, 0)  # the job for_job last saw: its level and tier

    def _level_tier(self, job: Job) -> tuple[int, int]:
        seen, level, q = self._job
        if seen is not job:
            level, q = job.klass.level, self.st.tier(job, self.now)
            self._job = (job, level, q)
        return level, q

    def for_job(self, job: Job) -> tuple[dict[str, Profile], float]:
        level, q = job.klass.level, self.st.tier(job, self.now)
        self._job = (job, level, q)
        return self.views.get(level, q), self.views.hold(job, level, q)

    def start_now(self, job: Job, pool: str, hold: float, held: bool, adm: Admission, mode: Mode) -> float | None:
        st, now, n = self.st, self.now, job.spec.devices
        fit = self.views.pair(job, pool)
        if held and not (st.pool_free(pool) - self.taken[pool] >= n and fit.fits(now, n)):
            return None  # its victims are winding down: no new victims for the same need
        if st.pool_free(pool) - self.taken[pool] >= n:
            if not fit.fits(now, n):
                return None
            if mode.start(job, pool, adm):
                if mode.planning:
                    self.taken[pool] += n  # a planned start leaves the cluster's free counts as they are
                return now
            if held or not mode.was_refused(job, pool):
                return None  # (held: its victims are winding down, no new victims for the same need)
            # the pipeline refused it where the counts said it fits: victims of its class's later
            # tiers chosen with the pipeline may make room where it needs it
        else:
            grace = st.policy.grace_s
            if not fit.own.fits(now + grace, fit.hold, n):
                return None  # not even by preempting its class's later tiers
            if mode.planning:
                return now + grace  # it would preempt later-tier jobs (planning: victims not chosen)
        level, q = self._level_tier(job)
        vkey = (level, pool, q)
        if vkey not in self.victims:
            self.victims[vkey] = tier_victims(st, level, pool, q, now)
        return preempt_tier(st, job, pool, q, now, adm, mode.res, self.victims[vkey], self.views.release,
                            check=functools.partial(self.views.fits_after, job, pool))

    def earliest(self, job: Job, pool: str, hold: float, after: float | None) -> float:
        return self.views.pair(job, pool).earliest(job.spec.devices, after=after)

    def book(self, job: Job, pool: str, at: float, hold: float) -> None:
        self.views.book(pool, at, job)

    def preempt(self, job: Job, pools: Sequence[str], res: CycleResult) -> bool:
        return try_preempt_booked(self.st, job, pools, self.now, res, self.views)

    def estimate(self, job: Job, pool: str, hold: float, work_ahead: float, adm: Admission,
                 blocked: Mapping[str, float]) -> WaitEstimate:
        level, q = self._level_tier(job)
        return estimate_in(self.st, job, pool, self.views.get(level, q)[pool], self.now, work_ahead, adm, blocked,
                           hold=hold, alone_prof=self.views.base(level, q)[pool], fit=self.views.pair(job, pool))


def view_for(st: EngineState, now: float) -> View:
    """The view a walk at ``now`` plans on, for the engine's policy."""
    return TieredView(st, now) if st.policy.demote_after_device_s else PlainView(st, now)


def run(st: EngineState, now: float, mode: Mode, *, kept: bool = True) -> dict[str, WaitEstimate]:
    """Walk the queue in order (:class:`Commit`: a cycle; :class:`Plan`: an estimate).

    Returns, in planning mode, the target's estimates per pool: from the plan kept since the
    last estimate where it provably equals the full walk's (:func:`_fast_plan`; ``kept=False``
    walks in full).
    """
    pol = st.policy
    if isinstance(st.plan_cache, PlanCache):
        st.plan_cache.fresh = False  # this walk did not make it (the fast plan makes a new one)
    view = view_for(st, now)
    st.pctx = None
    w = WalkState(grace_holds(st) if pol.grace_s > 0 else {}, {p: 0.0 for p in st.pools})
    # the hosts kept for preemptors in grace: no other job is placed there meanwhile
    st.held_hosts = {pid: (h.pool, h.hosts) for pid, h in w.holds.items() if h.hosts}
    mode.begin()
    if isinstance(mode, Plan) and kept and KEEP_PLANS:
        fast = _fast_plan(st, now, mode, view)
        if fast is not None:
            if PLAN_CHECK:
                _check(st, now, mode, fast)
            return fast
        # (``None`` with the default depth: outside the case, so the walk below plans ``plan_depth``)
    elif isinstance(mode, Plan) and mode.auto and exact_case(st, now, view, mode.target):
        mode.depth = EXACT  # the default depth in the kept plan's case, walked in full (``KEEP_PLANS`` off)
    target = mode.target if isinstance(mode, Plan) else None
    exact = mode.depth if isinstance(mode, Plan) else 0
    out: dict[str, WaitEstimate] = {}
    planning = mode.planning
    for_job = view.for_job  # bound once: the loop runs per queued job
    # past the reservation depth a cycle tells most jobs only why they wait: see _Settled
    settled = _Settled(st, view, now, mode.res) if not planning and pol.backfill != BackfillMode.NONE else None
    easy = pol.backfill == BackfillMode.EASY
    for job in queue(st, now, upto=target):  # an estimate stops at its target: the jobs after it are not needed
        if not planning and pol.max_tests is not None and w.tests >= pol.max_tests:
            break
        w.tests += 1
        if settled is not None and (len(w.easy_reserved) == len(st.pools) if easy
                                    else w.reservations >= pol.plan_depth):
            why = settled.reason(job, w)
            if why is not None:
                job.wait = why
                continue
        spec, n = job.spec, job.spec.devices
        own, hold = for_job(job)
        pools = st.pools_for(spec)
        is_target = job.id == target
        if planning and not is_target and w.reservations >= exact:
            # beyond the exact depth: fluid approximation of the work ahead
            p = pools[0] if len(pools) == 1 else max(pools, key=lambda x: own[x].free_now)
            w.planned_work[p] += hold * n
            continue
        adm_by_pool = {p: st.admit_planned(job, p, w.plan_usage) for p in pools}
        if is_target:
            for p in st.pools:
                out[p] = view.estimate(job, p, hold, w.planned_work[p],
                                       adm_by_pool.get(p) or st.admit_planned(job, p, w.plan_usage), w.blocked)
            return out
        if _examine(st, view, mode, w, job, own, hold, pools, adm_by_pool, now):
            break
    return out


def _examine(st: EngineState, view: View, mode: Mode, w: WalkState, job: Job, own: Mapping[str, Profile],
             hold: float, pools: list[str], adm_by_pool: Mapping[str, Admission], now: float) -> bool:
    """One queued job of a walk, examined in full: start it now, preempt for it, or give it a
    reservation (or only its wait reason).  ``True``: the walk ends here (strict order, every
    pool blocked)."""
    pol, planning, n = st.policy, mode.planning, job.spec.devices
    admissible = [p for p in pools if adm_by_pool[p].ok]
    held = w.holds.get(job.id)
    if not admissible:
        job.wait = WaitReason.QUOTA
        if held is not None:
            _hold(st, view, mode, w, job, held, hold, now)
            return False
        # a preempting class may still free its own tenant's quota from lower jobs
        if not planning and job.klass.preempts and may_preempt(st, job):
            view.preempt(job, pools, mode.res)
        return False
    at: float | None = None
    refused: list[str] = []  # pools where the counts said "fits now" and the pipeline said no
    for p in admissible:
        if p in w.blocked:
            continue
        at = view.start_now(job, p, hold, held is not None, adm_by_pool[p], mode)
        if at is not None:
            view.book(job, p, at, hold)
            mode.planned(job, p, w)
            break
        if mode.was_refused(job, p):
            refused.append(p)
    if at is not None:
        return False
    if refused and held is None:
        # enough devices by count, but not where the pipeline needs them (one host, CPU,
        # memory, topology): victims chosen with the pipeline may make room there
        if may_preempt(st, job) and view.preempt(job, refused, mode.res):
            return False
        # the wait reason is set (placement); no bogus "now" reservation where it was refused
        admissible = [p for p in admissible if p not in refused]
        if not admissible:
            return False
    if held is not None:
        # its victims are still winding down: no new victims for the same need, and what
        # they free stays held for it
        job.wait = WaitReason.RESERVATION if own[held.pool].free_now >= n else WaitReason.CAPACITY
        _hold(st, view, mode, w, job, held, hold, now)
        return False
    # blocked: preempt, or hold a reservation
    if not planning and may_preempt(st, job) and view.preempt(job, admissible, mode.res):
        return False
    if not planning and pol.backfill == BackfillMode.EASY and all(p in w.easy_reserved for p in admissible):
        # no reservation will be made: only say why it waits
        free = max(own[p].free_now for p in admissible)
        job.wait = WaitReason.RESERVATION if free >= n else WaitReason.CAPACITY
        return False
    if not planning and pol.backfill == BackfillMode.CONSERVATIVE and w.reservations >= pol.plan_depth:
        job.wait = WaitReason.PRIORITY
        return False
    best_p, best_t = admissible[0], math.inf
    for p in admissible:
        t = view.earliest(job, p, hold, w.blocked.get(p))
        if t < best_t:
            best_p, best_t = p, t
    job.wait = WaitReason.RESERVATION if own[best_p].free_now >= n else WaitReason.CAPACITY
    if pol.backfill == BackfillMode.NONE:
        for p in admissible:
            w.blocked[p] = max(w.blocked.get(p, now), best_t if p == best_p else now)
        if planning and math.isfinite(best_t):
            view.book(job, best_p, best_t, hold)
        w.reservations += 1
        return not planning and view.stops_when_blocked and len(w.blocked) == len(st.pools)
    reserve = (planning or (pol.backfill == BackfillMode.CONSERVATIVE and w.reservations < pol.plan_depth)
               or (pol.backfill == BackfillMode.EASY and best_p not in w.easy_reserved))
    if reserve and math.isfinite(best_t):
        view.book(job, best_p, best_t, hold)
        w.reservations += 1
        w.easy_reserved.add(best_p)
        mode.reserve(job, best_p, best_t)
    return False


def _hold(st: EngineState, view: View, mode: Mode, w: WalkState, job: Job, held: GraceHold, hold: float,
          now: float) -> None:
    """A preemptor whose victims are in their grace period keeps what they free: its quota is
    claimed for the rest of the walk (later jobs of its tenant are admitted around it) and it
    holds a reservation from the end of the grace period (backfill may use the devices only
    if it ends by then), whatever the backfill mode's reservation limits."""
    pool = held.pool
    claim(st, job, held, w.plan_usage)
    t = view.earliest(job, pool, hold, max(held.end, w.blocked.get(pool, now)))
    if st.policy.backfill == BackfillMode.NONE:
        w.blocked[pool] = max(w.blocked.get(pool, now), t)
    if math.isfinite(t):
        view.book(job, pool, t, hold)
        mode.reserve(job, pool, t)
    w.reservations += 1
    w.easy_reserved.add(pool)


class _Settled:
    """A cycle's shortcut for the jobs it can only tell why they wait.

    Once a cycle has made every reservation it may (conservative: ``plan_depth``; EASY: one in
    every pool), a later job changes nothing unless it starts now, preempts, or holds a grace
    hold: it is only given its wait reason.  :meth:`reason` gives that reason without the
    per-job fit work, or ``None`` when the job may do more (the walk then examines it in full).

    Why this is exact: :meth:`reason` answers only when, in every pool that admits the job, the
    view's own tests in ``start_now`` must fail: a plain view starts a job only if ``n`` devices
    are free now and stay free for its duration; a tiered view starts it from free devices only
    if the cluster has ``n`` free and its own view has ``n`` free from now for its tier hold
    (:meth:`Profile.clear_until` says until when, exactly as ``fits`` reads the profile), and by
    preempting later tiers only if that view has ``n`` free at the end of the grace period (an
    upper bound on its minimum over the hold); and no victim search could run (``may_preempt``
    is false) and it holds no grace hold.  Such a job is then given
    what the full walk gives it (quota when no pool admits it; EASY: reservation or capacity
    from its view's free devices; conservative: priority) and changes nothing the walk reads,
    so every number kept here (free devices, view counts, admissions) stays what the full walk
    would see at the next job.  A job examined in full may change them, and does so only by
    starting a job, preempting, or booking a reservation or grace hold (which also claims quota):
    each of those lengthens the cycle's started or preempted list or counts a reservation, so
    the numbers kept here are dropped whenever one of those counts moved.
    """

    __slots__ = ("admitted", "free", "known", "now", "pools", "res", "seen", "st", "tiered", "view")

    def __init__(self, st: EngineState, view: View, now: float, res: CycleResult) -> None:
        self.st, self.view, self.now, self.res = st, view, now, res
        self.seen: tuple[int, int, int] = (-1, -1, -1)  # (started, preempted, reservations) the numbers are for
        self.tiered = isinstance(view, TieredView)
        if not self.tiered and not isinstance(view, PlainView):
            raise TypeError(f"no shortcut for a {type(view).__name__}")
        self.pools: dict[str, list[str]] = {}  # JobSpec.pool -> the pools a job of it may use
        # (level, tier, pool) -> free devices now in the cluster, free now in the job's view,
        # free in its view at the end of the grace period (tiered); plain: free now twice, 0
        self.free: dict[tuple[int, int, str], tuple[int, int, int]] = {}
        self.admitted: dict[tuple[object, ...], bool] = {}
        # everything the answer reads of a job but its id, its hold and its victim search ->
        # (it may start: examine it; per pool with enough free now, until when they stay free;
        # some pool admits it; its reason if it only waits)
        self.known: dict[tuple[object, ...], tuple[bool, tuple[float, ...], bool, WaitReason]] = {}

    def reset(self) -> None:
        self.free.clear()
        self.admitted.clear()
        self.known.clear()

    def _free(self, level: int, q: int, pool: str) -> tuple[int, int, int]:
        key = (level, q, pool)
        got = self.free.get(key)
        if got is None:
            view, st = self.view, self.st
            if isinstance(view, TieredView):
                own = view.views.get(level, q)[pool]
                got = (st.pool_free(pool) - view.taken[pool], own.free_now,
                       own.free_at(self.now + st.policy.grace_s))
            else:
                assert isinstance(view, PlainView)
                free = view.profiles[pool].free_now
                got = (free, free, 0)  # a plain view starts a job on its profile alone
            self.free[key] = got
        return got

    def reason(self, job: Job, w: WalkState) -> WaitReason | None:
        if job.id in w.holds:
            return None
        now_seen = (len(self.res.started), len(self.res.preempted), w.reservations)
        if now_seen != self.seen:
            self.reset()
            self.seen = now_seen
        st, spec = self.st, job.spec
        view = self.view
        level, q = (job.klass.level, st.tier(job, self.now)) if isinstance(view, TieredView) \
            else (job.klass.level, 0)
        sig = (level, q, spec.pool, spec.tenant, spec.devices, spec.share, spec.compute_milli)
        got = self.known.get(sig)
        if got is None:
            got = self.known[sig] = self._judge(job, level, q, w)
        may_start, until, admissible, why = got
        if may_start:
            return None
        if until:
            # enough devices free now in some pool: it starts there iff they stay free for its hold
            hold = view.views.hold(job, level, q) if isinstance(view, TieredView) else st.duration(job)
            end = self.now + hold
            if any(end <= u for u in until):
                return None
        # ``may_preempt`` is asked exactly when the full walk would ask it (it builds the cycle's
        # pre-check from the running set at that moment): after the starts failed, or for a
        # job no pool admits when its class preempts
        if (admissible or job.klass.preempts) and may_preempt(st, job):
            return None
        return why

    def _judge(self, job: Job, level: int, q: int, w: WalkState) -> tuple[bool, tuple[float, ...], bool, WaitReason]:
        """For a job of this shape: it may start or preempt (examine it), the pools where it
        fits now if its hold ends by the given instant, whether a pool admits it, its reason."""
        st, spec = self.st, job.spec
        pools = self.pools.get(spec.pool)
        if pools is None:
            pools = self.pools[spec.pool] = st.pools_for(spec)
        n = spec.devices
        admissible: list[str] = []
        until: list[float] = []
        for p in pools:
            key = (spec.tenant, p, n, spec.share, spec.compute_milli)  # all that admission reads of the job
            ok = self.admitted.get(key)
            if ok is None:
                ok = self.admitted[key] = st.admit_planned(job, p, w.plan_usage).ok
            if not ok:
                continue
            admissible.append(p)
            cluster, own_now, own_after_grace = self._free(level, q, p)
            if cluster < n:
                if self.tiered and own_after_grace >= n:
                    return True, (), True, WaitReason.NONE  # it may start by preempting later tiers
            elif own_now >= n:
                until.append(self._clear(level, q, p, n))
        if not admissible:
            return False, (), False, WaitReason.QUOTA
        if st.policy.backfill == BackfillMode.EASY:
            own, _hold = self.view.for_job(job)
            free = max(own[p].free_now for p in admissible)
            return False, tuple(until), True, WaitReason.RESERVATION if free >= n else WaitReason.CAPACITY
        return False, tuple(until), True, WaitReason.PRIORITY

    def _clear(self, level: int, q: int, pool: str, n: int) -> float:
        """How long ``n`` devices stay free from now in the profile a job of (level, tier) starts on."""
        view = self.view
        if isinstance(view, TieredView):
            return view.views.get(level, q)[pool].clear_until(n)
        assert isinstance(view, PlainView)
        return view.profiles[pool].clear_until(n)


# -- the incremental exact plan -----------------------------------------------------------------

#: Tests set this: every estimate the kept plan answers is also planned by the full walk and the
#: two must agree (start and reason per pool), or :class:`AssertionError` names the first job.
PLAN_CHECK = False
#: The depth of an exact estimate: every job ahead of the target planned (no fluid tail).
EXACT = sys.maxsize
#: ``False``: every estimate walks the whole queue afresh (the baseline ``deep_plan.py --full-walk`` measures).
KEEP_PLANS = True
_TOL_S = 1e-6  # time differences below this are float rounding (a hold added in another order)


@dataclass(slots=True)
class _Booked:
    """One job ahead in a kept plan: where and when it was planned, for how long, on how many."""

    job_id: str
    n: int
    hold: float
    pool: str
    at: float  # planned start (inf: never fits; nothing booked)


@dataclass(slots=True)
class PlanCache:
    """An exact plan of the queue ahead of the last target, kept between estimates.

    ``base``: the target's view of the running jobs at ``at`` (no bookings); ``final``: that view
    with every job of ``jobs`` booked (the profile the next job of the queue is planned on);
    ``key``: what the plan is for (view kind, class level, tier, the duration model).
    """

    key: tuple[str, int, int, int]  # view kind, class level, tier, the duration model's id
    at: float
    base: dict[str, Profile]
    final: dict[str, Profile]
    jobs: list[_Booked]
    # the last target as the plan would book it (not in ``final``): once submitted it is the next
    # job of the queue, or started; a quote's throwaway target is never either
    target: _Booked | None = None
    # made by the last walk (an estimate that the kept plan answered); any later walk clears it:
    # what a Monte-Carlo plan (``_mcplan``) checks before replaying this plan for the target
    fresh: bool = True


def _since(prof: Profile, t: float) -> Profile:
    """``prof`` from ``t`` on (a copy whose ``now`` is ``t``): the same step function there."""
    out = prof.copy()
    i = max(int(np.searchsorted(out.ts, t, side="right")) - 1, 0)
    out.ts = np.concatenate((np.array((max(t, float(out.ts[0])),), dtype=np.float64), out.ts[i + 1:]))
    out.fs = out.fs[i:].copy()
    out.now = max(t, out.now)
    return out


def _steps(prof: Profile, t: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The step function of ``prof`` from ``t`` on, without breakpoints where nothing changes."""
    p = _since(prof, t)
    keep = np.ones(len(p.fs), dtype=bool)
    keep[1:] = p.fs[1:] != p.fs[:-1]
    return p.ts[keep], p.fs[keep]


def _same_from(a: Profile, b: Profile, t: float) -> bool:
    """Do ``a`` and ``b`` hold the same free devices at every instant from ``t`` (times equal to
    within float rounding)?"""
    ta, fa = _steps(a, t)
    tb, fb = _steps(b, t)
    return len(fa) == len(fb) and bool((fa == fb).all()) and bool((np.abs(ta - tb) <= _TOL_S).all())


def _no_quotas(st: EngineState) -> bool:
    return all(not t.guaranteed and not t.limit and t.max_running_jobs is None for t in st.book.tenants.values())


def _policy_in_case(st: EngineState) -> bool:
    """The policy's part of the kept plan's case: conservative backfill, no grace, no quotas."""
    pol = st.policy
    return pol.backfill == BackfillMode.CONSERVATIVE and pol.grace_s <= 0 and _no_quotas(st)


def _plan_key(st: EngineState, view: View, job: Job) -> tuple[str, int, int, int] | None:
    """What a kept plan for ``job`` depends on beyond the queue and the running jobs, or ``None``
    where the kept plan does not apply (the full walk then plans)."""
    if not _policy_in_case(st):
        return None
    if isinstance(view, TieredView):
        level, q = job.klass.level, st.tier(job, view.now)
        if any(lv > level for (lv, _q), _v in view.views.items()):
            return None  # a higher class's reservations bind it too: the full walk plans that
        return ("tiered", level, q, id(st.durations))
    if isinstance(view, PlainView):
        return ("plain", job.klass.level, 0, id(st.durations))
    return None


def _fast_plan(st: EngineState, now: float, mode: Plan, view: View) -> dict[str, WaitEstimate] | None:
    """The target's estimates from the plan kept since the last estimate, extended by the jobs
    queued since, or ``None`` where that plan is not provably the full walk's (the caller walks).

    In the case this answers (conservative backfill, no grace period, no quotas, every job
    ahead in the target's own view and with one pool, each job ahead planned exactly), a walk
    is a function of the view's free devices over time: each job starts now if it fits for its
    hold, else is booked at its earliest fit.  The plan made at ``t0`` stays the full walk's at
    ``t1`` when (checked here) the jobs ahead are the kept ones minus those that left, in the
    same order with the same holds, none planned to start before ``t1``, and the view of the
    running jobs at ``t1`` equals the view at ``t0`` plus the bookings of the jobs that left, at
    every instant from ``t1``.  Then, job by job, the full walk at ``t1`` sees the kept profile
    from ``t1`` on: a job planned at ``t1`` fits now, one planned later does not fit at ``t1``
    and its earliest fit from ``t1`` is its planned start (no fit in ``[t0, planned)``).  The
    jobs queued since are then planned on that profile as the walk would."""
    if not _policy_in_case(st):
        return None  # (before sorting the queue: a policy outside the case never gets further)
    jobs = queue(st, now, upto=mode.target)
    if not jobs or jobs[-1].id != mode.target or (not mode.auto and mode.depth < len(jobs) - 1):
        return None
    target = jobs[-1]
    key = _plan_key(st, view, target)
    if key is None:
        return None
    if isinstance(view, TieredView):
        base = view.views.base(key[1], key[2])
    elif isinstance(view, PlainView):
        base = view.pristine
    else:
        return None
    cache: PlanCache | None = st.plan_cache if isinstance(st.plan_cache, PlanCache) else None
    declared = isinstance(st.durations, DeclaredModel)
    final: dict[str, Profile] | None = None
    kept: list[_Booked] = []
    if cache is not None and cache.key == key and cache.at <= now:
        final, kept = _reuse(st, cache, jobs, base, now, view, declared)
    if final is None:
        final, kept = {p: prof.copy() for p, prof in base.items()}, []
    # the jobs after the kept ones: planned on the profile as the walk plans them
    for job in jobs[len(kept):-1]:
        b = _book_next(st, view, key, job, final, now)
        if b is None:
            st.plan_cache = None
            return None
        kept.append(b)
    _own, hold = view.for_job(target)
    pending = _book_next(st, view, key, target, final, now, book=False)
    st.plan_cache = PlanCache(key, now, base, final, kept, pending)
    out: dict[str, WaitEstimate] = {}
    for p in st.pools:
        adm = st.admit_planned(target, p, {})
        if isinstance(view, TieredView):
            fit = TierFit(final[p], [], hold, st.duration(target))
            out[p] = estimate_in(st, target, p, final[p], now, 0.0, adm, {}, hold=hold, alone_prof=base[p], fit=fit)
        else:
            out[p] = estimate_in(st, target, p, final[p], now, 0.0, adm, {}, alone_prof=base[p])
    return out


def _reuse(st: EngineState, cache: PlanCache, jobs: list[Job], base: Mapping[str, Profile], now: float,
           view: View, declared: bool) -> tuple[dict[str, Profile] | None, list[_Booked]]:
    """The kept plan carried to ``now`` (its final profile from ``now`` on and the jobs still
    ahead), or ``(None, [])`` where a condition of :func:`_fast_plan` fails."""
    ahead = {j.id for j in jobs}
    left = [b for b in cache.jobs if b.job_id not in ahead]
    stay = [b for b in cache.jobs if b.job_id in ahead] if left else cache.jobs
    if len(stay) >= len(jobs):
        return None, []
    for b, job in zip(stay, jobs, strict=False):
        if b.job_id != job.id or b.at < now - _TOL_S:
            return None, []
        if _one_pool(st, view, cache.key, job, now) is None:
            return None, []  # left the case since (a promotion moved it to another tier)
    if not declared:
        # the duration model may have learnt since: the holds must be the kept ones
        for b, job in zip(stay, jobs, strict=False):
            if abs(view.for_job(job)[1] - b.hold) > _TOL_S:
                return None, []
    last = cache.target
    started = last is not None and last.job_id not in ahead and last.job_id in st.jobs
    if last is not None and started:
        left.append(last)  # submitted and started since (a queued one is planned again below)
    predicted = {p: prof.copy() for p, prof in cache.base.items()}
    for b in left:
        if math.isfinite(b.at):
            predicted[b.pool].add(b.at, b.at + b.hold, b.n)
    for p, prof in base.items():
        if p not in predicted or not _same_from(predicted[p], prof, now):
            return None, []
    final = {p: _since(prof, now) for p, prof in cache.final.items()}
    if started and last is not None and math.isfinite(last.at):
        final[last.pool].add(last.at, last.at + last.hold, last.n)  # it holds them in the plan too
    return final, list(stay)


def _one_pool(st: EngineState, view: View, key: tuple[str, int, int, int], job: Job, now: float) -> str | None:
    """The one pool ``job`` (ahead of a target planned with ``key``) may use, or ``None`` where it
    is outside the kept plan's case (another class or tier than the target's, several pools)."""
    pools = st.pools_for(job.spec)
    if len(pools) != 1:
        return None
    if isinstance(view, TieredView):
        if (job.klass.level, st.tier(job, now)) != (key[1], key[2]):
            return None
    elif job.klass.level != key[1]:
        return None
    return pools[0]


def exact_case(st: EngineState, now: float, view: View, target: str) -> bool:
    """Is an estimate for ``target`` in the kept plan's case (see :func:`_fast_plan`)?  There the
    default estimate plans every job ahead exactly; :func:`_fast_plan` answers exactly when this
    holds (it checks the same conditions as it plans)."""
    if not _policy_in_case(st):
        return False
    jobs = queue(st, now, upto=target)
    if not jobs or jobs[-1].id != target:
        return False
    key = _plan_key(st, view, jobs[-1])
    return key is not None and all(_one_pool(st, view, key, j, now) is not None for j in jobs[:-1])


def _book_next(st: EngineState, view: View, key: tuple[str, int, int, int], job: Job, final: dict[str, Profile],
               now: float, *, book: bool = True) -> _Booked | None:
    """Plan one job ahead on ``final`` as :func:`_examine` does in this case (start now if it
    fits for its hold, else a reservation at its earliest fit), or ``None`` if it is outside
    the case (another view, several pools)."""
    p = _one_pool(st, view, key, job, now)
    if p is None:
        return None
    _own, hold = view.for_job(job)
    n = job.spec.devices
    prof = final[p]
    at = now if prof.fits(now, hold, n) else prof.earliest(n, hold)
    if book and math.isfinite(at):
        prof.add(at, at + hold, n)
    return _Booked(job.id, n, hold, p, at)


def _check(st: EngineState, now: float, mode: Plan, fast: Mapping[str, WaitEstimate]) -> None:
    """:data:`PLAN_CHECK`: the kept plan's answer must be the full walk's."""
    keep = st.plan_cache
    try:
        full = run(st, now, Plan(st, now, mode.target, EXACT if mode.auto else mode.depth), kept=False)
    finally:
        st.plan_cache = keep
        if isinstance(keep, PlanCache):
            keep.fresh = True  # still the plan this estimate made
    for p, e in full.items():
        f = fast[p]
        same = (math.isinf(e.start_at) and math.isinf(f.start_at)) or \
            abs(e.start_at - f.start_at) <= 1e-6 * max(1.0, abs(e.start_at))
        if not same or e.reason != f.reason:
            raise AssertionError(f"kept plan for {mode.target} in {p} at {now}: {f} != full walk {e}")
