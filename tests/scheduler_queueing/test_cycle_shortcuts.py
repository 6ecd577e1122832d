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


@pytest.mark.parametrize("seed", range(3))
def test_plain_profiles_columns_equal_the_loop(seed: int) -> None:
    """``EngineState.profiles`` under the declared model (columns) gives ``loop_profiles``' (per
    job ``expected_end``) breakpoints and counts bit for bit: jobs winding down after preemption,
    past their estimates, just started, and ends that coincide or fall before the instant asked."""
    rng = random.Random(seed)
    eng = QueueingScheduler(uniform_cluster(24, 8), Policy(
        classes=(PriorityClass("prod", 10, InClassOrder.FIFO, preempts=True),
                 PriorityClass("batch", 0, InClassOrder.SHORTEST)),
        backfill=BackfillMode.EASY, default_class="batch", preempt_mode=PreemptMode.SUSPEND, grace_s=30.0))
    st = eng._st
    t, checked = 0.0, 0
    for i in range(260):
        eng.submit(JobSpec(id=f"j{i}", devices=rng.choice([1, 1, 2, 4, 8]),
                           estimate_s=rng.choice([0.5, 60.0, 600.0, rng.uniform(30, 4000)]),
                           priority_class="prod" if i % 5 == 0 else "batch"), t)
        if i % 10 == 9:
            eng.cycle(t)
            for now in (t, t + rng.choice([0.0, 0.25, 30.0, 600.0])):
                fast, slow = st.profiles(now), st.loop_profiles(now)
                assert fast.keys() == slow.keys()
                for pool, prof in fast.items():
                    assert np.array_equal(prof.ts, slow[pool].ts), (i, now, pool)
                    assert np.array_equal(prof.fs, slow[pool].fs), (i, now, pool)
                    assert prof.ts.dtype == slow[pool].ts.dtype and prof.fs.dtype == slow[pool].fs.dtype
                checked += 1
            t += rng.choice([0.0, 1.0, rng.uniform(50, 900)])
    active = list(st.active.values())
    assert any(j.state.value == "preempting" for j in st.jobs.values() if j.active) or \
        any(e.kind == "preempting" for e in eng.journal.events())
    assert any(j.progress(t) > j.spec.estimate_s for j in active)
    assert checked >= 50


def _scan(col: np.ndarray, n: int, most: bool) -> int | None:
    """What ``QueuePlacer._decide`` found with a pass over every host's count."""
    cand = (col >= n).nonzero()[0]
    if not len(cand):
        return None
    fit = col[cand]
    return int(cand[int(fit.argmax() if most else fit.argmin())])


@pytest.mark.parametrize("seed", range(4))
def test_free_index_answers_what_the_scan_answers(seed: int) -> None:
    """``FreeIndex.first`` against the scan over ``host_free``, on random counts moved up and down
    (as placements and releases move them), several pools, every request size, fewest and most."""
    from accel.scheduler.queueing._freeindex import FreeIndex

    rng = random.Random(seed)
    n_hosts, n_pools, d = rng.choice([1, 7, 60]), rng.choice([1, 3]), 8
    free = np.array([[rng.randint(0, d) for _ in range(n_pools)] for _ in range(n_hosts)], dtype=np.int64)
    index = FreeIndex(free, d)
    index._limit = 3 * n_hosts + 4  # small: the rebuild runs too
    for step in range(1500):
        h, p = rng.randrange(n_hosts), rng.randrange(n_pools)
        new = rng.choice([0, d, rng.randint(0, d), max(0, int(free[h, p]) - 1), min(d, int(free[h, p]) + 1)])
        if new != free[h, p]:
            free[h, p] = new
            index.moved(h, p)
        for _ in range(2):
            q, n, most = rng.randrange(n_pools), rng.randint(1, d + 1), rng.random() < 0.3
            assert index.first(q, n, most=most) == _scan(free[:, q], n, most), (step, q, n, most)


def test_free_index_follows_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose placements read the index journals what the scan's run journals (starts,
    preemptions with a grace period, failures that refresh a host, a gang), and the index agrees
    with the scan over ``host_free`` after every cycle."""
    from accel.scheduler.queueing import _starts

    def run(indexed: bool) -> list[tuple[object, ...]]:
        rng = random.Random(5)
        eng = QueueingScheduler(uniform_cluster(12, 8), Policy(
            classes=(PriorityClass("prod", 10, InClassOrder.FIFO, preempts=True),
                     PriorityClass("batch", 0, InClassOrder.SHORTEST)),
            backfill=BackfillMode.EASY, default_class="batch", preempt_mode=PreemptMode.SUSPEND, grace_s=30.0))
        st = eng._st
        if not indexed:
            st.free_index = None
        devices = [dev for ids in st.cluster.dev_ids for dev in ids]
        t = 0.0
        for i in range(240):
            eng.submit(JobSpec(id=f"j{i}", devices=rng.choice([1, 1, 2, 4, 8, 12]), estimate_s=rng.uniform(30, 3000),
                               priority_class="prod" if i % 6 == 0 else "batch"), t)
            if i % 8 == 7:
                for job in eng.running():
                    if job.started_at is not None and job.progress(t) >= job.spec.estimate_s:
                        eng.finish(job.id, t)
                if rng.random() < 0.2:
                    eng.update_health(t, {rng.choice(devices): rng.random() < 0.5})
                eng.cycle(t)
                if indexed:
                    assert st.free_index is not None
                    for p in range(len(st.pools)):
                        for n in range(1, 9):
                            for most in (False, True):
                                assert st.free_index.first(p, n, most=most) == _scan(st.host_free[:, p], n, most)
                t += rng.uniform(20, 400)
        return [(e.t, e.job, e.kind, e.reason, sorted(e.data.items()).__repr__()) for e in eng.journal.events()]

    calls = []
    plain = _starts.place

    def counted(*a: object) -> object:
        calls.append(1)
        return plain(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(_starts, "place", counted)
    assert run(True) == run(False)
    assert len(calls) > 100


def test_the_collector_is_paused_for_a_cycle_and_restored() -> None:
    """``_gcpause``: off inside a cycle, back on after it (also after a failing cycle, and when
    pauses nest); left off when it was off before."""
    import gc

    from accel.scheduler.queueing._gcpause import gc_paused

    seen: list[bool] = []
    eng = QueueingScheduler(uniform_cluster(2, 8))
    eng.submit(JobSpec(id="a", devices=2, estimate_s=60.0), 0.0)
    plain = eng._st.journal.transaction

    def spy() -> object:
        seen.append(gc.isenabled())
        return plain()

    eng._st.journal.transaction = spy  # type: ignore[method-assign]
    assert gc.isenabled()
    eng.cycle(0.0)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off: left off
    finally:
        gc.enable()
