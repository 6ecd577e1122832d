"""Deep queues: the kept queue order and the walk's shortcut past the reservation depth decide
exactly what the plain computation decides.

Each workload is run twice in this process: as the engine runs it, and with both speed-ups
turned off (every class's order sorted afresh at each call, every job examined in full by the
walk).  The journals, every waiting job's wait reason after every cycle, the queue order and
the estimates must be the same; the shortcut must actually have answered jobs, or the
comparison proves nothing.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from accel.scheduler import ClusterState, DeviceSpec, HostSpec
from accel.scheduler.queueing import (
    BackfillMode,
    HistoryModel,
    InClassOrder,
    JobSpec,
    JobState,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    Quota,
    Tenant,
    _order,
    _walk,
)
from accel.scheduler.queueing._profile import Profile
from accel.scheduler.queueing._records import Job
from accel.scheduler.queueing._state import EngineState

GIB = 1024**3


def _cluster() -> ClusterState:
    specs = []
    for h in range(4):
        model = "A100" if h == 3 else "V100"
        devs = tuple(DeviceSpec(id=f"h{h}/{model}-{d}", vendor="nvidia", model=model, memory_bytes=16 * GIB,
                                link_domain="nvlink", numa=d // 4) for d in range(8))
        specs.append(HostSpec(name=f"h{h}", cpu_milli=64_000, memory_bytes=256 * GIB, devices=devs, rack="r0"))
    return ClusterState.from_specs(specs)


def _policy(seed: int) -> Policy:
    fifo_only = seed % 2 == 0  # the kept order applies only when every class orders FIFO
    return Policy(
        classes=(PriorityClass("prod", 20, InClassOrder.FIFO, preempts=seed % 3 == 0, preemptible=False),
                 PriorityClass("batch", 0, InClassOrder.FIFO if fifo_only else InClassOrder.SHORTEST,
                               band_ratio=4.0)),
        backfill=(BackfillMode.CONSERVATIVE, BackfillMode.EASY)[seed // 2 % 2],
        preempt_mode=PreemptMode.SUSPEND, grace_s=(0.0, 120.0)[seed % 3 == 1],
        demote_after_device_s=(3600.0,) if seed not in (3, 4) else (), plan_depth=(3, 8)[seed % 2],
        default_class="batch", preempt_overhead_s=30.0,
        promote_after_wait_ratio=4.0 if seed % 4 == 1 else None)


TENANTS = (Tenant("a", guaranteed={"V100": Quota(devices=8)}, limit={"V100": Quota(devices=16)}, cohort="lab"),
           Tenant("b", guaranteed={"V100": Quota(devices=8)}, cohort="lab"),
           Tenant("c", max_running_jobs=6), Tenant("d"))


def _run(seed: int) -> tuple[list[Any], list[Any]]:
    """The journal, and per cycle the queue order with each waiting job's reason (and estimates)."""
    rng = random.Random(seed)
    eng = QueueingScheduler(_cluster(), _policy(seed), tenants=TENANTS)
    true_s: dict[str, float] = {}
    seen: list[Any] = []
    t = 0.0
    for step in range(120):
        t += rng.choice((0.0, 60.0, 300.0, 900.0))
        for _ in range(rng.choice((1, 2, 3, 4))):  # more arrives than the cluster serves: the queue deepens
            jid = f"j{len(true_s)}"
            n = rng.choice((1, 1, 1, 2, 4, 8))
            spec = JobSpec(jid, tenant=rng.choice("abcd"), devices=n, pool=rng.choice(("", "", "V100", "A100")),
                           estimate_s=rng.choice((600.0, 3600.0, 7200.0, 30_000.0)),
                           priority_class=rng.choice(("prod", "batch", "batch", "batch")),
                           same_host=rng.random() < 0.2, preemptible=rng.random() < 0.9)
            eng.submit(spec, t, estimate=rng.random() < 0.3)
            true_s[jid] = spec.estimate_s * rng.choice((0.5, 1.0, 1.3))
        for job in eng.running():
            if job.state == JobState.RUNNING and job.progress(t) >= true_s[job.id]:
                eng.finish(job.id, t)
        eng.cycle(t)
        order = eng.queue(t)
        seen.append([step, [(j.id, j.wait.value) for j in order]])
        if step % 15 == 7 and order:
            for job in (order[0], order[len(order) // 2], order[-1]):
                seen.append([step, job.id, [(e.pool, e.start_at, e.reason.value) for e in eng.estimate(job.id, t)]])
    events = [[e.t, e.job, e.kind, e.reason, e.data] for e in eng.journal.events()]
    return events, seen


@pytest.mark.parametrize("seed", range(8))
def test_shortcuts_decide_what_the_full_walk_decides(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    answered: list[str] = []
    original = _walk._Settled.reason

    def counting(self: _walk._Settled, job: Any, w: Any) -> Any:
        why = original(self, job, w)
        if why is not None:
            answered.append(job.id)
        return why

    monkeypatch.setattr(_walk._Settled, "reason", counting)
    fast = _run(seed)
    assert len(answered) > 100, "the shortcut never answered: the workload does not test it"

    monkeypatch.setattr(_walk._Settled, "reason", lambda self, job, w: None)  # every job examined in full
    monkeypatch.setattr(_order, "kept_order", _sorted_afresh)
    slow = _run(seed)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]


def _sorted_afresh(st: EngineState, now: float) -> list[tuple[tuple[float, ...], Job]]:
    """The order without the kept list: every waiting job's key computed now, then sorted."""
    _order.sync_waiting(st, now)
    return sorted(((_order.order_key(st, j, now), j) for j in st.waiting.values()), key=lambda kj: kj[0])


@pytest.mark.parametrize("batch", [InClassOrder.FIFO, InClassOrder.SHORTEST])
def test_kept_order_follows_promotion_preemption_and_requeue(batch: InClassOrder) -> None:
    """Under FIFO classes (and SHORTEST ones under the declared-duration model) with tiers and the
    starvation guard, the kept order is, after every event of a busy run, the order sorted afresh
    from each job's key."""
    rng = random.Random(7)
    policy = Policy(classes=(PriorityClass("prod", 20, InClassOrder.FIFO, preempts=True, preemptible=False),
                             PriorityClass("batch", 0, batch, band_ratio=2.0 if batch == InClassOrder.SHORTEST
                                           else None)),
                    backfill=BackfillMode.CONSERVATIVE, preempt_mode=PreemptMode.SUSPEND, grace_s=60.0,
                    demote_after_device_s=(1800.0, 20_000.0), plan_depth=4, default_class="batch",
                    promote_after_wait_ratio=2.0)
    eng = QueueingScheduler(_cluster(), policy, tenants=TENANTS)
    assert eng._st.order_kept
    # a model that learns moves a SHORTEST job's key while it waits: no kept order then
    assert QueueingScheduler(_cluster(), policy, tenants=TENANTS,
                             durations=HistoryModel())._st.order_kept == (batch == InClassOrder.FIFO)
    devices = [d for ids in eng.state.dev_ids for d in ids]
    t = 0.0
    true_s: dict[str, float] = {}
    promoted = preempted = requeued = 0
    for _step in range(150):
        t += rng.choice((0.0, 120.0, 600.0))
        for _ in range(rng.choice((1, 2, 3))):
            jid = f"j{len(true_s)}"
            eng.submit(JobSpec(jid, tenant=rng.choice("cd"), devices=rng.choice((1, 2, 4)),
                               estimate_s=rng.choice((600.0, 7200.0)),
                               priority_class="prod" if rng.random() < 0.1 else "batch"), t)
            true_s[jid] = rng.choice((600.0, 7200.0, 20_000.0))
        for job in eng.running():
            if job.state == JobState.RUNNING and job.progress(t) >= true_s[job.id]:
                eng.finish(job.id, t)
        if rng.random() < 0.1:  # a device fails (its job is requeued) or comes back
            eng.update_health(t, {rng.choice(devices): rng.random() < 0.5})
        eng.cycle(t)
        fresh = sorted(eng._st.waiting.values(), key=lambda j: eng.order_key(j, t))
        assert eng.queue(t) == fresh
        assert set(eng.waiting_tiers(t)) == {(j.klass.level, eng.tier(j, t)) for j in eng._st.waiting.values()}
        promoted = sum(1 for e in eng.journal.events() if e.kind == "promoted")
        preempted = sum(1 for e in eng.journal.events() if e.kind == "preempted")
        requeued = sum(1 for e in eng.journal.events() if e.kind == "failed" and e.data.get("requeue"))
    assert promoted > 0 and preempted > 0 and requeued > 0, (promoted, preempted, requeued)


@pytest.mark.parametrize("seed", range(40))
def test_clear_until_answers_what_fits_answers(seed: int) -> None:
    """``fits(now, d, n)`` is ``free_now >= n and now + d <= clear_until(n)``, on profiles with
    releases, bookings now (deferred), later bookings and given-back devices."""
    rng = random.Random(seed)
    now = rng.choice((0.0, 1234.5))
    prof = Profile(now, rng.randint(0, 6), [(now + rng.choice((0.0, 10.0, 60.0, 300.0, 1e4)), rng.randint(1, 4))
                                            for _ in range(rng.randint(0, 8))])
    for _ in range(rng.randint(0, 8)):
        at = now if rng.random() < 0.5 else now + rng.choice((5.0, 60.0, 300.0))
        prof.add(at, at + rng.choice((30.0, 60.0, 600.0, 5000.0)), rng.choice((1, 2, -1)))
        for n in range(1, 8):
            for d in (1.0, 30.0, 59.0, 60.0, 61.0, 300.0, 1e5):
                fits = prof.fits(now, d, n)
                assert fits == (prof.free_now >= n and now + d <= prof.clear_until(n)), (n, d)
