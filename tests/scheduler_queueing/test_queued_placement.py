"""Queued work goes through the placement pipeline: filters, the configured scorer, topology, gangs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from accel.scheduler import (
    ClusterState,
    DeviceSpec,
    HostSpec,
    InvalidRequestError,
    Request,
    Scheduler,
    Share,
    TopologyConstraint,
    TopologyLevel,
    make_scorer,
)
from accel.scheduler.queueing import (
    BackfillMode,
    JobSpec,
    JobState,
    Journal,
    JournalError,
    Policy,
    QueueingScheduler,
    WaitReason,
)
from accel.scheduler.queueing._placement import FewestFreeScorer, PlacementRefusal, RefusalKind
from accel.scheduler.queueing._types import topology_from_dict

from .conftest import cluster, job

GIB = 1024**3
LINK = TopologyConstraint(TopologyLevel.LINK_DOMAIN, required=True)
PREFER_LINK = TopologyConstraint(TopologyLevel.LINK_DOMAIN, required=False)


def _host(name: str, n: int, *, cpu: int = 64_000, domains: int = 1, rack: str | None = None,
          model: str = "A100") -> HostSpec:
    """``n`` devices split evenly into ``domains`` link domains (slot order: domain 0 first)."""
    per = n // domains
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model=model, memory_bytes=16 * GIB,
                            link_domain=f"nvl{j // per}") for j in range(n))
    return HostSpec(name, cpu, 256 * GIB, devs, rack=rack)


WORKLOAD = ([Request(f"w{i}", cpu_milli=8000, devices=1) for i in range(10)]
            + [Request(f"s{i}", cpu_milli=2000, share=Share(500)) for i in range(4)])


def _hold(eng: QueueingScheduler, jid: str, host: str, slots: list[int], now: float = 0.0) -> None:
    """Start a blocker job on exactly these slots (a same-host job pinned by a one-host filter)."""
    st = eng.state
    h = st.host_index[host]
    # hide the host's other free slots for this one placement
    hidden = [s for s in range(int(st.n_devices[h])) if s not in slots and st.dev_left[h, s] == st.dev_cap[h, s]]
    for s in hidden:
        st.dev_left[h, s] = 0
    saved = eng.placer.filters
    eng.placer.filters = (*saved, lambda state, req, hosts: hosts == h)
    try:
        eng._st.refresh_host(h)
        eng.submit(JobSpec(jid, devices=len(slots), same_host=True, estimate_s=100.0), now)
        eng.cycle(now)
    finally:
        eng.placer.filters = saved
        for s in hidden:
            st.dev_left[h, s] = st.dev_cap[h, s]
        eng._st.refresh_host(h)
    assert eng.jobs[jid].state == JobState.RUNNING
    assert sorted(eng.jobs[jid].allocs[0].devices) == sorted(slots)


def _placed(eng: QueueingScheduler, jid: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(a.host_name, a.devices) for a in eng.jobs[jid].allocs]


# -- the scorer decides --------------------------------------------------------------------------


@pytest.mark.parametrize(("scorer", "host"), [("best-fit", "a"), ("fgd-plus", "b"), ("fewest-free", "a")])
def test_the_configured_scorer_places_queued_work(scorer: str, host: str) -> None:
    # host a is nearly out of CPU: best fit packs the job there, fgd-plus keeps a's GPUs usable
    def state() -> ClusterState:
        return ClusterState.from_specs([_host("a", 4, cpu=8000), _host("b", 4, cpu=64_000)])

    eng = QueueingScheduler(state(), scorer=scorer, workload=WORKLOAD)
    eng.submit(job("x", cpu_milli=2000), 0.0)
    eng.cycle(0.0)
    assert _placed(eng, "x")[0][0] == host
    # the same decision a direct request gets from the same scorer
    direct = Scheduler(state(), make_scorer(scorer), workload=WORKLOAD).decide(eng.jobs["x"].allocs[0].request)
    assert direct.host is not None and state().host_names[direct.host] == host


def test_default_scorer_is_the_old_rule() -> None:
    eng = QueueingScheduler(cluster(3, 8))
    assert isinstance(eng.placer.scorer, FewestFreeScorer)
    _hold(eng, "b1", "a100-1", [0, 1, 2])
    eng.submit(job("x", 2), 1.0)
    eng.cycle(1.0)
    assert _placed(eng, "x") == [("a100-1", (3, 4))]  # fewest free devices that still fit


def test_filter_plugins_are_honoured() -> None:
    state = cluster(2, 8)
    off = state.host_index["a100-0"]
    eng = QueueingScheduler(state, filters=[lambda st, req, hosts: hosts != off])
    eng.submit(job("x", 2), 0.0)
    eng.cycle(0.0)
    assert _placed(eng, "x")[0][0] == "a100-1"
    # a job no allowed host can take waits with a truthful reason and no reservation "now"
    eng.submit(job("y", 8), 0.0)
    eng.submit(job("z", 1), 0.0)
    res = eng.cycle(0.0)
    y = eng.jobs["y"]
    assert y.state == JobState.QUEUED and y.wait == WaitReason.PLACEMENT
    assert eng.refusals["y"].kind == RefusalKind.RESOURCES and "y" not in eng.reservations
    assert res.started == ["z"] and _placed(eng, "z")[0][0] == "a100-1"  # the walk goes on


def test_same_host_job_on_split_free_devices_is_fragmentation() -> None:
    eng = QueueingScheduler(cluster(2, 4))
    _hold(eng, "b0", "a100-0", [0, 1])
    _hold(eng, "b1", "a100-1", [0, 1])
    eng.submit(job("x", 4, same_host=True), 1.0)
    eng.cycle(1.0)
    # the pool's count says 4 free (it fits); no host has 4: a truthful reason, no "now" reservation
    assert eng.jobs["x"].wait == WaitReason.PLACEMENT and "x" not in eng.reservations
    assert eng.refusals["x"].kind == RefusalKind.FRAGMENTATION
    assert "too fragmented" in eng.refusals["x"].detail


def test_cpu_short_host_is_filtered_not_a_dead_end() -> None:
    eng = QueueingScheduler(ClusterState.from_specs([_host("a", 4, cpu=1000), _host("b", 8)]))
    eng.submit(job("x", 2, cpu_milli=4000), 0.0)
    eng.cycle(0.0)
    assert _placed(eng, "x")[0][0] == "b"  # a has fewer free devices but not the CPU


# -- topology ------------------------------------------------------------------------------------


def test_required_link_domain_waits_for_a_domain_then_starts() -> None:
    eng = QueueingScheduler(ClusterState.from_specs([_host("a", 8, domains=2)]))
    _hold(eng, "b0", "a", [0, 1])
    _hold(eng, "b1", "a", [4, 5])
    eng.submit(job("x", 4, topology=LINK), 1.0)
    res = eng.cycle(1.0)
    x = eng.jobs["x"]
    assert x.state == JobState.QUEUED and "x" not in res.started
    assert x.wait == WaitReason.PLACEMENT
    assert "x" not in eng.reservations  # no bogus "now" reservation
    refusal = eng.refusals["x"]
    assert isinstance(refusal, PlacementRefusal) and refusal.kind == RefusalKind.TOPOLOGY
    assert refusal.pool == "A100" and "topology" in refusal.detail
    (est,) = eng.estimate("x", 1.0)  # not "now": the counts fit, the pipeline does not
    assert est.reason == WaitReason.PLACEMENT and "refused" in est.describe()
    # a later job that fits still starts in the same cycle
    eng.submit(job("y", 1), 2.0)
    assert "y" in eng.cycle(2.0).started
    eng.finish("b1", 3.0)
    eng.cycle(3.0)
    assert x.state == JobState.RUNNING
    assert sorted(_placed(eng, "x")[0][1]) == [4, 5, 6, 7]
    assert "x" not in eng.refusals


def test_refused_in_one_pool_still_reserves_in_another() -> None:
    hosts = [_host("a", 8, domains=2), _host("h", 8, domains=2, model="H100")]
    eng = QueueingScheduler(ClusterState.from_specs(hosts), Policy(backfill=BackfillMode.CONSERVATIVE))
    _hold(eng, "a0", "a", [0, 1])
    _hold(eng, "a1", "a", [4, 5])
    _hold(eng, "h0", "h", list(range(8)))
    eng.submit(job("x", 4, topology=LINK), 1.0)
    eng.cycle(1.0)
    # A100: 4 free by count, split over two domains (refused); H100: held until h0 ends at 100 s
    assert eng.refusals["x"].kind == RefusalKind.TOPOLOGY
    assert eng.reservations["x"][:2] == ("H100", 100.0)


def test_without_topology_a_split_set_is_used() -> None:
    eng = QueueingScheduler(ClusterState.from_specs([_host("a", 8, domains=2)]))
    _hold(eng, "b0", "a", [0, 1])
    _hold(eng, "b1", "a", [4, 5])
    eng.submit(job("x", 4), 1.0)
    eng.cycle(1.0)
    assert sorted(_placed(eng, "x")[0][1]) == [2, 3, 6, 7]


def test_preferred_link_domain_picks_the_host_with_a_domain() -> None:
    # host a: 4 free devices split over two domains; host b: 5 free, 4 of them in one domain
    eng = QueueingScheduler(ClusterState.from_specs([_host("a", 8, domains=2), _host("b", 8, domains=2)]))
    _hold(eng, "a0", "a", [0, 1])
    _hold(eng, "a1", "a", [4, 5])
    _hold(eng, "b0", "b", [0, 1, 2])
    eng.submit(job("plain", 4), 1.0)
    eng.submit(job("x", 4, topology=PREFER_LINK), 1.0)
    eng.cycle(1.0)
    assert _placed(eng, "plain") == [("a", (2, 3, 6, 7))]  # the old rule: fewest free that fit
    eng.finish("plain", 2.0)
    eng.cycle(2.0)
    assert _placed(eng, "x") == [("b", (4, 5, 6, 7))]  # preferred: the whole domain on b


def test_required_in_host_level_never_splits() -> None:
    eng = QueueingScheduler(cluster(2, 4))
    eng.submit(job("x", 6, topology=TopologyConstraint(TopologyLevel.HOST, required=True)), 0.0)
    eng.cycle(0.0)
    assert eng.jobs["x"].state == JobState.QUEUED
    assert eng.jobs["x"].wait == WaitReason.PLACEMENT


# -- gangs ---------------------------------------------------------------------------------------


def test_gang_is_all_or_nothing_across_hosts() -> None:
    # 12 devices need hosts a and b; b lacks the CPU for its chunk: nothing is bound anywhere
    eng = QueueingScheduler(ClusterState.from_specs([_host("a", 8), _host("b", 8, cpu=2000)]))
    before = eng.state.dev_left.copy()
    eng.submit(job("g", 12, cpu_milli=12_000), 0.0)
    res = eng.cycle(0.0)
    g = eng.jobs["g"]
    assert g.state == JobState.QUEUED and not g.allocs and "g" not in res.started
    assert g.wait == WaitReason.PLACEMENT and eng.refusals["g"].kind == RefusalKind.RESOURCES
    assert np.array_equal(eng.state.dev_left, before)
    assert not eng.state.live
    assert [e.kind for e in eng.history("g")] == ["submitted"]
    assert not eng._st.req_cache


def test_gang_split_fewest_hosts_biggest_first() -> None:
    eng = QueueingScheduler(cluster(3, 8))
    _hold(eng, "b0", "a100-0", [0, 1, 2])
    _hold(eng, "b1", "a100-1", [0])
    eng.submit(job("g", 12), 1.0)
    eng.cycle(1.0)
    assert [(h, len(s)) for h, s in _placed(eng, "g")] == [("a100-2", 8), ("a100-1", 4)]
    assert {a.request.gang for a in eng.jobs["g"].allocs} == {"g"}


def test_required_rack_keeps_the_gang_in_one_rack() -> None:
    hosts = [_host("r0a", 4, rack="r0"), _host("r1a", 4, rack="r1"), _host("r1b", 4, rack="r1")]
    eng = QueueingScheduler(ClusterState.from_specs(hosts))
    _hold(eng, "b", "r1b", [0, 1, 2])  # rack r1: 5 free, rack r0: 4 free, 9 in all
    eng.submit(job("g", 6, topology=TopologyConstraint(TopologyLevel.RACK, required=True)), 1.0)
    eng.cycle(1.0)
    assert eng.jobs["g"].state == JobState.QUEUED and eng.jobs["g"].wait == WaitReason.PLACEMENT
    eng.finish("b", 2.0)
    eng.cycle(2.0)
    assert sorted(h for h, _ in _placed(eng, "g")) == ["r1a", "r1b"]


# -- journal -------------------------------------------------------------------------------------


def test_topology_round_trips_through_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    eng = QueueingScheduler(cluster(1, 8), journal=path)
    spec = job("x", 4, topology=PREFER_LINK)
    eng.submit(spec, 0.0)
    eng.submit(job("y", 2), 0.0)
    eng.journal.close()
    back = QueueingScheduler.recover(cluster(1, 8), path)
    assert back.jobs["x"].spec == spec
    assert back.jobs["y"].spec.topology is None
    # a spec without the field (as every journal written before it) has no "topology" key at all
    rows = [e.data["spec"] for e in back.journal.events() if e.kind == "submitted"]
    assert "topology" not in rows[1] and rows[0]["topology"] == {"level": "link_domain", "required": False}
    back.journal.close()


def test_bad_topology_is_a_typed_error() -> None:
    with pytest.raises(InvalidRequestError, match="topology"):
        JobSpec("x", topology="link_domain")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="unknown topology level 'rackz'"):
        topology_from_dict({"level": "rackz", "required": True})
    with pytest.raises(InvalidRequestError, match="required must be a bool"):
        topology_from_dict({"level": "rack", "required": "yes"})


def test_journal_refuses_a_malformed_topology(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    eng = QueueingScheduler(cluster(1, 8), journal=path)
    eng.submit(job("x", 4, topology=LINK), 0.0)
    spec = json.loads(json.dumps(next(iter(eng.journal.events())).data["spec"]))
    eng.journal.close()
    spec["id"] = "bad"
    spec["topology"] = {"level": "nowhere", "required": True}
    jr = Journal(path)
    jr.append(1.0, "bad", "submitted", "", {"spec": spec})
    jr.close()
    with pytest.raises(JournalError, match="spec field topology has a bad value"):
        QueueingScheduler.recover(cluster(1, 8), path)


def test_recovery_replays_the_same_placements(tmp_path: Path) -> None:
    path = tmp_path / "j.db"

    def state() -> ClusterState:
        return ClusterState.from_specs([_host(f"h{i}", 8, cpu=16_000 * (i + 1), domains=2) for i in range(4)])

    eng = QueueingScheduler(state(), journal=path, scorer="fgd-plus", workload=WORKLOAD)
    t = 0.0
    for i, (n, topo) in enumerate([(1, None), (4, LINK), (2, None), (3, PREFER_LINK), (12, None), (1, None),
                                   (6, None), (4, LINK)]):
        eng.submit(job(f"j{i}", n, est=50.0 + 10 * i, cpu_milli=1000 * n, topology=topo), t)
        eng.cycle(t)
        t += 5.0
    eng.finish("j0", t)
    eng.cycle(t)
    live = {j: _placed(eng, j) for j in eng.jobs}
    assert sum(1 for v in live.values() if v) >= 4
    eng.journal.close()
    back = QueueingScheduler.recover(state(), path, scorer="fgd-plus", workload=WORKLOAD)
    assert {j: _placed(back, j) for j in back.jobs} == live
    assert np.array_equal(back.state.dev_left, eng.state.dev_left)
    assert np.array_equal(back.host_free, eng.host_free)
    back.check_invariants()
    # and it goes on placing with the same scorer
    assert back.placer.scorer.name == "fgd-plus"
    back.journal.close()
