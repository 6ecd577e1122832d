"""Start estimates far down deep queues, planned exactly (issue 35; ``protocol-deepplan.md``).

Replays whole Philly VCs as ``cv.py`` does (its cluster sizing, the tier its fold chose,
``results/cv_per_vc.csv``; true durations declared) with the start estimate at submission
planning ``--depth`` jobs ahead exactly (0 = every job ahead, the default now; 64 = the old
default, past which the jobs ahead were fluid work), and writes per VC: the median / mean
relative error of the estimate (waiters >= 1 min, as ``cv.metrics``), the share within 10%,
average JCT (an estimate never commits: it must equal the other depth's), and the time the
estimates took apart from the rest of the replay (``QueueingScheduler.estimate``, CPU seconds).

A JSON progress line goes to stderr every ``--progress-s`` CPU-seconds (and the row written
then is marked ``partial``), so a replay stopped early still says how far it got.

    python benchmarks/philly/deep_plan.py --vcs 0e4a51,2869ce --depths 0,64
    python benchmarks/philly/deep_plan.py --vcs 6214e9 --depths 0        # whole trace: long
    python benchmarks/philly/deep_plan.py --vcs 6214e9 --depths default  # the engine's default depth

``--depths default`` gives no depth (the engine's default: every job ahead where
``_walk.exact_case`` holds, ``plan_depth`` elsewhere); the column ``outside_exact_case`` counts
the estimates the kept plan could not answer because a job ahead was outside its case.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from accel.scheduler.queueing import JobOutcome, QueueingScheduler, Simulator, _walk, load_philly, uniform_cluster

try:  # run as a script: the sibling modules are on sys.path
    import cv  # type: ignore[import-not-found,unused-ignore]
    import run_philly  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # imported as benchmarks.philly.deep_plan
    from benchmarks.philly import cv, run_philly  # type: ignore[no-redef,unused-ignore]

HERE = Path(__file__).resolve().parent
EVAL_ONLY = ("6214e9", "6c71a0")
FIELDS = ["vc", "role", "status", "planner", "n", "submitted", "devices", "tier_s", "depth", "waiters",
          "est_err_median", "est_err_mean", "within_10pct", "avg_jct_h", "estimates", "estimate_cpu_s", "replay_cpu_s",
          "max_waiting", "outside_exact_case"]
DEFAULT_DEPTH = "default"  # --depths entry: no depth given, the engine's default (exact where _walk.exact_case)


def fold_tiers(path: Path) -> dict[str, float]:
    """The tier each VC's fold chose (``cv.py``'s out-of-fold table)."""
    with path.open(newline="") as fh:
        return {row["vc"]: float(row["tier_s"]) for row in csv.DictReader(fh)}


def errors(outs: Sequence[JobOutcome]) -> list[float]:
    """|estimate - first start| / wait over the jobs that started after waiting >= 1 min."""
    return [abs(o.estimate_s - o.start_s) / (o.start_s - o.submit_s) for o in outs
            if o.start_s is not None and o.estimate_s is not None and o.start_s - o.submit_s >= 60.0]


def replay(vc: str, traces: Path, tier: float, depth: int | None, limit: int | None, progress_s: float,
           on_row: Any) -> dict[str, Any]:
    """One VC at ``depth`` jobs ahead planned exactly (0: every job ahead; ``None``: the engine's
    default, every job ahead where ``_walk.exact_case`` holds, ``plan_depth`` elsewhere)."""
    alljobs = load_philly(traces / f"trace_{vc}.csv")
    devices = cv.size_cluster(alljobs)  # sized on the whole trace, as cv.py
    jobs = alljobs[:limit] if limit else alljobs
    policy = replace(run_philly.tiered_policy((tier,), run_philly.PREEMPT_OVERHEAD_S))
    eng = QueueingScheduler(uniform_cluster(devices // 8, 8), policy)
    spent = [0.0, 0, 0]  # estimate CPU seconds, calls, deepest queue seen
    state = eng._st  # read-only: the waiting set's size
    plain = eng.estimate

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.process_time()
        try:
            return plain(*a, **k)
        finally:
            spent[0] += time.process_time() - t0
            spent[1] += 1
            spent[2] = max(spent[2], len(state.waiting))  # the queue it planned through

    eng.estimate = timed  # type: ignore[method-assign]
    # the estimates the kept plan could not answer because a job ahead was outside its case
    # (another tier or pool): with the default depth those were planned to plan_depth, fluid past it
    outside = [0]
    fast = _walk._fast_plan

    def counted(st: Any, now: float, mode: Any, view: Any) -> Any:
        r = fast(st, now, mode, view)
        outside[0] += r is None
        return r

    _walk._fast_plan = counted  # type: ignore[assignment]
    sim = Simulator(eng, jobs, None, estimate_depth=None if depth is None else depth or sys.maxsize)
    c0 = last = time.process_time()

    def row(status: str) -> dict[str, Any]:
        res = sim.result()
        outs = res.outcomes
        errs = errors(outs)
        done = [o for o in outs if o.end_s is not None]
        jct = [o.end_s - o.submit_s for o in done if o.end_s is not None]
        return {"vc": vc, "role": "evaluation-only" if vc in EVAL_ONLY else "training", "status": status,
                "planner": "kept" if _walk.KEEP_PLANS else "full-walk",
                "n": len(jobs), "submitted": len(outs), "devices": devices, "tier_s": tier,
                "depth": DEFAULT_DEPTH if depth is None else depth or "all", "waiters": len(errs),
                "est_err_median": round(statistics.median(errs), 4) if errs else "",
                "est_err_mean": round(statistics.fmean(errs), 4) if errs else "",
                "within_10pct": round(sum(e <= 0.1 for e in errs) / len(errs), 4) if errs else "",
                "avg_jct_h": round(statistics.fmean(jct) / 3600, 3) if jct and status == "complete" else "",
                "estimates": spent[1], "estimate_cpu_s": round(spent[0], 1),
                "replay_cpu_s": round(time.process_time() - c0, 1), "max_waiting": spent[2],
                "outside_exact_case": outside[0] if _walk.KEEP_PLANS else ""}

    try:
        while sim.step():
            if time.process_time() - last >= progress_s:
                last = time.process_time()
                r = row("partial")
                print(json.dumps(r), file=sys.stderr, flush=True)
                on_row(r)
        r = row("complete")
    finally:
        _walk._fast_plan = fast
    on_row(r)
    return r


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vcs", required=True, help="comma-separated VC ids")
    ap.add_argument("--depths", default="0",
                    help="comma-separated exact depths (0 = every job ahead; 'default' = the engine's default)")
    ap.add_argument("--traces", type=Path, default=Path(run_philly.TRACES) if Path(run_philly.TRACES).is_dir()
                    else Path("/work/shared/traces/philly"))
    ap.add_argument("--tiers-from", type=Path, default=HERE / "results" / "cv_per_vc.csv")
    ap.add_argument("--limit", type=int, default=None, help="first N jobs only (default: whole trace)")
    ap.add_argument("--progress-s", type=float, default=60.0)
    ap.add_argument("--full-walk", action="store_true",
                    help="plan every estimate by walking the whole queue afresh (no kept plan): the cost baseline")
    ap.add_argument("--check", action="store_true",
                    help="also walk in full at every kept-plan answer and fail on any difference (slow)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "deep_plan_per_vc.csv")
    args = ap.parse_args(argv)
    tiers = fold_tiers(args.tiers_from)
    _walk.KEEP_PLANS = not args.full_walk
    _walk.PLAN_CHECK = args.check
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    if args.out.exists():
        with args.out.open(newline="") as fh:
            rows = {(r["vc"], r["depth"], r.get("planner") or "full-walk"): r for r in csv.DictReader(fh)}

    def write(r: dict[str, Any]) -> None:
        rows[(r["vc"], str(r["depth"]), r["planner"])] = r
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        with tmp.open("w", newline="") as fh:
            wr = csv.DictWriter(fh, FIELDS)
            wr.writeheader()
            for key in sorted(rows):
                wr.writerow({k: rows[key].get(k, "") for k in FIELDS})
        tmp.replace(args.out)

    for vc in [v for v in args.vcs.split(",") if v]:
        for d in [d.strip() for d in args.depths.split(",") if d.strip()]:
            depth = None if d == DEFAULT_DEPTH else int(d)
            r = replay(vc, args.traces, tiers[vc], depth, args.limit, args.progress_s, write)
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
