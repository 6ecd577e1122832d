"""A replica's KV prefix cache: bounded in blocks, LRU eviction, prefix-only hits.

A prompt is its list of block hashes (``hash_ids``), chained as in the Mooncake trace and
vLLM's automatic prefix caching: block *i*'s hash covers blocks 0..i, so a block can be reused
only behind the same leading blocks.  A request's hit is therefore the longest run of *leading*
blocks present, never a block in the middle.  Using a prompt touches all of its blocks in
order (the first becomes least recent of them) and inserts the missing ones; past capacity the
least recently used blocks are evicted.  (A real engine frees a finished request's blocks tail
first; the in-order touch is the issue's measurement, kept so its figures reproduce.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ._errors import InvalidRequestError

__all__ = ["PrefixCache"]


class PrefixCache:
    """LRU set of block hashes holding at most ``capacity_blocks`` (``None``: unbounded)."""

    __slots__ = ("_blocks", "capacity_blocks")

    def __init__(self, capacity_blocks: int | None) -> None:
        if capacity_blocks is not None and capacity_blocks < 0:
            raise InvalidRequestError(f"capacity must be >= 0 blocks, got {capacity_blocks}", field="capacity_blocks")
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block: object) -> bool:
        return block in self._blocks

    def match(self, hash_ids: Sequence[int]) -> int:
        """Leading blocks of ``hash_ids`` present now (no change to recency)."""
        blocks = self._blocks
        n = 0
        for h in hash_ids:
            if h not in blocks:
                break
            n += 1
        return n

    def use(self, hash_ids: Sequence[int]) -> int:
        """Serve a prompt: return its prefix hit in blocks, then touch/insert all its blocks."""
        hit = self.match(hash_ids)
        blocks = self._blocks
        move = blocks.move_to_end
        for h in hash_ids:
            if h in blocks:
                move(h)
            else:
                blocks[h] = None
        cap = self.capacity_blocks
        if cap is not None:
            pop = blocks.popitem
            while len(blocks) > cap:
                pop(last=False)
        return hit

    def clear(self) -> None:
        self._blocks.clear()
