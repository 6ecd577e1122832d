"""The live cache-aware policy is the adaptive router, and the engines' scraped queues reach it."""

from __future__ import annotations

from accel.router import Backend, EngineFedCacheAware, EngineLoad, make_policy
from accel.router._policy import Picker
from accel.scheduler.serving import AdaptiveCacheAware


def test_cache_aware_is_the_adaptive_router_fed_by_kv_events() -> None:
    policy = make_policy("cache-aware", capacity_blocks=64)
    assert isinstance(policy, EngineFedCacheAware) and isinstance(policy, AdaptiveCacheAware)
    assert policy.balance_target == 1.05


def test_a_scraped_queue_steers_a_new_conversation_and_a_missing_one_is_not_guessed() -> None:
    reps = [Backend(0, "http://a"), Backend(1, "http://b"), Backend(2, "http://c")]
    # replica a holds the fewest requests but two of them wait in its queue
    reps[0].load = EngineLoad("vllm", running=0.0, waiting=2.0, kv_usage=0.9)
    reps[1].load = EngineLoad("vllm", running=3.0, waiting=0.0, kv_usage=0.5)
    reps[2].load = EngineLoad("vllm", running=4.0, waiting=0.0, kv_usage=0.6)
    picker = Picker(make_policy("cache-aware", capacity_blocks=64), reps)
    picked = picker.pick([11, 12, 13])
    assert picked is not None and picked[0].url == "http://b"  # no queue, load at most the mean
    # one replica without a queue report (its 3 requests are the router's own): queues are not
    # compared, so a, under the mean outstanding and least routed, takes the next new conversation
    reps[1].load = None
    reps[1].in_flight = 3
    fresh = Picker(make_policy("cache-aware", capacity_blocks=64), reps)
    picked = fresh.pick([21, 22, 23])
    assert picked is not None and picked[0].url == "http://a"


def test_blocks_needed_is_what_the_policy_reads() -> None:
    from accel.router import BlockMap, EventCache

    def picker(name: str) -> Picker:
        return Picker(make_policy(name, capacity_blocks=100), [Backend(0, "http://a"), Backend(1, "http://b")])

    assert picker("cache-aware").blocks_needed(256) == 256
    assert picker("consistent-hash").blocks_needed(256) == 2  # the ring's key: the first two blocks
    assert picker("consistent-hash").blocks_needed(1) == 1
    assert picker("round-robin").blocks_needed(256) == 0
    assert picker("least-outstanding").blocks_needed(256) == 0
    # a replica fed by KV events is matched against its cache view whatever the policy
    fed = picker("round-robin")
    fed.backends[1].block_map = BlockMap(EventCache(100), 16, "m")
    assert fed.blocks_needed(256) == 256
