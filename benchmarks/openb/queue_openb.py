"""openb as a queue: pods submitted over their creation times, placed by the queueing engine.

Each GPU pod of an openb pod list becomes a :class:`~accel.scheduler.queueing.JobSpec` (a share
for ``num_gpu=1, gpu_milli<1000``, else ``num_gpu`` whole devices on one host; the pod's CPU and
memory; any device model), submitted at its ``creation_time`` and running for
``deletion_time - creation_time`` seconds (at least 1 s, declared exactly).  The engine (default
policy: FIFO with EASY backfill) decides when each pod starts; the scorer under test decides
where, through the placement pipeline (``QueueingScheduler(scorer=..., workload=pods)``).  The
baseline is ``fewest-free``, the engine's historical rule, run on the same input in the same run.

Subset rule (to keep it tractable on 2 cores and to make it a queue at all: the full trace
keeps ~30 of 6,212 GPUs busy at its median creation time): CPU-only pods are left out (a queued
job asks for at least one device); the first 1% of GPU pods by creation time are left out (they
are spread over ~10^7 s before the rest arrive within ~3x10^6 s); the next ``--jobs``; every
``--node-every``-th node of the GPU node list (file order, which groups nodes by model, so each
model keeps its share); creation times are divided by a factor chosen so that the offered
device load (sum of devices x duration within the arrival window, a pod longer than the window
counting the window) is ``--load`` x the subset's device capacity.  Pods still waiting at the
horizon (``--horizon-x`` x the arrival window after the first arrival) are "never placed".

Metrics per scorer: average and p99 wait of the pods that started, average JCT of those that
finished by the horizon, the time-mean allocation ratio (allocated GPU compute / capacity) over
the arrival window and over the horizon, pods never placed, and pods the pipeline refused at least once although the
free-device count said they fit (wait reason ``placement``).

    python benchmarks/openb/queue_openb.py                       # default: 1,500 pods, 1/8 of nodes
    python benchmarks/openb/queue_openb.py --scorers fewest-free,fgd --jobs 500
"""

from __future__ import annotations

import argparse
import csv
import heapq
import math
import os
import statistics
import sys
import time
from pathlib import Path

from accel.scheduler import (
    MILLI,
    ClusterState,
    Request,
    available_scorers,
    load_openb_nodes,
    load_openb_pods,
)
from accel.scheduler.queueing import JobSpec, QueueingScheduler
from accel.scheduler.queueing._placement import RefusalKind

SHARED = Path(os.environ.get("ACCEL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
OPENB = SHARED / "traces" / "openb"
HERE = Path(__file__).resolve().parent
BASELINE = "fewest-free"
SCORERS = (BASELINE, "best-fit", "fgd", "fgd-plus")


def load(trace: str, nodes_csv: str, jobs: int, node_every: int,
         load_target: float) -> tuple[list[tuple[float, JobSpec, float]], list[Request], ClusterState, float]:
    """The subset: (arrival, spec, duration) per pod, the FGD workload, the cluster, the window."""
    hosts = load_openb_nodes(nodes_csv)[::node_every]
    pods = {p.name: p.request for p in load_openb_pods(trace)}
    rows: list[tuple[float, str, float]] = []
    with open(trace, newline="") as fh:
        for row in csv.DictReader(fh):
            if int(row["num_gpu"]) == 0 or not row["deletion_time"]:
                continue
            c = float(row["creation_time"])
            rows.append((c, row["name"], max(1.0, float(row["deletion_time"]) - c)))
    rows.sort()
    # the first 1% of pods are spread over ~10^7 s before the rest arrive in ~3x10^6 s: skip them
    rows = rows[len(rows) // 100:][:jobs]
    capacity = sum(len(h.devices) for h in hosts)
    span = max(1.0, rows[-1][0] - rows[0][0])

    def offered(scale: float) -> float:
        # device-seconds offered inside the window (a pod longer than the window counts the
        # window only: the trace's months-long pods would otherwise be most of the "load")
        window = span / scale
        return sum(pods[name].total_milli / MILLI * min(dur, window) for _, name, dur in rows) / (window * capacity)

    # compress arrivals (bisection on log scale; offered() grows with the compression)
    lo, hi = 1e-3, 1e7
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if offered(mid) < load_target else (lo, mid)
    scale = math.sqrt(lo * hi)
    t0 = rows[0][0]
    out: list[tuple[float, JobSpec, float]] = []
    for c, name, dur in rows:
        req = pods[name]
        spec = JobSpec(id=name, devices=max(1, req.devices), share=req.share, cpu_milli=req.cpu_milli,
                       memory_bytes=req.memory_bytes, estimate_s=dur, same_host=True)
        out.append(((c - t0) / scale, spec, dur))
    workload = [pods[name] for _, name, _ in rows]
    return out, workload, ClusterState.from_specs(hosts), span / scale


def run(scorer: str, arrivals: list[tuple[float, JobSpec, float]], workload: list[Request],
        make_state: ClusterState, window: float, horizon: float) -> dict[str, float | str]:
    state = ClusterState.from_specs(make_state.specs)
    eng = QueueingScheduler(state, scorer=scorer, workload=workload)
    dur = {spec.id: d for _, spec, d in arrivals}
    submit = {spec.id: t for t, spec, _ in arrivals}
    events: list[tuple[float, int, str]] = [(t, 1, spec.id) for t, spec, _ in arrivals]  # 0 = finish first
    specs = {spec.id: spec for _, spec, _ in arrivals}
    heapq.heapify(events)
    started: dict[str, float] = {}
    ended: dict[str, float] = {}
    refused: dict[str, str] = {}  # pod -> kind of the first refusal
    area = area_h = 0.0  # allocation ratio x time, over the arrival window and over the horizon
    last = 0.0
    t_wall = time.perf_counter()
    while events and events[0][0] <= horizon:
        now = events[0][0]
        if now > last:
            ratio = state.allocation_ratio()
            area += ratio * (min(now, window) - min(last, window))
            area_h += ratio * (now - last)
            last = now
        while events and events[0][0] == now:
            _, kind, jid = heapq.heappop(events)
            if kind == 0:
                eng.finish(jid, now)
                ended[jid] = now
            else:
                eng.submit(specs[jid], now)
        res = eng.cycle(now)
        for jid in res.started:
            started[jid] = now
            heapq.heappush(events, (now + dur[jid], 0, jid))
        for jid, why in eng.refusals.items():  # counts said "fits now" in a pool, the pipeline said no
            refused.setdefault(jid, why.kind.value)
    if last < window:
        area += state.allocation_ratio() * (window - last)
    area_h += state.allocation_ratio() * max(0.0, horizon - last)
    wall = time.perf_counter() - t_wall
    waits = sorted(started[j] - submit[j] for j in started)
    jcts = [ended[j] - submit[j] for j in ended]
    p99 = waits[min(len(waits) - 1, math.ceil(0.99 * len(waits)) - 1)] if waits else math.nan
    return {"scorer": scorer, "pods": len(arrivals), "started": len(started), "finished": len(ended),
            "never_placed": len(arrivals) - len(started), "avg_wait_s": statistics.fmean(waits) if waits else math.nan,
            "p99_wait_s": p99, "avg_jct_s": statistics.fmean(jcts) if jcts else math.nan,
            "mean_alloc_ratio": area / window if window else math.nan,
            "mean_alloc_ratio_horizon": area_h / horizon if horizon else math.nan, "placement_refused": len(refused),
            **{f"refused_{k.value}": sum(1 for v in refused.values() if v == k.value) for k in RefusalKind},
            "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=str(OPENB / "openb_pod_list_default.csv"))
    ap.add_argument("--nodes", default=str(OPENB / "openb_node_list_gpu_node.csv"))
    ap.add_argument("--jobs", type=int, default=1500, help="first N GPU pods by creation time")
    ap.add_argument("--node-every", type=int, default=8, help="every k-th node of the node list")
    ap.add_argument("--load", type=float, default=1.0, help="offered device load / capacity over the window")
    ap.add_argument("--horizon-x", type=float, default=3.0, help="horizon = this x the arrival window")
    ap.add_argument("--scorers", default=",".join(SCORERS))
    ap.add_argument("--out", default=str(HERE / "results" / "queue_openb.csv"))
    args = ap.parse_args(argv)
    scorers = args.scorers.split(",")
    unknown = [s for s in scorers if s not in available_scorers()]
    if unknown:
        ap.error(f"unknown scorer(s) {unknown}; known: {', '.join(available_scorers())}")
    if args.jobs < 1 or args.node_every < 1 or not args.load > 0 or not args.horizon_x >= 1:
        ap.error("--jobs and --node-every must be >= 1, --load > 0, --horizon-x >= 1")
    arrivals, workload, state, window = load(args.trace, args.nodes, args.jobs, args.node_every, args.load)
    horizon = args.horizon_x * window
    print(f"{len(arrivals)} GPU pods on {state.n_hosts} hosts ({int(state.n_devices.sum())} GPUs), "
          f"arrival window {window / 3600:.1f} h, horizon {horizon / 3600:.1f} h", file=sys.stderr)
    rows = [run(s, arrivals, workload, state, window, horizon) for s in scorers]
    base = next((r for r in rows if r["scorer"] == BASELINE), None)
    for r in rows:
        for key in ("avg_wait_s", "avg_jct_s", "mean_alloc_ratio", "mean_alloc_ratio_horizon"):
            r[f"{key}_vs_{BASELINE}"] = (round(float(r[key]) / float(base[key]), 4)
                                         if base is not None and float(base[key]) else "")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rows])
    for r in rows:
        print(f"{r['scorer']:12s} avg wait {float(r['avg_wait_s']) / 60:8.1f} min  p99 wait "
              f"{float(r['p99_wait_s']) / 3600:6.2f} h  avg JCT {float(r['avg_jct_s']) / 3600:6.2f} h  "
              f"alloc {float(r['mean_alloc_ratio']):.3f} (x{r['mean_alloc_ratio_vs_' + BASELINE]}, "
              f"horizon {float(r['mean_alloc_ratio_horizon']):.3f})  "
              f"never placed {r['never_placed']}  refused {r['placement_refused']}  wall {float(r['wall_s']):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
