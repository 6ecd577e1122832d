"""Priority classes and in-class order, preemption (victims, modes, grace, guarantees),
tenants (quotas, borrowing, reclaim, running limits), metering and the bill."""

from __future__ import annotations

import pytest

from accel.scheduler import InvalidRequestError, Share
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobState,
    Policy,
    PreemptMode,
    PriceTable,
    PriorityClass,
    QueueingScheduler,
    Quota,
    Tenant,
    WaitReason,
)

from .conftest import GIB, cluster, job

H = 3600.0
CLASSES = (PriorityClass("prod", 10, InClassOrder.FIFO, preempts=True, preemptible=False),
           PriorityClass("batch", 0, InClassOrder.SHORTEST))


def _eng(**kw: object) -> QueueingScheduler:
    pol = kw.pop("policy", None) or Policy(classes=CLASSES, default_class="batch")
    return QueueingScheduler(cluster(**{k: kw.pop(k) for k in list(kw) if k in ("hosts", "per_host")}),  # type: ignore[arg-type]
                             pol, **kw)  # type: ignore[arg-type]


def test_higher_class_first_and_shortest_first_inside_a_class() -> None:
    eng = _eng(hosts=1)
    eng.submit(job("fill", 8, H), 0)
    eng.cycle(0)
    eng.submit(job("long", 8, 10 * H), 1)
    eng.submit(job("short", 8, 2 * H), 2)
    eng.submit(job("prod", 8, 5 * H, priority_class="prod", preemptible=False), 3)
    order = [j.id for j in eng.queue()]
    assert order[0] == "prod" and order[1:] == ["short", "long"]


def test_fair_share_orders_by_decayed_tenant_usage() -> None:
    pol = Policy(classes=(PriorityClass("fair", 0, InClassOrder.FAIR),), fair_half_life_s=H)
    eng = QueueingScheduler(cluster(hosts=1), pol)
    eng.submit(job("heavy-1", 8, H, tenant="heavy"), 0)
    eng.cycle(0)
    eng.finish("heavy-1", H)
    eng.submit(job("fill", 8, H, tenant="other"), H)
    eng.cycle(H)
    eng.submit(job("heavy-2", 8, H, tenant="heavy"), H + 1)
    eng.submit(job("light-1", 8, H, tenant="light"), H + 2)
    assert [j.id for j in eng.queue()][:2] == ["light-1", "heavy-2"]
    # usage decays: one half-life later heavy's usage is about half
    u0 = eng.book.fair_usage("heavy", H)
    assert eng.book.fair_usage("heavy", 2 * H) == pytest.approx(u0 / 2, rel=1e-6)


@pytest.mark.parametrize(("mode", "lost", "kept"), [(PreemptMode.REQUEUE, 1500.0, 0.0),
                                                   (PreemptMode.SUSPEND, 0.0, 1500.0),
                                                   (PreemptMode.CHECKPOINT, 300.0, 1200.0)])
def test_preemption_modes_account_lost_work(mode: PreemptMode, lost: float, kept: float) -> None:
    eng = _eng(hosts=1, policy=Policy(classes=CLASSES, default_class="batch", preempt_mode=mode))
    eng.submit(job("victim", 8, 10 * H, checkpoint_interval_s=600.0), 0)
    eng.cycle(0)
    eng.submit(job("urgent", 8, H, priority_class="prod"), 1500)
    res = eng.cycle(1500)
    v = eng.jobs["victim"]
    assert res.preempted == ["victim"] and "urgent" in res.started
    assert v.lost_s == pytest.approx(lost) and v.work_s == pytest.approx(kept)
    assert v.state == (JobState.SUSPENDED if mode == PreemptMode.SUSPEND else JobState.QUEUED)
    kinds = [e.kind for e in eng.history("victim")]
    assert kinds == ["submitted", "admitted", "placed", "preempting", "preempted"]
    # it resumes later from what it kept
    eng.finish("urgent", 1500 + H)
    eng.cycle(1500 + H)
    last = eng.history("victim")[-1]
    assert v.state == JobState.RUNNING and last.kind == "resumed" and last.data["resume_from"] == pytest.approx(kept)
    eng.check_invariants()


def test_victims_are_the_fewest_and_cheapest() -> None:
    # 16 devices: one 8-device job with little work since its checkpoint, and eight 1-device
    # jobs; an 8-device urgent job should evict the single 8-device job, not eight small ones
    eng = _eng(hosts=2)
    eng.submit(job("big", 8, 10 * H, checkpoint_interval_s=100.0), 0)
    for i in range(8):
        eng.submit(job(f"small{i}", 1, 10 * H), 0)
    eng.cycle(0)
    eng.submit(job("urgent", 8, H, priority_class="prod"), 1010)
    res = eng.cycle(1010)
    assert res.preempted == ["big"]
    assert eng.jobs["big"].lost_s == pytest.approx(10.0)


def test_grace_period_keeps_devices_until_it_ends() -> None:
    eng = _eng(hosts=1, policy=Policy(classes=CLASSES, default_class="batch", grace_s=120.0))
    eng.submit(job("victim", 8, 10 * H), 0)
    eng.cycle(0)
    eng.submit(job("urgent", 8, H, priority_class="prod"), 100)
    res = eng.cycle(100)
    assert eng.jobs["victim"].state == JobState.PREEMPTING and res.reservations["urgent"] == 220.0
    eng.cycle(200)
    assert eng.jobs["urgent"].state == JobState.QUEUED
    res = eng.cycle(220)
    assert eng.jobs["victim"].state == JobState.QUEUED and "urgent" in res.started
    assert eng.jobs["victim"].lost_s == pytest.approx(220.0)  # no checkpoint: all work lost


def test_never_preempts_a_tenant_inside_its_guarantee() -> None:
    tenants = [Tenant("a", guaranteed={"A100": Quota(devices=8)}), Tenant("b")]
    eng = _eng(hosts=1, tenants=tenants)
    eng.submit(job("a-job", 8, 10 * H, tenant="a"), 0)
    eng.cycle(0)
    eng.submit(job("b-urgent", 8, H, tenant="b", priority_class="prod"), 10)
    res = eng.cycle(10)
    assert res.preempted == [] and eng.jobs["a-job"].state == JobState.RUNNING
    # inside its own tenant, priority still preempts
    eng.submit(job("a-urgent", 8, H, tenant="a", priority_class="prod"), 20)
    assert eng.cycle(20).preempted == ["a-job"]


def test_cohort_lends_idle_quota_and_reclaims_it_by_preemption() -> None:
    tenants = [Tenant("a", guaranteed={"A100": Quota(devices=8)}, cohort="lab"),
               Tenant("b", guaranteed={"A100": Quota(devices=8)}, limit={"A100": Quota(devices=16)}, cohort="lab")]
    eng = _eng(hosts=2, tenants=tenants)
    eng.submit(job("b1", 8, 10 * H, tenant="b"), 0)
    eng.submit(job("b2", 8, 10 * H, tenant="b"), 0)  # borrows a's idle 8
    eng.cycle(0)
    assert eng.jobs["b2"].state == JobState.RUNNING and eng.jobs["b2"].borrowing
    assert "borrowing" in eng.history("b2")[1].reason
    eng.submit(job("a1", 8, H, tenant="a"), 100)  # a reclaims its guarantee
    res = eng.cycle(100)
    assert res.preempted == ["b2"] and "a1" in res.started
    eng.check_invariants()


def test_quota_and_running_job_limits_block_with_reason() -> None:
    tenants = [Tenant("t", guaranteed={"A100": Quota(devices=4)}, max_running_jobs=2)]
    eng = _eng(hosts=2, tenants=tenants)
    for i in range(3):
        eng.submit(job(f"j{i}", 1, H, tenant="t"), 0)
    eng.submit(job("big", 8, H, tenant="t"), 0)
    eng.cycle(0)
    assert [j.id for j in eng.running()] == ["j0", "j1"]
    assert eng.jobs["j2"].wait == WaitReason.QUOTA and eng.jobs["big"].wait == WaitReason.QUOTA
    est = {e.pool: e for e in eng.estimate("j2", 0)}
    assert est["A100"].reason == WaitReason.QUOTA and est["A100"].start_at == pytest.approx(H)
    eng.check_invariants()


def test_compute_share_and_memory_quotas() -> None:
    tenants = [Tenant("t", guaranteed={"*": Quota(compute_milli=1500, memory_bytes=200 * GIB)})]
    eng = _eng(hosts=1, tenants=tenants)
    eng.submit(job("s1", 1, H, tenant="t", share=Share(500, 10 * GIB)), 0)
    eng.submit(job("w1", 1, H, tenant="t"), 0)
    eng.submit(job("s2", 1, H, tenant="t", share=Share(600, 10 * GIB)), 0)
    eng.cycle(0)
    assert {j.id for j in eng.running()} == {"s1", "w1"}  # 500 + 1000 milli; s2 would exceed 1500
    assert eng.jobs["s2"].wait == WaitReason.QUOTA


def test_bill_meters_device_memory_and_share_seconds() -> None:
    prices = PriceTable(per_device_hour={"A100": 2.0}, per_gib_hour={"A100": 0.01})
    eng = QueueingScheduler(cluster(hosts=1, memory_bytes=80 * GIB), Policy(), prices=prices)
    eng.submit(job("whole", 2, H, tenant="x"), 0)
    eng.submit(job("share", 1, H, tenant="y", share=Share(250, 20 * GIB)), 0)
    eng.cycle(0)
    eng.finish("whole", H)
    bill = eng.bill(2 * H)  # "share" still runs: billed up to now
    lines = {(x.tenant, x.model): x for x in bill.lines}
    w, s = lines[("x", "A100")], lines[("y", "A100")]
    assert w.device_hours == pytest.approx(2.0) and w.compute_share_hours == pytest.approx(2.0)
    assert w.memory_gib_hours == pytest.approx(160.0)
    assert w.cost == pytest.approx(2.0 * 2.0 + 160 * 0.01)
    assert s.compute_share_hours == pytest.approx(0.5) and s.memory_gib_hours == pytest.approx(40.0)
    assert s.cost == pytest.approx(0.5 * 2.0 + 40 * 0.01)
    assert bill.total() == pytest.approx(w.cost + s.cost)
    eng.check_invariants()


def test_invalid_jobs_are_refused_with_the_field() -> None:
    eng = _eng(hosts=1)
    with pytest.raises(InvalidRequestError) as err:
        eng.submit(job("huge", 9, H), 0)
    assert err.value.field == "devices"
    with pytest.raises(InvalidRequestError):
        eng.submit(job("bad", 1, H, pool="H100"), 0)
    with pytest.raises(InvalidRequestError):
        eng.submit(job("bad2", 1, H, priority_class="nope"), 0)
    with pytest.raises(InvalidRequestError):
        job("neg", 1, -1.0)


def test_strict_mode_blocks_the_pool() -> None:
    eng = QueueingScheduler(cluster(hosts=1), Policy(backfill=BackfillMode.NONE))
    eng.submit(job("a", 6, H), 0)
    eng.cycle(0)
    eng.submit(job("b", 4, H), 1)
    eng.submit(job("c", 1, 60.0), 2)
    eng.cycle(2)
    assert eng.jobs["c"].state == JobState.QUEUED


def test_a_job_blocked_by_its_own_quota_starts_after_preempting_its_tenants_jobs() -> None:
    pol = Policy(classes=(PriorityClass("prod", 20, InClassOrder.FIFO, preempts=True, preemptible=False),
                          PriorityClass("batch", 0, InClassOrder.FIFO)),
                 backfill=BackfillMode.CONSERVATIVE, grace_s=900.0, default_class="batch")
    eng = QueueingScheduler(cluster(hosts=1), pol, tenants=[Tenant("t", guaranteed={"A100": Quota(devices=4)})])
    eng.submit(job("b0", 1, 100 * H, tenant="t"), 0.0)
    eng.submit(job("b1", 1, 100 * H, tenant="t"), 0.0)
    eng.cycle(0.0)
    eng.submit(job("p", 4, 1000.0, tenant="t", priority_class="prod"), 10.0)
    eng.cycle(10.0)  # p needs the tenant's whole quota of 4: b0 and b1 are signalled
    eng.submit(job("b2", 1, 100 * H, tenant="t"), 20.0)
    eng.cycle(20.0)  # b2 starts in the quota b0 and b1 still hold
    for t in (910.0, 1810.0, 2710.0):
        eng.cycle(t)
    # today: at 910 b0 and b1 stop, p preempts b2, b0 and b1 resume; at 1810 the reverse...
    assert eng.jobs["p"].state == JobState.RUNNING


def test_a_preemptor_in_grace_takes_no_new_victims_and_keeps_what_is_freed() -> None:
    pol = Policy(classes=(PriorityClass("prod", 20, InClassOrder.FIFO, preempts=True, preemptible=False),
                          PriorityClass("batch", 0, InClassOrder.FIFO)),
                 backfill=BackfillMode.EASY, grace_s=600.0, default_class="batch")
    eng = QueueingScheduler(cluster(hosts=1), pol, tenants=[Tenant("t", guaranteed={"A100": Quota(devices=4)})])
    for i in range(3):
        eng.submit(job(f"b{i}", 1, 100 * H, tenant="t"), 0.0)
    eng.cycle(0.0)
    eng.submit(job("p", 2, H, tenant="t", priority_class="prod"), 10.0)
    (victim,) = eng.cycle(10.0).preempted  # 3 used + 2 > 4: one victim is enough
    eng.submit(job("b3", 1, 100 * H, tenant="t"), 20.0)
    res = eng.cycle(20.0)
    # the earlier victim still winds down: no second one, and b3 may not take the quota p waits for
    assert res.preempted == [] and res.reservations == {"p": 610.0}
    assert eng.jobs["b3"].state == JobState.QUEUED and eng.jobs["b3"].wait == WaitReason.QUOTA
    eng.check_invariants()
    res = eng.cycle(610.0)
    assert "p" in res.started and res.preempted == [] and eng.jobs[victim].state == JobState.QUEUED
    assert sorted(j.id for j in eng.running()) == sorted({"b0", "b1", "b2", "p"} - {victim})
    eng.check_invariants()
