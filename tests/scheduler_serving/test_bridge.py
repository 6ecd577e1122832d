"""The engine bridge: replicas are jobs; scale-up preempts training with grace, scale-down frees devices."""

from __future__ import annotations

import pytest

from accel.scheduler.queueing import (
    JobState,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    TraceJob,
    uniform_cluster,
)
from accel.scheduler.serving import (
    InvalidRequestError,
    LeastOutstanding,
    Objective,
    Service,
    ServingBridge,
    ServingRequest,
    ServingSnapshot,
    UnknownModelError,
)

GRACE = 30.0
STARTUP = 50.0


class Schedule:
    """A fake autoscaler: a replica count from a time table (latest entry at or before now)."""

    name = "schedule"

    def __init__(self, table: list[tuple[float, int]], sync_s: float = 10.0) -> None:
        self.table = table
        self.sync_s = sync_s
        self.seen: list[ServingSnapshot] = []

    def decide(self, obs: ServingSnapshot, current: int) -> int:
        self.seen.append(obs)
        want = current
        for t, n in self.table:
            if t <= obs.now:
                want = n
        return want


def engine(hosts: int = 2) -> QueueingScheduler:
    policy = Policy(classes=(PriorityClass("serving", 10, preempts=True, preemptible=False),
                             PriorityClass("training", 0)),
                    grace_s=GRACE, preempt_mode=PreemptMode.CHECKPOINT)
    return QueueingScheduler(uniform_cluster(hosts, 8, model="H100", memory_bytes=80 * 10**9), policy)


def service(**kw: object) -> Service:
    args: dict[str, object] = {"min_replicas": 1, "max_replicas": 4, "pool": "H100", "startup_s": STARTUP}
    args.update(kw)
    return Service("chat", "llama-2-70b", "h100-80gb", Objective(5.0, 0.2), **args)  # type: ignore[arg-type]


def steady(n: int, every: float = 1.0) -> list[ServingRequest]:
    return [ServingRequest(i, i * every, 600, 40) for i in range(n)]


def test_scale_up_preempts_training_with_grace_and_serves_after_placement_and_startup() -> None:
    eng = engine(2)
    train = [TraceJob("train-0", 0.0, 8, 10_000.0, tenant="ml", priority_class="training",
                      checkpoint_interval_s=60.0)]
    auto = Schedule([(100.0, 2)])
    br = ServingBridge(eng, service(), auto, steady(400), LeastOutstanding(), initial=1, training=train)
    res = br.run(400.0)
    eng.check_invariants()
    assert res.preemptions == 1
    r0, r1 = res.replicas
    assert r0.placed_s == 0.0 and r0.ready_s == 0.0  # the initial replica is warm
    # asked for at 100, the training job keeps its devices for the grace period, then the
    # replica is placed and loads the model for STARTUP seconds before it takes requests
    assert r1.submitted_s == 100.0
    assert r1.placed_s == pytest.approx(100.0 + GRACE)
    assert r1.ready_s == pytest.approx(100.0 + GRACE + STARTUP)
    on_new = [o for o in res.serving.outcomes if o.replica_id == r1.replica_id]
    assert on_new, "the new replica served"
    assert min(o.first_token_s for o in on_new) >= r1.ready_s
    assert min(o.arrival_s for o in on_new) >= r1.ready_s
    job = eng.jobs["train-0"]
    assert job.state == JobState.QUEUED  # preempted, waiting for devices again
    assert job.work_s == pytest.approx(120.0)  # its last checkpoint before the grace period ended
    assert res.training_lost_device_s == pytest.approx(8 * (130.0 - 120.0))
    assert res.max_placement_wait_s == pytest.approx(GRACE)


def test_scale_down_drains_and_a_queued_training_job_gets_the_devices() -> None:
    eng = engine(2)
    train = [TraceJob("train-0", 0.0, 8, 10_000.0, tenant="ml", priority_class="training")]
    auto = Schedule([(60.0, 1)])
    br = ServingBridge(eng, service(), auto, steady(1400, 0.2), LeastOutstanding(), initial=2, training=train)
    res = br.run(300.0)
    eng.check_invariants()
    assert res.scale_downs == 1
    gone = [r for r in res.replicas if r.ended_s is not None]
    assert len(gone) == 1
    ended = gone[0].ended_s
    assert ended is not None and ended >= 60.0
    # the replica finished every request it had before its job ended
    last = max(o.end_s for o in res.serving.outcomes if o.replica_id == gone[0].replica_id)
    assert last <= ended
    job = eng.jobs["train-0"]
    assert job.first_started_at == pytest.approx(ended)  # the freed host went to training at once
    assert job.state == JobState.RUNNING
    assert res.training_device_s == pytest.approx(8 * (300.0 - ended))
    # every request was served, the one replica left took all arrivals after the drain began
    assert res.serving.complete
    assert {o.replica_id for o in res.serving.outcomes if o.arrival_s > ended} == {1 - gone[0].replica_id}


def test_scale_down_withdraws_replica_jobs_not_yet_placed() -> None:
    eng = engine(1)  # room for one replica only
    auto = Schedule([(10.0, 3), (40.0, 1)])
    br = ServingBridge(eng, service(), auto, steady(60), LeastOutstanding(), initial=1)
    res = br.run(60.0)
    eng.check_invariants()
    assert res.scale_ups == 2 and res.scale_downs == 2
    assert [eng.jobs[r.job_id].state for r in res.replicas] == [JobState.RUNNING, JobState.CANCELLED,
                                                               JobState.CANCELLED]
    assert res.serving_device_seconds() == pytest.approx(8 * 60.0)


def test_the_autoscaler_sees_only_the_past() -> None:
    auto = Schedule([])
    reqs = steady(100)
    ServingBridge(engine(1), service(), auto, reqs, LeastOutstanding(), initial=1).run(50.0)
    for obs in auto.seen:
        assert obs.arrived == sum(1 for r in reqs if r.arrival_s < obs.now)
        assert obs.finished <= obs.arrived


def test_bridge_and_service_errors_are_typed() -> None:
    with pytest.raises(InvalidRequestError, match="priority class"):
        ServingBridge(engine(), service(priority_class="gold"), Schedule([]), steady(3), LeastOutstanding())
    with pytest.raises(InvalidRequestError, match="initial"):
        ServingBridge(engine(), service(), Schedule([]), steady(3), LeastOutstanding(), initial=9)
    with pytest.raises(InvalidRequestError):
        ServingBridge(engine(), service(), Schedule([]), steady(3), LeastOutstanding()).run(0.0)


@pytest.mark.parametrize(("kw", "field"), [
    ({"min_replicas": -1}, "min_replicas"),
    ({"min_replicas": 3, "max_replicas": 2}, "max_replicas"),
    ({"max_replicas": 0}, "max_replicas"),
    ({"devices": 0}, "devices"),
    ({"startup_s": -1.0}, "startup_s"),
    ({"slice_memory_bytes": 0}, "slice_memory_bytes"),
])
def test_bad_services_raise_typed_errors(kw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        service(**kw)
    assert err.value.field == field


def test_service_slices_and_profiles() -> None:
    from accel.scheduler import Share

    with pytest.raises(InvalidRequestError) as err:
        Service("x", "llama-2-70b", "h100-80gb", Objective(0.0, 0.1))
    assert err.value.field == "objective"
    with pytest.raises(InvalidRequestError):
        Service("a/b", "llama-2-70b", "h100-80gb", Objective(1.0, 0.1))
    # the profile was measured at TP=8: a 4-device replica has no cost data
    with pytest.raises(InvalidRequestError) as err:
        service(devices=4).replica_spec()
    assert err.value.field == "devices"
    with pytest.raises(UnknownModelError):
        Service("x", "gpt-9", "h100-80gb", Objective(1.0, 0.1)).replica_spec()
    # a share of a TP=8 profile is refused; a share's memory sizes its cache
    with pytest.raises(InvalidRequestError) as err:
        service(share=Share(500, 80 * 10**9)).replica_spec()
    assert err.value.field == "share"
    # weights that do not fit the slice are refused by cache_blocks
    with pytest.raises(InvalidRequestError):
        service(slice_memory_bytes=100 * 10**9).replica_spec()
    whole = service().replica_spec()
    bigger = service(slice_memory_bytes=8 * 90 * 10**9).replica_spec()
    assert bigger.capacity_blocks > whole.capacity_blocks
    job = service().replica_job(3)
    assert (job.id, job.devices, job.same_host, job.priority_class, job.preemptible) == (
        "chat/r3", 8, True, "serving", False)


def test_predictive_replicas_are_ready_when_a_ramp_needs_them() -> None:
    from accel.scheduler.serving import Capacity, Predictive

    # prompt-only work ramps as 500 + 5 t tokens/s; a replica carries 2000 tokens/s, so the
    # n-th replica is needed from t = ((n - 1) x 2000 - 500) / 5: 300 s, 700 s
    reqs, t, i = [], 0.0, 0
    while t < 900.0:
        reqs.append(ServingRequest(i, t, 499, 1))
        i += 1
        t += 500.0 / (500.0 + 5.0 * t)
    cap = Capacity(((1, 2000.0),))

    def ready_times(trend_weight: float) -> list[float]:
        pol = Predictive(cap, weight=1.0, lead_s=STARTUP + 15.0, headroom=0.0, short_s=30.0, trend_s=120.0,
                         trend_weight=trend_weight, sync_s=15.0)
        eng = engine(4)
        res = ServingBridge(eng, service(), pol, reqs, LeastOutstanding(), initial=1).run(900.0)
        eng.check_invariants()
        return sorted(r.ready_s for r in res.replicas if r.ready_s is not None and r.ready_s > 0)

    ahead = ready_times(1.0)
    assert len(ahead) >= 2
    for n, need_at in ((2, 300.0), (3, 700.0)):
        assert ahead[n - 2] <= need_at + 15.0, (n, ahead)
    # following the current rate only, the same replicas come a start-up late
    lagging = ready_times(0.0)
    assert lagging[0] >= 300.0 + STARTUP - 15.0, lagging
    assert ahead[0] < lagging[0] - 30.0


def test_a_service_with_an_engine_places_engine_replicas() -> None:
    from accel.scheduler.serving import EngineConfig, load_operator_profile

    eng = EngineConfig(load_operator_profile("llama-2-70b", "h100-80gb"), token_budget=1024)
    spec = service(engine=eng).replica_spec()
    assert spec.engine is eng
    assert service().replica_spec().engine is None
