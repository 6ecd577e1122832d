"""The engine bridge: a service's replicas are jobs of a :class:`QueueingScheduler`.

One clock drives the request simulator (:class:`ServingSim`) and the queueing engine.  At each
instant (the autoscaler's sync ticks, training completions, the end of preemption grace
periods) :class:`ServingBridge` does, in order:

1. serve requests up to now (``ServingSim.advance``);
2. finish training jobs whose work is done (``engine.finish``) and the replica jobs of draining
   replicas that have finished their last request (scale-down returns their devices);
3. on a sync tick, ask the autoscaler for a replica count and act on the difference: scale-up
   submits replica jobs (:meth:`Service.replica_job`, the service's priority class); scale-down
   withdraws replica jobs still queued, then stops replicas still loading, then drains ready
   ones (fewest outstanding requests first);
4. run one engine cycle (``engine.cycle``): replica jobs are placed through its pipeline like
   any job and may preempt lower classes, whose victims keep their devices for the policy's
   grace period; a replica placed now is added to the simulator and serves ``startup_s`` later.

Training jobs (:class:`~accel.scheduler.queueing.TraceJob`, true durations known only here) are
submitted at their ``submit_s`` in their own class; a preempted one loses its work since its
last checkpoint (the engine's machinery) and is re-placed when devices free up.

The run stops at ``until``: device time is counted up to it, and requests still in the system
are then served to completion by the replicas as they are (no further scaling).

A replica job waits for placement like any job.  The engine decides preemption on free devices
per pool, not per host, so on a pool fragmented by small jobs a single-host replica (TP=8) may
find no victims that free a whole host and stay queued; :attr:`ReplicaRecord.placed_s` stays
``None`` for it (see ``benchmarks/serving/README.md``, co-location).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from accel.scheduler.queueing import JobSpec, JobState, QueueingScheduler, TraceJob

from ._autoscale import Autoscaler
from ._costmodel import ModelCatalog
from ._errors import InvalidRequestError
from ._routers import Router
from ._service import Service
from ._sim import ServingRequest, ServingResult, ServingSim

__all__ = ["BridgeResult", "ReplicaRecord", "ServingBridge"]


@dataclass
class ReplicaRecord:
    """One replica's life: its job was submitted, placed (devices held), ready, ended."""

    replica_id: int
    job_id: str
    submitted_s: float
    placed_s: float | None = None
    ready_s: float | None = None
    ended_s: float | None = None

    def held_seconds(self, start: float, end: float) -> float:
        """Seconds it held devices within ``[start, end)``."""
        if self.placed_s is None:
            return 0.0
        a = max(start, self.placed_s)
        b = min(end, self.ended_s if self.ended_s is not None else end)
        return max(0.0, b - a)


@dataclass
class BridgeResult:
    """What a :class:`ServingBridge` run gave serving and training."""

    serving: ServingResult
    replicas: list[ReplicaRecord]
    devices_per_replica: int
    until_s: float
    cluster_devices: int
    #: (time, desired, ready, starting) at every sync tick.
    timeline: list[tuple[float, int, int, int]] = field(default_factory=list)
    scale_ups: int = 0
    scale_downs: int = 0
    #: Useful training device-seconds delivered up to ``until_s`` (work kept x devices).
    training_device_s: float = 0.0
    training_lost_device_s: float = 0.0
    training_finished: int = 0
    preemptions: int = 0
    #: Longest time a replica job waited for placement.
    max_placement_wait_s: float = 0.0

    def serving_device_seconds(self, start: float = 0.0, end: float | None = None) -> float:
        """Device-seconds replicas held (start-ups and drains included) within ``[start, end)``."""
        stop = self.until_s if end is None else end
        return sum(r.held_seconds(start, stop) for r in self.replicas) * self.devices_per_replica

    def idle_left_by_serving_s(self) -> float:
        """Cluster device-seconds up to ``until_s`` that serving did not hold."""
        return self.cluster_devices * self.until_s - self.serving_device_seconds()


class ServingBridge:
    """Runs one service and optional training jobs on one engine (see the module doc).

    ``initial`` replicas are placed at time 0 and are warm (the service was running before the
    window began); later ones serve ``startup_s`` after placement.  The engine's policy must have
    the service's priority class (and the training jobs' classes).
    """

    def __init__(self, engine: QueueingScheduler, service: Service, autoscaler: Autoscaler,
                 requests: Iterable[ServingRequest], router: Router, *, initial: int | None = None,
                 training: Sequence[TraceJob] = (), catalog: ModelCatalog | None = None) -> None:
        engine.policy.klass(service.priority_class)  # raises for an unknown class
        for tj in training:
            engine.policy.klass(tj.priority_class)
        self.engine = engine
        self.service = service
        self.autoscaler = autoscaler
        self.spec = service.replica_spec(catalog)
        self.sim = ServingSim(requests, router, min_capacity_tokens=self.spec.capacity_tokens)
        n0 = service.min_replicas if initial is None else initial
        if not service.min_replicas <= n0 <= service.max_replicas:
            raise InvalidRequestError(f"initial replicas {n0} outside [{service.min_replicas}, "
                                      f"{service.max_replicas}]", field="initial")
        self.initial = n0
        self.training = {tj.id: tj for tj in training}
        self._arrivals = sorted(training, key=lambda j: (j.submit_s, j.id))
        self.records: dict[str, ReplicaRecord] = {}
        self._by_rid: dict[int, ReplicaRecord] = {}
        self._next = 0
        self._pending: list[str] = []  # replica jobs submitted, not yet placed
        self._heap: list[tuple[float, int, str, int]] = []  # (time, seq, training job, attempt)
        self._seq = 0
        self.result_: BridgeResult | None = None

    # -- replica bookkeeping ------------------------------------------------------------------------
    def _replica_job(self, job_id: str) -> bool:
        return job_id in self.records

    def _submit_replica(self, now: float) -> None:
        rid = self._next
        self._next += 1
        spec: JobSpec = self.service.replica_job(rid)
        self.engine.submit(spec, now)
        rec = ReplicaRecord(rid, spec.id, now)
        self.records[spec.id] = rec
        self._by_rid[rid] = rec
        self._pending.append(spec.id)

    def _live(self) -> list[ReplicaRecord]:
        """Placed replicas not draining (ready or starting)."""
        return [r for r in self._by_rid.values()
                if r.placed_s is not None and r.ended_s is None and not self.sim.is_draining(r.replica_id)]

    def current(self) -> int:
        """Replicas the autoscaler has: ready + starting + replica jobs waiting for placement."""
        return len(self._live()) + len(self._pending)

    def _scale_to(self, desired: int, now: float, res: BridgeResult) -> None:
        cur = self.current()
        if desired > cur:
            for _ in range(desired - cur):
                self._submit_replica(now)
            res.scale_ups += desired - cur
            return
        drop = cur - desired
        if drop <= 0:
            return
        res.scale_downs += drop
        while drop and self._pending:  # withdraw jobs not placed yet (newest first)
            jid = self._pending.pop()
            self.engine.cancel(jid, now, "service scaled down before placement")
            self.records[jid].ended_s = now
            drop -= 1
        live = self._live()
        starting = sorted((r for r in live if r.ready_s is not None and r.ready_s > now),
                          key=lambda r: -r.replica_id)
        ready = sorted((r for r in live if r.ready_s is not None and r.ready_s <= now),
                       key=lambda r: (self._outstanding(r.replica_id), -r.replica_id))
        for r in (starting + ready)[:drop]:
            self.sim.remove_replica(r.replica_id)  # drains; its job finishes once it is empty

    def _finish_drained(self, now: float) -> None:
        """Scale-down returns devices: finish the job of every replica that has drained."""
        for rec in self._by_rid.values():
            if rec.ended_s is None and rec.placed_s is not None and self.sim.drained(rec.replica_id):
                self.engine.finish(rec.job_id, now, reason="replica drained after scale-down")
                rec.ended_s = now

    def _outstanding(self, rid: int) -> int:
        return self.sim.outstanding_of(rid)

    # -- training bookkeeping -------------------------------------------------------------------------
    def _schedule_finish(self, jid: str) -> None:
        job = self.engine.jobs[jid]
        if job.state == JobState.RUNNING and job.started_at is not None:
            left = max(0.0, self.training[jid].duration_s - job.work_s)
            self._seq += 1
            heapq.heappush(self._heap, (job.started_at + left, self._seq, jid, job.attempts))

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self, until: float) -> BridgeResult:
        """Drive both to ``until`` (seconds); see the module doc."""
        if not (until > 0 and math.isfinite(until)):
            raise InvalidRequestError(f"until must be a positive time, got {until}", field="until")
        eng = self.engine
        cluster_devices = sum(eng.pool_capacity(p) for p in eng.pools)
        res = BridgeResult(ServingResult([]), [], self.service.replica_devices, until, cluster_devices)
        sync = self.autoscaler.sync_s
        grace_ends: list[float] = []
        for _ in range(self.initial):
            self._submit_replica(0.0)
        tick = 0.0
        ai = 0
        now = 0.0
        while now <= until:
            self.sim.advance(now)
            with eng.batch():
                due: list[str] = []
                while self._heap and self._heap[0][0] <= now:
                    _, _, jid, attempt = heapq.heappop(self._heap)
                    job = eng.jobs[jid]
                    if job.state == JobState.RUNNING and job.attempts == attempt:
                        due.append(jid)
                for jid in sorted(set(due), key=lambda j: eng.jobs[j].seq):
                    eng.finish(jid, now)
                    res.training_finished += 1
                self._finish_drained(now)
                while ai < len(self._arrivals) and self._arrivals[ai].submit_s <= now:
                    tj = self._arrivals[ai]
                    ai += 1
                    eng.submit(JobSpec(id=tj.id, tenant=tj.tenant, devices=tj.devices, pool=tj.pool,
                                       estimate_s=tj.duration_s, priority_class=tj.priority_class,
                                       checkpoint_interval_s=tj.checkpoint_interval_s), now)
                if now >= tick - 1e-9:
                    obs = self.sim.observe()
                    want = self.autoscaler.decide(obs, self.current())
                    desired = min(self.service.max_replicas, max(self.service.min_replicas, want))
                    if now > 0:  # the initial replicas are the decision at time 0
                        self._scale_to(desired, now, res)
                        self._finish_drained(now)
                    res.timeline.append((now, desired, obs.ready, obs.starting))
                    tick = now + sync
                cyc = eng.cycle(now)
            for jid in cyc.started:
                rec = self.records.get(jid)
                if rec is None:
                    self._schedule_finish(jid)
                    continue
                rec.placed_s = now
                rec.ready_s = now if now == 0.0 else now + self.spec.startup_s
                res.max_placement_wait_s = max(res.max_placement_wait_s, now - rec.submitted_s)
                self._pending.remove(jid)
                self.sim.add_replica(rec.replica_id, self.spec, ready_at=rec.ready_s)
            for jid in cyc.preempted:
                res.preemptions += 1
                job = eng.jobs[jid]
                if job.stop_at is not None:
                    grace_ends.append(job.stop_at)
            grace_ends = [g for g in grace_ends if g > now]
            nxt = [tick]
            if self._heap:
                nxt.append(self._heap[0][0])
            if grace_ends:
                nxt.append(min(grace_ends))
            if ai < len(self._arrivals):
                nxt.append(self._arrivals[ai].submit_s)
            # a draining replica may empty between ticks: look again at its next request end
            nxt_t = max(now + 1e-6, min(nxt))
            if now < until < nxt_t:
                nxt_t = until
            elif nxt_t > until:
                break
            now = nxt_t
        self._close(res, until)
        return res

    def _close(self, res: BridgeResult, until: float) -> None:
        eng = self.engine
        res.serving = self.sim.result()
        # a replica draining at ``until`` holds its devices until its last request ends
        ends: dict[int, float] = {}
        for o in res.serving.outcomes:
            ends[o.replica_id] = max(ends.get(o.replica_id, 0.0), o.end_s)
        for rec in self._by_rid.values():
            if rec.placed_s is not None and rec.ended_s is None and self.sim.is_draining(rec.replica_id):
                rec.ended_s = max(until, ends.get(rec.replica_id, until))
        res.replicas = sorted(self._by_rid.values(), key=lambda r: r.replica_id)
        useful = lost = 0.0
        for jid in self.training:
            job = eng.jobs.get(jid)
            if job is None:
                continue
            kept = job.progress(until) if job.active else job.work_s
            useful += kept * job.spec.devices
            lost += job.lost_s * job.spec.devices
        res.training_device_s = useful
        res.training_lost_device_s = lost
        self.result_ = res
