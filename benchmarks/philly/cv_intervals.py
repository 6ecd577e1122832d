"""Out-of-sample calibration of the wait intervals (p50 / p90), leave-one-VC-out (protocol v2).

    python benchmarks/philly/cv_intervals.py --quick        # 3 VCs x 200 jobs (smoke, minutes)
    python benchmarks/philly/cv_intervals.py --limit 2000   # the 10 shared VCs, first 2,000 jobs each
    python benchmarks/philly/cv_intervals.py                # the 10 shared VCs, whole traces (hours)

The protocol is ``protocol-intervals-v2.md`` (committed before the report was run).  Each VC is
replayed once per estimator (true durations, history) under the tiered default at its fold's
tier (from ``--tiers-from``, the per-VC choice ``cv.py`` made, or ``--tier`` for all), sized as
``cv.py`` sizes it, with the runs cached as ``cv.py`` caches them.  The intervals are reporting
only, so one history replay per VC serves every configuration: each waiter's planned wait ``P``
(the estimate at submission), the log-spread ``s`` of the durations its history predicts for
the jobs ahead, and its size are stored with its outcome, and p50 / p90 are recomputed from them
by ``IntervalCalibration`` (``scheduler/queueing/_intervals.py``).

Configurations (the grid): ``s`` in 2, 3, 4 or 6 equal-weight bins, crossed with no size split or
the size classes 1 / 2-8 / >8 devices, with each waiter weighted 1 or each VC weighted 1 in
total: 16.  Fold k's rule, on the training VCs only (every VC but k, never an evaluation-only
VC): an inner leave-one-VC-out among them scores each configuration by (1) the number of inner
folds with >= 50 waiters whose p90 coverage is in [0.85, 0.95] (more is better), (2) the inner
pooled median relative error of p50 (smaller), (3) grid order; the winner is refitted on all
the training VCs and applied to VC k.  Outputs in ``--out``: ``intervals_per_vc.csv`` (each
fold's table), ``intervals_pooled.csv``, ``intervals_folds.csv`` (each fold's inner scores per
configuration and its choice), ``calibration.json`` (the choice on all training VCs, fitted on
them: the engine's default) and ``intervals_table.md``.

``--mc`` is protocol v5 (``protocol-intervals-v5.md``): the history replays are run again with
the engine's Monte-Carlo plans recording each submission's scenario waits
(``scheduler/queueing/_mcplan.py``), p50 / p90 are their quantiles at the levels each fold
chooses on its training VCs (``MC_LEVELS_50`` / ``MC_LEVELS_90``), the fold's v2 calibration
where the Monte-Carlo plan did not apply; the cost of the Monte-Carlo part per estimate is
measured in the same replays as a ratio to the rest of ``estimate`` (the point plan).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cv  # noqa: E402  (sibling script)

from accel.scheduler.queueing import (  # noqa: E402
    HistoryEstimator,
    HistoryModel,
    JobOutcome,
    QueueingScheduler,
    Simulator,
    load_philly,
)
from accel.scheduler.queueing import _intervals as intervals_mod  # noqa: E402
from accel.scheduler.queueing._intervals import (  # noqa: E402
    DEFAULT_CALIBRATION,
    DEFAULT_MONTE_CARLO,
    IntervalCalibration,
    fit_calibration,
)
from accel.scheduler.queueing._mcplan import MonteCarloPlan  # noqa: E402

TARGET_LO, TARGET_HI = 0.85, 0.95
MIN_WAIT_S = 60.0
MIN_FOLD_WAITERS = 50
VCS = ("0e4a51", "103959", "11cb48", "2869ce", "51b7ef", "7f04ca", "e13805", "ed69ec", "6c71a0", "6214e9")
EVAL_ONLY = ("6c71a0", "6214e9")


@dataclass(frozen=True)
class Config:
    s_bins: int
    size_edges: tuple[int, ...]
    weight: str  # "waiter" or "vc"

    def label(self) -> str:
        size = "size 1/2-8/>8" if self.size_edges else "no size split"
        return f"s in {self.s_bins} bins, {size}, each {self.weight} weighted 1"


GRID = tuple(Config(k, z, w) for w in ("waiter", "vc") for z in ((), (2, 9)) for k in (2, 3, 4, 6))


@dataclass(frozen=True)
class Waiter:
    plan_s: float  # planned wait at submission
    s: float  # log-spread of the work ahead (0 with declared durations)
    devices: int
    wait_s: float  # actual wait
    submit_s: float = 0.0


def waiters(outs: Sequence[JobOutcome]) -> list[Waiter]:
    """Each job that waited >= 1 min and had an estimate at submission."""
    out = []
    for o in outs:
        if o.start_s is None or o.start_s - o.submit_s < MIN_WAIT_S or o.estimate_s is None:
            continue
        if not math.isfinite(o.estimate_s):
            continue
        out.append(Waiter(max(0.0, o.estimate_s - o.submit_s), o.estimate_log_spread or 0.0, o.devices,
                          o.start_s - o.submit_s, o.submit_s))
    return out


ONLINE_WINDOW, ONLINE_MIN, TAU_S = 200, 30, 60.0


def _rank(xs: Sequence[float], q: float) -> float:
    """The conformal quantile: the ceil(q (n + 1))-th smallest (capped at n)."""
    ys = sorted(xs)
    return ys[min(len(ys), math.ceil(q * (len(ys) + 1))) - 1]


def online_intervals(outs: Sequence[JobOutcome], ws: Sequence[Waiter], prior: IntervalCalibration | None
                     ) -> list[tuple[float, float]]:
    """Protocol v3: (p50, p90) of each waiter of ``ws`` from the last 200 jobs of the same replay
    that were queued at submission and started strictly before its submission (their log ratio
    of actual to planned wait, split at their median log-spread), or ``prior`` with fewer than 30."""
    done = sorted((o.start_s, o.estimate_log_spread or 0.0,
                   math.log((o.start_s - o.submit_s + TAU_S) / (max(0.0, o.estimate_s - o.submit_s) + TAU_S)))
                  for o in outs if o.start_s is not None and o.estimate_s is not None
                  and math.isfinite(o.estimate_s) and o.start_s > o.submit_s)
    order = sorted(range(len(ws)), key=lambda i: ws[i].submit_s)
    out: list[tuple[float, float]] = [(0.0, 0.0)] * len(ws)
    k = 0
    for i in order:
        w = ws[i]
        while k < len(done) and done[k][0] < w.submit_s:
            k += 1
        recent = done[max(0, k - ONLINE_WINDOW):k]
        if len(recent) < ONLINE_MIN:
            out[i] = prior.interval(w.plan_s, w.s, w.devices) if prior is not None else (w.plan_s, w.plan_s)
            continue
        mid = statistics.median(x[1] for x in recent)
        half = [x for x in recent if (x[1] <= mid) == (w.s <= mid)]
        rs = [x[2] for x in (half if len(half) >= ONLINE_MIN else recent)]
        base = w.plan_s + TAU_S
        out[i] = (max(0.0, base * math.exp(_rank(rs, 0.5)) - TAU_S), max(0.0, base * math.exp(_rank(rs, 0.9)) - TAU_S))
    return out


def fit(train: Mapping[str, Sequence[Waiter]], cfg: Config) -> IntervalCalibration | None:
    """``cfg`` fitted on the training VCs' waiters (None: no waiter at all)."""
    samples = []
    for ws in train.values():
        wt = 1.0 if cfg.weight == "waiter" else 1.0 / max(1, len(ws))
        samples += [(w.plan_s, w.s, w.devices, w.wait_s, wt) for w in ws]
    if not samples:
        return None
    return fit_calibration(samples, cfg.s_bins, cfg.size_edges, label=cfg.label())


def point(w: Waiter) -> tuple[float, float]:
    return w.plan_s, w.plan_s


def km_quantiles(items: Sequence[tuple[float, bool]], qs: Sequence[float]) -> list[float]:
    """Kaplan-Meier quantiles of (value, observed) pairs (False: right-censored at value): for each
    q the smallest event value where the estimated CDF reaches q, else the largest value seen."""
    ordered = sorted(items, key=lambda x: (x[0], not x[1]))  # events before censored at a tie
    at_risk, surv, out = len(ordered), 1.0, [math.nan] * len(qs)
    for v, observed in ordered:
        if observed:
            surv *= 1.0 - 1.0 / at_risk
            for i, q in enumerate(qs):
                if math.isnan(out[i]) and 1.0 - surv >= q - 1e-12:
                    out[i] = v
        at_risk -= 1
    top = ordered[-1][0]
    return [top if math.isnan(x) else x for x in out]


def online_km_intervals(outs: Sequence[JobOutcome], ws: Sequence[Waiter], prior: IntervalCalibration | None
                        ) -> list[tuple[float, float]]:
    """Protocol v4: (p50, p90) of each waiter of ``ws`` from the last 200 queued jobs of the same
    replay submitted before it (started ones as events, the still-waiting ones censored at their
    wait so far), Kaplan-Meier quantiles, split at their median log-spread; ``prior`` with fewer
    than 30."""
    queued = sorted((o.submit_s, max(0.0, o.estimate_s - o.submit_s), o.estimate_log_spread or 0.0, o.start_s)
                    for o in outs if o.start_s is not None and o.estimate_s is not None
                    and math.isfinite(o.estimate_s) and o.start_s > o.submit_s)
    submits = [q[0] for q in queued]
    out: list[tuple[float, float]] = []
    for w in ws:
        k = bisect.bisect_left(submits, w.submit_s)
        recent = queued[max(0, k - ONLINE_WINDOW):k]
        if len(recent) < ONLINE_MIN:
            out.append(prior.interval(w.plan_s, w.s, w.devices) if prior is not None else (w.plan_s, w.plan_s))
            continue
        t = w.submit_s
        items = [(sp, math.log((min(st, t) - sub + TAU_S) / (plan + TAU_S)), st < t) for sub, plan, sp, st in recent]
        mid = statistics.median(x[0] for x in items)
        half = [x for x in items if (x[0] <= mid) == (w.s <= mid)]
        use = half if len(half) >= ONLINE_MIN else items
        q50, q90 = km_quantiles([(r, ev) for _, r, ev in use], (0.5, 0.9))
        base = w.plan_s + TAU_S
        out.append((max(0.0, base * math.exp(q50) - TAU_S), max(0.0, base * math.exp(q90) - TAU_S)))
    return out


def scores(ws: Sequence[Waiter], cal: IntervalCalibration | None,
           given: Sequence[tuple[float, float]] | None = None) -> dict[str, float]:
    """Median relative error of p50, share of starts at or before p90 and at or before p50
    (``cal`` None: the point interval at the plan; ``given``: these intervals, one per waiter)."""
    if not ws:
        return {"n": 0.0, "p50_err": math.nan, "cover_p90": math.nan, "at_or_below_p50": math.nan}
    err, c90, c50 = [], 0, 0
    for i, w in enumerate(ws):
        if given is not None:
            p50, p90 = given[i]
        else:
            p50, p90 = cal.interval(w.plan_s, w.s, w.devices) if cal is not None else point(w)
        err.append(abs(p50 - w.wait_s) / w.wait_s)
        c90 += w.wait_s <= p90 + 1e-6
        c50 += w.wait_s <= p50 + 1e-6
    n = len(ws)
    return {"n": float(n), "p50_err": statistics.median(err), "cover_p90": c90 / n, "at_or_below_p50": c50 / n}


def inner_score(train: Mapping[str, Sequence[Waiter]], cfg: Config) -> tuple[int, float, dict[str, float]]:
    """Inner leave-one-VC-out over ``train``: (folds with >= 50 waiters in the coverage band,
    pooled median p50 error, each inner fold's coverage)."""
    hits, errs, cover = 0, [], {}
    for u, wu in train.items():
        if not wu:
            continue
        cal = fit({x: v for x, v in train.items() if x != u}, cfg)
        if cal is None:
            continue
        sc = scores(wu, cal)
        cover[u] = sc["cover_p90"]
        if len(wu) >= MIN_FOLD_WAITERS and TARGET_LO <= sc["cover_p90"] <= TARGET_HI:
            hits += 1
        errs += [abs(cal.interval(w.plan_s, w.s, w.devices)[0] - w.wait_s) / w.wait_s for w in wu]
    return hits, (statistics.median(errs) if errs else math.inf), cover


def choose(train: Mapping[str, Sequence[Waiter]], grid: Sequence[Config] = GRID
           ) -> tuple[Config, dict[Config, tuple[int, float, dict[str, float]]]]:
    """The protocol's rule on the training VCs only (ties: grid order)."""
    table = {c: inner_score(train, c) for c in grid}
    best = min(grid, key=lambda c: (-table[c][0], table[c][1], grid.index(c)))
    return best, table


def fold(hist: Mapping[str, Sequence[Waiter]], train_vcs: Sequence[str], held_out: str
         ) -> tuple[Config, IntervalCalibration | None, dict[Config, tuple[int, float, dict[str, float]]]]:
    """Fold ``held_out``: the rule on the training VCs but ``held_out`` (an evaluation-only VC is
    in no ``train_vcs``), refitted on them.  Reads no waiter of ``held_out``."""
    train = {u: hist[u] for u in train_vcs if u != held_out}
    cfg, table = choose(train)
    return cfg, fit(train, cfg), table


# -- protocol v5: Monte-Carlo plans ------------------------------------------------------------

MC_LEVELS_50 = (0.30, 0.40, 0.50, 0.60, 0.70)
MC_LEVELS_90 = (0.80, 0.85, 0.90, 0.95, 1.00)
MC_CACHE_VERSION = 1


@dataclass
class McRun:
    """A history replay with the Monte-Carlo plans recorded: each submission's scenario waits (the
    job's own pool; with several, the earliest per scenario) and the CPU seconds spent in
    ``estimate`` and in its Monte-Carlo part."""

    key: cv.RunKey
    outcomes: list[JobOutcome]
    draws: dict[str, list[float]]
    estimate_cpu_s: float
    mc_cpu_s: float
    n_estimates: int
    n_mc: int
    wall_s: float


def _mc_name(key: cv.RunKey, mc: MonteCarloPlan) -> str:
    return f"mc{mc.draws}d{mc.depth}s{mc.seed}_{key.filename()}"


def simulate_mc(key: cv.RunKey, traces: str, mc: MonteCarloPlan = DEFAULT_MONTE_CARLO) -> McRun:
    """``cv.simulate``'s history replay of ``key`` (same engine, policy, model, simulator), with
    the engine's intervals from Monte-Carlo plans (``mc``) and every scenario recorded."""
    import cv as cv_mod  # the sibling script, in a worker process too

    jobs = load_philly(Path(traces) / f"trace_{key.vc}.csv", limit=key.limit)
    model = HistoryModel(**json.loads(key.history))
    if key.tier_s is None:
        raise ValueError(f"run {key.filename()}: a tiered policy needs a tier threshold")
    tiers = () if math.isinf(key.tier_s) else (key.tier_s,)
    policy = replace(cv_mod.run_philly.tiered_policy(tiers, key.overhead_s), promote_after_wait_ratio=key.guard_ratio)
    eng = QueueingScheduler(cv_mod.uniform_cluster(key.devices // 8, 8), policy, durations=model)
    draws: dict[str, list[float]] = {}

    def sink(job_id: str, now: float, waits: Mapping[str, np.ndarray]) -> None:
        if job_id not in draws and waits:
            draws[job_id] = [float(x) for x in np.sort(np.min(np.stack(list(waits.values())), axis=0))]

    eng.interval_calibration = replace(DEFAULT_CALIBRATION, monte_carlo=replace(mc, sink=sink))
    # the cost: CPU seconds in ``estimate`` and in its Monte-Carlo part (timed by wrapping the
    # function ``add_intervals`` calls; this process only, nothing else reads it)
    clock = {"est": 0.0, "mc": 0.0, "n_est": 0, "n_mc": 0}
    inner_mc, inner_est = intervals_mod.scenario_waits, eng.estimate

    def timed_mc(*a: object, **kw: object) -> object:
        t0 = time.process_time()
        try:
            return inner_mc(*a, **kw)  # type: ignore[arg-type]
        finally:
            clock["mc"] += time.process_time() - t0
            clock["n_mc"] += 1

    def timed_est(*a: object, **kw: object) -> object:
        t0 = time.process_time()
        try:
            return inner_est(*a, **kw)  # type: ignore[arg-type]
        finally:
            clock["est"] += time.process_time() - t0
            clock["n_est"] += 1

    intervals_mod.scenario_waits = timed_mc  # type: ignore[assignment]
    eng.estimate = timed_est  # type: ignore[method-assign]
    try:
        sim = Simulator(eng, jobs, HistoryEstimator(model), estimate_at_submit=True)
        t0 = time.perf_counter()
        res = sim.run()
        wall = time.perf_counter() - t0
    finally:
        intervals_mod.scenario_waits = inner_mc
    return McRun(key, res.outcomes, draws, clock["est"], clock["mc"], int(clock["n_est"]), int(clock["n_mc"]), wall)


def _save_mc(run: McRun, cache: Path, mc: MonteCarloPlan) -> None:
    cv.write_cache(cache / _mc_name(run.key, mc),
                   {"version": MC_CACHE_VERSION, "key": asdict(run.key), "draws": run.draws,
                    "cost": [run.estimate_cpu_s, run.mc_cpu_s, run.n_estimates, run.n_mc, run.wall_s],
                    "outcomes": cv.outcome_rows(run.outcomes)})


def _load_mc(key: cv.RunKey, cache: Path, mc: MonteCarloPlan) -> McRun | None:
    body = cv.read_cache(cache / _mc_name(key, mc), MC_CACHE_VERSION, key)
    if body is None:
        return None
    est, mcs, n_est, n_mc, wall = body["cost"]
    return McRun(key, [JobOutcome(*r) for r in body["outcomes"]], body["draws"], est, mcs, n_est, n_mc, wall)


def ensure_mc(keys: Sequence[cv.RunKey], traces: str, cache: Path, workers: int, sizes: Mapping[str, int],
              mc: MonteCarloPlan = DEFAULT_MONTE_CARLO) -> dict[cv.RunKey, McRun]:
    """Every Monte-Carlo replay of ``keys``, cached (biggest VC first) as each finishes."""
    have = {k: r for k in keys if (r := _load_mc(k, cache, mc)) is not None}
    todo = sorted((k for k in keys if k not in have), key=lambda k: -sizes[k.vc])
    t0 = time.perf_counter()

    def done(r: McRun) -> None:
        _save_mc(r, cache, mc)
        have[r.key] = r
        print(f"mc: [{time.perf_counter() - t0:7.0f} s] {r.key.vc} n={len(r.outcomes)} wall {r.wall_s:.1f} s "
              f"estimate {r.estimate_cpu_s:.1f} s, of it Monte-Carlo {r.mc_cpu_s:.1f} s", file=sys.stderr, flush=True)

    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(workers) as pool:
            for r in pool.map(simulate_mc, todo, [traces] * len(todo), [mc] * len(todo)):
                done(r)
    else:
        for k in todo:
            done(simulate_mc(k, traces, mc))
    return have


def mc_interval(draws: Sequence[float], a50: float, a90: float) -> tuple[float, float]:
    """(p50, p90) of recorded scenario waits at the levels (as the engine reads them)."""
    return MonteCarloPlan(draws=len(draws), p50_level=a50, p90_level=a90).interval(np.asarray(draws, dtype=float))


def choose_levels(train: Mapping[str, Sequence[tuple[Waiter, Sequence[float]]]]
                  ) -> tuple[float, float, dict[str, float]]:
    """Protocol v5's rule on the training VCs' Monte-Carlo waiters, pooled: ``a90`` with p90
    coverage closest to 0.90 (ties: lower), ``a50`` with the smallest median p50 error (ties:
    closest to 0.50, then lower).  Also returns each candidate's score."""
    items = [x for ws in train.values() for x in ws]
    if not items:
        return 0.5, 0.9, {}
    table: dict[str, float] = {}
    cov = {}
    for a in MC_LEVELS_90:
        c = sum(w.wait_s <= mc_interval(d, 0.5, a)[1] + 1e-6 for w, d in items) / len(items)
        cov[a] = c
        table[f"a90={a:g} coverage"] = round(c, 4)
    err = {}
    for a in MC_LEVELS_50:
        e = statistics.median(abs(mc_interval(d, a, max(a, 0.9))[0] - w.wait_s) / w.wait_s for w, d in items)
        err[a] = e
        table[f"a50={a:g} p50 err"] = round(e, 4)
    a90 = min(MC_LEVELS_90, key=lambda a: (abs(cov[a] - 0.9), a))
    a50 = min(MC_LEVELS_50, key=lambda a: (err[a], abs(a - 0.5), a))
    return a50, a90, table


def run_mc(args: argparse.Namespace, vcs: Sequence[str], eval_only: Sequence[str], limit: int | None,
           tiers: Mapping[str, float]) -> int:
    """Protocol v5 (``protocol-intervals-v5.md``)."""
    out = args.out.with_name(args.out.name.replace("intervals", "intervals-mc", 1))
    jobs = {v: load_philly(Path(args.traces) / f"trace_{v}.csv", limit=limit) for v in vcs}
    devices = {v: cv.size_cluster(jobs[v]) for v in vcs}
    keys = {v: cv.RunKey(v, "default", tiers[v], None, "history", devices[v], limit) for v in vcs}
    runs = ensure_mc(list(keys.values()), args.traces, args.cache, args.workers, {v: len(jobs[v]) for v in vcs})
    if args.replay_only:
        print(f"cached {len(runs)} Monte-Carlo replays in {args.cache}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    train_vcs = [v for v in vcs if v not in eval_only]
    hist = {v: waiters(runs[keys[v]].outcomes) for v in vcs}
    ids = {v: [o.id for o in runs[keys[v]].outcomes if o.start_s is not None and o.start_s - o.submit_s >= MIN_WAIT_S
               and o.estimate_s is not None and math.isfinite(o.estimate_s)] for v in vcs}
    mcw = {v: [(w, runs[keys[v]].draws[i]) for w, i in zip(hist[v], ids[v], strict=True) if i in runs[keys[v]].draws]
           for v in vcs}
    per_vc: list[dict[str, object]] = []
    folds: list[dict[str, object]] = []
    given: dict[str, list[tuple[float, float]]] = {}
    v2: dict[str, list[tuple[float, float]]] = {}
    for v in vcs:
        train = [u for u in train_vcs if u != v]
        a50, a90, table = choose_levels({u: mcw[u] for u in train})
        cfg, cal, _ = fold(hist, train_vcs, v)
        draws = runs[keys[v]].draws
        given[v] = [mc_interval(draws[i], a50, a90) if i in draws else
                    (cal.interval(w.plan_s, w.s, w.devices) if cal is not None else point(w))
                    for w, i in zip(hist[v], ids[v], strict=True)]
        v2[v] = [cal.interval(w.plan_s, w.s, w.devices) if cal is not None else point(w) for w in hist[v]]
        folds.append({"fold": v, "eval_only": v in eval_only, "a50": a50, "a90": a90, **table,
                      "v2 fallback": cfg.label()})
        sc = scores(hist[v], None, given[v])
        r = runs[keys[v]]
        per_vc.append({"vc": v, "fold": "evaluation-only" if v in eval_only else "leave-one-out",
                       "tier_s": tiers[v], "devices": devices[v], "a50": a50, "a90": a90,
                       "n_history": int(sc["n"]), "mc_share": round(len(mcw[v]) / len(hist[v]), 4) if hist[v] else None,
                       **{f"{k}_history": round(x, 4) for k, x in sc.items() if k != "n"},
                       "p50_err_history_plan": round(scores(hist[v], None)["p50_err"], 4),
                       "p50_err_history_v2": round(scores(hist[v], None, v2[v])["p50_err"], 4),
                       "cover_p90_history_v2": round(scores(hist[v], None, v2[v])["cover_p90"], 4),
                       "estimates": r.n_estimates, "mc_estimates": r.n_mc,
                       "estimate_cpu_s": round(r.estimate_cpu_s, 3), "mc_cpu_s": round(r.mc_cpu_s, 3),
                       "mc_over_point_plan": round(r.mc_cpu_s / max(1e-9, r.estimate_cpu_s - r.mc_cpu_s), 3),
                       "replay_wall_s": round(r.wall_s, 1)})
    a50, a90, _ = choose_levels({u: mcw[u] for u in train_vcs})
    (out / "levels.json").write_text(json.dumps({"p50_level": a50, "p90_level": a90, "draws": DEFAULT_MONTE_CARLO.draws,
                                                 "depth": DEFAULT_MONTE_CARLO.depth, "seed": DEFAULT_MONTE_CARLO.seed,
                                                 "chosen_on": train_vcs}, indent=1) + "\n")
    pooled: list[dict[str, object]] = []
    for label, sel in (("training VCs", train_vcs), ("all", list(vcs))):
        ws = [w for v in sel for w in hist[v]]
        iv = [x for v in sel for x in given[v]]
        sc = scores(ws, None, iv) if ws else scores([], None)
        est = sum(runs[keys[v]].estimate_cpu_s for v in sel)
        mcs = sum(runs[keys[v]].mc_cpu_s for v in sel)
        pooled.append({"vcs": label, "n_vcs": len(sel), "n_history": int(sc["n"]),
                       "mc_share": round(sum(len(mcw[v]) for v in sel) / max(1, len(ws)), 4),
                       **{f"{k}_history": round(x, 4) for k, x in sc.items() if k != "n"},
                       "p50_err_history_plan": round(scores(ws, None)["p50_err"], 4) if ws else None,
                       "p50_err_history_v2": round(scores(ws, None, [x for v in sel for x in v2[v]])["p50_err"], 4),
                       "cover_p90_history_v2": round(scores(ws, None, [x for v in sel for x in v2[v]])["cover_p90"], 4),
                       "estimates": sum(runs[keys[v]].n_estimates for v in sel),
                       "mc_estimates": sum(runs[keys[v]].n_mc for v in sel),
                       "mc_over_point_plan": round(mcs / max(1e-9, est - mcs), 3)})
    for name, rows in (("intervals_per_vc.csv", per_vc), ("intervals_folds.csv", folds),
                       ("intervals_pooled.csv", pooled)):
        with open(out / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    md = ["| VC | fold | levels a50 / a90 | waiters (hist) | from MC | p50 err | p90 coverage | <= p50 | "
          "plan as p50 | v2: p50 err / coverage | MC cost / point plan |", "|---" * 11 + "|"]
    for r in per_vc:
        md.append(f"| {r['vc']} | {r['fold']} | {r['a50']} / {r['a90']} | {r['n_history']} | {r['mc_share']} | "
                  f"{r.get('p50_err_history', '-')} | {r.get('cover_p90_history', '-')} | "
                  f"{r.get('at_or_below_p50_history', '-')} | {r['p50_err_history_plan']} | "
                  f"{r['p50_err_history_v2']} / {r['cover_p90_history_v2']} | {r['mc_over_point_plan']} |")
    md += ["", "| VCs | waiters | from MC | p50 err | p90 coverage | <= p50 | plan as p50 | v2: p50 err / coverage | "
           "MC cost / point plan |", "|---|---|---|---|---|---|---|---|---|"]
    for r in pooled:
        md.append(f"| {r['vcs']} ({r['n_vcs']}) | {r['n_history']} | {r['mc_share']} | {r['p50_err_history']} | "
                  f"{r['cover_p90_history']} | {r['at_or_below_p50_history']} | {r['p50_err_history_plan']} | "
                  f"{r['p50_err_history_v2']} / {r['cover_p90_history_v2']} | {r['mc_over_point_plan']} |")
    md += ["", f"Engine default levels (rule on all {len(train_vcs)} training VCs): a50 {a50}, a90 {a90}; "
           f"{DEFAULT_MONTE_CARLO.draws} scenarios, depth {DEFAULT_MONTE_CARLO.depth}"]
    (out / "intervals_table.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {out}")
    return 0


def fold_tiers(path: Path) -> dict[str, float]:
    with open(path) as fh:
        return {r["vc"]: float(r["tier_s"]) for r in csv.DictReader(fh)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 VCs x 200 jobs")
    ap.add_argument("--vcs", default=",".join(VCS))
    ap.add_argument("--eval-only", default=",".join(EVAL_ONLY))
    ap.add_argument("--limit", type=int, default=None, help="first N jobs per VC (default: whole traces)")
    ap.add_argument("--tier", type=float, default=None, help="one tier threshold for every VC")
    ap.add_argument("--tiers-from", type=Path, default=HERE / "results" / "cv_per_vc.csv",
                    help="per-VC tier: cv.py's out-of-fold choice")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--traces", default=str(cv.run_philly.TRACES))
    ap.add_argument("--cache", type=Path, default=HERE / "results" / "cache")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default: results/intervals, results/intervals-n<limit> with --limit)")
    ap.add_argument("--online", action="store_true",
                    help="protocol v3: each VC calibrated on its own past errors (output: <out>-online)")
    ap.add_argument("--online-km", action="store_true",
                    help="protocol v4: as --online, the still-waiting jobs censored (output: <out>-online-km)")
    ap.add_argument("--mc", action="store_true",
                    help="protocol v5: Monte-Carlo plans (history replays only; output: results/intervals-mc-n<limit>)")
    ap.add_argument("--replay-only", action="store_true",
                    help="simulate and cache the replays, compute no interval or score")
    args = ap.parse_args(argv)
    if args.quick:
        vcs, eval_only, limit, tier = ["2869ce", "e13805", "0e4a51"], [], 200, 900.0
        args.out = args.out or HERE / "results" / "intervals-quick"
    else:
        vcs = [v for v in args.vcs.split(",") if v]
        eval_only = [v for v in args.eval_only.split(",") if v and v in vcs]
        limit, tier = args.limit, args.tier
        args.out = args.out or HERE / "results" / (f"intervals-n{limit}" if limit else "intervals")
    tiers = {v: tier for v in vcs} if tier is not None else fold_tiers(args.tiers_from)
    if args.mc:
        if args.online or args.online_km:
            ap.error("--mc is its own protocol: not with --online / --online-km")
        return run_mc(args, vcs, eval_only, limit, tiers)
    jobs = {v: load_philly(Path(args.traces) / f"trace_{v}.csv", limit=limit) for v in vcs}
    devices = {v: cv.size_cluster(jobs[v]) for v in vcs}
    keys = {(v, e): cv.RunKey(v, "default", tiers[v], None, e, devices[v], limit) for v in vcs
            for e in ("true", "history")}
    fifo = {v: cv.RunKey(v, "fifo", None, None, "true", devices[v], limit) for v in vcs}
    runs = cv.ensure(list(keys.values()) + list(fifo.values()), args.traces, args.cache, args.workers,
                     {v: len(jobs[v]) for v in vcs})
    if args.online and args.online_km:
        ap.error("--online and --online-km are two protocols: pick one")
    if args.online or args.online_km:
        args.out = args.out.with_name(args.out.name + ("-online" if args.online else "-online-km"))
    if args.replay_only:
        print(f"cached {len(runs)} runs in {args.cache}")
        return 0
    ws = {(v, e): waiters(runs[k].outcomes) for (v, e), k in keys.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    train_vcs = [v for v in vcs if v not in eval_only]
    hist = {v: ws[(v, "history")] for v in vcs}
    per_vc: list[dict[str, object]] = []
    folds: list[dict[str, object]] = []
    cals: dict[str, IntervalCalibration | None] = {}
    online: dict[str, list[tuple[float, float]] | None] = {}
    for v in vcs:
        cfg, cals[v], table = fold(hist, train_vcs, v)
        folds.append({"fold": v, "eval_only": v in eval_only, "chosen": cfg.label(),
                      **{f"{c.label()} | in-band folds": table[c][0] for c in GRID},
                      **{f"{c.label()} | p50 err": round(table[c][1], 4) for c in GRID},
                      **{f"{c.label()} | inner coverage": json.dumps({u: round(x, 4) for u, x in table[c][2].items()})
                         for c in GRID}})
        row: dict[str, object] = {"vc": v, "fold": "evaluation-only" if v in eval_only else "leave-one-out",
                                  "tier_s": tiers[v], "devices": devices[v], "config": cfg.label()}
        hout = runs[keys[(v, "history")]].outcomes
        online[v] = (online_intervals(hout, hist[v], cals[v]) if args.online
                     else online_km_intervals(hout, hist[v], cals[v]) if args.online_km else None)
        for e, cal in (("true", None), ("history", cals[v])):
            sc = scores(ws[(v, e)], cal, online[v] if e == "history" else None)
            row.update({f"{k}_{e}": (round(x, 4) if isinstance(x, float) else x) for k, x in sc.items()})
        row["p50_err_history_plan"] = round(scores(hist[v], None)["p50_err"], 4)
        f_avg = cv.metrics(runs[fifo[v]].outcomes)["avg_jct_s"]
        row["gain_true"] = round(f_avg / cv.metrics(runs[keys[(v, 'true')]].outcomes)["avg_jct_s"], 4)
        row["gain_history"] = round(f_avg / cv.metrics(runs[keys[(v, 'history')]].outcomes)["avg_jct_s"], 4)
        per_vc.append(row)
    final_cfg, _ = choose({u: hist[u] for u in train_vcs})
    final = fit({u: hist[u] for u in train_vcs}, final_cfg)
    if final is not None and not (args.online or args.online_km):
        (args.out / "calibration.json").write_text(json.dumps(final.to_json(), indent=1) + "\n")
    pooled: list[dict[str, object]] = []
    for label, sel in (("training VCs", train_vcs), ("all", vcs)):
        r: dict[str, object] = {"vcs": label, "n_vcs": len(sel)}
        for e in ("true", "history"):
            errs, c90, c50, n = [], 0, 0, 0
            for v in sel:  # each VC at its own fold's calibration, pooled over waiters
                cal = cals[v] if e == "history" else None
                given = online[v] if e == "history" else None
                for i, w in enumerate(ws[(v, e)]):
                    if given is not None:
                        p50, p90 = given[i]
                    else:
                        p50, p90 = cal.interval(w.plan_s, w.s, w.devices) if cal is not None else point(w)
                    errs.append(abs(p50 - w.wait_s) / w.wait_s)
                    c90 += w.wait_s <= p90 + 1e-6
                    c50 += w.wait_s <= p50 + 1e-6
                    n += 1
            r.update({f"n_{e}": n, f"p50_err_{e}": round(statistics.median(errs), 4) if errs else None,
                      f"cover_p90_{e}": round(c90 / n, 4) if n else None,
                      f"at_or_below_p50_{e}": round(c50 / n, 4) if n else None})
        plan_errs = [abs(w.plan_s - w.wait_s) / w.wait_s for v in sel for w in hist[v]]
        r["p50_err_history_plan"] = round(statistics.median(plan_errs), 4) if plan_errs else None
        fj = sum(cv.metrics(runs[fifo[v]].outcomes)["avg_jct_s"] * len(jobs[v]) for v in sel)
        for e in ("true", "history"):
            pj = sum(cv.metrics(runs[keys[(v, e)]].outcomes)["avg_jct_s"] * len(jobs[v]) for v in sel)
            r[f"pooled_gain_{e}"] = round(fj / pj, 4)
        pooled.append(r)
    for name, rows in (("intervals_per_vc.csv", per_vc), ("intervals_folds.csv", folds),
                       ("intervals_pooled.csv", pooled)):
        with open(args.out / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    md = ["| VC | fold | config chosen | waiters true / hist | p50 err true | p50 err hist | p90 coverage hist | "
          "<= p50 hist | p50 err hist, plan as p50 | gain true / hist |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in per_vc:
        md.append(f"| {r['vc']} | {r['fold']} | {r['config']} | {r['n_true']:.0f} / {r['n_history']:.0f} | "
                  f"{r['p50_err_true']} | {r['p50_err_history']} | {r['cover_p90_history']} | "
                  f"{r['at_or_below_p50_history']} | {r['p50_err_history_plan']} | "
                  f"{r['gain_true']} / {r['gain_history']} |")
    md += ["", "| VCs | n true / hist | p50 err true | p50 err hist | p90 coverage hist | <= p50 hist | "
           "p50 err hist, plan as p50 | pooled gain true / hist |", "|---|---|---|---|---|---|---|---|"]
    for r in pooled:
        md.append(f"| {r['vcs']} ({r['n_vcs']}) | {r['n_true']} / {r['n_history']} | {r['p50_err_true']} | "
                  f"{r['p50_err_history']} | {r['cover_p90_history']} | {r['at_or_below_p50_history']} | "
                  f"{r['p50_err_history_plan']} | {r['pooled_gain_true']} / {r['pooled_gain_history']} |")
    md += ["", f"Engine default (rule on all {len(train_vcs)} training VCs): {final_cfg.label()}"]
    if args.online_km:
        md += ["History intervals: protocol v4, each VC's own last 200 queued submissions, still-waiting ones "
               "censored, Kaplan-Meier (the fold's v2 calibration until 30)"]
    if args.online:
        md += ["History intervals: protocol v3, each VC's own last 200 started queued jobs "
               "(the fold's v2 calibration until 30 have started)"]
    (args.out / "intervals_table.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
