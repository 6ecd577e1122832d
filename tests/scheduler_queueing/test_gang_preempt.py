"""Preemption the placement pipeline agrees with, for jobs split over hosts and under tiers.

A gang (a job that may be split into per-host chunks) keeps the count-based victims when the
pipeline places it on their devices; when it would not (CPU per host, here), the victims are
chosen host by host with the pipeline, the cheapest set it accepts wins, the hosts of its plan
are held through the grace period and the gang lands there.  With no such set nothing is
preempted.  Under attained-service tiers, a job the pipeline refused preempts its own class's
later-tier jobs where the pipeline then places it.
"""

from __future__ import annotations

from pathlib import Path

from accel.scheduler import ClusterState, DeviceSpec, HostSpec, TopologyConstraint, TopologyLevel
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    JobState,
    Journal,
    Policy,
    PreemptMode,
    PriorityClass,
    QueueingScheduler,
    WaitReason,
)
from accel.scheduler.queueing._preempt import grace_holds

from .conftest import GIB, cluster, job
from .test_host_preempt import GRACE, _check, _hosts, _policy

DAY = 86_400.0
HOG = 100_000  # milli-CPU of a host's 128,000 that a non-preemptible job keeps: 28,000 left


def _preempting(eng: QueueingScheduler, jid: str) -> dict[str, object]:
    return [e.data for e in eng.history(jid) if e.kind == "preempting"][-1]


def _batch(eng: QueueingScheduler, jid: str, n: int, now: float, **kw: object) -> None:
    eng.submit(job(jid, n, est=DAY, priority_class="batch", same_host=True, **kw), now)


def _three_hosts(journal: str | Path = ":memory:") -> QueueingScheduler:
    """a100-0: ``old`` (8 devices, from 0); a100-1: ``mid`` (8, from 100); a100-2: a
    non-preemptible CPU hog (1 device) and ``new`` (7, from 200).  Full; a100-2 has 28,000
    milli-CPU left."""
    eng = QueueingScheduler(cluster(3), _policy(), journal=journal)
    _batch(eng, "old", 8, 0.0)
    eng.cycle(0.0)
    _batch(eng, "mid", 8, 100.0)
    eng.cycle(100.0)
    _batch(eng, "hog", 1, 200.0, cpu_milli=HOG, preemptible=False)
    _batch(eng, "new", 7, 200.0)
    eng.cycle(200.0)
    assert [_hosts(eng, j) for j in ("old", "mid", "hog", "new")] == \
        [["a100-0"], ["a100-1"], ["a100-2"], ["a100-2"]]
    return eng


def test_a_gang_preempts_where_the_pipeline_places_it_not_the_cheapest_count() -> None:
    eng = _three_hosts()
    # 7 devices at 8,000 milli-CPU each: by count, ``new`` (7 devices, least work lost) is the
    # cheapest victim, but a100-2 keeps CPU for 3 such devices only and no other host has a free
    # one: the pipeline would refuse the job there.  Of the sets it accepts, ``mid`` (one victim,
    # 200 s lost) is cheaper than ``old`` (300 s)
    eng.submit(job("p", 7, est=3600.0, priority_class="prod", cpu_milli=56_000), 300.0)
    res = eng.cycle(300.0)
    assert res.preempted == ["mid"] and "p" in res.reservations
    assert _preempting(eng, "mid") == {"for": "p", "host": "a100-1", "stop_at": 300.0 + GRACE}
    assert eng.jobs["new"].state == eng.jobs["old"].state == JobState.RUNNING
    assert grace_holds(eng._st)["p"].hosts == (eng.state.host_index["a100-1"],)
    _check(eng, 300.0)

    res = eng.cycle(300.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["a100-1"]
    assert eng.jobs["new"].state == JobState.RUNNING
    _check(eng, 300.0 + GRACE)


def test_the_gangs_held_host_keeps_its_free_devices_for_it_through_the_grace() -> None:
    eng = QueueingScheduler(cluster(3), _policy())
    _batch(eng, "mid", 8, 0.0)
    eng.cycle(0.0)
    _batch(eng, "old", 6, 100.0)
    _batch(eng, "f", 2, 100.0)  # takes the rest of a100-1 for the moment
    eng.cycle(100.0)
    _batch(eng, "hog", 1, 200.0, cpu_milli=HOG, preemptible=False)
    _batch(eng, "new", 7, 200.0)
    eng.cycle(200.0)
    eng.finish("f", 250.0)
    assert [_hosts(eng, j) for j in ("mid", "old", "hog", "new")] == \
        [["a100-0"], ["a100-1"], ["a100-2"], ["a100-2"]]
    # by count, new (7 devices, least lost) is the cheapest; the pipeline refuses the job on its
    # devices (CPU on a100-2).  old (6 devices, beside a100-1's 2 free ones) beats mid (more lost)
    eng.submit(job("p", 7, est=3600.0, priority_class="prod", cpu_milli=56_000), 300.0)
    res = eng.cycle(300.0)
    assert res.preempted == ["old"] and _preempting(eng, "old")["host"] == "a100-1"
    _check(eng, 300.0)
    # a short job that ends before the grace period does (backfill allows it by count) would go
    # to a100-1's 2 free devices, which the gang needs: it is kept off the held host
    eng.submit(job("small", 2, est=5.0, priority_class="batch", same_host=True), 310.0)
    res = eng.cycle(310.0)
    assert res.started == [] and eng.jobs["small"].wait == WaitReason.PLACEMENT
    _check(eng, 310.0)
    res = eng.cycle(300.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["a100-1"]
    _check(eng, 300.0 + GRACE)


def _four_hosts(journal: str | Path = ":memory:") -> QueueingScheduler:
    """a100-0..2: ``v3``, ``v2``, ``v1`` (8 devices each, from 0, 100, 200); a100-3: a CPU hog
    and ``v0`` (7 devices, from 300).  Full."""
    eng = QueueingScheduler(cluster(4), _policy(), journal=journal)
    for i, jid in enumerate(("v3", "v2", "v1")):
        _batch(eng, jid, 8, 100.0 * i)
        eng.cycle(100.0 * i)
    _batch(eng, "hog", 1, 300.0, cpu_milli=HOG, preemptible=False)
    _batch(eng, "v0", 7, 300.0)
    eng.cycle(300.0)
    assert [_hosts(eng, j) for j in ("v3", "v2", "v1", "v0")] == [["a100-0"], ["a100-1"], ["a100-2"], ["a100-3"]]
    return eng


def _gang(eng: QueueingScheduler) -> None:
    eng.submit(job("p", 15, est=3600.0, priority_class="prod", cpu_milli=120_000), 400.0)


def test_a_gang_over_two_hosts_holds_both_and_lands_there_after_the_grace() -> None:
    eng = _four_hosts()
    _gang(eng)
    res = eng.cycle(400.0)
    # by count, v1 + v0 (15 devices, 300 s lost) were the cheapest; on a100-3 only 3 chunk
    # devices get CPU, so the gang would not fit there: v1 + v2 on a100-2 and a100-1 it does
    assert sorted(res.preempted) == ["v1", "v2"]
    for jid in ("v1", "v2"):
        assert _preempting(eng, jid) == {"for": "p", "hosts": ["a100-1", "a100-2"], "stop_at": 400.0 + GRACE}
    assert eng.jobs["v0"].state == eng.jobs["v3"].state == JobState.RUNNING
    hold = grace_holds(eng._st)["p"]
    assert [eng.state.host_names[h] for h in hold.hosts] == ["a100-1", "a100-2"]
    _check(eng, 400.0)

    res = eng.cycle(400.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["a100-1", "a100-2"]
    assert eng.jobs["p"].wait == WaitReason.NONE
    _check(eng, 400.0 + GRACE)


def test_recovery_in_the_grace_period_keeps_the_gangs_hosts(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    eng = _four_hosts(path)
    _gang(eng)
    eng.cycle(400.0)
    eng.journal.close()
    back = QueueingScheduler.recover(cluster(4), Journal(path), _policy())
    live = _four_hosts()
    _gang(live)
    live.cycle(400.0)
    assert back.snapshot() == live.snapshot()
    assert grace_holds(back._st) == grace_holds(live._st)
    assert back.jobs["p"].target_hosts == live.jobs["p"].target_hosts == ("a100-1", "a100-2")
    for e in (back, live):
        e.cycle(400.0 + GRACE)
        assert _hosts(e, "p") == ["a100-1", "a100-2"]
        _check(e, 400.0 + GRACE)
    assert back.snapshot() == live.snapshot()
    back.journal.close()


def test_a_gang_no_victim_set_lets_place_preempts_nothing() -> None:
    eng = QueueingScheduler(cluster(2), _policy())
    for h in range(2):
        _batch(eng, f"hog{h}", 1, 0.0, cpu_milli=HOG, preemptible=False)
        _batch(eng, f"v{h}", 7, 0.0)
    eng.cycle(0.0)
    assert [_hosts(eng, j) for j in ("hog0", "v0", "hog1", "v1")] == [["a100-0"]] * 2 + [["a100-1"]] * 2
    # 8 devices at 8,000 milli-CPU each: 14 preemptible devices by count (the count-based rule
    # preempted v0 and v1), but each host gives CPU to 3 of them: 6 at most, whatever is preempted
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", cpu_milli=64_000), 10.0)
    res = eng.cycle(10.0)
    assert res.preempted == [] and res.started == []
    assert eng.jobs["v0"].state == eng.jobs["v1"].state == JobState.RUNNING
    assert eng.jobs["p"].state == JobState.QUEUED
    _check(eng, 10.0)
    # the same again next cycle: the failed search is not a victim later either
    assert eng.cycle(20.0).preempted == []


def test_a_gang_the_count_based_victims_suit_keeps_them_and_holds_no_host() -> None:
    eng = _four_hosts()
    # no CPU need: v1 + v0 (the cheapest by count) let the pipeline place it, as before
    eng.submit(job("p", 15, est=3600.0, priority_class="prod"), 400.0)
    res = eng.cycle(400.0)
    assert sorted(res.preempted) == ["v0", "v1"]
    assert "host" not in _preempting(eng, "v0") and "hosts" not in _preempting(eng, "v0")
    assert grace_holds(eng._st)["p"].hosts == ()
    res = eng.cycle(400.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["a100-2", "a100-3"]
    _check(eng, 400.0 + GRACE)


def _racks() -> ClusterState:
    """h0, h2 in rack r0 and h1, h3 in rack r1, 4 devices each."""
    specs = [HostSpec(name=f"h{h}", cpu_milli=128_000, memory_bytes=1024 * GIB, rack=f"r{h % 2}",
                      devices=tuple(DeviceSpec(id=f"h{h}/gpu{d}", vendor="nvidia", model="A100",
                                               memory_bytes=80 * GIB) for d in range(4)))
             for h in range(4)]
    return ClusterState.from_specs(specs)


def test_a_gang_that_needs_one_rack_preempts_inside_one_rack() -> None:
    eng = QueueingScheduler(_racks(), _policy())
    for i, jid in enumerate(("v0", "v1", "v2", "v3")):
        _batch(eng, jid, 4, 100.0 * i)
        eng.cycle(100.0 * i)
    assert [_hosts(eng, j) for j in ("v0", "v1", "v2", "v3")] == [["h0"], ["h1"], ["h2"], ["h3"]]
    rack = TopologyConstraint(TopologyLevel.RACK, required=True)
    eng.submit(job("p", 8, est=3600.0, priority_class="prod", topology=rack), 400.0)
    res = eng.cycle(400.0)
    # by count, v3 and v2 (100 s and 200 s lost) are the cheapest, but they run in two racks:
    # the pipeline would refuse the job on their devices.  Inside one rack, v1 + v3 (r1, 400 s)
    # beat v0 + v2 (r0, 600 s)
    assert sorted(res.preempted) == ["v1", "v3"]
    assert _preempting(eng, "v1")["hosts"] == ["h1", "h3"]
    assert eng.jobs["v2"].state == JobState.RUNNING
    _check(eng, 400.0)
    res = eng.cycle(400.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["h1", "h3"]
    _check(eng, 400.0 + GRACE)


# -- attained-service tiers -------------------------------------------------------------------------

def _tiered() -> Policy:
    return Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                  preempt_mode=PreemptMode.REQUEUE, demote_after_device_s=(1000.0,), grace_s=GRACE)


def test_a_refused_one_host_job_preempts_a_later_tier_job_of_its_class_on_its_host() -> None:
    eng = QueueingScheduler(cluster(2), _tiered())
    eng.submit(job("long", 4, est=DAY, same_host=True, cpu_milli=120_000), 0.0)
    eng.submit(job("keep", 8, est=DAY, same_host=True, preemptible=False), 0.0)
    eng.cycle(0.0)
    assert _hosts(eng, "long") == ["a100-0"] and _hosts(eng, "keep") == ["a100-1"]
    # long has 2,000 device-s by 500 s: tier 1.  new (tier 0) fits a100-0 by count (4 free
    # devices) but not by CPU (8,000 milli left): refused there, it preempts long on a100-0
    eng.submit(job("new", 4, est=3600.0, same_host=True, cpu_milli=32_000), 500.0)
    res = eng.cycle(500.0)
    assert res.preempted == ["long"] and "new" in res.reservations
    assert _preempting(eng, "long")["host"] == "a100-0"
    _check(eng, 500.0)
    res = eng.cycle(500.0 + GRACE)
    assert "new" in res.started and _hosts(eng, "new") == ["a100-0"]
    assert eng.jobs["keep"].state == JobState.RUNNING
    _check(eng, 500.0 + GRACE)


def test_a_tier_gang_preempts_where_the_pipeline_places_it() -> None:
    eng = QueueingScheduler(cluster(3), _tiered())
    eng.submit(job("old1", 8, est=DAY, same_host=True), 0.0)
    eng.submit(job("hog", 1, est=DAY, same_host=True, cpu_milli=HOG, preemptible=False), 0.0)
    eng.cycle(0.0)
    eng.submit(job("old0", 7, est=DAY, same_host=True), 100.0)
    eng.submit(job("young", 8, est=DAY, same_host=True, preemptible=False), 100.0)
    eng.cycle(100.0)
    assert [_hosts(eng, j) for j in ("old1", "hog", "old0", "young")] == \
        [["a100-0"], ["a100-1"], ["a100-1"], ["a100-2"]]
    # at 300 s old1 and old0 are in tier 1; old0 lost less work and frees the 7 devices by
    # count, but on a100-1 only 3 chunk devices get CPU: the gang takes old1's host instead
    eng.submit(job("g", 7, est=3600.0, cpu_milli=56_000), 300.0)
    res = eng.cycle(300.0)
    assert res.preempted == ["old1"] and "g" in res.reservations
    assert _preempting(eng, "old1")["host"] == "a100-0"
    assert eng.jobs["old0"].state == JobState.RUNNING
    _check(eng, 300.0)
    res = eng.cycle(300.0 + GRACE)
    assert "g" in res.started and _hosts(eng, "g") == ["a100-0"]
    _check(eng, 300.0 + GRACE)


def test_a_tier_preemptor_refused_again_in_its_grace_period_takes_no_new_victim() -> None:
    eng = QueueingScheduler(cluster(2), _tiered())
    eng.submit(job("long", 4, est=DAY, same_host=True, cpu_milli=120_000), 0.0)
    eng.submit(job("f", 4, est=DAY, same_host=True), 0.0)  # the rest of a100-0 for the moment
    eng.submit(job("l2", 4, est=DAY, same_host=True, cpu_milli=120_000), 0.0)
    eng.submit(job("keep", 4, est=DAY, same_host=True, preemptible=False), 0.0)
    eng.cycle(0.0)
    eng.finish("f", 100.0)
    assert [_hosts(eng, j) for j in ("long", "l2", "keep")] == [["a100-0"], ["a100-1"], ["a100-1"]]
    eng.submit(job("new", 4, est=3600.0, same_host=True, cpu_milli=32_000), 500.0)
    res = eng.cycle(500.0)
    # a100-0's 4 free devices lack CPU; l2 frees a100-1 for it
    assert res.preempted == ["l2"] and _preempting(eng, "l2")["host"] == "a100-1"
    # refused again while l2 winds down (a100-0 still lacks CPU): long is no new victim
    res = eng.cycle(510.0)
    assert res.preempted == [] and eng.jobs["long"].state == JobState.RUNNING
    _check(eng, 510.0)
    res = eng.cycle(500.0 + GRACE)
    assert "new" in res.started and _hosts(eng, "new") == ["a100-1"]
    _check(eng, 500.0 + GRACE)


def test_a_gang_the_pipeline_refused_where_the_counts_fit_preempts_where_it_places() -> None:
    eng = QueueingScheduler(cluster(2), _policy())
    _batch(eng, "v", 8, 0.0)
    _batch(eng, "hog", 1, 0.0, cpu_milli=HOG, preemptible=False)
    eng.cycle(0.0)
    assert _hosts(eng, "v") == ["a100-0"] and _hosts(eng, "hog") == ["a100-1"]
    # 7 free devices on a100-1 by count, but CPU for 3 of them: refused there (placement); the
    # count-based rule saw nothing to preempt, the pipeline places it where v runs
    eng.submit(job("p", 7, est=3600.0, priority_class="prod", cpu_milli=56_000), 10.0)
    res = eng.cycle(10.0)
    assert res.preempted == ["v"] and "p" in res.reservations
    assert _preempting(eng, "v")["host"] == "a100-0"
    _check(eng, 10.0)
    res = eng.cycle(10.0 + GRACE)
    assert "p" in res.started and _hosts(eng, "p") == ["a100-0"]
    _check(eng, 10.0 + GRACE)
