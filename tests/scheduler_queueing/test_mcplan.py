"""Monte-Carlo plans (``_mcplan``): scenarios of the durations ahead, replanned, give p50 / p90."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from accel.scheduler.queueing import (
    BackfillMode,
    HistoryEstimator,
    HistoryModel,
    JobSpec,
    Policy,
    QueueingScheduler,
    Simulator,
    load_philly,
    uniform_cluster,
)
from accel.scheduler.queueing._intervals import DEFAULT_CALIBRATION, DEFAULT_MONTE_CARLO
from accel.scheduler.queueing._mcplan import MonteCarloPlan

FIX = Path(__file__).resolve().parent / "fixtures" / "trace_2869ce_head.csv"
CONSERVATIVE = Policy(backfill=BackfillMode.CONSERVATIVE)
TIERED = Policy(backfill=BackfillMode.CONSERVATIVE, demote_after_device_s=(3600.0,))


def _engine(policy: Policy, durations: list[float], mc: MonteCarloPlan) -> QueueingScheduler:
    model = HistoryModel(window=64, statistic="mean")
    for d in durations:
        model.observe(("t", 2), d)
    eng = QueueingScheduler(uniform_cluster(1, 4), policy, durations=model)
    eng.interval_calibration = dataclasses.replace(DEFAULT_CALIBRATION, monte_carlo=mc)
    mean = model.mean(("t", 2), 3600.0)
    for i in range(2):  # two running jobs of 2 devices, started at 0
        eng.submit(JobSpec(f"r{i}", "t", 2, "", estimate_s=mean), 0.0)
    eng.cycle(0.0)
    for i in range(5):  # five queued behind them
        eng.submit(JobSpec(f"q{i}", "t", 2, "", estimate_s=mean), 100.0 + i)
    eng.cycle(110.0)
    return eng


@pytest.mark.parametrize("policy", [CONSERVATIVE, TIERED], ids=["plain", "tiered"])
def test_without_spread_every_scenario_is_the_plan(policy: Policy) -> None:
    # every duration of the key equal: each draw is the booked hold, so each scenario replays
    # the kept plan exactly and p50 = p90 = the point estimate
    seen: list[tuple[str, float, dict[str, np.ndarray]]] = []
    mc = dataclasses.replace(DEFAULT_MONTE_CARLO, sink=lambda j, t, w: seen.append((j, t, dict(w))))
    eng = _engine(policy, [1000.0] * 8, mc)
    (est,) = eng.estimate("q4", 120.0)
    assert est.wait_s > 0 and "Monte-Carlo" in est.basis
    assert est.p50_s == pytest.approx(est.wait_s) and est.p90_s == pytest.approx(est.wait_s)
    job, t, waits = seen[-1]
    assert (job, t) == ("q4", 120.0) and np.allclose(waits[est.pool], est.wait_s)


@pytest.mark.parametrize("policy", [CONSERVATIVE, TIERED], ids=["plain", "tiered"])
def test_scenarios_spread_the_interval_deterministically(policy: Policy) -> None:
    durations = [100.0, 300.0, 600.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0]
    eng = _engine(policy, durations, DEFAULT_MONTE_CARLO)
    (a,) = eng.estimate("q4", 120.0)
    (b,) = eng.estimate("q4", 120.0)
    assert (a.p50_s, a.p90_s) == (b.p50_s, b.p90_s)  # seeded by the job id: the same answer
    assert a.p50_s is not None and a.p90_s is not None and a.p50_s < a.p90_s
    assert "Monte-Carlo" in a.basis
    # an estimate with an explicit depth is not the kept plan's: the calibration table answers
    (c,) = eng.estimate("q4", 120.0, depth=1)
    assert "calibrated" in c.basis and "Monte-Carlo" not in c.basis
    # no Monte-Carlo part configured: the table answers too
    eng.interval_calibration = dataclasses.replace(DEFAULT_CALIBRATION, monte_carlo=None)
    (d,) = eng.estimate("q4", 120.0)
    assert "Monte-Carlo" not in d.basis and d.wait_s == a.wait_s


def test_more_spread_widens_the_interval() -> None:
    mc = MonteCarloPlan(p50_level=0.1, p90_level=0.9)  # the 10-90% range of the scenario waits
    narrow = _engine(CONSERVATIVE, [900.0, 1000.0, 1100.0] * 3, mc)
    wide = _engine(CONSERVATIVE, [100.0, 1000.0, 1900.0] * 3, mc)
    (n,) = narrow.estimate("q4", 120.0)
    (w,) = wide.estimate("q4", 120.0)
    assert n.p90_s is not None and n.p50_s is not None and w.p90_s is not None and w.p50_s is not None
    assert w.p90_s - w.p50_s > n.p90_s - n.p50_s


def test_monte_carlo_is_reporting_only() -> None:
    jobs = load_philly(FIX, tenant="2869ce")[:120]

    def run(mc: MonteCarloPlan | None) -> list[tuple[object, ...]]:
        model = HistoryModel(window=64, statistic="mean")
        eng = QueueingScheduler(uniform_cluster(4, 8), TIERED, durations=model)
        eng.interval_calibration = dataclasses.replace(DEFAULT_CALIBRATION, monte_carlo=mc)
        res = Simulator(eng, jobs, HistoryEstimator(model)).run()
        return [(o.id, o.start_s, o.end_s, o.estimate_s, o.estimate_p50_s, o.estimate_p90_s) for o in res.outcomes]

    a, b = run(DEFAULT_MONTE_CARLO), run(None)
    assert [r[:4] for r in a] == [r[:4] for r in b]  # the same schedule and planned estimates
    assert [r[4:] for r in a] != [r[4:] for r in b]  # the intervals differ
    for r in a:
        if r[4] is not None and r[5] is not None:
            assert r[4] <= r[5]


def test_history_draws_are_residual_lives() -> None:
    model = HistoryModel(window=64, statistic="mean", min_samples=3)
    for d in (10.0, 20.0, 30.0, 40.0, 50.0):
        model.observe(("t", 1), d)
    model.observe(("t", 2), 1000.0)
    rng = np.random.default_rng(0)
    x = model.draw(("t", 1), 25.0, math.inf, rng, 200)
    assert x is not None and set(np.round(x, 6)) == {5.0, 15.0, 25.0}  # D in {30, 40, 50}, minus 25
    x = model.draw(("t", 1), 25.0, 45.0, rng, 200)
    assert x is not None and set(np.round(x, 6)) == {5.0, 15.0, 20.0}  # capped at 45
    # (t, 2) has one duration, fewer than min_samples: backs off to the tenant's six
    x = model.draw(("t", 2), 0.0, math.inf, rng, 400)
    assert x is not None and set(np.round(x, 6)) == {10.0, 20.0, 30.0, 40.0, 50.0, 1000.0}
    assert model.draw(("u", 1), 0.0, math.inf, rng, 4) is None  # no history at all
    assert model.draw(("t", 1), 5000.0, math.inf, rng, 4) is None  # nothing outlived it


def test_monte_carlo_plan_checks_and_quantiles() -> None:
    with pytest.raises(ValueError, match="draws"):
        MonteCarloPlan(draws=0)
    with pytest.raises(ValueError, match="levels"):
        MonteCarloPlan(p50_level=0.9, p90_level=0.5)
    mc = MonteCarloPlan(p50_level=0.5, p90_level=0.9)
    assert mc.interval(np.arange(11.0)) == pytest.approx((5.0, 9.0))
    assert mc.interval(np.array([1.0, 2.0, math.inf])) == (2.0, math.inf)
    with pytest.raises(ValueError, match="no scenario"):
        mc.interval(np.array([]))


def test_default_levels_are_the_protocol_reports_choice() -> None:
    import json

    root = Path(__file__).resolve().parents[2]
    got = json.loads((root / "benchmarks" / "philly" / "results" / "intervals-mc-n2000" / "levels.json").read_text())
    mc = DEFAULT_MONTE_CARLO
    assert (mc.p50_level, mc.p90_level, mc.draws, mc.depth, mc.seed) == (
        got["p50_level"], got["p90_level"], got["draws"], got["depth"], got["seed"])
    # Opt-in: the calibrated plan stays the default (it covered more on the same replays, v5).
    assert DEFAULT_CALIBRATION.monte_carlo is None
