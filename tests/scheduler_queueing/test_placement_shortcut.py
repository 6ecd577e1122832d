"""The placement shortcut for a queued start decides exactly what the full pipeline decides.

``QueuePlacer._decide`` answers the common queued start (whole devices, the default
``fewest-free`` scorer, exact counts, no extra filters) from the per-host free counts alone and
falls back to the filter -> score -> reserve stages only when the winning host fails a host
check.  On random cluster states (devices taken, hosts short of CPU, allowed and excluded
hosts, gang chunks and whole jobs) its answer must be the stages' answer, host and slots.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from accel.scheduler import DeviceSelector, Request
from accel.scheduler.queueing import QueueingScheduler, uniform_cluster
from accel.scheduler.queueing._placement import RefusalKind


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
