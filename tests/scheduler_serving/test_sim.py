"""The request-level simulator: conservation, latency sanity, KV capacity, replica changes."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from accel.scheduler.serving import (
    CacheAware,
    ConsistentHash,
    InvalidRequestError,
    LeastOutstanding,
    Objective,
    ReplicaChange,
    ReplicaLoad,
    ReplicaSpec,
    RoundRobin,
    ServingRequest,
    load_catalog,
    load_mooncake,
    replay_hits,
    simulate,
)

PROFILE = load_catalog().profile("llama-2-70b", "h100-80gb")
_NAME = "traces/serving/mooncake_conversation_trace.jsonl"
# the shared traces sit beside the checkout (../shared), as the benchmarks expect
_BASES = (Path(__file__).resolve().parents[3] / "shared", Path("/work/shared"))
TRACE = next((b / _NAME for b in _BASES if (b / _NAME).is_file()), Path("/nonexistent") / _NAME)


def workload(n: int = 400, seed: int = 7, rate: float = 4.0) -> list[ServingRequest]:
    """Conversations that grow turn by turn (shared system block 0, then per-conversation blocks)."""
    rng = random.Random(seed)
    convs: list[list[int]] = []
    nxt = 1
    out: list[ServingRequest] = []
    t = 0.0
    for i in range(n):
        t += rng.expovariate(rate)
        if not convs or rng.random() < 0.4:
            convs.append([0])
        c = rng.choice(convs)
        c.extend(range(nxt, nxt + rng.randint(1, 4)))
        nxt += 4
        out.append(ServingRequest(i, t, len(c) * 512 - rng.randint(0, 511), rng.randint(1, 300), tuple(c)))
    return out


def spec(blocks: int = 400, **kw: float) -> ReplicaSpec:
    return ReplicaSpec(PROFILE, blocks, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("router", [RoundRobin(), LeastOutstanding(), ConsistentHash(), CacheAware(400)])
def test_conservation_latency_and_capacity(router: RoundRobin) -> None:
    reqs = workload()
    res = simulate(reqs, router, [spec()] * 3)
    assert res.complete
    assert [o.request_id for o in res.outcomes] == [r.request_id for r in reqs]  # each exactly once
    by_id = {r.request_id: r for r in reqs}
    for o in res.outcomes:
        assert o.arrival_s < o.first_token_s <= o.end_s
        assert o.ttft_s >= min(PROFILE.prefill.ms) / 1000 - 1e-12  # the fastest measured forward pass
        assert 0 <= o.cached_blocks <= o.prompt_blocks == len(by_id[o.request_id].hash_ids)
        if by_id[o.request_id].output_tokens > 1:
            assert o.tpot_s >= PROFILE.decode_step_seconds(1) - 1e-12
    assert all(0 < peak <= 400 * 512 for peak in res.peak_kv_tokens.values())
    assert sum(res.requests_per_replica().values()) == len(reqs)


def test_kv_capacity_limits_the_batch() -> None:
    # 10 blocks = 5120 tokens; each request reserves 2000 + 100 -> at most 2 run at once
    reqs = [ServingRequest(i, 0.0, 2000, 100, (100 + 4 * i, 101 + 4 * i, 102 + 4 * i, 103 + 4 * i)) for i in range(6)]
    res = simulate(reqs, RoundRobin(), [spec(10)])
    assert res.peak_kv_tokens[0] == 2 * 2100
    firsts = sorted(o.first_token_s for o in res.outcomes)
    assert firsts[2] > min(o.end_s for o in res.outcomes) - 1e-9  # the third waited for a finish


def test_prefill_skips_cached_blocks() -> None:
    a = ServingRequest(0, 0.0, 8192, 1, tuple(range(16)))
    b = ServingRequest(1, 10.0, 8192, 1, tuple(range(16)))
    res = simulate([a, b], RoundRobin(), [spec()])
    oa, ob = res.outcomes
    assert oa.cached_blocks == 0 and ob.cached_blocks == 16
    assert oa.ttft_s == pytest.approx(PROFILE.prefill_seconds(8192))
    assert ob.ttft_s == pytest.approx(PROFILE.prefill_seconds(0))
    assert res.hit_ratio() == pytest.approx(0.5)


def test_decode_time_grows_with_the_batch() -> None:
    one = simulate([ServingRequest(0, 0.0, 512, 101, (1,))], RoundRobin(), [spec()])
    # 16 x 512 tokens fill one prefill iteration (max_prefill_tokens 8192), then decode together
    many = simulate([ServingRequest(i, 0.0, 512, 101, (i + 1,)) for i in range(16)], RoundRobin(), [spec()])
    assert one.outcomes[0].tpot_s == pytest.approx(PROFILE.decode_step_seconds(1))
    assert {o.first_token_s for o in many.outcomes} == {PROFILE.prefill_seconds(16 * 512)}
    assert many.outcomes[0].tpot_s == pytest.approx(PROFILE.decode_step_seconds(16))
    # 32 need two prefills: the second interrupts the first batch's decoding
    two = simulate([ServingRequest(i, 0.0, 512, 101, (i + 1,)) for i in range(32)], RoundRobin(), [spec()])
    assert len({o.first_token_s for o in two.outcomes}) == 2
    assert two.outcomes[0].tpot_s > PROFILE.decode_step_seconds(32)


def test_deterministic() -> None:
    reqs = workload(300, seed=3)
    a = simulate(reqs, CacheAware(200), [spec(200)] * 4)
    b = simulate(reqs, CacheAware(200), [spec(200)] * 4)
    assert a.outcomes == b.outcomes


def test_added_replica_takes_requests_only_after_startup() -> None:
    reqs = workload(300, seed=5)
    add = ReplicaChange(5.0, "add", 9, ReplicaSpec(PROFILE, 400, startup_s=20.0))
    res = simulate(reqs, RoundRobin(), [spec()], changes=[add])
    assert res.complete and len(res.outcomes) == len(reqs)
    on_new = [o for o in res.outcomes if o.replica_id == 9]
    assert on_new and min(o.arrival_s for o in on_new) >= 25.0


def test_removed_replica_drains_and_hands_queued_requests_back() -> None:
    reqs = [ServingRequest(i, 0.0, 4000, 200, (10 * i + 1, 10 * i + 2)) for i in range(40)]
    res = simulate(reqs, RoundRobin(), [spec(40), spec(40)], changes=[ReplicaChange(0.5, "remove", 1)])
    assert res.complete and len(res.outcomes) == 40
    on_1 = [o for o in res.outcomes if o.replica_id == 1]
    # replica 1 finished what it had admitted by 0.5 s; everything queued there moved to replica 0
    assert on_1 and all(o.first_token_s <= 0.5 + PROFILE.prefill_seconds(8192) for o in on_1)
    assert len(on_1) < 20


def test_requests_wait_when_no_replica_is_ready_and_unserved_are_reported() -> None:
    reqs = [ServingRequest(i, float(i), 600, 5, (i + 1, i + 1000)) for i in range(5)]
    late = ReplicaChange(0.0, "add", 0, ReplicaSpec(PROFILE, 100, startup_s=10.0))
    res = simulate(reqs, RoundRobin(), [], changes=[late])
    assert res.complete and min(o.first_token_s for o in res.outcomes) > 10.0
    gone = simulate(reqs, RoundRobin(), [spec()], changes=[ReplicaChange(0.5, "remove", 0)])
    assert not gone.complete and gone.unserved == [1, 2, 3, 4]
    assert gone.attainment(Objective(100.0, 100.0)) == pytest.approx(0.2)


def test_objective_attainment() -> None:
    res = simulate(workload(200), LeastOutstanding(), [spec()] * 2)
    loose, tight = Objective(1e9, 1e9, 0.99), Objective(0.0, 0.0, 0.5)
    assert res.attainment(loose) == 1.0 and res.meets(loose)
    assert res.attainment(tight) == 0.0 and not res.meets(tight)
    assert res.ttft(0.5) <= res.ttft(0.99)
    assert not math.isnan(res.tpot(0.99))


def test_bad_input_is_typed() -> None:
    with pytest.raises(InvalidRequestError) as e:
        ServingRequest(0, 0.0, -5, 10)
    assert e.value.field == "prompt_tokens"
    with pytest.raises(InvalidRequestError):
        ServingRequest(0, 0.0, 5, 0)
    with pytest.raises(InvalidRequestError):
        ServingRequest(0, -1.0, 5, 1)
    with pytest.raises(InvalidRequestError) as e:
        simulate(workload(5), RoundRobin(), [])
    assert e.value.field == "replicas"
    with pytest.raises(InvalidRequestError, match="needs 5200 KV tokens"):
        simulate([ServingRequest(0, 0.0, 5000, 200)], RoundRobin(), [spec(10)])
    with pytest.raises(InvalidRequestError, match="twice"):
        simulate([ServingRequest(0, 0.0, 5, 1), ServingRequest(0, 1.0, 5, 1)], RoundRobin(), [spec()])
    with pytest.raises(InvalidRequestError):
        simulate(workload(5), RoundRobin(), [spec()], changes=[ReplicaChange(1.0, "remove", 7)])
    with pytest.raises(InvalidRequestError):
        ReplicaSpec(PROFILE, 0)


def test_load_mooncake_parses_and_rejects(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(
        json.dumps({"timestamp": 1500, "input_length": 1000, "output_length": 3, "hash_ids": [0, 1]}) + "\n\n"
    )
    (r,) = load_mooncake(p, time_scale=2.0)
    assert r.arrival_s == 3.0 and r.hash_ids == (0, 1) and r.prompt_tokens == 1000
    p.write_text('{"timestamp": 0}\n')
    with pytest.raises(InvalidRequestError, match=":1: malformed"):
        load_mooncake(p)
    p.write_text(json.dumps({"timestamp": 0, "input_length": -1, "output_length": 3, "hash_ids": []}) + "\n")
    with pytest.raises(InvalidRequestError, match=":1:"):
        load_mooncake(p)
    with pytest.raises(InvalidRequestError):
        load_mooncake(p, time_scale=0)


@pytest.mark.skipif(not TRACE.is_file(), reason="the shared Mooncake trace is not on this machine")
def test_reproduces_the_issue_no_timing_figures() -> None:
    reqs = load_mooncake(TRACE)
    assert sum(len(r.hash_ids) for r in reqs) == 288_500
    assert replay_hits(reqs, None, 1, None).hit_ratio == pytest.approx(0.366, abs=0.0005)
    assert replay_hits(reqs, None, 1, 8 * 977).hit_ratio == pytest.approx(0.175, abs=0.0005)
    assert replay_hits(reqs, RoundRobin(), 8, 977).hit_ratio == pytest.approx(0.060, abs=0.0005)
    ch = replay_hits(reqs, ConsistentHash(), 8, 977)
    assert ch.hit_ratio == pytest.approx(0.170, abs=0.01)  # hash-function dependent; ours gives 16.4%


def test_replica_spec_from_memory_uses_the_slice_and_published_startup() -> None:
    whole = ReplicaSpec.from_memory(PROFILE)
    # 8 x 80 GB x 0.9 - 135 GB of weights, at 327,680 B a token, 512 a block
    assert whole.capacity_blocks == (576_000_000_000 - 135_000_000_000) // (327_680 * 512) == 2628
    assert whole.startup_s == 265.0
    half = ReplicaSpec.from_memory(PROFILE, 320_000_000_000, startup_s=20.0)
    assert half.capacity_blocks == (288_000_000_000 - 135_000_000_000) // (327_680 * 512)
    assert half.startup_s == 20.0
    with pytest.raises(InvalidRequestError, match="do not fit"):
        ReplicaSpec.from_memory(PROFILE, 80_000_000_000)


class _Recording:
    """A fake router: always the highest id; records what it is told to forget."""

    name = "recording"

    def __init__(self, bad: bool = False) -> None:
        self.bad = bad
        self.forgotten: list[int] = []

    def route(self, hash_ids: object, replicas: list[ReplicaLoad]) -> int:
        return 99 if self.bad else max(r.replica_id for r in replicas)

    def forget(self, replica_id: int) -> None:
        self.forgotten.append(replica_id)


def test_removal_tells_the_router_and_a_bad_choice_is_refused() -> None:
    reqs = workload(50)
    rec = _Recording()
    res = simulate(reqs, rec, [spec(), spec()], changes=[ReplicaChange(3.0, "remove", 1)])
    assert rec.forgotten == [1] and res.complete
    assert all(o.replica_id == 0 for o in res.outcomes if o.arrival_s > 3.0)
    with pytest.raises(InvalidRequestError, match="not one offered") as e:
        simulate(reqs, _Recording(bad=True), [spec()])
    assert e.value.field == "router"
