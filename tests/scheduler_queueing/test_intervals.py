"""Wait intervals: p50 / p90 from the spread of the durations the history predicts for the
jobs ahead (``_intervals``); exact with declared durations; reporting only (no decision moves)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from accel.scheduler.queueing import (
    HistoryEstimator,
    HistoryModel,
    JobSpec,
    Policy,
    QueueingScheduler,
    Simulator,
    load_philly,
    uniform_cluster,
)
from accel.scheduler.queueing._intervals import WorkSpread, lognormal_interval

FIX = Path(__file__).resolve().parent / "fixtures" / "trace_2869ce_head.csv"


def test_history_spread_is_the_moments_of_the_capped_residual() -> None:
    m = HistoryModel(window=None, statistic="mean")
    vals = [100.0, 200.0, 400.0, 1000.0]
    for v in vals:
        m.observe(("vc", 1), v)
    mean, var = m.spread(("vc", 1)) or (0.0, 0.0)
    assert mean == pytest.approx(statistics.fmean(vals))
    assert var == pytest.approx(statistics.pvariance(vals))
    # residual given 150 s done, capped at 500 s of total work: min(D, 500) - 150 over D > 150
    ys = [min(v, 500.0) - 150.0 for v in vals if v > 150.0]
    mean, var = m.spread(("vc", 1), 150.0, 500.0) or (0.0, 0.0)
    assert mean == pytest.approx(statistics.fmean(ys))
    assert var == pytest.approx(statistics.pvariance(ys))
    assert m.spread(("other", 2)) is None  # no history at any level (use_global off)


def test_lognormal_interval_is_exact_without_spread_and_ordered_with_it() -> None:
    assert lognormal_interval(600.0, 0.0) == (600.0, 600.0)
    p50, p90 = lognormal_interval(600.0, 0.8)
    assert p50 < 600.0 < p90
    # the log-normal with mean 600 and log-spread s: its median and 90% quantile
    assert p50 == pytest.approx(600.0 * math.exp(-0.32))
    assert p90 == pytest.approx(600.0 * math.exp(1.2815515655446004 * 0.8 - 0.32))
    w = WorkSpread()
    w.add(2, 100.0, 100.0**2)
    w.add(1, 300.0, 0.0)
    assert w.mean_s == pytest.approx(500.0) and w.var_s2 == pytest.approx(4 * 100.0**2)
    assert w.log_spread() == pytest.approx(math.sqrt(math.log1p(40_000.0 / 250_000.0)))


def test_declared_durations_give_a_point_interval() -> None:
    eng = QueueingScheduler(uniform_cluster(1, 4), Policy())
    eng.submit(JobSpec("a", "t", 4, "", estimate_s=1000.0), 0.0)
    eng.cycle(0.0)
    eng.submit(JobSpec("b", "t", 4, "", estimate_s=500.0), 10.0)
    (est,) = eng.estimate("b", 10.0)
    assert est.wait_s == pytest.approx(990.0)
    assert est.p50_s == est.p90_s == pytest.approx(990.0)
    assert est.basis.startswith("declared")


def test_history_gives_a_spread_interval_around_the_plan() -> None:
    model = HistoryModel(window=64, statistic="mean")
    for d in (200.0, 500.0, 1000.0, 3000.0, 8000.0):
        model.observe(("t", 4), d)
    eng = QueueingScheduler(uniform_cluster(1, 4), Policy(), durations=model)
    for i in range(3):
        eng.submit(JobSpec(f"q{i}", "t", 4, "", estimate_s=model.mean(("t", 4), 3600.0)), 0.0)
    eng.cycle(0.0)
    (est,) = eng.estimate("q2", 0.0)
    assert est.p50_s is not None and est.p90_s is not None
    assert est.p50_s < est.wait_s < est.p90_s
    assert est.log_spread > 0 and "history" in est.basis
    assert "p90" in est.describe()


def test_intervals_are_reporting_only_and_recorded_at_submission() -> None:
    jobs = load_philly(FIX, tenant="2869ce")[:120]

    def run(spread: float) -> list[tuple[object, ...]]:
        model = HistoryModel(window=64, statistic="mean")
        eng = QueueingScheduler(uniform_cluster(4, 8), Policy(), durations=model)
        eng.interval_spread = spread
        res = Simulator(eng, jobs, HistoryEstimator(model)).run()
        return [(o.id, o.start_s, o.end_s, o.estimate_s, o.estimate_p50_s, o.estimate_p90_s, o.estimate_log_spread)
                for o in res.outcomes]

    a, b = run(1.0), run(2.0)
    assert [r[:4] for r in a] == [r[:4] for r in b]  # same schedule and planned estimates
    assert [r[6] for r in a] == [r[6] for r in b]  # the log-spread does not depend on ``spread``
    waited = [r for r in a if r[4] is not None and r[6]]
    assert waited, "some job should have waited behind jobs with a history spread"
    for r in waited:
        assert r[4] <= r[5]  # p50 start <= p90 start
