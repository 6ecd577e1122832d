"""The cache-aware router with bounds that adapt to the load it sees (no per-trace constant).

:class:`CacheAware` (``_routers``) bounds prefix affinity with three timed constants
(``load_slack``, ``share_slack``, ``share_window``) tuned on one trace; on traces it had not seen
they diverted conversations away from their cache.  :class:`AdaptiveCacheAware` keeps one number,
the balance goal itself (max/mean requests per replica, default 1.05), and measures the rest.

For each request, with ``n`` replicas that can take it now:

1. **Count cap** (consistent hashing with bounded loads, Mirrokni, Thorup and Zadimoghaddam,
   SODA 2018, with the cap factor ``c`` = the balance goal): a replica may take the request only if
   its count of requests routed to it (since it joined) stays at most
   ``max(ceil((T + 1) / n), floor(c x (T + 1) / n))``, ``T`` the replicas' total.  The first term
   keeps the least-counted replica always eligible; past ``n / (c - 1)`` requests the second
   term rules, so max/mean stays at most ``c`` over every run the router has routed.  A replica
   seen for the first time starts at the mean count of the others (neither flooded to catch up
   nor starved).
2. **Free placement** candidate: among eligible replicas whose outstanding requests and queue
   (``ReplicaLoad.waiting``, when every replica reports it) are at most the mean over all
   replicas, the one with the fewest routed requests (then fewest outstanding, then lowest id).
3. **Cache affinity**: among eligible replicas, the one whose tracked prefix matches the most
   leading blocks (ties: fewest outstanding, then lowest id).  The request goes there if it
   matches more than ``min_match_blocks`` (default 1: one block every request shares is no reason
   to go anywhere) *and* more than the free-placement candidate; otherwise placing it freely costs
   no cache, and the candidate takes it.  So a continuation stays with its cache whatever the
   replica's momentary load (it is moved only when the count cap says so), while a new
   conversation, even behind a long system prompt that every replica already holds, is placed
   freely: free placements keep counts level (continuations then rarely meet the cap) and steer
   around queues.

A replica that was away (a breaker open, a health check failing) and comes back keeps its count,
so it is behind: free placements prefer it until it catches up, but only while its outstanding
requests and queue stay at or under the mean, so the catching up is paced by its own load.

Latency is protected by the free placements (they avoid a replica with a queue) and by the cap; no
timed load limit moves a conversation that has its cache somewhere.  Every threshold is relative to
the current loads (mean outstanding, mean queue, mean count), so nothing is fitted to a trace's
rate or shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._cache import PrefixCache
from ._errors import InvalidRequestError
from ._routers import ReplicaLoad, _check

__all__ = ["AdaptiveCacheAware"]


class AdaptiveCacheAware:
    """Longest tracked prefix under a count cap derived from the balance goal (see the module doc).

    ``capacity_blocks`` sizes the router's view of each replica's prefix cache (the engine's
    capacity, mirrored as :class:`CacheAware` does); ``balance_target`` is the max/mean requests
    per replica the router guarantees (> 1).
    """

    name = "cache-aware-adaptive"

    def __init__(self, capacity_blocks: int | None, *, balance_target: float = 1.05, min_match_blocks: int = 1) -> None:
        if capacity_blocks is not None and capacity_blocks < 0:
            raise InvalidRequestError(f"capacity must be >= 0 blocks, got {capacity_blocks}", field="capacity_blocks")
        if not math.isfinite(balance_target) or balance_target <= 1.0:
            raise InvalidRequestError(f"balance_target must be > 1, got {balance_target}", field="balance_target")
        if min_match_blocks < 0:
            raise InvalidRequestError(
                f"min_match_blocks must be >= 0, got {min_match_blocks}", field="min_match_blocks"
            )
        self.capacity_blocks = capacity_blocks
        self.balance_target = balance_target
        self.min_match_blocks = min_match_blocks
        self._caches: dict[int, PrefixCache] = {}
        self._counts: dict[int, int] = {}

    def tracked(self, replica_id: int) -> PrefixCache:
        """The router's view of one replica's prefix cache."""
        cache = self._caches.get(replica_id)
        if cache is None:
            cache = self._caches[replica_id] = PrefixCache(self.capacity_blocks)
        return cache

    def count(self, replica_id: int) -> int:
        """Requests routed to a replica since it joined (its starting offset included)."""
        return self._counts.get(replica_id, 0)

    def cap(self, total: int, replicas: int) -> int:
        """The most requests a replica may hold after taking this one, ``total`` routed so far."""
        if replicas < 1:
            raise InvalidRequestError(f"need >= 1 replica, got {replicas}", field="replicas")
        return max(math.ceil((total + 1) / replicas), math.floor(self.balance_target * (total + 1) / replicas))

    def _join(self, replicas: Sequence[ReplicaLoad]) -> None:
        new = [r.replica_id for r in replicas if r.replica_id not in self._counts]
        if not new:
            return
        known = [self._counts[r.replica_id] for r in replicas if r.replica_id in self._counts]
        start = sum(known) // len(known) if known else 0
        for rid in new:
            self._counts[rid] = start

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        _check(replicas)
        self._join(replicas)
        n = len(replicas)
        counts = self._counts
        cap = self.cap(sum(counts[r.replica_id] for r in replicas), n)
        eligible = [r for r in replicas if counts[r.replica_id] + 1 <= cap]  # never empty: see cap()
        match = {r.replica_id: self.tracked(r.replica_id).match(hash_ids) for r in eligible}
        best = min(eligible, key=lambda r: (-match[r.replica_id], r.outstanding, r.replica_id))
        placed = self._place(eligible, replicas)
        # a continuation stays with its cache; a request the free placement loses nothing on is placed
        affine = match[best.replica_id] > max(self.min_match_blocks, match[placed])
        rid = best.replica_id if affine else placed
        self.tracked(rid).use(hash_ids)
        counts[rid] += 1
        return rid

    def _place(self, eligible: Sequence[ReplicaLoad], replicas: Sequence[ReplicaLoad]) -> int:
        """Free placement: fewest routed among the eligible replicas at or under the mean load."""
        n = len(replicas)
        mean_out = sum(r.outstanding for r in replicas) / n
        waits = [r.waiting for r in replicas]
        if all(w is not None for w in waits):
            mean_wait = sum(w for w in waits if w is not None) / n
            calm = [r for r in eligible if r.waiting is not None and r.waiting <= mean_wait]
        else:
            calm = list(eligible)
        pool = [r for r in calm if r.outstanding <= mean_out] or calm or list(eligible)
        counts = self._counts
        return min(pool, key=lambda r: (counts[r.replica_id], r.outstanding, r.replica_id)).replica_id

    def forget(self, replica_id: int) -> None:
        self._caches.pop(replica_id, None)
        self._counts.pop(replica_id, None)
