"""Request routers: one protocol, four routing rules.

A router sees a request's prompt as its block hashes and the replicas that can take it now,
each with its load (requests routed to it and not finished), and names one replica.  Routers
keep their own state keyed by replica id, so the replica set may change between calls (a
replica added by the autoscaler, one draining away): a replica absent from the list is never
chosen, and :meth:`Router.forget` drops what a router tracked for a replica that left.

- :class:`RoundRobin`: the next replica in id order, whatever the prompt.
- :class:`LeastOutstanding`: the replica with the fewest outstanding requests (ties: lowest id).
- :class:`ConsistentHash`: a hash ring with virtual nodes over the prompt's first
  ``prefix_blocks`` block hashes (default 2: in the Mooncake trace the first block is a system
  prompt shared by nearly every request, so one block would send almost all traffic to one
  replica; two blocks identify the conversation).  Adding a replica moves only the keys the new
  replica's points take over.
- :class:`CacheAware`: see its docstring (timed bounds, tuned on one trace); the adaptive one,
  whose only number is the balance goal, is ``_adaptive.AdaptiveCacheAware``.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._cache import PrefixCache
from ._errors import InvalidRequestError

__all__ = ["CacheAware", "ConsistentHash", "LeastOutstanding", "ReplicaLoad", "RoundRobin", "Router"]


@dataclass(frozen=True)
class ReplicaLoad:
    """What a router sees of one replica that can take a request now."""

    replica_id: int
    #: Requests routed to the replica and not finished (queued or running).
    outstanding: int
    #: Of those, requests not yet admitted to the running batch (the engine's queue); ``None``
    #: when the replica does not report it.
    waiting: int | None = None


@runtime_checkable
class Router(Protocol):
    """Chooses a replica for each request.  ``name`` labels results."""

    name: str

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        """Return the ``replica_id`` of one of ``replicas`` for a prompt of ``hash_ids``."""
        ...

    def forget(self, replica_id: int) -> None:
        """Drop any state kept for a replica that left the set."""
        ...


def _check(replicas: Sequence[ReplicaLoad]) -> None:
    if not replicas:
        raise InvalidRequestError("no replica can take the request (empty replica set)", field="replicas")


class RoundRobin:
    """Cycles over the replicas in id order, ignoring prompt and load."""

    name = "round-robin"

    def __init__(self) -> None:
        self._next = 0

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        _check(replicas)
        ids = sorted(r.replica_id for r in replicas)
        rid = ids[self._next % len(ids)]
        self._next += 1
        return rid

    def forget(self, replica_id: int) -> None:
        return None


class LeastOutstanding:
    """The replica with the fewest outstanding requests; ties go to the lowest id."""

    name = "least-outstanding"

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        _check(replicas)
        return min(replicas, key=lambda r: (r.outstanding, r.replica_id)).replica_id

    def forget(self, replica_id: int) -> None:
        return None


def _h64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class ConsistentHash:
    """Hash ring with ``vnodes`` virtual nodes per replica, keyed on the first ``prefix_blocks`` blocks.

    The key is a 64-bit BLAKE2b of the leading block hashes; a replica's points are the hashes of
    ``"<replica_id>#<i>"``.  The ring is rebuilt only when the set of replica ids changes.
    """

    name = "consistent-hash"

    def __init__(self, *, vnodes: int = 100, prefix_blocks: int = 2) -> None:
        if vnodes < 1:
            raise InvalidRequestError(f"vnodes must be >= 1, got {vnodes}", field="vnodes")
        if prefix_blocks < 1:
            raise InvalidRequestError(f"prefix_blocks must be >= 1, got {prefix_blocks}", field="prefix_blocks")
        self.vnodes = vnodes
        self.prefix_blocks = prefix_blocks
        self._ids: frozenset[int] = frozenset()
        self._points: list[int] = []
        self._owners: list[int] = []

    def _ring(self, ids: frozenset[int]) -> None:
        pts = sorted((_h64(f"{rid}#{i}".encode()), rid) for rid in ids for i in range(self.vnodes))
        self._points = [p for p, _ in pts]
        self._owners = [o for _, o in pts]
        self._ids = ids

    def key(self, hash_ids: Sequence[int]) -> int:
        """The ring position of a prompt (its first ``prefix_blocks`` block hashes)."""
        head = hash_ids[: self.prefix_blocks]
        return _h64(b"".join(int(h).to_bytes(8, "big", signed=True) for h in head))

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        _check(replicas)
        ids = frozenset(r.replica_id for r in replicas)
        if ids != self._ids:
            self._ring(ids)
        i = bisect.bisect_right(self._points, self.key(hash_ids))
        return self._owners[i % len(self._owners)]

    def forget(self, replica_id: int) -> None:
        return None  # the ring follows the replica set passed to route()


class CacheAware:
    """Longest tracked prefix among replicas under two load bounds; otherwise least loaded.

    The router keeps, per replica, a :class:`PrefixCache` of ``capacity_blocks`` built from its
    own routing history (the block hashes of the prompts it sent there), the engine's capacity
    and eviction mirrored.  For each request it computes each replica's matched leading blocks
    and two bounds, each of the form ``ceil((1 + slack) x (total + 1) / replicas)`` (consistent
    hashing with bounded loads, Mirrokni, Thorup and Zadimoghaddam, SODA 2018):

    - ``load_slack`` on *outstanding* requests (queued or running now): protects latency when
      one conversation's replica is busy;
    - ``share_slack`` on the requests routed to each replica among the last
      ``share_window x replicas`` routed (``None``: since the start): holds the request
      imbalance (max/mean requests per replica) at about ``1 + share_slack`` while letting the
      instantaneous load bound be loose enough for conversations to stay where their cache is.
      A window, not a total, so a replica added later is not flooded to catch up; sized per
      replica, so the slack in requests stays the same as replicas are added.

    Among replicas under both bounds it picks the longest match (ties: fewest outstanding, then
    lowest id).  When none under the bounds matches more than ``min_match_blocks`` (a new
    conversation, or only the system prompt every request shares) it picks the least loaded of
    them (fewest outstanding, then smallest share).  The least loaded replica is always under
    the load bound; if the share bound excludes every replica under it, the least loaded one is
    chosen.

    What was taken from each system's documentation:

    - SGLang's cache-aware router: a per-worker approximate prefix tree built from routed
      requests (no engine feedback), best match when load is balanced, shortest queue
      otherwise; its global imbalance switch (``balance_abs`` / ``balance_rel``) is replaced by
      per-replica bounds, so one hot replica does not turn prefix routing off for every request.
    - llm-d's ``prefix-cache-scorer``: an LRU of *block hashes* per pod with a capacity per
      server (``lruCapacityPerServer``), scored by leading blocks matched; here the capacity is
      the replica's physical one (:func:`cache_blocks`).
    - NVIDIA Dynamo's KV router: overlap counted in blocks, and load weighed in the same decision
      as the overlap (its cost ``w x prefill_blocks + decode_blocks``); here load enters as bounds
      rather than a weighted term, so the balance goal is a guarantee, not a tuning outcome.
    """

    name = "cache-aware"

    def __init__(
        self,
        capacity_blocks: int | None,
        *,
        load_slack: float = 0.5,
        share_slack: float = 0.05,
        share_window: int | None = 375,
        min_match_blocks: int = 1,
    ) -> None:
        for label, v in (("load_slack", load_slack), ("share_slack", share_slack)):
            if v < 0 or not math.isfinite(v):
                raise InvalidRequestError(f"{label} must be >= 0, got {v}", field=label)
        if capacity_blocks is not None and capacity_blocks < 0:
            raise InvalidRequestError(f"capacity must be >= 0 blocks, got {capacity_blocks}", field="capacity_blocks")
        if share_window is not None and share_window < 1:
            raise InvalidRequestError(f"share_window must be >= 1, got {share_window}", field="share_window")
        self.capacity_blocks = capacity_blocks
        self.load_slack = load_slack
        self.share_slack = share_slack
        self.share_window = share_window
        self.min_match_blocks = min_match_blocks
        self._caches: dict[int, PrefixCache] = {}
        self._recent: deque[int] = deque()
        self._shares: dict[int, int] = {}

    def tracked(self, replica_id: int) -> PrefixCache:
        """The router's view of one replica's prefix cache."""
        cache = self._caches.get(replica_id)
        if cache is None:
            cache = self._caches[replica_id] = PrefixCache(self.capacity_blocks)
        return cache

    @staticmethod
    def _cap(slack: float, total: int, n: int) -> int:
        return max(1, math.ceil((1.0 + slack) * (total + 1) / n))

    def bound(self, replicas: Sequence[ReplicaLoad]) -> int:
        """The most outstanding requests a replica may hold after taking this one."""
        return self._cap(self.load_slack, sum(r.outstanding for r in replicas), len(replicas))

    def share(self, replica_id: int) -> int:
        """Requests sent to a replica among the last ``share_window x replicas`` routed."""
        return self._shares.get(replica_id, 0)

    def route(self, hash_ids: Sequence[int], replicas: Sequence[ReplicaLoad]) -> int:
        _check(replicas)
        load_cap = self.bound(replicas)
        share_cap = self._cap(self.share_slack, sum(self.share(r.replica_id) for r in replicas), len(replicas))
        best: tuple[int, int, int] | None = None  # (-match, outstanding, id)
        least: tuple[int, int, int] | None = None  # (outstanding, share, id)
        for r in replicas:
            sh = self.share(r.replica_id)
            if r.outstanding + 1 > load_cap or sh + 1 > share_cap:
                continue
            m = self.tracked(r.replica_id).match(hash_ids)
            cand = (-m, r.outstanding, r.replica_id)
            if best is None or cand < best:
                best = cand
            if least is None or (r.outstanding, sh, r.replica_id) < least:
                least = (r.outstanding, sh, r.replica_id)
        if best is None or least is None:
            rid = min(replicas, key=lambda r: (r.outstanding, r.replica_id)).replica_id
        elif -best[0] > self.min_match_blocks:
            rid = best[2]
        else:
            rid = least[2]
        self.tracked(rid).use(hash_ids)
        self._recent.append(rid)
        self._shares[rid] = self._shares.get(rid, 0) + 1
        if self.share_window is not None:
            while len(self._recent) > self.share_window * len(replicas):
                old = self._recent.popleft()
                self._shares[old] -= 1
        return rid

    def forget(self, replica_id: int) -> None:
        self._caches.pop(replica_id, None)
