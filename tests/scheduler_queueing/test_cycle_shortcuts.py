"""The cycle's shortcuts decide exactly what the full code decides.

The placement shortcut for a queued start:
``QueuePlacer._decide`` answers the common queued start (whole devices, the default
``fewest-free`` scorer, exact counts, no extra filters) from the per-host free counts alone and
falls back to the filter -> score -> reserve stages only when the winning host fails a host
check.  On random cluster states (devices taken, hosts short of CPU, allowed and excluded
hosts, gang chunks and whole jobs) its answer must be the stages' answer, host and slots.

The tiered views' column arithmetic (``TierViews._declared_profiles``, the declared-duration
model) gives the per-job loop's profiles bit for bit, on a cluster with jobs of two classes in
several tiers, winding down after preemption, past their estimates and just started.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from accel.scheduler import DeviceSelector, Request
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobSpec,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    uniform_cluster,
)
from accel.scheduler.queueing._placement import RefusalKind
from accel.scheduler.queueing._tiers import TierViews


@pytest.mark.parametrize("seed", range(6))
def test_shortcut_equals_the_full_stages(seed: int) -> None:
    rng = random.Random(seed)
    n_hosts = 40
    eng = QueueingScheduler(uniform_cluster(n_hosts, 8))
    st = eng._st
    cl = st.cluster
    for h in range(n_hosts):
        taken = rng.sample(range(8), rng.choice([0, 0, 1, 3, 5, 7, 8]))
        if taken:
            cl.allocate(Request(f"fill{h}", devices=len(taken)), h, taken)
        if rng.random() < 0.15:
            cl.cpu_free[h] = 0  # the host check fails: the shortcut must defer to the stages
        st.refresh_host(h)
    placer = st.placer
    sel = DeviceSelector(models=("P100",))
    checked = 0
    for _ in range(120):
        k = rng.choice([1, 1, 2, 3, 4, 6, 8])
        gang = rng.random() < 0.3
        req = Request("j#0" if gang else "j", cpu_milli=rng.choice([0, 1000]), devices=k, selector=sel,
                      gang="j" if gang else None)
        allowed = None
        if rng.random() < 0.3:
            allowed = np.array([rng.random() < 0.5 for _ in range(n_hosts)], dtype=bool)
        exclude = None
        if rng.random() < 0.3:
            exclude = np.array([rng.random() < 0.2 for _ in range(n_hosts)], dtype=bool)
        placer._pool_free, placer._exclude, placer._exact = st.host_free[:, 0], exclude, True
        fast = placer._decide(req, allowed, None)
        full = placer._pick(req, placer._candidates(req, allowed), None)
        assert fast == full, (k, gang, allowed, exclude)
        checked += not isinstance(fast, RefusalKind)
    assert checked > 20  # most requests were placed, so hosts and slots were compared


@pytest.mark.parametrize("seed", range(3))
def test_tier_view_columns_equal_the_loop(seed: int) -> None:
    rng = random.Random(seed)
    eng = QueueingScheduler(uniform_cluster(24, 8), Policy(
        classes=(PriorityClass("prod", 10, InClassOrder.FIFO, preempts=False),
                 PriorityClass("batch", 0, InClassOrder.SHORTEST)),
        backfill=BackfillMode.CONSERVATIVE, default_class="batch", demote_after_device_s=(600.0, 5000.0),
        preempt_mode=PreemptMode.SUSPEND, grace_s=30.0))
    t = 0.0
    for i in range(220):
        eng.submit(JobSpec(id=f"j{i}", devices=rng.choice([1, 1, 2, 4, 8]), estimate_s=rng.uniform(30, 4000),
                           priority_class="prod" if i % 7 == 0 else "batch"), t)
        if i % 10 == 9:
            eng.cycle(t)
            t += rng.uniform(50, 900)
    st = eng._st
    now = t
    for i in range(3):  # shorter than a second: booked for at least 1 s once started
        eng.submit(JobSpec(id=f"tiny{i}", devices=1, estimate_s=0.5, priority_class="prod"), now)
    eng.cycle(now)
    # the cases the arithmetic tells apart are there: winding down, past the estimate, just started
    active = list(st.active.values())
    assert any(j.state.value == "preempting" for j in active)
    assert any(j.progress(now) > j.spec.estimate_s for j in active)
    assert any(j.started_at == now and j.spec.estimate_s < 1 for j in active)
    keys = sorted({(lv, q) for lv in (0, 10) for q in range(3)})
    fast = TierViews(st, now, keys)  # built up front: the columns
    assert fast._base
    for level, q in keys:
        slow = TierViews(st, now)._profiles(level, q)  # not up front: the per-job loop
        for pool, prof in fast._base[(level, q)].items():
            assert np.array_equal(prof.ts, slow[pool].ts), (level, q, pool)
            assert np.array_equal(prof.fs, slow[pool].fs), (level, q, pool)
