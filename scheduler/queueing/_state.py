"""The engine's state: one typed object that the engine owns and hands to its stages.

:class:`EngineState` holds everything a stage reads or changes: the cluster view and the
per-pool free-device counts kept beside it, the jobs and the indexes the event handlers keep
(waiting, active), the queue order kept between calls, this cycle's preemption pre-check and
the hosts kept for preemptors, the tenant book, the meter and the journal.  Its methods are the
small questions every stage asks of it (free devices of a pool, a job's usage, duration,
expected end and attained-service tier); a stage changes it only through events
(:func:`._events.emit`), apart from the scratch a walk keeps (``pctx``, ``held_hosts``,
``reservations``, ``refusals``) and the placement requests it caches for the events.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accel.scheduler import ClusterState, DeviceSelector, InvalidRequestError, Request, SchedulerStateError

from ._estimators import DeclaredModel, DurationModel
from ._freeindex import FreeIndex
from ._journal import Journal
from ._meter import Meter
from ._placement import IN_HOST_LEVELS, PlacementRefusal, QueuePlacer
from ._profile import Profile
from ._records import Job, PreemptCheck, Reservation, WaitingJobs
from ._tenants import Admission, TenantBook, Usage
from ._types import InClassOrder, JobSpec, JobState, Policy

__all__ = ["EngineState", "IntArray"]

IntArray = np.ndarray[Any, np.dtype[np.int64]]

_ACTIVE = frozenset((JobState.RUNNING, JobState.PREEMPTING))  # states holding devices (``Job.active``)


@dataclass(slots=True, eq=False)
class EngineState:
    """The queueing engine's state (see the module docstring); built by :meth:`build`."""

    cluster: ClusterState
    policy: Policy
    durations: DurationModel
    placer: QueuePlacer  # queued work's filter -> score -> reserve stages (:mod:`._placement`)
    book: TenantBook
    meter: Meter
    journal: Journal
    # pools: each device model is one; ``slot_pool[h, s]`` is the pool index of a slot (-1: none)
    pools: tuple[str, ...]
    pool_index: dict[str, int]
    slot_pool: IntArray
    dev_mem: dict[str, int]  # pool -> memory of one of its devices
    host_free: IntArray  # [host, pool] fully free usable devices
    host_usable: IntArray  # [host, pool] usable devices
    pool_totals: list[int] | None = None  # per-pool sums of host_free (None: recount)
    jobs: dict[str, Job] = field(default_factory=dict)
    now: float = -math.inf
    seq: int = 0
    replaying: bool = False  # recovery: events are applied, not journaled again
    reservations: dict[str, Reservation] = field(default_factory=dict)
    refusals: dict[str, PlacementRefusal] = field(default_factory=dict)  # job -> why the pipeline refused it last
    # indexes kept by the event handlers: jobs holding devices, jobs waiting in the queue
    active: dict[str, Job] = field(default_factory=dict)
    waiting: WaitingJobs = field(default_factory=WaitingJobs)
    selectors: dict[str, DeviceSelector] = field(default_factory=dict)
    req_cache: dict[tuple[str, int], Request] = field(default_factory=dict)  # built by a placement, bound by its event
    ratios: deque[float] = field(default_factory=deque)  # estimate calibration: actual / estimated waits
    pctx: PreemptCheck | None = None  # this cycle's preemption pre-check (built when first needed)
    # The queue order kept between calls when every class orders FIFO (see ``_order``):
    # (key, job) sorted by key, and each listed job's key.
    order: list[tuple[tuple[float, ...], Job]] = field(default_factory=list)
    order_keys: dict[str, tuple[float, ...]] = field(default_factory=dict)
    order_kept: bool = False
    # each waiting job's (class level, tier), and how many waiting jobs have each
    wait_tier: dict[str, tuple[int, int]] = field(default_factory=dict)
    tier_count: dict[tuple[int, int], int] = field(default_factory=dict)
    # the exact plan an estimate kept for the next one (``_walk.PlanCache``; scratch, never journaled)
    plan_cache: Any = None
    # preemptors whose victims are winding down -> (pool, hosts) kept for them (one host for a
    # one-host job, a gang's hosts when its victims were chosen with the pipeline): other jobs
    # are not placed there (set by each walk from the journaled ``preempting`` events)
    held_hosts: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    guard: bool = False  # the starvation guard is on
    # hosts by ``host_free`` count per pool (``_freeindex``): every writer of ``host_free`` files
    # the (host, pool) it moved (``refresh_host`` and the ``placed`` handler)
    free_index: FreeIndex | None = None

    @classmethod
    def build(cls, cluster: ClusterState, policy: Policy, durations: DurationModel, placer: QueuePlacer,
              book: TenantBook, meter: Meter, journal: Journal) -> EngineState:
        """A fresh state over ``cluster``: its pools and free-device counts, no jobs."""
        names = sorted({c.model or "unknown" for c in cluster.classes})
        pool_index = {p: i for i, p in enumerate(names)}
        cls_pool = np.array([pool_index[c.model or "unknown"] for c in cluster.classes] or [0], dtype=np.int64)
        slot_pool = np.where(cluster.dev_class >= 0, cls_pool[np.maximum(cluster.dev_class, 0)], -1)
        dev_mem: dict[str, int] = {}
        for c in cluster.classes:
            dev_mem.setdefault(c.model or "unknown", c.memory_bytes)
        st = cls(cluster, policy, durations, placer, book, meter, journal, tuple(names), pool_index, slot_pool,
                 dev_mem, np.zeros((cluster.n_hosts, len(names)), dtype=np.int64),
                 np.zeros((cluster.n_hosts, len(names)), dtype=np.int64),
                 ratios=deque(maxlen=max(1, policy.calibrate_window)),
                 order_kept=all(c.order == InClassOrder.FIFO
                                or (c.order == InClassOrder.SHORTEST and type(durations) is DeclaredModel)
                                for c in policy.classes),
                 guard=policy.promote_after_wait_s is not None or policy.promote_after_wait_ratio is not None)
        for h in range(cluster.n_hosts):
            st.refresh_host(h)
        st.free_index = FreeIndex(st.host_free, cluster.dev_cap.shape[1] if cluster.n_hosts else 0)
        return st

    # -- pools -----------------------------------------------------------------------------------
    def refresh_host(self, h: int) -> None:
        """Count host ``h``'s free and usable devices per pool afresh."""
        st = self.cluster
        pools = self.slot_pool[h]
        usable = st.dev_usable[h] & (pools >= 0)
        free = usable & (st.dev_left[h] == st.dev_cap[h])
        n = len(self.pools)
        row = np.bincount(pools[free], minlength=n)[:n]
        old = self.host_free[h]
        moved = (row != old).nonzero()[0].tolist()
        totals = self.pool_totals
        if totals is not None:  # kept in step with the moved counts, not recounted
            for p in moved:
                totals[p] += int(row[p]) - int(old[p])
        self.host_free[h] = row
        self.host_usable[h] = np.bincount(pools[usable], minlength=n)[:n]
        index = self.free_index
        if index is not None:
            for p in moved:
                index.moved(h, p)

    def pool_free(self, pool: str) -> int:
        """Fully free usable devices of ``pool``."""
        # per-pool totals kept until ``host_free`` changes (refresh_host, a placement): a walk
        # asks for them at every queued job it examines
        tot = self.pool_totals
        if tot is None:
            tot = self.pool_totals = [int(x) for x in self.host_free.sum(axis=0)]
        return tot[self.pool_index[pool]]

    def pool_capacity(self, pool: str) -> int:
        """Usable devices of ``pool``."""
        return int(self.host_usable[:, self.pool_index[pool]].sum())

    def pools_for(self, spec: JobSpec) -> list[str]:
        """The pools a job may run in (its own, or every pool)."""
        if spec.pool:
            if spec.pool not in self.pool_index:
                raise InvalidRequestError(f"job {spec.id}: no pool {spec.pool!r}; pools: {list(self.pools)}",
                                          field="pool")
            return [spec.pool]
        return list(self.pools)

    def advance(self, now: float) -> None:
        """Move the engine's clock to ``now`` (never backwards)."""
        if now < self.now - 1e-9:
            raise SchedulerStateError(f"time went backwards: {now} < {self.now}")
        self.now = max(self.now, float(now))

    # -- what a job takes ------------------------------------------------------------------------
    def usage(self, job: Job) -> Usage:
        """What ``job`` counts against its tenant's quota where it runs (or would by default)."""
        spec = job.spec
        pool = job.pool or (spec.pool or (self.pools[0] if self.pools else ""))
        mem = spec.share.memory_bytes if spec.share is not None else self.dev_mem.get(pool, 0) * spec.devices
        return Usage(spec.devices if spec.share is None else 0, mem, spec.compute_milli)

    def need(self, job: Job, pool: str) -> Usage:
        """What ``job`` would count against its tenant's quota in ``pool``."""
        spec = job.spec
        mem = spec.share.memory_bytes if spec.share is not None else self.dev_mem.get(pool, 0) * spec.devices
        return Usage(spec.devices if spec.share is None else 0, mem, spec.compute_milli)

    def admit_planned(self, job: Job, pool: str, plan_usage: dict[tuple[str, str], Usage]) -> Admission:
        """The tenant book's verdict on ``job`` in ``pool``, counting what a walk already planned."""
        extra = plan_usage.get((job.spec.tenant, pool))
        if not extra:
            return self.book.admit(job.spec.tenant, pool, self.need(job, pool))
        return self.book.admit(job.spec.tenant, pool, self.need(job, pool).plus(extra))

    def chunk_request(self, spec: JobSpec, pool: str, i: int, k: int, n_chunks: int) -> Request:
        """The pipeline's request for chunk ``i`` (``k`` devices) of a job split in ``n_chunks``."""
        sel = self.selectors.get(pool)
        if sel is None:
            # pool "unknown" holds the devices without a model name (see build)
            sel = self.selectors[pool] = DeviceSelector(models=(pool,) if pool != "unknown" else ("", "unknown"))
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

    @staticmethod
    def one_host(spec: JobSpec) -> bool:
        """Must the pipeline put all of ``spec`` on one host?  ``same_host``, a share, or a
        required in-host topology level (link domain, PCIe switch, NUMA node, host)."""
        topo = spec.topology
        return (spec.same_host or spec.share is not None
                or (topo is not None and topo.required and topo.level in IN_HOST_LEVELS))

    # -- time ------------------------------------------------------------------------------------
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

    def running(self) -> list[Job]:
        """Jobs holding devices, in submit order."""
        return sorted(self.active.values(), key=lambda j: j.seq)

    def profiles(self, now: float) -> dict[str, Profile]:
        """Free devices per pool over time: now, and as each active job's expected end frees them."""
        if type(self.durations) is DeclaredModel:
            return self._declared_profiles(now)
        return self.loop_profiles(now)

    def loop_profiles(self, now: float) -> dict[str, Profile]:
        """:meth:`profiles` job by job, for any duration model."""
        rel: dict[str, list[tuple[float, int]]] = {p: [] for p in self.pools}
        for j in self.active.values():
            if j.pool is not None:
                rel[j.pool].append((self.expected_end(j, now), j.spec.devices))
        return {p: Profile(now, self.pool_free(p), rel[p]) for p in self.pools}

    def _declared_profiles(self, now: float) -> dict[str, Profile]:
        """:meth:`profiles` under the :class:`DeclaredModel` (the default), as array arithmetic:
        each job's end is :meth:`expected_end`'s, operation for operation in float64 (its stop
        time while winding down; else declared estimate - work done now, ``overrun_margin_s``
        once past it, at least 1 s for a job that started this instant)."""
        jobs = [j for j in self.active.values() if j.pool is not None]
        n = len(jobs)
        pool_ix = self.pool_index
        pix = np.fromiter((pool_ix[j.pool] for j in jobs), dtype=np.int64, count=n)  # type: ignore[index]
        devs = np.fromiter((j.spec.devices for j in jobs), dtype=np.int64, count=n)
        est = np.fromiter((j.spec.estimate_s for j in jobs), dtype=np.float64, count=n)
        work = np.fromiter((j.work_s for j in jobs), dtype=np.float64, count=n)
        # Job.progress: the current run segment counts only while it holds devices with a start
        started = np.fromiter((j.started_at if j.started_at is not None and j.state in _ACTIVE else math.nan
                               for j in jobs), dtype=np.float64, count=n)
        stop = np.fromiter((j.stop_at if j.state == JobState.PREEMPTING and j.stop_at is not None else math.nan
                            for j in jobs), dtype=np.float64, count=n)
        running = ~np.isnan(started)
        done = np.where(running, work + np.maximum(0.0, now - np.where(running, started, 0.0)), work)
        left = est - done
        left = np.where(left > 0, left, self.policy.overrun_margin_s)
        ends = np.where(done == work, now + np.maximum(1.0, left), now + left)
        ends = np.where(np.isnan(stop), ends, stop)
        return {p: Profile.from_releases(now, self.pool_free(p), ends[pix == i], devs[pix == i])
                for i, p in enumerate(self.pools)}

    # -- attained-service tiers (Policy.demote_after_device_s) -----------------------------------
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
