"""The starvation guard (``Policy.promote_after_wait_s`` / ``promote_after_wait_ratio``):
promotion after a configurable wait, as Tiresias does, journaled and rebuilt after a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.scheduler import InvalidRequestError
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

from .conftest import cluster, job

H = 3600.0
SHORTEST = (PriorityClass("default", 0, InClassOrder.SHORTEST),)


def _stream(eng: QueueingScheduler, until: float) -> float | None:
    """A long job behind a stream of short ones on one 8-device host: a 1 h job arrives every
    hour, half an hour before the running one ends, so a shorter job always waits.  Returns
    when the long job started (``None``: never, up to ``until``)."""
    eng.submit(job("long", 8, 10 * H), 0.0)
    eng.submit(job("s0", 8, H), 0.0)
    eng.cycle(0.0)
    k, t = 0, 0.0
    while t < until:
        t += H / 2
        if t % H == 0:  # the running short job ends
            running = [j.id for j in eng.running() if j.id.startswith("s")]
            for jid in running:
                eng.finish(jid, t)
        else:
            k += 1
            eng.submit(job(f"s{k}", 8, H), t)
        eng.cycle(t)
        eng.check_invariants()
        if eng.jobs["long"].state == JobState.RUNNING:
            return eng.jobs["long"].started_at
    return None


def test_a_job_starved_by_short_jobs_starts_within_the_bound_only_with_the_guard() -> None:
    without = QueueingScheduler(cluster(hosts=1), Policy(classes=SHORTEST, backfill=BackfillMode.EASY))
    assert _stream(without, 24 * H) is None  # a day of short jobs: it never starts
    guarded = QueueingScheduler(cluster(hosts=1), Policy(classes=SHORTEST, backfill=BackfillMode.EASY,
                                                         promote_after_wait_s=3 * H))
    started = _stream(guarded, 24 * H)
    # promoted after 3 h of waiting, it starts when the short job running then ends (1 h at most)
    assert started is not None and 3 * H <= started <= 4 * H
    kinds = [e.kind for e in guarded.history("long")]
    assert kinds == ["submitted", "promoted", "admitted", "placed"]
    promoted = guarded.history("long")[1]
    assert promoted.t == pytest.approx(3 * H) and promoted.data["waited_s"] == pytest.approx(3 * H)


def test_the_ratio_promotes_after_a_multiple_of_the_last_run_and_tiers_count_afresh() -> None:
    # tiers of 1000 device-s; "old" runs 2000 s on 1 device (tier 2), is preempted by a new
    # job of tier 0, and waits behind a stream of tier-0 jobs; ratio 2: promoted 4000 s later
    pol = Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                 preempt_mode=PreemptMode.SUSPEND, demote_after_device_s=(1000.0, 1500.0),
                 promote_after_wait_ratio=2.0)
    eng = QueueingScheduler(cluster(hosts=1, per_host=1), pol)
    eng.submit(job("old", 1, 10 * H), 0.0)
    eng.cycle(0.0)
    eng.submit(job("new0", 1, 900.0), 2000.0)
    res = eng.cycle(2000.0)
    assert res.preempted == ["old"] and "new0" in res.started
    old = eng.jobs["old"]
    assert old.last_run_s == pytest.approx(2000.0) and eng.tier(old) == 2
    assert eng.promote_at(old) == pytest.approx(2000.0 + 4000.0)
    for k, t in enumerate((2900.0, 3800.0, 4700.0, 5600.0)):  # a new 900 s job whenever one ends
        eng.finish(f"new{k}", t)
        eng.submit(job(f"new{k + 1}", 1, 900.0), t)
        eng.cycle(t)
        assert old.state == JobState.SUSPENDED and eng.jobs[f"new{k + 1}"].state == JobState.RUNNING
    assert eng.next_wakeup(5600.0) == pytest.approx(6000.0)  # the promotion is a wake-up
    eng.cycle(6000.0)
    assert old.promoted and [e.kind for e in eng.history("old")][-1] == "promoted"
    assert eng.jobs["new4"].state == JobState.RUNNING  # tier 0 too: not preempted for it
    eng.finish("new4", 6500.0)
    eng.submit(job("new5", 1, 900.0), 6500.0)
    eng.cycle(6500.0)  # first in its tier now, ahead of new5
    assert old.state == JobState.RUNNING and not old.promoted and eng.tier(old) == 0
    # a new tier-0 job does not preempt it before it has run 1000 s again
    eng.submit(job("late", 1, 900.0), 6600.0)
    assert eng.cycle(6600.0).preempted == []
    eng.check_invariants()


def test_promotions_are_rebuilt_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    pol = Policy(classes=SHORTEST, backfill=BackfillMode.EASY, promote_after_wait_s=3 * H)
    eng = QueueingScheduler(cluster(hosts=1), pol, journal=path)
    _stream(eng, 3.5 * H)
    snap = eng.snapshot()
    order = [j.id for j in eng.queue()]
    eng.journal.close()
    again = QueueingScheduler.recover(cluster(hosts=1), Journal(path), pol)
    assert again.snapshot() == snap and [j.id for j in again.queue()] == order
    assert again.jobs["long"].state == JobState.RUNNING


def test_bad_guard_settings_are_refused_with_the_field() -> None:
    for kw in ({"promote_after_wait_s": 0.0}, {"promote_after_wait_ratio": -1.0},
               {"promote_after_wait_s": float("inf")}):
        with pytest.raises(InvalidRequestError) as err:
            Policy(**kw)  # type: ignore[arg-type]
        assert err.value.field == next(iter(kw))
