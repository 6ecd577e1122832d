"""Partitions carved on demand vs the best static MIG layout, on an openb-derived workload.

Question: does placing slices with the carving planner (:class:`accel.scheduler.CarvingPlanner`:
reuse an idle partition or create one where the most layouts stay open, destroying idle ones
when their room is needed) allocate more of a MIG cluster than carving every GPU in advance
with one fixed layout, the best one for the trace, chosen in hindsight?

Workload (rules fixed before any result was looked at):

* Trace: an openb pod list (default ``openb_pod_list_gpushare40.csv``, the openb variant in which
  GPU-sharing pods are most common: slices are what carving is for).  Pods asking for exactly one
  GPU (``num_gpu == 1``) with a deletion time; CPU-only and multi-GPU pods are left out (they are
  not slices).  The first 1% by creation time are skipped (as in ``benchmarks/openb/queue_openb.py``:
  they are spread over ~10^7 s before the rest arrive).
* **Fraction -> profile**: a pod asking for ``f = gpu_milli / 1000`` of a GPU asks for ``f`` of its
  memory; it gets the smallest profile of the device's catalog whose memory share covers it,
  memory share counted in memory slices (the unit MIG hands memory out in): the smallest profile
  with ``size / slots >= f`` (``slots`` = 8 on A100 / H100), ties to the fewer compute slices.  On
  H100-80GB: f <= 1/8 -> 1g.10gb, <= 2/8 -> 1g.20gb, <= 4/8 -> 3g.40gb, else 7g.80gb (whole pods
  too).  The catalog comes from the simulator's ``partition_profiles()`` (``dgx-h100``), not
  retyped here.
* Per seed: a block of ``--jobs`` consecutive pods (by creation time) from a seeded random
  offset; arrivals keep the trace's gaps, compressed by one factor so that the offered load (sum of
  the profiles' compute shares x duration inside the arrival window, a pod longer than the window
  counting the window) is ``--load`` x the cluster's capacity; durations are the trace's.
* Cluster: ``--hosts`` hosts x 8 H100-80GB with MIG on; host CPU and memory are not modelled
  (only the GPU carving differs between the policies).

Policies (the same event loop, the same :class:`accel.scheduler.Scheduler` with a carving
planner; requests are ``Request(partition=profile)``; at every arrival or finish the waiting pods
are tried in arrival order and each one that fits starts, so small pods may pass large ones):

* ``carving``: the planner with create and destroy (no partition exists at the start);
* ``first-fit``: carving with the planner's naive first-fit rule (a second baseline);
* ``static:<layout>``: every GPU carved in advance with one layout, for each *maximal* layout of
  the catalog (``SliceCatalog.full_layouts()``: all of them); the planner may only reuse (a pod
  takes a free partition whose profile covers it; the planner picks which).  **Best static** is
  chosen per seed, in hindsight (the stricter comparison): the layout with the highest allocation
  ratio on that seed; the best layout over all seeds (highest mean) is reported too.

Metrics over the arrival window: **allocation ratio** = (sum over running pods of their profile's
compute share x time) / (GPUs x window); **wait share** = pods not started at their arrival / pods.
Ratios dynamic / best static are printed per seed (win / loss / tie on the allocation ratio) and
over all seeds.

    python benchmarks/partitions/carving.py                   # 10 seeds, 8 hosts x 8 GPUs
    python benchmarks/partitions/carving.py --quick           # CI's bench-smoke profile
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accel.plugin import BackendConfig
from accel.scheduler import (
    MILLI,
    CarvingPlanner,
    ClusterState,
    DeviceSpec,
    HostSpec,
    Request,
    Scheduler,
    SliceCatalog,
)
from accel.sim import SimPlugin

SHARED = Path(os.environ.get("ACCEL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
OPENB = SHARED / "traces" / "openb"
HERE = Path(__file__).resolve().parent
GPUS_PER_HOST = 8


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    arrival: float
    duration: float
    profile: str
    compute: float


def catalog_from_sim(profile: str = "dgx-h100") -> tuple[SliceCatalog, DeviceSpec]:
    """The MIG catalog and device facts of the simulator's first GPU (as a backend reports them)."""
    backend = SimPlugin().open(BackendConfig(options={"profile": profile}))
    dev = backend.inventory().devices[0]
    profiles = [p for p in backend.partition_profiles() if p.parent_id == dev.id]
    cat = SliceCatalog.from_profiles(profiles)
    spec = DeviceSpec(id="template", vendor=dev.vendor, kind=str(dev.kind), model=dev.model,
                      memory_bytes=dev.memory_total_bytes or 0,
                      partition_profiles={p.name: round(p.compute_ratio * MILLI) for p in cat.profiles})
    return cat, spec


def profile_for(fraction: float, cat: SliceCatalog) -> str:
    """The rule of the module docstring: smallest profile whose memory-slice share covers ``fraction``."""
    slots = cat.slots
    need = math.ceil(round(fraction * slots, 9))
    fits = [p for p in cat.profiles if p.size >= need]
    return min(fits, key=lambda p: (p.size, p.compute_ratio, p.name)).name


def read_trace(path: Path, cat: SliceCatalog) -> list[tuple[float, str, float, str]]:
    """(creation, name, duration, profile) of the single-GPU pods, by creation, first 1% skipped."""
    rows = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if int(row["num_gpu"]) != 1 or not row["deletion_time"]:
                continue
            milli = int(row["gpu_milli"] or 0) or MILLI
            c = float(row["creation_time"])
            rows.append((c, row["name"], max(1.0, float(row["deletion_time"]) - c),
                         profile_for(milli / MILLI, cat)))
    rows.sort()
    return rows[len(rows) // 100:]


def workload(rows: list[tuple[float, str, float, str]], cat: SliceCatalog, jobs: int, seed: int,
             load: float, gpus: int) -> tuple[list[Pod], float]:
    rng = np.random.default_rng(seed)
    start = int(rng.integers(0, max(1, len(rows) - jobs)))
    block = rows[start:start + jobs]
    share = {p.name: p.compute_ratio for p in cat.profiles}
    span = max(1.0, block[-1][0] - block[0][0])

    def offered(scale: float) -> float:
        window = span / scale
        return sum(share[prof] * min(dur, window) for _, _, dur, prof in block) / (window * gpus)

    lo, hi = 1e-3, 1e7
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if offered(mid) < load else (lo, mid)
    scale = math.sqrt(lo * hi)
    t0 = block[0][0]
    pods = [Pod(name, (c - t0) / scale, dur, prof, share[prof]) for c, name, dur, prof in block]
    return pods, span / scale


def cluster(template: DeviceSpec, hosts: int) -> ClusterState:
    specs = [HostSpec(f"h{h}", 1 << 40, 1 << 50, tuple(
        DeviceSpec(id=f"h{h}/gpu{j}", vendor=template.vendor, kind=template.kind, model=template.model,
                   memory_bytes=template.memory_bytes, partition_profiles=template.partition_profiles)
        for j in range(GPUS_PER_HOST)), max_pods=10_000) for h in range(hosts)]
    return ClusterState.from_specs(specs)


def simulate(pods: list[Pod], window: float, template: DeviceSpec, cat: SliceCatalog, hosts: int,
             policy: str, layout: tuple[tuple[int, int], ...] | None, seed: int) -> dict[str, float]:
    """One run: the event loop of the module docstring; metrics over [0, window]."""
    state = cluster(template, hosts)
    devices = [d for ids in state.dev_ids for d in ids]
    static = layout is not None
    planner = CarvingPlanner(dict.fromkeys(devices, cat), create=not static, destroy=not static,
                             policy="first-fit" if policy == "first-fit" else "layouts")
    if layout is not None:
        for d in devices:
            for k, s in layout:
                planner.add(d, cat.profiles[k].name, s)
    sched = Scheduler(state, "best-fit", seed=seed, carving=planner)
    reqs = [Request(p.name, partition=p.profile) for p in pods]
    events: list[tuple[float, int, int]] = [(p.arrival, 1, i) for i, p in enumerate(pods)]
    heapq.heapify(events)
    waiting: list[int] = []
    live = {}
    waited = 0
    area = 0.0
    busy = 0.0  # sum of compute shares running now
    last = 0.0
    while events and events[0][0] <= window:
        now = events[0][0]
        area += busy * (now - last)
        last = now
        arrived = []
        while events and events[0][0] == now:
            _, kind, i = heapq.heappop(events)
            if kind == 0:
                sched.release(live.pop(i))
                busy -= pods[i].compute
            else:
                waiting.append(i)
                arrived.append(i)
        failed: set[str] = set()
        still: list[int] = []
        for i in waiting:
            prof = pods[i].profile
            alloc = None if prof in failed else sched.place(reqs[i])
            if alloc is None:
                failed.add(prof)
                still.append(i)
                continue
            live[i] = alloc
            busy += pods[i].compute
            heapq.heappush(events, (now + pods[i].duration, 0, i))
        waiting = still
        stuck = set(still)
        waited += sum(1 for i in arrived if i in stuck)
    area += busy * (window - last)
    return {"allocation_ratio": area / (window * len(devices)), "wait_share": waited / len(pods),
            "created": float(planner.created), "destroyed": float(planner.destroyed)}


def layout_name(cat: SliceCatalog, layout: tuple[tuple[int, int], ...]) -> str:
    return "+".join(f"{cat.profiles[k].name}@{s}" for k, s in layout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=str(OPENB / "openb_pod_list_gpushare40.csv"))
    ap.add_argument("--jobs", type=int, default=1000, help="pods per seed")
    ap.add_argument("--hosts", type=int, default=8, help="hosts of 8 H100-80GB")
    ap.add_argument("--load", type=float, default=1.0, help="offered load / capacity over the window")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="CI profile: 3 seeds, 300 pods, 2 hosts")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.jobs, args.hosts = 3, 300, 2
    trace = Path(args.trace)
    if not trace.exists():
        print(f"trace not found: {trace} (set ACCEL_SHARED)", file=sys.stderr)
        return 2
    cat, template = catalog_from_sim()
    layouts = cat.full_layouts()
    rows = read_trace(trace, cat)
    gpus = args.hosts * GPUS_PER_HOST
    mix: dict[str, int] = {}
    for *_, prof in rows:
        mix[prof] = mix.get(prof, 0) + 1
    print(f"trace {trace.name}: {len(rows)} single-GPU pods, profiles {mix}; {gpus} GPUs "
          f"({template.model}); {len(layouts)} static layouts; load {args.load}; {args.jobs} pods x "
          f"{args.seeds} seeds")
    t_start = time.perf_counter()
    per_seed: list[dict[str, object]] = []
    static_all: dict[str, list[float]] = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        pods, window = workload(rows, cat, args.jobs, seed, args.load, gpus)
        dyn = simulate(pods, window, template, cat, args.hosts, "carving", None, seed)
        ff = simulate(pods, window, template, cat, args.hosts, "first-fit", None, seed)
        best_name, best = "", {"allocation_ratio": -1.0, "wait_share": 1.0}
        for lay in layouts:
            got = simulate(pods, window, template, cat, args.hosts, "static", lay, seed)
            name = layout_name(cat, lay)
            static_all.setdefault(name, []).append(got["allocation_ratio"])
            if got["allocation_ratio"] > best["allocation_ratio"]:
                best_name, best = name, got
        a_ratio = dyn["allocation_ratio"] / best["allocation_ratio"]
        verdict = "win" if dyn["allocation_ratio"] > best["allocation_ratio"] + 1e-12 else (
            "tie" if abs(dyn["allocation_ratio"] - best["allocation_ratio"]) <= 1e-12 else "LOSS")
        rec: dict[str, object] = {
            "seed": seed, "pods": len(pods), "window_s": round(window, 1),
            "carving_alloc": round(dyn["allocation_ratio"], 4), "carving_wait": round(dyn["wait_share"], 4),
            "first_fit_alloc": round(ff["allocation_ratio"], 4), "first_fit_wait": round(ff["wait_share"], 4),
            "best_static_alloc": round(best["allocation_ratio"], 4), "best_static_wait": round(best["wait_share"], 4),
            "best_static_layout": best_name, "alloc_ratio_vs_static": round(a_ratio, 4),
            "wait_ratio_vs_static": round(dyn["wait_share"] / best["wait_share"], 4) if best["wait_share"] else None,
            "created": int(dyn["created"]), "destroyed": int(dyn["destroyed"]), "verdict": verdict,
        }
        per_seed.append(rec)
        print(f"seed {seed}: carving alloc {dyn['allocation_ratio']:.4f} wait {dyn['wait_share']:.3f} | "
              f"first-fit {ff['allocation_ratio']:.4f} wait {ff['wait_share']:.3f} | best static "
              f"{best['allocation_ratio']:.4f} wait {best['wait_share']:.3f} [{best_name}] | "
              f"alloc ratio {a_ratio:.3f} -> {verdict}", flush=True)
    overall_name = max(static_all, key=lambda n: statistics.fmean(static_all[n]))
    mean = {k: statistics.fmean(float(r[k]) for r in per_seed)  # type: ignore[arg-type]
            for k in ("carving_alloc", "carving_wait", "first_fit_alloc", "first_fit_wait",
                      "best_static_alloc", "best_static_wait")}
    wins = sum(r["verdict"] == "win" for r in per_seed)
    losses = sum(r["verdict"] == "LOSS" for r in per_seed)
    summary = {
        "trace": trace.name, "gpus": gpus, "model": template.model, "jobs": args.jobs, "load": args.load,
        "seeds": args.seeds, "static_layouts": len(layouts), "wins": wins, "losses": losses,
        "ties": args.seeds - wins - losses, **{f"mean_{k}": round(v, 4) for k, v in mean.items()},
        "alloc_ratio_vs_best_static_per_seed": round(mean["carving_alloc"] / mean["best_static_alloc"], 4),
        "wait_ratio_vs_best_static_per_seed": (round(mean["carving_wait"] / mean["best_static_wait"], 4)
                                               if mean["best_static_wait"] else None),
        "best_static_overall": overall_name,
        "best_static_overall_mean_alloc": round(statistics.fmean(static_all[overall_name]), 4),
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    print(f"\nper-seed best static (hindsight): carving wins {wins}, losses {losses}, ties "
          f"{summary['ties']} of {args.seeds}")
    print(f"mean allocation ratio: carving {mean['carving_alloc']:.4f}, first-fit {mean['first_fit_alloc']:.4f}, "
          f"best static per seed {mean['best_static_alloc']:.4f} -> ratio "
          f"{summary['alloc_ratio_vs_best_static_per_seed']}")
    print(f"mean wait share: carving {mean['carving_wait']:.4f}, first-fit {mean['first_fit_wait']:.4f}, "
          f"best static per seed {mean['best_static_wait']:.4f} -> ratio "
          f"{summary['wait_ratio_vs_best_static_per_seed']}")
    print(f"best static overall: {overall_name} (mean alloc {summary['best_static_overall_mean_alloc']})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = trace.stem.removeprefix("openb_pod_list_")
    tag = f"{stem}_quick" if args.quick else f"{stem}_load{args.load:g}"
    with open(out / f"carving_{tag}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(per_seed[0]))
        w.writeheader()
        w.writerows(per_seed)
    (out / f"carving_{tag}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if losses == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
