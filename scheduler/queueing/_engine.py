"""The queueing engine: admission, ordering, preemption, backfill, placement, recovery.

:class:`QueueingScheduler` sits on top of part 1 (a :class:`accel.scheduler.ClusterState` and a
:class:`accel.scheduler.Scheduler`).  It decides *when* and in which pool; part 1's filter, score
and reserve stages decide *where* (hosts and slots, see ``_placement``).  All mutation goes through
:meth:`QueueingScheduler._emit`, which appends the event to the journal and applies it, and a
rebuild (:meth:`QueueingScheduler.recover`) applies the same events again: live state and
rebuilt state cannot drift apart.

Capacity model: each device model is a *pool*; backfill and estimates count whole free
devices per pool (a fractional share takes a whole free device there, which is conservative).
A job that is not ``same_host`` is split into per-host chunks, consolidated on as few hosts
as possible and placed all-or-nothing.  When the counts say a job fits but the pipeline
refuses it (topology, CPU, memory, filters), it waits with reason ``placement``.

Attained-service tiers (``Policy.demote_after_device_s``): the queue is ordered by class, then
tier, and :meth:`QueueingScheduler._walk_tiered` plans each job on the free-device view of its
own class and tier, where its class's later-tier jobs are preemptible and the others hold their
devices only until they would leave that tier; a cycle is due whenever a running job leaves
its tier (:meth:`QueueingScheduler.next_wakeup`).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from accel.errors import SchedulerError
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
    Share,
    host_spec_from_inventory,
)

from ._estimators import DeclaredModel, DurationModel, capped_remaining
from ._journal import Event, Journal, JournalError
from ._meter import Bill, Meter, PriceTable, Segment
from ._placement import PlacementRefusal, QueuePlacer
from ._profile import Profile
from ._tenants import Admission, Tenant, TenantBook, Usage
from ._types import (
    BackfillMode,
    InClassOrder,
    JobSpec,
    JobState,
    Policy,
    PreemptMode,
    PriorityClass,
    WaitReason,
    topology_from_dict,
    topology_to_dict,
)

__all__ = ["CycleResult", "Job", "QueueingScheduler", "WaitEstimate"]

IntArray = npt.NDArray[np.int64]


@dataclass(slots=True, eq=False)  # a mutable record: equal only to itself
class Job:
    """Mutable record of one job (the engine owns it; read it, do not change it)."""

    spec: JobSpec
    klass: PriorityClass
    seq: int
    submitted_at: float
    state: JobState = JobState.QUEUED
    pool: str | None = None
    allocs: list[Allocation] = field(default_factory=list)
    started_at: float | None = None
    first_started_at: float | None = None
    ended_at: float | None = None
    work_s: float = 0.0
    lost_s: float = 0.0
    attempts: int = 0
    borrowing: bool = False
    stop_at: float | None = None
    reason: str = ""
    wait: WaitReason = WaitReason.NONE
    estimate_at_submit: float | None = None
    tier_seen: int = 0  # the attained-service tier last journaled (``demoted`` events)
    preempted_for: str | None = None  # while in its grace period: the job it was preempted for
    # starvation guard (Policy.promote_after_wait_*): when it last entered the queue, how long
    # its last run lasted, whether it waits promoted, and the attained service its tiers count from
    queued_at: float = 0.0
    last_run_s: float = 0.0
    promoted: bool = False
    service_base: float = 0.0

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def active(self) -> bool:
        """Holding devices (running, or winding down after preemption)."""
        return self.state in (JobState.RUNNING, JobState.PREEMPTING)

    def progress(self, now: float) -> float:
        """Work done so far (seconds at full speed), counting the current run segment."""
        if self.active and self.started_at is not None:
            return self.work_s + max(0.0, now - self.started_at)
        return self.work_s

    def remaining_estimate(self) -> float:
        """Declared estimate minus the work already kept (never below one second)."""
        return max(1.0, self.spec.estimate_s - self.work_s)

    def checkpoint_at(self, now: float) -> float:
        """Work saved by the last periodic checkpoint."""
        ci = self.spec.checkpoint_interval_s
        done = self.progress(now)
        if ci is None:
            return 0.0
        return math.floor(done / ci + 1e-9) * ci


@dataclass(frozen=True, slots=True)
class WaitEstimate:
    """When a queued job would start in one pool, and why it waits."""

    pool: str
    start_at: float
    wait_s: float
    reason: WaitReason
    price_per_hour: float

    def describe(self) -> str:
        if self.reason == WaitReason.PLACEMENT:
            when = "not now: enough devices are free but the placement pipeline refused it"
        elif not math.isfinite(self.wait_s):
            when = "not with the current capacity"
        elif self.wait_s < 30:
            when = "now"
        elif self.wait_s < 5400:
            when = f"about {round(self.wait_s / 60)} minutes"
        else:
            when = f"about {self.wait_s / 3600:.1f} hours"
        why = "" if self.reason == WaitReason.NONE else f" ({self.reason.value})"
        return f"{self.pool} pool: {when}{why}, {self.price_per_hour:.2f}/h"


@dataclass(slots=True)
class CycleResult:
    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    reservations: dict[str, float] = field(default_factory=dict)


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
        # (``workload``: the target pod mix the FGD scorers need; ``filters``: extra filter stages)
        self.placer = Scheduler(cluster, scorer, workload=workload, filters=filters)
        self._queue_placer = QueuePlacer(self.placer)
        self.refusals: dict[str, PlacementRefusal] = {}  # job -> why the pipeline refused it last
        self.book = TenantBook(tenants, half_life_s=self.policy.fair_half_life_s)
        self.meter = Meter(prices)
        self.journal = journal if isinstance(journal, Journal) else Journal(journal or ":memory:")
        self.jobs: dict[str, Job] = {}
        self.now = -math.inf
        self._seq = 0
        self._replaying = False
        self.reservations: dict[str, tuple[str, float, int]] = {}
        # indexes kept by the event handlers: jobs holding devices, jobs waiting in the queue
        self._active: dict[str, Job] = {}
        self._selectors: dict[str, DeviceSelector] = {}
        self._req_cache: dict[tuple[str, int], Request] = {}  # requests built by _place, used by _on_placed
        self._ratios: deque[float] = deque(maxlen=max(1, self.policy.calibrate_window))
        # per-cycle preemption pre-check: lowest preemptible level, any borrower, failed shapes
        self._pctx: tuple[int | None, bool, set[tuple[int, str, int]]] | None = None
        self._waiting: dict[str, Job] = {}
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

    def pool_free(self, pool: str) -> int:
        """Fully free usable devices of ``pool``."""
        return int(self.host_free[:, self._pool_index[pool]].sum())

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
        self._apply(Event(0, t, job, kind, reason, data))

    def _advance(self, now: float) -> None:
        if now < self.now - 1e-9:
            raise SchedulerStateError(f"time went backwards: {now} < {self.now}")
        self.now = max(self.now, float(now))

    # -- applying events (live and replay) ---------------------------------------------------------------
    def _apply(self, ev: Event) -> None:
        self._advance(ev.t)
        handler = getattr(self, "_on_" + ev.kind, None)
        if handler is None:
            raise SchedulerStateError(f"journal has an unknown event kind {ev.kind!r}")
        handler(ev)

    def _on_submitted(self, ev: Event) -> None:
        d = ev.data["spec"]
        share = Share(**d["share"]) if d.get("share") else None
        labels = tuple(tuple(x) for x in d.get("labels", ()))
        spec = JobSpec(**{**d, "share": share, "labels": labels, "topology": topology_from_dict(d.get("topology"))})
        self._seq += 1
        job = Job(spec, self.policy.klass(spec.priority_class), self._seq, ev.t)
        job.estimate_at_submit = ev.data.get("estimate")
        job.queued_at = ev.t
        self.jobs[spec.id] = job
        self._waiting[spec.id] = job

    def _on_admitted(self, ev: Event) -> None:
        pass  # informational: the quota check passed (placement follows in the same call)

    def _on_promoted(self, ev: Event) -> None:
        # starvation guard: first in its class while it waits, and its tiers count afresh
        job = self.jobs[str(ev.job)]
        job.promoted = True
        job.service_base = float(ev.data["base_device_s"])
        job.tier_seen = 0

    def _on_demoted(self, ev: Event) -> None:
        # informational: the tier is derived from run time; this records when the scheduler saw it
        self.jobs[str(ev.job)].tier_seen = int(ev.data["tier"])

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
        job.allocs = allocs
        job.pool = pool
        job.state = JobState.RUNNING
        job.promoted = False  # it got what it waited for; its tiers keep counting from the base
        self._waiting.pop(job.id, None)
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

    def _on_preempting(self, ev: Event) -> None:
        job = self.jobs[str(ev.job)]
        job.state = JobState.PREEMPTING
        job.stop_at = float(ev.data["stop_at"])
        job.reason = ev.reason
        for_job = ev.data.get("for")
        job.preempted_for = str(for_job) if for_job is not None else None

    def _stop(self, job: Job, t: float) -> None:
        """Release a job's devices and close its meter segments."""
        for a in job.allocs:
            self.state.release(a)
            self._refresh_host(a.host)
        if job.pool is not None:
            self.book.add(job.spec.tenant, job.pool, self._usage(job), t, sign=-1)
        self.meter.stop(job.id, t)
        job.allocs = []
        job.preempted_for = None
        self._active.pop(job.id, None)

    def _on_preempted(self, ev: Event) -> None:
        job = self.jobs[str(ev.job)]
        progress = job.progress(ev.t)
        job.last_run_s = ev.t - job.started_at if job.started_at is not None else 0.0
        job.queued_at = ev.t
        keep = float(ev.data["keep"])
        self._stop(job, ev.t)
        job.lost_s += max(0.0, progress - keep)
        job.work_s = keep
        job.state = JobState.SUSPENDED if ev.data.get("mode") == PreemptMode.SUSPEND.value else JobState.QUEUED
        self._waiting[job.id] = job
        job.started_at = None
        job.stop_at = None
        job.pool = None
        job.reason = ev.reason

    def _on_failed(self, ev: Event) -> None:
        job = self.jobs[str(ev.job)]
        progress = job.progress(ev.t)
        if job.started_at is not None:
            job.last_run_s = ev.t - job.started_at
        if job.active:
            self._stop(job, ev.t)
        if ev.data.get("requeue"):
            job.queued_at = ev.t
            keep = float(ev.data["keep"])
            job.lost_s += max(0.0, progress - keep)
            job.work_s = keep
            job.state = JobState.QUEUED
            self._waiting[job.id] = job
        else:
            job.work_s = progress
            job.state = JobState.FAILED
            job.ended_at = ev.t
            self._waiting.pop(job.id, None)
        job.started_at = None
        job.pool = None
        job.reason = ev.reason

    def _on_finished(self, ev: Event) -> None:
        job = self.jobs[str(ev.job)]
        progress = job.progress(ev.t)
        if job.active:
            self._stop(job, ev.t)
        job.work_s = progress
        job.state = JobState.FINISHED
        job.ended_at = ev.t
        self.durations.observe((job.spec.tenant, job.spec.devices), progress)
        self._waiting.pop(job.id, None)
        job.pool = None
        job.reason = ev.reason

    def _on_cancelled(self, ev: Event) -> None:
        job = self.jobs[str(ev.job)]
        if job.active:
            self._stop(job, ev.t)
        job.state = JobState.CANCELLED
        job.ended_at = ev.t
        self._waiting.pop(job.id, None)
        job.reason = ev.reason
        self.reservations.pop(job.id, None)

    def _on_health(self, ev: Event) -> None:
        h = self.state.host_index[str(ev.data["host"])]
        slot = int(ev.data["slot"])
        self.state.set_device_health(h, slot, usable=bool(ev.data["usable"]), degraded=bool(ev.data.get("degraded")))
        self._refresh_host(h)

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

    def queue(self, now: float | None = None) -> list[Job]:
        """Queued (and suspended) jobs in the order the next cycle examines them."""
        t = self.now if now is None else now
        return sorted(self._waiting.values(), key=lambda j: self.order_key(j, t))

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
        data: dict[str, Any] = {"spec": _spec_dict(spec)}
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
        self._advance(now)
        wanted: dict[str, tuple[bool, bool]] = {}
        if isinstance(snapshot, Mapping):
            wanted = {str(k): (bool(v), False) for k, v in snapshot.items()}
        else:
            for inv in snapshot:
                spec = host_spec_from_inventory(inv)
                for dev in spec.devices:
                    wanted[dev.id] = (dev.healthy, dev.degraded)
        where: dict[str, tuple[int, int]] = {}
        for h, ids in enumerate(self.state.dev_ids):
            for s, did in enumerate(ids):
                where[did] = (h, s)
        hit: list[str] = []
        with self.batch():
            for did, (usable, degraded) in sorted(wanted.items()):
                if did not in where:
                    continue
                h, s = where[did]
                if bool(self.state.dev_usable[h, s]) == usable and bool(self.state.dev_degraded[h, s]) == degraded:
                    continue
                if not usable:
                    for job in sorted(self.running(), key=lambda j: j.seq):
                        if any(a.host == h and s in a.devices for a in job.allocs):
                            keep = job.checkpoint_at(now)
                            self._emit(now, job.id, "failed", f"device {did} unhealthy: resume from checkpoint",
                                       {"requeue": True, "keep": keep, "device": did})
                            hit.append(job.id)
                self._emit(now, None, "health", f"device {did} {'usable' if usable else 'unusable'}",
                           {"host": self.state.host_names[h], "slot": s, "usable": usable, "degraded": degraded,
                            "device": did})
        return hit

    # -- placement --------------------------------------------------------------------------------------
    def _place(self, job: Job, pool: str) -> list[tuple[str, list[int]]] | PlacementRefusal:
        """Hosts and slots through the placement pipeline (nothing bound; see ``_placement``).

        The chunk requests are kept in ``_req_cache`` for ``_on_placed`` to bind."""
        spec = job.spec

        def make(i: int, k: int, n_chunks: int) -> Request:
            return self._chunk_request(spec, pool, i, k, n_chunks)

        got = self._queue_placer.plan(make, spec.devices, split=not spec.same_host and spec.share is None,
                                      topology=spec.topology, pool_free=self.host_free[:, self._pool_index[pool]])
        if isinstance(got, PlacementRefusal):
            return got
        out: list[tuple[str, list[int]]] = []
        for i, chunk in enumerate(got.chunks):
            self._req_cache[(job.id, i)] = chunk.request
            out.append((self.state.host_names[chunk.host], [int(x) for x in chunk.slots]))
        return out

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
                    self._finish_preemption(job, now)
            if self._guard:
                self._promote_starving(now)
            self._walk(now, res, commit=True)
        return res

    # -- starvation guard (Policy.promote_after_wait_s / promote_after_wait_ratio) ----------------------
    def promote_at(self, job: Job) -> float:
        """When the starvation guard promotes a waiting job (``inf``: never, or already promoted).

        A function of journaled state only: when the job last entered the queue and how long its
        last run lasted; the guard is Tiresias' STARVELIMIT (ratio x last run) and/or an absolute
        wait, whichever comes first.  A job that never ran is promoted only by the absolute wait."""
        if job.promoted or job.state not in (JobState.QUEUED, JobState.SUSPENDED):
            return math.inf
        pol = self.policy
        at = math.inf
        if pol.promote_after_wait_s is not None:
            at = job.queued_at + pol.promote_after_wait_s
        if pol.promote_after_wait_ratio is not None and job.last_run_s > 0:
            at = min(at, job.queued_at + pol.promote_after_wait_ratio * job.last_run_s)
        return at

    def _promote_starving(self, now: float) -> None:
        """Journal a ``promoted`` event for every waiting job whose promotion time has come."""
        due = [j for j in self._waiting.values() if self.promote_at(j) <= now + 1e-9]
        for job in sorted(due, key=lambda j: j.seq):
            waited = now - job.queued_at
            self._emit(now, job.id, "promoted",
                       f"waited {waited:.0f} s (last run {job.last_run_s:.0f} s): first in its class",
                       {"waited_s": waited, "base_device_s": self.attained(job, now)})

    def _journal_demotion(self, job: Job, now: float) -> None:
        """A ``demoted`` event when a job's tier change first matters (it is about to be preempted
        for a job of an earlier tier), so ``accel sched history`` shows why it went behind.  Not
        journaled on every crossing: a storm of them would cost more than the cycle."""
        q = self.tier(job, now)
        if q > job.tier_seen:
            th = self.policy.demote_after_device_s
            att = self.attained(job, now)
            self._emit(now, job.id, "demoted",
                       f"tier {job.tier_seen} -> {q}: {att:.0f} device-s of service passed {th[q - 1]:g}",
                       {"tier": q, "attained_device_s": att})

    def _finish_preemption(self, job: Job, now: float) -> None:
        mode = self.policy.preempt_mode
        if mode == PreemptMode.REQUEUE:
            keep = 0.0
        elif mode == PreemptMode.SUSPEND:
            keep = job.progress(now)
        else:
            keep = job.checkpoint_at(now)
        keep = max(0.0, keep - self.policy.preempt_overhead_s)  # saving and restoring its state costs run time
        self._emit(now, job.id, "preempted", job.reason or "preempted", {"mode": mode.value, "keep": keep})

    def _walk(self, now: float, res: CycleResult, *, commit: bool, target: str | None = None,
              depth: int | None = None) -> tuple[dict[str, Profile], dict[str, WaitEstimate]]:
        """Walk the queue in order.  ``commit=False`` only plans (for estimates).

        Returns the profiles after the walk and, in planning mode, the target's estimates.
        """
        if self.policy.demote_after_device_s:
            return self._walk_tiered(now, res, commit=commit, target=target, depth=depth)
        pol = self.policy
        profiles = self._profiles(now)
        self._pctx = None
        blocked_pools: dict[str, float] = {}  # strict order (no backfill): pool -> no start before
        easy_reserved: set[str] = set()
        reservations = 0
        tests = 0
        out: dict[str, WaitEstimate] = {}
        planned_work: dict[str, float] = {p: 0.0 for p in self.pools}
        # planning mode: quota usage of jobs started in the plan
        plan_usage: dict[tuple[str, str], Usage] = {}
        # preemptors whose victims are winding down: what is freed is held for them (below)
        holds = self._grace_holds() if pol.grace_s > 0 else {}
        if commit:
            self.reservations.clear()
        exact = pol.plan_depth if depth is None else depth
        for job in self.queue(now):
            if commit and pol.max_tests is not None and tests >= pol.max_tests:
                break
            tests += 1
            spec = job.spec
            is_target = job.id == target
            d = self.duration(job)
            pools = self._pools_for(spec)
            if not commit and not is_target and reservations >= exact:
                # beyond the exact depth: fluid approximation of the work ahead
                p = pools[0] if len(pools) == 1 else max(pools, key=lambda q: profiles[q].free_now)
                planned_work[p] += d * spec.devices
                continue
            adm_by_pool: dict[str, Admission] = {}
            for p in pools:
                adm_by_pool[p] = self._admit_planned(job, p, plan_usage)
            if is_target:
                for p in self.pools:
                    out[p] = self._estimate_in(job, p, profiles[p], now, planned_work[p], adm_by_pool.get(p)
                                               or self._admit_planned(job, p, plan_usage), blocked_pools)
                return profiles, out
            admissible = [p for p in pools if adm_by_pool[p].ok]
            held = holds.get(job.id)
            if not admissible:
                job.wait = WaitReason.QUOTA
                if held is not None:
                    self._hold_plain(job, held, d, profiles, plan_usage, blocked_pools, now, res, commit=commit)
                    reservations += 1
                    easy_reserved.add(held[0])
                    continue
                # a preempting class may still free its own tenant's quota from lower jobs
                if commit and job.klass.preempts and self._may_preempt(job):
                    self._try_preempt(job, pools, profiles, now, res)
                continue
            started = False
            refused: list[str] = []  # pools where the counts said "fits now" and the pipeline said no
            for p in admissible:
                if p in blocked_pools:
                    continue
                prof = profiles[p]
                n = spec.devices
                if prof.fits(now, d, n):
                    ok = self._start(job, p, now, adm_by_pool[p], "fits now") if commit else True
                    if not ok:
                        refused.append(p)
                    if ok:
                        prof.add(now, now + d, n)
                        if commit:
                            res.started.append(job.id)
                        else:
                            key = (spec.tenant, p)
                            plan_usage[key] = plan_usage.get(key, Usage()).plus(self._need(job, p))
                        started = True
                        break
            if started:
                continue
            if refused and held is None:
                # wait reason set by _start; no bogus "now" reservation where it was refused
                admissible = [p for p in admissible if p not in refused]
                if not admissible:
                    continue
            if held is not None:
                # its victims are still winding down: no new victims for the same need, and what
                # they free stays held for it
                job.wait = (WaitReason.RESERVATION if profiles[held[0]].free_now >= spec.devices
                            else WaitReason.CAPACITY)
                self._hold_plain(job, held, d, profiles, plan_usage, blocked_pools, now, res, commit=commit)
                reservations += 1
                easy_reserved.add(held[0])
                continue
            # blocked: preempt, or hold a reservation
            if commit and self._may_preempt(job) and self._try_preempt(job, admissible, profiles, now, res):
                continue
            best_p, best_t = admissible[0], math.inf
            if commit and pol.backfill == BackfillMode.EASY and all(p in easy_reserved for p in admissible):
                # no reservation will be made: only say why it waits
                free = max(profiles[p].free_now for p in admissible)
                job.wait = WaitReason.RESERVATION if free >= spec.devices else WaitReason.CAPACITY
                continue
            if (commit and pol.backfill == BackfillMode.CONSERVATIVE and reservations >= pol.plan_depth):
                job.wait = WaitReason.PRIORITY
                continue
            for p in admissible:
                t = profiles[p].earliest(spec.devices, d, after=blocked_pools.get(p))
                if t < best_t:
                    best_p, best_t = p, t
            job.wait = (WaitReason.RESERVATION if profiles[best_p].free_now >= spec.devices
                        else WaitReason.CAPACITY)
            if pol.backfill == BackfillMode.NONE:
                for p in admissible:
                    blocked_pools[p] = max(blocked_pools.get(p, now), best_t if p == best_p else now)
                if not commit and math.isfinite(best_t):
                    profiles[best_p].add(best_t, best_t + d, spec.devices)
                reservations += 1
                if commit and len(blocked_pools) == len(self.pools):
                    break  # strict order and every pool blocked: nothing else can start
                continue
            reserve = (not commit or (pol.backfill == BackfillMode.CONSERVATIVE and reservations < pol.plan_depth)
                       or (pol.backfill == BackfillMode.EASY and best_p not in easy_reserved))
            if reserve and math.isfinite(best_t):
                profiles[best_p].add(best_t, best_t + d, spec.devices)
                reservations += 1
                easy_reserved.add(best_p)
                if commit:
                    self.reservations[job.id] = (best_p, best_t, spec.devices)
                    res.reservations[job.id] = best_t
        return profiles, out

    def _hold_plain(self, job: Job, hold: tuple[str, float, Usage], d: float, profiles: dict[str, Profile],
                    plan_usage: dict[tuple[str, str], Usage], blocked_pools: dict[str, float], now: float,
                    res: CycleResult, *, commit: bool) -> None:
        """A preemptor whose victims are in their grace period keeps what they free: its quota is
        claimed for the rest of the walk (later jobs of its tenant are admitted around it) and it
        holds a reservation from the end of the grace period (backfill may use the devices only
        if it ends by then), whatever the backfill mode's reservation limits."""
        pool, end, _freed = hold
        n = job.spec.devices
        self._claim(job, hold, plan_usage)
        t = profiles[pool].earliest(n, d, after=max(end, blocked_pools.get(pool, now)))
        if self.policy.backfill == BackfillMode.NONE:
            blocked_pools[pool] = max(blocked_pools.get(pool, now), t)
        if math.isfinite(t):
            profiles[pool].add(t, t + d, n)
            if commit:
                self.reservations[job.id] = (pool, t, n)
                res.reservations[job.id] = t

    def _admit_planned(self, job: Job, pool: str, plan_usage: Mapping[tuple[str, str], Usage]) -> Admission:
        extra = plan_usage.get((job.spec.tenant, pool))
        if not extra:
            return self.book.admit(job.spec.tenant, pool, self._need(job, pool))
        return self.book.admit(job.spec.tenant, pool, self._need(job, pool).plus(extra))

    def _estimate_in(self, job: Job, pool: str, prof: Profile, now: float, work_ahead: float,
                     adm: Admission, blocked: Mapping[str, float], *, hold: float | None = None,
                     alone_prof: Profile | None = None, fit: _TierFit | None = None) -> WaitEstimate:
        n, d = job.spec.devices, (self.duration(job) if hold is None else hold)
        price = self.meter.prices.device_hour(pool) * job.spec.compute_milli / 1000.0
        if n > self.pool_capacity(pool):
            return WaitEstimate(pool, math.inf, math.inf, WaitReason.CAPACITY, price)
        after = prof.area_time(work_ahead, now) if work_ahead > 0 else now
        after = max(after, blocked.get(pool, now))
        t = prof.earliest(n, d, after=after) if fit is None else fit.earliest(n, after=after)
        reason = WaitReason.NONE
        if not adm.ok:
            reason = WaitReason.QUOTA
            t = max(t, self._quota_frees_at(job, pool, now))
        elif t > now + 1e-9:
            # alone on the running jobs it would start at ``alone``: later means jobs ahead of it
            alone = (alone_prof if alone_prof is not None else self._profiles(now)[pool]).earliest(n, d)
            if alone >= t - 1e-9:
                reason = WaitReason.CAPACITY
            elif prof.free_now >= n:
                reason = WaitReason.RESERVATION  # devices are free now but held for jobs ahead
            else:
                reason = WaitReason.PRIORITY
        return WaitEstimate(pool, t, t - now, reason, price)

    def _quota_frees_at(self, job: Job, pool: str, now: float) -> float:
        """Earliest expected end of the tenant's own running jobs after which its quota admits ``job``."""
        tenant = job.spec.tenant
        mine = sorted((self.expected_end(j, now), j.seq, j) for j in self.running() if j.spec.tenant == tenant)
        freed: dict[str, Usage] = {}
        for k, (end, _seq, j) in enumerate(mine):
            for key in (j.pool or pool, "*"):
                freed[key] = freed.get(key, Usage()).plus(self._usage(j))
            if self.book.admit(tenant, pool, self._need(job, pool), minus=freed, running_minus=k + 1).ok:
                return end
        return math.inf

    # -- preemption -------------------------------------------------------------------------------------
    def _grace_holds(self) -> dict[str, tuple[str, float, Usage]]:
        """Queued preemptors whose victims are still in their grace period: the pool the victims
        free, when the last of them stops, and the quota of the preemptor's own tenant they give
        back.  Derived from the victims' ``preempting`` events, so a rebuilt engine sees the same."""
        out: dict[str, tuple[str, float, Usage]] = {}
        for v in self._active.values():
            pid = v.preempted_for
            if v.state != JobState.PREEMPTING or pid is None or v.pool is None or v.stop_at is None:
                continue
            p = self._waiting.get(pid)
            if p is None:
                continue  # it started some other way, or ended: nothing to hold
            pool, end, freed = out.get(pid, (v.pool, v.stop_at, Usage()))
            if v.pool == pool and v.spec.tenant == p.spec.tenant:
                freed = freed.plus(self._usage(v))
            out[pid] = (pool, max(end, v.stop_at), freed)
        return out

    def _claim(self, job: Job, hold: tuple[str, float, Usage],
               plan_usage: dict[tuple[str, str], Usage]) -> None:
        """Hold the quota a preemptor in grace will take: its need, less what its own tenant's
        victims give back (never below zero: until they stop, the victims still count)."""
        pool, _end, freed = hold
        need = self._need(job, pool)
        claim = Usage(max(0, need.devices - freed.devices), max(0, need.memory_bytes - freed.memory_bytes),
                      max(0, need.compute_milli - freed.compute_milli))
        key = (job.spec.tenant, pool)
        plan_usage[key] = plan_usage.get(key, Usage()).plus(claim)

    def _may_preempt(self, job: Job) -> bool:
        """Cheap pre-check before searching victims (a cycle examines thousands of jobs):
        a preempting class with lower-level preemptible jobs running, or a tenant inside its
        guarantee while borrowers run; and no identical attempt failed earlier this cycle."""
        ctx = self._pctx
        if ctx is None:
            levels = [j.klass.level for j in self._active.values()
                      if j.state == JobState.RUNNING and j.spec.preemptible and j.klass.preemptible]
            ctx = self._pctx = (min(levels, default=None), any(j.borrowing for j in self._active.values()), set())
        lowest, borrowers, failed = ctx
        if (job.klass.level, job.spec.tenant, job.spec.devices) in failed:
            return False
        by_priority = job.klass.preempts and lowest is not None and lowest < job.klass.level
        return by_priority or (borrowers and bool(self.book.tenant(job.spec.tenant).guaranteed))

    def _victim_ok(self, job: Job, v: Job, pool: str) -> bool:
        if v.state != JobState.RUNNING or v.pool != pool or not (v.spec.preemptible and v.klass.preemptible):
            return False
        use = self._usage(v)
        if v.klass.level < job.klass.level and job.klass.preempts:
            return v.spec.tenant == job.spec.tenant or self.book.above_guarantee(v.spec.tenant, pool, use)
        # reclaim: a tenant inside its guarantee takes back quota lent to a borrower
        return (v.spec.tenant != job.spec.tenant and v.borrowing
                and self.book.within_guarantee(job.spec.tenant, pool, self._need(job, pool))
                and self.book.above_guarantee(v.spec.tenant, pool, use))

    def _try_preempt(self, job: Job, pools: Sequence[str], profiles: dict[str, Profile], now: float,
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
        d, n, grace = self.duration(job), job.spec.devices, self.policy.grace_s
        d_own = d if hold is None else hold
        end_of = end_fn or (lambda v: self.expected_end(v, now))
        for p in pools:
            cands = [v for v in self.running() if self._victim_ok(job, v, p)]
            if not cands:
                continue
            prof = profiles[p]

            def fits(victims: Sequence[Job], prof: Profile = prof, p: str = p) -> bool:
                own = [v for v in victims if v.spec.tenant == job.spec.tenant]
                freed: dict[str, Usage] = {}
                for v in own:
                    for key in (p, "*"):
                        freed[key] = freed.get(key, Usage()).plus(self._usage(v))
                if not self.book.admit(job.spec.tenant, p, self._need(job, p), minus=freed,
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

            if not fits(cands):
                continue
            options = []
            for order in (lambda v: (-v.klass.level, -self._lost_if(v, now), v.spec.devices),
                          lambda v: (v.spec.devices, -v.klass.level, -self._lost_if(v, now))):
                chosen = list(cands)
                for v in sorted(cands, key=order):
                    rest = [x for x in chosen if x is not v]
                    if fits(rest):
                        chosen = rest
                options.append(chosen)
            for chosen in options:
                if not chosen:
                    continue  # it fits once the grace period of earlier victims ends: no new victim
                cost = (float(len(chosen)), sum(self._lost_if(v, now) for v in chosen),
                        float(max(v.klass.level for v in chosen)))
                if best is None or cost < best[0]:
                    best = (cost, p, chosen)
        if best is None:
            if self._pctx is not None:
                self._pctx[2].add((job.klass.level, job.spec.tenant, job.spec.devices))
            return False
        _, p, victims = best
        self._pctx = None  # running set changes: recompute the pre-check
        prof = profiles[p]
        ends = {v.id: end_of(v) for v in victims}
        for v in sorted(victims, key=lambda x: x.seq):
            if on_victim is not None:
                on_victim(v)
            self._signal_victim(job, v, now, f"preempted for {job.id} ({job.klass.name})", res)
            prof.add(now + grace, ends[v.id], -v.spec.devices)
        if grace <= 0:
            adm = self._admit_planned(job, p, {})
            if adm.ok and self._start(job, p, now, adm, "started by preemption"):
                prof.add(now, now + d, n)
                res.started.append(job.id)
                return True
        prof.add(now + grace, now + grace + d, n)
        self.reservations[job.id] = (p, now + grace, n)
        res.reservations[job.id] = now + grace
        return True

    def _signal_victim(self, job: Job, v: Job, now: float, why: str, res: CycleResult) -> None:
        """Tell victim ``v`` to stop for ``job``: it keeps its devices for the grace period (none:
        it stops now)."""
        grace = self.policy.grace_s
        self._emit(now, v.id, "preempting", why, {"stop_at": now + grace, "for": job.id})
        res.preempted.append(v.id)
        if grace <= 0:
            self._finish_preemption(v, now)

    def _lost_if(self, v: Job, now: float) -> float:
        mode = self.policy.preempt_mode
        done = v.progress(now)
        if mode == PreemptMode.REQUEUE:
            return done
        keep = done if mode == PreemptMode.SUSPEND else v.checkpoint_at(now)
        return done - max(0.0, keep - self.policy.preempt_overhead_s)

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
        # the tolerance makes a job demoted at the instant the wake-up for its threshold fires
        return bisect.bisect_right(th, self.attained(job, now) - job.service_base + 1e-6)

    def _tier_budget(self, job: Job, now: float, q: int) -> float:
        """Run seconds before ``job`` leaves tiers <= ``q`` (infinite from the last tier)."""
        th = self.policy.demote_after_device_s
        if q >= len(th):
            return math.inf
        return max(0.0, (th[q] - self.attained(job, now) + job.service_base) / (job.spec.compute_milli / 1000.0))

    def _tier_hold(self, job: Job, done: float, budget: float) -> float:
        """Expected run time of a job that has ``done`` seconds of work, counted up to ``budget`` more."""
        return capped_remaining(self.durations, (job.spec.tenant, job.spec.devices), job.spec.estimate_s, done,
                                done + budget, self.policy.overrun_margin_s)

    def _tier_releasable(self, v: Job, level: int, q: int, now: float) -> bool:
        """A running job a tier-``q`` job of class ``level`` may preempt: same class, later tier."""
        return (v.state == JobState.RUNNING and v.klass.level == level and v.spec.preemptible
                and v.klass.preemptible and self.tier(v, now) > q)

    def _tier_profiles(self, now: float, level: int, q: int) -> dict[str, Profile]:
        """Free devices as a tier-``q`` job of class ``level`` sees them: running jobs of its class
        in a later tier are preemptible (free after the grace period), the others of its class
        hold their devices only until they would leave tiers <= ``q``."""
        rel: dict[str, list[tuple[float, int]]] = {p: [] for p in self.pools}
        for v in self._active.values():
            if v.pool is not None:
                rel[v.pool].append((self._view_end(v, now, level, q), v.spec.devices))
        return {p: Profile(now, self.pool_free(p), rel[p]) for p in self.pools}

    def _view_end(self, v: Job, now: float, level: int, q: int) -> float:
        """When active job ``v`` gives its devices back as a tier-``q`` job of class ``level`` sees it."""
        if v.state == JobState.PREEMPTING and v.stop_at is not None:
            return v.stop_at
        if self._tier_releasable(v, level, q, now):
            return now + self.policy.grace_s
        if v.klass.level == level:
            return now + self._tier_hold(v, v.progress(now), self._tier_budget(v, now, q))
        return self.expected_end(v, now)

    def next_wakeup(self, now: float | None = None) -> float | None:
        """When the next cycle should run even if nothing else happens: the earliest time a
        running job leaves its tier while a job of an earlier tier of its class waits (it may then
        be preempted), or the starvation guard promotes a waiting job.  ``None`` without tiers
        or guard, or when no such change is ahead."""
        t = self.now if now is None else now
        promote = min((self.promote_at(j) for j in self._waiting.values()), default=math.inf) \
            if self._guard else math.inf
        if not self.policy.demote_after_device_s or not self._waiting:
            return promote if math.isfinite(promote) and promote > t else None
        lowest: dict[int, int] = {}
        for j in self._waiting.values():
            q = self.tier(j, t)
            lowest[j.klass.level] = min(q, lowest.get(j.klass.level, q))
        best = promote
        for v in self._active.values():
            if v.state != JobState.RUNNING or v.klass.level not in lowest:
                continue
            q = self.tier(v, t)
            if q >= lowest[v.klass.level]:
                best = min(best, t + self._tier_budget(v, t, q))
        return best if math.isfinite(best) and best > t else None

    def _tier_victims(self, level: int, pool: str, q: int, now: float) -> deque[Job]:
        """Running jobs a tier-``q`` job of class ``level`` may preempt in ``pool``, in victim order:
        highest tier first, then least work lost, then most devices (fewer victims)."""
        cands = [v for v in self._active.values() if v.pool == pool and self._tier_releasable(v, level, q, now)]
        return deque(sorted(cands, key=lambda v: (-self.tier(v, now), self._lost_if(v, now), -v.spec.devices,
                                                  -v.seq)))

    def _preempt_tier(self, job: Job, pool: str, q: int, now: float, adm: Admission, res: CycleResult,
                      order: deque[Job] | None = None, on_victim: Callable[[Job], None] | None = None,
                      check: Callable[[list[Job]], bool] | None = None) -> float | None:
        """Free devices for tier-``q`` ``job`` by preempting later-tier jobs of its class in ``pool``.

        ``order``: the candidates from :meth:`_tier_victims` (a walk computes them once; victims
        that stopped running since are skipped).  The victims are the first in that order that
        free enough devices, pruned to a minimal set; another tenant's job only while that tenant
        is above its guarantee.  Returns when the job starts (now, or after the grace period as a
        reservation), or ``None`` when preemption cannot make room or ``check(victims)`` refuses
        the choice (a tiered walk: the job must then still fit the higher classes' views).
        """
        level, n = job.klass.level, job.spec.devices
        pidx = self._pool_index[pool]
        if order is None:
            order = self._tier_victims(level, pool, q, now)
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
                above[key] = self.book.above_guarantee(v.spec.tenant, pool, self._usage(v))
            return above[key]

        single = job.spec.same_host or job.spec.share is not None
        best: list[Job] | None = None
        scopes: list[tuple[int, int, Iterable[tuple[Job, int]]]]
        if single:  # all on one host: only hosts where some candidate runs
            per_host: dict[int, list[tuple[Job, int]]] = {}
            for v in order:
                for a in v.allocs:
                    per_host.setdefault(a.host, []).append((v, len(a.devices)))
            scopes = [(h, int(self.host_free[h, pidx]), lst) for h, lst in sorted(per_host.items())]
        else:  # lazily: the walk stops as soon as enough devices are found
            scopes = [(-1, self.pool_free(pool), ((v, v.spec.devices) for v in order))]
        for _h, free, lst in scopes:
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
            if best is None or len(chosen) < len(best):
                best = [v for v, _k in chosen]
        if not best or (check is not None and not check(best)):
            return None
        self._pctx = None
        grace = self.policy.grace_s
        for v in best:
            order.remove(v)  # never a candidate again in this walk
        for v in sorted(best, key=lambda x: x.seq):
            if on_victim is not None:
                on_victim(v)
            self._journal_demotion(v, now)
            self._signal_victim(job, v, now, f"preempted for {job.id}: tier {q} goes before tier "
                                f"{self.tier(v, now)} ({self.attained(v, now):.0f} device-s attained)", res)
        if grace <= 0 and self._start(job, pool, now, adm, "started by preemption"):
            res.started.append(job.id)
            return now
        self.reservations[job.id] = (pool, now + grace, n)
        res.reservations[job.id] = now + grace
        return now + grace

    def _walk_tiered(self, now: float, res: CycleResult, *, commit: bool, target: str | None = None,
                     depth: int | None = None) -> tuple[dict[str, Profile], dict[str, WaitEstimate]]:
        """:meth:`_walk` for a tiered policy: each job is planned on the view of its own class and
        tier (:meth:`_tier_profiles`), and starts by preempting later-tier jobs when only they
        hold the devices it needs."""
        pol = self.policy
        # every view the walk will use, built now from the state before anything changes
        views = _TierViews(self, now, {(j.klass.level, self.tier(j, now)) for j in self._waiting.values()})
        self._pctx = None
        blocked_pools: dict[str, float] = {}
        easy_reserved: set[str] = set()
        reservations = 0
        tests = 0
        out: dict[str, WaitEstimate] = {}
        planned_work: dict[str, float] = {p: 0.0 for p in self.pools}
        plan_usage: dict[tuple[str, str], Usage] = {}
        plan_taken: dict[str, int] = {p: 0 for p in self.pools}  # planning: devices its starts took
        # victim candidates per (class, pool, tier): only shrink during a walk (later tiers start after)
        victims: dict[tuple[int, str, int], deque[Job]] = {}
        grace = pol.grace_s
        holds = self._grace_holds() if grace > 0 else {}  # preemptors in grace: see _hold_tiered
        if commit:
            self.reservations.clear()
        exact = pol.plan_depth if depth is None else depth
        for job in self.queue(now):
            if commit and pol.max_tests is not None and tests >= pol.max_tests:
                break
            tests += 1
            spec, n = job.spec, job.spec.devices
            level, q = job.klass.level, self.tier(job, now)
            view = views.get(level, q)
            hold = views.hold(job, level, q)
            pools = self._pools_for(spec)
            if not commit and job.id != target and reservations >= exact:
                p = pools[0] if len(pools) == 1 else max(pools, key=lambda x: view[x].free_now)
                planned_work[p] += hold * n
                continue
            adm_by_pool = {p: self._admit_planned(job, p, plan_usage) for p in pools}
            if job.id == target:
                base = views.base(level, q)
                for p in self.pools:
                    out[p] = self._estimate_in(job, p, view[p], now, planned_work[p],
                                               adm_by_pool.get(p) or self._admit_planned(job, p, plan_usage),
                                               blocked_pools, hold=hold, alone_prof=base[p],
                                               fit=views.pair(job, p))
                return view, out
            admissible = [p for p in pools if adm_by_pool[p].ok]
            held = holds.get(job.id)
            if not admissible:
                job.wait = WaitReason.QUOTA
                if held is not None:
                    self._hold_tiered(job, held, views, plan_usage, blocked_pools, now, res, commit=commit)
                    reservations += 1
                    easy_reserved.add(held[0])
                    continue
                if commit and job.klass.preempts and self._may_preempt(job):
                    self._try_preempt_booked(job, pools, now, res, views)
                continue
            at: float | None = None
            refused: list[str] = []  # pools where the counts said "fits now" and the pipeline said no
            for p in admissible:
                if p in blocked_pools:
                    continue
                fit = views.pair(job, p)
                if held is not None and not (self.pool_free(p) - plan_taken[p] >= n and fit.fits(now, n)):
                    continue  # its victims are winding down: no new victims for the same need
                if self.pool_free(p) - plan_taken[p] >= n:
                    if not fit.fits(now, n):
                        continue
                    if not commit:
                        at = now
                        plan_taken[p] += n
                    elif self._start(job, p, now, adm_by_pool[p], "fits now"):
                        res.started.append(job.id)
                        at = now
                    else:
                        refused.append(p)  # the pipeline refused it (wait reason set by _start)
                elif not fit.own.fits(now + grace, fit.hold, n):
                    continue  # not even by preempting its class's later tiers
                elif commit:
                    vkey = (level, p, q)
                    if vkey not in victims:
                        victims[vkey] = self._tier_victims(level, p, q, now)
                    at = self._preempt_tier(job, p, q, now, adm_by_pool[p], res, victims[vkey], views.release,
                                            check=functools.partial(views.fits_after, job, p))
                else:
                    at = now + grace  # it would preempt later-tier jobs (planning: victims not chosen)
                if at is not None:
                    views.book(p, at, job)
                    if not commit:
                        key = (spec.tenant, p)
                        plan_usage[key] = plan_usage.get(key, Usage()).plus(self._need(job, p))
                    break
            if at is not None:
                continue
            if refused and held is None:
                admissible = [p for p in admissible if p not in refused]
                if not admissible:
                    continue
            if held is not None:
                job.wait = WaitReason.RESERVATION if view[held[0]].free_now >= n else WaitReason.CAPACITY
                self._hold_tiered(job, held, views, plan_usage, blocked_pools, now, res, commit=commit)
                reservations += 1
                easy_reserved.add(held[0])
                continue
            if commit and self._may_preempt(job) and self._try_preempt_booked(job, admissible, now, res, views):
                continue
            if commit and pol.backfill == BackfillMode.EASY and all(p in easy_reserved for p in admissible):
                free = max(view[p].free_now for p in admissible)
                job.wait = WaitReason.RESERVATION if free >= n else WaitReason.CAPACITY
                continue
            if commit and pol.backfill == BackfillMode.CONSERVATIVE and reservations >= pol.plan_depth:
                job.wait = WaitReason.PRIORITY
                continue
            best_p, best_t = admissible[0], math.inf
            for p in admissible:
                t = views.pair(job, p).earliest(n, after=blocked_pools.get(p))
                if t < best_t:
                    best_p, best_t = p, t
            job.wait = WaitReason.RESERVATION if view[best_p].free_now >= n else WaitReason.CAPACITY
            if pol.backfill == BackfillMode.NONE:
                for p in admissible:
                    blocked_pools[p] = max(blocked_pools.get(p, now), best_t if p == best_p else now)
                if not commit and math.isfinite(best_t):
                    views.book(best_p, best_t, job)
                reservations += 1
                continue
            reserve = (not commit or (pol.backfill == BackfillMode.CONSERVATIVE and reservations < pol.plan_depth)
                       or (pol.backfill == BackfillMode.EASY and best_p not in easy_reserved))
            if reserve and math.isfinite(best_t):
                views.book(best_p, best_t, job)
                reservations += 1
                easy_reserved.add(best_p)
                if commit:
                    self.reservations[job.id] = (best_p, best_t, n)
                    res.reservations[job.id] = best_t
        return {}, out  # (no single profile describes a tiered plan; callers use only the estimates)

    def _hold_tiered(self, job: Job, hold: tuple[str, float, Usage], views: _TierViews,
                     plan_usage: dict[tuple[str, str], Usage], blocked_pools: dict[str, float], now: float,
                     res: CycleResult, *, commit: bool) -> None:
        """:meth:`_hold_plain` for a tiered walk: the claim, and a booking on every view it affects."""
        pool, end, _freed = hold
        self._claim(job, hold, plan_usage)
        t = views.pair(job, pool).earliest(job.spec.devices, after=max(end, blocked_pools.get(pool, now)))
        if self.policy.backfill == BackfillMode.NONE:
            blocked_pools[pool] = max(blocked_pools.get(pool, now), t)
        if math.isfinite(t):
            views.book(pool, t, job)
            if commit:
                self.reservations[job.id] = (pool, t, job.spec.devices)
                res.reservations[job.id] = t

    def _try_preempt_booked(self, job: Job, pools: Sequence[str], now: float, res: CycleResult,
                            views: _TierViews) -> bool:
        """Preemption across classes (:meth:`_try_preempt`) inside a tiered walk: it must fit its own
        view (for its tier hold) and every higher class's view (for its duration) once the victims
        are gone; victims are released on every view and the job booked on them."""
        level, q = job.klass.level, self.tier(job, now)
        own = {p: prof.copy() for p, prof in views.get(level, q).items()}
        also = [({p: prof.copy() for p, prof in view.items()},
                 (lambda v, lv=lv, qq=qq: self._view_end(v, now, lv, qq)), self.duration(job))
                for (lv, qq), view in views.items() if lv > level]
        if not self._try_preempt(job, pools, own, now, res, end_fn=lambda v: self._view_end(v, now, level, q),
                                 hold=views.hold(job, level, q), also=also, on_victim=views.release):
            return False
        if job.active and job.pool is not None:
            views.book(job.pool, now, job)
        elif job.id in self.reservations:
            p, at, _n = self.reservations[job.id]
            views.book(p, at, job)
        return True

    def _verify_tiered(self, now: float) -> None:
        views = _TierViews(self, now)
        for job in self.queue(now):
            r = self.reservations.get(job.id)
            if r is None:
                continue
            pool, at, n = r
            if not views.pair(job, pool).fits(at, n):
                raise SchedulerStateError(f"reservation of {job.id} at {at} in {pool} is delayed")
            views.book(pool, at, job)

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
        _, out = self._walk(t, CycleResult(), commit=False, target=job_id, depth=depth)
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
        st = self.state
        if (st.dev_left < 0).any() or (st.dev_mem_left < 0).any():
            raise SchedulerStateError("a device is over-allocated")
        held: dict[tuple[int, int], int] = {}
        for job in self.jobs.values():
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
            if milli > st.dev_cap[h, s]:
                raise SchedulerStateError(f"device {st.dev_ids[h][s]} holds {milli} milli")
        for h in range(st.n_hosts):
            before = self.host_free[h].copy()
            self._refresh_host(h)
            if not np.array_equal(before, self.host_free[h]):
                raise SchedulerStateError(f"free-device count of host {st.host_names[h]} drifted")
        for tname, t in self.book.tenants.items():
            running = sum(1 for j in self.jobs.values() if j.active and j.spec.tenant == tname)
            if self.book.running.get(tname, 0) != running:
                raise SchedulerStateError(f"tenant {tname}: running count drifted")
            if t.max_running_jobs is not None and running > t.max_running_jobs:
                raise SchedulerStateError(f"tenant {tname} runs {running} jobs, above its limit")
            for key, per in self.book.usage.get(tname, {}).items():
                lim = t.limit.get(key) or (t.guaranteed.get(key) if t.cohort is None else None)
                if lim is not None and not lim.allows(per):
                    raise SchedulerStateError(f"tenant {tname} is above its limit in {key}")
        for jid, (_pool, at, _n) in self.reservations.items():
            rjob = self.jobs.get(jid)
            if rjob is None or rjob.state not in (JobState.QUEUED, JobState.SUSPENDED):
                continue
            if not math.isfinite(at):
                raise SchedulerStateError(f"reservation of {jid} has no time")
        # accounting: metered device-seconds equal the run segments of every job
        metered = sum(u.device_seconds for u in self.meter.totals(self.now).values())
        ran = self._segment_seconds()
        if not math.isclose(metered, ran, rel_tol=1e-9, abs_tol=1e-6):
            raise SchedulerStateError(f"metered {metered} device-seconds, jobs ran {ran}")

    def verify_reservations(self, now: float | None = None) -> None:
        """Every reservation still holds: replaying them in queue order over the current running
        jobs (with their expected ends), each job fits at its reserved time.  Called right after
        a cycle, this is the backfill guarantee: no job started in the cycle delays a reservation."""
        t = self.now if now is None else now
        if self.policy.demote_after_device_s:
            self._verify_tiered(t)
            return
        profiles = self._profiles(t)
        for job in self.queue(t):
            r = self.reservations.get(job.id)
            if r is None:
                continue
            pool, at, n = r
            d = self.duration(job)
            if not profiles[pool].fits(at, d, n):
                raise SchedulerStateError(f"reservation of {job.id} at {at} in {pool} is delayed")
            profiles[pool].add(at, at + d, n)

    def _segment_seconds(self) -> float:
        total = 0.0
        starts: dict[str, tuple[float, int]] = {}
        for ev in self.journal.events():
            if ev.kind in ("placed", "resumed"):
                starts[str(ev.job)] = (ev.t, sum(len(s) for _, s in ev.data["chunks"]))
            elif ev.kind in ("preempted", "finished", "failed", "cancelled") and ev.job in starts:
                t0, n = starts.pop(str(ev.job))
                total += n * (ev.t - t0)
        for t0, n in starts.values():
            total += n * (self.now - t0)
        return total

    # -- recovery ------------------------------------------------------------------------------------------
    @classmethod
    def recover(cls, cluster: ClusterState, journal: Journal | str | Path, policy: Policy | None = None, *,
                tenants: Iterable[Tenant] = (), prices: PriceTable | None = None,
                durations: DurationModel | None = None, scorer: str | Scorer = "fewest-free",
                workload: Sequence[Request] | None = None, filters: Sequence[Filter] = ()) -> QueueingScheduler:
        """Rebuild the state after a crash by replaying the journal onto a fresh cluster view.

        The replay binds the slots the journal names; ``scorer``, ``workload`` and ``filters``
        (as the crashed engine had them) place the work that comes after.

        Every event is checked first (:meth:`Journal.events`: format, payload, each job's life;
        here: pools, hosts, slots and devices of this cluster); the first one that is wrong, or
        that does not apply to this cluster and policy, raises :class:`JournalError` naming it.
        """
        opened = not isinstance(journal, Journal)
        jr = journal if isinstance(journal, Journal) else Journal(journal, create=False)
        eng = cls(cluster, policy, tenants=tenants, prices=prices, journal=jr, durations=durations,
                  scorer=scorer, workload=workload, filters=filters)
        eng._replaying = True
        try:
            for ev in jr.events():
                problem = eng._cluster_problem(ev)
                if problem is not None:
                    raise JournalError(jr.path, problem, seq=ev.seq, kind=ev.kind)
                try:
                    eng._apply(ev)
                except JournalError:
                    raise
                except (SchedulerError, KeyError, IndexError, TypeError, ValueError) as exc:
                    # the journal's rows are the only input here: a row the state refuses is a bad row
                    raise JournalError(jr.path, f"does not apply to this cluster and policy: {exc}",
                                       seq=ev.seq, kind=ev.kind) from exc
        except BaseException:
            if opened:
                jr.close()  # a journal opened here is not left locked by a failed recovery
            raise
        finally:
            eng._replaying = False
        return eng

    def _cluster_problem(self, ev: Event) -> str | None:
        """What in a journaled event does not exist in this cluster (replay only)."""
        st, d = self.state, ev.data
        if ev.kind == "submitted":
            pool = d["spec"]["pool"]
            return f"pool {pool!r} is not in this cluster ({', '.join(self.pools)})" \
                if pool and pool not in self._pool_index else None
        if ev.kind in ("placed", "resumed"):
            pidx = self._pool_index.get(d["pool"])
            if pidx is None:
                return f"pool {d['pool']!r} is not in this cluster ({', '.join(self.pools)})"
            for host, slots in d["chunks"]:
                h = st.host_index.get(host)
                if h is None:
                    return f"host {host!r} is not in this cluster"
                for s in slots:
                    if s >= len(st.dev_ids[h]):
                        return f"host {host} has no device slot {s} (it has {len(st.dev_ids[h])})"
                    if self._slot_pool[h, s] != pidx:
                        return f"device {st.dev_ids[h][s]} is not in pool {d['pool']}"
                    if not st.dev_usable[h, s]:
                        return f"device {st.dev_ids[h][s]} is not usable at this point of the journal"
            return None
        if ev.kind == "health":
            h = st.host_index.get(d["host"])
            if h is None:
                return f"host {d['host']!r} is not in this cluster"
            if d["slot"] >= len(st.dev_ids[h]):
                return f"host {d['host']} has no device slot {d['slot']} (it has {len(st.dev_ids[h])})"
            if st.dev_ids[h][d["slot"]] != d["device"]:
                return f"slot {d['slot']} of host {d['host']} is {st.dev_ids[h][d['slot']]}, not {d['device']}"
        return None


class _TierViews:
    """The free-device profiles of one tiered walk, one per (class level, tier), built from the
    state when first asked for.  Every start or reservation of the walk is booked on each view it
    affects, for as long as that job holds its devices against jobs of that view: inside its own
    class until it leaves the view's tier, against any other class for its whole duration.  It
    is not booked on its own class's earlier-tier views: those jobs may preempt it."""

    __slots__ = ("_base", "_bookings", "_views", "eng", "now")

    def __init__(self, eng: QueueingScheduler, now: float, keys: Iterable[tuple[int, int]] = ()) -> None:
        self.eng, self.now = eng, now
        self._base: dict[tuple[int, int], dict[str, Profile]] = {}
        self._views: dict[tuple[int, int], dict[str, Profile]] = {}
        self._bookings: list[tuple[str, float, Job]] = []
        # a walk builds its views up front: one built later from the live state would count
        # the walk's own starts twice (running, and booked)
        for level, q in sorted(keys):
            self.get(level, q)

    def items(self) -> list[tuple[tuple[int, int], dict[str, Profile]]]:
        return list(self._views.items())

    def release(self, v: Job) -> None:
        """``v`` is about to be preempted: its devices are free on every view after the grace period."""
        if v.pool is None:
            return
        t = self.now + self.eng.policy.grace_s
        for (level, q), view in self._views.items():
            end = self.eng._view_end(v, self.now, level, q)
            if end > t:
                view[v.pool].add(t, end, -v.spec.devices)

    def base(self, level: int, q: int) -> dict[str, Profile]:
        """The view without this walk's bookings."""
        key = (level, q)
        if key not in self._base:
            self._base[key] = self.eng._tier_profiles(self.now, level, q)
        return self._base[key]

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
        return job.klass.level != level or self.eng.tier(job, self.now) <= q

    def hold(self, job: Job, level: int, q: int) -> float:
        """How long a queued ``job`` holds its devices against a tier-``q`` job of class ``level``."""
        eng = self.eng
        if job.klass.level != level:
            return eng.duration(job)
        return max(1.0, eng._tier_hold(job, job.work_s, eng._tier_budget(job, self.now, q)))

    def pair(self, job: Job, pool: str) -> _TierFit:
        """What ``job`` must fit: its own view for its tier hold, and every higher class's view
        already planned (their reservations) for its whole duration."""
        level, q = job.klass.level, self.eng.tier(job, self.now)
        own = self.get(level, q)[pool]
        higher = [v[pool] for (lv, _q), v in self._views.items() if lv > level]
        return _TierFit(own, higher, self.hold(job, level, q), self.eng.duration(job))

    def fits_after(self, job: Job, pool: str, victims: Sequence[Job]) -> bool:
        """Would ``job`` fit every higher class's view for its whole duration from the end of the
        grace period, once ``victims`` (its class's later-tier jobs) have given their devices back?"""
        eng = self.eng
        at = self.now + eng.policy.grace_s
        full = max(eng.duration(job), self.hold(job, job.klass.level, eng.tier(job, self.now)))
        for (level, q), view in self._views.items():
            if level <= job.klass.level:
                continue
            extra = [(eng._view_end(v, self.now, level, q), v.spec.devices) for v in victims]
            if not view[pool].fits_with(at, full, job.spec.devices, extra):
                return False
        return True

    def book(self, pool: str, at: float, job: Job) -> None:
        self._bookings.append((pool, at, job))
        for (level, q), view in self._views.items():
            if self._applies(job, level, q):
                view[pool].add(at, at + self.hold(job, level, q), job.spec.devices)


class _TierFit:
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
        for _ in range(10_000):  # each round moves t to a later breakpoint of one of the profiles
            t0 = t
            t = self.own.earliest(n, self.hold, after=t)
            for h in self.higher:
                if math.isfinite(t):
                    t = h.earliest(n, self.full, after=t)
            if not math.isfinite(t) or t <= t0:
                return t
        return math.inf


def _spec_dict(spec: JobSpec) -> dict[str, Any]:
    return {"id": spec.id, "tenant": spec.tenant, "devices": spec.devices, "pool": spec.pool,
            "share": ({"compute_milli": spec.share.compute_milli, "memory_bytes": spec.share.memory_bytes}
                      if spec.share else None),
            "estimate_s": spec.estimate_s, "priority_class": spec.priority_class, "same_host": spec.same_host,
            "checkpoint_interval_s": spec.checkpoint_interval_s, "cpu_milli": spec.cpu_milli,
            "memory_bytes": spec.memory_bytes, "preemptible": spec.preemptible,
            "labels": [list(x) for x in spec.labels],
            # optional fields only when set: a journal without them reads as before
            **({"topology": topology_to_dict(spec.topology)} if spec.topology is not None else {})}
