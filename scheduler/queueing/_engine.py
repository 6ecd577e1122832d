"""The queueing engine's façade: admission, ordering, preemption, backfill, placement, recovery.

:class:`QueueingScheduler` sits on top of part 1 (a :class:`accel.scheduler.ClusterState` and a
:class:`accel.scheduler.Scheduler`).  It decides *when* and in which pool; part 1's filter, score
and reserve stages decide *where* (hosts and slots, see :mod:`._placement`).  All mutation goes through
:func:`._events.emit`, which appends the event to the journal and applies it, and a
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

The engine owns one :class:`~._state.EngineState` and hands it to its stages (the order and the
rule between them: the package docstring); this module keeps only the public calls.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from accel.model import HostInventory
from accel.scheduler import (
    Allocation,
    ClusterState,
    Filter,
    InvalidRequestError,
    Request,
    Scheduler,
    SchedulerStateError,
    Scorer,
)

from ._estimate import WaitEstimate
from ._estimators import DeclaredModel, DurationModel
from ._events import emit, replay, spec_dict
from ._events import update_health as health_events
from ._gcpause import gc_paused
from ._intervals import IntervalCalibration, add_intervals
from ._invariants import check_invariants as check_all
from ._invariants import verify_reservations as verify_all
from ._journal import Event, Journal
from ._meter import Bill, Meter, PriceTable
from ._order import order_key, queue, waiting_tiers
from ._placement import PlacementRefusal, QueuePlacer
from ._preempt import finish_preemption
from ._records import CycleResult, Job, Reservation
from ._starts import host_fits, released
from ._state import EngineState, IntArray
from ._tenants import Tenant, TenantBook
from ._tiers import next_wakeup as tiers_next_wakeup
from ._tiers import promote_at as guard_promote_at
from ._tiers import promote_starving
from ._types import JobSpec, JobState, Policy, WaitReason
from ._walk import Commit, Plan
from ._walk import run as walk

__all__ = ["CycleResult", "Job", "QueueingScheduler", "WaitEstimate"]


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
        policy = policy or Policy()
        # queued work goes through the same filter -> score -> reserve stages as a direct request
        self.placer = Scheduler(cluster, scorer, workload=workload, filters=filters)
        meter = Meter(prices)
        jr = journal if isinstance(journal, Journal) else Journal(journal or ":memory:")
        # The prices go into the journal too, so a bill made from it alone (``accel sched bill``)
        # is priced as this engine's; an engine given none (a recovery) bills with the stored ones.
        stored = jr.prices()
        if prices is None and stored is not None:
            meter.prices = stored
        elif not jr.readonly:
            jr.use_prices(meter.prices)  # stored with the next rows it prices
        # wait intervals (``_intervals``; None: its DEFAULT_CALIBRATION); reporting only
        self.interval_calibration: IntervalCalibration | None = None
        self._st = EngineState.build(cluster, policy, durations or DeclaredModel(), QueuePlacer(self.placer),
                                     TenantBook(tenants, half_life_s=policy.fair_half_life_s), meter, jr)

    # -- the state, as callers know it -------------------------------------------------------------
    @property
    def state(self) -> ClusterState:
        """The cluster view the engine places on."""
        return self._st.cluster

    @property
    def policy(self) -> Policy:
        return self._st.policy

    @property
    def durations(self) -> DurationModel:
        return self._st.durations

    @property
    def book(self) -> TenantBook:
        return self._st.book

    @property
    def meter(self) -> Meter:
        return self._st.meter

    @property
    def journal(self) -> Journal:
        return self._st.journal

    @property
    def jobs(self) -> dict[str, Job]:
        """Every job submitted (read them, do not change them)."""
        return self._st.jobs

    @property
    def now(self) -> float:
        """The latest instant the engine was told of."""
        return self._st.now

    @property
    def reservations(self) -> dict[str, Reservation]:
        """Where and when queued jobs are to start, as the last cycle planned it."""
        return self._st.reservations

    @property
    def refusals(self) -> dict[str, PlacementRefusal]:
        """Per waiting job, why the placement pipeline last refused it."""
        return self._st.refusals

    @property
    def pools(self) -> tuple[str, ...]:
        """The device pools (one per device model), sorted."""
        return self._st.pools

    @property
    def host_free(self) -> IntArray:
        """Fully free usable devices per [host, pool]."""
        return self._st.host_free

    @property
    def host_usable(self) -> IntArray:
        """Usable devices per [host, pool]."""
        return self._st.host_usable

    def pool_free(self, pool: str) -> int:
        """Fully free usable devices of ``pool``."""
        return self._st.pool_free(pool)

    def pool_capacity(self, pool: str) -> int:
        """Usable devices of ``pool``."""
        return self._st.pool_capacity(pool)

    def batch(self) -> AbstractContextManager[None]:
        """Group several calls into one journal transaction (all or nothing after a crash)."""
        return self._st.journal.transaction()

    def duration(self, job: Job) -> float:
        """How long a queued job is expected to hold its devices once started (from what it kept)."""
        return self._st.duration(job)

    def expected_end(self, job: Job, now: float) -> float:
        """When the scheduler expects an active job to release its devices."""
        return self._st.expected_end(job, now)

    def order_key(self, job: Job, now: float) -> tuple[float, ...]:
        """Queue order: higher class first, then the class's in-class order, then submit order."""
        return order_key(self._st, job, now)

    def queue(self, now: float | None = None, *, upto: str | None = None) -> list[Job]:
        """Queued (and suspended) jobs in the order the next cycle examines them; with ``upto`` (a
        waiting job's id), only the jobs up to and including that one (what an estimate walks)."""
        return queue(self._st, self._st.now if now is None else now, upto=upto)

    def waiting_tiers(self, now: float | None = None) -> Collection[tuple[int, int]]:
        """The (class level, tier) of every waiting job, each once (kept, not recomputed per call)."""
        return waiting_tiers(self._st, self._st.now if now is None else now)

    def running(self) -> list[Job]:
        """Jobs holding devices, in submit order."""
        return self._st.running()

    # -- public calls --------------------------------------------------------------------------------
    def submit(self, spec: JobSpec, now: float, *, estimate: bool = False,
               estimate_depth: int | None = None) -> Job:
        """Queue a job.  With ``estimate=True`` its start-time estimate is taken and journaled,
        planning the jobs ahead exactly up to ``estimate_depth`` (see :meth:`estimate`)."""
        st = self._st
        if spec.id in st.jobs:
            raise InvalidRequestError(f"job {spec.id} already submitted", field="id")
        st.policy.klass(spec.priority_class)
        st.pools_for(spec)
        cap = max((st.pool_capacity(p) for p in st.pools_for(spec)), default=0)
        if spec.devices > cap:
            raise InvalidRequestError(f"job {spec.id} asks for {spec.devices} devices; the largest pool it "
                                      f"accepts has {cap}", field="devices")
        st.advance(now)
        data: dict[str, Any] = {"spec": spec_dict(spec)}
        if estimate:
            # estimate as if it were queued now (a throwaway record, nothing is journaled)
            tmp = Job(spec, st.policy.klass(spec.priority_class), st.seq + 1, now)
            st.jobs[spec.id] = st.waiting[spec.id] = tmp
            try:
                ests = self.estimate(spec.id, now, depth=estimate_depth)
            finally:
                del st.jobs[spec.id], st.waiting[spec.id]
            own = [e.start_at for e in ests if e.pool in st.pools_for(spec)]
            data["estimate"] = min(own) if own else None
            best = min((e for e in ests if e.pool in st.pools_for(spec)), key=lambda e: e.start_at, default=None)
            if data["estimate"] is not None and st.ratios and math.isfinite(data["estimate"]):
                data["raw_estimate"] = data["estimate"]
                data["estimate"] = now + (data["estimate"] - now) * statistics.median(st.ratios)
            if data["estimate"] is not None and not math.isfinite(data["estimate"]):
                data["estimate"] = None
        emit(st, now, spec.id, "submitted", "submitted", data)
        if estimate and best is not None and best.p50_s is not None and best.p90_s is not None:
            # the interval of that estimate (not journaled: a report, no decision reads it)
            st.jobs[spec.id].interval_at_submit = (now + best.p50_s, now + best.p90_s, best.log_spread)
        return st.jobs[spec.id]

    def quote(self, spec: JobSpec, now: float, *, depth: int | None = None) -> list[WaitEstimate]:
        """Estimated start per pool for ``spec`` as if it were submitted at ``now``, best first:
        a front desk's quote before the user chooses a pool (``accel serve``'s ``POST /v1/quotes``).

        Nothing is journaled and nothing changes: the job is planned as a throwaway waiting record,
        exactly as ``submit(..., estimate=True)`` does, and removed again.
        """
        st = self._st
        if spec.id in st.jobs:
            raise InvalidRequestError(f"job {spec.id} already submitted", field="id")
        klass = st.policy.klass(spec.priority_class)
        st.pools_for(spec)
        t = max(float(now), st.now)
        tmp = Job(spec, klass, st.seq + 1, t)
        st.jobs[spec.id] = st.waiting[spec.id] = tmp
        try:
            return self.estimate(spec.id, t, depth=depth)
        finally:
            del st.jobs[spec.id], st.waiting[spec.id]

    def finish(self, job_id: str, now: float, *, ok: bool = True, reason: str = "") -> None:
        """The job ended by itself (``ok=False``: it failed)."""
        job = self._job(job_id)
        if job.state.terminal:
            raise SchedulerStateError(f"job {job_id} already {job.state.value}")
        self._st.advance(now)
        if ok:
            emit(self._st, now, job_id, "finished", reason or "completed")
        else:
            emit(self._st, now, job_id, "failed", reason or "job failed", {"requeue": False})

    def cancel(self, job_id: str, now: float, reason: str = "cancelled by user") -> None:
        job = self._job(job_id)
        if job.state.terminal:
            raise SchedulerStateError(f"job {job_id} already {job.state.value}")
        self._st.advance(now)
        emit(self._st, now, job_id, "cancelled", reason)

    def _job(self, job_id: str) -> Job:
        job = self._st.jobs.get(job_id)
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
        return health_events(self._st, now, snapshot)

    # -- placement --------------------------------------------------------------------------------------
    one_host = staticmethod(EngineState.one_host)

    def host_fits(self, job: Job, pool: str, host: int, victims: Sequence[Job]) -> bool:
        """Would the pipeline put all of ``job`` on ``host`` once ``victims`` released what they
        hold there?  Nothing is journaled, nothing changes (see :func:`._starts.host_fits`)."""
        return host_fits(self._st, job, pool, host, victims)

    @contextmanager
    def released(self, allocs: Sequence[Allocation], pool: str) -> Iterator[IntArray]:
        """The cluster state as if ``allocs`` were released, for a dry placement: yields the fully
        free devices of ``pool`` per host then; every host is put back on exit."""
        with released(self._st, allocs, pool) as pool_free:
            yield pool_free

    # -- the cycle ---------------------------------------------------------------------------------------
    def cycle(self, now: float) -> CycleResult:
        """One scheduling cycle: finish preemptions, admit, start, preempt, reserve, backfill."""
        st = self._st
        st.advance(now)
        res = CycleResult()
        with gc_paused(), st.journal.transaction():  # (the collector: ``_gcpause``)
            for job in st.running():
                if job.state == JobState.PREEMPTING and job.stop_at is not None and job.stop_at <= now + 1e-9:
                    finish_preemption(st, job, now)
            if st.guard:
                promote_starving(st, now)
            walk(st, now, Commit(st, now, res))
        return res

    # -- attained-service tiers (Policy.demote_after_device_s) -----------------------------------------
    def attained(self, job: Job, now: float | None = None) -> float:
        """Attained service of a job: the run time it received, kept or lost (so it never goes
        down, and a preempted job cannot climb back into an earlier tier), x devices held."""
        return self._st.attained(job, now)

    def tier(self, job: Job, now: float | None = None) -> int:
        """The job's attained-service tier: how many ``demote_after_device_s`` thresholds it passed,
        counting the service attained since its last promotion by the starvation guard (as
        Tiresias resets a promoted job's attained service)."""
        return self._st.tier(job, now)

    def next_wakeup(self, now: float | None = None) -> float | None:
        """When the next cycle should run even if nothing else happens: the earliest time a
        running job leaves its tier while a job of an earlier tier of its class waits (it may then
        be preempted), or the starvation guard promotes a waiting job.  ``None`` without tiers
        or guard, or when no such change is ahead."""
        return tiers_next_wakeup(self._st, now)

    def promote_at(self, job: Job) -> float:
        """When the starvation guard promotes a waiting job (``inf``: never, or already promoted).

        A function of journaled state only: when the job last entered the queue and how long its
        last run lasted; the guard is Tiresias' STARVELIMIT (ratio x last run) and/or an absolute
        wait, whichever comes first.  A job that never ran is promoted only by the absolute wait."""
        return guard_promote_at(self._st, job)

    # -- estimates --------------------------------------------------------------------------------------
    def estimate(self, job_id: str, now: float | None = None, *, depth: int | None = None) -> list[WaitEstimate]:
        """Estimated start per pool for a queued job, with the reason it waits (best first).

        Jobs ahead of it are planned exactly (conservative reservations) up to ``depth`` and as
        fluid work beyond.  The default plans every job ahead exactly where that is cheap (the
        plan kept between estimates serves it: conservative backfill, no grace period, no quotas,
        every job ahead in the target's class and tier and with one pool; ``_walk.exact_case``)
        and ``Policy.plan_depth`` jobs elsewhere.  A job of a fixed pool gets
        estimates for every pool that could serve it, so a user can choose.
        """
        st = self._st
        t = st.now if now is None else now
        job = self._job(job_id)
        if job.state not in (JobState.QUEUED, JobState.SUSPENDED):
            raise SchedulerStateError(f"job {job_id} is {job.state.value}, not queued")
        out = walk(st, t, Plan(st, t, job_id, depth))
        refused = self.refusals.get(job_id)
        if refused is not None and refused.pool in out and out[refused.pool].reason == WaitReason.NONE:
            # the counts say "now", but the last cycle's pipeline refused it there: say so
            out[refused.pool] = dataclasses.replace(out[refused.pool], reason=WaitReason.PLACEMENT)
        out = add_intervals(st, job, t, out, self.interval_calibration)  # p50 / p90 (``_intervals``)
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
        check_all(self._st)

    def verify_reservations(self, now: float | None = None) -> None:
        """Every reservation still holds: replaying them in queue order over the current running
        jobs (with their expected ends), each job fits at its reserved time.  Called right after
        a cycle, this is the backfill guarantee: no job started in the cycle delays a reservation."""
        verify_all(self._st, now)

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
            replay(eng._st, jr)
        except BaseException:
            if opened:
                jr.close()  # a journal opened here is not left locked (nor its lock file) by a failed recovery
            raise
        return eng
