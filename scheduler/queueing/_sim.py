"""Discrete-event simulator driving a :class:`QueueingScheduler` with a job trace.

The simulator knows each job's true duration; the scheduler only sees the declared estimate
an :class:`Estimator` gives at submission.  Events at one instant (arrivals, completions,
grace-period ends, device health changes, the engine's tier wake-up) are applied together, then
one scheduling cycle runs, all in one journal transaction.

Crash equivalence: what is pending at any moment is a function of the engine's state (which the
journal rebuilds) and the trace, never of the run's history: arrivals of jobs not yet
submitted, health events after the engine's time, the completion of each running job's current
attempt, the end of each preempting job's grace period, and the engine's
:meth:`~QueueingScheduler.next_wakeup`.  An event that no longer holds when its instant comes (the
completion of an attempt that was preempted, a grace period already over, a wake-up the engine
no longer wants) is dropped, and an instant with nothing but such events runs no cycle.  So
:meth:`Simulator.resume` rebuilds exactly the pending events of an uninterrupted run, and a run
killed at any point and resumed from its journal ends with the same events, state and bill.
"""

from __future__ import annotations

import csv
import heapq
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from accel.scheduler import ClusterState, DeviceSpec, HostSpec

from ._engine import QueueingScheduler
from ._estimators import HistoryModel
from ._types import JobSpec, JobState

__all__ = [
    "DeclaredEstimator",
    "Estimator",
    "HistoryEstimator",
    "JobOutcome",
    "SimResult",
    "Simulator",
    "TraceJob",
    "load_philly",
    "uniform_cluster",
]

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: when it arrives, what it asks for, how long it truly runs."""

    id: str
    submit_s: float
    devices: int
    duration_s: float
    tenant: str = "default"
    pool: str = ""
    priority_class: str = ""
    checkpoint_interval_s: float | None = None


class Estimator(Protocol):
    """Gives the duration a job declares at submission, and learns from finished jobs."""

    def estimate(self, job: TraceJob) -> float: ...

    def observe(self, job: TraceJob, duration_s: float) -> None: ...


class DeclaredEstimator:
    """The trace's true duration is declared (an upper bound on what an estimator can do)."""

    def estimate(self, job: TraceJob) -> float:
        return job.duration_s

    def observe(self, job: TraceJob, duration_s: float) -> None:
        return None


class HistoryEstimator:
    """Declares :meth:`HistoryModel.mean` (the model's statistic, median by default, of the
    jobs of the same tenant (VC) and size that finished earlier in the replay).  Share the model with the engine
    (``QueueingScheduler(durations=model)``): the engine feeds it every finished job and uses
    it to predict running jobs' residual time."""

    def __init__(self, model: HistoryModel | None = None, default_s: float = 3600.0) -> None:
        self.model = model or HistoryModel()
        self.default_s = default_s

    def estimate(self, job: TraceJob) -> float:
        return self.model.mean((job.tenant, job.devices), self.default_s)

    def observe(self, job: TraceJob, duration_s: float) -> None:
        return None  # the engine observes finished jobs itself


@dataclass(slots=True)
class JobOutcome:
    id: str
    tenant: str
    devices: int
    duration_s: float
    submit_s: float
    start_s: float | None
    end_s: float | None
    estimate_s: float | None
    lost_s: float
    # the estimate's interval at submission: p50 and p90 start, log-spread (None: no estimate)
    estimate_p50_s: float | None = None
    estimate_p90_s: float | None = None
    estimate_log_spread: float | None = None


@dataclass(slots=True)
class SimResult:
    """Per-job outcomes and the summary metrics of one run."""

    outcomes: list[JobOutcome]
    capacity_devices: int
    makespan_s: float
    busy_device_s: float
    cycles: int
    extra: dict[str, float] = field(default_factory=dict)

    def _done(self) -> list[JobOutcome]:
        return [o for o in self.outcomes if o.end_s is not None and o.start_s is not None]

    def metrics(self) -> dict[str, float]:
        done = self._done()
        jct = sorted(o.end_s - o.submit_s for o in done if o.end_s is not None)
        wait = sorted(o.start_s - o.submit_s for o in done if o.start_s is not None)
        errs = [abs(o.estimate_s - o.start_s) / (o.start_s - o.submit_s) for o in done
                if o.start_s is not None and o.estimate_s is not None and o.start_s - o.submit_s >= 60.0]
        waited = [o for o in done if o.start_s is not None and o.start_s - o.submit_s >= 60.0]
        return {
            "jobs": float(len(self.outcomes)), "finished": float(len(done)),
            "avg_jct_s": _mean(jct), "p99_jct_s": _pct(jct, 0.99), "avg_wait_s": _mean(wait),
            "p50_wait_s": _pct(wait, 0.50), "p99_wait_s": _pct(wait, 0.99),
            "max_wait_s": wait[-1] if wait else math.nan,
            "utilisation": self.busy_device_s / (self.capacity_devices * self.makespan_s) if self.makespan_s else 0.0,
            "waited_1min": float(len(waited)), "estimated": float(len(errs)),
            "est_median_rel_err": statistics.median(errs) if errs else math.nan,
            "est_mean_rel_err": _mean(sorted(errs)),
            "lost_work_s": sum(o.lost_s for o in self.outcomes),
            "cycles": float(self.cycles),
        }


def _mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def _pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return math.nan
    return xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)]


def uniform_cluster(hosts: int, devices_per_host: int = 8, *, model: str = "P100",
                    memory_bytes: int = 16 * GIB, prefix: str = "node", vendor: str = "nvidia",
                    rack_size: int = 32) -> ClusterState:
    """A cluster of identical hosts (the Philly VCs' 8-GPU nodes by default)."""
    specs = []
    for h in range(hosts):
        name = f"{prefix}{h:04d}"
        devs = tuple(DeviceSpec(id=f"{name}/{model}-{d}", vendor=vendor, model=model, memory_bytes=memory_bytes,
                                link_domain="nvlink", numa=d * 2 // max(devices_per_host, 1))
                     for d in range(devices_per_host))
        specs.append(HostSpec(name=name, cpu_milli=64_000, memory_bytes=512 * GIB, devices=devs,
                              rack=f"rack{h // rack_size}"))
    return ClusterState.from_specs(specs)


def load_philly(path: str | Path, *, limit: int | None = None, tenant: str | None = None,
                skip: int = 0) -> list[TraceJob]:
    """Jobs of one Philly VC file (``trace_<vc>.csv``): duration = service / GPUs; the ``limit``
    jobs after the first ``skip``."""
    p = Path(path)
    vc = tenant or p.stem.removeprefix("trace_")
    out: list[TraceJob] = []
    with p.open(newline="") as fh:
        for k, row in enumerate(csv.DictReader(fh)):
            if k < skip:
                continue
            n = int(row["num_jobs"])
            out.append(TraceJob(f"{vc}-{int(row['app_id'])}", float(row["submit_time"]), n,
                                max(1.0, float(row["service"]) / n), tenant=vc))
            if limit is not None and len(out) >= limit:
                break
    return out


class Simulator:
    """Replays ``jobs`` in submit order on ``engine``.

    With ``estimate_at_submit`` each job's start estimate is taken as it arrives, planning the
    jobs ahead exactly up to ``estimate_depth`` and the rest as fluid work, which is not exact
    for gang jobs (issue 19; ``benchmarks/philly``).  The default (``None``) is the engine's:
    every job ahead exactly where the kept plan makes that cheap, else the policy's
    ``plan_depth`` (:meth:`QueueingScheduler.estimate`).
    """

    def __init__(self, engine: QueueingScheduler, jobs: Iterable[TraceJob], estimator: Estimator | None = None, *,
                 estimate_at_submit: bool = True, estimate_depth: int | None = None,
                 health_events: Iterable[tuple[float, dict[str, bool]]] = ()) -> None:
        self.engine = engine
        self.jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
        self.by_id = {j.id: j for j in self.jobs}
        self.estimator: Estimator = estimator or DeclaredEstimator()
        self.estimate_at_submit = estimate_at_submit
        self.estimate_depth = estimate_depth
        self._heap: list[tuple[float, int, str, str, int]] = []
        self._n = 0
        self._health = sorted(health_events, key=lambda x: x[0])
        self.cycles = 0
        self._wakeups: set[float] = set()
        self._tier_at: float | None = None  # the engine's wake-up as last asked: other ones are stale
        for j in self.jobs:
            self._push(j.submit_s, "arrive", j.id, 0)
        for i, (t, _) in enumerate(self._health):
            self._push(t, "health", str(i), 0)

    def _push(self, t: float, kind: str, job: str, attempt: int) -> None:
        self._n += 1
        heapq.heappush(self._heap, (t, self._n, kind, job, attempt))

    def _spec(self, j: TraceJob) -> JobSpec:
        return JobSpec(id=j.id, tenant=j.tenant, devices=j.devices, pool=j.pool,
                       estimate_s=float(self.estimator.estimate(j)), priority_class=j.priority_class,
                       checkpoint_interval_s=j.checkpoint_interval_s)

    def _schedule_finishes(self, ids: Iterable[str], now: float) -> None:
        eng = self.engine
        for jid in ids:
            job = eng.jobs[jid]
            if job.state == JobState.RUNNING and job.started_at is not None:
                left = self.by_id[jid].duration_s - job.work_s
                self._push(job.started_at + max(left, 0.0), "finish", jid, job.attempts)

    def _holds(self, kind: str, jid: str, attempt: int, t: float) -> bool:
        """Whether a popped event still holds at its instant ``t`` (see the module docstring)."""
        if kind == "finish":
            job = self.engine.jobs.get(jid)
            return job is not None and job.state == JobState.RUNNING and job.attempts == attempt
        if kind == "grace":
            job = self.engine.jobs.get(jid)
            return job is not None and job.state == JobState.PREEMPTING and job.stop_at == t
        if kind == "tier":
            return self._tier_at == t
        return True  # arrivals and health events

    def step(self) -> bool:
        """Apply every event of the next instant and run one cycle; False when nothing is left."""
        eng = self.engine
        while True:
            if not self._heap:
                return False
            t = self._heap[0][0]
            due: list[tuple[str, str, int]] = []
            while self._heap and self._heap[0][0] == t:
                _, _, kind, jid, attempt = heapq.heappop(self._heap)
                if self._holds(kind, jid, attempt, t):
                    due.append((kind, jid, attempt))
            if due:
                break
        # one order inside an instant whatever order the events were pushed in (a resumed run
        # pushes them in another): completions by submission, health changes, then arrivals
        finishes = sorted({jid for kind, jid, _a in due if kind == "finish"}, key=lambda j: eng.jobs[j].seq)
        health = sorted({int(jid) for kind, jid, _a in due if kind == "health"})
        arrivals = sorted((self.by_id[jid] for kind, jid, _a in due if kind == "arrive"),
                          key=lambda j: (j.submit_s, j.id))
        with eng.batch():
            for jid in finishes:
                eng.finish(jid, t)
                self.estimator.observe(self.by_id[jid], self.by_id[jid].duration_s)
            for i in health:
                eng.update_health(t, self._health[i][1])
            for j in arrivals:
                eng.submit(self._spec(j), t, estimate=self.estimate_at_submit, estimate_depth=self.estimate_depth)
            res = eng.cycle(t)
            self.cycles += 1
        self._schedule_finishes(res.started, t)
        self._schedule_grace_ends(res.preempted)
        self._wake(t)
        return True

    def _schedule_grace_ends(self, ids: Iterable[str]) -> None:
        """A cycle at the end of each preempted job's grace period (it then gives its devices back)."""
        for jid in ids:
            job = self.engine.jobs[jid]
            if job.state == JobState.PREEMPTING and job.stop_at is not None:
                self._push(job.stop_at, "grace", jid, 0)

    def _wake(self, now: float) -> None:
        """A cycle when a running job leaves its tier (a tiered policy may then preempt it)."""
        at = self.engine.next_wakeup(now)
        self._tier_at = at
        if at is not None and at not in self._wakeups:
            self._wakeups.add(at)
            self._push(at, "tier", "", 0)

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        done_before = 0
        while self.step():
            if progress is not None:
                finished = sum(1 for j in self.engine.jobs.values() if j.state.terminal)
                if finished != done_before:
                    progress(finished - done_before)
                    done_before = finished
        return self.result()

    @classmethod
    def resume(cls, engine: QueueingScheduler, jobs: Iterable[TraceJob], estimator: Estimator | None = None,
               **kw: object) -> Simulator:
        """Continue a run whose engine was rebuilt from the journal (see module docstring)."""
        health = sorted(kw.pop("health_events", ()), key=lambda x: x[0])  # type: ignore[call-overload]
        sim = cls(engine, [], estimator, **kw)  # type: ignore[arg-type]
        sim._health = list(health)
        for i, (t, _) in enumerate(sim._health):
            if t > engine.now:
                sim._push(t, "health", str(i), 0)
        sim.jobs = sorted(jobs, key=lambda j: (j.submit_s, j.id))
        sim.by_id = {j.id: j for j in sim.jobs}
        now = engine.now
        for j in sim.jobs:
            if j.id not in engine.jobs:
                sim._push(j.submit_s, "arrive", j.id, 0)
        sim.estimator = estimator or DeclaredEstimator()
        sim._schedule_finishes([r.id for r in engine.jobs.values()], now)
        sim._schedule_grace_ends([r.id for r in engine.jobs.values()])
        sim._wake(now)
        return sim

    def result(self) -> SimResult:
        eng = self.engine
        outcomes = []
        for j in self.jobs:
            r = eng.jobs.get(j.id)
            if r is None:
                continue
            iv = r.interval_at_submit
            outcomes.append(JobOutcome(j.id, j.tenant, j.devices, j.duration_s, r.submitted_at, r.first_started_at,
                                       r.ended_at, r.estimate_at_submit, r.lost_s,
                                       None if iv is None else iv[0], None if iv is None else iv[1],
                                       None if iv is None else iv[2]))
        cap = sum(eng.pool_capacity(p) for p in eng.pools)
        start = min((o.submit_s for o in outcomes), default=0.0)
        end = max((o.end_s or 0.0 for o in outcomes), default=0.0)
        busy = sum(u.device_seconds for u in eng.meter.totals(eng.now).values())
        return SimResult(outcomes, cap, max(end - start, 0.0), busy, self.cycles)
