"""Autoscaling rules: HPA's formula, tolerance and stabilisation; the predictive lead; the oracle."""

from __future__ import annotations

import math

import pytest

from accel.scheduler.serving import (
    EngineConfig,
    InvalidRequestError,
    LeastOutstanding,
    Objective,
    Predictive,
    ReactiveHPA,
    ReplicaSpec,
    ServingRequest,
    ServingSnapshot,
    decode_weight,
    load_catalog,
    load_operator_profile,
    measure_capacity,
    oracle_plan,
    prefill_rate,
    simulate,
)


def snap(now: float, *, outstanding: int = 0, ready: int = 1, arrived: int = 0, prompt: int = 0,
         finished: int = 0, out_tokens: int = 0, queued_prompt: int = 0, kv: float = 0.0) -> ServingSnapshot:
    return ServingSnapshot(now=now, arrived=arrived, arrived_prompt_tokens=prompt, finished=finished,
                           finished_output_tokens=out_tokens, outstanding=outstanding, queued=0,
                           queued_prompt_tokens=queued_prompt, ready=ready, starting=0, kv_utilization=kv)


def test_hpa_formula_and_tolerance() -> None:
    hpa = ReactiveHPA(10.0)
    # desired = ceil(current x metric / target): 2 replicas at 15 outstanding each -> 3
    assert hpa.recommend(snap(0, outstanding=30, ready=2), 2) == 3
    # within the 0.1 tolerance (ratio 1.05 and 0.95): no change
    assert hpa.recommend(snap(0, outstanding=21, ready=2), 2) == 2
    assert hpa.recommend(snap(0, outstanding=19, ready=2), 2) == 2
    # just past it (ratio 1.15): ceil(2 x 1.15) = 3
    assert hpa.recommend(snap(0, outstanding=23, ready=2), 2) == 3
    # starting replicas count with a metric of 0 (HPA's not-ready rule): 4 current, 30 outstanding
    assert hpa.recommend(snap(0, outstanding=30, ready=2), 4) == 3
    kv = ReactiveHPA(0.5, metric="kv")
    assert kv.recommend(snap(0, kv=0.9, ready=4), 4) == math.ceil(4 * 0.9 / 0.5)
    with pytest.raises(InvalidRequestError):
        ReactiveHPA(1.5, metric="kv")
    with pytest.raises(InvalidRequestError):
        ReactiveHPA(0.0)


def test_hpa_scales_up_at_once_and_down_after_the_stabilisation_window() -> None:
    hpa = ReactiveHPA(10.0)
    assert hpa.decide(snap(0, outstanding=40, ready=4), 4) == 4
    assert hpa.decide(snap(15, outstanding=80, ready=4), 4) == 8  # scale-up: immediate
    # load falls at t=30: the recommendation is 2, but 8 was recommended within 300 s
    cur = 8
    for t in range(30, 316, 15):
        cur = hpa.decide(snap(float(t), outstanding=20, ready=cur), cur)
        assert cur == 8, t
    # 300 s after the last high recommendation (t=15) it comes down to the window's highest
    assert hpa.decide(snap(330.0, outstanding=20, ready=8), 8) == 2


def test_hpa_does_not_scale_down_before_it_has_a_window_of_history() -> None:
    hpa = ReactiveHPA(10.0)
    assert hpa.decide(snap(0, outstanding=0, ready=6), 6) == 6
    assert hpa.decide(snap(299, outstanding=0, ready=6), 6) == 6
    assert hpa.decide(snap(301, outstanding=0, ready=6), 6) == 0  # the caller clamps to min_replicas


def ramp_snapshots(pol: Predictive, until: float, rate0: float, slope: float) -> list[tuple[float, int]]:
    """Feed a ramp of prompt-only work (rate0 + slope x t tokens/s); return (t, desired)."""
    out: list[tuple[float, int]] = []
    cur = 1
    t = 0.0
    while t <= until:
        work = rate0 * t + slope * t * t / 2  # cumulative prompt tokens
        want = pol.decide(snap(t, arrived=int(t), prompt=int(work), finished=int(t), out_tokens=0, ready=cur), cur)
        out.append((t, want))
        cur = max(1, want)
        t += 15.0
    return out


def test_predictive_provisions_for_the_load_when_a_new_replica_would_be_ready() -> None:
    cap, lead = 1000.0, 300.0
    pol = Predictive(cap, weight=1.0, lead_s=lead, headroom=0.0, trend_s=300.0, short_s=60.0)
    slope = 10.0  # tokens/s per s: one more replica's worth of load every 100 s
    decisions = ramp_snapshots(pol, 1200.0, 1000.0, slope)
    for t, want in decisions:
        if t < 315:
            continue  # until the trend window is full it uses the last minute's rate
        now_need = math.ceil((1000.0 + slope * t) / cap)
        ahead_need = math.ceil((1000.0 + slope * (t + lead)) / cap)
        # it asks now for what the load will need a start-up later, not for today's load
        assert want >= ahead_need - 1 and want > now_need, (t, want, now_need, ahead_need)
        assert want <= ahead_need + 1
    # the reactive rule on the same load only follows it: compare at one instant
    t = 900.0
    assert dict(decisions)[t] >= math.ceil((1000.0 + slope * (t + lead)) / cap) - 1


def test_predictive_counts_the_queue_and_waits_before_scaling_down() -> None:
    pol = Predictive(1000.0, weight=1.0, lead_s=0.0, headroom=0.0, drain_s=60.0, down_window_s=120.0)
    # no arrivals, 120,000 queued prompt tokens: 2 replicas clear them within 60 s
    assert pol.decide(snap(0.0, queued_prompt=120_000), 1) == 2
    # nothing left: still 2 for the down window, then 0
    assert pol.decide(snap(60.0), 2) == 2
    assert pol.decide(snap(119.0), 2) == 2
    assert pol.decide(snap(200.0), 2) == 0
    with pytest.raises(InvalidRequestError):
        Predictive(0.0, 1.0, 10.0)


def test_predictive_queue_aware_counts_only_the_backlog_the_ttft_bound_cannot_absorb() -> None:
    # 2 ready replicas prefill 10,000 tokens/s each; TTFT bound 4 s, half of it absorbed:
    # 0.5 x 4 s x 2 x 10,000 = 40,000 queued tokens wait within the bound and cost no replica
    def pol() -> Predictive:
        return Predictive(1000.0, weight=1.0, lead_s=0.0, headroom=0.0, drain_s=60.0, ttft_s=4.0,
                          prefill_tokens_per_s=10_000.0)
    p = pol()
    assert p.queue_wait_s(snap(0.0, queued_prompt=40_000, ready=2)) == pytest.approx(2.0)
    assert p.queue_rate(snap(0.0, queued_prompt=40_000, ready=2)) == 0.0
    assert p.decide(snap(0.0, queued_prompt=40_000, ready=2), 2) == 2  # no load, the queue drains in time
    # 160,000 queued: 120,000 beyond what the bound absorbs, 2,000 tokens/s over 60 s: 2 replicas
    p = pol()
    assert p.queue_rate(snap(0.0, queued_prompt=160_000, ready=2)) == pytest.approx(2000.0)
    assert p.decide(snap(0.0, queued_prompt=160_000, ready=2), 2) == 2
    # the previous rule (no TTFT bound) counts the whole queue: 160,000 / 60 s = 3 replicas
    assert Predictive(1000.0, 1.0, 0.0, headroom=0.0).decide(snap(0.0, queued_prompt=160_000, ready=2), 2) == 3
    # no replica ready: the bound is measured against one replica's prefill
    assert pol().queue_rate(snap(0.0, queued_prompt=40_000, ready=0)) == pytest.approx(20_000 / 60.0)
    with pytest.raises(InvalidRequestError):
        Predictive(1000.0, 1.0, 0.0, ttft_s=2.0)  # needs the prefill rate too
    with pytest.raises(InvalidRequestError):
        Predictive(1000.0, 1.0, 0.0, ttft_s=2.0, prefill_tokens_per_s=1.0, queue_absorb=1.5)


def test_prefill_rate_is_the_budget_chunk_over_its_time() -> None:
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    assert prefill_rate(op, 2048) == pytest.approx(2048 / op.prefill_seconds(2048))
    with pytest.raises(InvalidRequestError):
        prefill_rate(op, 0)


def spec(startup: float = 100.0) -> ReplicaSpec:
    prof = load_catalog().profile("llama-2-70b", "h100-80gb")
    return ReplicaSpec(prof, 2000, startup_s=startup)


def test_oracle_plan_solved_by_hand() -> None:
    # capacity 100 work tokens/s, bins of 60 s: 6,000 tokens per replica-bin; weight 0 = prompt only
    loads = [5000, 11000, 5000, 5000, 5000, 11000]  # needs 1, 2, 1, 1, 1, 2
    reqs = []
    for b, w in enumerate(loads):
        for i in range(w // 1000):
            reqs.append(ServingRequest(len(reqs), b * 60.0 + i, 1000, 1))
    plan = oracle_plan(reqs, 100.0, 0.0, spec(100.0), bin_s=60.0, end_s=360.0)
    assert plan.need == (1, 2, 1, 1, 1, 2)
    # level 1: every bin, warm from 0: 360 s.  Level 2: bin 1 is needed before a start-up could
    # finish, so warm from 0 to 120; the gap 120-300 (180 s) is longer than a start-up (100 s),
    # so it is stopped and placed again at 200 for bin 5: 60 + 100.  Total 360 + 120 + 160.
    assert plan.replica_seconds == pytest.approx(640.0)
    assert plan.initial == 2
    assert [(c.time_s, c.action) for c in plan.changes] == [(120.0, "remove"), (200.0, "add")]
    # keeping level 2 through the gap would cost 360 > 280; removing it for bins 2-4 and
    # starting it at 0 for bin 1 is forced: so 640 is the minimum
    # feasibility: at every bin at least the needed replicas are ready
    ready_at: dict[int, float] = {0: 0.0, 1: 0.0}
    gone_at: dict[int, float] = {}
    for c in plan.changes:
        if c.action == "add":
            assert c.spec is not None
            ready_at[c.replica_id] = c.time_s + c.spec.startup_s
        else:
            gone_at[c.replica_id] = c.time_s
    for b, n in enumerate(plan.need):
        for t in (b * 60.0, b * 60.0 + 59.9):
            live = sum(1 for r, at in ready_at.items() if at <= t < gone_at.get(r, math.inf))
            assert live >= n, (b, t)


def test_oracle_keeps_a_replica_over_a_gap_shorter_than_a_start_up() -> None:
    loads = [11000, 5000, 11000]
    reqs = [ServingRequest(i * 100 + k, b * 60.0 + k, 1000, 1) for i, (b, w) in enumerate(enumerate(loads))
            for k in range(w // 1000)]
    plan = oracle_plan(reqs, 100.0, 0.0, spec(100.0), bin_s=60.0, end_s=180.0)
    # gap of 60 s < 100 s start-up: keep level 2 (cost 60) instead of stopping and restarting (100)
    assert plan.replica_seconds == pytest.approx(360.0)
    assert plan.changes == ()
    res = simulate(reqs, LeastOutstanding(), [spec()] * plan.initial, changes=list(plan.changes))
    assert res.complete


def test_measured_capacity_meets_the_objective_at_that_rate() -> None:
    prof = load_catalog().profile("llama-2-70b", "h100-80gb")
    rs = ReplicaSpec(prof, 2000)
    reqs = [ServingRequest(i, i * 0.5, 1000 + 37 * (i % 11), 50 + 13 * (i % 7)) for i in range(400)]
    obj = Objective(1.0, 0.06)
    w = decode_weight(prof)
    cap = measure_capacity(reqs, rs, LeastOutstanding, obj, w, replicas=2, target=0.99, iterations=6)
    assert cap > 0
    work = sum(r.prompt_tokens + w * r.output_tokens for r in reqs)
    span = reqs[-1].arrival_s
    scale = work / span / (2 * cap)  # the time scale of the measured rate
    at = [ServingRequest(r.request_id, r.arrival_s * scale, r.prompt_tokens, r.output_tokens) for r in reqs]
    assert simulate(at, LeastOutstanding(), [rs] * 2).attainment(obj) >= 0.99
    faster = [ServingRequest(r.request_id, r.arrival_s * scale / 3, r.prompt_tokens, r.output_tokens) for r in reqs]
    assert simulate(faster, LeastOutstanding(), [rs] * 2).attainment(obj) < 0.99
    with pytest.raises(InvalidRequestError):
        measure_capacity([], rs, LeastOutstanding, obj, w)


def test_engine_replicas_price_decode_from_the_operator_profile_and_meet_a_tbt_objective() -> None:
    prof = load_catalog().profile("llama-2-70b", "h100-80gb")
    op = load_operator_profile("llama-2-70b", "h100-80gb")
    w = decode_weight(op)
    # a decode token over a prefill token, both from the operator profile (64 requests x 1024 KV tokens)
    step = op.decode_step_seconds(64, 64 * 1024) / 64
    assert w == pytest.approx(step / (op.prefill_seconds(8192) / 8192))
    assert 1.0 < w < decode_weight(prof)  # the calibrated decode step is relatively cheaper
    rs = ReplicaSpec.from_memory(prof, engine=EngineConfig(op, token_budget=2048))
    reqs = [ServingRequest(i, i * 0.05, 800 + 37 * (i % 11), 40 + 13 * (i % 7)) for i in range(300)]
    obj = Objective(2.0, 0.2, 0.99, tbt_s=0.2)
    cap = measure_capacity(reqs, rs, LeastOutstanding, obj, w, replicas=1, target=0.99, iterations=5)
    work = sum(r.prompt_tokens + w * r.output_tokens for r in reqs)
    scale = work / reqs[-1].arrival_s / cap
    at = [ServingRequest(r.request_id, r.arrival_s * scale, r.prompt_tokens, r.output_tokens) for r in reqs]
    res = simulate(at, LeastOutstanding(), [rs])
    assert res.attainment(obj) >= 0.99
    assert all(o.max_tbt_s is not None for o in res.outcomes if o.output_tokens > 1)


def test_predictive_headroom_follows_its_own_forecast_errors() -> None:
    def run(q: float) -> list[float]:
        pol = Predictive(1000.0, weight=1.0, lead_s=60.0, headroom=0.1, short_s=15.0, trend_s=60.0,
                         trend_weight=0.0, error_quantile=q, sync_s=15.0)
        work, seen = 0, []
        for k in range(30):  # 1000 tokens/s for 5 minutes, then a step to 2000 nobody foresaw
            pol.decide(snap(15.0 * k, arrived=k, prompt=work), 1)
            seen.append(pol.headroom_now())
            work += 15 * (1000 if k < 20 else 2000)
        return seen

    high = run(0.9)
    assert high[10] == 0.1  # fewer than 10 scored forecasts, or none wrong: the floor
    assert high[19] == 0.1
    # forecasts made a lead before the step saw half the load that came: it keeps that margin
    assert high[-1] > 0.5
    assert run(0.5)[-1] == 0.1  # the median error is 0: the floor
    with pytest.raises(InvalidRequestError):
        Predictive(1000.0, 1.0, 10.0, error_quantile=1.0)


def feed(pol: Predictive, rates: list[float], *, sync: float = 15.0, current: int = 1) -> list[int]:
    """Prompt-only work arriving at ``rates[k]`` tokens/s during sync interval ``k``; returns the
    decisions, each fed back as the current replica count."""
    work, out, cur = 0.0, [], current
    for k, rate in enumerate(rates):
        cur = max(1, pol.decide(snap(sync * k, arrived=k, prompt=int(work), ready=cur), cur))
        out.append(cur)
        work += sync * rate
    return out


def test_predictive_down_band_keeps_a_replica_the_load_sits_just_under() -> None:
    # capacity 1000/replica, the last minute's rate as forecast (the trend window never fills)
    def run(band: float, low: float) -> list[int]:
        pol = Predictive(1000.0, weight=1.0, lead_s=0.0, headroom=0.0, trend_s=1e6, short_s=60.0,
                         down_window_s=120.0, down_band=band)
        return feed(pol, [2500.0] * 20 + [low] * 40)

    # 1,900 tokens/s needs 2 replicas: without a band it gives the third up after the window...
    assert run(0.0, 1900.0)[-1] == 2
    # ...with a 10% band 1,900 x 1.1 > 2 x 1000 keeps it (scale-up at 2,001 would want it back)
    assert run(0.1, 1900.0)[-1] == 3
    # well under the boundary the band does not hold it: 1,500 x 1.1 fits 2
    assert run(0.1, 1500.0)[-1] == 2
    # the band never delays a scale-up
    assert run(0.1, 1900.0)[:20] == run(0.0, 1900.0)[:20]
    assert run(0.1, 1900.0)[5] == 3
    with pytest.raises(InvalidRequestError):
        Predictive(1000.0, 1.0, 10.0, down_band=-0.1)


def test_predictive_noise_term_provisions_for_the_spread_around_the_trend() -> None:
    def run(swing: float) -> Predictive:
        pol = Predictive(1000.0, weight=1.0, lead_s=60.0, headroom=0.0, short_s=60.0, trend_s=600.0,
                         noise_z=2.0, noise_s=60.0, prior_output=0.0)
        # minutes alternate between (1 - swing) and (1 + swing) x 1000 tokens/s for 30 minutes
        feed(pol, [1000.0 * (1 + swing * (1 if (k // 4) % 2 else -1)) for k in range(120)])
        return pol

    flat = run(0.0)
    assert flat.noise() == pytest.approx(0.0, abs=1e-3)
    assert flat.headroom_now() == pytest.approx(0.0, abs=2e-3)
    # windows of a minute straddle the swings, so the spread is a fraction of the swing, and
    # proportional to it; the headroom is z times it
    small, large = run(0.1), run(0.2)
    assert 0.02 <= large.noise() <= 0.2
    assert large.noise() == pytest.approx(2.0 * small.noise(), rel=0.05)
    assert large.headroom_now() == pytest.approx(2.0 * large.noise())
    with pytest.raises(InvalidRequestError):
        Predictive(1000.0, 1.0, 10.0, noise_z=-1.0)
