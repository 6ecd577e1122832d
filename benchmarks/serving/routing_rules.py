"""The structural variants the adaptive cache-aware rule was chosen from, and the reverse direction.

``python benchmarks/serving/routing_rules.py --tune B`` runs every variant below on trace ``B``
(minutes 30-60 of Mooncake's conversation trace; ``routing.py`` defines the split) at 4, 8 and 16
replicas and both capacities, next to consistent hashing, round-robin and least-outstanding,
chooses the variant that meets all three routing goals in the most cells (ties: the smallest worst
hit deficit to consistent hashing), then reports the chosen one on the other trace.  ``--tune A``
is the forward direction (the one that chose ``AdaptiveCacheAware``).

Every variant has the count cap from the balance goal (``AdaptiveCacheAware.cap``); they differ in
what else moves a request (a load bound on continuations) and where a new conversation goes.
This is exploration machinery, kept so the choice can be rerun; the router is
:class:`accel.scheduler.serving.AdaptiveCacheAware` (the variant ``queue<=mean``).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from routing import BALANCE_TARGET, ISSUE_BLOCKS, SPLIT_S, _default_trace, split

from accel.scheduler.serving import (
    AdaptiveCacheAware,
    ConsistentHash,
    LeastOutstanding,
    ReplicaLoad,
    ReplicaSpec,
    RoundRobin,
    Router,
    cache_blocks,
    load_catalog,
    load_mooncake,
    percentile,
    simulate,
)


class Variant(AdaptiveCacheAware):
    """The count cap plus one of the explored rules (``load``: what moves a continuation;
    ``place``: where a new conversation goes)."""

    def __init__(self, capacity: int, load: str, place: str, relative_match: bool = False) -> None:
        super().__init__(capacity, balance_target=BALANCE_TARGET)
        self.name = f"{load}/{place}" + ("/rel" if relative_match else "")
        self.load, self.place, self.relative = load, place, relative_match
        self._unc_sum = 0
        self._unc_n = 0

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        self._join(replicas)
        n = len(replicas)
        counts = self._counts
        cap = self.cap(sum(counts[r.replica_id] for r in replicas), n)
        ok = [r for r in replicas if counts[r.replica_id] + 1 <= cap]
        if self.load == "outstanding-cap":
            total = sum(r.outstanding for r in replicas)
            ocap = math.ceil(BALANCE_TARGET * (total + 1) / n)
            ok = [r for r in ok if r.outstanding + 1 <= ocap] or ok
        m = {r.replica_id: self.tracked(r.replica_id).match(hash_ids) for r in ok}
        best = min(ok, key=lambda r: (-m[r.replica_id], r.outstanding, r.replica_id))
        least = self._free(ok, replicas)
        if self.relative:  # affinity only when the free placement would lose blocks
            new = m[best.replica_id] <= m[least.replica_id]
        elif self.place == "queue<=mean":  # AdaptiveCacheAware's: ... and more than one block
            new = m[best.replica_id] <= max(self.min_match_blocks, m[least.replica_id])
        else:
            new = m[best.replica_id] <= self.min_match_blocks
        ch = least if new else best
        if not new and self.load == "queue-divert" and self._unc_n:
            mu = self._unc_sum / self._unc_n  # mean uncached blocks per request, measured
            lo = min(ok, key=lambda r: (r.waiting or 0, r.outstanding, r.replica_id))
            if ((best.waiting or 0) - (lo.waiting or 0)) * mu > m[best.replica_id] - m[lo.replica_id]:
                ch = lo
        rid = ch.replica_id
        self._unc_sum += len(hash_ids) - m[rid]
        self._unc_n += 1
        self.tracked(rid).use(hash_ids)
        counts[rid] += 1
        return rid

    def _free(self, ok: Sequence[ReplicaLoad], replicas: Sequence[ReplicaLoad]) -> ReplicaLoad:
        counts = self._counts
        n = len(replicas)
        mean_out = sum(r.outstanding for r in replicas) / n
        mean_wait = sum(r.waiting or 0 for r in replicas) / n
        min_wait = min(r.waiting or 0 for r in ok)
        if self.place == "least-outstanding":
            return min(ok, key=lambda r: (r.outstanding, counts[r.replica_id], r.replica_id))
        if self.place == "fewest-routed":
            return min(ok, key=lambda r: (counts[r.replica_id], r.outstanding, r.replica_id))
        if self.place == "out<=mean":
            pool = [r for r in ok if r.outstanding <= mean_out] or list(ok)
        elif self.place == "queue==min":
            calm = [r for r in ok if (r.waiting or 0) == min_wait]
            pool = [r for r in calm if r.outstanding <= mean_out] or calm
        else:  # "queue<=mean" (AdaptiveCacheAware's) and its first form
            calm = [r for r in ok if (r.waiting or 0) <= mean_wait]
            pool = [r for r in calm if r.outstanding <= mean_out] or calm or list(ok)
        return min(pool, key=lambda r: (counts[r.replica_id], r.outstanding, r.replica_id))


def variants(capacity: int) -> list[Callable[[], Router]]:
    return [
        lambda: Variant(capacity, "outstanding-cap", "least-outstanding"),
        lambda: Variant(capacity, "queue-divert", "out<=mean"),
        lambda: Variant(capacity, "none", "least-outstanding"),
        lambda: Variant(capacity, "none", "fewest-routed"),
        lambda: Variant(capacity, "none", "out<=mean"),
        lambda: Variant(capacity, "none", "queue==min"),
        lambda: Variant(capacity, "none", "queue<=mean-only-1-block"),
        lambda: Variant(capacity, "none", "queue<=mean"),
        lambda: Variant(capacity, "none", "queue<=mean", relative_match=True),
    ]


BASELINES: list[Callable[[], Router]] = [RoundRobin, LeastOutstanding, ConsistentHash]


Cell = dict[str, tuple[float, float, float]]  # router name -> (hit ratio, max/mean requests, p99 TTFT s)


def cell(trace: Path, part: str, n: int, cap: int, makers: Sequence[Callable[[], Router]]) -> Cell:
    scale = 8.0 / n
    reqs = split(load_mooncake(trace, time_scale=scale), SPLIT_S * scale)[part]
    spec = ReplicaSpec(load_catalog().profile("llama-2-70b", "h100-80gb"), cap)
    out: Cell = {}
    for mk in makers:
        router = mk()
        res = simulate(reqs, router, [spec] * n)
        per = [0] * n
        for o in res.outcomes:
            per[o.replica_id] += 1
        p99 = percentile([o.ttft_s for o in res.outcomes], 0.99)
        out[router.name] = (res.hit_ratio(), max(per) / (sum(per) / n), p99)
    return out


def goals(name: str, res: Cell) -> tuple[bool, float]:
    """(all three goals met against the baselines, hit deficit to consistent hashing)."""
    hit, mm, p99 = res[name]
    ch = res["consistent-hash"][0]
    best = min(res[b][2] for b in ("round-robin", "least-outstanding", "consistent-hash"))
    return hit >= ch - 0.01 and mm <= BALANCE_TARGET and p99 <= best, ch - hit


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(_default_trace()))
    ap.add_argument("--tune", choices=("A", "B"), default="B", help="the trace the variant is chosen on")
    args = ap.parse_args(argv)
    trace = Path(args.trace)
    if not trace.is_file():
        print(f"Mooncake trace not found: {trace} (pass --trace PATH)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    physical = cache_blocks(load_catalog().model("llama-3-8b"), 80_000_000_000)
    cells = [(n, cap) for cap in (ISSUE_BLOCKS, physical) for n in (4, 8, 16)]
    score: dict[str, list[tuple[bool, float]]] = {}
    print(f"choosing on trace {args.tune}: variant, per cell (replicas/capacity): goals met, hit deficit to CH")
    for n, cap in cells:
        res = cell(trace, args.tune, n, cap, [*BASELINES, *variants(cap)])
        for name in res:
            if name in ("round-robin", "least-outstanding", "consistent-hash"):
                continue
            g = goals(name, res)
            score.setdefault(name, []).append(g)
            print(f"  {n:2d}/{cap:4d} {name:36s} hit {res[name][0]:6.2%} (CH {res['consistent-hash'][0]:6.2%}) "
                  f"max/mean {res[name][1]:.3f} p99 {res[name][2]:6.2f}  {'Y' if g[0] else 'n'}")
    chosen = max(score, key=lambda k: (sum(g for g, _ in score[k]), -max(d for _, d in score[k])))
    other = "A" if args.tune == "B" else "B"
    print(f"\nchosen on {args.tune}: {chosen} ({sum(g for g, _ in score[chosen])}/{len(cells)} cells); "
          f"reported on {other}:")
    idx = next(k for k, mk in enumerate(variants(ISSUE_BLOCKS)) if mk().name == chosen)
    met = 0
    for n, cap in cells:
        res = cell(trace, other, n, cap, [*BASELINES, variants(cap)[idx]])
        g = goals(chosen, res)
        met += g[0]
        print(f"  {n:2d}/{cap:4d} hit {res[chosen][0]:6.2%} (CH {res['consistent-hash'][0]:6.2%}) "
              f"max/mean {res[chosen][1]:.3f} p99 {res[chosen][2]:6.2f} (best other "
              f"{min(res[b][2] for b in ('round-robin', 'least-outstanding', 'consistent-hash')):6.2f})  "
              f"{'Y' if g[0] else 'n'}")
    print(f"all three goals on {other}: {met}/{len(cells)} cells; {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
