"""The routing policies: scheduler.serving's four routers, behind the live router.

The router objects are :mod:`accel.scheduler.serving`'s own (their decisions are not changed here);
this module names them, feeds them the live replicas as :class:`ReplicaLoad` (the replica's
outstanding requests, :meth:`Backend.outstanding`, and its queue, the engine's scraped waiting
requests when every replica has reported one) and, for ``cache-aware``, lets an engine's KV
events write the replica view the router matches prompts against (:class:`EngineFedCacheAware`:
the same router with its per-replica caches made :class:`EventCache`, which vLLM's BlockStored /
BlockRemoved / AllBlocksCleared update between requests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence

from accel.scheduler.serving import (
    AdaptiveCacheAware,
    CacheAware,
    ConsistentHash,
    LeastOutstanding,
    PrefixCache,
    ReplicaLoad,
    RoundRobin,
    Router,
)

from ._backends import Backend, BackendSet
from ._errors import RouterError
from ._kvevents import EventCache

__all__ = ["POLICIES", "EngineFedCacheAware", "Picker", "make_policy"]

POLICIES = ("round-robin", "least-outstanding", "consistent-hash", "cache-aware")


class EngineFedCacheAware(AdaptiveCacheAware):
    """:class:`AdaptiveCacheAware` (the ``cache-aware`` policy: bounds from the balance goal, no
    constant tuned on a trace) whose per-replica caches accept the engine's KV events too."""

    def tracked(self, replica_id: int) -> PrefixCache:
        cache = self._caches.get(replica_id)
        if cache is None:
            cache = self._caches[replica_id] = EventCache(self.capacity_blocks)
        return cache

    def event_cache(self, replica_id: int) -> EventCache:
        cache = self.tracked(replica_id)
        assert isinstance(cache, EventCache)
        return cache


def make_policy(name: str, *, capacity_blocks: int | None) -> Router:
    """The router of a policy name (:data:`POLICIES`); ``capacity_blocks``: the cache-aware view of
    one replica's cache, in the router's blocks."""
    if name == "round-robin":
        return RoundRobin()
    if name == "least-outstanding":
        return LeastOutstanding()
    if name == "consistent-hash":
        return ConsistentHash()
    if name == "cache-aware":
        return EngineFedCacheAware(capacity_blocks)
    raise RouterError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")


def _waiting(backend: Backend) -> int | None:
    """The engine's queue (waiting requests) from its last scrape; ``None`` when not reported."""
    load = backend.load
    return None if load is None or load.waiting is None else round(load.waiting)


class Picker:
    """Chooses a replica for a prompt among those available now (healthy, breaker allowing,
    serving whole requests (role "both"), not already tried for this request).  Thread-safe: KV-event threads change
    the cache views under the same lock."""

    def __init__(self, policy: Router, backends: Sequence[Backend]) -> None:
        self.policy = policy
        #: The replicas; a :class:`BackendSet` may change while requests are routed.
        self.backends = backends if isinstance(backends, BackendSet) else BackendSet(backends)
        self.lock = threading.Lock()

    def blocks_needed(self, most: int) -> int:
        """How many of a prompt's leading blocks a routing decision can read (at most ``most``): all
        of them for the cache-aware views and a replica fed by KV events (matched against their
        caches), the ring's key for ``consistent-hash`` (its first ``prefix_blocks``), none for
        ``round-robin`` and ``least-outstanding``.  Hashing a block costs a few microseconds, so a
        long prompt routed by a policy that never reads its blocks was up to a millisecond of work
        for nothing (:data:`~accel.router._prefix.DEFAULT_MAX_BLOCKS` blocks)."""
        policy = self.policy
        if isinstance(policy, (CacheAware, AdaptiveCacheAware)):
            return most
        if any(b.block_map is not None for b in self.backends):
            return most
        if isinstance(policy, ConsistentHash):
            return min(most, policy.prefix_blocks)
        if isinstance(policy, (RoundRobin, LeastOutstanding)):
            return 0
        return most  # a policy of another kind: what it reads is not known

    def forget(self, backend: Backend) -> None:
        """A replica left the set: the policy drops what it kept of it (its cache view)."""
        with self.lock:
            self.policy.forget(backend.id)

    def candidates(self, exclude: Collection[int] = (), now: float | None = None) -> list[Backend]:
        now = time.monotonic() if now is None else now
        return [b for b in self.backends if b.id not in exclude and b.role == "both" and b.available(now)]

    def pick(self, blocks: Sequence[int], exclude: Collection[int] = ()) -> tuple[Backend, int] | None:
        """The replica chosen and the prompt's leading blocks in its cache view before this request
        (the cache-aware router's view, or the KV events'; 0 without either)."""
        now = time.monotonic()
        cands = self.candidates(exclude, now)
        if not cands:
            return None
        loads = [ReplicaLoad(b.id, b.outstanding(), _waiting(b)) for b in cands]
        policy = self.policy
        with self.lock:
            if isinstance(policy, (CacheAware, AdaptiveCacheAware)):
                matched = {b.id: policy.tracked(b.id).match(blocks) for b in cands}
            else:
                matched = {b.id: b.block_map.cache.match(blocks) for b in cands if b.block_map is not None}
            rid = policy.route(blocks, loads)
        chosen = self.backends.by_id(rid)
        if chosen is None:  # it left the set while the policy chose (another thread's sync)
            chosen = next(b for b in cands if b.id == rid)
        chosen.breaker.begin(now)
        return chosen, matched.get(rid, 0)
