"""The carving planner: keeps whole devices and large profiles placeable, obeys the catalog,
never double-books a placement, destroys only idle partitions; and its hook in the Scheduler."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.model import PartitionProfile, Placement
from accel.plugin import BackendConfig
from accel.scheduler import (
    CarveAction,
    CarvingPlanner,
    ClusterState,
    DeviceSpec,
    HostSpec,
    InvalidRequestError,
    LiveSlice,
    Request,
    Scheduler,
    SchedulerStateError,
    Share,
    SliceCatalog,
    SliceNeed,
    plan_device,
)
from accel.sim import SimBackend, SimPlugin


def _open(profile: str) -> SimBackend:
    backend = SimPlugin().open(BackendConfig(options={"profile": profile}))
    assert isinstance(backend, SimBackend)
    return backend


@functools.cache
def h100() -> SliceCatalog:
    """The H100-80GB MIG catalog as the simulator reports it (not retyped here)."""
    backend = _open("dgx-h100")
    dev = backend.inventory().devices[0]
    return SliceCatalog.from_profiles(p for p in backend.partition_profiles() if p.parent_id == dev.id)


def _need(name: str) -> SliceNeed:
    return SliceNeed(profile=name)


def _placeable(cat: SliceCatalog, live: tuple[LiveSlice, ...], name: str, *, busy_only: bool = False) -> bool:
    layout = [(cat.index(s.profile), s.start) for s in live if s.busy or not busy_only]
    k = cat.index(name)
    return any(cat.can_add(layout, k, s) for s, _ in cat.profiles[k].placements)


def test_catalog_comes_from_the_model_and_enumerates_full_layouts() -> None:
    cat = h100()
    assert [p.name for p in cat.profiles] == ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert cat.slots == 8
    layouts = cat.full_layouts()
    assert len(layouts) == len(set(layouts))
    names = {tuple((cat.profiles[k].name, s) for k, s in lay) for lay in layouts}
    assert (("7g.80gb", 0),) in names and (("4g.40gb", 0), ("3g.40gb", 4)) in names
    assert tuple(("1g.10gb", s) for s in range(7)) in names
    for lay in layouts:
        cat.check(lay)  # obeys every rule
        assert not any(cat.can_add(lay, k, s) for k, p in enumerate(cat.profiles) for s, _ in p.placements)


def test_a_small_slice_keeps_the_large_profiles_placeable_where_first_fit_does_not() -> None:
    cat = h100()
    best = plan_device(cat, [], _need("1g.10gb"))[0]
    assert (best.action, best.profile, best.start, best.destroy) == (CarveAction.CREATE, "1g.10gb", 6, ())
    assert best.largest_open_after == "4g.40gb"
    planner = CarvingPlanner({"g0": cat})
    naive = CarvingPlanner({"g0": cat}, policy="first-fit")
    for p in (planner, naive):
        p.apply(p.plan(_need("1g.10gb")))  # type: ignore[arg-type]
    assert _placeable(cat, planner.live("g0"), "4g.40gb")
    assert not _placeable(cat, naive.live("g0"), "4g.40gb")  # first fit took slot 0
    # after a 1g.20gb as well, the planner's device still takes a 4g (slots 0-3 kept together)
    for p in (planner, naive):
        p.apply(p.plan(_need("1g.20gb")))  # type: ignore[arg-type]
    assert _placeable(cat, planner.live("g0"), "4g.40gb")
    assert [(s.profile, s.start) for s in naive.live("g0")] == [("1g.10gb", 0), ("1g.20gb", 2)]


def test_a_whole_device_stays_untouched_where_first_fit_cuts_it() -> None:
    cat = h100()
    planner = CarvingPlanner({"a": cat, "b": cat})
    naive = CarvingPlanner({"a": cat, "b": cat}, policy="first-fit")
    for p in (planner, naive):
        p.add("b", "1g.10gb", 6, id="b-busy", busy=True)
        plan = p.plan(_need("1g.10gb"))
        assert plan is not None
        p.apply(plan)
    assert planner.live("a") == () and planner.whole_devices() == 1
    assert naive.live("a") != () and naive.whole_devices() == 0
    whole = planner.plan(_need("7g.80gb"))
    assert whole is not None and whole.device == "a"
    assert naive.plan(_need("7g.80gb")) is None


def test_reuse_of_an_idle_partition_is_preferred_to_a_create() -> None:
    cat = h100()
    planner = CarvingPlanner({"a": cat, "b": cat})
    planner.add("a", "3g.40gb", 4, id="idle3g")
    planner.add("b", "3g.40gb", 0, id="busy3g", busy=True)
    plan = planner.plan(_need("3g.40gb"))
    assert plan is not None
    # b is already cut (a has no busy partition): the planner creates next to the busy one
    assert (plan.device, plan.action, plan.start) == ("b", CarveAction.CREATE, 4)
    planner.apply(plan)
    again = planner.plan(_need("3g.40gb"))
    assert again is not None and (again.action, again.partition_id) == (CarveAction.REUSE, "idle3g")
    pid, steps = planner.apply(again)
    assert pid == "idle3g" and steps == ()


def test_idle_partitions_are_destroyed_when_a_larger_slice_needs_their_room_busy_ones_never() -> None:
    cat = h100()
    planner = CarvingPlanner({"g": cat})
    for s in range(7):
        planner.add("g", "1g.10gb", s, id=f"idle{s}")
    plan = planner.plan(_need("7g.80gb"))
    assert plan is not None and plan.action is CarveAction.CREATE
    assert sorted(plan.destroy) == [f"idle{s}" for s in range(7)]
    pid, steps = planner.apply(plan)
    assert [step.kind for step in steps] == ["destroy"] * 7 + ["create"]
    assert planner.live("g") == (LiveSlice(pid, "7g.80gb", 0, True),)
    assert planner.destroyed == 7 and planner.created == 1
    planner.release(pid)
    # now one busy 1g in the way: a 7g is impossible, a 4g destroys only the idle room it needs
    other = CarvingPlanner({"g": cat})
    other.add("g", "1g.10gb", 0, id="busy0", busy=True)
    for s in range(1, 7):
        other.add("g", "1g.10gb", s, id=f"idle{s}")
    assert other.plan(_need("7g.80gb")) is None
    three = other.plan(_need("3g.40gb"))
    assert three is not None and three.start == 4 and sorted(three.destroy) == ["idle4", "idle5", "idle6"]
    assert CarvingPlanner({"g": cat}, destroy=False).plan(_need("7g.80gb")) is not None  # empty device
    nodestroy = CarvingPlanner({"g": cat}, destroy=False)
    nodestroy.add("g", "1g.10gb", 6, id="idle6")
    assert nodestroy.plan(_need("7g.80gb")) is None


def test_a_static_layout_only_reuses() -> None:
    cat = h100()
    planner = CarvingPlanner({"g": cat}, create=False, destroy=False)
    planner.add("g", "4g.40gb", 0)
    planner.add("g", "3g.40gb", 4)
    first = planner.plan(_need("1g.20gb"))
    assert first is not None and first.action is CarveAction.REUSE and first.profile == "3g.40gb"
    planner.apply(first)
    second = planner.plan(SliceNeed(memory_bytes=30 << 30, compute_ratio=0.5))
    assert second is not None and second.profile == "4g.40gb"
    planner.apply(second)
    assert planner.plan(_need("1g.10gb")) is None


def test_typed_errors_name_what_was_wrong() -> None:
    cat = h100()
    with pytest.raises(InvalidRequestError, match="no placements"):
        SliceCatalog.from_profiles([PartitionProfile(name="vir04", parent_id="npu0", memory_bytes=1,
                                                     compute_ratio=0.5)])
    with pytest.raises(InvalidRequestError, match="compute_ratio"):
        SliceCatalog.from_profiles([PartitionProfile(name="x", parent_id="g", memory_bytes=1,
                                                     placements=(Placement(start=0, size=1),))])
    planner = CarvingPlanner({"g": cat})
    with pytest.raises(InvalidRequestError, match="not in this device's catalog"):
        planner.add("g", "9g.90gb", 0)
    planner.add("g", "3g.40gb", 4, id="p")
    with pytest.raises(SchedulerStateError, match="does not fit"):
        planner.add("g", "1g.10gb", 5)
    with pytest.raises(SchedulerStateError, match="already recorded"):
        planner.add("g", "1g.10gb", 0, id="p")
    with pytest.raises(SchedulerStateError, match="not busy"):
        planner.release("p")
    with pytest.raises(SchedulerStateError, match="not known"):
        planner.release("nope")
    with pytest.raises(InvalidRequestError, match="no carving catalog"):
        planner.plan(_need("1g.10gb"), ["h"])
    with pytest.raises(InvalidRequestError, match="policy"):
        CarvingPlanner({"g": cat}, policy="random")
    with pytest.raises(InvalidRequestError):
        SliceNeed()
    plan = planner.plan(_need("7g.80gb"))
    assert plan is not None and plan.destroy == ("p",)
    planner.apply(planner.plan(_need("3g.40gb")))  # type: ignore[arg-type]  # reuses p
    with pytest.raises(SchedulerStateError, match="not an idle partition"):
        planner.apply(plan)  # stale: p is busy now
    assert plan_device(cat, [], _need("9g.90gb")) == ()


def test_the_planner_reads_live_partitions_from_the_model() -> None:
    backend = _open("a100-mig")
    parts = backend.partitions()
    planner = CarvingPlanner.from_model(backend.partition_profiles(), parts, busy=[parts[0].id])
    (dev,) = planner.catalogs
    assert {s.id for s in planner.live(dev)} == {p.id for p in parts}
    assert [s.busy for s in planner.live(dev) if s.id == parts[0].id] == [True]
    plan = planner.plan(_need("7g.80gb"))
    assert plan is None  # a busy partition is in the way


_PROFILES = ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, 50)), min_size=1, max_size=40),
       st.sampled_from(["layouts", "first-fit"]))
def test_never_double_books_respects_the_catalog_and_destroys_only_idle(
        ops: list[tuple[int, bool, int]], policy: str) -> None:
    cat = h100()
    planner = CarvingPlanner({"a": cat, "b": cat, "c": cat}, policy=policy)
    held: list[str] = []
    for k, release, pick in ops:
        if release and held:
            planner.release(held.pop(pick % len(held)))
            continue
        before = {s.id: s for d in planner.catalogs for s in planner.live(d)}
        plan = planner.plan(_need(_PROFILES[k]))
        if plan is None:
            continue
        assert cat.profiles[cat.index(plan.profile)].fits(cat.profiles[k].memory_bytes, cat.profiles[k].compute_ratio)
        assert plan.start in [s for s, _ in cat.profiles[cat.index(plan.profile)].placements]
        assert all(not before[pid].busy for pid in plan.destroy)
        pid, steps = planner.apply(plan)
        assert pid not in held
        if plan.action is CarveAction.REUSE:
            assert not before[pid].busy and steps == ()
        held.append(pid)
        for d in planner.catalogs:
            live = planner.live(d)
            cat.check([(cat.index(s.profile), s.start) for s in live])  # no overlap, compute, counts
        busy = {s.id for d in planner.catalogs for s in planner.live(d) if s.busy}
        assert busy == set(held)


def _mig_cluster() -> tuple[ClusterState, CarvingPlanner]:
    cat = h100()
    milli = {p.name: round(p.compute_ratio * 1000) for p in cat.profiles}
    hosts = [HostSpec(f"h{h}", 64_000, 1 << 40, tuple(
        DeviceSpec(id=f"h{h}/g{j}", vendor="nvidia", model="H100", memory_bytes=80 << 30,
                   partition_profiles=milli) for j in range(2))) for h in range(2)]
    state = ClusterState.from_specs(hosts)
    return state, CarvingPlanner({d: cat for ids in state.dev_ids for d in ids})


def test_the_scheduler_places_slices_through_the_planner() -> None:
    state, planner = _mig_cluster()
    sched = Scheduler(state, "best-fit", carving=planner)
    a = sched.place(Request("a", partition="1g.10gb"))
    assert a is not None
    pid, steps = sched.carved(a)  # type: ignore[misc]
    assert [s.kind for s in steps] == ["create"] and pid.startswith(a.device_ids[0])
    b = sched.place(Request("b", partition="3g.40gb"))
    assert b is not None and b.device_ids == a.device_ids  # next to the first, not on a whole GPU
    assert planner.whole_devices() == 3
    shared = sched.place(Request("s", share=Share(250, 19 << 30)))
    assert shared is not None and shared.device_ids == a.device_ids  # a 2g.20gb in slots 4-5
    sched.release(a)
    assert [s.busy for s in planner.live(a.device_ids[0]) if s.id == pid] == [False]
    again = sched.place(Request("c", partition="1g.10gb"))
    assert again is not None and sched.carved(again)[0] == pid  # type: ignore[index]  # reused
    wholes = [sched.place(Request(f"w{i}", partition="7g.80gb")) for i in range(4)]
    assert [w is not None for w in wholes] == [True, True, True, False]


def test_without_a_planner_the_scheduler_is_unchanged() -> None:
    state, _ = _mig_cluster()
    sched = Scheduler(state, "best-fit")
    a = sched.place(Request("a", partition="1g.10gb"))
    assert a is not None and sched.carved(a) is None
    assert sched.decide(Request("b", partition="3g.40gb")).carve is None
