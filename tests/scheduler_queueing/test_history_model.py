"""HistoryModel behaviour: it learns only from finished jobs, backs off from (tenant, size) to
the tenant and to every job, shrinks toward the coarser estimate, conditions running jobs on
their elapsed time, and in a replay never sees a duration before that job has ended."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from accel.scheduler.queueing import (
    BackfillMode,
    HistoryEstimator,
    HistoryModel,
    InClassOrder,
    Policy,
    PriorityClass,
    QueueingScheduler,
    Simulator,
    TraceJob,
    load_philly,
    uniform_cluster,
)

FIX = Path(__file__).resolve().parent / "fixtures" / "trace_2869ce_head.csv"


def test_statistics_of_the_matching_history() -> None:
    vals = (100.0, 200.0, 300.0, 10_000.0)
    for stat, want in (("median", 250.0), ("mean", statistics.fmean(vals)), ("p75", 300.0),
                       ("gmean", math.exp(statistics.fmean(math.log(v) for v in vals)))):
        m = HistoryModel(statistic=stat)
        for d in vals:
            m.observe(("vc", 1), d)
        assert m.mean(("vc", 1), 5.0) == pytest.approx(want)
    with pytest.raises(ValueError):
        HistoryModel(statistic="mode")
    with pytest.raises(ValueError):
        HistoryModel(statistic="p100")


def test_window_keeps_only_the_latest_finished_jobs() -> None:
    m = HistoryModel(window=2, statistic="mean")
    for d in (10_000.0, 100.0, 300.0):
        m.observe(("vc", 1), d)
    assert m.mean(("vc", 1), 5.0) == 200.0
    assert HistoryModel(window=None).window is None
    with pytest.raises(ValueError):
        HistoryModel(window=0)


def test_backs_off_from_size_to_tenant_to_global() -> None:
    m = HistoryModel(statistic="mean", min_samples=2, use_global=True)
    assert m.mean(("a", 4), 777.0) == 777.0  # nothing finished anywhere: the default
    m.observe(("b", 1), 50.0)
    assert m.mean(("a", 4), 777.0) == 50.0  # tenant a unknown: every job's history
    m.observe(("a", 1), 100.0)
    m.observe(("a", 1), 300.0)
    assert m.mean(("a", 4), 777.0) == 200.0  # size 4 unknown in a: a's history
    m.observe(("a", 4), 1000.0)
    assert m.mean(("a", 4), 777.0) == pytest.approx(1400.0 / 3)  # one sample < min_samples: a's (100, 300, 1000)
    m.observe(("a", 4), 2000.0)
    assert m.mean(("a", 4), 777.0) == 1500.0  # enough samples at the finest key
    # without use_global another tenant's jobs never leak in
    m2 = HistoryModel()
    m2.observe(("b", 1), 50.0)
    assert m2.mean(("a", 4), 777.0) == 777.0


def test_shrinks_toward_the_coarser_estimate_with_few_samples() -> None:
    m = HistoryModel(statistic="median", shrink=1.0)
    for d in (100.0, 100.0, 100.0):
        m.observe(("a", 1), d)
    m.observe(("a", 8), 10_000.0)
    # tenant median of (100, 100, 100, 10000) = 100; one sample at (a, 8): weight 1/2 in log space
    assert m.mean(("a", 8), 5.0) == pytest.approx(math.sqrt(100.0 * 10_000.0))
    for _ in range(98):
        m.observe(("a", 8), 10_000.0)
    assert m.mean(("a", 8), 5.0) == pytest.approx(10_000.0, rel=0.02)  # many samples: the key's own answer


def test_running_job_residual_conditions_on_elapsed_time() -> None:
    m = HistoryModel(statistic="mean")
    for d in (100.0, 200.0, 10_000.0):
        m.observe(("vc", 1), d)
    assert m.remaining(("vc", 1), 3600.0, 0.0, 600.0) == 3600.0  # not started: the declaration stands
    assert m.remaining(("vc", 1), 3600.0, 150.0, 600.0) == pytest.approx((50.0 + 9850.0) / 2)  # E[D-t | D>t]
    assert m.remaining(("vc", 1), 3600.0, 20_000.0, 600.0) == 20_000.0  # older than all: as long again
    assert m.remaining(("new", 1), 3600.0, 1000.0, 600.0) == 2600.0  # no history: the declaration
    replan = HistoryModel(statistic="median", plan_statistic="mean", replan=True)
    replan.observe(("vc", 1), 100.0)
    replan.observe(("vc", 1), 500.0)
    assert replan.mean(("vc", 1), 5.0) == 300.0
    assert replan.remaining(("vc", 1), 9999.0, 0.0, 600.0) == 300.0  # queued: re-predicted from today's history


class _SpyModel(HistoryModel):
    """Records the simulated time of every observation (the engine's clock)."""

    def __init__(self, engine_clock: list[float], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.clock = engine_clock
        self.seen: list[tuple[float, float]] = []  # (time observed, duration)

    def observe(self, key: tuple[str, int], duration_s: float) -> None:
        self.seen.append((self.clock[0], duration_s))
        super().observe(key, duration_s)


class _SpyEstimator(HistoryEstimator):
    def __init__(self, model: _SpyModel) -> None:
        super().__init__(model)
        self.calls: list[tuple[TraceJob, int]] = []

    def estimate(self, job: TraceJob) -> float:
        assert isinstance(self.model, _SpyModel)
        self.calls.append((job, len(self.model.seen)))
        return super().estimate(job)


def test_replay_never_sees_a_duration_before_that_job_ended() -> None:
    jobs = load_philly(FIX, tenant="2869ce")
    clock = [0.0]
    model = _SpyModel(clock, statistic="mean")
    policy = Policy(classes=(PriorityClass("default", 0, InClassOrder.SHORTEST, band_ratio=4.0),),
                    backfill=BackfillMode.CONSERVATIVE)
    eng = QueueingScheduler(uniform_cluster(4, 8), policy, durations=model)
    est = _SpyEstimator(model)
    sim = Simulator(eng, jobs, est)
    while True:
        clock[0] = sim._heap[0][0] if sim._heap else clock[0]
        if not sim.step():
            break
    res = sim.result()
    ends = sorted(o.end_s for o in res.outcomes if o.end_s is not None)
    assert len(ends) == len(jobs)
    # every observation is a job that had ended by then: the k-th observation happens no
    # earlier than the k-th end
    for k, (t, d) in enumerate(model.seen):
        assert ends[k] <= t + 1e-6
        assert any(o.end_s == pytest.approx(t) and o.duration_s == pytest.approx(d) for o in res.outcomes)
    # a job's declared estimate at submission uses only jobs finished before it arrived
    for job, n_seen in est.calls:
        assert all(t <= job.submit_s + 1e-6 for t, _ in model.seen[:n_seen])
        assert sum(1 for e in ends if e <= job.submit_s) >= n_seen


def test_km_mean_recovers_a_known_mean_from_censored_data() -> None:
    """Exponential durations (mean 1000 s) with an observation cut-off: the finished-only mean
    is biased short (survivorship), the Kaplan-Meier mean with running jobs censored is not."""
    import random

    rng = random.Random(7)
    now = 1500.0
    finished: list[float] = []
    running: list[float] = []
    for _ in range(4000):
        start = rng.uniform(0.0, now)
        d = rng.expovariate(1 / 1000.0)
        (finished if start + d <= now else running).append(d if start + d <= now else now - start)
    plain = HistoryModel(window=None, statistic="mean")
    for m in (plain,):
        for d in finished:
            m.observe(("vc", 1), d)
    assert plain.mean(("vc", 1), 1.0) < 700.0  # survivorship bias: the long ones are still running
    for tail, tol in (("exp", 0.08), ("restricted", 0.25)):
        km = HistoryModel(window=None, statistic="km-mean", km_tail=tail)
        km.attach(lambda: now, lambda: [(("vc", 1), e) for e in running])
        for d in finished:
            km.observe(("vc", 1), d)
        assert km.mean(("vc", 1), 1.0) == pytest.approx(1000.0, rel=tol)
        if tail == "exp":
            # memoryless: the expected residual of a job that already ran 500 s is still ~1000 s
            assert km.remaining(("vc", 1), 1.0, 500.0, 60.0) == pytest.approx(1000.0, rel=0.15)
    # not attached: no censored observations, the plain finished-only mean
    lone = HistoryModel(window=None, statistic="km-mean")
    for d in finished:
        lone.observe(("vc", 1), d)
    assert lone.mean(("vc", 1), 1.0) == pytest.approx(plain.mean(("vc", 1), 1.0))
    with pytest.raises(ValueError):
        HistoryModel(statistic="km-mean", km_tail="pareto")


def test_km_replay_reads_only_observable_data() -> None:
    jobs = load_philly(FIX, tenant="2869ce")
    truth = {j.id: j.duration_s for j in jobs}
    clock = [0.0]
    model = _SpyModel(clock, statistic="km-mean", window=None, km_tail="exp")
    policy = Policy(classes=(PriorityClass("default", 0, InClassOrder.SHORTEST, band_ratio=4.0),),
                    backfill=BackfillMode.CONSERVATIVE)
    eng = QueueingScheduler(uniform_cluster(4, 8), policy, durations=model)
    censuses: list[tuple[float, list[tuple[str, float]]]] = []

    def census() -> list[tuple[tuple[str, int], float]]:
        out = [(j.id, j.progress(eng.now)) for j in eng.running()]
        censuses.append((eng.now, out))
        return [((eng.jobs[i].spec.tenant, eng.jobs[i].spec.devices), e) for i, e in out]

    model.attach(lambda: eng.now, census)
    est = _SpyEstimator(model)
    sim = Simulator(eng, jobs, est)
    while True:
        clock[0] = sim._heap[0][0] if sim._heap else clock[0]
        if not sim.step():
            break
    res = sim.result()
    starts = {o.id: o.start_s for o in res.outcomes}
    ends = sorted(o.end_s for o in res.outcomes if o.end_s is not None)
    assert censuses, "km-mean never consulted the running jobs"
    for now, rows in censuses:
        for jid, elapsed in rows:
            st = starts[jid]
            assert st is not None and st <= now + 1e-6
            # an elapsed time is what the clock shows: never more than the job's true duration
            assert elapsed == pytest.approx(now - st) and elapsed <= truth[jid] + 1e-6
    for k, (t, _) in enumerate(model.seen):
        assert ends[k] <= t + 1e-6
    for job, n_seen in est.calls:
        assert all(t <= job.submit_s + 1e-6 for t, _ in model.seen[:n_seen])
