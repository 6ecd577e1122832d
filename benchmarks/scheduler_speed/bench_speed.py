"""Scheduler speed: decisions per second on a 5,000-host x 8-device synthetic cluster, and the
wall time and peak memory of one full openb seed (every attempt's allocation recorded).

    python benchmarks/scheduler_speed/bench_speed.py --quick   # CI smoke (500 hosts, few pods)
    python benchmarks/scheduler_speed/bench_speed.py           # 5,000 hosts, openb seed 42

Every ratio printed compares against a baseline measured in the same run: the same pipeline
with the incremental score cache disabled (every feasible host rescored on every decision,
which is what a kube-scheduler-style framework does; the FGD scorers' own per-host caches, such
as fgd-plus's, are off too).  Results are identical by construction
(a test checks it); only the time differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from accel.scheduler import ClusterState, DeviceSpec, HostSpec, Scheduler, load_openb_pods

SHARED = Path(os.environ.get("ACCEL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
OPENB = SHARED / "traces" / "openb"
POLICIES = ("random", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "spread", "fgd",
            "fgd-balance", "fgd-plus", "topology-aware")


def synthetic(hosts: int) -> ClusterState:
    """G2-like hosts (96 CPU, 384 GiB, 8 GPUs), 8 per rack, two NVLink islands of four."""
    specs = []
    for h in range(hosts):
        devs = tuple(DeviceSpec(id=f"n{h}/g{j}", vendor="nvidia", model="G2", memory_bytes=32 << 30,
                                link_domain=f"nvl{j // 4}", pcie_switch=f"sw{j // 2}", numa=j // 4)
                     for j in range(8))
        specs.append(HostSpec(f"n{h:05d}", 96_000, 384 << 30, devs, rack=f"rack{h // 8}"))
    return ClusterState.from_specs(specs)


def decisions_per_second(policy: str, hosts: int, n: int, cache: bool, seed: int = 42) -> tuple[float, int]:
    pods = load_openb_pods(OPENB / "openb_pod_list_default.csv")
    rng = np.random.default_rng(seed)
    reqs = [pods[i].request for i in rng.integers(len(pods), size=n)]
    state = synthetic(hosts)
    sched = Scheduler(state, policy, workload=[p.request for p in pods], seed=seed, cache=cache)
    t0 = time.perf_counter()
    placed = 0
    for r in reqs:
        placed += sched.place(r) is not None
    return n / (time.perf_counter() - t0), placed


def openb_run(policy: str, cache: bool, limit: int) -> dict[str, float]:
    """One openb default seed-42 run in a fresh process.  Its peak RSS is VmHWM of its own
    address space: ``getrusage`` in the child would also count the forked copy of this parent
    from before the exec (Linux keeps the larger high-water mark across exec)."""
    code = f"""
import json, resource, time, sys
from pathlib import Path

def peak_rss_mib():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")  # no /proc: not measured (getrusage would include the parent's)

from accel.scheduler import load_openb_nodes, load_openb_pods, openb_order, replay
o = Path({str(OPENB)!r})
hosts = load_openb_nodes(o / "openb_node_list_gpu_node.csv")
pods = load_openb_pods(o / "openb_pod_list_default.csv")
order = openb_order(pods, 6212000, 42)
if {limit}:
    order = order[:{limit}]
t0 = time.perf_counter()
res = replay(hosts, order, {policy!r}, workload=[p.request for p in pods], seed=42, cache={cache})
wall = time.perf_counter() - t0
print(json.dumps({{"wall_s": wall, "attempts": len(order), "curve_points": int(len(res.used_milli)),
                   "peak_rss_mib": peak_rss_mib(),
                   "rusage_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "alloc_at_end": float(res.used_milli[-1] / res.total_milli)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--hosts", type=int, default=None)
    ap.add_argument("--decisions", type=int, default=None)
    ap.add_argument("--baseline-decisions", type=int, default=None)
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    args = ap.parse_args()
    hosts = args.hosts or (500 if args.quick else 5000)
    n = args.decisions or (300 if args.quick else 5000)
    nb = args.baseline_decisions or (100 if args.quick else 300)
    print(f"synthetic cluster: {hosts} hosts x 8 devices; decisions drawn from the openb default pods")
    print(f"{'policy':15} {'decisions/s':>12} {'uncached/s':>11} {'ratio':>7} {'placed':>7}")
    for pol in args.policies:
        fast, placed = decisions_per_second(pol, hosts, n, cache=True)
        slow, _ = decisions_per_second(pol, hosts, nb, cache=False)
        print(f"{pol:15} {fast:12.0f} {slow:11.0f} {fast / slow:6.1f}x {placed:7d}", flush=True)
    limit = 1500 if args.quick else 0
    for pol in ("best-fit", "fgd", "fgd-balance", "fgd-plus"):
        r = openb_run(pol, cache=True, limit=limit)
        base = openb_run(pol, cache=False, limit=limit if limit else 2000)
        per_attempt = r["wall_s"] / r["attempts"]
        base_per = base["wall_s"] / base["attempts"]
        print(f"openb default seed 42 {pol}: {r['attempts']} attempts, curve recorded after each, "
              f"wall {r['wall_s']:.1f}s (after loading the CSVs), peak RSS {r['peak_rss_mib']:.0f} MiB "
              f"(VmHWM; getrusage says {r['rusage_maxrss_mib']:.0f}, the parent's included); "
              "uncached baseline "
              f"{base_per * 1e3:.2f} ms/attempt over {base['attempts']} attempts vs {per_attempt * 1e3:.2f} "
              f"ms/attempt -> {base_per / per_attempt:.1f}x")
    print("context (published, not measured here): the FGD paper's Go simulator needs 27 min 24 s and "
          "3.77 GiB for one FGD seed on a 2-core machine (fgd-sim-seed42/README.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
