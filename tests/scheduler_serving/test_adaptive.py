"""The adaptive cache-aware router: its count cap, cache affinity, free placement, replica changes."""

from __future__ import annotations

import random

import pytest

from accel.scheduler.serving import (
    AdaptiveCacheAware,
    InvalidRequestError,
    ReplicaLoad,
    ReplicaSpec,
    Router,
    ServingRequest,
    load_catalog,
    simulate,
)


def loads(*outstanding: int, waiting: tuple[int, ...] | None = None) -> list[ReplicaLoad]:
    w = waiting if waiting is not None else (None,) * len(outstanding)
    return [ReplicaLoad(i, o, q) for i, (o, q) in enumerate(zip(outstanding, w, strict=True))]


def test_it_is_a_router_and_validates() -> None:
    r = AdaptiveCacheAware(10)
    assert isinstance(r, Router)
    with pytest.raises(InvalidRequestError) as e:
        r.route([1], [])
    assert e.value.field == "replicas"
    for bad in ({"balance_target": 1.0}, {"balance_target": float("inf")}, {"min_match_blocks": -1}):
        with pytest.raises(InvalidRequestError):
            AdaptiveCacheAware(10, **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        AdaptiveCacheAware(-1)


def test_the_cap_is_the_balance_goal_once_counts_are_large() -> None:
    r = AdaptiveCacheAware(10, balance_target=1.05)
    assert r.cap(0, 4) == 1  # the first request: ceil(1/4)
    assert r.cap(399, 4) == 105  # floor(1.05 x 400 / 4)
    assert r.cap(7, 8) == 1  # small totals: ceil((T+1)/n) keeps the least-counted replica eligible


def test_a_continuation_stays_with_its_cache_when_loads_are_balanced() -> None:
    r = AdaptiveCacheAware(100)
    home = r.route([0, 1, 2, 3], loads(0, 0, 0))
    for turn in range(4, 10):
        # other conversations keep the counts level; the continuation returns home even when busier
        for k in range(2):
            r.route([0, 100 * turn + k], loads(1, 1, 1))
        assert r.route(list(range(turn + 1)), loads(*[3 if i == home else 1 for i in range(3)])) == home
    assert r.tracked(home).match(list(range(10))) == 10


def test_a_new_conversation_goes_to_the_fewest_routed_at_or_under_mean_load_and_queue() -> None:
    r = AdaptiveCacheAware(100)
    # replica 0 got two requests, 1 one, 2 none (all new conversations: one shared block)
    assert [r.route([0, 10 + i], loads(0, 0, 0)) for i in range(3)] == [0, 1, 2]
    r.route([0, 20], loads(0, 0, 0))  # counts now 2, 1, 1
    # replica 1 is the least routed but has a queue above the mean: replica 2 takes it
    assert r.route([0, 30], loads(1, 1, 1, waiting=(0, 3, 0))) == 2
    # without queue reports, outstanding alone: replica 2 is over the mean, replica 1 is not
    assert r.route([0, 31], loads(1, 0, 5)) == 1


def test_the_count_never_exceeds_its_cap_whoever_is_preferred() -> None:
    rng = random.Random(7)
    r = AdaptiveCacheAware(1000, balance_target=1.05)
    counts = [0] * 6
    for i in range(3000):
        # three quarters of the traffic continues one hot conversation; the rest are new ones
        prompt = list(range(8)) if rng.random() < 0.75 else [0, 10_000 + i]
        before = sum(counts)
        cap = r.cap(before, 6)
        rid = r.route(prompt, loads(*[rng.randrange(5) for _ in range(6)]))
        counts[rid] += 1
        assert max(counts) <= cap  # the cap grows with the total, so no earlier count is over it
        assert counts == [r.count(k) for k in range(6)]
    assert max(counts) / (sum(counts) / 6) <= 1.05
    # the hot prefix was replicated on several replicas by the cap, not recomputed everywhere
    assert sum(r.tracked(k).match(list(range(8))) == 8 for k in range(6)) >= 2


def test_a_joining_replica_starts_at_the_mean_and_forget_drops_it() -> None:
    r = AdaptiveCacheAware(10)
    for i in range(40):
        r.route([0, 100 + i], loads(0, 0))
    assert r.count(0) == r.count(1) == 20
    rid = r.route([0, 999], loads(0, 0, 0))  # replica 2 joins at 20, not 0: not flooded
    assert r.count(2) == 20 + (rid == 2)
    r.forget(2)
    assert r.count(2) == 0 and r.tracked(2).match([0, 999]) == 0


def test_simulated_balance_holds_the_goal() -> None:
    # a small synthetic conversation trace through the simulator: max/mean requests <= 1.05
    rng = random.Random(3)
    reqs: list[ServingRequest] = []
    convs: list[list[int]] = []
    nxt = 1
    for i in range(800):
        if convs and rng.random() < 0.6:
            c = rng.choice(convs)
            c.extend(range(nxt, nxt + 2))
            nxt += 2
        else:
            c = [0, *range(nxt, nxt + 3)]
            nxt += 3
            convs.append(c)
        reqs.append(ServingRequest(i, i * 0.25, 512 * len(c), 20, tuple(c)))
    profile = load_catalog().profile("llama-2-70b", "h100-80gb")
    res = simulate(reqs, AdaptiveCacheAware(400), [ReplicaSpec(profile, 400)] * 4)
    assert res.complete
    assert res.imbalance() <= 1.05
    assert res.hit_ratio() > 0.3


def test_a_new_conversation_behind_a_long_shared_prompt_is_still_placed_freely() -> None:
    r = AdaptiveCacheAware(100)
    shared = list(range(8))  # a system prompt of 8 blocks that every request carries
    assert [r.route([*shared, 100 + i], loads(0, 0, 0)) for i in range(3)] == [0, 1, 2]  # the cap spreads it
    assert r.route([*shared, 100, 101], loads(0, 0, 0)) == 0  # a continuation: 9 blocks only on replica 0
    # a new conversation matches 8 blocks everywhere: replica 0 (fewest outstanding) gains nothing over
    # the free placement, which takes the least routed of those at or under the mean load
    assert r.route([*shared, 300], loads(0, 2, 1)) == 2
