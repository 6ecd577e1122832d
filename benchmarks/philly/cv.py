"""Leave-one-VC-out cross-validation of the tiered policy's parameters on the Philly traces.

The parameters of the ``default`` policy (attained-service tier threshold, starvation guard)
were chosen on the same VCs ``run_philly.py`` reports them on.  Here they are chosen by
leave-one-VC-out cross-validation and only out-of-fold numbers are reported:

1. Every VC is replayed once under FIFO and once per grid point (tier threshold x guard ratio)
   with true durations declared, on its whole trace, on a cluster sized by the rule below.
   The tier grid ends in the *no-tier* point ``inf`` (``NO_TIERS``): the same policy (FIFO
   inside the class, conservative backfill, the same reservations) with no demotion, so no job
   is ever preempted; it is what a threshold beyond every job's attained service would give,
   and lets the CV say whether tiers help at all.
2. Fold k (one per VC): on the *other* VCs, the grid point with the largest mean of
   ``log(FIFO avg JCT / avg JCT)`` wins (ties: the first in grid order).  The objective uses
   the true-duration runs only: the tiered order reads no estimate (estimates shape only the
   reservations), so the choice is one of policy, made once for both estimators.
3. VC k is reported with fold k's choice only, with true durations and with the history
   estimator (that run is made only for the chosen point).  FIFO's schedule does not read
   estimates (strict order, no backfill), so FIFO's true-duration JCT is the baseline of both.

Cluster sizing (data-independent rule, stated before any result): 64 devices (as the PCS
artifact) unless the VC's offered load at 64 (device-seconds of work / (devices x span of
submissions)) exceeds ``--rho`` (0.8), then the smallest multiple of 8 devices that brings it
to ``--rho`` or below; never fewer devices than the largest job asks for.  Under it every VC's
long-run load is at most 0.8, so no queue grows without bound and the whole trace can be
replayed.

Each (VC, parameters, estimator) run is cached under ``--cache`` (one gzip JSON per run,
written atomically) and a rerun resumes from it.  Outputs in ``--out``: ``cv_per_vc.csv``
(held-out numbers per VC), ``cv_pooled.csv``, ``cv_folds.csv`` (each fold's objective per grid
point and its choice) and ``cv_grid.csv`` (the whole true-duration table, in-sample).

    python benchmarks/philly/cv.py --quick     # 3 VCs x 200 jobs, small grid: seconds
    python benchmarks/philly/cv.py             # 10 VCs, whole traces: core-hours (README.md)
    python benchmarks/philly/cv.py --vcs 0e4a51,103959,11cb48,2869ce,51b7ef,7f04ca,e13805,ed69ec,6c71a0 \
        --eval-only 6c71a0 --tiers 300,900,3600,14400,57600,230400,921600,inf --guards off \
        --history-at 900,230400 --workers 2    # the committed run (README.md)

``--history-at TIERS``: a diagnostic the objective cannot see (it scores JCT with true
durations): the history estimator replayed at those thresholds on every training VC, their
in-sample JCT and start-estimate error in ``cv_history_grid.csv``; no fold reads them.

``--eval-only VC,...``: those VCs are held out and evaluated with the choice made on all the
other VCs (which never saw them), but no fold trains on them, so their grid is not replayed
(FIFO, the chosen point with each estimator and the guard comparison only): the way to add the
two biggest VCs, whose replays are the longest, without replaying the whole grid on them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_philly  # noqa: E402  (sibling script, not a package)

from accel.scheduler import InvalidRequestError  # noqa: E402
from accel.scheduler.queueing import (  # noqa: E402
    HistoryEstimator,
    HistoryModel,
    JobOutcome,
    QueueingScheduler,
    Simulator,
    TraceJob,
    load_philly,
    uniform_cluster,
)

# ``NO_TIERS`` (math.inf) is the grid's end point "tiers off": the same policy (FIFO inside the
# class, conservative backfill, the same reservations) with no demotion, hence no preemption.
# 921,600 was added by the x4 rule of README.md (folds chose 230,400, then the top finite point)
NO_TIERS = math.inf
TIERS_GRID: tuple[float, ...] = (300.0, 900.0, 3600.0, 14400.0, 57600.0, 230400.0, 921600.0, NO_TIERS)
GUARD_GRID: tuple[float | None, ...] = (None, 8.0)
RHO = 0.8
BASE_DEVICES = 64
STEP_DEVICES = 8
QUICK_VCS = ("0e4a51", "2869ce", "e13805")
QUICK_JOBS = 200
QUICK_TIERS: tuple[float, ...] = (900.0, 3600.0)
QUICK_GUARDS: tuple[float | None, ...] = (None, 8.0)
CACHE_VERSION = 2  # 2: outcomes carry the estimate's p50 / p90 start and log-spread


@dataclass(frozen=True)
class Params:
    """One grid point of the tiered policy: its single tier threshold and guard ratio."""

    tier_s: float
    guard_ratio: float | None

    @property
    def policy(self) -> str:
        return "default" if self.guard_ratio is None else "default-guard"

    @property
    def tiers(self) -> tuple[float, ...]:
        """The policy's ``demote_after_device_s``: one threshold, or none for ``NO_TIERS``."""
        return () if math.isinf(self.tier_s) else (self.tier_s,)

    def label(self) -> str:
        guard = "off" if self.guard_ratio is None else f"{self.guard_ratio:g}"
        return f"{tier_label(self.tier_s)} / guard {guard}"


def tier_label(tier_s: float) -> str:
    """``tier 900`` for a threshold, ``no tiers (inf)`` for the ``NO_TIERS`` end point."""
    return "no tiers (inf)" if math.isinf(tier_s) else f"tier {tier_s:g}"


def grid(tiers: Sequence[float], guards: Sequence[float | None]) -> list[Params]:
    return [Params(t, g) for t in tiers for g in guards]


# -- sizing -----------------------------------------------------------------------------------

def offered_load(jobs: Sequence[TraceJob], devices: int) -> float:
    """Device-seconds of work / (devices x span of submissions); 0 for a single-instant trace."""
    if not jobs:
        return 0.0
    span = max(j.submit_s for j in jobs) - min(j.submit_s for j in jobs)
    work = sum(j.duration_s * j.devices for j in jobs)
    return work / (span * devices) if span > 0 else 0.0


def size_cluster(jobs: Sequence[TraceJob], rho: float = RHO, base: int = BASE_DEVICES,
                 step: int = STEP_DEVICES) -> int:
    """The sizing rule: ``base`` devices unless the offered load there exceeds ``rho``, then the
    smallest multiple of ``step`` above it that brings the load to ``rho`` or below (and never
    fewer devices than the largest job asks for, rounded up to ``step``)."""
    if not (rho > 0 and math.isfinite(rho)):
        raise InvalidRequestError(f"target load rho must be a finite number > 0, got {rho!r}")
    if base <= 0 or step <= 0 or base % step:
        raise InvalidRequestError(f"base devices {base} must be a positive multiple of step {step}")
    widest = max((j.devices for j in jobs), default=1)
    devices = max(base, -(-widest // step) * step)
    while offered_load(jobs, devices) > rho:
        devices += step
    return devices


# -- fold logic -------------------------------------------------------------------------------

def choose(scores: Mapping[tuple[str, Params], float], vcs: Sequence[str], points: Sequence[Params],
           held_out: str) -> tuple[Params, dict[Params, float]]:
    """Fold ``held_out``: the grid point with the largest mean score over every VC but
    ``held_out`` (ties: the first in ``points``' order), and each point's training mean.
    Reads no score of ``held_out``."""
    train = [vc for vc in vcs if vc != held_out]
    if held_out not in vcs:
        raise InvalidRequestError(f"held-out VC {held_out!r} is not one of the VCs {list(vcs)}")
    if not train:
        raise InvalidRequestError("leave-one-out needs at least two VCs")
    if not points:
        raise InvalidRequestError("the parameter grid is empty")
    means: dict[Params, float] = {}
    for p in points:
        vals = []
        for vc in train:
            if (vc, p) not in scores:
                raise InvalidRequestError(f"no training score for VC {vc} at {p.label()}")
            v = scores[(vc, p)]
            if not math.isfinite(v):
                raise InvalidRequestError(f"training score for VC {vc} at {p.label()} is not finite: {v!r}")
            vals.append(v)
        means[p] = statistics.fmean(vals)
    best = max(points, key=lambda p: (means[p], -points.index(p)))
    return best, means


def fold_choice(scores: Mapping[tuple[str, Params], float], train: Sequence[str], points: Sequence[Params],
                held_out: str) -> tuple[Params, dict[Params, float]]:
    """The fold of ``held_out``: leave-one-out among the ``train`` VCs for one of them; for an
    evaluation-only VC (not in ``train``), the choice on every training VC.  Either way it reads
    no score of ``held_out``, and an evaluation-only VC's scores are read by no fold."""
    if held_out in train:
        return choose(scores, train, points, held_out)
    return choose(scores, [*train, held_out], points, held_out)


def log_gain(fifo_avg_jct_s: float, avg_jct_s: float) -> float:
    """The objective per VC: log(FIFO average JCT / the policy's average JCT)."""
    if not (fifo_avg_jct_s > 0 and avg_jct_s > 0):
        raise InvalidRequestError(f"average JCTs must be > 0, got FIFO {fifo_avg_jct_s!r}, policy {avg_jct_s!r}")
    return math.log(fifo_avg_jct_s / avg_jct_s)


# -- runs and their cache ---------------------------------------------------------------------

@dataclass(frozen=True)
class RunKey:
    vc: str
    policy: str  # "fifo" or "default" / "default-guard"
    tier_s: float | None
    guard_ratio: float | None
    estimator: str
    devices: int
    limit: int | None
    overhead_s: float = run_philly.PREEMPT_OVERHEAD_S
    history: str = json.dumps(run_philly.HISTORY, sort_keys=True)

    def filename(self) -> str:
        pol = self.policy if self.policy == "fifo" else f"t{self.tier_s:g}-g{self.guard_ratio or 'off'}"
        return f"{self.vc}_{self.estimator}_{pol}_d{self.devices}_n{self.limit or 'all'}.json.gz"


@dataclass
class Run:
    key: RunKey
    outcomes: list[JobOutcome]
    busy_device_s: float
    makespan_s: float
    wall_s: float


def simulate(key: RunKey, traces: str) -> Run:
    """Replay one VC's trace for ``key`` (as ``run_philly.run_one``).  FIFO is the JCT baseline
    only: its start estimates are not taken (``estimate_at_submit=False``; strict FIFO without
    backfill never reads an estimate, so the schedule is the same, tested), because the
    estimate walks the whole queue at each submission and FIFO's queue runs to thousands."""
    jobs = load_philly(Path(traces) / f"trace_{key.vc}.csv", limit=key.limit)
    model = HistoryModel(**json.loads(key.history)) if key.estimator == "history" else None
    if key.policy == "fifo":
        policy = run_philly.POLICIES["fifo"]
    else:
        if key.tier_s is None:
            raise InvalidRequestError(f"run {key.filename()}: a tiered policy needs a tier threshold")
        tiers = () if math.isinf(key.tier_s) else (key.tier_s,)  # NO_TIERS: no demotion at all
        policy = replace(run_philly.tiered_policy(tiers, key.overhead_s),
                         promote_after_wait_ratio=key.guard_ratio)
    eng = QueueingScheduler(uniform_cluster(key.devices // 8, 8), policy, durations=model)
    sim = Simulator(eng, jobs, HistoryEstimator(model) if model is not None else None,
                    estimate_at_submit=key.policy != "fifo")
    t0 = time.perf_counter()
    res = sim.run()
    return Run(key, res.outcomes, res.busy_device_s, res.makespan_s, time.perf_counter() - t0)


def outcome_rows(outcomes: Sequence[JobOutcome]) -> list[list[object]]:
    """A replay's outcomes as the cache stores them (``JobOutcome(*row)`` reads one back)."""
    return [[o.id, o.tenant, o.devices, o.duration_s, o.submit_s, o.start_s, o.end_s, o.estimate_s,
             o.lost_s, o.estimate_p50_s, o.estimate_p90_s, o.estimate_log_spread] for o in outcomes]


def write_cache(path: Path, body: Mapping[str, object]) -> None:
    """Write atomically: a killed run leaves no half-written cache file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with gzip.open(tmp, "wt") as fh:
        json.dump(body, fh)
    os.replace(tmp, path)


def read_cache(path: Path, version: int, key: RunKey) -> dict[str, Any] | None:
    """The cached body at ``path``, or None if absent, unreadable, or made for another key / format."""
    if not path.exists():
        return None
    try:
        with gzip.open(path, "rt") as fh:
            body = json.load(fh)
    except (OSError, ValueError):
        return None  # unreadable: recompute rather than trust it
    if not isinstance(body, dict) or body.get("version") != version or \
            body.get("key") != json.loads(json.dumps(asdict(key))):
        return None
    return body


def save(run: Run, cache: Path) -> None:
    """Write atomically: a killed run leaves no half-written cache file."""
    write_cache(cache / run.key.filename(),
                {"version": CACHE_VERSION, "key": asdict(run.key), "busy_device_s": run.busy_device_s,
                 "makespan_s": run.makespan_s, "wall_s": run.wall_s, "outcomes": outcome_rows(run.outcomes)})


def load(key: RunKey, cache: Path) -> Run | None:
    """The cached run of ``key``, or None if absent or made for another key / format."""
    body = read_cache(cache / key.filename(), CACHE_VERSION, key)
    if body is None:
        return None
    outs = [JobOutcome(*row) for row in body["outcomes"]]
    return Run(key, outs, body["busy_device_s"], body["makespan_s"], body["wall_s"])


def ensure(keys: Sequence[RunKey], traces: str, cache: Path, workers: int,
           sizes: Mapping[str, int]) -> dict[RunKey, Run]:
    """Every run of ``keys``, from the cache where there, else simulated (biggest VC first) and
    cached as soon as each finishes."""
    have: dict[RunKey, Run] = {}
    todo = []
    for k in dict.fromkeys(keys):
        r = load(k, cache)
        if r is None:
            todo.append(k)
        else:
            have[k] = r
    todo.sort(key=lambda k: -sizes[k.vc])
    if todo:
        print(f"cv: {len(have)} runs cached, {len(todo)} to simulate", file=sys.stderr, flush=True)
    t0 = time.perf_counter()

    def done(r: Run) -> None:
        save(r, cache)
        have[r.key] = r
        print(f"cv: [{time.perf_counter() - t0:7.0f} s] {r.key.vc} {r.key.estimator} {r.key.policy} "
              f"tier={r.key.tier_s} guard={r.key.guard_ratio} n={len(r.outcomes)} wall {r.wall_s:.1f} s",
              file=sys.stderr, flush=True)

    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(workers) as pool:
            futs: list[Future[Run]] = [pool.submit(simulate, k, traces) for k in todo]
            for f in as_completed(futs):
                done(f.result())
    else:
        for k in todo:
            done(simulate(k, traces))
    return have


# -- metrics ----------------------------------------------------------------------------------

def _pct(xs: Sequence[float], q: float) -> float:
    return xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)] if xs else math.nan


def metrics(outs: Sequence[JobOutcome]) -> dict[str, float]:
    """Per-job metrics of one run (or a pool of runs).  Raises if any job did not finish: a
    replay that stops early would be a partial result reported as whole."""
    unfinished = [o.id for o in outs if o.end_s is None or o.start_s is None]
    if unfinished:
        raise InvalidRequestError(f"{len(unfinished)} jobs never finished (first: {unfinished[0]}); "
                                  "the run is partial")
    # (job, start, end) with the Nones excluded above, for the type checker too
    fin = [(o, o.start_s, o.end_s) for o in outs if o.start_s is not None and o.end_s is not None]
    jct = sorted(end - o.submit_s for o, _, end in fin)
    wait = sorted(start - o.submit_s for o, start, _ in fin)
    # time queued over a job's whole life (before its first start and while preempted), as run_philly.py
    queued = sorted(max(0.0, end - o.submit_s - o.duration_s - o.lost_s) for o, _, end in fin)
    waited = [(o, start) for o, start, _ in fin if start - o.submit_s >= 60.0]
    rel = [abs(o.estimate_s - start) / (start - o.submit_s) for o, start in waited if o.estimate_s is not None]
    # the estimate's interval at submission (p50 / p90 start; p50 = p90 = the plan with true
    # durations, the engine's calibration with the history estimator), over the same waiters:
    # median relative error of p50, share of starts at or before p90 (coverage) and p50
    iv = [(o.submit_s, start, o.estimate_p50_s, o.estimate_p90_s) for o, start in waited
          if o.estimate_p50_s is not None and o.estimate_p90_s is not None]
    p50_err = [abs(p50 - start) / (start - sub) for sub, start, p50, _ in iv]
    cover90 = [start <= p90 + 1e-6 for _, start, _, p90 in iv]
    below50 = [start <= p50 + 1e-6 for _, start, p50, _ in iv]
    return {
        "n": float(len(outs)), "avg_jct_s": statistics.fmean(jct) if jct else math.nan,
        "p99_jct_s": _pct(jct, 0.99), "p50_wait_s": _pct(wait, 0.5), "p99_wait_s": _pct(wait, 0.99),
        "p999_wait_s": _pct(wait, 0.999), "max_wait_s": wait[-1] if wait else math.nan,
        "p99_queued_s": _pct(queued, 0.99), "p999_queued_s": _pct(queued, 0.999),
        "max_queued_s": queued[-1] if queued else math.nan,
        "waited_1min": float(len(waited)), "est_err_median": statistics.median(rel) if rel else math.nan,
        "est_within_10pct": sum(r < 0.10 for r in rel) / len(rel) if rel else math.nan,
        "p50_err_median": statistics.median(p50_err) if p50_err else math.nan,
        "cover_p90": sum(cover90) / len(iv) if iv else math.nan,
        "at_or_below_p50": sum(below50) / len(iv) if iv else math.nan,
        "lost_s": sum(o.lost_s for o in outs),
    }


# -- main -------------------------------------------------------------------------------------

def _floats(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not vals or not all(v > 0 and math.isfinite(v) for v in vals):
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be a finite number > 0")
    return vals


def _tiers(text: str) -> tuple[float, ...]:
    """Tier thresholds: finite numbers > 0, and ``inf`` (or ``off``) for the no-tier end point."""
    vals: list[float] = []
    for part in (x.strip() for x in text.split(",") if x.strip()):
        try:
            vals.append(NO_TIERS if part.lower() in ("inf", "off") else _floats(part)[0])
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{text!r}: {part!r} is neither a finite number > 0 nor 'inf'") from None
    if not vals:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one tier threshold or 'inf'")
    if len(set(vals)) < len(vals):
        raise argparse.ArgumentTypeError(f"{text!r}: a tier threshold is given twice")
    return tuple(vals)


def _guards(text: str) -> tuple[float | None, ...]:
    out: list[float | None] = []
    for part in (x.strip() for x in text.split(",") if x.strip()):
        out.append(None if part.lower() == "off" else run_philly._positive_or_off(part))
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one guard ratio or 'off'")
    return tuple(out)


def _workers(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def _rho(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (0 < v < 1):
        raise argparse.ArgumentTypeError(f"{text!r} must lie strictly between 0 and 1")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 VCs x 200 jobs, grid tiers 900,3600 x guard off,8")
    ap.add_argument("--vcs", default=None, help="comma-separated VC ids (default: every trace file)")
    ap.add_argument("--jobs-per-vc", type=run_philly._non_negative(int), default=None,
                    help="first N jobs per VC (default: all; --quick: 150)")
    ap.add_argument("--tiers", type=_tiers, default=None,
                    help="tier thresholds to try, device-seconds; 'inf' = the no-tier end point (no demotion)")
    ap.add_argument("--guards", type=_guards, default=None, help="guard ratios to try ('off' = no guard)")
    ap.add_argument("--guard-report", type=run_philly._positive_or_off, default=run_philly.PROMOTE_RATIO,
                    help="also replay each held-out VC at its fold's tier with this guard ratio (or without the "
                         "guard if the fold chose one), true durations, to report the guard's effect ('off': no)")
    ap.add_argument("--eval-only", default="",
                    help="comma-separated VCs (of --vcs) held out and evaluated with the parameters chosen on the "
                         "other VCs, but used for choosing in no fold (their grid is not replayed)")
    ap.add_argument("--rho", type=_rho, default=RHO, help="target offered load of the sizing rule")
    ap.add_argument("--estimators", default="true,history", help="true,history or true")
    ap.add_argument("--history-at", type=_tiers, default=(),
                    help="diagnostic: also replay the history estimator at these tier thresholds (guard off) on "
                         "every training VC and write their in-sample JCT and estimate error to "
                         "cv_history_grid.csv; no fold reads them")
    ap.add_argument("--workers", type=_workers, default=1, help="replays in parallel (processes)")
    ap.add_argument("--traces", default=str(run_philly.TRACES))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--cache", default=None, help="run cache (default: <out>/cache/<profile>)")
    args = ap.parse_args(argv)
    ests = [e for e in args.estimators.split(",") if e]
    if "true" not in ests or not set(ests) <= {"true", "history"}:
        ap.error(f"argument --estimators: {args.estimators!r} must be 'true' or 'true,history'")
    if args.history_at and "history" not in ests:
        ap.error("argument --history-at: needs the history estimator (--estimators true,history)")
    traces = Path(args.traces)
    if not traces.is_dir():
        ap.error(f"argument --traces: {traces} is not a directory")
    if args.vcs:
        vcs = [v for v in args.vcs.split(",") if v]
    elif args.quick:
        vcs = list(QUICK_VCS)
    else:
        vcs = sorted(p.stem.removeprefix("trace_") for p in traces.glob("trace_*.csv"))
    missing = [vc for vc in vcs if not (traces / f"trace_{vc}.csv").exists()]
    if missing:
        ap.error(f"argument --vcs: no trace file for {', '.join(missing)} in {traces}")
    if len(vcs) < 2:
        ap.error("argument --vcs: leave-one-out needs at least two VCs")
    eval_only = [v for v in args.eval_only.split(",") if v]
    stray = [v for v in eval_only if v not in vcs]
    if stray:
        ap.error(f"argument --eval-only: {', '.join(stray)} not among the VCs {vcs}")
    train = [vc for vc in vcs if vc not in eval_only]
    if len(train) < 2:
        ap.error("argument --eval-only: leave-one-out needs at least two VCs that are not evaluation-only")
    limit_arg: int = args.jobs_per_vc if args.jobs_per_vc is not None else (QUICK_JOBS if args.quick else 0)
    limit = limit_arg or None
    tiers: tuple[float, ...] = args.tiers or (QUICK_TIERS if args.quick else TIERS_GRID)
    guards: tuple[float | None, ...] = args.guards or (QUICK_GUARDS if args.quick else GUARD_GRID)
    points = grid(tiers, guards)
    profile = "quick" if args.quick else "full"
    out = Path(args.out)
    cache = Path(args.cache) if args.cache else out / "cache" / f"{profile}-n{limit or 'all'}-rho{args.rho:g}"

    jobs = {vc: load_philly(traces / f"trace_{vc}.csv", limit=limit) for vc in vcs}
    devices = {vc: size_cluster(jobs[vc], args.rho) for vc in vcs}
    sizes = {vc: len(jobs[vc]) for vc in vcs}

    def key(vc: str, p: Params | None, est: str) -> RunKey:
        if p is None:
            return RunKey(vc, "fifo", None, None, est, devices[vc], limit)
        return RunKey(vc, p.policy, p.tier_s, p.guard_ratio, est, devices[vc], limit)

    # 1. the true-duration table: FIFO and every grid point on every training VC (FIFO only on
    # an evaluation-only VC: its baseline)
    runs = ensure([key(vc, p, "true") for vc in train for p in [None, *points]]
                  + [key(vc, None, "true") for vc in eval_only], str(traces), cache, args.workers, sizes)
    m = {k: metrics(r.outcomes) for k, r in runs.items()}
    scores = {(vc, p): log_gain(m[key(vc, None, "true")]["avg_jct_s"], m[key(vc, p, "true")]["avg_jct_s"])
              for vc in train for p in points}
    # 2. the folds
    chosen: dict[str, Params] = {}
    fold_rows: list[dict[str, object]] = []
    for vc in vcs:
        best, means = fold_choice(scores, train, points, vc)
        chosen[vc] = best
        for p in points:
            fold_rows.append({"held_out": vc, "tier_s": p.tier_s, "guard_ratio": p.guard_ratio or "off",
                              "train_mean_log_gain": round(means[p], 6), "chosen": int(p == best),
                              "fold": "leave-one-out" if vc in train else "evaluation-only"})
    # 3. the held-out VC with its fold's choice, history estimator too; and with the guard's
    # setting flipped at the fold's tier (reported, not chosen from)
    flipped = {vc: Params(chosen[vc].tier_s, args.guard_report if chosen[vc].guard_ratio is None else None)
               for vc in vcs}
    extra = [key(vc, chosen[vc], "true") for vc in eval_only]
    extra += [key(vc, chosen[vc], "history") for vc in vcs if "history" in ests]
    extra += [key(vc, flipped[vc], "true") for vc in vcs if flipped[vc].guard_ratio != chosen[vc].guard_ratio]
    runs.update(ensure(extra, str(traces), cache, args.workers, sizes))
    m.update({k: metrics(r.outcomes) for k, r in runs.items() if k not in m})

    per_vc: list[dict[str, object]] = []
    for vc in vcs:
        p = chosen[vc]
        fifo, t = m[key(vc, None, "true")], m[key(vc, p, "true")]
        other = flipped[vc]
        row: dict[str, object] = {
            "vc": vc, "fold": "leave-one-out" if vc in train else "evaluation-only", "n": int(t["n"]),
            "devices": devices[vc],
            "offered_load": round(offered_load(jobs[vc], devices[vc]), 4),
            "fifo_avg_jct_h": _h(fifo["avg_jct_s"]), "tier_s": p.tier_s,
            "guard_ratio": p.guard_ratio or "off", "gain_true": round(fifo["avg_jct_s"] / t["avg_jct_s"], 4),
            "avg_jct_h_true": _h(t["avg_jct_s"]), "p99_jct_h_true": _h(t["p99_jct_s"]),
            "p50_wait_s_true": round(t["p50_wait_s"], 1), "p99_wait_s_true": round(t["p99_wait_s"], 1),
            "est_err_median_true": _r(t["est_err_median"]), "waited_1min_true": int(t["waited_1min"]),
            "est_within_10pct_true": _r(t["est_within_10pct"]), "p50_err_median_true": _r(t["p50_err_median"]),
            "cover_p90_true": _r(t["cover_p90"]),
            "p999_queued_h_true": _h(t["p999_queued_s"]), "max_queued_h_true": _h(t["max_queued_s"]),
        }
        if "history" in ests:
            h = m[key(vc, p, "history")]
            row.update({"gain_history": round(fifo["avg_jct_s"] / h["avg_jct_s"], 4),
                        "avg_jct_h_history": _h(h["avg_jct_s"]),
                        "p99_jct_h_history": _h(h["p99_jct_s"]),
                        "p50_wait_s_history": round(h["p50_wait_s"], 1),
                        "p99_wait_s_history": round(h["p99_wait_s"], 1),
                        "est_err_median_history": _r(h["est_err_median"]),
                        "waited_1min_history": int(h["waited_1min"]),
                        "p50_err_median_history": _r(h["p50_err_median"]),
                        "cover_p90_history": _r(h["cover_p90"]),
                        "at_or_below_p50_history": _r(h["at_or_below_p50"])})
        # the guard's effect at the fold's tier (true durations): the guard setting flipped
        if other != p:
            o = m[key(vc, other, "true")]
            off, on = (t, o) if p.guard_ratio is None else (o, t)
            row.update({"guard_cmp_ratio": other.guard_ratio or p.guard_ratio,
                        "p999_queued_h_guard_off": _h(off["p999_queued_s"]),
                        "max_queued_h_guard_off": _h(off["max_queued_s"]),
                        "p999_queued_h_guard_on": _h(on["p999_queued_s"]),
                        "max_queued_h_guard_on": _h(on["max_queued_s"]),
                        "avg_jct_h_guard_off": _h(off["avg_jct_s"]),
                        "avg_jct_h_guard_on": _h(on["avg_jct_s"])})
        per_vc.append(row)

    pooled: list[dict[str, object]] = []
    fifo_all = [o for vc in vcs for o in runs[key(vc, None, "true")].outcomes]
    fm = metrics(fifo_all)
    for est in ests:
        outs = [o for vc in vcs for o in runs[key(vc, chosen[vc], est)].outcomes]
        pm = metrics(outs)
        gains = [fm_vc / pm_vc for fm_vc, pm_vc in
                 ((m[key(vc, None, "true")]["avg_jct_s"], m[key(vc, chosen[vc], est)]["avg_jct_s"]) for vc in vcs)]
        pooled.append({"estimator": est, "vcs": len(vcs), "n": int(pm["n"]), "fifo_avg_jct_h": _h(fm["avg_jct_s"]),
                       "avg_jct_h": _h(pm["avg_jct_s"]), "gain_pooled": round(fm["avg_jct_s"] / pm["avg_jct_s"], 4),
                       "gain_geomean_per_vc": round(math.exp(statistics.fmean(math.log(g) for g in gains)), 4),
                       "p99_jct_h": _h(pm["p99_jct_s"]), "p50_wait_s": round(pm["p50_wait_s"], 1),
                       "p99_wait_s": round(pm["p99_wait_s"], 1), "p999_queued_h": _h(pm["p999_queued_s"]),
                       "max_queued_h": _h(pm["max_queued_s"]), "est_err_median": _r(pm["est_err_median"]),
                       "waited_1min": int(pm["waited_1min"]), "est_within_10pct": _r(pm["est_within_10pct"]),
                       "p50_err_median": _r(pm["p50_err_median"]), "cover_p90": _r(pm["cover_p90"]),
                       "at_or_below_p50": _r(pm["at_or_below_p50"])})
    grid_rows = []
    for vc in train:  # the table the folds choose from (an evaluation-only VC has no grid)
        for pt in [None, *points]:
            k = key(vc, pt, "true")
            mm = m[k]
            grid_rows.append({"vc": vc, "devices": devices[vc], "policy": k.policy, "tier_s": k.tier_s or "",
                              "guard_ratio": k.guard_ratio or ("off" if pt else ""), "n": int(mm["n"]),
                              "avg_jct_h": round(mm["avg_jct_s"] / 3600, 4), "p99_jct_h": _h(mm["p99_jct_s"]),
                              "log_gain": round(scores[(vc, pt)], 6) if pt else 0.0,
                              "max_queued_h": _h(mm["max_queued_s"]), "est_err_median": _r(mm["est_err_median"]),
                              "waited_1min": int(mm["waited_1min"]), "wall_s": round(runs[k].wall_s, 1)})
    # the diagnostic history grid (in-sample: the estimate error the JCT objective cannot see)
    hist_rows: list[dict[str, object]] = []
    if args.history_at:
        hkeys = {(vc, t): key(vc, Params(t, None), "history") for t in args.history_at for vc in train}
        runs.update(ensure(list(hkeys.values()), str(traces), cache, args.workers, sizes))
        for t in args.history_at:
            for vc in [*train, None]:  # None: the training VCs pooled
                sel = [vc] if vc else train
                hm = metrics([o for v in sel for o in runs[hkeys[(v, t)]].outcomes])
                fifo_jct = metrics([o for v in sel for o in runs[key(v, None, "true")].outcomes])["avg_jct_s"]
                hist_rows.append({"vc": vc or "pooled", "tier_s": t, "n": int(hm["n"]),
                                  "avg_jct_h": _h(hm["avg_jct_s"]), "gain": round(fifo_jct / hm["avg_jct_s"], 4),
                                  "est_err_median": _r(hm["est_err_median"]), "waited_1min": int(hm["waited_1min"])})
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    if hist_rows:
        run_philly._write(out / f"cv_history_grid{suffix}.csv", hist_rows)
    run_philly._write(out / f"cv_per_vc{suffix}.csv", per_vc)
    run_philly._write(out / f"cv_pooled{suffix}.csv", pooled)
    run_philly._write(out / f"cv_folds{suffix}.csv", fold_rows)
    run_philly._write(out / f"cv_grid{suffix}.csv", grid_rows)
    print(_markdown(per_vc, pooled, "history" in ests))
    return 0


def _markdown(per_vc: list[dict[str, object]], pooled: list[dict[str, object]], history: bool) -> str:
    """The per-VC and pooled tables as README markdown (history columns '-' without that run)."""
    def g(row: dict[str, object], k: str) -> str:
        v = row.get(k, "-")
        return "-" if v == "" else str(v)

    lines = ["| VC | n | devices | load | FIFO avg JCT (h) | chosen tier / guard | gain true | gain history "
             "| p99 JCT (h) true / history | wait p50 / p99 (s) true / history | est. err true (n) "
             "| est. err history (n) | queued p99.9 / max (h), guard off -> on |",
             "|" + "---|" * 13]
    for r in per_vc:
        guard = (f"{g(r, 'p999_queued_h_guard_off')} / {g(r, 'max_queued_h_guard_off')} -> "
                 f"{g(r, 'p999_queued_h_guard_on')} / {g(r, 'max_queued_h_guard_on')} (ratio {g(r, 'guard_cmp_ratio')})"
                 if "guard_cmp_ratio" in r else "-")
        lines.append(
            f"| {r['vc']}{' (eval-only)' if r.get('fold') == 'evaluation-only' else ''} "
            f"| {r['n']:,} | {r['devices']} | {r['offered_load']:.2f} | {r['fifo_avg_jct_h']} "
            f"| {r['tier_s']:g} / {r['guard_ratio']} | {r['gain_true']:.2f} "
            f"| {g(r, 'gain_history') if history else '-'} "
            f"| {r['p99_jct_h_true']} / {g(r, 'p99_jct_h_history')} "
            f"| {r['p50_wait_s_true']} / {r['p99_wait_s_true']}; {g(r, 'p50_wait_s_history')} / "
            f"{g(r, 'p99_wait_s_history')} | {g(r, 'est_err_median_true')} ({r['waited_1min_true']}) "
            f"| {g(r, 'est_err_median_history')} ({g(r, 'waited_1min_history')}) | {guard} |")
    lines += ["", "| declared | VCs | n | FIFO avg JCT (h) | avg JCT (h) | pooled gain | geomean gain per VC "
              "| p99 JCT (h) | wait p50 / p99 (s) | queued p99.9 / max (h) | est. err (n) |", "|" + "---|" * 11]
    for r in pooled:
        lines.append(f"| {r['estimator']} | {r['vcs']} | {r['n']:,} | {r['fifo_avg_jct_h']} | {r['avg_jct_h']} "
                     f"| {r['gain_pooled']:.2f} | {r['gain_geomean_per_vc']:.2f} | {r['p99_jct_h']} "
                     f"| {r['p50_wait_s']} / {r['p99_wait_s']} | {r['p999_queued_h']} / {r['max_queued_h']} "
                     f"| {g(r, 'est_err_median')} ({r['waited_1min']}) |")
    # the start estimates' intervals at submission, per VC and pooled (waiters >= 1 min)
    lines += ["", "| VC | fold | gain true / history | waiters true | p50 err true | within 10% true "
              "| waiters history | p50 err history | p90 coverage history | <= p50 history |", "|" + "---|" * 10]
    for r in per_vc:
        gain_h = f"{r['gain_history']:.2f}" if isinstance(r.get("gain_history"), float) else "-"
        lines.append(f"| {r['vc']} | {r.get('fold', '-')} | {r['gain_true']:.2f} / {gain_h} "
                     f"| {r['waited_1min_true']} | {g(r, 'p50_err_median_true')} | {g(r, 'est_within_10pct_true')} "
                     f"| {g(r, 'waited_1min_history')} | {g(r, 'p50_err_median_history')} "
                     f"| {g(r, 'cover_p90_history')} | {g(r, 'at_or_below_p50_history')} |")
    by_est = {str(r["estimator"]): r for r in pooled}
    t, h = by_est.get("true", {}), by_est.get("history", {})
    if t:
        gain_h = f"{h['gain_pooled']:.2f}" if h else "-"
        lines.append(f"| pooled ({t['vcs']} VCs) | - | {t['gain_pooled']:.2f} / {gain_h} "
                     f"| {t['waited_1min']} | {g(t, 'p50_err_median')} "
                     f"| {g(t, 'est_within_10pct')} | {g(h, 'waited_1min')} | {g(h, 'p50_err_median')} "
                     f"| {g(h, 'cover_p90')} | {g(h, 'at_or_below_p50')} |")
    return "\n".join(lines)


def _h(seconds: float) -> float:
    return round(seconds / 3600, 3)


def _r(v: float) -> object:
    return "" if math.isnan(v) else round(v, 4)


if __name__ == "__main__":
    raise SystemExit(main())
