"""Replay the openb traces with the FGD paper's protocol and compare with the published numbers.

    python benchmarks/openb/run_openb.py --quick            # CI smoke: default trace, seed 42
    python benchmarks/openb/run_openb.py                    # full: 5 traces x 10 seeds x 10 policies

Writes ``curves.csv`` (allocation % per arrived % per run), ``summary.csv`` (mean at 100% and
130% arrived next to the published mean) and ``alloc_<trace>.png`` (one curve per policy, the
published FGD curve dashed) into ``--out``.  Every number printed is measured in this run.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from accel.scheduler import BUILTIN_SCORERS, Scorer, load_openb_nodes, load_openb_pods, openb_order, replay

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("ACCEL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
OPENB = SHARED / "traces" / "openb"
TRACES = ("default", "gpushare40", "multigpu20", "gpuspec33", "cpu050")
POLICIES = ("random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd", "fgd-balance", "fgd-plus",
            "fgd-plus-admit", "fgd-plus-demand")
PUBLISHED_NAME = {"random": "Random", "dot-product": "DotProd", "gpu-clustering": "GpuClustering",
                  "gpu-packing": "GpuPacking", "best-fit": "BestFit", "fgd": "FGD"}
T = TypeVar("T")


def progress(it: Iterable[T], total: int, desc: str) -> Iterator[T]:
    """tqdm when installed, else a one-line counter on stderr."""
    try:
        from tqdm import tqdm
    except ImportError:
        start = time.perf_counter()
        for i, x in enumerate(it, 1):
            yield x
            sys.stderr.write(f"\r{desc}: {i}/{total} ({time.perf_counter() - start:.0f}s)")
        sys.stderr.write("\n")
    else:
        yield from tqdm(it, total=total, desc=desc)


def published() -> dict[tuple[str, str, int], float]:
    out: dict[tuple[str, str, int], float] = {}
    with open(OPENB / "fgd_expected_results_summary.csv") as fh:
        for row in csv.DictReader(fh):
            trace = row["workload"].replace("openb_pod_list_", "")
            out[(trace, row["policy"], int(row["arrived_gpu_demand_pct"]))] = float(row["gpu_alloc_pct_mean"])
    return out


def make_policy(spec: str) -> str | Scorer:
    """``name`` or ``name:key=value,key=value`` (a built-in scorer with constructor arguments,
    for tuning runs: ``fgd-plus-demand:horizon=1.1``); values are numbers."""
    if ":" not in spec:
        return spec
    name, _, args = spec.partition(":")
    if name not in BUILTIN_SCORERS:
        raise SystemExit(f"--policies {spec!r}: {name!r} is not a built-in scorer")
    module, _, attr = BUILTIN_SCORERS[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    kwargs: dict[str, float | int] = {}
    for item in filter(None, args.split(",")):
        key, eq, val = item.partition("=")
        if not eq:
            raise SystemExit(f"--policies {spec!r}: {item!r} is not key=value")
        try:
            kwargs[key] = int(val) if val.lstrip("-").isdigit() else float(val)
        except ValueError:
            raise SystemExit(f"--policies {spec!r}: {val!r} is not a number") from None
    try:
        scorer: Scorer = cls(**kwargs)
    except TypeError as exc:
        raise SystemExit(f"--policies {spec!r}: {exc}") from None
    return scorer


def run_one(trace: str, policy: str, seed: int) -> dict[str, Any]:
    hosts = load_openb_nodes(OPENB / "openb_node_list_gpu_node.csv")
    pods = load_openb_pods(OPENB / f"openb_pod_list_{trace}.csv")
    capacity = sum(len(h.devices) for h in hosts) * 1000
    order = openb_order(pods, capacity, seed)
    t0 = time.perf_counter()
    res = replay(hosts, order, make_policy(policy), workload=[p.request for p in pods], seed=seed)
    wall = time.perf_counter() - t0
    return {"trace": trace, "policy": policy, "seed": seed, "curve": res.curve(), "wall": wall,
            "attempts": len(order), "placed": int(res.placed.sum())}


def add_bound_columns(rows: list[dict[str, Any]], dist: list[dict[str, Any]]) -> None:
    """Add ``bound_<k>`` and ``gap_closed_<k>`` (the share of the way from published FGD to the
    offline bound, over the seeds that have a bound; None where none has) to each summary row."""
    by = {(d["trace"], d["policy"], d["arrived_pct"]): d for d in dist}
    for r in rows:
        for k in (100, 130):
            d = by.get((r["trace"], r["policy"], k))
            r[f"bound_{k}"] = d["bound"] if d else None
            r[f"gap_closed_{k}"] = d["way_from_fgd"] if d else None


def plot(results: list[dict[str, Any]], pub: dict[tuple[str, str, int], float], out: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG written")
        return []
    written: list[Path] = []
    by_trace: dict[str, dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by_trace[r["trace"]][r["policy"]].append(r["curve"])
    for trace, pols in by_trace.items():
        fig, ax = plt.subplots(figsize=(8, 5))
        x = np.arange(131)
        for pol, curves in pols.items():
            ax.plot(x, np.nanmean(np.stack(curves), axis=0), label=f"{pol} (ours, {len(curves)} seeds)")
        ref = [(k, v) for (t, p, k), v in pub.items() if t == trace and p == "FGD"]
        if ref:
            ref.sort()
            ax.plot([k for k, _ in ref], [v for _, v in ref], "k--", marker="o", label="FGD (published)")
        ax.set_xlim(50, 130)
        ax.set_ylim(50, 100)
        ax.set_xlabel("arrived GPU demand (% of capacity)")
        ax.set_ylabel("GPU allocation ratio (%)")
        ax.set_title(f"openb {trace}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        path = out / f"alloc_{trace}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="default trace, seed 42 only (CI smoke)")
    ap.add_argument("--traces", nargs="*", default=None)
    ap.add_argument("--policies", nargs="*", default=None,
                    help="scorer names, or name:key=value,... for a built-in scorer with arguments")
    ap.add_argument("--seeds", nargs="*", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--bound", type=Path, nargs="*", default=None,
                    help="bound_openb.py outputs to read (default: results/bound.csv and --out/bound.csv)")
    args = ap.parse_args()
    traces = args.traces or (["default"] if args.quick else list(TRACES))
    policies = args.policies or list(POLICIES)
    for spec in policies:
        make_policy(spec)  # a bad name or argument fails here, before any run
    seeds = args.seeds or ([42] if args.quick else list(range(42, 52)))
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [(t, p, s) for t in traces for p in policies for s in seeds]
    results: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    if args.jobs <= 1:
        results = [run_one(*t) for t in progress(tasks, len(tasks), "openb runs")]
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            futs = [pool.submit(run_one, *t) for t in tasks]
            results = [f.result() for f in progress(as_completed(futs), len(futs), "openb runs")]
    total_wall = time.perf_counter() - t0
    pub = published()
    with open(args.out / "curves.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["trace", "policy", "seed", "arrived_pct", "alloc_pct"])
        for r in sorted(results, key=lambda r: (r["trace"], r["policy"], r["seed"])):
            for k, v in enumerate(r["curve"]):
                if np.isfinite(v):
                    w.writerow([r["trace"], r["policy"], r["seed"], k, f"{v:.3f}"])
    rows = []
    for trace in traces:
        for pol in policies:
            rs = [r for r in results if r["trace"] == trace and r["policy"] == pol]
            c = np.stack([r["curve"] for r in rs])
            ours100, ours130 = float(np.nanmean(c[:, 100])), float(np.nanmean(c[:, 130]))
            name = PUBLISHED_NAME.get(pol)
            p100 = pub.get((trace, name, 100)) if name else None
            p130 = pub.get((trace, name, 130)) if name else None
            f100, f130 = pub.get((trace, "FGD", 100)), pub.get((trace, "FGD", 130))
            rows.append({"trace": trace, "policy": pol, "seeds": len(rs), "ours_100": ours100,
                         "published_100": p100, "ours_130": ours130, "published_130": p130,
                         "vs_published_fgd_100": ours100 - f100 if f100 else None,
                         "vs_published_fgd_130": ours130 - f130 if f130 else None,
                         "mean_wall_s": float(np.mean([r["wall"] for r in rs]))})
    # distance to the offline bound (bound_openb.py's bound.csv, same seeds), per trace and policy
    from bound_distance import distance_rows, load_bound, show, write
    curves = {(r["trace"], r["policy"], r["seed"], k): float(r["curve"][k]) for r in results for k in (100, 130)
              if np.isfinite(r["curve"][k])}
    dist = distance_rows(curves, load_bound(*(args.bound or [HERE / "results" / "bound.csv", args.out / "bound.csv"])))
    add_bound_columns(rows, dist)
    with open(args.out / "summary.csv", "w", newline="") as fh:
        dw = csv.DictWriter(fh, fieldnames=list(rows[0]))
        dw.writeheader()
        dw.writerows(rows)

    def fmt(v: float | None) -> str:
        return "   -  " if v is None else f"{v:6.2f}"

    print(f"\n{'trace':11} {'policy':15} {'n':>2} {'ours@100':>8} {'pub@100':>8} {'ours@130':>8} {'pub@130':>8}"
          f" {'-FGDpub@100':>11} {'-FGDpub@130':>11} {'wall/run':>8}")
    for r in rows:
        print(f"{r['trace']:11} {r['policy']:15} {r['seeds']:2d} {fmt(r['ours_100']):>8} "
              f"{fmt(r['published_100']):>8} {fmt(r['ours_130']):>8} {fmt(r['published_130']):>8} "
              f"{fmt(r['vs_published_fgd_100']):>11} {fmt(r['vs_published_fgd_130']):>11} {r['mean_wall_s']:7.1f}s")
    print(f"\n{'trace':11} {'policy':15} {'bound@100':>9} {'closed@100':>10} {'bound@130':>9} {'closed@130':>10}"
          "   (closed: share of the way from published FGD to the bound, same seeds)")
    for r in rows:
        print(f"{r['trace']:11} {r['policy']:15} {fmt(r['bound_100']):>9} {fmt(r['gap_closed_100']):>10} "
              f"{fmt(r['bound_130']):>9} {fmt(r['gap_closed_130']):>10}")
    if dist:
        write(dist, args.out / "bound_distance.csv")
        print()
        show(dist)
    pngs = plot(results, pub, args.out)
    print(f"\n{len(results)} runs in {total_wall:.0f}s with {args.jobs} jobs; wrote {args.out / 'summary.csv'}, "
          f"{args.out / 'curves.csv'}, {args.out / 'bound_distance.csv'}" + "".join(f", {p}" for p in pngs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
