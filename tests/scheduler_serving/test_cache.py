"""PrefixCache: prefix-only hits, LRU eviction, capacity."""

from __future__ import annotations

import pytest

from accel.scheduler.serving import InvalidRequestError, PrefixCache


def test_hit_is_the_leading_run_only() -> None:
    c = PrefixCache(None)
    assert c.use([1, 2, 3]) == 0
    assert c.use([1, 2, 3, 4]) == 3
    assert c.match([1, 9, 3]) == 1  # block 3 is cached but not behind 1, 9
    assert c.match([9, 1, 2]) == 0
    assert c.match([]) == 0
    assert len(c) == 4


def test_lru_evicts_least_recent_and_use_refreshes() -> None:
    c = PrefixCache(3)
    c.use([1, 2])
    c.use([3])
    c.use([1])  # 1 becomes most recent; order now 2, 3, 1
    c.use([4])  # evicts 2
    assert 2 not in c and {1, 3, 4} <= {b for b in (1, 3, 4) if b in c}
    assert len(c) == 3
    assert c.match([1, 2]) == 1


def test_match_does_not_change_recency() -> None:
    c = PrefixCache(2)
    c.use([1])
    c.use([2])
    assert c.match([1]) == 1
    c.use([3])  # evicts 1 (match did not refresh it)
    assert 1 not in c and 2 in c and 3 in c


def test_capacity_bounds_a_long_prompt_and_zero_capacity() -> None:
    c = PrefixCache(4)
    c.use(list(range(10)))
    assert len(c) == 4
    assert c.match(list(range(10))) == 0  # the leading blocks were evicted first
    z = PrefixCache(0)
    assert z.use([1, 2]) == 0 and len(z) == 0
    with pytest.raises(InvalidRequestError):
        PrefixCache(-1)
