"""The engine's stages: the planning walk's two modes and the named state they share."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accel.scheduler.queueing import JobSpec, JobState, QueueingScheduler

from ._crash_common import WORKLOADS, make_cluster, make_rich_jobs


def _rich_engine(tiered: bool) -> QueueingScheduler:
    w = WORKLOADS["rich"]
    policy = w.policy if tiered else replace(w.policy, demote_after_device_s=())
    eng = QueueingScheduler(make_cluster(), policy, tenants=w.tenants, prices=w.prices)
    for k, j in enumerate(make_rich_jobs()[:40]):
        eng.submit(JobSpec(j.id, tenant=j.tenant, devices=j.devices, estimate_s=j.duration_s,
                           priority_class=j.priority_class, checkpoint_interval_s=j.checkpoint_interval_s), 0.0)
        if k % 10 == 9:
            eng.cycle(0.0)
    eng.cycle(0.0)
    return eng


@pytest.mark.parametrize("tiered", [False, True])
def test_planning_mode_changes_nothing(tiered: bool) -> None:
    eng = _rich_engine(tiered)
    queued = [j.id for j in eng.queue()]
    assert queued and eng.reservations
    before = (eng.snapshot(), eng.journal.count(), dict(eng.reservations), eng.pool_free("P100"))
    for jid in queued:
        assert eng.estimate(jid, 0.0)
    assert (eng.snapshot(), eng.journal.count(), dict(eng.reservations), eng.pool_free("P100")) == before


@pytest.mark.parametrize("tiered", [False, True])
def test_reservations_are_named_and_still_unpack(tiered: bool) -> None:
    eng = _rich_engine(tiered)
    for jid, r in eng.reservations.items():
        pool, at, n = r
        assert (r.pool, r.at, r.devices) == (pool, at, n)
        assert eng.jobs[jid].state in (JobState.QUEUED, JobState.SUSPENDED) and n == eng.jobs[jid].spec.devices
    eng.verify_reservations(0.0)
