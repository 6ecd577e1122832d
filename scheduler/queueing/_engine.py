"""The queueing engine's façade: admission, ordering, preemption, backfill, placement, recovery.

:class:`QueueingScheduler` sits on top of part 1 (a :class:`accel.scheduler.ClusterState` and a
:class:`accel.scheduler.Scheduler`).  It decides *when* and in which pool; part 1's filter, score
and reserve stages decide *where* (hosts and slots, see :mod:`._placement`).  All mutation goes through
:meth:`QueueingScheduler._emit`, which appends the event to the journal and applies it, and a
rebuild (:meth:`QueueingScheduler.recover`) applies the same events again: live state and
rebuilt state cannot drift apart.

Capacity model: each device model is a *pool*; backfill and estimates count whole free
devices per pool (a fractional share takes a whole free device there, which is conservative).
A job that is not ``same_host`` is split into per-host chunks, consolidated on as few hosts
as possible and placed all-or-nothing.  When the counts say a job fits but the pipeline
refuses it (topology, CPU, memory, filters), it waits with reason ``placement``.  Preemption
for a job that must run on one host chooses one host and victims there with which the pipeline
places it (``host_fits``), and keeps that host for it while the victims wind down; a gang's
victims are checked with a dry placement (``released``) and, where the count-based ones would
not let it place, chosen host by host with the pipeline, its plan's hosts kept for it.

The engine works in stages, one module each; this one keeps the state, the public calls, the
queue order and placement (:mod:`._placement` turns a queued job into per-host requests and
slots through the filter, score and reserve stages):

- :mod:`._events`: applying events (live and on replay) and recovery's checks;
- :mod:`._walk`: the planning walk, one pass over the queue driven by a view (plain, or one
  per class and attained-service tier) and a mode (a cycle commits, an estimate plans);
- :mod:`._preempt`: the pre-check, victim choice, signalling victims, grace holds, tier preemption;
- :mod:`._tiers`: attained-service tiers, their views, the starvation guard, ``next_wakeup``;
- :mod:`._estimate`: :class:`WaitEstimate` and a target's estimate on the walk's plan;
- :mod:`._invariants`: bookkeeping checks and the backfill guarantee;
- :mod:`._meter`: metering; :mod:`._records`: the job record and the named state above share.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import statistics
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from accel.model import HostInventory
from accel.scheduler import (
    Allocation,
    ClusterState,
    DeviceSelector,
    Filter,
    InvalidRequestError,
    Request,
    Scheduler,
    SchedulerStateError,
    Scorer,
)

from ._estimate import WaitEstimate
from ._estimators import DeclaredModel, DurationModel
from ._events import apply as apply_event
from ._events import replay, spec_dict
from ._events import update_health as health_events
from ._invariants import check_invariants as check_all
from ._invariants import verify_reservations as verify_all
from ._journal import Event, Journal
from ._meter import Bill, Meter, PriceTable, Segment
from ._placement import IN_HOST_LEVELS, PlacementPlan, PlacementRefusal, QueuePlacer
from ._preempt import finish_preemption
from ._profile import Profile
from ._records import CycleResult, Job, PreemptCheck, Reservation, WaitingJobs
from ._tenants import Admission, Tenant, TenantBook, Usage
from ._tiers import next_wakeup as tiers_next_wakeup
from ._tiers import promote_at as guard_promote_at
from ._tiers import promote_starving
from ._types import InClassOrder, JobSpec, JobState, Policy, WaitReason
from ._walk import Commit, Plan
from ._walk import run as walk

__all__ = ["CycleResult", "Job", "QueueingScheduler", "WaitEstimate"]

def _first(pair: tuple[tuple[float, ...], Job]) -> tuple[float, ...]:
    return pair[0]


_ACTIVE = frozenset((JobState.RUNNING, JobState.PREEMPTING))  # states holding devices (``Job.active``)

class QueueingScheduler:
    """Priority classes, backfill with reservations, preemption, quotas, metering, journal.

    Time is always passed in (``now``, seconds); the engine never reads a clock.
    ``scorer`` (a registered name or a :class:`accel.scheduler.Scorer`; default ``fewest-free``,
    the engine's historical rule), ``workload`` (the target pod mix the FGD scorers need) and
    ``filters`` (extra filter stages) configure where queued work goes; ``refusals`` holds, per
    waiting job, why the pipeline last refused it.
    """

    def __init__(self, cluster: ClusterState, policy: Policy | None = None, *,
                 tenants: Iterable[Tenant] = (), prices: PriceTable | None = None,
                 journal: Journal | str | Path | None = None, scorer: str | Scorer = "fewest-free",
                 durations: DurationModel | None = None, workload: Sequence[Request] | None = None,
                 filters: Sequence[Filter] = ()) -> None:
        self.state = cluster
        self.durations: DurationModel = durations or DeclaredModel()
        self.policy = policy or Policy()
        # queued work goes through the same filter -> score -> reserve stages as a direct request
        self.placer = Scheduler(cluster, scorer, workload=workload, filters=filters)
        self._queue_placer = QueuePlacer(self.placer)
        self.refusals: dict[str, PlacementRefusal] = {}  # job -> why the pipeline refused it last
        self.book = TenantBook(tenants, half_life_s=self.policy.fair_half_life_s)
        self.meter = Meter(prices)
        self.journal = journal if isinstance(journal, Journal) else Journal(journal or ":memory:")
        # The prices go into the journal too, so a bill made from it alone (``accel sched bill``)
        # is priced as this engine's; an engine given none (a recovery) bills with the stored ones.
        stored = self.journal.prices()
        if prices is None and stored is not None:
            self.meter.prices = stored
        elif not self.journal.readonly:
            self.journal.use_prices(self.meter.prices)  # stored with the next rows it prices
        self.jobs: dict[str, Job] = {}
        self.now = -math.inf
        self._seq = 0
        self._replaying = False
        self.reservations: dict[str, Reservation] = {}
        # indexes kept by the event handlers: jobs holding devices, jobs waiting in the queue
        self._active: dict[str, Job] = {}
        self._selectors: dict[str, DeviceSelector] = {}
        self._req_cache: dict[tuple[str, int], Request] = {}  # requests built by _place, used by _on_placed
        self._ratios: deque[float] = deque(maxlen=max(1, self.policy.calibrate_window))
        self._pctx: PreemptCheck | None = None  # this cycle's preemption pre-check (built when first needed)
        self._waiting = WaitingJobs()
        # The queue order kept between calls when every class orders FIFO (see ``queue``):
        # (key, job) sorted by key, and each listed job's key.
        self._order: list[tuple[tuple[float, ...], Job]] = []
        self._order_keys: dict[str, tuple[float, ...]] = {}
        self._order_kept = all(c.order == InClassOrder.FIFO for c in self.policy.classes)
        # each waiting job's (class level, tier), and how many waiting jobs have each
        self._wait_tier: dict[str, tuple[int, int]] = {}
        self._tier_count: dict[tuple[int, int], int] = {}
        # preemptors whose victims are winding down -> (pool, hosts) kept for them (one host for a
        # one-host job, a gang's hosts when its victims were chosen with the pipeline): other jobs
        # are not placed there (set by each walk from the journaled ``preempting`` events)
        self._held_hosts: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._guard = (self.policy.promote_after_wait_s is not None
                       or self.policy.promote_after_wait_ratio is not None)
        self._init_pools()

    # -- pools -----------------------------------------------------------------------------------
    def _init_pools(self) -> None:
        st = self.state
        names = sorted({c.model or "unknown" for c in st.classes})
        self.pools: tuple[str, ...] = tuple(names)
        self._pool_index = {p: i for i, p in enumerate(names)}
        cls_pool = np.array([self._pool_index[c.model or "unknown"] for c in st.classes] or [0], dtype=np.int64)
        self._slot_pool = np.where(st.dev_class >= 0, cls_pool[np.maximum(st.dev_class, 0)], -1)
        self._dev_mem: dict[str, int] = {}
        for c in st.classes:
            self._dev_mem.setdefault(c.model or "unknown", c.memory_bytes)
        self._pool_free: list[int] | None = None  # per-pool sums of host_free (None: recount)
        self.host_free = np.zeros((st.n_hosts, len(names)), dtype=np.int64)
        self.host_usable = np.zeros((st.n_hosts, len(names)), dtype=np.int64)
        for h in range(st.n_hosts):
            self._refresh_host(h)

    def _refresh_host(self, h: int) -> None:
        st = self.state
        pools = self._slot_pool[h]
        usable = st.dev_usable[h] & (pools >= 0)
        free = usable & (st.dev_left[h] == st.dev_cap[h])
        n = len(self.pools)
        self.host_free[h] = np.bincount(pools[free], minlength=n)[:n]
        self.host_usable[h] = np.bincount(pools[usable], minlength=n)[:n]
        self._pool_free = None

    def pool_free(self, pool: str) -> int:
        """Fully free usable devices of ``pool``."""
        # per-pool totals kept until ``host_free`` changes (_refresh_host, _on_placed): a walk
        # asks for them at every queued job it examines
        tot = self._pool_free
        if tot is None:
            tot = self._pool_free = [int(x) for x in self.host_free.sum(axis=0)]
        return tot[self._pool_index[pool]]

    def pool_capacity(self, pool: str) -> int:
        """Usable devices of ``pool``."""
        return int(self.host_usable[:, self._pool_index[pool]].sum())

    def _pools_for(self, spec: JobSpec) -> list[str]:
        if spec.pool:
            if spec.pool not in self._pool_index:
                raise InvalidRequestError(f"job {spec.id}: no pool {spec.pool!r}; pools: {list(self.pools)}",
                                          field="pool")
            return [spec.pool]
        return list(self.pools)

    # -- journal plumbing ----------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group several calls into one journal transaction (all or nothing after a crash)."""
        with self.journal.transaction():
            yield

    def _emit(self, t: float, job: str | None, kind: str, reason: str = "", data: dict[str, Any] | None = None) -> None:
        data = data or {}
        if not self._replaying:
            self.journal.append(t, job, kind, reason, data)
        apply_event(self, Event(0, t, job, kind, reason, data))

    def _advance(self, now: float) -> None:
        if now < self.now - 1e-9:
            raise SchedulerStateError(f"time went backwards: {now} < {self.now}")
        self.now = max(self.now, float(now))

    # -- applying placements (the other events: _events) ---------------------------------------------------
    def _on_placed(self, ev: Event) -> None:
        job = self.jobs[str(ev.job)]
        pool = str(ev.data["pool"])
        spec = job.spec
        allocs: list[Allocation] = []
        chunks = ev.data["chunks"]
        st = self.state
        for i, (host_name, slots) in enumerate(chunks):
            h = st.host_index[host_name]
            req = self._req_cache.pop((job.id, i), None) or self._chunk_request(spec, pool, i, len(slots), len(chunks))
            devs = tuple(int(s) for s in slots)
            # slots that were fully free and usable stop being free: count them down in place
            # (a full recount per host costs more than the allocation itself at 5,000 hosts)
            was_free = [d for d in devs if st.dev_usable[h, d] and st.dev_left[h, d] == st.dev_cap[h, d]
                        and self._slot_pool[h, d] >= 0]
            allocs.append(st.allocate(req, h, devs))
            for d in was_free:
                self.host_free[h, self._slot_pool[h, d]] -= 1
            self._pool_free = None
        job.allocs = allocs
        job.pool = pool
        job.state = JobState.RUNNING
        job.promoted = False  # it got what it waited for; its tiers keep counting from the base
        self._waiting.pop(job.id, None)
        self._held_hosts.pop(job.id, None)
        job.target_hosts = ()
        self._active[job.id] = job
        job.started_at = ev.t
        job.stop_at = None
        job.attempts += 1
        job.borrowing = bool(ev.data.get("borrowing", False))
        if job.first_started_at is None:
            job.first_started_at = ev.t
            est = job.estimate_at_submit
            if self.policy.calibrate_window and est is not None and est - job.submitted_at > 1.0:
                self._ratios.append((ev.t - job.submitted_at) / (est - job.submitted_at))
        job.reason = ev.reason
        job.wait = WaitReason.NONE
        self.reservations.pop(job.id, None)
        use = self._usage(job)
        self.book.add(spec.tenant, pool, use, ev.t)
        mem = spec.share.memory_bytes if spec.share is not None else self._dev_mem.get(pool, 0)
        share = spec.compute_milli / 1000.0
        self.meter.start(job.id, [Segment(spec.tenant, pool, len(a.devices), mem * len(a.devices),
                                          share * len(a.devices) / max(spec.devices, 1), ev.t) for a in allocs])

    _on_resumed = _on_placed

    # -- helpers ----------------------------------------------------------------------------------------
    def _usage(self, job: Job) -> Usage:
        spec = job.spec
        pool = job.pool or (spec.pool or (self.pools[0] if self.pools else ""))
        mem = spec.share.memory_bytes if spec.share is not None else self._dev_mem.get(pool, 0) * spec.devices
        return Usage(spec.devices if spec.share is None else 0, mem, spec.compute_milli)

    def _need(self, job: Job, pool: str) -> Usage:
        spec = job.spec
        mem = spec.share.memory_bytes if spec.share is not None else self._dev_mem.get(pool, 0) * spec.devices
        return Usage(spec.devices if spec.share is None else 0, mem, spec.compute_milli)

    def _chunk_request(self, spec: JobSpec, pool: str, i: int, k: int, n_chunks: int) -> Request:
        sel = self._selectors.get(pool)
        if sel is None:
            # pool "unknown" holds the devices without a model name (see _init_pools)
            sel = self._selectors[pool] = DeviceSelector(models=(pool,) if pool != "unknown" else ("", "unknown"))
        name = spec.id if n_chunks == 1 else f"{spec.id}#{i}"
        gang = spec.id if n_chunks > 1 else None
        cpu = spec.cpu_milli * k // max(spec.devices, 1)
        mem = spec.memory_bytes * k // max(spec.devices, 1)
        if spec.share is not None:
            return Request(name, cpu_milli=cpu, memory_bytes=mem, share=spec.share, selector=sel,
                           priority=self._level(spec), tenant=spec.tenant)
        return Request(name, cpu_milli=cpu, memory_bytes=mem, devices=k, selector=sel, gang=gang,
                       topology=spec.topology, priority=self._level(spec), tenant=spec.tenant)

    def _level(self, spec: JobSpec) -> int:
        job = self.jobs.get(spec.id)
        return job.klass.level if job is not None else self.policy.klass(spec.priority_class).level

    def duration(self, job: Job) -> float:
        """How long a queued job is expected to hold its devices once started (from what it kept)."""
        return max(1.0, self.durations.remaining((job.spec.tenant, job.spec.devices), job.spec.estimate_s,
                                                 job.work_s, self.policy.overrun_margin_s))

    def expected_end(self, job: Job, now: float) -> float:
        """When the scheduler expects an active job to release its devices."""
        if job.state == JobState.PREEMPTING and job.stop_at is not None:
            return job.stop_at
        assert job.started_at is not None
        done = job.progress(now)
        left = self.durations.remaining((job.spec.tenant, job.spec.devices), job.spec.estimate_s, done,
                                        self.policy.overrun_margin_s)
        if done == job.work_s:
            # it started this instant: exactly what was booked for it (``duration``)
            return now + max(1.0, left)
        return now + left

    def order_key(self, job: Job, now: float) -> tuple[float, ...]:
        """Queue order: higher class first, then the class's in-class order, then submit order."""
        k = job.klass
        if k.order == InClassOrder.SHORTEST:
            inner = k.band(self.duration(job) * job.spec.devices)
        elif k.order == InClassOrder.FAIR:
            inner = self.book.fair_usage(job.spec.tenant, now)
        else:
            inner = 0.0
        if self.policy.demote_after_device_s:
            if self._guard:
                return (-float(k.level), float(self.tier(job, now)), float(not job.promoted), inner, float(job.seq))
            return (-float(k.level), float(self.tier(job, now)), inner, float(job.seq))
        if self._guard:
            return (-float(k.level), float(not job.promoted), inner, float(job.seq))
        return (-float(k.level), inner, float(job.seq))

    def queue(self, now: float | None = None, *, upto: str | None = None) -> list[Job]:
        """Queued (and suspended) jobs in the order the next cycle examines them; with ``upto`` (a
        waiting job's id), only the jobs up to and including that one (what an estimate walks)."""
        t = self.now if now is None else now
        if self._order_kept:
            order = self._kept_order(t)
            target_key = self._order_keys.get(upto) if upto is not None else None
            if target_key is not None:
                order = order[:bisect.bisect_right(order, target_key, key=_first)]
            return [j for _, j in order]
        self._sync_waiting(t)  # the kept tiers (waiting_tiers) still follow the waiting set
        keyed = [(self.order_key(j, t), j) for j in self._waiting.values()]
        target = self._waiting.get(upto) if upto is not None else None
        if target is not None:
            # keys are unique (they end with the submit sequence): the prefix of the full order
            last = self.order_key(target, t)
            keyed = [kj for kj in keyed if kj[0] <= last]
        keyed.sort(key=_first)
        return [j for _, j in keyed]

    def _kept_order(self, now: float) -> list[tuple[tuple[float, ...], Job]]:
        """The waiting jobs in queue order, kept up to date from the waiting set's changes
        (:meth:`_sync_waiting`).

        Exact when every class orders FIFO: a waiting job's key is then (class level, tier,
        promoted, 0, submit sequence), and each term is fixed while the job waits.  The tier of a
        job holding no devices is a function of its kept work, lost work and service base
        (``tier``), and those, the promoted flag and the class change only through events that
        also set or remove the job in ``_waiting`` (preemption, failure, requeue, promotion), so
        a key computed when the job was last set stays the key ``order_key`` would give at any
        later instant until it is set or removed again.  (SHORTEST reads the duration model and
        FAIR the decayed usage, which move while a job waits: those orders are sorted afresh.)
        """
        self._sync_waiting(now)
        return self._order

    def waiting_tiers(self, now: float | None = None) -> Collection[tuple[int, int]]:
        """The (class level, tier) of every waiting job, each once: a waiting job's tier is fixed
        while it waits (see :meth:`_kept_order`), so this is kept, not recomputed per call."""
        self._sync_waiting(self.now if now is None else now)
        return self._tier_count.keys()

    def _sync_waiting(self, now: float) -> None:
        """Bring the kept (class level, tier) counts and, for FIFO classes, the kept order up to
        date with the jobs set in or removed from ``_waiting`` since the last call."""
        changed = self._waiting.take_changed()
        if not changed:
            return
        order, keys, waiting = self._order, self._order_keys, self._waiting
        tiers, count, kept = self._wait_tier, self._tier_count, self._order_kept
        if len(changed) * 8 > len(tiers) + 64:
            # many changes (recovery, a burst of submissions): one pass and one sort are cheaper
            keys.clear()
            tiers.clear()
            count.clear()
            for j in waiting.values():
                lt = tiers[j.id] = (j.klass.level, self.tier(j, now))
                count[lt] = count.get(lt, 0) + 1
            if kept:
                keyed = [(self.order_key(j, now), j) for j in waiting.values()]
                for k, j in keyed:
                    keys[j.id] = k
                keyed.sort(key=_first)
                self._order = keyed
            return
        for jid in changed:
            was = tiers.pop(jid, None)
            if was is not None:
                left = count[was] - 1
                if left:
                    count[was] = left
                else:
                    del count[was]
            old = keys.pop(jid, None)
            if old is not None:
                del order[bisect.bisect_left(order, old, key=_first)]  # keys are unique (they end with seq)
        for jid in changed:
            job = waiting.get(jid)
            if job is not None:
                lt = tiers[jid] = (job.klass.level, self.tier(job, now))
                count[lt] = count.get(lt, 0) + 1
                if kept:
                    k = keys[jid] = self.order_key(job, now)
                    bisect.insort(order, (k, job), key=_first)

    def running(self) -> list[Job]:
        """Jobs holding devices, in submit order."""
        return sorted(self._active.values(), key=lambda j: j.seq)

    def _profiles(self, now: float) -> dict[str, Profile]:
        rel: dict[str, list[tuple[float, int]]] = {p: [] for p in self.pools}
        for j in self._active.values():
            if j.pool is not None:
                rel[j.pool].append((self.expected_end(j, now), j.spec.devices))
        return {p: Profile(now, self.pool_free(p), rel[p]) for p in self.pools}

    # -- public calls --------------------------------------------------------------------------------
    def submit(self, spec: JobSpec, now: float, *, estimate: bool = False,
               estimate_depth: int | None = None) -> Job:
        """Queue a job.  With ``estimate=True`` its start-time estimate is taken and journaled,
        planning the jobs ahead exactly up to ``estimate_depth`` (see :meth:`estimate`)."""
        if spec.id in self.jobs:
            raise InvalidRequestError(f"job {spec.id} already submitted", field="id")
        self.policy.klass(spec.priority_class)
        self._pools_for(spec)
        cap = max((self.pool_capacity(p) for p in self._pools_for(spec)), default=0)
        if spec.devices > cap:
            raise InvalidRequestError(f"job {spec.id} asks for {spec.devices} devices; the largest pool it "
                                      f"accepts has {cap}", field="devices")
        self._advance(now)
        data: dict[str, Any] = {"spec": spec_dict(spec)}
        if estimate:
            # estimate as if it were queued now (a throwaway record, nothing is journaled)
            tmp = Job(spec, self.policy.klass(spec.priority_class), self._seq + 1, now)
            self.jobs[spec.id] = self._waiting[spec.id] = tmp
            try:
                ests = self.estimate(spec.id, now, depth=estimate_depth)
            finally:
                del self.jobs[spec.id], self._waiting[spec.id]
            own = [e.start_at for e in ests if e.pool in self._pools_for(spec)]
            data["estimate"] = min(own) if own else None
            if data["estimate"] is not None and self._ratios and math.isfinite(data["estimate"]):
                data["raw_estimate"] = data["estimate"]
                data["estimate"] = now + (data["estimate"] - now) * statistics.median(self._ratios)
            if data["estimate"] is not None and not math.isfinite(data["estimate"]):
                data["estimate"] = None
        self._emit(now, spec.id, "submitted", "submitted", data)
        return self.jobs[spec.id]

    def quote(self, spec: JobSpec, now: float, *, depth: int | None = None) -> list[WaitEstimate]:
        """Estimated start per pool for ``spec`` as if it were submitted at ``now``, best first:
        a front desk's quote before the user chooses a pool (``accel serve``'s ``POST /v1/quotes``).

        Nothing is journaled and nothing changes: the job is planned as a throwaway waiting record,
        exactly as ``submit(..., estimate=True)`` does, and removed again.
        """
        if spec.id in self.jobs:
            raise InvalidRequestError(f"job {spec.id} already submitted", field="id")
        klass = self.policy.klass(spec.priority_class)
        self._pools_for(spec)
        t = max(float(now), self.now)
        tmp = Job(spec, klass, self._seq + 1, t)
        self.jobs[spec.id] = self._waiting[spec.id] = tmp
        try:
            return self.estimate(spec.id, t, depth=depth)
        finally:
            del self.jobs[spec.id], self._waiting[spec.id]

    def finish(self, job_id: str, now: float, *, ok: bool = True, reason: str = "") -> None:
        """The job ended by itself (``ok=False``: it failed)."""
        job = self._job(job_id)
        if job.state.terminal:
            raise SchedulerStateError(f"job {job_id} already {job.state.value}")
        self._advance(now)
        if ok:
            self._emit(now, job_id, "finished", reason or "completed")
        else:
            self._emit(now, job_id, "failed", reason or "job failed", {"requeue": False})

    def cancel(self, job_id: str, now: float, reason: str = "cancelled by user") -> None:
        job = self._job(job_id)
        if job.state.terminal:
            raise SchedulerStateError(f"job {job_id} already {job.state.value}")
        self._advance(now)
        self._emit(now, job_id, "cancelled", reason)

    def _job(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise SchedulerStateError(f"unknown job {job_id}")
        return job

    # -- health -----------------------------------------------------------------------------------------
    def update_health(self, now: float, snapshot: Iterable[HostInventory] | Mapping[str, bool]) -> list[str]:
        """Apply device health from new snapshots (or ``{device_id: usable}``).

        Jobs on a device that turned unhealthy or lost are requeued to resume from their last
        checkpoint (work since then is accounted as lost) and re-placed by the next cycle.
        Returns the ids of the jobs that were failed over.
        """
        return health_events(self, now, snapshot)

    # -- placement --------------------------------------------------------------------------------------
    def _place(self, job: Job, pool: str) -> list[tuple[str, list[int]]] | PlacementRefusal:
        """Hosts and slots through the placement pipeline (nothing bound; see ``_placement``).

        The chunk requests are kept in ``_req_cache`` for ``_on_placed`` to bind."""
        spec = job.spec

        def make(i: int, k: int, n_chunks: int) -> Request:
            return self._chunk_request(spec, pool, i, k, n_chunks)

        pool_free = self.host_free[:, self._pool_index[pool]]
        exclude = None
        held = [h for pid, (p, hs) in self._held_hosts.items() if p == pool and pid != job.id for h in hs]
        if held:
            # hosts whose free devices are kept for another preemptor in its grace period
            exclude = np.zeros(self.state.n_hosts, dtype=bool)
            exclude[held] = True
            pool_free = np.where(exclude, 0, pool_free)
        got: PlacementPlan | PlacementRefusal | None = None
        targets = [h for h in (self.state.host_index.get(name) for name in job.target_hosts)
                   if h is not None and (exclude is None or not exclude[h])]
        if targets:
            # a preemptor goes where its victims made room, when the pipeline takes it there
            only = np.ones(self.state.n_hosts, dtype=bool)
            only[targets] = False
            got = self._queue_placer.plan(make, spec.devices, split=not self.one_host(spec), topology=spec.topology,
                                          pool_free=np.where(only, 0, pool_free), exclude=only, exact_counts=True)
        if not isinstance(got, PlacementPlan):
            got = self._queue_placer.plan(make, spec.devices, split=not self.one_host(spec),
                                          topology=spec.topology, pool_free=pool_free, exclude=exclude,
                                          exact_counts=True)  # host_free counts what the pool selector takes
        if isinstance(got, PlacementRefusal):
            return got
        out: list[tuple[str, list[int]]] = []
        for i, chunk in enumerate(got.chunks):
            self._req_cache[(job.id, i)] = chunk.request
            out.append((self.state.host_names[chunk.host], [int(x) for x in chunk.slots]))
        return out

    @staticmethod
    def one_host(spec: JobSpec) -> bool:
        """Must the pipeline put all of ``spec`` on one host?  ``same_host``, a share, or a
        required in-host topology level (link domain, PCIe switch, NUMA node, host)."""
        topo = spec.topology
        return (spec.same_host or spec.share is not None
                or (topo is not None and topo.required and topo.level in IN_HOST_LEVELS))

    def host_fits(self, job: Job, pool: str, host: int, victims: Sequence[Job]) -> bool:
        """Would the pipeline put all of ``job`` on ``host`` once ``victims`` released what they
        hold there?  The victims' allocations on ``host`` are released for the check and put back
        exactly as they were (nothing is journaled, nothing else changes)."""
        spec = job.spec

        def make(i: int, k: int, n_chunks: int) -> Request:
            return self._chunk_request(spec, pool, i, k, n_chunks)

        with self.released([a for v in victims for a in v.allocs if a.host == host], pool) as pool_free:
            return self._queue_placer.fits_host(make, spec.devices, topology=spec.topology, pool_free=pool_free,
                                                host=host, exact_counts=True)

    @contextmanager
    def released(self, allocs: Sequence[Allocation], pool: str) -> Iterator[np.ndarray[Any, np.dtype[np.int64]]]:
        """The cluster state as if ``allocs`` were released, for a dry placement: yields the fully
        free devices of ``pool`` per host then.  On exit every host is put back exactly as it was
        (nothing is journaled; the engine's own counts never change)."""
        st = self.state
        hosts = sorted({a.host for a in allocs})
        saved = [(h, int(st.cpu_free[h]), int(st.mem_free[h]), int(st.pods_used[h]), st.dev_left[h].copy(),
                  st.dev_mem_left[h].copy(), st.affinity[h].copy()) for h in hosts]
        pidx = self._pool_index[pool]
        for a in allocs:
            st.release(a)
        try:
            pool_free = self.host_free[:, pidx].copy()
            for h in hosts:
                free = st.dev_usable[h] & (self._slot_pool[h] == pidx) & (st.dev_left[h] == st.dev_cap[h])
                pool_free[h] = int(free.sum())
            yield pool_free
        finally:
            for a in allocs:
                st.live[a.seq] = a
            for h, cpu, mem, pods, left, mem_left, aff in saved:
                (st.cpu_free[h], st.mem_free[h], st.pods_used[h], st.dev_left[h], st.dev_mem_left[h],
                 st.affinity[h]) = cpu, mem, pods, left, mem_left, aff
                st._touch(h)  # score caches keyed by host version see the restored host afresh

    def _start(self, job: Job, pool: str, now: float, adm: Admission, reason: str) -> bool:
        chunks = self._place(job, pool)
        if isinstance(chunks, PlacementRefusal):
            for key in [k for k in self._req_cache if k[0] == job.id]:
                del self._req_cache[key]
            # counts said it fits; the pipeline said no: a truthful reason, no "now" reservation
            job.wait = WaitReason.PLACEMENT
            self.refusals[job.id] = dataclasses.replace(chunks, pool=pool)
            return False
        self.refusals.pop(job.id, None)
        if job.attempts == 0:
            self._emit(now, job.id, "admitted", "quota ok" + (" (borrowing)" if adm.borrowing else ""),
                       {"pool": pool, "borrowing": adm.borrowing})
        # a job placed again after preemption, suspension or a device failure is "resumed"
        kind = "placed" if job.attempts == 0 else "resumed"
        kind_reason = reason if job.attempts == 0 else f"resumed from {job.work_s:.0f} s of work: {reason}"
        spec = job.spec
        mem = spec.share.memory_bytes if spec.share is not None else self._dev_mem.get(pool, 0)
        # tenant, memory and share ride along so a bill can be made from the journal alone
        self._emit(now, job.id, kind, kind_reason,
                   {"pool": pool, "chunks": chunks, "borrowing": adm.borrowing, "resume_from": job.work_s,
                    "tenant": spec.tenant, "mem_per_device": mem, "share": spec.compute_milli / 1000.0})
        return True

    # -- the cycle ---------------------------------------------------------------------------------------
    def cycle(self, now: float) -> CycleResult:
        """One scheduling cycle: finish preemptions, admit, start, preempt, reserve, backfill."""
        self._advance(now)
        res = CycleResult()
        with self.batch():
            for job in sorted(self.running(), key=lambda j: j.seq):
                if job.state == JobState.PREEMPTING and job.stop_at is not None and job.stop_at <= now + 1e-9:
                    finish_preemption(self, job, now)
            if self._guard:
                promote_starving(self, now)
            walk(self, now, Commit(self, now, res))
        return res

    def _admit_planned(self, job: Job, pool: str, plan_usage: Mapping[tuple[str, str], Usage]) -> Admission:
        extra = plan_usage.get((job.spec.tenant, pool))
        if not extra:
            return self.book.admit(job.spec.tenant, pool, self._need(job, pool))
        return self.book.admit(job.spec.tenant, pool, self._need(job, pool).plus(extra))

    # -- attained-service tiers (Policy.demote_after_device_s) -----------------------------------------
    def attained(self, job: Job, now: float | None = None) -> float:
        """Attained service of a job: the run time it received, kept or lost (so it never goes
        down, and a preempted job cannot climb back into an earlier tier), x devices held."""
        t = self.now if now is None else now
        return (job.progress(t) + job.lost_s) * job.spec.compute_milli / 1000.0

    def tier(self, job: Job, now: float | None = None) -> int:
        """The job's attained-service tier: how many ``demote_after_device_s`` thresholds it passed,
        counting the service attained since its last promotion by the starvation guard (as
        Tiresias resets a promoted job's attained service)."""
        th = self.policy.demote_after_device_s
        if not th:
            return 0
        if job.state in _ACTIVE:
            # the tolerance makes a job demoted at the instant the wake-up for its threshold fires
            return bisect.bisect_right(th, self.attained(job, now) - job.service_base + 1e-6)
        # Holding no devices, its attained service is (work_s + lost_s) x share whatever ``now``
        # is, so its tier is a function of those three fields: a deep queue asks for it many
        # times per walk, and the memo answers exactly what the formula would.
        memo = job.tier_memo
        if memo is not None and memo[0] == job.work_s and memo[1] == job.lost_s and memo[2] == job.service_base:
            return memo[3]
        q = bisect.bisect_right(th, self.attained(job, now) - job.service_base + 1e-6)
        job.tier_memo = (job.work_s, job.lost_s, job.service_base, q)
        return q

    def next_wakeup(self, now: float | None = None) -> float | None:
        """When the next cycle should run even if nothing else happens: the earliest time a
        running job leaves its tier while a job of an earlier tier of its class waits (it may then
        be preempted), or the starvation guard promotes a waiting job.  ``None`` without tiers
        or guard, or when no such change is ahead."""
        return tiers_next_wakeup(self, now)

    def promote_at(self, job: Job) -> float:
        """When the starvation guard promotes a waiting job (``inf``: never, or already promoted).

        A function of journaled state only: when the job last entered the queue and how long its
        last run lasted; the guard is Tiresias' STARVELIMIT (ratio x last run) and/or an absolute
        wait, whichever comes first.  A job that never ran is promoted only by the absolute wait."""
        return guard_promote_at(self, job)

    # -- estimates --------------------------------------------------------------------------------------
    def estimate(self, job_id: str, now: float | None = None, *, depth: int | None = None) -> list[WaitEstimate]:
        """Estimated start per pool for a queued job, with the reason it waits (best first).

        Jobs ahead of it are planned exactly (conservative reservations) up to ``depth``
        (default ``Policy.plan_depth``) and as fluid work beyond.  A job of a fixed pool gets
        estimates for every pool that could serve it, so a user can choose.
        """
        t = self.now if now is None else now
        job = self._job(job_id)
        if job.state not in (JobState.QUEUED, JobState.SUSPENDED):
            raise SchedulerStateError(f"job {job_id} is {job.state.value}, not queued")
        out = walk(self, t, Plan(self, t, job_id, depth))
        refused = self.refusals.get(job_id)
        if refused is not None and refused.pool in out and out[refused.pool].reason == WaitReason.NONE:
            # the counts say "now", but the last cycle's pipeline refused it there: say so
            out[refused.pool] = dataclasses.replace(out[refused.pool], reason=WaitReason.PLACEMENT)
        return sorted(out.values(), key=lambda e: (e.start_at, e.price_per_hour))

    # -- reports -----------------------------------------------------------------------------------------
    def bill(self, now: float | None = None) -> Bill:
        return self.meter.bill(self.now if now is None else now)

    def history(self, job_id: str) -> list[Event]:
        return self.journal.history(job_id)

    def snapshot(self) -> dict[str, Any]:
        """Comparable summary of the whole state (used by crash tests)."""
        return {
            "jobs": {j.id: (j.state.value, j.pool, sorted((a.host_name, a.devices) for a in j.allocs),
                            round(j.work_s, 6), round(j.lost_s, 6), j.attempts, j.started_at, j.ended_at)
                     for j in self.jobs.values()},
            "bill": self.bill().as_rows(),
            "usage": {t: {p: (u.devices, u.compute_milli) for p, u in per.items()}
                      for t, per in self.book.usage.items()},
        }

    # -- invariants --------------------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Raise :class:`SchedulerStateError` if any bookkeeping invariant is broken."""
        check_all(self)

    def verify_reservations(self, now: float | None = None) -> None:
        """Every reservation still holds: replaying them in queue order over the current running
        jobs (with their expected ends), each job fits at its reserved time.  Called right after
        a cycle, this is the backfill guarantee: no job started in the cycle delays a reservation."""
        verify_all(self, now)

    # -- recovery ------------------------------------------------------------------------------------------
    @classmethod
    def recover(cls, cluster: ClusterState, journal: Journal | str | Path, policy: Policy | None = None, *,
                tenants: Iterable[Tenant] = (), prices: PriceTable | None = None,
                durations: DurationModel | None = None, scorer: str | Scorer = "fewest-free",
                workload: Sequence[Request] | None = None, filters: Sequence[Filter] = ()) -> QueueingScheduler:
        """Rebuild the state after a crash by replaying the journal onto a fresh cluster view.

        The replay binds the slots the journal names; ``scorer``, ``workload`` and ``filters``
        (as the crashed engine had them) place the work that comes after; without ``prices`` it
        bills with the price table stored in the journal (schema version 3).

        Every event is checked first (:meth:`Journal.events`: format, payload, each job's life;
        here: pools, hosts, slots and devices of this cluster); the first one that is wrong, or
        that does not apply to this cluster and policy, raises :class:`JournalError` naming it.
        """
        opened = not isinstance(journal, Journal)
        jr = journal if isinstance(journal, Journal) else Journal(journal, create=False)
        try:
            eng = cls(cluster, policy, tenants=tenants, prices=prices, journal=jr, durations=durations,
                      scorer=scorer, workload=workload, filters=filters)
            replay(eng, jr)
        except BaseException:
            if opened:
                jr.close()  # a journal opened here is not left locked (nor its lock file) by a failed recovery
            raise
        return eng
