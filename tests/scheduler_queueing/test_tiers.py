"""Attained-service tiers (``Policy.demote_after_device_s``): a job that has had its share goes
behind new ones and is preempted for them; attained service never goes down (no thrash); a
new job's start estimate books the jobs ahead only until they leave its tier, and is exact with
true durations; the capped history mean equals its brute-force definition; state survives a
rebuild from the journal."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from accel.scheduler import InvalidRequestError
from accel.scheduler.queueing import (
    BackfillMode,
    DeclaredModel,
    HistoryModel,
    InClassOrder,
    JobState,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    Simulator,
    TraceJob,
    WaitReason,
)
from accel.scheduler.queueing._estimators import capped_remaining

from .conftest import cluster, job


def tiered(threshold: float = 3600.0, overhead: float = 0.0, **kw: object) -> Policy:
    return Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                  preempt_mode=PreemptMode.SUSPEND, demote_after_device_s=(threshold,),
                  preempt_overhead_s=overhead, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [(0.0,), (100.0, 50.0), (100.0, 100.0), (math.inf,), (-1.0,)])
def test_thresholds_must_be_positive_and_ascending(bad: tuple[float, ...]) -> None:
    with pytest.raises(InvalidRequestError, match="demote_after_device_s"):
        Policy(demote_after_device_s=bad)


def test_overhead_must_be_non_negative() -> None:
    with pytest.raises(InvalidRequestError, match="preempt_overhead_s"):
        Policy(preempt_overhead_s=-1.0)


def test_a_job_past_its_share_is_preempted_for_a_new_one_and_resumes_with_its_work() -> None:
    eng = QueueingScheduler(cluster(hosts=1, per_host=2), tiered(threshold=1000.0, overhead=60.0))
    eng.submit(job("long", devices=2, est=50_000.0), 0.0)
    eng.cycle(0.0)
    assert eng.jobs["long"].state == JobState.RUNNING
    eng.submit(job("new", devices=1, est=100.0), 100.0)
    eng.cycle(100.0)
    # 2 devices x 100 s = 200 device-s attained: still tier 0, so the new job waits for it
    assert eng.jobs["new"].state == JobState.QUEUED
    assert eng.next_wakeup(100.0) == pytest.approx(500.0)  # 1000 device-s on 2 devices
    eng.cycle(500.0)
    long, new = eng.jobs["long"], eng.jobs["new"]
    assert new.state == JobState.RUNNING
    assert long.state == JobState.SUSPENDED
    assert long.work_s == pytest.approx(440.0) and long.lost_s == pytest.approx(60.0)  # 500 s run, 60 s overhead
    assert eng.tier(long) == 1  # the lost minute still counts as service received: no way back to tier 0
    hist = eng.history("long")
    assert "tier 0 goes before tier 1" in hist[-1].reason
    demoted = [e for e in hist if e.kind == "demoted"]
    assert len(demoted) == 1 and demoted[0].data["tier"] == 1 and demoted[0].t == 500.0
    assert "1000 device-s of service passed 1000" in demoted[0].reason
    eng.finish("new", 600.0)
    eng.cycle(600.0)
    assert long.state == JobState.RUNNING and long.attempts == 2
    eng.check_invariants()


def test_no_thrash_between_two_long_jobs_of_one_device() -> None:
    """Both pass the threshold; inside the last tier they keep submit order, nobody ping-pongs."""
    eng = QueueingScheduler(cluster(hosts=1, per_host=1), tiered(threshold=100.0, overhead=60.0))
    jobs = [TraceJob("a", 0.0, 1, 1000.0), TraceJob("b", 50.0, 1, 1000.0)]
    res = Simulator(eng, jobs).run()
    eng.check_invariants()
    a, b = eng.jobs["a"], eng.jobs["b"]
    assert a.attempts == 2 and b.attempts == 1  # a preempted once (at t=100, for b in tier 0), b never
    assert a.lost_s == pytest.approx(60.0) and b.lost_s == 0.0
    assert b.ended_at == pytest.approx(1100.0)  # b: started at 100, never preempted
    assert a.ended_at == pytest.approx(2060.0)  # a: 100 s run, 40 s kept, the other 960 s from 1100
    assert res.metrics()["lost_work_s"] == pytest.approx(60.0)


def test_new_jobs_start_estimate_is_exact_with_true_durations() -> None:
    """Four devices, busy; new jobs wait for tier-0 jobs to end or to pass their share, never for
    the rest of a long job, and the estimate taken at submission is the actual start."""
    rng = random.Random(7)
    jobs = [TraceJob(f"j{i}", float(i * 37), rng.choice([1, 1, 2, 4]), rng.choice([30.0, 400.0, 5000.0, 40_000.0]))
            for i in range(60)]
    eng = QueueingScheduler(cluster(hosts=1, per_host=4), tiered(threshold=2000.0))
    res = Simulator(eng, jobs).run()
    eng.check_invariants()
    waited = [o for o in res.outcomes if o.start_s is not None and o.start_s - o.submit_s >= 60.0]
    assert len(waited) >= 10
    errs = [abs(o.estimate_s - o.start_s) / (o.start_s - o.submit_s) for o in waited  # type: ignore[operator]
            if o.estimate_s is not None]
    assert len(errs) == len(waited)
    assert statistics.median(errs) < 1e-6
    # nobody waited behind the full length of a 40,000 s job
    assert max(o.start_s - o.submit_s for o in waited) < 20_000  # type: ignore[operator]


def test_estimate_books_the_jobs_ahead_only_for_their_tier_budget() -> None:
    eng = QueueingScheduler(cluster(hosts=1, per_host=1), tiered(threshold=1000.0))
    eng.submit(job("a", est=100_000.0), 0.0)
    eng.cycle(0.0)
    eng.submit(job("b", est=100_000.0), 10.0)
    eng.submit(job("c", est=100_000.0), 20.0, estimate=True)
    eng.cycle(20.0)
    # a leaves tier 0 at 1000 (b preempts it), b holds 1000 s more: c starts at 2000, not at 200,000
    assert eng.jobs["c"].estimate_at_submit == pytest.approx(2000.0)
    (est,) = eng.estimate("c")
    assert est.start_at == pytest.approx(2000.0)
    assert est.reason in (WaitReason.CAPACITY, WaitReason.PRIORITY)


def test_next_wakeup_is_none_without_tiers_or_waiters() -> None:
    eng = QueueingScheduler(cluster(hosts=1, per_host=1), Policy())
    eng.submit(job("a"), 0.0)
    eng.cycle(0.0)
    eng.submit(job("b"), 1.0)
    assert eng.next_wakeup() is None
    eng2 = QueueingScheduler(cluster(hosts=1, per_host=1), tiered())
    eng2.submit(job("a"), 0.0)
    eng2.cycle(0.0)
    assert eng2.next_wakeup() is None  # nothing waits


def test_capped_remaining_of_declared_model() -> None:
    m = DeclaredModel()
    assert capped_remaining(m, ("t", 1), 5000.0, 0.0, 1000.0, 600.0) == 1000.0
    assert capped_remaining(m, ("t", 1), 500.0, 100.0, 1000.0, 600.0) == 400.0
    assert capped_remaining(m, ("t", 1), 500.0, 1000.0, 1000.0, 600.0) == 0.0
    assert capped_remaining(m, ("t", 1), 500.0, 100.0, math.inf, 600.0) == 400.0


@pytest.mark.parametrize("seed", range(20))
def test_capped_history_mean_matches_its_definition(seed: int) -> None:
    rng = random.Random(seed)
    model = HistoryModel(window=rng.choice([None, 8, 64]), statistic="mean")
    for _ in range(rng.randint(1, 120)):
        model.observe(("vc", rng.choice([1, 2])), rng.lognormvariate(6, 2))
    key = ("vc", rng.choice([1, 2]))
    done = rng.choice([0.0, rng.lognormvariate(5, 2)])
    cap = done + rng.lognormvariate(6, 2)
    got = model.remaining_capped(key, 3600.0, done, cap, 600.0)
    hist = model.history(key)
    assert hist is not None
    longer = [min(d, cap) - done for d in hist if d > done]
    if longer:
        want = min(cap - done, max(1.0, statistics.fmean(longer)))
        assert got == pytest.approx(want, rel=1e-9)
    else:
        assert got <= cap - done


def test_tiered_run_rebuilds_from_its_journal(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "j.db"
    rng = random.Random(3)
    jobs = [TraceJob(f"j{i}", float(i * 20), rng.choice([1, 2]), rng.choice([50.0, 3000.0, 9000.0]))
            for i in range(40)]
    eng = QueueingScheduler(cluster(hosts=1, per_host=4), tiered(threshold=1500.0, overhead=30.0), journal=path)
    Simulator(eng, jobs).run()
    eng.journal.close()  # one writer at a time: the rebuilt engine takes the journal over
    again = QueueingScheduler.recover(cluster(hosts=1, per_host=4), path, tiered(threshold=1500.0, overhead=30.0))
    assert again.snapshot() == eng.snapshot()
    assert sum(j.attempts for j in eng.jobs.values()) > len(jobs)  # preemptions did happen


def _two_class_engine(tiers: tuple[float, ...]) -> QueueingScheduler:
    classes = (PriorityClass("prod", 10, InClassOrder.FIFO), PriorityClass("batch", 0, InClassOrder.FIFO))
    pol = Policy(classes=classes, backfill=BackfillMode.EASY, preempt_mode=PreemptMode.REQUEUE,
                 demote_after_device_s=tiers, default_class="batch")
    return QueueingScheduler(cluster(hosts=1, per_host=4), pol)


def test_a_lower_class_job_holds_its_whole_duration_against_a_higher_class_reservation() -> None:
    """Its tier cap counts only inside its own class: a 2-device, 1,000 s batch job leaves batch's
    tier 0 after 200 s, but it must not start on devices a prod reservation needs at 300 s."""
    eng = _two_class_engine((400.0,))
    eng.submit(job("p1", devices=1, est=300.0, priority_class="prod"), 0.0)
    eng.cycle(0.0)
    eng.submit(job("p2", devices=4, est=30.0, priority_class="prod"), 10.0)
    eng.submit(job("b1", devices=2, est=1000.0, priority_class="batch"), 10.0)
    res = eng.cycle(10.0)
    assert res.reservations == {"p2": pytest.approx(300.0)}
    assert eng.jobs["b1"].state == JobState.QUEUED  # 10..1010 would overlap p2's 300..330
    eng.verify_reservations(10.0)


def test_a_lower_class_job_cannot_count_on_preempting_its_own_class_for_a_higher_reservation() -> None:
    """batch job b0 leaves tier 0 at 60 s, so another batch job could then preempt it; a prod
    reservation cannot, so a batch newcomer must not take the free device p2 is promised at 100 s."""
    eng = _two_class_engine((120.0,))
    eng.submit(job("b0", devices=2, est=5000.0, priority_class="batch"), 0.0)
    eng.submit(job("p1", devices=1, est=100.0, priority_class="prod"), 0.0)
    eng.cycle(0.0)
    eng.submit(job("p2", devices=2, est=30.0, priority_class="prod"), 10.0)
    eng.submit(job("b1", devices=1, est=300.0, priority_class="batch"), 10.0)
    res = eng.cycle(10.0)
    assert res.reservations == {"p2": pytest.approx(100.0)}
    assert eng.jobs["b1"].state == JobState.QUEUED
    eng.verify_reservations(10.0)
    eng.check_invariants()


def test_restricted_kaplan_meier_recovers_the_capped_mean_under_censoring() -> None:
    """E[min(D, cap)] from finished jobs and running ones (censored at their elapsed time): the
    restricted KM mean is right where the finished-only capped mean is biased short."""
    rng = random.Random(0)
    durations = [rng.expovariate(1 / 1000) for _ in range(4000)]
    cap = 800.0
    truth = statistics.fmean(min(d, cap) for d in durations)
    finished: list[float] = []
    running: list[float] = []
    for d in durations:
        seen = rng.uniform(0, 3000)  # when we look at this job
        (finished if d <= seen else running).append(d if d <= seen else seen)
    model = HistoryModel(window=None, statistic="mean", plan_statistic="km-mean")
    for d in finished:
        model.observe(("vc", 1), d)
    model.attach(lambda: 0.0, lambda: [(("vc", 1), e) for e in running])
    got = model.remaining_capped(("vc", 1), 3600.0, 0.0, cap, 600.0)
    biased = statistics.fmean(min(d, cap) for d in finished)
    assert abs(got - truth) / truth < 0.02
    assert biased < 0.9 * truth  # the finished-only answer it corrects
    # conditional on having run 300 s already
    want = statistics.fmean(min(d, cap) - 300 for d in durations if d > 300)
    assert model.remaining_capped(("vc", 1), 3600.0, 300.0, cap, 600.0) == pytest.approx(want, rel=0.03)


def test_tiered_estimates_cover_every_pool_with_a_reason() -> None:
    eng = QueueingScheduler(cluster(pools={"A100": 1, "H100": 1}, per_host=2), tiered(threshold=1000.0))
    eng.submit(job("a", devices=2, est=5000.0, pool="A100"), 0.0)
    eng.submit(job("h", devices=2, est=200.0, pool="H100"), 0.0)
    eng.cycle(0.0)
    eng.submit(job("x", devices=2, est=100.0), 10.0)  # any pool
    eng.cycle(10.0)
    ests = eng.estimate("x")
    assert [e.pool for e in ests] == ["H100", "A100"]  # H100 frees at 200, A100 when "a" leaves tier 0 at 500
    assert ests[0].start_at == pytest.approx(200.0) and ests[1].start_at == pytest.approx(500.0)
    assert all(e.reason == WaitReason.CAPACITY for e in ests)
    assert "H100 pool: about 3 minutes (capacity)" in ests[0].describe()


def test_cross_class_preemption_inside_a_tiered_walk_keeps_its_reservations() -> None:
    """Found by the stateful test: prod j8 preempting batch jobs must not take devices that prod
    j7's reservation (made earlier in the same cycle) counts on."""
    from accel.scheduler import Share

    from .conftest import GIB
    from .test_stateful import CLASSES, TENANTS

    pol = Policy(classes=CLASSES, backfill=BackfillMode.EASY, preempt_mode=PreemptMode.REQUEUE,
                 default_class="batch", plan_depth=8, demote_after_device_s=(300.0,))
    eng = QueueingScheduler(cluster(hosts=3, per_host=4), pol, tenants=TENANTS)
    n = 0

    def sub(devices: int, klass: str, tenant: str = "a", est: float = 30.0, share: bool = False) -> None:
        nonlocal n
        n += 1
        eng.submit(job(f"j{n}", devices=devices, est=est, priority_class=klass, tenant=tenant,
                       share=Share(400, 8 * GIB) if share else None), eng.now)

    eng.cycle(0.0)
    sub(1, "prod")
    sub(1, "prod")
    eng.cycle(0.0)
    eng.update_health(0.0, {"a100-0/gpu2": False})
    sub(4, "batch")
    eng.cycle(0.0)
    eng.finish("j1", 0.0, ok=False)
    sub(1, "prod")
    eng.update_health(0.0, {"a100-0/gpu0": False})
    sub(1, "prod", share=True)
    eng.cycle(0.0)
    eng.cycle(40.0)
    sub(3, "batch")
    eng.cycle(40.0)
    sub(5, "prod", tenant="b")
    sub(1, "prod", est=300.0)
    res = eng.cycle(40.0)
    assert "j8" in res.started and res.preempted  # j8 started by preempting a batch job
    assert res.reservations == {"j7": pytest.approx(300.0)}
    eng.verify_reservations(40.0)
    eng.check_invariants()


def test_capped_remaining_at_or_past_the_cap_is_zero() -> None:
    model = HistoryModel(window=None, statistic="mean")
    model.observe(("vc", 1), 500.0)
    assert model.remaining_capped(("vc", 1), 3600.0, 800.0, 800.0, 600.0) == 0.0
    assert model.remaining_capped(("vc", 1), 3600.0, 900.0, 800.0, 600.0) == 0.0
