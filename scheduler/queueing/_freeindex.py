"""Hosts by fully free devices, per pool: the queued start's fewest-free choice without a scan.

:class:`FreeIndex` mirrors the engine's ``host_free`` counts (``[host, pool]``: fully free usable
devices) as one min-heap of host indexes per (pool, count).  Each writer of ``host_free`` says
which (host, pool) moved (:meth:`FreeIndex.moved`); an entry is valid while the host still has
that count (checked against ``host_free`` itself when it reaches the top, and dropped when not),
so a heap's valid top is the lowest-index host with exactly that count.  Then the host with the
fewest free devices that still holds ``n`` (lowest index on ties) is the top of the first
non-empty heap from ``n`` up (a gang chunk's most-free host: from the largest count down): what
``QueuePlacer._decide`` found with a pass over every host's count.
"""

from __future__ import annotations

import heapq

import numpy as np
import numpy.typing as npt

__all__ = ["FreeIndex"]


class FreeIndex:
    """See the module docstring.  ``host_free`` is the live array (read, never written here)."""

    __slots__ = ("_free", "_heaps", "_limit", "max_free")

    def __init__(self, host_free: npt.NDArray[np.int64], max_free: int) -> None:
        self._free = host_free
        self.max_free = int(max_free)
        n_hosts, n_pools = host_free.shape
        self._limit = 4 * n_hosts + 64  # a heap past this many entries is rebuilt from the counts
        self._heaps: list[list[list[int]]] = [[[] for _ in range(self.max_free + 1)] for _ in range(n_pools)]
        for p in range(n_pools):
            self._rebuild(p)

    def _rebuild(self, p: int) -> None:
        col = self._free[:, p]
        for c in range(self.max_free + 1):
            self._heaps[p][c] = np.nonzero(col == c)[0].tolist()  # ascending: already a heap

    def moved(self, host: int, p: int) -> None:
        """``host_free[host, p]`` changed (to any value): file the host under its new count."""
        heap = self._heaps[p][int(self._free[host, p])]
        heapq.heappush(heap, host)
        if len(heap) > self._limit:
            self._rebuild(p)

    def first(self, p: int, n: int, *, most: bool = False) -> int | None:
        """The host with the fewest (``most``: the most) fully free devices of pool ``p`` among
        those with at least ``n``, lowest index on ties; ``None`` when no host has ``n``."""
        free, heaps = self._free, self._heaps[p]
        counts = range(self.max_free, max(n, 0) - 1, -1) if most else range(max(n, 0), self.max_free + 1)
        for c in counts:
            heap = heaps[c]
            while heap and free[heap[0], p] != c:
                heapq.heappop(heap)  # stale: the host's count moved since it was filed here
            if heap:
                return heap[0]
        return None
