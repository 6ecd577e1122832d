"""The preemption storm's shortcuts answer exactly what the code they skip answers.

``Profile.fits_with`` reads the deferred bookings (starts booked at ``now`` while the profile
only rises) without merging them into its breakpoints: on random profiles, bookings, windows and
given-back ranges its answer must be the merged profile's answer.  ``Profile.add`` gives a
victim's devices back without merging the deferred bookings first: the profile (merged later)
and its rising flag must be those of the plain path.

``ClusterState.allocate`` checks a whole-device request's slots one by one from the host's
rows instead of building the host's fit array (``slot_fit``): on random cluster states (shares
and whole devices taken, unhealthy slots, two device models, memory floors) it must accept
exactly the slot sets ``slot_fit`` accepts.  ``QueuePlacer._fewest_free_slots`` reads the
host's rows as lists: the same slots as its array form, degraded slots and memory floors included.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from accel.scheduler import ClusterState, DeviceSelector, HostSpec, Request, SchedulerStateError, Share
from accel.scheduler._state import DeviceSpec
from accel.scheduler.queueing._profile import Profile

GIB = 1 << 30


def _twin_profiles(rng: random.Random) -> tuple[Profile, Profile]:
    now = rng.choice([0.0, 100.0])
    releases = [(now + rng.choice([0.0, rng.uniform(-5, 500), float(rng.randint(1, 50))]), rng.randint(1, 8))
                for _ in range(rng.randint(0, 150))]
    free = rng.randint(0, 40)
    a, b = Profile(now, free, releases), Profile(now, free, releases)
    for _ in range(rng.randint(0, 16)):
        r = rng.random()
        if r < 0.94:  # a start booked now: deferred while the profile only rises
            end = now + rng.choice([rng.uniform(0.5, 600), float(rng.randint(1, 50))])
            args = (now, end, rng.randint(1, 8))
        elif r < 0.97:  # a victim gives devices back from now (at a release: the profile keeps rising)
            at = rng.choice([*(float(t) for t in a.ts[1:]), now + rng.uniform(1, 600)])
            args = (now, at, -rng.randint(1, 4))
        else:  # a reservation later: free(t) dips, the deferred ones are merged
            s = now + rng.uniform(1, 300)
            args = (s, s + rng.uniform(1, 300), rng.randint(1, 8))
        a.add(*args)
        b._flush()  # ``b`` merges its deferred bookings before every booking: the plain path
        b.add(*args)
        assert a._monotone == b._monotone
    return a, b


@pytest.mark.parametrize("seed", range(4))
def test_fits_with_reads_deferred_bookings_as_the_merge_does(seed: int) -> None:
    rng = random.Random(seed)
    checked = deferred = 0
    for _ in range(150):
        lazy, merged = _twin_profiles(rng)
        # read lazily (not merged first: see the threshold in fits_with)
        deferred += 0 < len(lazy._deferred) * 4 <= len(lazy.ts)
        merged._flush()
        for _ in range(10):
            now = lazy.now
            start = now + rng.choice([-3.0, 0.0, 0.0, rng.uniform(0, 400), float(rng.randint(1, 50))])
            dur = rng.choice([rng.uniform(0.5, 700), float(rng.randint(1, 60)), float("inf")])
            extra = [(now + rng.choice([rng.uniform(0, 700), float(rng.randint(1, 60))]), rng.randint(1, 8))
                     for _ in range(rng.randint(0, 4))]
            n = rng.randint(0, 60)
            assert lazy.fits_with(start, dur, n, extra) == merged.fits_with(start, dur, n, extra)
            checked += 1
        # the lazy answer left the profile as it was: merging it now gives the same arrays
        lazy._flush()
        assert lazy.ts.tolist() == merged.ts.tolist() and lazy.fs.tolist() == merged.fs.tolist()
    assert checked == 1500 and deferred > 25


def _mixed_cluster(rng: random.Random, n_hosts: int) -> ClusterState:
    hosts = []
    for h in range(n_hosts):
        model, mem = rng.choice([("P100", 16 * GIB), ("V100", 32 * GIB)])
        devs = tuple(DeviceSpec(id=f"h{h}/{d}", vendor="nvidia", model=model,
                                memory_bytes=rng.choice([mem, mem, 8 * GIB])) for d in range(rng.choice([4, 8])))
        hosts.append(HostSpec(name=f"h{h}", cpu_milli=64_000, memory_bytes=512 * GIB, devices=devs))
    return ClusterState.from_specs(hosts)


@pytest.mark.parametrize("seed", range(4))
def test_allocate_accepts_the_slots_slot_fit_accepts(seed: int) -> None:
    rng = random.Random(seed)
    cl = _mixed_cluster(rng, 12)
    for h in range(cl.n_hosts):
        for d in range(cl.n_slots):
            if cl.dev_class[h, d] < 0:
                continue
            r = rng.random()
            if r < 0.15:
                cl.allocate(Request(f"s{h}.{d}", share=Share(compute_milli=rng.choice([250, 500]))), h, [d])
            elif r < 0.3:
                cl.allocate(Request(f"w{h}.{d}", devices=1), h, [d])
            elif r < 0.38:
                cl.set_device_health(h, d, usable=False)
    accepted = refused = 0
    for i in range(800):
        h = rng.randrange(cl.n_hosts)
        sel = DeviceSelector(models=rng.choice([(), ("P100",), ("V100",)]),
                             min_memory_bytes=rng.choice([0, 0, 12 * GIB]))
        width = int((cl.dev_class[h] >= 0).sum())
        k = rng.randint(1, min(4, width))
        devs = rng.sample(range(width), k)
        req = Request(f"r{i}", devices=k, selector=sel)
        fit = cl.slot_fit(req, np.array([h]))[0]
        expect = all(fit[d] for d in devs)
        try:
            alloc = cl.allocate(req, h, devs)
        except SchedulerStateError:
            assert not expect
            refused += 1
        else:
            assert expect
            accepted += 1
            if rng.random() < 0.7:
                cl.release(alloc)
    assert accepted > 30 and refused > 100


def _fewest_free_slots_arrays(cl: ClusterState, req: Request, host: int) -> tuple[int, ...]:
    """``QueuePlacer._fewest_free_slots`` as numpy arrays (its form before it read lists)."""
    left, cap = cl.dev_left[host], cl.dev_cap[host]
    free = cl.eligible_slots(req)[host] & (left == cap) & (cap > 0)
    idx = free.nonzero()[0]
    k = req.devices
    if k == 1 or k == len(idx):
        return tuple(idx[:k].tolist())
    if req.selector.min_memory_bytes:
        idx = (free & (cl.dev_mem_cap[host] >= req.selector.min_memory_bytes)).nonzero()[0]
    degraded = cl.dev_degraded[host][idx]
    return tuple((idx[~degraded].tolist() + idx[degraded].tolist())[:k])


@pytest.mark.parametrize("seed", range(3))
def test_fewest_free_slots_lists_equal_the_arrays(seed: int) -> None:
    from accel.scheduler.queueing import QueueingScheduler

    rng = random.Random(seed)
    cl = _mixed_cluster(rng, 16)
    for h in range(cl.n_hosts):
        for d in range(cl.n_slots):
            if cl.dev_class[h, d] < 0:
                continue
            r = rng.random()
            if r < 0.2:
                cl.allocate(Request(f"w{h}.{d}", devices=1), h, [d])
            elif r < 0.3:
                cl.set_device_health(h, d, usable=False)
            elif r < 0.5:
                cl.set_device_health(h, d, usable=True, degraded=True)
    placer = QueueingScheduler(cl)._st.placer
    for i in range(400):
        h = rng.randrange(cl.n_hosts)
        sel = DeviceSelector(models=rng.choice([(), ("P100",), ("V100",)]),
                             min_memory_bytes=rng.choice([0, 0, 12 * GIB]))
        free = len(_fewest_free_slots_arrays(cl, Request(f"r{i}", devices=8, selector=sel), h))
        if not free:
            continue
        req = Request(f"r{i}", devices=rng.randint(1, free), selector=sel)
        want = _fewest_free_slots_arrays(cl, req, h)
        assert placer._fewest_free_slots(req, h) == want
