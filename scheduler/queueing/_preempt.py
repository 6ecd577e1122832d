"""Preemption: the pre-check, victim choice, signalling victims, grace holds, tier preemption.

:func:`try_preempt` frees devices for a job of a preempting class (or a tenant reclaiming its
guarantee) at least cost, checked with the placement pipeline: a job that must run on one host
on one host (:func:`_host_choice`); a gang with the count-based victims when a dry placement on
their devices succeeds (:func:`_dry_placement`), else host by host (:func:`_gang_choice`), the
plan's hosts then kept for it.  :func:`preempt_tier` frees them by preempting its own class's
later-tier jobs (attained-service tiers), under the same checks.  A victim is told to stop (:func:`signal_victim`, a
``preempting`` event) and keeps its devices for the grace period; :func:`grace_holds` derives,
from those events alone, what each waiting preemptor is owed meanwhile, so a rebuilt engine
holds the same.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence

from accel.scheduler import Request

from ._events import emit
from ._placement import PlacementRefusal
from ._profile import Profile
from ._records import CycleResult, GraceHold, Job, PreemptCheck, Reservation
from ._starts import host_fits, released, start
from ._state import EngineState
from ._tenants import Admission, Usage
from ._tiers import TierViews, journal_demotion, view_end
from ._types import JobState, PreemptMode

__all__ = ["attempt_key", "claim", "ends_in_grace", "finish_preemption", "grace_holds", "lost_if", "may_preempt",
           "preempt_tier", "signal_victim", "tier_victims", "try_preempt", "try_preempt_booked", "victim_ok"]


def finish_preemption(st: EngineState, job: Job, now: float) -> None:
    mode = st.policy.preempt_mode
    if mode == PreemptMode.REQUEUE:
        keep = 0.0
    elif mode == PreemptMode.SUSPEND:
        keep = job.progress(now)
    else:
        keep = job.checkpoint_at(now)
    keep = max(0.0, keep - st.policy.preempt_overhead_s)  # saving and restoring its state costs run time
    emit(st, now, job.id, "preempted", job.reason or "preempted", {"mode": mode.value, "keep": keep})


def grace_holds(st: EngineState) -> dict[str, GraceHold]:
    """Queued preemptors whose victims are still in their grace period: the pool the victims
    free, when the last of them stops, and the quota of the preemptor's own tenant they give
    back, and the hosts kept for it (a one-host preemptor's host, or the hosts where the pipeline
    places a gang whose victims were chosen with it).  Derived from the victims' ``preempting``
    events, so a rebuilt engine sees the same."""
    out: dict[str, GraceHold] = {}
    index = st.cluster.host_index
    for v in st.active.values():
        pid = v.preempted_for
        if v.state != JobState.PREEMPTING or pid is None or v.pool is None or v.stop_at is None:
            continue
        p = st.waiting.get(pid)
        if p is None:
            continue  # it started some other way, or ended: nothing to hold
        h = out.get(pid) or GraceHold(v.pool, v.stop_at, Usage())
        freed = h.freed
        if v.pool == h.pool and v.spec.tenant == p.spec.tenant:
            freed = freed.plus(st.usage(v))
        hosts = h.hosts
        if v.preempted_hosts:
            hosts = tuple(sorted(set(hosts) | {index[name] for name in v.preempted_hosts}))
        out[pid] = GraceHold(h.pool, max(h.end, v.stop_at), freed, hosts)
    return out


def claim(st: EngineState, job: Job, hold: GraceHold,
           plan_usage: dict[tuple[str, str], Usage]) -> None:
    """Hold the quota a preemptor in grace will take: its need, less what its own tenant's
    victims give back (never below zero: until they stop, the victims still count)."""
    pool, freed = hold.pool, hold.freed
    need = st.need(job, pool)
    claim = Usage(max(0, need.devices - freed.devices), max(0, need.memory_bytes - freed.memory_bytes),
                  max(0, need.compute_milli - freed.compute_milli))
    key = (job.spec.tenant, pool)
    plan_usage[key] = plan_usage.get(key, Usage()).plus(claim)


def may_preempt(st: EngineState, job: Job) -> bool:
    """Cheap pre-check before searching victims (a cycle examines thousands of jobs):
    a preempting class with lower-level preemptible jobs running, or a tenant inside its
    guarantee while borrowers run; and no identical attempt failed earlier this cycle."""
    ctx = st.pctx
    if ctx is None:
        levels = [j.klass.level for j in st.active.values()
                  if j.state == JobState.RUNNING and j.spec.preemptible and j.klass.preemptible]
        ctx = st.pctx = PreemptCheck(min(levels, default=None), any(j.borrowing for j in st.active.values()))
    if attempt_key(st, job) in ctx.failed or (not st.one_host(job.spec) and _count_key(job) in ctx.failed):
        return False
    by_priority = job.klass.preempts and ctx.lowest is not None and ctx.lowest < job.klass.level
    return by_priority or (ctx.borrowers and bool(st.book.tenant(job.spec.tenant).guaranteed))


def attempt_key(st: EngineState, job: Job) -> Hashable:
    """What makes two victim searches of a cycle identical: class, tenant and devices (the
    counts) and what the pipeline checks (CPU, memory, topology; for a one-host job also its
    share and pool).  A job that may be split and failed on the counts alone is recorded under
    :func:`_count_key`, which every such job of the same counts shares (the count-based rule)."""
    s = job.spec
    if not st.one_host(s):
        return (job.klass.level, s.tenant, s.devices, s.cpu_milli, s.memory_bytes, s.topology)
    return (job.klass.level, s.tenant, s.devices, s.cpu_milli, s.memory_bytes, s.share, s.topology, s.pool)


def _count_key(job: Job) -> Hashable:
    return (job.klass.level, job.spec.tenant, job.spec.devices)


def ends_in_grace(st: EngineState, v: Job, now: float) -> bool:
    """Whether running ``v`` is expected to end before a grace period starting now would: it
    is then never a victim.  Preempted, it would hold its devices until the grace period ends
    (a job winding down does not complete), so it would free nothing sooner, lose its work, and
    break the reservations planned on its expected end."""
    return st.policy.grace_s > 0 and st.expected_end(v, now) <= now + st.policy.grace_s


def victim_ok(st: EngineState, job: Job, v: Job, pool: str, now: float) -> bool:
    if v.state != JobState.RUNNING or v.pool != pool or not (v.spec.preemptible and v.klass.preemptible):
        return False
    if ends_in_grace(st, v, now):
        return False
    use = st.usage(v)
    if v.klass.level < job.klass.level and job.klass.preempts:
        return v.spec.tenant == job.spec.tenant or st.book.above_guarantee(v.spec.tenant, pool, use)
    # reclaim: a tenant inside its guarantee takes back quota lent to a borrower
    return (v.spec.tenant != job.spec.tenant and v.borrowing
            and st.book.within_guarantee(job.spec.tenant, pool, st.need(job, pool))
            and st.book.above_guarantee(v.spec.tenant, pool, use))


def try_preempt(st: EngineState, job: Job, pools: Sequence[str], profiles: dict[str, Profile], now: float,
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
    best_hosts: tuple[int, ...] = ()  # hosts kept for it while the victims wind down (none: counted per pool)
    one_host = st.one_host(job.spec)
    piped = one_host  # did the pipeline judge some victim set (else only the counts said no)
    d, n, grace = st.duration(job), job.spec.devices, st.policy.grace_s
    d_own = d if hold is None else hold
    end_of = end_fn or (lambda v: st.expected_end(v, now))
    for p in pools:
        cands = [v for v in st.running() if victim_ok(st, job, v, p, now)]
        if not cands:
            continue
        prof = profiles[p]

        def fits(victims: Sequence[Job], prof: Profile = prof, p: str = p) -> bool:
            own = [v for v in victims if v.spec.tenant == job.spec.tenant]
            freed: dict[str, Usage] = {}
            for v in own:
                for key in (p, "*"):
                    freed[key] = freed.get(key, Usage()).plus(st.usage(v))
            if not st.book.admit(job.spec.tenant, p, st.need(job, p), minus=freed,
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
            got = _host_choice(st, job, p, cands, fits, now)
            if got is not None and (best is None or got[0] < best[0]):
                best = (got[0], p, got[2])
                best_hosts = (got[1],)
            continue
        if not fits(cands):
            continue
        placed = _dry_placement(st, job, p, now + grace, end_of)
        piped = True
        refused = False  # a count-based set on whose devices the pipeline would still refuse the job
        for chosen in pruned_victims(st, cands, fits, now):
            if placed(chosen) is None:
                refused = True
                continue
            if not chosen:
                break  # it fits once the grace period of earlier victims ends: no new victim
            cost = victim_cost(st, chosen, now)
            if best is None or cost < best[0]:
                best, best_hosts = (cost, p, chosen), ()
        else:
            if not refused:
                continue
            # those victims would be preempted for nothing: also choose them host by host, with
            # the pipeline, and keep the cheapest set it accepts
            gang = _gang_choice(st, p, cands, fits, placed, now)
            # on a tie in this pool, the set chosen with the pipeline (its hosts are held for the job)
            if gang is not None and (best is None or gang[0] < best[0] or (gang[0] == best[0] and best[1] == p)):
                best, best_hosts = (gang[0], p, gang[2]), gang[1]
    if best is None:
        if st.pctx is not None:
            st.pctx.failed.add(attempt_key(st, job) if piped else _count_key(job))
        return False
    _, p, victims = best
    return _preempt_chosen(st, job, p, victims, best_hosts, profiles[p], end_of, d, now, res, on_victim)


def _preempt_chosen(st: EngineState, job: Job, p: str, victims: list[Job], best_hosts: tuple[int, ...],
                    prof: Profile, end_of: Callable[[Job], float], d: float, now: float, res: CycleResult,
                    on_victim: Callable[[Job], None] | None) -> bool:
    """:func:`try_preempt`'s choice carried out: the victims told to stop (on ``prof``, their
    devices free from the end of the grace period), the job's hosts kept for it, and the job
    started now (no grace period) or reserved from the end of the grace period (``d``: its duration)."""
    n, grace = job.spec.devices, st.policy.grace_s
    st.pctx = None  # running set changes: recompute the pre-check
    ends = {v.id: end_of(v) for v in victims}
    where = tuple(st.cluster.host_names[h] for h in best_hosts)
    for v in sorted(victims, key=lambda x: x.seq):
        if on_victim is not None:
            on_victim(v)
        why = f"preempted for {job.id} ({job.klass.name})" + (f" on {', '.join(where)}" if where else "")
        signal_victim(st, job, v, now, why, res, hosts=where)
        prof.add(now + grace, ends[v.id], -v.spec.devices)
        # one that was to stop before the grace period ends now holds its devices until then
        prof.add(ends[v.id], now + grace, v.spec.devices)
    if best_hosts and grace > 0:
        st.held_hosts[job.id] = (p, best_hosts)  # what its victims free there is kept for it
    if grace <= 0:
        adm = st.admit_planned(job, p, {})
        if adm.ok and start(st, job, p, now, adm, "started by preemption"):
            prof.add(now, now + d, n)
            res.started.append(job.id)
            return True
    prof.add(now + grace, now + grace + d, n)
    st.reservations[job.id] = Reservation(p, now + grace, n)
    res.reservations[job.id] = now + grace
    return True


def _host_choice(st: EngineState, job: Job, pool: str, cands: Sequence[Job],
                 fits: Callable[[Sequence[Job]], bool],
                 now: float) -> tuple[tuple[float, ...], int, list[Job]] | None:
    """Victims for a job the pipeline must put on one host: per host, the candidates running
    there, pruned (in :func:`try_preempt`'s two victim orders) to a minimal set with which the
    pipeline places the job on that host (its free devices, CPU, memory, filters, topology) and
    the pool's counts and quota admit it (``fits``); the cheapest host wins (fewest victims, least
    work lost, lowest class; lowest host index on ties).  ``None``: no host can be made to fit."""
    pidx = st.pool_index[pool]
    n = job.spec.devices
    per_host: dict[int, list[tuple[Job, int]]] = {}
    for v in cands:
        for a in v.allocs:
            per_host.setdefault(a.host, []).append((v, len(a.devices)))
    best: tuple[tuple[float, ...], int, list[Job]] | None = None
    held = _held_by_others(st, job, pool)
    for h in sorted(per_host):
        if h in held:
            continue  # kept for another preemptor whose victims are winding down there
        on_h = per_host[h]
        free = int(st.host_free[h, pidx])
        if free + sum(k for _v, k in on_h) < max(n, 1):
            continue  # not enough devices on this host even with every candidate gone
        here = {v.id: k for v, k in on_h}

        def ok(victims: Sequence[Job], h: int = h, free: int = free, here: dict[str, int] = here) -> bool:
            if free + sum(here[v.id] for v in victims) < n:
                return False
            return fits(victims) and host_fits(st, job, pool, h, victims)

        every = [v for v, _k in on_h]
        if not ok(every):
            continue
        for chosen in pruned_victims(st, every, ok, now):
            if not chosen:
                continue  # it fits there already (the pipeline chose otherwise): no victim for it
            cost = victim_cost(st, chosen, now)
            if best is None or cost < best[0]:
                best = (cost, h, chosen)
    return best


def _held_by_others(st: EngineState, job: Job, pool: str) -> set[int]:
    """Hosts of ``pool`` kept for other preemptors whose victims are winding down there."""
    return {h for pid, (p, hosts) in st.held_hosts.items() if p == pool and pid != job.id for h in hosts}


def _dry_placement(st: EngineState, job: Job, pool: str, at: float = -math.inf,
                   end_of: Callable[[Job], float] | None = None) -> Callable[[Sequence[Job]], tuple[int, ...] | None]:
    """The pipeline's verdict on a victim set: where it would place ``job`` in ``pool`` (split
    over hosts when the job may be) once the victims released what they hold, and, with
    ``end_of``, the active jobs expected to stop by ``at`` (as the counts assume): the hosts of
    the plan, or ``None`` when it refuses.  On a host kept for another preemptor, the devices that
    preemptor will take there count as taken.  Nothing changes (:meth:`QueueingScheduler.released`);
    one dry run per victim set."""
    spec = job.spec
    # other preemptors' held hosts: their holds end by the time this job's victims stop (one grace
    # period), and then each takes its devices there; the rest of those hosts is this job's to use
    owed = [(hosts, max(st.jobs[pid].spec.devices, 1)) for pid, (p, hosts) in st.held_hosts.items()
            if p == pool and pid != job.id]
    memo: dict[frozenset[str], tuple[int, ...] | None] = {}
    ending: list[Job] | None = None

    def make(i: int, k: int, n_chunks: int) -> Request:
        return st.chunk_request(spec, pool, i, k, n_chunks)

    def placed(victims: Sequence[Job]) -> tuple[int, ...] | None:
        nonlocal ending
        key = frozenset(v.id for v in victims)
        if key in memo:
            return memo[key]
        if ending is None:
            ending = [] if end_of is None else [v for v in st.active.values() if end_of(v) <= at + 1e-9]
        allocs = [a for v in victims for a in v.allocs] + [a for v in ending if v.id not in key for a in v.allocs]
        with released(st, allocs, pool) as pool_free:
            for hosts, left in owed:
                for h in hosts:
                    k = min(left, int(pool_free[h]))
                    pool_free[h] -= k
                    left -= k
            got = st.placer.plan(make, spec.devices, split=not st.one_host(spec), topology=spec.topology,
                                         pool_free=pool_free, exact_counts=True)
        memo[key] = None if isinstance(got, PlacementRefusal) else tuple(sorted({c.host for c in got.chunks}))
        return memo[key]

    return placed


def _gang_choice(st: EngineState, pool: str, cands: Sequence[Job], fits: Callable[[Sequence[Job]], bool],
                 placed: Callable[[Sequence[Job]], tuple[int, ...] | None],
                 now: float) -> tuple[tuple[float, ...], tuple[int, ...], list[Job]] | None:
    """Victims for a gang that the pipeline would refuse on the count-based victims' devices:
    whole hosts' candidates, the hosts that gain the most devices first (then the cheapest), until
    the pipeline places the job (``placed``) and the counts and quota admit it (``fits``); then
    pruned in :func:`pruned_victims`' two orders, the cheaper set kept.  Returns its cost, the
    hosts of the plan (kept for the job through the grace period) and the victims; ``None``: no
    set works, or none is needed."""

    def ok(victims: Sequence[Job]) -> bool:
        return fits(victims) and placed(victims) is not None

    if not ok(cands):
        return None
    per_host: dict[int, list[Job]] = {}
    gain: dict[int, int] = {}
    for v in cands:
        for a in v.allocs:
            per_host.setdefault(a.host, []).append(v)
            gain[a.host] = gain.get(a.host, 0) + len(a.devices)
    free = st.host_free[:, st.pool_index[pool]]
    # the victims of the first k hosts in that order, each once (a victim may span hosts)
    flat: list[Job] = []
    upto: list[int] = []  # upto[k - 1]: how many of ``flat`` the first k hosts hold
    seen: set[str] = set()
    for h in sorted(per_host, key=lambda h: (-(int(free[h]) + gain[h]), victim_cost(st, per_host[h], now), h)):
        flat += [v for v in per_host[h] if v.id not in seen]
        seen.update(v.id for v in per_host[h])
        upto.append(len(flat))
    k = _fewest(len(upto), lambda k: ok(flat[:upto[k - 1]]))
    chosen = flat[:upto[k - 1]]
    best: tuple[tuple[float, ...], list[Job]] | None = None
    for victims in pruned_victims(st, chosen, ok, now):
        if not victims:
            return None  # the pipeline places it with the victims already winding down
        cost = victim_cost(st, victims, now)
        if best is None or cost < best[0]:
            best = (cost, victims)
    assert best is not None
    hosts = placed(best[1])
    assert hosts is not None  # ok() held for it
    return best[0], hosts, best[1]


def _first_until(order: Sequence[Job], allowed: Callable[[Job], bool],
                 ok: Callable[[Sequence[Job]], bool]) -> list[Job] | None:
    """The first ``allowed`` candidates of ``order`` that ``ok`` accepts (the shortest such
    prefix), then pruned (smallest first) to a minimal set ``ok`` still accepts; ``None``: not
    even all of them work."""
    cands = [v for v in order if allowed(v)]
    if not cands or not ok(cands):
        return None
    chosen = cands[:_fewest(len(cands), lambda k: ok(cands[:k]))]
    for v in sorted(chosen, key=lambda x: x.spec.devices):
        rest = [x for x in chosen if x is not v]
        if rest and ok(rest):
            chosen = rest
    return chosen


def _fewest(n: int, ok: Callable[[int], bool]) -> int:
    """The least ``k`` in 1..``n`` with ``ok(k)``, given ``ok(n)``: a binary search (victims only
    add room, so a longer prefix of a victim order works whenever a shorter one does), which
    costs a few dry placements where a scan would cost one per candidate."""
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def pruned_victims(st: EngineState, cands: Sequence[Job], fits: Callable[[Sequence[Job]], bool],
                   now: float) -> list[list[Job]]:
    """Two candidate victim sets: all of ``cands``, then each victim dropped (in one of two
    orders: lowest class and least lost work first, or smallest first) whenever the job still
    ``fits`` without it.  An empty set means no victim is needed."""
    out: list[list[Job]] = []
    for order in (lambda v: (-v.klass.level, -lost_if(st, v, now), v.spec.devices),
                  lambda v: (v.spec.devices, -v.klass.level, -lost_if(st, v, now))):
        chosen = list(cands)
        for v in sorted(cands, key=order):
            rest = [x for x in chosen if x is not v]
            if fits(rest):
                chosen = rest
        out.append(chosen)
    return out


def victim_cost(st: EngineState, victims: Sequence[Job], now: float) -> tuple[float, float, float]:
    """What a victim set costs, compared lexicographically: victims, lost work, highest class."""
    return (float(len(victims)), sum(lost_if(st, v, now) for v in victims),
            float(max(v.klass.level for v in victims)))


def signal_victim(st: EngineState, job: Job, v: Job, now: float, why: str, res: CycleResult, *,
                  hosts: Sequence[str] = ()) -> None:
    """Tell victim ``v`` to stop for ``job``: it keeps its devices for the grace period (none:
    it stops now).  ``hosts``: where the pipeline places ``job`` once its victims are gone (kept
    for it meanwhile): journaled as ``host`` when one, as ``hosts`` (a gang's) when several."""
    grace = st.policy.grace_s
    data: dict[str, object] = {"stop_at": now + grace, "for": job.id}
    if len(hosts) == 1:
        data["host"] = hosts[0]
    elif hosts:
        data["hosts"] = list(hosts)
    emit(st, now, v.id, "preempting", why, data)
    res.preempted.append(v.id)
    if grace <= 0:
        finish_preemption(st, v, now)


def lost_if(st: EngineState, v: Job, now: float) -> float:
    mode = st.policy.preempt_mode
    done = v.progress(now)
    if mode == PreemptMode.REQUEUE:
        return done
    keep = done if mode == PreemptMode.SUSPEND else v.checkpoint_at(now)
    return done - max(0.0, keep - st.policy.preempt_overhead_s)


def tier_victims(st: EngineState, level: int, pool: str, q: int, now: float) -> deque[Job]:
    """Running jobs a tier-``q`` job of class ``level`` may preempt in ``pool``, in victim order:
    highest tier first, then least work lost, then most devices (fewer victims)."""
    keyed: list[tuple[tuple[float, float, int, int], Job]] = []
    running = JobState.RUNNING
    for v in st.active.values():
        # :func:`releasable` and the sort key, with each candidate's tier read once (this runs
        # over every active job of the pool, thousands in a full cluster)
        if (v.pool != pool or v.state != running or v.klass.level != level
                or not (v.spec.preemptible and v.klass.preemptible)):
            continue
        tier = st.tier(v, now)
        if tier <= q or ends_in_grace(st, v, now):
            continue
        keyed.append(((-tier, lost_if(st, v, now), -v.spec.devices, -v.seq), v))
    keyed.sort(key=_key)
    return deque(v for _k, v in keyed)


def _key(item: tuple[tuple[float, float, int, int], Job]) -> tuple[float, float, int, int]:
    return item[0]


def preempt_tier(st: EngineState, job: Job, pool: str, q: int, now: float, adm: Admission, res: CycleResult,
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
    pidx = st.pool_index[pool]
    if order is None:
        order = tier_victims(st, level, pool, q, now)
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
            above[key] = st.book.above_guarantee(v.spec.tenant, pool, st.usage(v))
        return above[key]

    single = st.one_host(job.spec)
    best: list[Job] | None = None
    best_hosts: tuple[int, ...] = ()  # kept for it while the victims wind down (none: counted per pool)
    per_host: dict[int, list[tuple[Job, int]]] = {}
    retry: list[int] = []  # where the counts suffice but the pipeline refused (a gang: -1, the pool)
    scopes: list[tuple[int, int, Iterable[tuple[Job, int]]]]
    if single:  # all on one host: only hosts where some candidate runs
        for v in order:
            for a in v.allocs:
                per_host.setdefault(a.host, []).append((v, len(a.devices)))
        held = _held_by_others(st, job, pool)
        scopes = [(h, int(st.host_free[h, pidx]), lst) for h, lst in sorted(per_host.items()) if h not in held]
    else:  # lazily: the walk stops as soon as enough devices are found
        scopes = [(-1, st.pool_free(pool), ((v, v.spec.devices) for v in order))]
    for h, free, lst in scopes:
        need = n - free
        if need <= 0:
            retry.append(h)  # enough free devices, yet it waits: the pipeline refused it
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
        if single and not host_fits(st, job, pool, h, victims):
            retry.append(h)  # enough devices there, but the pipeline would not place it (CPU, memory, topology)
            continue
        best, best_hosts = victims, ((h,) if single else ())
    placed = None if single else _dry_placement(st, job, pool)
    if placed is not None and best is not None and placed(best) is None:
        best, retry = None, [-1]  # the count-based victims would be preempted for nothing
    if best is None and retry:
        # victims chosen with the pipeline: in victim order until it places the job, then pruned
        if placed is not None:
            free_now = st.pool_free(pool)

            def gang_ok(vs: Sequence[Job]) -> bool:
                return free_now + sum(v.spec.devices for v in vs) >= n and placed(vs) is not None

            best = _first_until(list(order), allowed, gang_ok)
            best_hosts = () if best is None else (placed(best) or ())
        for h in sorted(retry) if single else ():
            on_h = dict(per_host[h])
            free_h = int(st.host_free[h, pidx])

            def host_ok(vs: Sequence[Job], h: int = h, free_h: int = free_h, on_h: dict[Job, int] = on_h) -> bool:
                return free_h + sum(on_h[v] for v in vs) >= n and host_fits(st, job, pool, h, vs)

            got_h = _first_until(list(on_h), allowed, host_ok)
            if got_h is not None and (best is None or len(got_h) < len(best)):
                best, best_hosts = got_h, (h,)
    if not best or (check is not None and not check(best)):
        return None
    return _preempt_tier_chosen(st, job, pool, q, best, best_hosts, order, now, adm, res, on_victim)


def _preempt_tier_chosen(st: EngineState, job: Job, pool: str, q: int, victims: list[Job], hosts: tuple[int, ...],
                         order: deque[Job], now: float, adm: Admission, res: CycleResult,
                         on_victim: Callable[[Job], None] | None) -> float:
    """:func:`preempt_tier`'s choice carried out: each victim leaves ``order``, its demotion is
    journaled and it is told to stop; the job's hosts are kept for it; it starts now (no grace
    period) or is reserved from the end of the grace period (the instant returned)."""
    n = job.spec.devices
    st.pctx = None
    grace = st.policy.grace_s
    for v in victims:
        order.remove(v)  # never a candidate again in this walk
    where = tuple(st.cluster.host_names[h] for h in hosts)
    for v in sorted(victims, key=lambda x: x.seq):
        if on_victim is not None:
            on_victim(v)
        journal_demotion(st, v, now)
        signal_victim(st, job, v, now, f"preempted for {job.id}: tier {q} goes before tier "
                            f"{st.tier(v, now)} ({st.attained(v, now):.0f} device-s attained)"
                            + (f" on {', '.join(where)}" if where else ""), res, hosts=where)
    if hosts and grace > 0:
        st.held_hosts[job.id] = (pool, hosts)  # what its victims free there is kept for it
    if grace <= 0 and start(st, job, pool, now, adm, "started by preemption"):
        res.started.append(job.id)
        return now
    st.reservations[job.id] = Reservation(pool, now + grace, n)
    res.reservations[job.id] = now + grace
    return now + grace


def try_preempt_booked(st: EngineState, job: Job, pools: Sequence[str], now: float, res: CycleResult,
                        views: TierViews) -> bool:
    """Preemption across classes (:func:`try_preempt`) inside a tiered walk: it must fit its own
    view (for its tier hold) and every higher class's view (for its duration) once the victims
    are gone; victims are released on every view and the job booked on them."""
    level, q = job.klass.level, st.tier(job, now)
    own = {p: prof.copy() for p, prof in views.get(level, q).items()}
    also = [({p: prof.copy() for p, prof in view.items()},
             (lambda v, lv=lv, qq=qq: view_end(st, v, now, lv, qq)), st.duration(job))
            for (lv, qq), view in views.items() if lv > level]
    if not try_preempt(st, job, pools, own, now, res, end_fn=lambda v: view_end(st, v, now, level, q),
                       hold=views.hold(job, level, q), also=also, on_victim=views.release):
        return False
    if job.active and job.pool is not None:
        views.book(job.pool, now, job)
    elif job.id in st.reservations:
        r = st.reservations[job.id]
        views.book(r.pool, r.at, job)
    return True
