"""Wait intervals: p50 / p90 from the spread of the durations the history predicts for the
jobs ahead, calibrated by the empirical quantiles of actual / planned wait (``_intervals``);
exact with declared durations; reporting only (no decision moves)."""

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
from accel.scheduler.queueing._intervals import (
    DEFAULT_CALIBRATION,
    IntervalCalibration,
    WorkSpread,
    calibration_from_json,
    fit_calibration,
    lognormal_interval,
)

WIDE = IntervalCalibration((0.5,), (), {(0, 0): 0.0, (1, 0): 0.1}, {(0, 0): 0.7, (1, 0): 1.5}, (0.0, 1.0), 60.0,
                           "test")

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


def test_history_gives_a_calibrated_interval_from_the_plan_and_spread() -> None:
    model = HistoryModel(window=64, statistic="mean")
    for d in (200.0, 500.0, 1000.0, 3000.0, 8000.0):
        model.observe(("t", 4), d)
    eng = QueueingScheduler(uniform_cluster(1, 4), Policy(), durations=model)
    eng.interval_calibration = WIDE
    for i in range(3):
        eng.submit(JobSpec(f"q{i}", "t", 4, "", estimate_s=model.mean(("t", 4), 3600.0)), 0.0)
    eng.cycle(0.0)
    (est,) = eng.estimate("q2", 0.0)
    assert est.p50_s is not None and est.p90_s is not None
    assert est.log_spread > 0.5 and "history" in est.basis and "test" in est.basis
    # s above the 0.5 edge: stratum 1, log quantiles 0.1 and 1.5 of (wait + 60) / (plan + 60)
    assert est.p50_s == pytest.approx((est.wait_s + 60.0) * math.exp(0.1) - 60.0)
    assert est.p90_s == pytest.approx((est.wait_s + 60.0) * math.exp(1.5) - 60.0)
    assert est.wait_s < est.p50_s < est.p90_s
    assert "p90" in est.describe()
    # the engine default applies when no calibration is set
    eng.interval_calibration = None
    (d,) = eng.estimate("q2", 0.0)
    assert (d.p50_s, d.p90_s) == pytest.approx(DEFAULT_CALIBRATION.interval(d.wait_s, d.log_spread, 4))


def test_calibration_maps_strata_and_falls_back() -> None:
    cal = IntervalCalibration((0.5, 2.0), (2, 9), {(1, 1): 0.0}, {(1, 1): math.log(2.0)}, (0.0, math.log(3.0)))
    assert cal.stratum(0.0, 1) == (0, 0) and cal.stratum(0.5, 2) == (0, 1)
    assert cal.stratum(0.6, 8) == (1, 1) and cal.stratum(5.0, 16) == (2, 2)
    assert cal.interval(140.0, 1.0, 4) == pytest.approx((140.0, 200.0 * 2 - 60.0))
    assert cal.interval(140.0, 0.1, 4) == pytest.approx((140.0, 200.0 * 3 - 60.0))  # absent stratum: fallback
    assert cal.interval(0.0, 1.0, 4)[0] == 0.0 and cal.interval(-5.0, 1.0, 4)[0] == 0.0
    assert cal.interval(math.inf, 1.0, 4) == (math.inf, math.inf)
    assert calibration_from_json(cal.to_json()) == cal
    with pytest.raises(ValueError, match="q50 <= q90"):
        IntervalCalibration((), (), {(0, 0): 1.0}, {(0, 0): 0.5}, (0.0, 0.0))
    with pytest.raises(ValueError, match="tau_s"):
        IntervalCalibration((), (), {}, {}, (0.0, 0.0), tau_s=0.0)


def test_fit_recovers_the_quantiles_per_stratum() -> None:
    # low-spread waiters start at the plan x 1..2, high-spread ones at x 1..10: each stratum gets
    # its own empirical quantiles of log((wait + tau) / (plan + tau)), weighted
    samples = []
    for i in range(100):
        f = 1 + i / 99
        samples.append((1000.0, 0.1, 1, (1000.0 + 60.0) * f - 60.0, 1.0))
        g = 1 + 9 * i / 99
        samples.append((1000.0, 3.0, 8, (1000.0 + 60.0) * g - 60.0, 1.0))
    cal = fit_calibration(samples, 2, label="t")
    assert cal.s_edges == (0.1,)  # bins: s <= 0.1, s > 0.1
    lo, hi = cal.interval(1000.0, 0.1, 1), cal.interval(1000.0, 3.0, 8)
    assert lo[0] == pytest.approx(1060.0 * (1 + 49 / 99) - 60.0)
    assert lo[1] == pytest.approx(1060.0 * (1 + 89 / 99) - 60.0)
    assert hi[1] == pytest.approx(1060.0 * (1 + 9 * 89 / 99) - 60.0)
    # coverage on its own training data: 90% of each stratum at or below p90
    for s in (0.1, 3.0):
        p90 = cal.interval(1000.0, s, 1)[1]
        assert sum(w <= p90 + 1e-6 for p, ss, _, w, _ in samples if ss == s) == 90
    # too few samples in a stratum: pooled quantiles
    tiny = fit_calibration(samples, 2, min_stratum=101)
    assert not tiny.log_q50 and tiny.interval(1000.0, 3.0, 8) == tiny.interval(1000.0, 0.1, 1)
    # weights move the quantile: the high-spread half weighted 0 leaves the low half's fallback
    half = fit_calibration([(p, s, d, w, 1.0 if s < 1 else 1e-9) for p, s, d, w, _ in samples], 1)
    assert math.log(1 + 89 / 99) <= half.fallback[1] <= math.log(1 + 90 / 99) + 1e-12
    with pytest.raises(ValueError, match="no usable samples"):
        fit_calibration([(math.nan, 0.0, 1, 10.0, 1.0)], 2)


def test_intervals_are_reporting_only_and_recorded_at_submission() -> None:
    jobs = load_philly(FIX, tenant="2869ce")[:120]

    def run(cal: IntervalCalibration | None) -> list[tuple[object, ...]]:
        model = HistoryModel(window=64, statistic="mean")
        eng = QueueingScheduler(uniform_cluster(4, 8), Policy(), durations=model)
        eng.interval_calibration = cal
        res = Simulator(eng, jobs, HistoryEstimator(model)).run()
        return [(o.id, o.start_s, o.end_s, o.estimate_s, o.estimate_p50_s, o.estimate_p90_s, o.estimate_log_spread)
                for o in res.outcomes]

    a, b = run(None), run(WIDE)
    assert [r[:4] for r in a] == [r[:4] for r in b]  # same schedule and planned estimates
    assert [r[6] for r in a] == [r[6] for r in b]  # the log-spread does not depend on the calibration
    assert [r[5] for r in a] != [r[5] for r in b]  # while the p90 does
    waited = [r for r in a if r[4] is not None and r[6]]
    assert waited, "some job should have waited behind jobs with a history spread"
    for r in waited:
        assert r[4] <= r[5]  # p50 start <= p90 start


def test_default_calibration_is_the_protocol_reports_fit() -> None:
    import json

    root = Path(__file__).resolve().parents[2]
    path = root / "benchmarks" / "philly" / "results" / "intervals-n2000" / "calibration.json"
    assert calibration_from_json(json.loads(path.read_text())) == DEFAULT_CALIBRATION
