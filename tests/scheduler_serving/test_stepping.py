"""ServingSim (the stepping simulator), load_azure and fit_oracle."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.scheduler.serving import (
    InvalidRequestError,
    LeastOutstanding,
    Objective,
    ReplicaChange,
    ReplicaSpec,
    RoundRobin,
    ServingRequest,
    ServingSim,
    fit_oracle,
    load_azure,
    load_catalog,
    simulate,
)


def spec(blocks: int = 200, startup: float = 5.0) -> ReplicaSpec:
    return ReplicaSpec(load_catalog().profile("llama-2-70b", "h100-80gb"), blocks, startup_s=startup)


def workload(n: int) -> list[ServingRequest]:
    return [ServingRequest(i, i * 0.3, 800 + 50 * (i % 9), 20 + 7 * (i % 5), (i % 4, 100 + i)) for i in range(n)]


def test_stepping_gives_the_outcomes_of_simulate() -> None:
    reqs = workload(200)
    changes = [ReplicaChange(10.0, "add", 2, spec()), ReplicaChange(30.0, "remove", 0),
               ReplicaChange(30.0, "add", 3, spec())]
    want = simulate(reqs, RoundRobin(), [spec(), spec()], changes=changes)
    sim = ServingSim(reqs, RoundRobin(), [spec(), spec()])
    for t in (3.0, 7.5, 10.0):
        sim.advance(t)
    sim.add_replica(2, spec())
    sim.advance(30.0)
    sim.remove_replica(0)
    sim.add_replica(3, spec())
    got = sim.result()
    assert got.outcomes == want.outcomes
    assert got.unserved == want.unserved


def test_observe_reports_the_past_only() -> None:
    reqs = workload(50)
    sim = ServingSim(reqs, LeastOutstanding(), [spec()])
    sim.advance(6.0)
    obs = sim.observe()
    arrived = [r for r in reqs if r.arrival_s < 6.0]
    assert obs.now == 6.0
    assert obs.arrived == len(arrived)
    assert obs.arrived_prompt_tokens == sum(r.prompt_tokens for r in arrived)
    assert obs.finished <= obs.arrived and obs.outstanding == obs.arrived - obs.finished
    assert obs.ready == 1 and obs.starting == 0
    assert 0.0 < obs.kv_utilization <= 1.0
    sim.add_replica(1, spec(startup=10.0))
    assert sim.observe().starting == 1 and not sim.is_ready(1)
    sim.advance(16.0)
    assert sim.is_ready(1) and sim.observe().ready == 2
    with pytest.raises(InvalidRequestError):
        sim.advance(1.0)  # time runs forward
    with pytest.raises(InvalidRequestError):
        sim.add_replica(1, spec())
    with pytest.raises(InvalidRequestError):
        sim.add_replica(9, spec(blocks=1))  # a request would not fit
    sim.remove_replica(0)
    assert sim.is_draining(0)
    sim.result()
    assert sim.drained(0)


def test_load_azure(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n", encoding="utf-8")
    reqs = load_azure(p)
    assert [(r.request_id, r.prompt_tokens, r.output_tokens, r.hash_ids) for r in reqs] == [
        (0, 374, 44, ()), (1, 396, 109, ())]
    assert reqs[1].arrival_s == pytest.approx(4.314579)
    assert load_azure(p, time_scale=2.0)[1].arrival_s == pytest.approx(2 * 4.314579)
    bad = tmp_path / "b.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,1\n", encoding="utf-8")
    with pytest.raises(InvalidRequestError, match=":2:"):
        load_azure(bad)
    zero = tmp_path / "c.csv"
    zero.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,5,0\n", encoding="utf-8")
    with pytest.raises(InvalidRequestError) as err:
        load_azure(zero)
    assert err.value.field == "output_tokens"


def test_fit_oracle_derates_until_the_simulation_meets_the_objective() -> None:
    reqs = [ServingRequest(i, i * 0.05, 1500, 60) for i in range(1200)]  # 20 req/s for 60 s
    obj = Objective(0.5, 0.06)
    rs = spec(blocks=2000, startup=0.0)
    # an absurd capacity: the undiluted plan would have one replica and miss badly
    plan, f = fit_oracle(reqs, 1e9, 1.0, rs, LeastOutstanding, obj, bin_s=10.0, max_replicas=16, end_s=60.0)
    assert f < 1.0
    res = simulate(reqs, LeastOutstanding(), [rs] * plan.initial, changes=list(plan.changes))
    assert res.attainment(obj) >= obj.percentile
    generous, g = fit_oracle(reqs, 1.0, 1.0, rs, LeastOutstanding, obj, bin_s=10.0, max_replicas=16, end_s=60.0)
    assert g == 1.0 and max(generous.need) == 16
