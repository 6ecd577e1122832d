"""Host-aware preemption: a job that must run on one host preempts victims on one host only."""

from __future__ import annotations

from pathlib import Path

from accel.scheduler import Share, TopologyConstraint, TopologyLevel
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobState,
    Journal,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
)
from accel.scheduler.queueing._preempt import ends_in_grace

from .conftest import GIB, cluster, job
from .test_stateful import CLASSES as STATEFUL_CLASSES
from .test_stateful import TENANTS

CLASSES = (PriorityClass("prod", 10, InClassOrder.FIFO, preempts=True, preemptible=False),
           PriorityClass("batch", 0, InClassOrder.FIFO))
GRACE = 30.0


def _policy() -> Policy:
    return Policy(classes=CLASSES, grace_s=GRACE, preempt_mode=PreemptMode.REQUEUE)


def _hosts(eng: QueueingScheduler, jid: str) -> list[str]:
    return sorted({a.host_name for a in eng.jobs[jid].allocs})


def _check(eng: QueueingScheduler, now: float) -> None:
    eng.check_invariants()
    eng.verify_reservations(now)


def _fragmented(journal: str | Path = ":memory:") -> QueueingScheduler:
    """Three 8-device hosts: a-0 holds a 2-device job started at 0, a-1 one started at 100,
    a-2 a 4-device job started at 200 (6, 6 and 4 devices free: 16 free, none with 8)."""
    eng = QueueingScheduler(cluster(3), _policy(), journal=journal)
    for t, (jid, n, filler) in enumerate([("b0", 2, 6), ("b1", 2, 6), ("b2", 4, 4)]):
        now = 100.0 * t
        # the filler takes the rest of the host for the moment, so the job lands on the next host
        eng.submit(job(jid, n, est=86_400.0, priority_class="batch", same_host=True), now)
        eng.submit(job(f"f{jid}", filler, est=86_400.0, priority_class="batch", same_host=True), now)
        eng.cycle(now)
    for t, jid in enumerate(["fb0", "fb1", "fb2"]):
        eng.finish(jid, 250.0 + t)
    assert [_hosts(eng, j) for j in ("b0", "b1", "b2")] == [["a100-0"], ["a100-1"], ["a100-2"]]
    return eng


def test_same_host_job_preempts_on_the_cheapest_host_and_starts_there_after_the_grace() -> None:
    eng = _fragmented()
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", same_host=True), 300.0)
    res = eng.cycle(300.0)
    # 16 devices free by count, but no host has 8: the pipeline refuses, and one victim on one
    # host makes room; b2 lost least work (100 s against 200 s and 300 s), so a100-2 is chosen
    assert res.preempted == ["b2"]
    assert eng.jobs["b2"].state == JobState.PREEMPTING
    assert "p" in res.reservations
    rows = [e for e in eng.history("b2") if e.kind == "preempting"]
    assert rows[-1].data["host"] == "a100-2" and rows[-1].data["for"] == "p"
    _check(eng, 300.0)

    # during the grace period a job that would go to a100-2 (fewest free that fit: 4) is kept off it
    eng.submit(job("small", 3, est=86_400.0, priority_class="batch", same_host=True), 310.0)
    eng.cycle(310.0)
    assert _hosts(eng, "small") == ["a100-0"]
    _check(eng, 310.0)

    res = eng.cycle(300.0 + GRACE)
    assert "p" in res.started
    assert _hosts(eng, "p") == ["a100-2"]
    assert any(e.kind == "preempted" for e in eng.history("b2"))
    assert "a100-2" not in _hosts(eng, "b2")  # requeued; it may start again elsewhere, not on p's host
    _check(eng, 300.0 + GRACE)


def test_without_grace_it_starts_at_once_on_the_chosen_host() -> None:
    eng = QueueingScheduler(cluster(2), Policy(classes=CLASSES, preempt_mode=PreemptMode.REQUEUE))
    # a-0: two 4-device jobs; a-1: four 2-device jobs (full cluster)
    for i in range(2):
        eng.submit(job(f"x{i}", 4, est=86_400.0, priority_class="batch", same_host=True), 0.0)
    for i in range(4):
        eng.submit(job(f"y{i}", 2, est=86_400.0, priority_class="batch", same_host=True), 0.0)
    eng.cycle(0.0)
    assert _hosts(eng, "x0") == ["a100-0"] and _hosts(eng, "y3") == ["a100-1"]
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", same_host=True), 10.0)
    res = eng.cycle(10.0)
    # two victims on a100-0 beat four on a100-1
    assert sorted(res.preempted) == ["x0", "x1"]
    assert res.started == ["p"] and _hosts(eng, "p") == ["a100-0"]
    assert all(eng.jobs[f"y{i}"].state == JobState.RUNNING for i in range(4))
    _check(eng, 10.0)


def test_a_job_no_host_can_take_preempts_nothing() -> None:
    eng = QueueingScheduler(cluster(2), _policy())
    # every host keeps a non-preemptible 3-device job: no host can ever free 8 devices, although
    # 2 free and 8 preemptible devices make 10 in the pool (the count-based rule preempted both)
    for h in range(2):
        eng.submit(job(f"keep{h}", 3, est=86_400.0, priority_class="batch", same_host=True,
                       preemptible=False), 0.0)
        eng.submit(job(f"v{h}", 4, est=86_400.0, priority_class="batch", same_host=True), 0.0)
        eng.cycle(0.0)
    assert [_hosts(eng, j) for j in ("keep0", "v0", "keep1", "v1")] == [["a100-0"]] * 2 + [["a100-1"]] * 2
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", same_host=True), 10.0)
    res = eng.cycle(10.0)
    assert res.preempted == [] and res.started == []
    assert eng.jobs["p"].state == JobState.QUEUED
    assert eng.jobs["v0"].state == eng.jobs["v1"].state == JobState.RUNNING
    _check(eng, 10.0)


def test_a_multi_host_job_keeps_the_count_based_rule() -> None:
    eng = _fragmented()
    eng.submit(job("p", 8, est=3600.0, priority_class="prod"), 300.0)  # may be split over hosts
    res = eng.cycle(300.0)
    assert res.preempted == [] and res.started == ["p"]
    assert len(_hosts(eng, "p")) == 2


def test_the_pipeline_decides_cpu_too() -> None:
    """Devices are free by count, but the only host with a free device lacks CPU: the victim is
    the job holding that CPU (the count-based rule saw nothing to preempt)."""
    eng = QueueingScheduler(cluster(2), _policy())
    eng.submit(job("dev", 8, est=86_400.0, priority_class="batch", same_host=True), 0.0)
    eng.cycle(0.0)
    eng.submit(job("cpu", 1, est=86_400.0, priority_class="batch", cpu_milli=120_000), 5.0)
    eng.cycle(5.0)
    assert _hosts(eng, "dev") == ["a100-0"] and _hosts(eng, "cpu") == ["a100-1"]
    # a100-1: 7 free devices and 8,000 milli CPU left; a100-0: no free device
    eng.submit(job("s", 1, est=600.0, priority_class="prod", cpu_milli=100_000,
                   share=Share(compute_milli=500, memory_bytes=1 << 30)), 10.0)
    res = eng.cycle(10.0)
    # one victim either way (dev on a100-0, cpu on a100-1); cpu lost less work (5 s against 10 s)
    assert res.preempted == ["cpu"] and "s" in res.reservations
    res = eng.cycle(10.0 + GRACE)
    assert "s" in res.started and _hosts(eng, "s") == ["a100-1"]
    assert eng.jobs["dev"].state == JobState.RUNNING
    _check(eng, 10.0 + GRACE)


def test_recovery_in_the_grace_period_keeps_the_host(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    eng = _fragmented(path)
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", same_host=True), 300.0)
    eng.cycle(300.0)
    eng.journal.close()
    back = QueueingScheduler.recover(cluster(3), Journal(path), _policy())
    live = _fragmented()
    live.submit(job("p", 8, est=3600.0, priority_class="prod", same_host=True), 300.0)
    live.cycle(300.0)
    assert back.snapshot() == live.snapshot()
    for eng2 in (back, live):
        eng2.submit(job("small", 3, est=86_400.0, priority_class="batch", same_host=True), 310.0)
        eng2.cycle(310.0)
        assert _hosts(eng2, "small") == ["a100-0"]  # the rebuilt engine keeps a100-2 for p too
        eng2.cycle(300.0 + GRACE)
        assert _hosts(eng2, "p") == ["a100-2"]
        _check(eng2, 300.0 + GRACE)
    assert back.snapshot() == live.snapshot()
    back.journal.close()


def test_two_one_host_preemptors_take_two_hosts() -> None:
    eng = _fragmented()
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", same_host=True), 300.0)
    eng.submit(job("q", 8, est=3600.0, priority_class="prod", same_host=True), 300.0)
    res = eng.cycle(300.0)
    # p takes the cheapest host (a100-2, victim b2); q the next cheapest (a100-1, victim b1)
    assert res.preempted == ["b2", "b1"]
    assert {r.data["host"] for j in ("b1", "b2") for r in eng.history(j) if r.kind == "preempting"} \
        == {"a100-1", "a100-2"}
    _check(eng, 300.0)
    res = eng.cycle(300.0 + GRACE)
    assert {"p", "q"} <= set(res.started)
    assert _hosts(eng, "p") == ["a100-2"] and _hosts(eng, "q") == ["a100-1"]
    _check(eng, 300.0 + GRACE)


def test_a_required_in_host_topology_makes_a_job_one_host() -> None:
    eng = _fragmented()
    link = TopologyConstraint(TopologyLevel.LINK_DOMAIN, required=True)
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", topology=link), 300.0)
    res = eng.cycle(300.0)
    assert res.preempted == ["b2"]
    res = eng.cycle(300.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["a100-2"]
    _check(eng, 300.0 + GRACE)


def test_a_victim_that_was_to_stop_before_the_grace_ends_holds_its_devices_until_then() -> None:
    """Found by the stateful test: a one-host preemptor took a victim expected to stop before
    the grace period would end; the views still freed its devices at that earlier time, so a
    later job was reserved on them and the reservation did not hold."""
    eng = QueueingScheduler(cluster(3, per_host=4), Policy(
        classes=STATEFUL_CLASSES, backfill=BackfillMode.EASY, preempt_mode=PreemptMode.REQUEUE, grace_s=GRACE,
        default_class="batch", plan_depth=8, demote_after_device_s=(300.0,)), tenants=TENANTS)
    share = Share(400, 8 * GIB)
    n = 0

    def sub(devices: int, klass: str, tenant: str, now: float, *, shared: bool = False) -> None:
        nonlocal n
        n += 1
        eng.submit(job(f"j{n}", devices, est=30.0, priority_class=klass, tenant=tenant,
                       share=share if shared else None), now, estimate=n % 3 == 0)

    def cycle(now: float) -> None:
        eng.cycle(now)
        eng.verify_reservations(now)
        eng.check_invariants()

    sub(1, "prod", "a", 0.0, shared=True)
    cycle(0.0)
    sub(7, "prod", "a", 0.0)
    sub(1, "prod", "a", 0.0)
    for _ in range(4):
        cycle(0.0)
    sub(1, "prod", "a", 0.0)
    cycle(0.0)
    sub(2, "batch", "a", 0.0)
    for t in (40.0, 40.0, 50.0, 50.0, 50.0):
        cycle(t)
    sub(1, "prod", "a", 50.0)
    sub(1, "prod", "b", 50.0, shared=True)
    sub(1, "prod", "a", 50.0)
    res = eng.cycle(50.0)
    # j5 (batch, expected to stop at 70) was the victim on a100-0 of the share j7 and then held
    # its devices until the grace period's end, 80, so j8's reservation had to be made around
    # it.  Now a job expected to end before the grace period would is never a victim (it would
    # free nothing sooner and lose its work): j5 runs on and j7 waits for it
    assert "j5" not in res.preempted
    assert eng.jobs["j5"].state == JobState.RUNNING
    assert ends_in_grace(eng._st, eng.jobs["j5"], 50.0)
    eng.verify_reservations(50.0)
    eng.check_invariants()
    for t in (70.0, 80.0, 100.0):
        cycle(t)
