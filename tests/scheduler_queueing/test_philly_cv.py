"""benchmarks/philly/cv.py: leave-one-VC-out fold logic, the cluster sizing rule, the run cache."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import math
import os
import random
import statistics
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from accel.scheduler import InvalidRequestError
from accel.scheduler.queueing import JobOutcome, TraceJob

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("ACCEL_PHILLY_TRACES", str(ROOT.parent / "shared" / "traces" / "philly")))


@pytest.fixture(scope="module")
def cv() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks" / "philly"))
    try:
        import cv as mod
    finally:
        sys.path.pop(0)
    return mod


class Recording(Mapping[tuple[str, Any], float]):
    """A score table that records which (VC, point) entries were read."""

    def __init__(self, data: dict[tuple[str, Any], float]) -> None:
        self.data = data
        self.read: set[tuple[str, Any]] = set()

    def __getitem__(self, k: tuple[str, Any]) -> float:
        self.read.add(k)
        return self.data[k]

    def __contains__(self, k: object) -> bool:
        return k in self.data

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        raise AssertionError("choose must look scores up by key, not scan the whole table")

    def __len__(self) -> int:
        return len(self.data)


def test_fold_choice_never_reads_the_held_out_vc(cv: Any) -> None:
    rng = random.Random(7)
    vcs = ["a", "b", "c", "d", "e"]
    points = cv.grid((300.0, 900.0, 3600.0), (None, 8.0))
    table = {(vc, p): rng.uniform(-1, 2) for vc in vcs for p in points}
    for k in vcs:
        rec = Recording(table)
        best, means = cv.choose(rec, vcs, points, k)
        assert rec.read and all(vc != k for vc, _ in rec.read)
        # the same choice as a direct argmax over the training VCs
        expect = {p: statistics.fmean(table[(vc, p)] for vc in vcs if vc != k) for p in points}
        assert means == pytest.approx(expect)
        assert best == max(points, key=lambda p: expect[p])
        # whatever VC k's own numbers are, fold k's choice does not move
        for p_fav in points:
            skewed = dict(table)
            for p in points:
                skewed[(k, p)] = 1e9 if p == p_fav else -1e9
            assert cv.choose(skewed, vcs, points, k)[0] == best


def test_held_out_vc_would_have_changed_the_in_sample_choice(cv: Any) -> None:
    """A table where the in-sample winner is carried by one VC: its own fold must not pick it."""
    vcs = ["a", "b", "c"]
    p1, p2 = cv.grid((900.0, 3600.0), (None,))
    table = {("a", p1): 0.0, ("a", p2): 10.0, ("b", p1): 1.0, ("b", p2): 0.5, ("c", p1): 1.0, ("c", p2): 0.5}
    assert cv.choose(table, vcs, [p1, p2], "a")[0] == p1  # without a: p1 (1.0 vs 0.5)
    assert cv.choose(table, vcs, [p1, p2], "b")[0] == p2  # with a: p2 (5.25 vs 0.5)
    # ties go to the first point in grid order
    flat = {(vc, p): 1.0 for vc in vcs for p in (p1, p2)}
    assert cv.choose(flat, vcs, [p2, p1], "a")[0] == p2


@pytest.mark.parametrize("case", ["missing", "nan", "unknown-vc", "one-vc", "empty-grid"])
def test_fold_choice_rejects_a_bad_table_naming_what_is_wrong(cv: Any, case: str) -> None:
    vcs = ["a", "b", "c"]
    points = cv.grid((900.0,), (None, 8.0))
    table = {(vc, p): 0.1 for vc in vcs for p in points}
    held, msg = "a", ""
    if case == "missing":
        del table[("b", points[1])]
        msg = "VC b at tier 900 / guard 8"
    elif case == "nan":
        table[("c", points[0])] = math.nan
        msg = "VC c at tier 900 / guard off"
    elif case == "unknown-vc":
        held, msg = "zz", "'zz'"
    elif case == "one-vc":
        vcs, msg = ["a"], "at least two VCs"
    else:
        points, msg = [], "grid is empty"
    with pytest.raises(InvalidRequestError, match=msg.replace("(", r"\(")):
        cv.choose(table, vcs, points, held)


def test_evaluation_only_vcs_are_never_trained_on(cv: Any) -> None:
    """An evaluation-only VC gets the choice made on every training VC; no fold reads its scores."""
    rng = random.Random(11)
    train, extra = ["a", "b", "c", "d"], ["big1", "big2"]
    points = cv.grid((300.0, 900.0, 3600.0), (None, 8.0))
    table = {(vc, p): rng.uniform(-1, 2) for vc in train for p in points}
    expect_all = {p: statistics.fmean(table[(vc, p)] for vc in train) for p in points}
    for held in [*train, *extra]:
        rec = Recording(table)  # holds no score of an evaluation-only VC: reading one would raise
        best, means = cv.fold_choice(rec, train, points, held)
        assert rec.read and all(vc in train and vc != held for vc, _ in rec.read)
        if held in extra:
            assert means == pytest.approx(expect_all) and best == max(points, key=lambda p: expect_all[p])
        else:  # a training VC's fold is plain leave-one-out among the training VCs
            assert (best, means) == cv.choose(table, train, points, held)


def _jobs(n: int, devices: int, duration: float, gap: float) -> list[TraceJob]:
    return [TraceJob(f"j{i}", i * gap, devices, duration) for i in range(n)]


def test_sizing_rule(cv: Any) -> None:
    light = _jobs(101, 8, 100.0, 100.0)  # 8 devices busy on average: load 0.125 at 64
    assert cv.size_cluster(light) == 64
    assert cv.offered_load(light, 64) == pytest.approx(8 * 100 * 101 / (100 * 100 * 64))
    heavy = _jobs(101, 8, 1000.0, 100.0)  # ~80.8 devices busy on average
    d = cv.size_cluster(heavy, 0.8)
    assert d % 8 == 0 and cv.offered_load(heavy, d) <= 0.8 < cv.offered_load(heavy, d - 8)
    assert d == 104  # 808 / 0.8 = 101 -> the next multiple of 8
    assert cv.size_cluster(_jobs(3, 100, 1.0, 1000.0)) == 104  # never narrower than the widest job
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InvalidRequestError, match="rho"):
            cv.size_cluster(light, bad)


def test_metrics_refuse_a_partial_run(cv: Any) -> None:
    done = JobOutcome("a", "vc", 1, 10.0, 0.0, 5.0, 15.0, 5.0, 0.0)
    left = JobOutcome("b", "vc", 1, 10.0, 0.0, None, None, None, 0.0)
    assert cv.metrics([done])["avg_jct_s"] == 15.0
    with pytest.raises(InvalidRequestError, match=r"1 jobs never finished .*b.*partial"):
        cv.metrics([done, left])


def test_metrics_score_the_interval_over_the_waiters(cv: Any) -> None:
    outs = [
        JobOutcome("a", "vc", 1, 100.0, 0.0, 100.0, 200.0, 100.0, 0.0, 100.0, 150.0, 0.0),  # p50 exact, covered
        JobOutcome("b", "vc", 1, 100.0, 0.0, 200.0, 300.0, 150.0, 0.0, 180.0, 190.0, 0.0),  # after p90
        JobOutcome("c", "vc", 1, 100.0, 0.0, 30.0, 130.0, 90.0, 0.0, 90.0, 90.0, 0.0),  # waited < 1 min: not scored
        JobOutcome("d", "vc", 1, 100.0, 0.0, 100.0, 200.0, 120.0, 0.0),  # no interval: the point error only
    ]
    m = cv.metrics(outs)
    assert m["waited_1min"] == 3
    assert m["est_err_median"] == pytest.approx(0.2)  # 0, 0.25, 0.2
    assert m["est_within_10pct"] == pytest.approx(1 / 3)
    assert m["p50_err_median"] == pytest.approx(0.05)  # 0 and 0.1 (a and b)
    assert m["cover_p90"] == pytest.approx(0.5)
    assert m["at_or_below_p50"] == pytest.approx(0.5)
    assert math.isnan(cv.metrics(outs[2:3])["cover_p90"])  # no waiter: unknown, not 0


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces absent")
def test_quick_profile_reports_out_of_fold_and_resumes_from_its_cache(
        cv: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--quick", "--jobs-per-vc", "60", "--traces", str(TRACES), "--out", str(tmp_path)]
    assert cv.main(argv) == 0
    first = capsys.readouterr()
    assert "to simulate" in first.err
    per_vc = _rows(tmp_path / "cv_per_vc_quick.csv")
    folds = _rows(tmp_path / "cv_folds_quick.csv")
    grid_rows = _rows(tmp_path / "cv_grid_quick.csv")
    vcs = [r["vc"] for r in per_vc]
    assert vcs == ["0e4a51", "2869ce", "e13805"] and all(int(r["n"]) == 60 for r in per_vc)
    # each fold's choice is the argmax of the training VCs' log gains in the (in-sample) grid table
    for held in vcs:
        fold = [r for r in folds if r["held_out"] == held]
        assert sum(int(r["chosen"]) for r in fold) == 1
        for r in fold:
            train = [float(g["log_gain"]) for g in grid_rows if g["vc"] != held and g["policy"] != "fifo"
                     and float(g["tier_s"]) == float(r["tier_s"]) and g["guard_ratio"] == r["guard_ratio"]]
            assert len(train) == len(vcs) - 1
            assert float(r["train_mean_log_gain"]) == pytest.approx(statistics.fmean(train), abs=1e-5)
        best = max(fold, key=lambda r: float(r["train_mean_log_gain"]))
        chosen = next(r for r in fold if r["chosen"] == "1")
        assert float(chosen["train_mean_log_gain"]) == pytest.approx(float(best["train_mean_log_gain"]))
        row = next(r for r in per_vc if r["vc"] == held)
        assert (float(row["tier_s"]), row["guard_ratio"]) == (float(chosen["tier_s"]), chosen["guard_ratio"])
        # the reported gain is the held-out VC's own run at that point
        own = next(g for g in grid_rows if g["vc"] == held and g["policy"] != "fifo"
                   and float(g["tier_s"]) == float(chosen["tier_s"]) and g["guard_ratio"] == chosen["guard_ratio"])
        assert float(row["gain_true"]) == pytest.approx(math.exp(float(own["log_gain"])), rel=1e-3)
        assert float(row["gain_history"]) > 0 and row["p999_queued_h_guard_on"] != ""
    pooled = _rows(tmp_path / "cv_pooled_quick.csv")
    assert [r["estimator"] for r in pooled] == ["true", "history"] and all(int(r["n"]) == 180 for r in pooled)

    # a rerun simulates nothing and writes the same tables
    assert cv.main(argv) == 0
    assert "to simulate" not in capsys.readouterr().err
    assert _rows(tmp_path / "cv_per_vc_quick.csv") == per_vc
    # a damaged cache file is not trusted: that one run is simulated again
    cache_files = sorted((tmp_path / "cache").rglob("*.json.gz"))
    assert cache_files and not list((tmp_path / "cache").rglob("*.tmp*"))
    with gzip.open(cache_files[0], "wt") as fh:
        fh.write("{not json")
    assert cv.main(argv) == 0
    assert "1 to simulate" in capsys.readouterr().err
    assert _rows(tmp_path / "cv_per_vc_quick.csv") == per_vc


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces absent")
def test_eval_only_vc_is_reported_but_not_replayed_on_the_grid(cv: Any, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--quick", "--jobs-per-vc", "40", "--eval-only", "e13805", "--traces", str(TRACES),
            "--out", str(tmp_path)]
    assert cv.main(argv) == 0
    out = capsys.readouterr().out
    assert "| e13805 (eval-only) |" in out
    per_vc = {r["vc"]: r for r in _rows(tmp_path / "cv_per_vc_quick.csv")}
    folds = _rows(tmp_path / "cv_folds_quick.csv")
    grid_rows = _rows(tmp_path / "cv_grid_quick.csv")
    assert set(per_vc) == {"0e4a51", "2869ce", "e13805"}
    assert per_vc["e13805"]["fold"] == "evaluation-only" and per_vc["0e4a51"]["fold"] == "leave-one-out"
    assert {g["vc"] for g in grid_rows} == {"0e4a51", "2869ce"}  # no grid replayed on it
    # its fold trains on both other VCs; theirs train on each other only (never on e13805)
    for held, train in (("e13805", ["0e4a51", "2869ce"]), ("0e4a51", ["2869ce"]), ("2869ce", ["0e4a51"])):
        for r in (r for r in folds if r["held_out"] == held):
            vals = [float(g["log_gain"]) for g in grid_rows if g["vc"] in train and g["policy"] != "fifo"
                    and float(g["tier_s"]) == float(r["tier_s"]) and g["guard_ratio"] == r["guard_ratio"]]
            assert float(r["train_mean_log_gain"]) == pytest.approx(statistics.fmean(vals), abs=1e-5)
    cached = {p.name for p in (tmp_path / "cache").rglob("e13805_*.json.gz")}
    chosen = next(r for r in folds if r["held_out"] == "e13805" and r["chosen"] == "1")
    assert len(cached) == 4 and any("fifo" in n for n in cached)  # FIFO, chosen true + history, guard flipped
    assert float(per_vc["e13805"]["tier_s"]) == float(chosen["tier_s"])
    assert [int(r["n"]) for r in _rows(tmp_path / "cv_pooled_quick.csv")] == [120, 120]


def test_no_tier_point_is_a_grid_point_with_a_clear_name(cv: Any) -> None:
    assert cv.TIERS_GRID[-1] == cv.NO_TIERS == math.inf and list(cv.TIERS_GRID[:-1]) == sorted(cv.TIERS_GRID[:-1])
    p = cv.Params(cv.NO_TIERS, None)
    assert p.tiers == () and cv.Params(900.0, 8.0).tiers == (900.0,)
    assert p.label() == "no tiers (inf) / guard off" and cv.Params(900.0, 8.0).label() == "tier 900 / guard 8"
    key = cv.RunKey("0e4a51", p.policy, p.tier_s, None, "true", 64, None)
    assert key.filename() == "0e4a51_true_tinf-goff_d64_nall.json.gz"
    assert cv._tiers("300, 900,INF") == (300.0, 900.0, cv.NO_TIERS) and cv._tiers("off") == (cv.NO_TIERS,)
    for bad in ("900,900", "inf,inf", "nan", "-1", "x", ""):
        with pytest.raises(Exception, match=repr(bad).replace("(", r"\(")):
            cv._tiers(bad)


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces absent")
def test_no_tier_point_runs_demotes_nothing_and_is_named_in_the_outputs(
        cv: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--tiers ...,inf``: the same policy without demotion (run_philly's tiered policy with no
    thresholds, so no job is ever preempted), cached, chosen from like any point, named 'inf'."""
    import run_philly

    key = cv.RunKey("2869ce", "default", cv.NO_TIERS, None, "true", 64, 120)
    mine = cv.simulate(key, str(TRACES)).outcomes
    task = run_philly.Task("2869ce", "default", "true", 64, 120, str(TRACES), (), ())
    assert mine == run_philly.run_one(task)[1]
    assert len(mine) == 120 and all(o.lost_s == 0.0 for o in mine)
    # the tiered point does preempt on the same jobs: the two points are different policies
    tiered = cv.simulate(cv.RunKey("2869ce", "default", 900.0, None, "true", 64, 120), str(TRACES)).outcomes
    assert any(o.lost_s > 0 for o in tiered) and tiered != mine

    argv = ["--quick", "--jobs-per-vc", "40", "--tiers", "900,inf", "--guards", "off", "--traces", str(TRACES),
            "--out", str(tmp_path)]
    assert cv.main(argv) == 0
    capsys.readouterr()
    grid_rows = _rows(tmp_path / "cv_grid_quick.csv")
    folds = _rows(tmp_path / "cv_folds_quick.csv")
    assert {(g["vc"], g["tier_s"]) for g in grid_rows if g["policy"] != "fifo"} == {
        (vc, t) for vc in cv.QUICK_VCS for t in ("900.0", "inf")}
    assert {r["tier_s"] for r in folds} == {"900.0", "inf"}
    assert len(list((tmp_path / "cache").rglob("*_true_tinf-goff_*.json.gz"))) == len(cv.QUICK_VCS)
    assert all(math.isfinite(float(g["log_gain"])) for g in grid_rows)


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces absent")
def test_history_at_is_a_diagnostic_no_fold_reads(cv: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--quick", "--jobs-per-vc", "40", "--guards", "off", "--traces", str(TRACES)]
    assert cv.main([*base, "--out", str(tmp_path / "plain")]) == 0
    assert cv.main([*base, "--out", str(tmp_path / "diag"), "--history-at", "900,3600,inf"]) == 0
    capsys.readouterr()
    assert not (tmp_path / "plain" / "cv_history_grid_quick.csv").exists()
    for name in ("cv_folds_quick.csv", "cv_per_vc_quick.csv", "cv_grid_quick.csv"):
        def strip(rows: list[dict[str, str]]) -> list[dict[str, str]]:  # wall time differs between runs
            return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]
        assert strip(_rows(tmp_path / "plain" / name)) == strip(_rows(tmp_path / "diag" / name))
    hist = _rows(tmp_path / "diag" / "cv_history_grid_quick.csv")
    assert [(r["vc"], r["tier_s"]) for r in hist] == [
        (vc, t) for t in ("900.0", "3600.0", "inf") for vc in [*cv.QUICK_VCS, "pooled"]]
    assert all(int(r["n"]) == (120 if r["vc"] == "pooled" else 40) for r in hist)
    # at a VC's chosen point the diagnostic row is that VC's held-out history run
    for r in _rows(tmp_path / "diag" / "cv_per_vc_quick.csv"):
        h = next(x for x in hist if x["vc"] == r["vc"] and float(x["tier_s"]) == float(r["tier_s"]))
        assert (h["avg_jct_h"], h["est_err_median"]) == (r["avg_jct_h_history"], r["est_err_median_history"])
    with pytest.raises(SystemExit):
        cv.main([*base, "--out", str(tmp_path / "x"), "--history-at", "900", "--estimators", "true"])
    assert "argument --history-at" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--rho", "1.5"], ["--tiers", "0"], ["--tiers", "900,inf,900"],
                                 ["--guards", "x"], ["--vcs", "nope,0e4a51"],
                                 ["--estimators", "history"], ["--vcs", "0e4a51"],
                                 ["--workers", "0"], ["--eval-only", "nope"],
                                 ["--eval-only", "0e4a51,2869ce"]])
def test_bad_options_fail_in_one_line(cv: Any, bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    if not TRACES.is_dir() and bad[0] in ("--vcs", "--eval-only"):
        pytest.skip("shared traces absent")
    with pytest.raises(SystemExit) as exc:
        cv.main(["--quick", "--traces", str(TRACES if TRACES.is_dir() else ROOT), *bad])
    assert exc.value.code == 2
    assert ": error: argument " + bad[0] in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.skipif(not TRACES.is_dir(), reason="shared traces absent")
def test_runs_match_run_philly_and_fifo_needs_no_estimates(cv: Any) -> None:
    """cv.py's replay is run_philly's; FIFO's, made without start estimates, has the same schedule."""
    import run_philly

    hist = tuple(run_philly.HISTORY.items())
    for pol, tier, guard, est in (("default", 900.0, None, "history"), ("default-guard", 3600.0, 8.0, "true"),
                                  ("fifo", None, None, "true")):
        key = cv.RunKey("0e4a51", pol, tier, guard, est, 64, 150)
        mine = cv.simulate(key, str(TRACES)).outcomes
        task = run_philly.Task("0e4a51", pol, est, 64, 150, str(TRACES), hist, (tier or 900.0,),
                               promote=(guard, None))
        theirs = run_philly.run_one(task)[1]
        assert len(mine) == 150
        if pol == "fifo":
            assert all(o.estimate_s is None for o in mine) and any(o.estimate_s is not None for o in theirs)
            # the schedule is the same; only what the estimate said (and its interval) is absent
            mine = [dataclasses.replace(o, estimate_s=t.estimate_s, estimate_p50_s=t.estimate_p50_s,
                                        estimate_p90_s=t.estimate_p90_s, estimate_log_spread=t.estimate_log_spread)
                    for o, t in zip(mine, theirs, strict=True)]
        assert mine == theirs
