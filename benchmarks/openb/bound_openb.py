"""An offline upper bound on the GPU allocation each openb trace allows (issue 19).

    python benchmarks/openb/bound_openb.py                 # 5 traces x 10 seeds (42..51)
    python benchmarks/openb/bound_openb.py --traces default --seeds 42

For every seed the arrived pods are the ones ``run_openb.py`` replays (same ``openb_order``); for
every attempt in the 100% and 130% bins of the metric the bound is an upper bound on what ANY
placement of the pods arrived so far can allocate (online or offline, no migration), so the
binned bound is an upper bound on every policy's binned allocation % (same rounding, same
denominator: the cluster's whole GPU capacity).  Writes ``bound.csv`` into ``--out`` and prints
the bound next to FGD and fgd-plus from ``summary.csv``.

The bound is a linear program over *types* (``allocation_bound``): pods aggregated into types
(CPU, memory, whole-GPU count or share milli, allowed models), hosts into types (CPU, memory, pod
slots, GPU count, model).  ``x[p, h]`` = pods of type ``p`` placed on hosts of type ``h`` (at
most the arrived count of ``p``; only pairs where one ``p`` fits an empty ``h`` alone: CPU,
memory, GPU count, model in ``gpu_spec``).  Per host type, over all its hosts together:

* CPU, memory and pod slots <= capacity x hosts; GPU compute (a whole GPU = 1000 milli) too;
* the GPUs as *configurations*: ``y[h, q]`` = GPUs holding share pattern ``q``, over every
  maximal multiset of the arrived share sizes that fits one GPU (``gpu_patterns``); whole GPUs
  taken + sum of ``y`` <= GPUs, and shares of each size placed <= the slots the patterns offer
  (Gilmore-Gomory's cutting-stock relaxation, per host type);
* for ``k`` in ``DFF_K``, ``whole GPUs + sum u_k(share / 1000) <= GPUs`` with Fekete and
  Schepers' dual-feasible function ``u_k(v) = v`` if ``(k+1)v`` is an integer, else
  ``floor((k+1)v) / k`` (any shares on one GPU have ``sum u_k <= 1``; ``k = 1``: at most one share
  over 500 milli per GPU, and none on a GPU a whole-GPU pod holds).  Implied by the patterns;
  they keep the bound strong when there are too many patterns to enumerate.

Maximise the placed GPU milli.  Every real placement gives a feasible point (count its pods per
type pair and its GPUs per pattern), so the optimum is an upper bound.  What it relaxes: a host
type's hosts pool their CPU, memory and slots and their GPUs (a pod may take CPU "from" one host
and GPUs "from" another of the same type; a multi-GPU pod's GPUs need not share a host), and
pod counts and pattern counts may be fractional (``--milp`` makes pod counts integer: on default and
gpushare40 seed 42 it gave the same bound to 0.01 points at 10x the time).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from accel.scheduler import HostSpec, InvalidRequestError, Request, load_openb_nodes, load_openb_pods, openb_order

SHARED = Path(os.environ.get("ACCEL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
OPENB = SHARED / "traces" / "openb"
TRACES = ("default", "gpushare40", "multigpu20", "gpuspec33", "cpu050")
MILLI = 1000
DFF_K = (1, 2, 3, 4)
MAX_PATTERNS = 20_000
IntArray = npt.NDArray[np.int64]

PodKey = tuple[int, int, int, int, tuple[str, ...]]  # cpu, memory, whole GPUs, share milli, models
HostKey = tuple[int, int, int, int, str]  # cpu, memory, pod slots, GPUs, model


@dataclass(frozen=True, slots=True)
class Bound:
    """The bound for one pod set: ``milli`` (GPU milli, >= any placement's allocation) and
    whether HiGHS proved it optimal for the relaxation (``exact``) or stopped at its limit with
    ``milli`` = its dual bound."""

    milli: float
    exact: bool
    status: str


def dff(v: float, k: int) -> float:
    """Fekete-Schepers dual-feasible function ``u_k`` on ``v`` in [0, 1]."""
    t = (k + 1) * v
    if abs(t - round(t)) < 1e-9:
        return v
    return math.floor(t) / k


def pod_key(req: Request) -> PodKey | None:
    """The type of a request, or None for a request without GPUs (it cannot add allocation)."""
    if req.partition is not None:
        raise InvalidRequestError(f"{req.name}: partitions are not modelled by the bound", field="partition")
    if not req.wants_devices:
        return None
    share = req.share.compute_milli if req.share is not None else 0
    return (req.cpu_milli, req.memory_bytes, req.devices, share, tuple(sorted(req.selector.models)))


def host_key(h: HostSpec) -> HostKey:
    models = {d.model for d in h.devices}
    if len(models) > 1:
        raise InvalidRequestError(f"{h.name}: hosts with mixed GPU models are not modelled by the bound",
                                  field="devices")
    return (h.cpu_milli, h.memory_bytes, h.max_pods, len(h.devices), models.pop() if models else "")


def fits_alone(p: PodKey, h: HostKey) -> bool:
    """Would one pod of type ``p`` fit an empty host of type ``h`` (the scheduler's filters)?"""
    cpu, mem, whole, share, models = p
    hcpu, hmem, slots, gpus, model = h
    if cpu > hcpu or mem > hmem or slots < 1 or gpus < max(whole, 1 if share else 0):
        return False
    return not models or model in models


def gpu_patterns(sizes: Sequence[int], limit: int = MAX_PATTERNS) -> list[tuple[int, ...]] | None:
    """Every maximal multiset of share sizes one GPU can hold (sum <= 1000 milli, no size fits
    in what is left), as counts aligned with ``sizes``; None when there are more than ``limit``.
    Whatever shares one real GPU holds are a sub-multiset of one of these."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    smallest = min(sizes) if sizes else MILLI + 1
    out: list[tuple[int, ...]] = []
    cur = [0] * len(sizes)

    def rec(k: int, left: int) -> bool:
        if k == len(order):
            if left < smallest:
                out.append(tuple(cur))
            return len(out) <= limit
        i = order[k]
        for c in range(left // sizes[i], -1, -1):
            cur[i] = c
            if not rec(k + 1, left - c * sizes[i]):
                return False
        cur[i] = 0
        return True

    return out if rec(0, MILLI) else None


def allocation_bound(hosts: Sequence[HostSpec], requests: Sequence[Request], *, integer: bool = False,
                     patterns: bool = True, time_limit: float = 60.0) -> Bound:
    """Upper bound on the GPU milli any placement of ``requests`` on ``hosts`` allocates.

    See the module docstring for the program and what it relaxes.  ``time_limit`` applies to the
    integer program only (its dual bound stays valid when it stops); the LP runs to optimality."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    pcount: dict[PodKey, int] = {}
    for r in requests:
        k = pod_key(r)
        if k is not None:
            pcount[k] = pcount.get(k, 0) + 1
    hcount: dict[HostKey, int] = {}
    for h in hosts:
        hk = host_key(h)
        hcount[hk] = hcount.get(hk, 0) + 1
    ptypes, htypes = list(pcount), list(hcount)
    pairs = [(i, j) for i, p in enumerate(ptypes) for j, h in enumerate(htypes) if fits_alone(p, h)]
    if not pairs:
        return Bound(0.0, True, "nothing fits")
    n = len(pairs)
    value = np.array([ptypes[i][2] * MILLI + ptypes[i][3] for i, _ in pairs], dtype=np.float64)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    ub: list[float] = []
    # one row per pod type: at most its arrived count
    for v, (i, _) in enumerate(pairs):
        rows.append(i)
        cols.append(v)
        vals.append(1.0)
    ub.extend(float(pcount[p]) for p in ptypes)
    # per host type: cpu, memory, slots, GPU milli, then one DFF cut per k
    n_res = 4 + len(DFF_K)
    base = len(ptypes)
    for v, (i, j) in enumerate(pairs):
        cpu, mem, whole, share, _ = ptypes[i]
        items = [float(cpu), float(mem), 1.0, float(whole * MILLI + share)]
        items += [float(whole) if whole else dff(share / MILLI, k) for k in DFF_K]
        for r, a in enumerate(items):
            if a:
                rows.append(base + j * n_res + r)
                cols.append(v)
                vals.append(a)
    for hk in htypes:
        hcpu, hmem, slots, gpus, _ = hk
        c = hcount[hk]
        ub.extend([float(hcpu) * c, float(hmem) * c, float(slots) * c, float(gpus * MILLI) * c]
                  + [float(gpus) * c] * len(DFF_K))
    # configuration part: y[h, q] = GPUs of host type h holding share pattern q
    sizes = sorted({p[3] for p in ptypes if p[3]})
    pats = gpu_patterns(sizes) if patterns and sizes else None
    n_y = 0
    if pats:
        size_row = {sz: r for r, sz in enumerate(sizes)}
        base = len(ub)
        gpu_hosts = [j for j, h in enumerate(htypes) if h[3] > 0]
        # per GPU-host type: one row "whole GPUs + patterns <= GPUs", one row per share size
        # "shares of that size placed <= slots the patterns offer"
        stride = 1 + len(sizes)
        hrow = {j: base + k * stride for k, j in enumerate(gpu_hosts)}
        for v, (i, j) in enumerate(pairs):
            _, _, whole, share, _ = ptypes[i]
            if whole:
                rows.append(hrow[j])
                cols.append(v)
                vals.append(float(whole))
            elif share:
                rows.append(hrow[j] + 1 + size_row[share])
                cols.append(v)
                vals.append(1.0)
        for j in gpu_hosts:
            ub.append(float(htypes[j][3] * hcount[htypes[j]]))
            ub.extend([0.0] * len(sizes))
            for pat in pats:
                v = n + n_y
                rows.append(hrow[j])
                cols.append(v)
                vals.append(1.0)
                for r, c in enumerate(pat):
                    if c:
                        rows.append(hrow[j] + 1 + r)
                        cols.append(v)
                        vals.append(-float(c))
                n_y += 1
        value = np.concatenate([value, np.zeros(n_y)])
    # scale each row by its largest coefficient (memory is in bytes) so HiGHS sees magnitudes ~1
    a = coo_matrix((vals, (rows, cols)), shape=(len(ub), n + n_y)).tocsr()
    ubv = np.asarray(ub)
    scale = np.maximum(np.asarray(abs(a).max(axis=1).todense()).ravel(), 1.0)
    a = a.multiply(1.0 / scale[:, None]).tocsr()
    res = milp(-value, constraints=LinearConstraint(a, -np.inf, ubv / scale),
               integrality=np.concatenate([np.ones(n) if integer else np.zeros(n), np.zeros(n_y)]),
               bounds=Bounds(0, np.inf),
               options={"time_limit": time_limit, "presolve": True} if integer else {"presolve": True})
    if integer:
        # HiGHS stops at a relative gap (1e-4 by default) or the time limit: its incumbent may be
        # below the optimum, its dual bound never is; allocation is integer milli, so floor it
        dual = getattr(res, "mip_dual_bound", None)
        if dual is not None and np.isfinite(dual):
            return Bound(float(math.floor(-float(dual) + 1e-6)), res.status == 0, str(res.message))
        lp = allocation_bound(hosts, requests, integer=False, patterns=patterns, time_limit=time_limit)
        return Bound(lp.milli, False, f"milp gave no dual bound ({res.message}); LP bound")
    if res.status != 0:
        raise RuntimeError(f"LP relaxation failed: {res.message}")
    # pad by HiGHS's relative tolerances: an upper bound may only err upwards
    return Bound(-float(res.fun) * (1 + 1e-6) + 1e-3, True, "optimal")


def binned_bound(hosts: Sequence[HostSpec], order: Sequence[Request], pct: int, *, checkpoints: int = 4,
                 integer: bool = False, time_limit: float = 60.0) -> tuple[float, int, bool, float]:
    """Upper bound on the metric's value at ``pct`` % arrived for this order.

    The metric averages ``round(used_j / capacity * 100, 2)`` over attempts ``j`` whose arrived %
    rounds to ``pct``.  ``used_j`` <= bound(prefix up to ``j``) <= bound(longer prefix) (a longer
    prefix only adds pods), and ``used_j`` <= arrived milli; so the bound is solved at
    ``checkpoints`` attempts spread over the bin (the last one included) and each attempt takes
    the next checkpoint's bound.  Returns (bound %, attempts in the bin, all exact, max bound
    milli)."""
    capacity = sum(len(h.devices) for h in hosts) * MILLI
    arrived = np.cumsum([r.total_milli for r in order])
    pcts = np.round(arrived / capacity * 100.0).astype(np.int64)
    idx = np.flatnonzero(pcts == pct)
    if len(idx) == 0:
        raise InvalidRequestError(f"no attempt falls in the {pct}% bin", field="pct")
    cuts = sorted({int(idx[min(len(idx) - 1, math.ceil((q + 1) * len(idx) / checkpoints) - 1)])
                   for q in range(checkpoints)})
    bounds: dict[int, Bound] = {c: allocation_bound(hosts, order[: c + 1], integer=integer, time_limit=time_limit)
                                for c in cuts}
    per: list[float] = []
    for j in idx:
        c = next(c for c in cuts if c >= j)
        b = min(math.floor(bounds[c].milli + 1e-6), int(arrived[j]))
        per.append(round(b / capacity * 100.0, 2))
    return (float(np.mean(per)), len(idx), all(b.exact for b in bounds.values()),
            max(b.milli for b in bounds.values()))


def _summary(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    if not path.exists():
        return {}
    with open(path) as fh:
        return {(r["trace"], r["policy"]): r for r in csv.DictReader(fh)}


def _pub_fgd() -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    with open(OPENB / "fgd_expected_results_summary.csv") as fh:
        for row in csv.DictReader(fh):
            if row["policy"] == "FGD":
                out[(row["workload"].replace("openb_pod_list_", ""), int(row["arrived_gpu_demand_pct"]))] = \
                    float(row["gpu_alloc_pct_mean"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", nargs="*", default=list(TRACES))
    ap.add_argument("--seeds", nargs="*", type=int, default=list(range(42, 52)))
    ap.add_argument("--checkpoints", type=int, default=4, help="bound solves per bin (more: tighter, slower)")
    ap.add_argument("--milp", action="store_true",
                    help="integer pod counts (on openb the same bound as the LP to 0.01 points, ~10x slower)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = ap.parse_args()
    hosts = load_openb_nodes(OPENB / "openb_node_list_gpu_node.csv")
    capacity = sum(len(h.devices) for h in hosts) * MILLI
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    fields = ["trace", "seed", "arrived_pct", "bound_pct", "attempts_in_bin", "exact", "solve_s"]
    fh = open(args.out / "bound.csv", "w", newline="")  # noqa: SIM115 - written row by row below
    w = csv.DictWriter(fh, fieldnames=fields)
    w.writeheader()
    for trace in args.traces:
        pods = load_openb_pods(OPENB / f"openb_pod_list_{trace}.csv")
        for seed in args.seeds:
            order = [p.request for p in openb_order(pods, capacity, seed)]
            for pct in (100, 130):
                t0 = time.perf_counter()
                b, n_att, exact, _ = binned_bound(hosts, order, pct, checkpoints=args.checkpoints,
                                                  integer=args.milp)
                rows.append({"trace": trace, "seed": seed, "arrived_pct": pct, "bound_pct": f"{b:.3f}",
                             "attempts_in_bin": n_att, "exact": exact,
                             "solve_s": f"{time.perf_counter() - t0:.2f}"})
                w.writerow(rows[-1])  # row by row: a long run that stops keeps what it solved
                fh.flush()
                print(f"{trace:11} seed {seed} @{pct}%: bound {b:6.2f}%  ({n_att} attempts, "
                      f"{'optimal' if exact else 'dual bound'}, {time.perf_counter() - t0:.1f}s)", flush=True)
    fh.close()
    summ = _summary(args.out / "summary.csv")
    pub = _pub_fgd()
    print(f"\n{'trace':11} {'@':>4} {'bound':>7} {'pubFGD':>7} {'fgd':>7} {'fgd+':>7} {'headroom':>8}  (seeds "
          f"{min(args.seeds)}..{max(args.seeds)})")
    for trace in args.traces:
        for pct in (100, 130):
            b = float(np.mean([float(str(r["bound_pct"])) for r in rows
                               if r["trace"] == trace and r["arrived_pct"] == pct]))
            fgd = summ.get((trace, "fgd"), {}).get(f"ours_{pct}")
            plus = summ.get((trace, "fgd-plus"), {}).get(f"ours_{pct}")
            head = f"{b - float(plus):8.2f}" if plus else "       -"
            print(f"{trace:11} {pct:4d} {b:7.2f} {pub.get((trace, pct), float('nan')):7.2f} "
                  f"{float(fgd) if fgd else float('nan'):7.2f} {float(plus) if plus else float('nan'):7.2f} {head}")
    print(f"\nwrote {args.out / 'bound.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
