"""Preemption: the pre-check, victim choice, signalling victims, grace holds, tier preemption.

:func:`try_preempt` frees devices for a job of a preempting class (or a tenant reclaiming its
guarantee) at least cost (a job that must run on one host: on one host, checked with the
placement pipeline, :func:`_host_choice`); :func:`preempt_tier` frees them by preempting its
own class's later-tier jobs (attained-service tiers).  A victim is told to stop (:func:`signal_victim`, a
``preempting`` event) and keeps its devices for the grace period; :func:`grace_holds` derives,
from those events alone, what each waiting preemptor is owed meanwhile, so a rebuilt engine
holds the same.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

from ._profile import Profile
from ._records import CycleResult, GraceHold, Job, PreemptCheck, Reservation
from ._tenants import Admission, Usage
from ._tiers import TierViews, journal_demotion, releasable, view_end
from ._types import JobState, PreemptMode

if TYPE_CHECKING:
    from ._engine import QueueingScheduler

__all__ = ["attempt_key", "claim", "finish_preemption", "grace_holds", "lost_if", "may_preempt", "preempt_tier",
           "signal_victim", "tier_victims", "try_preempt", "try_preempt_booked", "victim_ok"]


def finish_preemption(eng: QueueingScheduler, job: Job, now: float) -> None:
    mode = eng.policy.preempt_mode
    if mode == PreemptMode.REQUEUE:
        keep = 0.0
    elif mode == PreemptMode.SUSPEND:
        keep = job.progress(now)
    else:
        keep = job.checkpoint_at(now)
    keep = max(0.0, keep - eng.policy.preempt_overhead_s)  # saving and restoring its state costs run time
    eng._emit(now, job.id, "preempted", job.reason or "preempted", {"mode": mode.value, "keep": keep})


def grace_holds(eng: QueueingScheduler) -> dict[str, GraceHold]:
    """Queued preemptors whose victims are still in their grace period: the pool the victims
    free, when the last of them stops, and the quota of the preemptor's own tenant they give
    back, and for a one-host preemptor the host they free.  Derived from the victims'
    ``preempting`` events, so a rebuilt engine sees the same."""
    out: dict[str, GraceHold] = {}
    for v in eng._active.values():
        pid = v.preempted_for
        if v.state != JobState.PREEMPTING or pid is None or v.pool is None or v.stop_at is None:
            continue
        p = eng._waiting.get(pid)
        if p is None:
            continue  # it started some other way, or ended: nothing to hold
        host = eng.state.host_index.get(v.preempted_host) if v.preempted_host is not None else None
        h = out.get(pid) or GraceHold(v.pool, v.stop_at, Usage(), host)
        freed = h.freed
        if v.pool == h.pool and v.spec.tenant == p.spec.tenant:
            freed = freed.plus(eng._usage(v))
        out[pid] = GraceHold(h.pool, max(h.end, v.stop_at), freed, h.host if h.host is not None else host)
    return out


def claim(eng: QueueingScheduler, job: Job, hold: GraceHold,
           plan_usage: dict[tuple[str, str], Usage]) -> None:
    """Hold the quota a preemptor in grace will take: its need, less what its own tenant's
    victims give back (never below zero: until they stop, the victims still count)."""
    pool, freed = hold.pool, hold.freed
    need = eng._need(job, pool)
    claim = Usage(max(0, need.devices - freed.devices), max(0, need.memory_bytes - freed.memory_bytes),
                  max(0, need.compute_milli - freed.compute_milli))
    key = (job.spec.tenant, pool)
    plan_usage[key] = plan_usage.get(key, Usage()).plus(claim)


def may_preempt(eng: QueueingScheduler, job: Job) -> bool:
    """Cheap pre-check before searching victims (a cycle examines thousands of jobs):
    a preempting class with lower-level preemptible jobs running, or a tenant inside its
    guarantee while borrowers run; and no identical attempt failed earlier this cycle."""
    ctx = eng._pctx
    if ctx is None:
        levels = [j.klass.level for j in eng._active.values()
                  if j.state == JobState.RUNNING and j.spec.preemptible and j.klass.preemptible]
        ctx = eng._pctx = PreemptCheck(min(levels, default=None), any(j.borrowing for j in eng._active.values()))
    if attempt_key(eng, job) in ctx.failed:
        return False
    by_priority = job.klass.preempts and ctx.lowest is not None and ctx.lowest < job.klass.level
    return by_priority or (ctx.borrowers and bool(eng.book.tenant(job.spec.tenant).guaranteed))


def attempt_key(eng: QueueingScheduler, job: Job) -> Hashable:
    """What makes two victim searches of a cycle identical: class, tenant and devices for a job
    that may be split (the count-based rule); for a one-host job also what the pipeline checks
    on the host (CPU, memory, share, topology, pool)."""
    s = job.spec
    if not eng.one_host(s):
        return (job.klass.level, s.tenant, s.devices)
    return (job.klass.level, s.tenant, s.devices, s.cpu_milli, s.memory_bytes, s.share, s.topology, s.pool)


def victim_ok(eng: QueueingScheduler, job: Job, v: Job, pool: str) -> bool:
    if v.state != JobState.RUNNING or v.pool != pool or not (v.spec.preemptible and v.klass.preemptible):
        return False
    use = eng._usage(v)
    if v.klass.level < job.klass.level and job.klass.preempts:
        return v.spec.tenant == job.spec.tenant or eng.book.above_guarantee(v.spec.tenant, pool, use)
    # reclaim: a tenant inside its guarantee takes back quota lent to a borrower
    return (v.spec.tenant != job.spec.tenant and v.borrowing
            and eng.book.within_guarantee(job.spec.tenant, pool, eng._need(job, pool))
            and eng.book.above_guarantee(v.spec.tenant, pool, use))


def try_preempt(eng: QueueingScheduler, job: Job, pools: Sequence[str], profiles: dict[str, Profile], now: float,
                 res: CycleResult, *, end_fn: Callable[[Job], float] | None = None, hold: float | None = None,
                 also: Sequence[tuple[dict[str, Profile], Callable[[Job], float], float]] = (),
                 on_victim: Callable[[Job], None] | None = None) -> bool:
    """Preempt lower-class (or borrowing) jobs for ``job`` at least cost.

    ``profiles`` is what it must fit in for ``hold`` seconds (default: its duration) once the
    victims are gone, each victim released at ``end_fn(v)`` (default: its expected end);
    ``also`` adds more (profiles, end function, duration) it must fit in at the same time (a
    tiered walk: higher classes' views); ``on_victim`` is told of each victim before it stops.
    """
    best: tuple[tuple[float, ...], str, list[Job]] | None = None
    best_host: int | None = None
    one_host = eng.one_host(job.spec)
    d, n, grace = eng.duration(job), job.spec.devices, eng.policy.grace_s
    d_own = d if hold is None else hold
    end_of = end_fn or (lambda v: eng.expected_end(v, now))
    for p in pools:
        cands = [v for v in eng.running() if victim_ok(eng, job, v, p)]
        if not cands:
            continue
        prof = profiles[p]

        def fits(victims: Sequence[Job], prof: Profile = prof, p: str = p) -> bool:
            own = [v for v in victims if v.spec.tenant == job.spec.tenant]
            freed: dict[str, Usage] = {}
            for v in own:
                for key in (p, "*"):
                    freed[key] = freed.get(key, Usage()).plus(eng._usage(v))
            if not eng.book.admit(job.spec.tenant, p, eng._need(job, p), minus=freed,
                                   running_minus=len(own)).ok:
                return False
            trial = prof.copy()
            for v in victims:
                trial.add(now + grace, end_of(v), -v.spec.devices)
            if not trial.fits(now + grace, d_own, n):
                return False
            for views, fn, dur in also:
                other = views[p].copy()
                for v in victims:
                    other.add(now + grace, fn(v), -v.spec.devices)
                if not other.fits(now + grace, dur, n):
                    return False
            return True

        if one_host:
            got = _host_choice(eng, job, p, cands, fits, now)
            if got is not None and (best is None or got[0] < best[0]):
                best = (got[0], p, got[2])
                best_host = got[1]
            continue
        if not fits(cands):
            continue
        for chosen in pruned_victims(eng, cands, fits, now):
            if not chosen:
                continue  # it fits once the grace period of earlier victims ends: no new victim
            cost = victim_cost(eng, chosen, now)
            if best is None or cost < best[0]:
                best = (cost, p, chosen)
    if best is None:
        if eng._pctx is not None:
            eng._pctx.failed.add(attempt_key(eng, job))
        return False
    _, p, victims = best
    eng._pctx = None  # running set changes: recompute the pre-check
    prof = profiles[p]
    ends = {v.id: end_of(v) for v in victims}
    where = None if best_host is None else eng.state.host_names[best_host]
    for v in sorted(victims, key=lambda x: x.seq):
        if on_victim is not None:
            on_victim(v)
        why = f"preempted for {job.id} ({job.klass.name})" + ("" if where is None else f" on {where}")
        signal_victim(eng, job, v, now, why, res, host=where)
        prof.add(now + grace, ends[v.id], -v.spec.devices)
    if best_host is not None and grace > 0:
        eng._held_hosts[job.id] = (p, best_host)  # what its victims free there is kept for it
    if grace <= 0:
        adm = eng._admit_planned(job, p, {})
        if adm.ok and eng._start(job, p, now, adm, "started by preemption"):
            prof.add(now, now + d, n)
            res.started.append(job.id)
            return True
    prof.add(now + grace, now + grace + d, n)
    eng.reservations[job.id] = Reservation(p, now + grace, n)
    res.reservations[job.id] = now + grace
    return True


def _host_choice(eng: QueueingScheduler, job: Job, pool: str, cands: Sequence[Job],
                 fits: Callable[[Sequence[Job]], bool],
                 now: float) -> tuple[tuple[float, ...], int, list[Job]] | None:
    """Victims for a job the pipeline must put on one host: per host, the candidates running
    there, pruned (in :func:`try_preempt`'s two victim orders) to a minimal set with which the
    pipeline places the job on that host (its free devices, CPU, memory, filters, topology) and
    the pool's counts and quota admit it (``fits``); the cheapest host wins (fewest victims, least
    work lost, lowest class; lowest host index on ties).  ``None``: no host can be made to fit."""
    pidx = eng._pool_index[pool]
    n = job.spec.devices
    per_host: dict[int, list[tuple[Job, int]]] = {}
    for v in cands:
        for a in v.allocs:
            per_host.setdefault(a.host, []).append((v, len(a.devices)))
    best: tuple[tuple[float, ...], int, list[Job]] | None = None
    held = {h for pid, (p, h) in eng._held_hosts.items() if p == pool and pid != job.id}
    for h in sorted(per_host):
        if h in held:
            continue  # kept for another preemptor whose victims are winding down there
        on_h = per_host[h]
        free = int(eng.host_free[h, pidx])
        if free + sum(k for _v, k in on_h) < max(n, 1):
            continue  # not enough devices on this host even with every candidate gone
        here = {v.id: k for v, k in on_h}

        def ok(victims: Sequence[Job], h: int = h, free: int = free, here: dict[str, int] = here) -> bool:
            if free + sum(here[v.id] for v in victims) < n:
                return False
            return fits(victims) and eng.host_fits(job, pool, h, victims)

        every = [v for v, _k in on_h]
        if not ok(every):
            continue
        for chosen in pruned_victims(eng, every, ok, now):
            if not chosen:
                continue  # it fits there already (the pipeline chose otherwise): no victim for it
            cost = victim_cost(eng, chosen, now)
            if best is None or cost < best[0]:
                best = (cost, h, chosen)
    return best


def pruned_victims(eng: QueueingScheduler, cands: Sequence[Job], fits: Callable[[Sequence[Job]], bool],
                   now: float) -> list[list[Job]]:
    """Two candidate victim sets: all of ``cands``, then each victim dropped (in one of two
    orders: lowest class and least lost work first, or smallest first) whenever the job still
    ``fits`` without it.  An empty set means no victim is needed."""
    out: list[list[Job]] = []
    for order in (lambda v: (-v.klass.level, -lost_if(eng, v, now), v.spec.devices),
                  lambda v: (v.spec.devices, -v.klass.level, -lost_if(eng, v, now))):
        chosen = list(cands)
        for v in sorted(cands, key=order):
            rest = [x for x in chosen if x is not v]
            if fits(rest):
                chosen = rest
        out.append(chosen)
    return out


def victim_cost(eng: QueueingScheduler, victims: Sequence[Job], now: float) -> tuple[float, float, float]:
    """What a victim set costs, compared lexicographically: victims, lost work, highest class."""
    return (float(len(victims)), sum(lost_if(eng, v, now) for v in victims),
            float(max(v.klass.level for v in victims)))


def signal_victim(eng: QueueingScheduler, job: Job, v: Job, now: float, why: str, res: CycleResult, *,
                  host: str | None = None) -> None:
    """Tell victim ``v`` to stop for ``job``: it keeps its devices for the grace period (none:
    it stops now).  ``host``: the host it frees for a one-host ``job`` (kept for it meanwhile)."""
    grace = eng.policy.grace_s
    data: dict[str, object] = {"stop_at": now + grace, "for": job.id}
    if host is not None:
        data["host"] = host
    eng._emit(now, v.id, "preempting", why, data)
    res.preempted.append(v.id)
    if grace <= 0:
        finish_preemption(eng, v, now)


def lost_if(eng: QueueingScheduler, v: Job, now: float) -> float:
    mode = eng.policy.preempt_mode
    done = v.progress(now)
    if mode == PreemptMode.REQUEUE:
        return done
    keep = done if mode == PreemptMode.SUSPEND else v.checkpoint_at(now)
    return done - max(0.0, keep - eng.policy.preempt_overhead_s)


def tier_victims(eng: QueueingScheduler, level: int, pool: str, q: int, now: float) -> deque[Job]:
    """Running jobs a tier-``q`` job of class ``level`` may preempt in ``pool``, in victim order:
    highest tier first, then least work lost, then most devices (fewer victims)."""
    cands = [v for v in eng._active.values() if v.pool == pool and releasable(eng, v, level, q, now)]
    return deque(sorted(cands, key=lambda v: (-eng.tier(v, now), lost_if(eng, v, now), -v.spec.devices,
                                              -v.seq)))


def preempt_tier(eng: QueueingScheduler, job: Job, pool: str, q: int, now: float, adm: Admission, res: CycleResult,
                  order: deque[Job] | None = None, on_victim: Callable[[Job], None] | None = None,
                  check: Callable[[list[Job]], bool] | None = None) -> float | None:
    """Free devices for tier-``q`` ``job`` by preempting later-tier jobs of its class in ``pool``.

    ``order``: the candidates from :func:`tier_victims` (a walk computes them once; victims
    that stopped running since are skipped).  The victims are the first in that order that
    free enough devices, pruned to a minimal set; another tenant's job only while that tenant
    is above its guarantee.  Returns when the job starts (now, or after the grace period as a
    reservation), or ``None`` when preemption cannot make room or ``check(victims)`` refuses
    the choice (a tiered walk: the job must then still fit the higher classes' views).
    """
    level, n = job.klass.level, job.spec.devices
    pidx = eng._pool_index[pool]
    if order is None:
        order = tier_victims(eng, level, pool, q, now)
    while order and order[0].state != JobState.RUNNING:
        order.popleft()  # preempted earlier in this walk: never a candidate again
    tenant = job.spec.tenant

    above: dict[tuple[str, int, int], bool] = {}  # (tenant, devices, milli) -> above its guarantee

    def allowed(v: Job) -> bool:
        if v.state != JobState.RUNNING:
            return False
        if v.spec.tenant == tenant:
            return True
        key = (v.spec.tenant, v.spec.devices, v.spec.compute_milli)
        if key not in above:
            above[key] = eng.book.above_guarantee(v.spec.tenant, pool, eng._usage(v))
        return above[key]

    single = eng.one_host(job.spec)
    best: list[Job] | None = None
    best_host: int | None = None
    scopes: list[tuple[int, int, Iterable[tuple[Job, int]]]]
    if single:  # all on one host: only hosts where some candidate runs
        per_host: dict[int, list[tuple[Job, int]]] = {}
        for v in order:
            for a in v.allocs:
                per_host.setdefault(a.host, []).append((v, len(a.devices)))
        held = {h for pid, (p, h) in eng._held_hosts.items() if p == pool and pid != job.id}
        scopes = [(h, int(eng.host_free[h, pidx]), lst) for h, lst in sorted(per_host.items()) if h not in held]
    else:  # lazily: the walk stops as soon as enough devices are found
        scopes = [(-1, eng.pool_free(pool), ((v, v.spec.devices) for v in order))]
    for h, free, lst in scopes:
        need = n - free
        if need <= 0:
            continue
        chosen: list[tuple[Job, int]] = []
        got = 0
        for v, k in lst:
            if got >= need:
                break
            if k and allowed(v):
                chosen.append((v, k))
                got += k
        if got < need:
            continue
        for v, k in sorted(chosen, key=lambda x: x[1]):  # prune: drop victims not needed after all
            if got - k >= need:
                chosen.remove((v, k))
                got -= k
        if best is not None and len(chosen) >= len(best):
            continue
        victims = [v for v, _k in chosen]
        if single and not eng.host_fits(job, pool, h, victims):
            continue  # enough devices there, but the pipeline would not place it (CPU, memory, topology)
        best, best_host = victims, (h if single else None)
    if not best or (check is not None and not check(best)):
        return None
    eng._pctx = None
    grace = eng.policy.grace_s
    for v in best:
        order.remove(v)  # never a candidate again in this walk
    where = None if best_host is None else eng.state.host_names[best_host]
    for v in sorted(best, key=lambda x: x.seq):
        if on_victim is not None:
            on_victim(v)
        journal_demotion(eng, v, now)
        signal_victim(eng, job, v, now, f"preempted for {job.id}: tier {q} goes before tier "
                            f"{eng.tier(v, now)} ({eng.attained(v, now):.0f} device-s attained)"
                            + ("" if where is None else f" on {where}"), res, host=where)
    if best_host is not None and grace > 0:
        eng._held_hosts[job.id] = (pool, best_host)  # what its victims free there is kept for it
    if grace <= 0 and eng._start(job, pool, now, adm, "started by preemption"):
        res.started.append(job.id)
        return now
    eng.reservations[job.id] = Reservation(pool, now + grace, n)
    res.reservations[job.id] = now + grace
    return now + grace


def try_preempt_booked(eng: QueueingScheduler, job: Job, pools: Sequence[str], now: float, res: CycleResult,
                        views: TierViews) -> bool:
    """Preemption across classes (:func:`try_preempt`) inside a tiered walk: it must fit its own
    view (for its tier hold) and every higher class's view (for its duration) once the victims
    are gone; victims are released on every view and the job booked on them."""
    level, q = job.klass.level, eng.tier(job, now)
    own = {p: prof.copy() for p, prof in views.get(level, q).items()}
    also = [({p: prof.copy() for p, prof in view.items()},
             (lambda v, lv=lv, qq=qq: view_end(eng, v, now, lv, qq)), eng.duration(job))
            for (lv, qq), view in views.items() if lv > level]
    if not try_preempt(eng, job, pools, own, now, res, end_fn=lambda v: view_end(eng, v, now, level, q),
                       hold=views.hold(job, level, q), also=also, on_victim=views.release):
        return False
    if job.active and job.pool is not None:
        views.book(job.pool, now, job)
    elif job.id in eng.reservations:
        r = eng.reservations[job.id]
        views.book(r.pool, r.at, job)
    return True
