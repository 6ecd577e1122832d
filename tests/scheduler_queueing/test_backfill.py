"""Backfill with reservations: the seed's example, EASY vs strict order, conservative mode."""

from __future__ import annotations

import pytest

from accel.scheduler.queueing import BackfillMode, JobState, Policy, QueueingScheduler, WaitReason

from .conftest import cluster, job

H = 3600.0


def _seed(mode: BackfillMode) -> QueueingScheduler:
    """9 hosts x 8 = 72 devices.  70 are busy: 62 until 3 h, 8 until 1 h; a 64-device training
    job is queued first, then a 2-device, 30-minute evaluation job."""
    eng = QueueingScheduler(cluster(hosts=9), Policy(backfill=mode))
    for i in range(7):
        eng.submit(job(f"busy{i}", 8, 3 * H), 0)
    eng.submit(job("busy7", 6, 3 * H), 0)
    eng.cycle(0)
    eng.submit(job("short-busy", 8, 1 * H), 0)
    eng.cycle(0)
    assert eng.pool_free("A100") == 2
    eng.submit(job("train", 64, 24 * H), 10)
    eng.submit(job("eval", 2, 0.5 * H), 20)
    eng.cycle(20)
    return eng


def test_seed_example_eval_job_backfills_without_delaying_the_training_job() -> None:
    eng = _seed(BackfillMode.EASY)
    ev, train = eng.jobs["eval"], eng.jobs["train"]
    assert ev.state == JobState.RUNNING and ev.started_at == 20  # it does not wait 3 hours
    assert train.state == JobState.QUEUED
    pool, at, n = eng.reservations["train"]
    assert (pool, n) == ("A100", 64) and at == pytest.approx(3 * H)  # when the 62 devices come back
    eng.verify_reservations()
    eng.check_invariants()
    # the reservation holds: the eval job ends first, the training job starts at 3 h
    eng.finish("eval", 20 + 0.5 * H)
    eng.finish("short-busy", H)
    eng.cycle(H)
    for i in range(8):
        eng.finish(f"busy{i}", 3 * H)
    eng.cycle(3 * H)
    assert train.state == JobState.RUNNING and train.started_at == pytest.approx(3 * H)


def test_strict_order_makes_the_eval_job_wait_behind_the_training_job() -> None:
    eng = _seed(BackfillMode.NONE)
    assert eng.jobs["eval"].state == JobState.QUEUED
    est = eng.estimate("eval")
    assert est[0].start_at >= 3 * H and est[0].reason in (WaitReason.PRIORITY, WaitReason.RESERVATION)


def test_long_backfill_only_uses_spare_devices() -> None:
    # 16 devices; 12 busy until 2 h; head wants 16 at 2 h; a 4-device 5 h job must not start now
    eng = QueueingScheduler(cluster(hosts=2), Policy(backfill=BackfillMode.EASY))
    eng.submit(job("busy", 12, 2 * H), 0)
    eng.cycle(0)
    eng.submit(job("head", 16, H), 1)
    eng.submit(job("long", 4, 5 * H), 2)
    eng.submit(job("short", 4, 1 * H), 3)
    eng.cycle(3)
    assert eng.jobs["long"].state == JobState.QUEUED
    assert eng.jobs["long"].wait == WaitReason.RESERVATION
    assert eng.jobs["short"].state == JobState.RUNNING
    eng.verify_reservations()


def test_conservative_mode_reserves_for_every_blocked_job() -> None:
    eng = QueueingScheduler(cluster(hosts=2), Policy(backfill=BackfillMode.CONSERVATIVE))
    eng.submit(job("busy", 12, 2 * H), 0)
    eng.cycle(0)
    eng.submit(job("a", 16, H), 1)
    eng.submit(job("b", 8, H), 2)
    eng.submit(job("c", 4, 0.5 * H), 3)
    res = eng.cycle(3)
    assert set(res.reservations) == {"a", "b"}
    assert res.reservations["a"] == pytest.approx(2 * H) and res.reservations["b"] == pytest.approx(3 * H)
    assert "c" in res.started  # ends before any reservation needs its devices
    eng.verify_reservations()
    # EASY would have reserved only for the first blocked job
    easy = QueueingScheduler(cluster(hosts=2), Policy(backfill=BackfillMode.EASY))
    easy.submit(job("busy", 12, 2 * H), 0)
    easy.cycle(0)
    easy.submit(job("a", 16, H), 1)
    easy.submit(job("b", 8, H), 2)
    assert set(easy.cycle(3).reservations) == {"a"}
