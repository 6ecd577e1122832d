"""The interval calibration's leave-one-VC-out rule (``benchmarks/philly/cv_intervals.py``,
protocol v2): a fold reads no waiter of its held-out VC, and the rule prefers configurations
whose inner folds cover 85-95%."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from accel.scheduler.queueing import JobOutcome

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cvi() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks" / "philly"))
    try:
        import cv_intervals as mod
    finally:
        sys.path.pop(0)
    return mod


def synthetic(cvi: Any, seed: int, n: int = 80) -> list[Any]:
    """Waiters whose start / plan ratio spreads more when the log-spread is larger."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = rng.choice((0.2, 2.0))
        plan = rng.uniform(300.0, 5000.0)
        ratio = math.exp(rng.gauss(0.0, 0.3 if s < 1 else 1.5))
        out.append(cvi.Waiter(plan, s, rng.choice((1, 4, 16)), max(60.0, (plan + 60.0) * ratio - 60.0)))
    return out


class Guarded(dict[str, Any]):
    """Raises if the held-out VC's waiters are read."""

    def __init__(self, data: dict[str, Any], forbidden: str) -> None:
        super().__init__(data)
        self.forbidden = forbidden

    def __getitem__(self, k: str) -> Any:
        if k == self.forbidden:
            raise AssertionError(f"fold read the held-out VC {k}")
        return super().__getitem__(k)


def test_fold_reads_no_held_out_waiter_and_covers_in_band(cvi: Any) -> None:
    hist = {f"vc{i}": synthetic(cvi, i) for i in range(5)}
    train = list(hist)
    cfg, cal, table = cvi.fold(Guarded(hist, "vc0"), train, "vc0")
    assert cal is not None and cfg in cvi.GRID and set(table) == set(cvi.GRID)
    hits, _err, cover = table[cfg]
    assert set(cover) == {"vc1", "vc2", "vc3", "vc4"}  # the inner folds are the training VCs only
    assert hits == max(t[0] for t in table.values()) and hits >= 3
    sc = cvi.scores(hist["vc0"], cal)
    assert 0.8 <= sc["cover_p90"] <= 1.0 and sc["n"] == 80
    # an evaluation-only VC (not in the training list) is read by no fold either
    cfg2, _, _ = cvi.fold(Guarded(hist, "vc4"), train[:4], "vc4")
    assert cfg2 in cvi.GRID


def test_waiters_take_the_plan_and_spread_at_submission(cvi: Any) -> None:
    outs = [JobOutcome("a", "t", 2, 100.0, 0.0, 600.0, 700.0, 300.0, 0.0, 200.0, 900.0, 0.7),
            JobOutcome("b", "t", 2, 100.0, 0.0, 30.0, 130.0, 10.0, 0.0, None, None, None),  # waited < 1 min
            JobOutcome("c", "t", 2, 100.0, 0.0, 600.0, 700.0, None, 0.0, None, None, None)]  # no estimate
    (w,) = cvi.waiters(outs)
    assert (w.plan_s, w.s, w.devices, w.wait_s) == (300.0, 0.7, 2, 600.0)
    assert cvi.scores([w], None) == {"n": 1.0, "p50_err": 0.5, "cover_p90": 0.0, "at_or_below_p50": 0.0}


def test_kaplan_meier_quantiles_count_the_censored(cvi: Any) -> None:
    assert cvi.km_quantiles([(1.0, True), (2.0, True), (3.0, True), (4.0, True)], (0.5, 0.9)) == [2.0, 4.0]
    # censored at 2: the event at 3 carries the remaining mass, so the median moves up to 3
    assert cvi.km_quantiles([(1.0, True), (2.0, False), (3.0, True), (4.0, True)], (0.5, 0.9)) == [3.0, 4.0]
    # never reaching 0.5: the largest value seen
    assert cvi.km_quantiles([(1.0, True), (2.0, False), (3.0, False), (4.0, False)], (0.5,)) == [4.0]


def test_online_calibrations_read_no_start_after_submission(cvi: Any) -> None:
    # 40 earlier jobs planned 540 s; those that started before t=10,000 waited 540 s (ratio 1),
    # those still waiting then start much later: v3 must ignore them, v4 counts them censored
    outs = [JobOutcome(f"e{i}", "t", 1, 10.0, float(i), float(i) + 540.0, float(i) + 550.0, float(i) + 540.0, 0.0)
            for i in range(40)]
    late = [JobOutcome(f"l{i}", "t", 1, 10.0, 9000.0 + i, 50_000.0, 50_010.0, 9540.0 + i, 0.0) for i in range(40)]
    target = JobOutcome("x", "t", 1, 10.0, 10_000.0, 10_600.0, 10_610.0, 10_540.0, 0.0)
    (w,) = cvi.waiters([target])

    def answer(fn: Any, later_start: float) -> tuple[float, float]:
        moved = [JobOutcome(o.id, o.tenant, o.devices, o.duration_s, o.submit_s, later_start, later_start + 10,
                            o.estimate_s, 0.0) for o in late]
        (iv,) = fn([*outs, *moved, target], [w], None)
        return iv  # type: ignore[no-any-return]

    assert answer(cvi.online_intervals, 50_000.0) == answer(cvi.online_intervals, 90_000.0) == (540.0, 540.0)
    assert answer(cvi.online_km_intervals, 50_000.0) == answer(cvi.online_km_intervals, 90_000.0)
    p50, p90 = answer(cvi.online_km_intervals, 50_000.0)
    # half the window started at ratio 1 (p50 stays at the plan); the other half, still waiting
    # after 961-1000 s (censored), keeps the 90% quantile above the plan: the largest value seen
    assert p50 == pytest.approx(540.0)
    assert p90 == pytest.approx((540.0 + 60.0) * (1000.0 + 60.0) / (540.0 + 60.0) - 60.0)


def test_monte_carlo_levels_rule(cvi: Any) -> None:
    # protocol v5: a90 is the level whose pooled training coverage is closest to 0.9, a50 the one
    # with the smallest median p50 error; the scenario waits are 0..31 s + 100, so a level's p90
    # is 100 + 31 x level, and every actual wait is 100 + 31 x u for u on a grid of 0.01 steps
    draws = [100.0 + i for i in range(32)]
    waiters = [(cvi.Waiter(100.0, 0.0, 1, 100.0 + 31.0 * u / 100), draws) for u in range(101)]
    a50, a90, table = cvi.choose_levels({"x": waiters})
    assert a90 == 0.9 and table["a90=0.9 coverage"] == pytest.approx(91 / 101, abs=1e-4)
    # starts close to the scenarios' 60% quantile: a50 = 0.6
    near = [(cvi.Waiter(100.0, 0.0, 1, 100.0 + 31.0 * (0.58 + u / 1000)), draws) for u in range(41)]
    assert cvi.choose_levels({"x": near})[0] == 0.6
    assert a50 in (0.3, 0.4, 0.5, 0.6, 0.7)
    assert cvi.mc_interval(draws, 0.5, 1.0) == pytest.approx((115.5, 131.0))
    # most starts after every scenario: the top of the grid covers the most
    late = [(cvi.Waiter(100.0, 0.0, 1, 500.0), draws)] * 10 + [(cvi.Waiter(100.0, 0.0, 1, 131.0), draws)]
    assert cvi.choose_levels({"x": late})[1] == 1.0
    # every start after every scenario: all levels tie at coverage 0, the lower wins
    assert cvi.choose_levels({"x": late[:10]})[1] == 0.8
    # nothing to read: the defaults
    assert cvi.choose_levels({})[:2] == (0.5, 0.9)


def test_monte_carlo_replays_round_trip_through_the_shared_cache(cvi: Any, tmp_path: Path) -> None:
    cv = cvi.cv
    key = cv.RunKey("vc1", "conservative", 3600.0, None, "history", 64, 2000, 0.0, "h")
    outcome = JobOutcome("j1", "t", 1, *([1.0] * 9))
    run = cvi.McRun(key, [outcome], 32, 1.0, 2.0, 3, 4, 5.0)
    cvi._save_mc(run, tmp_path, cvi.DEFAULT_MONTE_CARLO)
    assert cvi._load_mc(key, tmp_path, cvi.DEFAULT_MONTE_CARLO) == run
    other = dataclasses.replace(key, vc="vc2")
    assert cvi._load_mc(other, tmp_path, cvi.DEFAULT_MONTE_CARLO) is None  # another key: not this file
    (tmp_path / cvi._mc_name(key, cvi.DEFAULT_MONTE_CARLO)).write_bytes(b"not gzip")
    assert cvi._load_mc(key, tmp_path, cvi.DEFAULT_MONTE_CARLO) is None  # unreadable: recomputed, not trusted
