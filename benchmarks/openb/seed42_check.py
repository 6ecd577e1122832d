"""Replay the published simulator's exact seed-42 pod order and compare attempt by attempt.

Usage: python benchmarks/openb/seed42_check.py [--policy best-fit|fgd] [--guided]

``--guided`` resolves ties between equally scored hosts towards the one whose result matches the
published curve (the published simulator breaks ties by a node-name prefix drawn from Go's RNG,
which Python cannot regenerate); a divergence that remains then points at a rule, not a tie.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from accel.scheduler import Request, Scheduler, load_openb_nodes, load_openb_pods, replay
from accel.scheduler._replay import TracePod, _renamed

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces" / "openb"
REF = {"best-fit": "alloc_curve_05-BestFit.csv", "fgd": "alloc_curve_06-FGD.csv"}


def load_order(pods: list[TracePod]) -> list[TracePod]:
    by_name = {p.name: p for p in pods}
    out: list[TracePod] = []
    with open(SHARED / "fgd-sim-seed42" / "pod_order_tune1.3_seed42.csv") as fh:
        for line in fh:
            _, name = line.strip().split(",", 1)
            name = name.split("/", 1)[-1]
            base = name.split("-tuned-")[0]
            src = by_name[base]
            out.append(src if base == name else TracePod(name, _renamed(src.request, name)))
    return out


def load_ref(policy: str) -> np.ndarray:
    with open(SHARED / "fgd-sim-seed42" / REF[policy]) as fh:
        rows = list(csv.DictReader(fh))
    return np.array([[int(r["used_nodes"]), int(r["used_gpus"]), int(r["used_gpu_milli"]),
                      int(r["arrived_gpu_milli"])] for r in rows], dtype=np.int64)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="best-fit", choices=sorted(REF))
    ap.add_argument("--guided", action="store_true")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    hosts = load_openb_nodes(SHARED / "openb_node_list_gpu_node.csv")
    pods = load_openb_pods(SHARED / "openb_pod_list_default.csv")
    order = load_order(pods)
    if args.limit:
        order = order[: args.limit]
    ref = load_ref(args.policy)
    workload = [p.request for p in pods]
    stats = {"ties": 0, "resolved": 0, "ambiguous": 0}

    def chooser(sched: Scheduler, req: Request, k: int) -> int | None:
        st = sched.state
        hosts_ok = sched.filter(req)
        if len(hosts_ok) == 0:
            return None
        scores, _ = sched.score(req, hosts_ok)
        tied = hosts_ok[scores == scores.max()]
        if len(tied) <= 1:
            return None
        stats["ties"] += 1
        want_nodes = ref[k, 0] - (ref[k - 1, 0] if k else 0)
        want_gpus = ref[k, 1] - (ref[k - 1, 1] if k else 0)
        new_host = st.pods_used[tied] == 0
        d_nodes = new_host.astype(np.int64)
        d_gpus = np.where(new_host, st.n_devices[tied], 0)
        match = tied[(d_nodes == want_nodes) & (d_gpus == want_gpus)]
        if len(match) == 0:
            return None
        stats["resolved"] += 1
        if len(np.unique(st.host_class[match])) > 1 or len(match) < len(tied):
            stats["ambiguous"] += len(match) > 1
        # the published tie-break is a uniformly random node order, so the winner's kind is most
        # likely the one with the most tied hosts: pick from the largest group of identical hosts
        groups: dict[tuple[int, ...], list[int]] = {}
        for h in match.tolist():
            key = (int(st.host_class[h]), int(st.cpu_free[h]), int(st.mem_free[h] >> 30),
                   *sorted(st.dev_left[h].tolist()))
            groups.setdefault(key, []).append(h)
        biggest = max(groups.values(), key=len)
        return min(biggest, key=lambda h: int(sched.host_rank[h]))

    t0 = time.perf_counter()
    res = replay(hosts, order, args.policy, workload=workload, seed=42,
                 chooser=chooser if args.guided else None)
    wall = time.perf_counter() - t0
    n = len(order)
    ours = np.stack([res.used_nodes, res.used_gpus, res.used_milli, res.arrived_milli], axis=1)
    diff = np.nonzero(ours[:, 2] != ref[:n, 2])[0]
    diff_nodes = np.nonzero((ours[:, :2] != ref[:n, :2]).any(axis=1))[0]
    print(f"policy={args.policy} guided={args.guided} attempts={n} wall={wall:.1f}s")
    print(f"arrived identical: {bool((ours[:, 3] == ref[:n, 3]).all())}")
    if len(diff):
        k = int(diff[0])
        print(f"first divergent attempt (used_gpu_milli): {k} pod={order[k].name} "
              f"ours={ours[k].tolist()} ref={ref[k].tolist()} prev_ref={ref[k - 1].tolist() if k else None}")
    else:
        print("used_gpu_milli identical at every attempt")
    if len(diff_nodes):
        k = int(diff_nodes[0])
        print(f"first divergence in (used_nodes, used_gpus): {k} ours={ours[k, :2].tolist()} "
              f"ref={ref[k, :2].tolist()}")
    print(f"matching attempts (milli): {int((ours[:, 2] == ref[:n, 2]).sum())}/{n}")
    print(f"final used milli ours={int(ours[-1, 2])} ref={int(ref[n - 1, 2])}; "
          f"placed={int(res.placed.sum())}")
    curve = res.curve()
    print(f"alloc% @100={curve[100]:.2f} @130={curve[130]:.2f}")
    if args.guided:
        print(f"ties={stats['ties']} resolved_by_curve={stats['resolved']} ambiguous={stats['ambiguous']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
