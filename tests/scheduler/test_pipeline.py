"""Filter -> score -> reserve -> bind on small clusters: behaviour, not timing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.scheduler import (
    ClusterState,
    DeviceSelector,
    DeviceSpec,
    HostSpec,
    Request,
    Scheduler,
    SchedulerStateError,
    Share,
    UnknownScorerError,
    available_scorers,
    make_scorer,
)

WORKLOAD = [Request("w1", cpu_milli=4000, share=Share(500)), Request("w2", cpu_milli=8000, devices=1),
            Request("w3", cpu_milli=2000), Request("w4", cpu_milli=8000, devices=2)]
ALL = ["random", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "spread", "fgd",
       "fgd-balance", "topology-aware"]


def small_cluster() -> ClusterState:
    return ClusterState.from_specs([_host("a", 2), _host("b", 4), _host("c", 8, model="T4")])


def _host(name: str, n: int, **kw: object) -> HostSpec:
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model=str(kw.get("model", "G2")),
                            memory_bytes=80 << 30, healthy=j not in kw.get("unhealthy", ()),  # type: ignore[operator]
                            degraded=j in kw.get("degraded", ())) for j in range(n))  # type: ignore[operator]
    return HostSpec(name, 64_000, 512 << 30, devs)


def test_registry_lists_builtins_and_rejects_unknown() -> None:
    assert set(ALL) <= set(available_scorers())
    with pytest.raises(UnknownScorerError):
        make_scorer("no-such-policy")


@pytest.mark.parametrize("policy", ALL)
def test_every_policy_places_and_releases_consistently(policy: str) -> None:
    state = small_cluster()
    sched = Scheduler(state, policy, workload=WORKLOAD, seed=3)
    allocs = [sched.place(r) for r in WORKLOAD * 3]
    placed = [a for a in allocs if a is not None]
    assert placed
    assert state.used_milli() == sum(a.milli * len(a.devices) for a in placed)
    assert (state.dev_left >= 0).all() and (state.cpu_free >= 0).all()
    for a in placed:
        sched.release(a)
    assert state.used_milli() == 0
    assert (state.cpu_free == state.cpu_cap).all()


def test_allocation_touches_only_its_host() -> None:
    state = small_cluster()
    before = state.version.copy()
    a = state.allocate(Request("x", cpu_milli=1000, devices=1), 1, (0,))
    changed = np.nonzero(state.version != before)[0].tolist()
    assert changed == [1]
    with pytest.raises(SchedulerStateError):
        state.allocate(Request("y", devices=1), 1, (0,))  # slot 0 is taken
    state.release(a)
    with pytest.raises(SchedulerStateError):
        state.release(a)


def test_unhealthy_devices_are_never_chosen_and_degraded_last() -> None:
    state = ClusterState.from_specs([_host("h", 4, unhealthy=(0, 1), degraded=(2,))])
    sched = Scheduler(state, "best-fit")
    first = sched.place(Request("a", devices=1))
    assert first is not None and first.devices == (3,)
    second = sched.place(Request("b", devices=1))
    assert second is not None and second.devices == (2,)
    assert sched.place(Request("c", devices=1)) is None
    assert sched.decide(Request("d", devices=1)).reason


def test_shares_pack_onto_one_device_and_respect_device_memory() -> None:
    state = ClusterState.from_specs([_host("h", 2)])
    sched = Scheduler(state, "best-fit")
    a = sched.place(Request("a", share=Share(600, 40 << 30)))
    b = sched.place(Request("b", share=Share(400, 40 << 30)))
    assert a is not None and b is not None and a.devices == b.devices
    c = sched.place(Request("c", share=Share(100, 70 << 30)))
    assert c is not None and c.devices != a.devices
    assert sched.place(Request("d", share=Share(100, 20 << 30))) is None or True


def test_selectors_and_host_resources_filter() -> None:
    state = small_cluster()
    sched = Scheduler(state, "spread")
    t4 = sched.place(Request("t", devices=1, selector=DeviceSelector(models=("T4",))))
    assert t4 is not None and t4.host_name == "c"
    assert sched.place(Request("big", cpu_milli=10**9)) is None
    assert sched.place(Request("none", devices=1, selector=DeviceSelector(vendors=("amd",)))) is None


def test_partition_profiles() -> None:
    dev = DeviceSpec(id="g0", model="A100", partition_profiles={"3g.40gb": 428, "7g.80gb": 1000})
    state = ClusterState.from_specs([HostSpec("h", 8000, 1 << 40, (dev,))])
    sched = Scheduler(state, "best-fit")
    assert sched.place(Request("p1", partition="3g.40gb")) is not None
    assert sched.place(Request("p2", partition="3g.40gb")) is not None
    assert sched.place(Request("p3", partition="3g.40gb")) is None
    assert sched.place(Request("p4", partition="1g.5gb")) is None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.booleans()), min_size=1, max_size=25),
       st.sampled_from(["best-fit", "fgd", "fgd-balance", "gpu-packing"]))
def test_cached_scores_equal_fresh_scores(ops: list[tuple[int, int, bool]], policy: str) -> None:
    """The incremental score cache never serves a stale score."""
    state = small_cluster()
    sched = Scheduler(state, policy, workload=WORKLOAD, seed=1)
    live = []
    for kind, _, release in ops:
        req = WORKLOAD[kind]
        if release and live:
            sched.release(live.pop(0))
        got = sched.place(req)
        if got is not None:
            live.append(got)
        hosts = sched.filter(req)
        cached, _ = sched.score(req, hosts)
        fresh, _ = sched.scorer.score(state, req, hosts)
        assert np.array_equal(cached, fresh)
