"""Routing on the Mooncake conversation trace: prefix hits, latency and balance, every router.

Two parts, both printed and written as CSV under ``--out``:

1. ``check_notiming.csv``: the issue's no-timing figures (8 replicas, 977 blocks each; a
   replica's load is the requests routed to it so far), a check of the cache and routers:
   unbounded single cache 36.6%, pooled LRU of 8 x 977 blocks 17.5%, consistent hashing
   17.0% (max/mean 1.15), round-robin 6.0%.
2. ``routing.csv``: the request-level simulator (:func:`accel.scheduler.serving.simulate`) at 4,
   8 and 16 replicas, each capacity (``issue``: 977 blocks; ``physical``: what
   :func:`cache_blocks` gives for Llama-3-8B on an 80 GB card), every router, on each of the two
   traces below.  Hit ratio is reported against the two bounds measured on the same requests
   (one unbounded cache; one pooled LRU holding all replicas' capacity), with TTFT and TPOT
   p50/p99, max/mean requests per replica, attainment of Mooncake's objective (TTFT 30 s; TPOT
   100 ms, here the mean gap, not the paper's slowest-10% TBT) and whether the issue's routing
   goals hold for each cache-aware router against every other router in the same cell.

Traces.  Of the shared traces only Mooncake's conversation trace carries prefix hashes (Azure's
2023 trace has token counts only, so no router can score a hit on it).  It is cut at minute 30
into two traces, ``A`` (minutes 0-30) and ``B`` (minutes 30-60, time rebased to 0), each
simulated on its own from cold caches and empty queues; every metric is over all of its requests.

Timing: Splitwise's measured Llama2-70B TP=8 H100 tables (the only cited end-to-end tables in
the cost data; Mooncake's own testbed ran a LLaMA3-70B-shaped model on 8-GPU nodes, so the
trace's rate matches this replica class).  The trace's 3.4 req/s loads 8 such replicas
(TTFT p50 about 1.4 s) but 4 cannot carry it (the queue grows for the whole hour), so arrival
times are scaled by ``8 / replicas``: every replica count sees the per-replica rate of 8
replicas on the real trace.

Tuning protocol (README section 2): ``cache-aware`` (timed bounds) keeps the constants chosen on
minutes 0-20 (inside ``A``); ``cache-aware-adaptive`` has no numeric constant besides the
balance goal 1.05, and its rule was chosen among structural variants on ``A`` only.  ``B`` is
the report trace; ``A`` is reported too, as the tuning trace.

``--quick`` runs the check and the 8-replica ``issue`` rows of trace ``B`` only (CI; well under 20 s).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from accel.scheduler.serving import (
    AdaptiveCacheAware,
    CacheAware,
    ConsistentHash,
    EngineConfig,
    LeastOutstanding,
    Objective,
    PrefixCache,
    ReplicaSpec,
    RoundRobin,
    Router,
    ServingRequest,
    cache_blocks,
    load_catalog,
    load_mooncake,
    load_operator_profile,
    percentile,
    replay_hits,
    simulate,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRACE_NAME = "traces/serving/mooncake_conversation_trace.jsonl"
ISSUE_BLOCKS = 977
BLOCK_TOKENS = 512  # the trace's block size
SPLIT_S = 1800.0  # trace A: minutes 0-30 (tuning); trace B: minutes 30-60 (report)
BALANCE_TARGET = 1.05  # the issue's max/mean goal; the adaptive router's only number
OBJECTIVE = Objective(ttft_s=30.0, tpot_s=0.100, percentile=0.99)
ISSUE_CHECK = {"unbounded": 0.366, "pooled": 0.175, "consistent-hash": 0.170, "round-robin": 0.060}


def _default_trace() -> Path:
    for base in (ROOT.parent / "shared", ROOT / "shared", Path("/work/shared")):
        if (base / TRACE_NAME).is_file():
            return base / TRACE_NAME
    return ROOT.parent / "shared" / TRACE_NAME


def routers(capacity: int) -> list[Callable[[], Router]]:
    return [RoundRobin, LeastOutstanding, ConsistentHash, lambda: CacheAware(capacity),
            lambda: AdaptiveCacheAware(capacity, balance_target=BALANCE_TARGET)]


def split(reqs: Sequence[ServingRequest], at_s: float) -> dict[str, list[ServingRequest]]:
    """Trace ``A`` (arrivals before ``at_s``) and trace ``B`` (the rest, arrival times rebased)."""
    a = [r for r in reqs if r.arrival_s < at_s]
    b = [ServingRequest(r.request_id, r.arrival_s - at_s, r.prompt_tokens, r.output_tokens, r.hash_ids)
         for r in reqs if r.arrival_s >= at_s]
    return {"A": a, "B": b}


def one_cache(reqs: Sequence[ServingRequest], capacity: int | None) -> float:
    """Hit ratio of one cache of ``capacity`` over a trace (the bounds a router is measured against)."""
    cache = PrefixCache(capacity)
    hit = total = 0
    for r in sorted(reqs, key=lambda r: (r.arrival_s, r.request_id)):
        hit += cache.use(r.hash_ids)
        total += len(r.hash_ids)
    return hit / total if total else math.nan


def check(reqs: Sequence[ServingRequest], out: Path) -> None:
    rows = [
        ("unbounded", 1, None, replay_hits(reqs, None, 1, None)),
        ("pooled", 1, 8 * ISSUE_BLOCKS, replay_hits(reqs, None, 1, 8 * ISSUE_BLOCKS)),
    ]
    for mk in routers(ISSUE_BLOCKS):
        r = mk()
        rows.append((r.name, 8, ISSUE_BLOCKS, replay_hits(reqs, r, 8, ISSUE_BLOCKS)))
    print(f"{'no-timing check (8 replicas x 977 blocks)':44s} {'hit':>7s} {'issue':>7s} {'max/mean':>8s}")
    with open(out / "check_notiming.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "replicas", "capacity_blocks", "hit_ratio", "issue_hit_ratio", "max_mean_requests"])
        for name, n, cap, res in rows:
            issue = ISSUE_CHECK.get(name)
            imb = res.imbalance if n > 1 else 1.0
            w.writerow([name, n, cap if cap is not None else "unbounded", f"{res.hit_ratio:.4f}",
                        "" if issue is None else issue, f"{imb:.3f}"])
            print(f"  {name:42s} {res.hit_ratio:7.2%} {'' if issue is None else f'{issue:.1%}':>7s} {imb:8.3f}")


def with_shared_prefix(reqs: Sequence[ServingRequest], blocks: int) -> list[ServingRequest]:
    """Every prompt behind the same ``blocks``-block system prompt (a stress shape, not a trace).

    The trace's own hashes are moved past the new ones, so chains stay distinct; every request then
    matches at least ``blocks`` blocks on any replica that served one, so a router's "new
    conversation" test never fires on the shared block alone.
    """
    if blocks <= 0:
        return list(reqs)
    base = 1 + max((h for r in reqs for h in r.hash_ids), default=0)
    head = tuple(range(base, base + blocks))
    return [ServingRequest(r.request_id, r.arrival_s, r.prompt_tokens + blocks * BLOCK_TOKENS, r.output_tokens,
                           head + tuple(h + base + blocks for h in r.hash_ids)) for r in reqs]


def run(trace: Path, part: str, replicas: int, label: str, capacity: int,
        engine: bool = False, shared_blocks: int = 0) -> list[dict[str, object]]:
    scale = 8.0 / replicas
    reqs = with_shared_prefix(split(load_mooncake(trace, time_scale=scale), SPLIT_S * scale)[part], shared_blocks)
    profile = load_catalog().profile("llama-2-70b", "h100-80gb")
    cfg = EngineConfig(load_operator_profile("llama-2-70b", "h100-80gb")) if engine else None
    spec = ReplicaSpec(profile, capacity, engine=cfg)
    unbounded = one_cache(reqs, None)
    pooled = one_cache(reqs, replicas * capacity)
    rows: list[dict[str, object]] = []
    for mk in routers(capacity):
        router = mk()
        t0 = time.perf_counter()
        res = simulate(reqs, router, [spec] * replicas)
        wall = time.perf_counter() - t0
        assert res.complete and len(res.outcomes) == len(reqs)
        rep = res.outcomes
        blocks = sum(o.prompt_blocks for o in rep)
        counts: dict[int, int] = {}
        for o in rep:
            counts[o.replica_id] = counts.get(o.replica_id, 0) + 1
        per = [counts.get(i, 0) for i in range(replicas)]
        rows.append({
            "trace": part, "capacity": label, "capacity_blocks": capacity, "replicas": replicas, "time_scale": scale,
            "router": router.name, "requests": len(rep),
            "hit_ratio": sum(o.cached_blocks for o in rep) / blocks,
            "pooled_bound": pooled, "unbounded_bound": unbounded,
            "ttft_p50_s": percentile([o.ttft_s for o in rep], 0.5),
            "ttft_p99_s": percentile([o.ttft_s for o in rep], 0.99),
            "tpot_p50_ms": 1000 * percentile([o.tpot_s for o in rep if o.output_tokens > 1], 0.5),
            "tpot_p99_ms": 1000 * percentile([o.tpot_s for o in rep if o.output_tokens > 1], 0.99),
            "max_mean_requests": max(per) / (sum(per) / replicas),
            "attainment": sum(OBJECTIVE.attained(o) for o in rep) / len(rep),
            "tbt_p99_ms": 1000 * res.tbt(0.99) if engine else math.nan,
            "sim_wall_s": wall,
        })
    ch = next(r for r in rows if r["router"] == "consistent-hash")
    best_p99 = min(float(str(r["ttft_p99_s"])) for r in rows)
    for r in rows:
        r["goal_hit_within_1pt_of_ch"] = float(str(r["hit_ratio"])) >= float(str(ch["hit_ratio"])) - 0.01
        r["goal_max_mean_le_1_05"] = float(str(r["max_mean_requests"])) <= BALANCE_TARGET
        r["goal_lowest_ttft_p99"] = float(str(r["ttft_p99_s"])) <= best_p99  # of all five routers
        r["goals_met"] = all(r[g] for g in GOALS)
    return rows


GOALS = ("goal_hit_within_1pt_of_ch", "goal_max_mean_le_1_05", "goal_lowest_ttft_p99")


def plot(rows: Sequence[dict[str, object]], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the [bench] extra brings it
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    labels = sorted({(str(r["trace"]), str(r["capacity"])) for r in rows})
    fig, axes = plt.subplots(len(labels), 3, figsize=(15, 3.4 * len(labels)), squeeze=False)
    names = ["round-robin", "least-outstanding", "consistent-hash", "cache-aware", "cache-aware-adaptive"]
    for li, (part, label) in enumerate(labels):
        sub = [r for r in rows if r["trace"] == part and r["capacity"] == label]
        reps = sorted({int(str(r["replicas"])) for r in sub})
        width = 0.8 / len(names)
        for k, (metric, title) in enumerate(
            [("hit_ratio", "prefix hit ratio (blocks)"), ("ttft_p99_s", "TTFT p99 (s)"),
             ("max_mean_requests", "max/mean requests per replica")]
        ):
            ax = axes[li][k]
            for j, name in enumerate(names):
                ys = [float(str(next(r[metric] for r in sub if r["router"] == name and r["replicas"] == n)))
                      for n in reps]
                ax.bar([i + j * width for i in range(len(reps))], ys, width, label=name)
            if metric == "hit_ratio":
                for i, n in enumerate(reps):
                    pb = float(str(next(r["pooled_bound"] for r in sub if r["replicas"] == n)))
                    ax.hlines(pb, i - width / 2, i + 0.8 - width / 2, colors="k", linestyles="--")
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(reps))], [f"{n} replicas" for n in reps])
            ax.set_title(f"{title}, trace {part}, capacity {label}", fontsize=9)
        axes[li][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "routing.png", dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(_default_trace()))
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--quick", action="store_true", help="the check plus 8 replicas at the issue's capacity")
    ap.add_argument("--shared-prefix-blocks", type=int, default=0, metavar="K",
                    help="stress shape: put every prompt behind one K-block system prompt (consistent hashing's "
                         "two-block key then sends everything to one replica)")
    ap.add_argument("--engine", action="store_true",
                    help="calibrated engine replicas (chunked prefill, operator profile) instead of Splitwise's tables")
    args = ap.parse_args(argv)
    trace = Path(args.trace)
    if not trace.is_file():
        print(f"Mooncake trace not found: {trace} (pass --trace PATH)", file=sys.stderr)
        return 2
    if args.shared_prefix_blocks < 0:
        print(f"--shared-prefix-blocks must be >= 0, got {args.shared_prefix_blocks}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    reqs = load_mooncake(trace)
    check(reqs, out)
    model = load_catalog().model("llama-3-8b")
    physical = cache_blocks(model, 80_000_000_000)
    caps = [("issue", ISSUE_BLOCKS)] if args.quick else [("issue", ISSUE_BLOCKS), ("physical", physical)]
    counts = [8] if args.quick else [4, 8, 16]
    parts = ["B"] if args.quick else ["A", "B"]
    rows: list[dict[str, object]] = []
    print(f"\nphysical capacity: Llama-3-8B on 80 GB x 0.9 - 16 GB weights = {physical} blocks of 512; "
          f"timing: Llama2-70B TP=8 H100 "
          f"({'engine replicas, Vidur operator profile' if args.engine else 'Splitwise'}); "
          f"trace A = minutes 0-30 (tuning), B = minutes 30-60 (report), each from cold"
          + (f"; stress: every prompt behind one {args.shared_prefix_blocks}-block system prompt"
             if args.shared_prefix_blocks else ""))
    hdr = (f"{'trace':5s} {'cap':8s} {'n':>3s} {'router':20s} {'hit':>6s} {'pooled':>6s} {'unbnd':>6s} {'ttft50':>7s} "
           f"{'ttft99':>7s} {'tpot50':>7s} {'tpot99':>7s} {'max/mean':>8s} {'SLO%':>6s}  goals(hit,bal,p99)")
    print(hdr)
    for part, (label, cap), n in itertools.product(parts, caps, counts):
            for r in run(trace, part, n, label, cap, args.engine, args.shared_prefix_blocks):
                rows.append(r)
                goals = "".join("Y" if r[g] else "n" for g in GOALS)
                print(f"{part:5s} {label:8s} {n:3d} {r['router']!s:20s} {float(str(r['hit_ratio'])):6.1%} "
                      f"{float(str(r['pooled_bound'])):6.1%} {float(str(r['unbounded_bound'])):6.1%} "
                      f"{float(str(r['ttft_p50_s'])):7.2f} {float(str(r['ttft_p99_s'])):7.2f} "
                      f"{float(str(r['tpot_p50_ms'])):7.1f} {float(str(r['tpot_p99_ms'])):7.1f} "
                      f"{float(str(r['max_mean_requests'])):8.3f} {float(str(r['attainment'])):6.1%}  {goals}"
                      + (f"  tbt99 {float(str(r['tbt_p99_ms'])):.1f} ms" if args.engine else ""))
    for name in ("cache-aware", "cache-aware-adaptive"):
        for part in parts:
            mine = [r for r in rows if r["router"] == name and r["trace"] == part]
            print(f"{name} on trace {part}: all three goals in {sum(bool(r['goals_met']) for r in mine)}"
                  f" of {len(mine)} cells")
    with open(out / "routing.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    if not args.quick:
        plot(rows, out)
    print(f"\nwrote {out}/ in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
