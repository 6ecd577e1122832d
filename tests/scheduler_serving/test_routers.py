"""Each router's rule, consistent hashing's stability, the cache-aware bounds."""

from __future__ import annotations

import pytest

from accel.scheduler.serving import (
    CacheAware,
    ConsistentHash,
    InvalidRequestError,
    LeastOutstanding,
    ReplicaLoad,
    RoundRobin,
    Router,
)


def loads(*outstanding: int) -> list[ReplicaLoad]:
    return [ReplicaLoad(i, o) for i, o in enumerate(outstanding)]


def test_every_router_satisfies_the_protocol_and_refuses_an_empty_set() -> None:
    for r in (RoundRobin(), LeastOutstanding(), ConsistentHash(), CacheAware(10)):
        assert isinstance(r, Router)
        with pytest.raises(InvalidRequestError) as e:
            r.route([1], [])
        assert e.value.field == "replicas"


def test_round_robin_cycles_in_id_order_over_the_current_set() -> None:
    r = RoundRobin()
    reps = [ReplicaLoad(5, 0), ReplicaLoad(2, 9), ReplicaLoad(7, 0)]
    assert [r.route([], reps) for _ in range(4)] == [2, 5, 7, 2]


def test_least_outstanding_picks_fewest_then_lowest_id() -> None:
    r = LeastOutstanding()
    assert r.route([1], loads(3, 1, 1, 2)) == 1
    assert r.route([1], [ReplicaLoad(4, 0), ReplicaLoad(3, 0)]) == 3


def test_consistent_hash_keys_on_the_first_blocks() -> None:
    ch = ConsistentHash(prefix_blocks=2)
    reps = loads(0, 0, 0, 0)
    a = ch.route([0, 11, 12, 13], reps)
    assert ch.route([0, 11, 99], reps) == a  # same two leading blocks, same replica
    assert ch.route([0, 11, 12, 13], loads(50, 50, 50, 50)) == a  # load is ignored
    for bad in ({"vnodes": 0}, {"prefix_blocks": 0}):
        with pytest.raises(InvalidRequestError):
            ConsistentHash(**bad)


def test_consistent_hash_moves_only_keys_to_a_new_replica() -> None:
    ch = ConsistentHash(vnodes=100)
    keys = [[0, k] for k in range(2000)]
    before = [ch.route(k, loads(0, 0, 0, 0)) for k in keys]
    after = [ch.route(k, loads(0, 0, 0, 0, 0)) for k in keys]
    moved = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert all(a == 4 for _, a in moved)  # every moved key went to the new replica
    assert 0.1 < len(moved) / len(keys) < 0.3  # about 1/5 of the keys
    # removing it again restores the original map exactly
    assert [ch.route(k, loads(0, 0, 0, 0)) for k in keys] == before


def test_cache_aware_follows_the_longest_tracked_prefix() -> None:
    ca = CacheAware(100, load_slack=1.0, share_slack=10.0)
    first = ca.route([0, 1, 2, 3], loads(0, 0, 0))
    assert first == 0  # no match: least loaded, lowest id
    # the same conversation returns to replica 0 even when it is a little busier
    assert ca.route([0, 1, 2, 3, 4], loads(1, 0, 0)) == 0
    # a new conversation (only the shared block 0 matches) goes to the least loaded
    assert ca.route([0, 50, 51], loads(2, 0, 1)) == 1
    assert ca.tracked(0).match([0, 1, 2, 3, 4]) == 5


def test_cache_aware_respects_the_load_bound() -> None:
    ca = CacheAware(100, load_slack=0.0, share_slack=10.0)
    ca.route([0, 1, 2], loads(0, 0))
    # replica 0 holds the prefix but is past ceil((total+1)/n) = ceil(5/2) = 3 if it takes one more
    assert ca.bound(loads(3, 1)) == 3
    assert ca.route([0, 1, 2, 3], loads(3, 1)) == 1


def test_cache_aware_share_bound_holds_imbalance() -> None:
    ca = CacheAware(1000, load_slack=100.0, share_slack=0.05, share_window=None)
    counts = [0, 0, 0, 0]
    for i in range(400):
        rid = ca.route([0, 1, 2, 3], loads(0, 0, 0, 0))  # everyone wants replica 0's prefix
        counts[rid] += 1
        assert max(counts) <= -(-(1.05 * (i + 1)) // 4) + 1
    assert max(counts) / (sum(counts) / 4) <= 1.05


def test_cache_aware_forget_drops_tracking_and_validates() -> None:
    ca = CacheAware(10)
    ca.route([0, 1], loads(0))
    assert ca.tracked(0).match([0, 1]) == 2
    ca.forget(0)
    assert ca.tracked(0).match([0, 1]) == 0
    for bad in ({"load_slack": -1.0}, {"share_slack": float("nan")}, {"share_window": 0}):
        with pytest.raises(InvalidRequestError):
            CacheAware(10, **bad)  # type: ignore[arg-type]


def test_cache_aware_share_window_is_sized_per_replica() -> None:
    ca = CacheAware(10, share_window=5)
    for _ in range(30):
        ca.route([0], loads(0, 0))
    assert sum(ca.share(i) for i in range(2)) == 10  # 5 x 2 replicas
    for _ in range(30):
        ca.route([0], loads(0, 0, 0, 0))
    assert sum(ca.share(i) for i in range(4)) == 20  # the window grew with the replica set
