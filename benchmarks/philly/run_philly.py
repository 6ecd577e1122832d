"""Replay the Philly VC traces on a cluster per VC and compare queueing policies.

Each VC's jobs are replayed in submit order on its own cluster of ``--devices-per-vc``
devices (8 per host; 64 as in the PCS artifact).  The scheduler sees a declared estimate only:
the run is done twice, once declaring the trace's true duration (``true``) and once with
``HistoryModel`` (``history``: by default the mean of every job of the same VC and size that
finished earlier in the replay, ``--history-statistic`` / ``--history-window`` to change it;
running jobs' residual time E[D - t | D > t] from their elapsed time t).

Policies: ``fifo`` (strict order, no backfill), ``fifo-backfill`` (FIFO + EASY backfill),
``shortest`` (shortest-estimated-first + EASY), ``shortest-banded`` (shortest-first in bands of
4x, FIFO inside a band, conservative backfill), ``default`` (attained-service tiers, FIFO inside
a tier, suspend/resume preemption, conservative backfill) and ``default-guard`` (``default`` with
the starvation guard: a waiting job is promoted after ``--promote-ratio`` x its last run and/or
``--promote-after`` seconds of waiting).

``--scorer`` picks where queued jobs go (the engine's placement pipeline; default ``fewest-free``,
the engine's historical rule: fewest free devices that fit, gangs biggest free first); the
fragmentation-aware scorers (``fgd``, ``fgd-plus``, ...) get the VC's own job sizes as their target
workload.

Outputs (``--out``, default ``benchmarks/philly/results``): ``summary.csv`` (combined VCs),
``per_vc.csv``, ``jobs_<estimator>_<policy>.csv`` (per job), ``jct.png`` and ``estimate_error.png``.

    python benchmarks/philly/run_philly.py --quick          # CI smoke: seconds
    python benchmarks/philly/run_philly.py                  # full profile
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accel.scheduler import InvalidRequestError, Request, available_scorers
from accel.scheduler.queueing import (
    BackfillMode,
    HistoryEstimator,
    HistoryModel,
    InClassOrder,
    JobOutcome,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    SimResult,
    Simulator,
    load_philly,
    uniform_cluster,
)

HERE = Path(__file__).resolve().parent
TRACES = HERE.parents[1].parent / "shared" / "traces" / "philly"
POLICIES: dict[str, Policy] = {
    "fifo": Policy(backfill=BackfillMode.NONE),
    "fifo-backfill": Policy(backfill=BackfillMode.EASY),
    "shortest": Policy(classes=(PriorityClass("default", 0, InClassOrder.SHORTEST),), backfill=BackfillMode.EASY),
    "shortest-banded": Policy(classes=(PriorityClass("default", 0, InClassOrder.SHORTEST, band_ratio=4.0),),
                              backfill=BackfillMode.CONSERVATIVE),
}
# the tiered policy: attained-service tiers (device-seconds), suspend/resume preemption that
# costs each victim PREEMPT_OVERHEAD_S of run time, FIFO inside a tier, conservative backfill
TIERS: tuple[float, ...] = (900.0,)
PREEMPT_OVERHEAD_S = 60.0


def _tiers_arg(text: str) -> tuple[float, ...]:
    try:
        tiers = tuple(float(x) for x in text.split(",") if x.strip())
        tiered_policy(tiers)  # the Policy's own checks: positive, finite, ascending
    except (ValueError, InvalidRequestError) as exc:
        raise argparse.ArgumentTypeError(f"--tiers {text!r}: {exc}") from None
    return tiers


def _non_negative(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value >= 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
        return value
    return parse


def _positive_or_off(text: str) -> float | None:
    if text.strip().lower() in ("off", "none"):
        return None
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (or 'off')") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0 (or 'off')")
    return v


def tiered_policy(tiers: tuple[float, ...] = TIERS, overhead_s: float = PREEMPT_OVERHEAD_S) -> Policy:
    return Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                  preempt_mode=PreemptMode.SUSPEND, demote_after_device_s=tiers, preempt_overhead_s=overhead_s)


POLICIES["default"] = tiered_policy()
# the starvation guard's row: the default policy, a waiting job promoted after PROMOTE_RATIO x
# its last run (Tiresias' STARVELIMIT) or PROMOTE_AFTER_S of waiting (None: no absolute bound)
PROMOTE_RATIO: float | None = 8.0
PROMOTE_AFTER_S: float | None = None
POLICIES["default-guard"] = replace(tiered_policy(), promote_after_wait_ratio=PROMOTE_RATIO,
                                    promote_after_wait_s=PROMOTE_AFTER_S)
# the history estimator's configuration (chosen by the sweep recorded in README.md)
HISTORY: dict[str, Any] = {"statistic": "mean", "window": 64}
KM = "km-mean"
QUICK = {"vcs": ["2869ce", "e13805", "6c71a0"], "jobs": 150}
DEFAULT_SCORER = "fewest-free"  # QueueingScheduler's default: the engine's historical placement rule
FULL_JOBS = 2000


@dataclass(frozen=True)
class Task:
    vc: str
    policy: str
    estimator: str
    devices: int
    limit: int | None
    traces: str
    history: tuple[tuple[str, object], ...] = ()
    tiers: tuple[float, ...] = TIERS
    overhead_s: float = PREEMPT_OVERHEAD_S
    skip: int = 0
    eval_from: int = 0
    promote: tuple[float | None, float | None] = (PROMOTE_RATIO, PROMOTE_AFTER_S)
    estimate_depth: int | None = None
    scorer: str = DEFAULT_SCORER


def run_one(task: Task) -> tuple[Task, list[JobOutcome], dict[str, float], float]:
    limit = None if task.limit is None else task.limit + task.eval_from
    jobs = load_philly(Path(task.traces) / f"trace_{task.vc}.csv", limit=limit, skip=task.skip)
    model = HistoryModel(**dict(task.history)) if task.estimator == "history" else None  # type: ignore[arg-type]
    if task.policy in ("default", "default-guard"):
        policy = tiered_policy(task.tiers, task.overhead_s)
        if task.policy == "default-guard":
            policy = replace(policy, promote_after_wait_ratio=task.promote[0], promote_after_wait_s=task.promote[1])
    else:
        policy = POLICIES[task.policy]
    # the target workload of the fragmentation-aware scorers: the VC's job sizes (per 8-GPU host)
    workload = [Request(f"w{i}", devices=min(j.devices, 8)) for i, j in enumerate(jobs)]
    eng = QueueingScheduler(uniform_cluster(max(1, task.devices // 8), 8), policy, durations=model,
                            scorer=task.scorer, workload=workload)
    if model is not None and KM in (model.statistic, model.plan_statistic):
        model.attach_engine(eng)  # running jobs' elapsed times as censored observations
    sim = Simulator(eng, jobs, HistoryEstimator(model) if model is not None else None,
                    estimate_depth=task.estimate_depth)
    t0 = time.perf_counter()
    res = sim.run()
    wall = time.perf_counter() - t0
    # placement locality (what the scorer changes here: starts are decided on free-device counts,
    # and a job not on one host is split over hosts): placements of jobs that fit on one 8-GPU
    # host, and how many of them were split over several hosts
    small = split = 0
    for ev in eng.journal.events():
        if ev.kind in ("placed", "resumed") and sum(len(c[1]) for c in ev.data["chunks"]) <= 8:
            small += 1
            split += len(ev.data["chunks"]) > 1
    if task.eval_from:
        # score only the jobs after the first eval_from: the replay before them warms the cluster
        # and the history exactly as a live system would be warm
        scored = {j.id for j in jobs[task.eval_from:]}
        res = SimResult([o for o in res.outcomes if o.id in scored], res.capacity_devices, res.makespan_s,
                        res.busy_device_s, res.cycles)
    return task, res.outcomes, {**res.metrics(), "capacity": float(res.capacity_devices),
                                "busy_device_s": res.busy_device_s, "makespan_s": res.makespan_s,
                                "small_placements": float(small), "split_placements": float(split)}, wall


def summarize(outcomes: list[JobOutcome], busy: float, cap_time: float) -> dict[str, float]:
    done = [o for o in outcomes if o.end_s is not None and o.start_s is not None]
    jct = sorted(o.end_s - o.submit_s for o in done)  # type: ignore[operator]
    wait = sorted(o.start_s - o.submit_s for o in done)  # type: ignore[operator]
    # time queued over a job's whole life (before its first start and while preempted): JCT less
    # its run time (its duration and the work it lost and ran again); what a starvation guard bounds
    queued = sorted(max(0.0, o.end_s - o.submit_s - o.duration_s - o.lost_s) for o in done)  # type: ignore[operator]
    waited = [o for o in done if o.start_s - o.submit_s >= 60.0]  # type: ignore[operator]
    rel = [abs(o.estimate_s - o.start_s) / (o.start_s - o.submit_s) for o in waited  # type: ignore[operator]
           if o.estimate_s is not None]
    abs_err = [abs(o.estimate_s - o.start_s) for o in waited if o.estimate_s is not None]  # type: ignore[operator]
    waits_1m = [o.start_s - o.submit_s for o in waited]  # type: ignore[operator]

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)] if xs else math.nan

    return {
        "jobs": len(outcomes), "avg_jct_s": statistics.fmean(jct) if jct else math.nan, "p99_jct_s": pct(jct, 0.99),
        "avg_wait_s": statistics.fmean(wait) if wait else math.nan, "p50_wait_s": pct(wait, 0.50),
        "p99_wait_s": pct(wait, 0.99), "max_wait_s": wait[-1] if wait else math.nan,
        "p50_queued_s": pct(queued, 0.50), "p99_queued_s": pct(queued, 0.99),
        "max_queued_s": queued[-1] if queued else math.nan,
        "utilisation": busy / cap_time if cap_time else math.nan,
        "waited_1min": len(waited),
        "est_median_rel_err": statistics.median(rel) if rel else math.nan,
        "est_within_10pct": (sum(1 for r in rel if r < 0.10) / len(rel)) if rel else math.nan,
        "est_mdae_over_median_wait": (statistics.median(abs_err) / statistics.median(waits_1m)) if rel else math.nan,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="CI smoke profile (3 VCs x 150 jobs)")
    ap.add_argument("--devices-per-vc", type=int, default=64)
    ap.add_argument("--jobs-per-vc", type=int, default=None, help=f"first N jobs per VC (full: {FULL_JOBS}; 0 = all)")
    ap.add_argument("--skip-jobs", type=_non_negative(int), default=0,
                    help="start each VC after its first N jobs (a held-out slice: --skip-jobs 2000)")
    ap.add_argument("--eval-from", type=_non_negative(int), default=0,
                    help="replay the first N jobs too but score only the jobs after them (held-out check)")
    ap.add_argument("--vcs", default=None, help="comma-separated VC ids (default: every trace file)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--estimators", default="true,history")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--traces", default=str(TRACES))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--history-statistic", default=HISTORY["statistic"],
                    help="HistoryModel statistic of the matching history: mean, median, gmean or pNN")
    ap.add_argument("--history-window", type=int, default=HISTORY["window"],
                    help="finished jobs kept per key (0 = all)")
    ap.add_argument("--history-km-tail", default="restricted", choices=("restricted", "exp"),
                    help="km-mean: what lies past the largest observation")
    ap.add_argument("--history-km-tail-quantile", type=float, default=0.5,
                    help="km-mean with the exp tail: fit it above this quantile of the survival curve")
    ap.add_argument("--history-plan-statistic", default=None,
                    help="statistic the planner books for queued jobs / running residuals (default: the same)")
    ap.add_argument("--tiers", type=_tiers_arg, default=TIERS,
                    help="tiered policy: attained-service thresholds in device-seconds, comma-separated")
    ap.add_argument("--preempt-overhead", type=_non_negative(float), default=PREEMPT_OVERHEAD_S,
                    help="tiered policy: run seconds a preempted job loses each time")
    ap.add_argument("--promote-ratio", type=_positive_or_off, default=PROMOTE_RATIO,
                    help="default-guard: promote a waiting job after this many times its last run ('off': never)")
    ap.add_argument("--promote-after", type=_positive_or_off, default=PROMOTE_AFTER_S,
                    help="default-guard: promote a waiting job after this many seconds of waiting ('off': never)")
    ap.add_argument("--estimate-depth", type=_non_negative(int), default=None,
                    help="plan this many jobs ahead exactly for the start estimate at submission, the rest as "
                         "fluid work (0 = every job ahead exactly; default: the engine's, every job ahead "
                         "exactly where the kept plan serves the policy (conservative backfill, no grace, no "
                         "quotas: default, shortest-banded), else the policy's plan_depth, 64)")
    ap.add_argument("--scorer", default=DEFAULT_SCORER,
                    help=f"where queued jobs go (default {DEFAULT_SCORER}, the engine's historical rule)")
    args = ap.parse_args(argv)
    if args.scorer not in available_scorers():
        ap.error(f"--scorer {args.scorer!r}: known scorers are {', '.join(available_scorers())}")
    estimate_depth = None if args.estimate_depth is None else (args.estimate_depth or sys.maxsize)
    tiers: tuple[float, ...] = args.tiers
    if "default-guard" in args.policies.split(",") and args.promote_ratio is None and args.promote_after is None:
        ap.error("default-guard needs --promote-ratio or --promote-after (both are off)")
    from tqdm import tqdm

    traces = Path(args.traces)
    if args.vcs:
        vcs = args.vcs.split(",")
    elif args.quick:
        vcs = list(QUICK["vcs"])  # type: ignore[arg-type]
    else:
        vcs = sorted(p.stem.removeprefix("trace_") for p in traces.glob("trace_*.csv"))
    limit = args.jobs_per_vc if args.jobs_per_vc is not None else (QUICK["jobs"] if args.quick else FULL_JOBS)
    limit = None if limit == 0 else int(limit)  # type: ignore[call-overload]
    hist: tuple[tuple[str, object], ...] = (("statistic", args.history_statistic),
                                            ("window", args.history_window or None))
    if args.history_plan_statistic:
        hist += (("plan_statistic", args.history_plan_statistic),)
    if KM in (args.history_statistic, args.history_plan_statistic):
        hist += (("km_tail", args.history_km_tail), ("km_tail_quantile", args.history_km_tail_quantile))
    tasks = [Task(vc, pol, est, args.devices_per_vc, limit, str(traces), hist, tiers, args.preempt_overhead,
                  args.skip_jobs, args.eval_from, (args.promote_ratio, args.promote_after), estimate_depth,
                  args.scorer)
             for est in args.estimators.split(",") for pol in args.policies.split(",") for vc in vcs]
    # biggest VCs first so the pool stays busy to the end
    sizes = {vc: len(load_philly(traces / f"trace_{vc}.csv", limit=limit, skip=args.skip_jobs + args.eval_from))
             for vc in vcs}
    tasks = [t for t in tasks if sizes[t.vc] > 0]  # a held-out slice past a small VC's end is empty
    vcs = [vc for vc in vcs if sizes[vc] > 0]
    tasks.sort(key=lambda t: -sizes[t.vc])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[tuple[Task, list[JobOutcome], dict[str, float], float]] = []
    total = sum(sizes[t.vc] for t in tasks)
    with tqdm(total=total, unit="job", desc="philly replay", file=sys.stderr) as bar:
        if args.workers > 1:
            with ProcessPoolExecutor(args.workers) as pool:
                for r in pool.map(run_one, tasks):
                    results.append(r)
                    bar.update(len(r[1]))
        else:
            for t in tasks:
                results.append(run_one(t))
                bar.update(len(results[-1][1]))

    per_vc_rows = []
    combined: dict[tuple[str, str], tuple[list[JobOutcome], float, float, float]] = {}
    splits: dict[tuple[str, str], tuple[float, float]] = {}
    for task, outs, m, wall in results:
        per_vc_rows.append({"estimator": task.estimator, "policy": task.policy, "scorer": task.scorer, "vc": task.vc,
                            "devices": task.devices, **{k: round(v, 6) for k, v in m.items()},
                            "wall_s": round(wall, 2)})
        key = (task.estimator, task.policy)
        o, busy, capt, w = combined.get(key, ([], 0.0, 0.0, 0.0))
        combined[key] = (o + outs, busy + m["busy_device_s"], capt + m["capacity"] * m["makespan_s"], w + wall)
        sm, sp = splits.get(key, (0.0, 0.0))
        splits[key] = (sm + m["small_placements"], sp + m["split_placements"])
    per_vc_rows.sort(key=lambda r: (r["estimator"], r["policy"], r["vc"]))
    _write(out / "per_vc.csv", per_vc_rows)
    summary = []
    for (est, pol), (outs, busy, capt, wall) in sorted(combined.items()):
        s = summarize(outs, busy, capt)
        summary.append({"estimator": est, "policy": pol, "scorer": args.scorer, "devices_per_vc": args.devices_per_vc,
                        "jobs_per_vc": limit or "all", "vcs": len(vcs), **{k: round(v, 6) for k, v in s.items()},
                        "split_share": round(splits[(est, pol)][1] / max(1.0, splits[(est, pol)][0]), 6),
                        "wall_s": round(wall, 1)})
        _write(out / f"jobs_{est}_{pol}.csv", [
            {"id": o.id, "vc": o.tenant, "devices": o.devices, "duration_s": o.duration_s, "submit_s": o.submit_s,
             "start_s": o.start_s, "end_s": o.end_s, "estimated_start_s": o.estimate_s} for o in outs])
    # the same population for both declarations: jobs that waited >= 1 min in both runs of a policy
    by_key = {(str(r["estimator"]), str(r["policy"])): r for r in summary}
    for pol in {str(r["policy"]) for r in summary}:
        runs = {est: combined[(est, pol)][0] for est in ("true", "history") if (est, pol) in combined}
        if len(runs) < 2:
            continue
        waited = [{o.id for o in outs if o.start_s is not None and o.start_s - o.submit_s >= 60.0}
                  for outs in runs.values()]
        common = waited[0] & waited[1]
        for est, outs in runs.items():
            rel = [abs(o.estimate_s - o.start_s) / (o.start_s - o.submit_s) for o in outs  # type: ignore[operator]
                   if o.id in common and o.estimate_s is not None]
            row = by_key[(est, pol)]
            row["est_median_rel_err_common"] = round(statistics.median(rel), 6) if rel else ""
            row["waited_1min_common"] = len(common)
    for row in summary:
        row.setdefault("est_median_rel_err_common", "")
        row.setdefault("waited_1min_common", "")
        fifo = next((r for r in summary if r["estimator"] == row["estimator"] and r["policy"] == "fifo"), None)
        row["jct_gain_vs_fifo"] = round(float(fifo["avg_jct_s"]) / float(row["avg_jct_s"]), 3) if fifo else ""
    _write(out / "summary.csv", summary)
    for row in summary:
        print(f"{row['estimator']:8s} {row['policy']:14s} avg JCT {float(row['avg_jct_s']) / 3600:9.1f} h  "
              f"p99 JCT {float(row['p99_jct_s']) / 3600:9.1f} h  avg wait {float(row['avg_wait_s']) / 3600:8.1f} h  "
              f"queued p50/p99/max {float(row['p50_queued_s']) / 3600:.2f}/{float(row['p99_queued_s']) / 3600:.1f}/"
              f"{float(row['max_queued_s']) / 3600:.1f} h  "
              f"util {float(row['utilisation']):.3f}  split {float(row['split_share']):.3f}  "
              f"x{row['jct_gain_vs_fifo']} vs FIFO  "
              f"est err median {float(row['est_median_rel_err']):.3f} (n={row['waited_1min']})")
    if not args.no_plot:
        _plot(summary, out)
    return 0


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    if not rows:
        return
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _plot(summary: list[dict[str, object]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ests = sorted({str(r["estimator"]) for r in summary})
    pols = [p for p in POLICIES if any(r["policy"] == p for r in summary)]
    for metric, fname, label in (("avg_jct_s", "jct.png", "average JCT (hours)"),
                                 ("est_median_rel_err", "estimate_error.png",
                                  "median |estimated - actual start| / wait (jobs waiting >= 1 min)")):
        fig, ax = plt.subplots(figsize=(8, 4.5))
        width = 0.8 / max(len(ests), 1)
        for i, est in enumerate(ests):
            vals = []
            for p in pols:
                r = next((x for x in summary if x["estimator"] == est and x["policy"] == p), None)
                v = float(r[metric]) if r else math.nan  # type: ignore[arg-type]
                vals.append(v / 3600 if metric == "avg_jct_s" else v)
            ax.bar([k + i * width for k in range(len(pols))], vals, width, label=f"declared: {est}")
        ax.set_xticks([k + width * (len(ests) - 1) / 2 for k in range(len(pols))], pols)
        ax.set_ylabel(label)
        if metric == "est_median_rel_err":
            ax.axhline(0.10, color="k", ls="--", lw=0.8)
            ax.axhline(0.35, color="k", ls=":", lw=0.8)
        ax.set_title(f"Philly VCs combined, {summary[0]['devices_per_vc']} devices per VC")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
