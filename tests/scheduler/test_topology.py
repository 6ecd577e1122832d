"""Topology-aware placement and gangs on DGX-like hosts in racks; reservations vs starvation."""

from __future__ import annotations

import pytest

from accel.scheduler import (
    ClusterState,
    DeviceSpec,
    GangPlacer,
    HostSpec,
    Request,
    Scheduler,
    best_device_set,
    from_inventories,
)


def dgx(name: str, rack: str, *, islands: int = 1) -> HostSpec:
    per = 8 // islands
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model="H100", memory_bytes=80 << 30,
                            link_domain=f"nvs{j // per}", pcie_switch=f"sw{j // 2}", numa=j // 4)
                 for j in range(8))
    return HostSpec(name, 224_000, 2 << 40, devs, rack=rack)


def cluster(racks: int = 2, per_rack: int = 2) -> ClusterState:
    return ClusterState.from_specs([dgx(f"r{r}h{h}", f"rack{r}") for r in range(racks) for h in range(per_rack)])


def test_eight_device_gang_lands_on_one_free_nvswitch_host() -> None:
    state = cluster()
    sched = Scheduler(state, "topology-aware", seed=5)
    small = sched.place(Request("small", cpu_milli=1000, devices=1))
    assert small is not None
    gangs = GangPlacer(sched)
    got = gangs.place([Request("g8", cpu_milli=8000, devices=8, gang="g8")])
    assert got is not None and len(got) == 1
    assert got[0].host != small.host and len(set(state.dev_domain[got[0].host, list(got[0].devices)])) == 1


def test_sixteen_device_gang_uses_two_hosts_of_one_rack() -> None:
    state = cluster(racks=3, per_rack=2)
    sched = Scheduler(state, "topology-aware", seed=5)
    # one host busy in rack0 and rack1: only rack2 has two free hosts
    assert sched.place(Request("a", devices=1)) is not None
    for _ in range(3):
        sched.place(Request("b", devices=1))
    busy_racks = {int(state.host_rack[h]) for h in range(state.n_hosts) if state.pods_used[h]}
    members = [Request(f"m{i}", cpu_milli=8000, devices=8, gang="big") for i in range(2)]
    got = GangPlacer(sched).place(members)
    assert got is not None
    hosts = {a.host for a in got}
    assert len(hosts) == 2
    assert len({int(state.host_rack[h]) for h in hosts}) == 1
    assert int(state.host_rack[next(iter(hosts))]) not in busy_racks or len(busy_racks) == 3


def test_device_set_prefers_one_island_then_best_fit() -> None:
    state = ClusterState.from_specs([dgx("h", "r", islands=2)])
    assert state.allocate(Request("x", devices=1), 0, (0,))
    devs, level = best_device_set(state, Request("q", devices=4), 0) or ((), None)
    assert level is not None and level.value == "link_domain"
    assert set(devs) == {4, 5, 6, 7}
    devs3, _ = best_device_set(state, Request("t", devices=3), 0) or ((), None)
    assert set(devs3) == {1, 2, 3}  # the partly used island: keeps the whole one free


def test_reservation_keeps_a_large_gang_from_starving() -> None:
    """A 16-device gang waits while a stream of 1-device jobs keeps one host busy; without a
    reservation the small jobs take every freed device and the gang never runs."""

    def run(reserve: bool) -> int | None:
        state = cluster(racks=1, per_rack=2)
        sched = Scheduler(state, "best-fit", seed=1)
        gangs = GangPlacer(sched)
        running = [sched.place(Request(f"s{i}", cpu_milli=1000, devices=1)) for i in range(4)]
        members = [Request(f"m{i}", cpu_milli=8000, devices=8, gang="big") for i in range(2)]
        assert gangs.place(members, reserve=reserve) is None
        for t in range(40):
            done = running.pop(0)
            assert done is not None
            sched.release(done)
            if gangs.reservations and gangs.retry():
                return t
            if not reserve and gangs.place(members, reserve=False):
                return t
            nxt = sched.place(Request(f"n{t}", cpu_milli=1000, devices=1))
            if nxt is not None:
                running.append(nxt)
            elif not running:
                break
        return None

    assert run(reserve=False) is None
    started = run(reserve=True)
    assert started is not None and started < 10


def test_from_inventories_reads_topology_health_and_racks() -> None:
    sim = pytest.importorskip("accel.sim")
    invs = sim.generate_cluster(4, "dgx-h100", seed=0, hosts_per_rack=2)
    state = from_inventories(invs)
    assert state.n_hosts == 4 and state.n_slots == 8
    assert len(set(state.dev_domain[0].tolist())) == 1  # one NVSwitch domain per DGX
    assert sorted(set(state.host_rack.tolist())) == [0, 1]
    assert state.cpu_cap[0] > 0 and state.mem_cap[0] > 0
    sched = Scheduler(state, "topology-aware", seed=0)
    got = GangPlacer(sched).place([Request(f"m{i}", devices=8, gang="g") for i in range(2)])
    assert got is not None and len({int(state.host_rack[a.host]) for a in got}) == 1
