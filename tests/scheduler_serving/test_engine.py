"""The chunked-prefill engine replica and its operator-level cost profile."""

from __future__ import annotations

import itertools
import json
import math
from importlib import resources
from pathlib import Path

import pytest

from scheduler.serving import load_catalog
from scheduler.serving._engine import EngineConfig, gap_bin, gap_seconds
from scheduler.serving._errors import InvalidRequestError, UnknownModelError
from scheduler.serving._operator import load_operator_profile
from scheduler.serving._routers import RoundRobin
from scheduler.serving._sim import Objective, ReplicaSpec, ServingRequest, simulate

PROFILE = load_catalog().profile("llama-2-70b", "h100-80gb")
OP = load_operator_profile("llama-2-70b", "h100-80gb")


def spec(blocks: int = 400, budget: int = 2048) -> ReplicaSpec:
    return ReplicaSpec(PROFILE, blocks, engine=EngineConfig(OP, token_budget=budget))


def test_held_out_points_stay_within_20_percent() -> None:
    # rows of the measured profile that the stored table does not contain (benchmarks/serving/calibration.py)
    assert len(OP.validation) >= 3
    stored = set(OP.linear_ms_per_layer.xs)
    for v in OP.validation:
        assert float(v.tokens) not in stored, v.name
        assert OP.layer_ms(v.tokens) == pytest.approx(v.layer_ms, rel=0.20), v.name


def test_published_end_to_end_runs_are_recorded_and_replay() -> None:
    # README section 5.1: Lambda's vLLM runs of Llama-3-70B (BF16, TP8, 8 x H100), not used to fit
    runs = OP.end_to_end
    assert sum(len(r.measured) for r in runs) >= 3
    for run in runs:
        assert "LambdaLabsML/vllm-benchmark@" in run.source and run.config["tensor_parallel"] == 8
        assert len(run.prompt_tokens) == len(run.output_tokens)
        reqs = [ServingRequest(i, 0.0, p, o, ()) for i, (p, o) in enumerate(run.requests())]
        engine = EngineConfig(OP, token_budget=int(run.config["token_budget"]))
        res = simulate(reqs, RoundRobin(), [ReplicaSpec.from_memory(PROFILE, engine=engine)])
        assert res.complete
        tpots = sorted(o.tpot_s for o in res.outcomes if o.output_tokens > 1)
        # the decode-side points (median TPOT, duration) are met; the TTFT points are documented misses
        assert tpots[len(tpots) // 2] == pytest.approx(run.measured["median_tpot_s"], rel=0.20), run.name
        assert max(o.end_s for o in res.outcomes) == pytest.approx(run.measured["duration_s"], rel=0.20), run.name


def test_end_to_end_run_data_is_checked(tmp_path: Path) -> None:
    doc = json.loads(resources.files("scheduler.serving").joinpath("data", "operators.json").read_text())
    doc["profiles"][0]["end_to_end_validation"][0]["output_tokens"] = [1, 2]
    bad = tmp_path / "ops.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InvalidRequestError, match="one entry per request"):
        load_operator_profile("llama-2-70b", "h100-80gb", path=bad)


def test_iteration_time_grows_with_tokens_and_context() -> None:
    assert OP.prefill_seconds(4096) > OP.prefill_seconds(2048) > OP.prefill_seconds(512)
    assert OP.decode_step_seconds(64, 64 * 2000) > OP.decode_step_seconds(64, 64 * 100) > OP.decode_step_seconds(1, 100)
    # decode of one request is bound by the weights: 80 layers of the measured 1-token row
    assert OP.decode_step_seconds(1, 0) == pytest.approx(80 * OP.layer_ms(1) / 1000)
    with pytest.raises(InvalidRequestError):
        OP.iteration_seconds((), 0, 0)
    with pytest.raises(UnknownModelError):
        load_operator_profile("llama-2-70b", "no-such-gpu")


def test_one_request_prefills_then_decodes_at_the_profile_rate() -> None:
    res = simulate([ServingRequest(0, 0.0, 512, 11, (1,))], RoundRobin(), [spec()])
    o = res.outcomes[0]
    assert o.ttft_s == pytest.approx(OP.prefill_seconds(512))
    assert o.max_tbt_s is not None and o.max_tbt_s == pytest.approx(OP.decode_step_seconds(1, 521), rel=1e-3)
    assert res.tbt(0.99) == pytest.approx(o.max_tbt_s, rel=0.006)  # histogram bins are 0.5% wide
    assert res.preemptions == 0


def test_chunked_prefill_bounds_the_stall_of_running_decodes() -> None:
    short = ServingRequest(0, 0.0, 256, 400, (1,))
    long = ServingRequest(1, 1.0, 16384, 1, tuple(range(100, 132)))
    chunked = simulate([short, long], RoundRobin(), [spec(budget=1024)])
    whole = simulate([short, long], RoundRobin(), [ReplicaSpec(PROFILE, 400)])
    stall = chunked.outcomes[0].max_tbt_s
    assert stall is not None and stall < 0.1  # one 1024-token iteration, not the 16K prefill
    # without chunking the decode waits for the whole prompt (the legacy model's mean hides it)
    assert whole.outcomes[1].ttft_s > 0.5
    # the long prompt took ceil(16384 / 1023) iterations once the short one decodes beside it
    assert chunked.outcomes[1].ttft_s > 16 * OP.decode_step_seconds(1, 0)


def test_kv_blocks_are_taken_as_tokens_are_produced() -> None:
    # 10 blocks of 512 = 5120 tokens; each request would reserve 2000 + 100 up front (2 at once)
    reqs = [ServingRequest(i, 0.0, 1000, 100, ()) for i in range(4)]
    res = simulate(reqs, RoundRobin(), [spec(10)])
    assert res.complete
    firsts = sorted(o.first_token_s for o in res.outcomes)
    # all four prompts fit (4 x 1000 < 5120), so all four start before any finishes
    assert firsts[-1] < min(o.end_s for o in res.outcomes)
    assert all(0 < peak <= 10 * 512 for peak in res.peak_kv_tokens.values())


def test_out_of_blocks_preempts_and_recomputes() -> None:
    reqs = [ServingRequest(i, 0.0, 1000, 1500, ()) for i in range(4)]
    res = simulate(reqs, RoundRobin(), [spec(10, budget=512)])
    assert res.complete and res.preemptions > 0
    assert sorted(o.request_id for o in res.outcomes) == [0, 1, 2, 3]
    assert all(peak <= 10 * 512 for peak in res.peak_kv_tokens.values())
    # a preempted request's stream stalls while it waits and recomputes: its TBT shows it
    worst = max(o.max_tbt_s or 0.0 for o in res.outcomes)
    assert worst > 1.0


def test_objective_on_the_tail_time_between_tokens() -> None:
    res = simulate(
        [ServingRequest(0, 0.0, 256, 400, (1,)), ServingRequest(1, 1.0, 16384, 1, ())],
        RoundRobin(),
        [spec(budget=8192)],
    )
    o = res.outcomes[0]
    assert o.max_tbt_s is not None and o.max_tbt_s > 2 * o.tpot_s  # the mean hides the stall
    assert Objective(ttft_s=10.0, tpot_s=0.1).attained(o)
    assert not Objective(ttft_s=10.0, tpot_s=0.1, tbt_s=0.1).attained(o)


def test_gap_histogram_bins() -> None:
    for s in (1e-4, 0.0123, 0.5, 3.0):
        assert s <= gap_seconds(gap_bin(s)) <= s * 1.006
    assert gap_seconds(gap_bin(0.0)) == 1e-6
    assert math.isnan(simulate([ServingRequest(0, 0.0, 10, 1, ())], RoundRobin(), [spec()]).tbt(0.99))


def test_engine_config_is_checked() -> None:
    with pytest.raises(InvalidRequestError):
        EngineConfig(OP, token_budget=0)


def test_more_tokens_never_run_faster() -> None:
    # the measured rows dip (32 -> 64 tokens); the profile reads them as a running maximum
    steps = [OP.decode_step_seconds(b, b * 640) for b in range(1, 257)]
    assert all(a <= b for a, b in itertools.pairwise(steps))


def test_decode_fast_forward_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler.serving._engine import ChunkedReplica

    reqs = [ServingRequest(i, 0.3 * i, 300 + 97 * (i % 7), 5 + 37 * (i % 5), (i % 3, i)) for i in range(40)]
    reqs += [ServingRequest(100 + i, 0.0, 900, 700, ()) for i in range(6)]  # KV pressure: preemptions

    def run() -> tuple[list[object], dict[int, int], int]:
        res = simulate(reqs, RoundRobin(), [spec(12, budget=512), spec(40, budget=1024)])
        rows: list[object] = [(o.request_id, o.first_token_s, o.end_s, o.max_tbt_s) for o in res.outcomes]
        return rows, res.token_gaps, res.preemptions

    fast = run()
    monkeypatch.setattr(ChunkedReplica, "fast_forward", False)
    slow = run()
    assert fast[2] == slow[2] and fast[2] > 0
    assert fast[1] == slow[1]
    assert len(fast[0]) == len(slow[0])
    for a, b in zip(fast[0], slow[0], strict=True):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9)
