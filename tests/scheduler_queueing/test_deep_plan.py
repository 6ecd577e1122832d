"""Issue 35: exact start estimates far down deep queues, from a plan kept between estimates.

``_walk.PLAN_CHECK`` makes every answer of the kept plan be planned again by the full walk and
compared (start and reason per pool); these replays run with it on, so each passing replay
checks every estimate it took.  They also check that the kept plan was used (and refused where
it must be), and that with true durations the exact estimates are the actual starts.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from accel.scheduler.queueing import (
    BackfillMode,
    DeclaredEstimator,
    InClassOrder,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    Quota,
    Simulator,
    Tenant,
    TraceJob,
    _walk,
    uniform_cluster,
)

EXACT = sys.maxsize


def _jobs(seed: int, n: int = 160) -> list[TraceJob]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for k in range(n):
        t += rng.expovariate(1 / 40.0)
        out.append(TraceJob(f"j{k}", round(t), rng.choice((1, 1, 2, 4, 8)), float(rng.randint(30, 2400)),
                            tenant=rng.choice(("a", "b"))))
    return out


def _policy(tiered: bool, depth: int = 8) -> Policy:
    extra: dict[str, Any] = {"preempt_mode": PreemptMode.SUSPEND, "demote_after_device_s": (6000.0,),
                             "preempt_overhead_s": 30.0} if tiered else {}
    return Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                  plan_depth=depth, **extra)


class _Count:
    """Counts the kept plan's reuses and refusals (wrapping ``_walk._reuse``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ok = self.refused = 0
        plain = _walk._reuse

        def counted(*a: Any) -> Any:
            got = plain(*a)
            if got[0] is None:
                self.refused += 1
            else:
                self.ok += 1
            return got

        monkeypatch.setattr(_walk, "_reuse", counted)
        monkeypatch.setattr(_walk, "PLAN_CHECK", True)


class _Scaled(DeclaredEstimator):
    """Declares some jobs' durations wrong (x0.5 or x2), so they end before or after the plan."""

    def estimate(self, job: TraceJob) -> float:
        k = int(job.id[1:])
        return job.duration_s * (0.5 if k % 5 == 0 else 2.0 if k % 7 == 0 else 1.0)


@pytest.mark.parametrize("tiered", [False, True], ids=["conservative", "tiered"])
def test_kept_plan_answers_what_the_full_walk_answers(tiered: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    count = _Count(monkeypatch)
    eng = QueueingScheduler(uniform_cluster(2, 8), _policy(tiered))  # the cycle reserves 8 deep
    res = Simulator(eng, _jobs(0, 90), estimate_depth=EXACT).run()
    eng.check_invariants()
    assert count.ok > 60  # the deep queue was planned from the kept plan, not walked afresh
    waited = [o for o in res.outcomes if o.start_s is not None and o.start_s - o.submit_s >= 60.0]
    assert len(waited) > 20


@pytest.mark.parametrize("tiered", [False, True], ids=["conservative", "tiered"])
def test_exact_estimates_are_the_starts_when_the_cycle_reserves_as_deep(tiered: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """True durations, the cycle reserving every waiting job: each exact estimate is the actual
    start.  (With the cycle reserving fewer, a later job may backfill where the plan had booked
    a job past that depth: the estimate is then the plan's, not the cycle's.)"""
    count = _Count(monkeypatch)
    eng = QueueingScheduler(uniform_cluster(2, 8), _policy(tiered, depth=10_000))
    res = Simulator(eng, _jobs(1, 70), estimate_depth=EXACT).run()
    assert count.ok > 40
    for o in res.outcomes:
        assert o.estimate_s is not None and o.start_s is not None
        assert o.estimate_s == pytest.approx(o.start_s, abs=1e-6), o.id


@pytest.mark.parametrize("tiered", [False, True], ids=["conservative", "tiered"])
def test_kept_plan_is_refused_when_jobs_end_off_plan(tiered: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs that end before or after their declared duration leave the running jobs' view off the
    plan: the kept plan must be refused then (and the full walk's answer given), and used again
    once the plan holds."""
    count = _Count(monkeypatch)
    eng = QueueingScheduler(uniform_cluster(2, 8), _policy(tiered))
    Simulator(eng, _jobs(7, 80), _Scaled(), estimate_depth=EXACT).run()
    eng.check_invariants()
    assert count.refused > 5 and count.ok > 5


def test_quotes_between_submissions_do_not_spoil_the_kept_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quote's throwaway target is never queued: the plan kept after it still serves."""
    count = _Count(monkeypatch)
    eng = QueueingScheduler(uniform_cluster(2, 8), _policy(True))
    sim = Simulator(eng, _jobs(11, 60), estimate_depth=EXACT)
    from accel.scheduler.queueing import JobSpec

    k = 0
    while sim.step():
        k += 1
        if k % 3 == 0 and eng.queue():
            quotes = eng.quote(JobSpec(id=f"q{k}", tenant="a", devices=4, estimate_s=600.0), eng.now, depth=EXACT)
            assert quotes and quotes[0].start_at >= eng.now
    assert count.ok > 25


def test_quotas_leave_the_estimate_to_the_full_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Admission that depends on the plan (tenant quotas) is outside the kept plan's case."""
    count = _Count(monkeypatch)
    tenants = [Tenant("a", guaranteed={"*": Quota(devices=8)})]
    eng = QueueingScheduler(uniform_cluster(2, 8), _policy(False), tenants=tenants)
    Simulator(eng, _jobs(3, 40), estimate_depth=EXACT).run()
    assert count.ok == count.refused == 0


def test_the_default_is_exact_where_the_kept_plan_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default estimate plans every job ahead exactly in the kept plan's case, and the
    policy's ``plan_depth`` (fluid past it) elsewhere; an explicit depth still plans fluid past
    it (``test_sim``'s example: one 8-device host, plan depth 1, D estimated at 250 s planning
    one job exactly, though it starts at 300 s; exact: 300 s)."""
    count = _Count(monkeypatch)
    jobs = [TraceJob("A", 0.0, 8, 100.0), TraceJob("B", 1.0, 4, 100.0), TraceJob("C", 2.0, 8, 100.0),
            TraceJob("D", 3.0, 8, 100.0)]
    for tiered in (False, True):
        for depth, want in ((1, 250.0), (None, 300.0), (EXACT, 300.0)):
            eng = QueueingScheduler(uniform_cluster(1, 8), _policy(tiered, depth=1))
            res = Simulator(eng, jobs, estimate_depth=depth).run()
            got = {o.id: (o.estimate_s, o.start_s) for o in res.outcomes}["D"]
            assert got == (want, 300.0), (tiered, depth)
    assert count.ok > 0
    # outside the case (a grace period, a quota): the default is the policy's depth, walked
    for extra in ({"grace_s": 30.0}, {}):
        pol = Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                     plan_depth=1, **extra)
        tenants = [] if extra else [Tenant("t", guaranteed={"*": Quota(devices=8)})]
        runs = {}
        for depth in (None, 1, EXACT):
            eng = QueueingScheduler(uniform_cluster(1, 8), pol, tenants=tenants)
            before = count.ok
            res = Simulator(eng, [TraceJob(j.id, j.submit_s, j.devices, j.duration_s, tenant="t") for j in jobs],
                            estimate_depth=depth).run()
            assert count.ok == before  # the kept plan never answered
            runs[depth] = {o.id: o.estimate_s for o in res.outcomes}
        assert runs[None] == runs[1], extra
        if extra:  # the grace period changes nothing here but the default depth
            assert (runs[None]["D"], runs[EXACT]["D"]) == (250.0, 300.0)
