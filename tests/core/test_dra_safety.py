"""Safe DRA publication: an allocator model over the slices proves no silicon is handed out twice.

The model implements the allocation rules of the DRA structured-parameters allocator that matter
here: a device is allocated at most once across all claims (none of these devices allows multiple
allocations once it is partitioned), and a device fits only while every counter it consumes stays
within its counter set's capacity.  Ground truth about silicon comes from the inventory, not the
slices: a partition owns its placement slots on its parent (or a unit of its own), a parent owns
itself and everything its partitions own.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.integrations.k8s import resource_slices
from accel.integrations.k8s.testing import DraPoolModel
from accel.model import HostInventory, validate
from accel.plugin import BackendConfig
from accel.sim import PLUGIN, list_profiles

amd = pytest.importorskip("accel.plugins.amd")

PARTITION_SCENARIOS = ["mi300x-8-cpx", "mi300x-8", "radeon-rx7800xt"]


def sim(profile: str) -> HostInventory:
    return PLUGIN.open(BackendConfig(options={"profile": profile})).inventory()


def amd_scenario(name: str) -> HostInventory:
    with amd.PLUGIN.open(BackendConfig(options={"scenario": name})) as backend:
        inv: HostInventory = backend.inventory()
    return inv


CASES: list[tuple[str, HostInventory]] = [(p, sim(p)) for p in list_profiles()] + [
    (f"amd:{s}", amd_scenario(s)) for s in PARTITION_SCENARIOS
]


def _silicon(inv: HostInventory) -> dict[str, frozenset[object]]:
    """accel id -> the units of silicon it occupies."""
    units: dict[str, set[object]] = {d.id: {d.id} for d in inv.devices}
    for p in inv.partitions:
        own: set[object] = {p.id}
        if p.placement is not None:
            own |= {(p.parent_id, slot) for slot in range(p.placement.start, p.placement.end)}
        units[p.id] = own
        units[p.parent_id] |= own
    return {k: frozenset(v) for k, v in units.items()}


Pool = DraPoolModel  # the allocator model (accel.integrations.k8s.testing)

def pools(inv: HostInventory, partitionable: bool) -> Iterator[tuple[Pool, dict[str, str]]]:
    projection = resource_slices(inv, partitionable=partitionable)
    by_driver: dict[str, list[dict[str, Any]]] = {}
    for s in projection.slices:
        by_driver.setdefault(s["spec"]["driver"], []).append(s)
    for slices in by_driver.values():
        pool = Pool(slices)
        ids = {n: d["attributes"]["accel.dev/id"]["string"] for n, d in pool.devices.items()}
        yield pool, ids


def _disjoint(chosen: list[str], ids: dict[str, str], silicon: dict[str, frozenset[object]]) -> bool:
    seen: set[object] = set()
    for name in chosen:
        units = silicon[ids[name]]
        if seen & units:
            return False
        seen |= units
    return True


@pytest.mark.parametrize("partitionable", [False, True], ids=["default", "partitionable"])
@pytest.mark.parametrize(("name", "inv"), CASES, ids=[c[0] for c in CASES])
def test_no_allocation_overlaps_in_silicon(name: str, inv: HostInventory, partitionable: bool) -> None:
    silicon = _silicon(inv)
    published = 0
    for pool, ids in pools(inv, partitionable):
        published += len(pool.devices)
        # Exhaustive within each counter-set group: every set the allocator accepts is disjoint.
        for group in pool.groups():
            for r in range(1, len(group) + 1):
                for combo in itertools.combinations(group, r):
                    if pool.fits(list(combo)):
                        assert _disjoint(list(combo), ids, silicon), (name, combo)
        # Greedy-random claims over the whole pool, one device per request, until nothing fits.
        rng = random.Random(f"{name}-{partitionable}")
        for _ in range(200):
            chosen: list[str] = []
            order = list(pool.devices)
            rng.shuffle(order)
            for candidate in order:
                if pool.fits([*chosen, candidate]):
                    chosen.append(candidate)
            assert _disjoint(chosen, ids, silicon), (name, chosen)
    # Nothing usable is lost: every partition, and every unpartitioned device, is offered.
    expected = len(inv.partitions) + sum(1 for d in inv.devices if not any(p.parent_id == d.id for p in inv.partitions))
    if partitionable:
        expected = len(inv.partitions) + len(inv.devices)
    assert published == expected


PARTITIONED = [c for c in CASES if c[1].partitions]


@pytest.mark.parametrize(("name", "inv"), PARTITIONED, ids=[c[0] for c in PARTITIONED])
def test_partitionable_mode_still_allocates_all_partitions_or_the_parent(name: str, inv: HostInventory) -> None:
    for pool, _ids in pools(inv, partitionable=True):
        parts = [n for n in pool.devices if pool.devices[n]["attributes"]["accel.dev/type"]["string"] == "partition"]
        parents = [n for n in pool.devices if n not in parts]
        assert pool.fits(parts)  # all live partitions at once
        for parent in parents:
            assert pool.fits([parent])
            mine = [p for p in parts if pool.devices[p]["consumesCounters"][0]["counterSet"]
                    == pool.devices[parent]["consumesCounters"][0]["counterSet"]]
            assert mine and all(not pool.fits([parent, p]) for p in mine)


def test_the_model_catches_the_old_unguarded_publication() -> None:
    """Strip the counters (what an API server with DRAPartitionableDevices off does): overlap found."""
    inv = sim("a100-mig")
    silicon = _silicon(inv)
    (pool, ids), = pools(inv, partitionable=True)
    for dev in pool.devices.values():
        dev.pop("consumesCounters")
    everything = list(pool.devices)
    assert pool.fits(everything) and not _disjoint(everything, ids, silicon)


def test_default_mode_follows_the_partition_mode() -> None:
    mig = resource_slices(sim("a100-mig"))
    assert [d["attributes"]["accel.dev/type"]["string"] for d in mig.devices] == ["partition"] * 4
    assert list(mig.withheld) == [sim("a100-mig").devices[0].id]
    cpx = resource_slices(amd_scenario("mi300x-8-cpx"))
    assert sum(1 for _ in cpx.devices) == 64 and len(cpx.withheld) == 8
    spx = resource_slices(amd_scenario("mi300x-8"))
    assert sum(1 for _ in spx.devices) == 8 and spx.withheld == {}
    assert not any("sharedCounters" in s["spec"] or "consumesCounters" in d
                   for s in cpx.slices for d in s["spec"].get("devices", []))


def test_counter_sets_sit_in_their_own_slices_within_the_limits() -> None:
    projection = resource_slices(amd_scenario("mi300x-8-cpx"), partitionable=True)
    counters = [s for s in projection.slices if "sharedCounters" in s["spec"]]
    devices = [s for s in projection.slices if "devices" in s["spec"]]
    assert all("devices" not in s["spec"] for s in counters)
    assert sum(len(s["spec"]["sharedCounters"]) for s in counters) == 8
    for s in counters:
        assert len(s["spec"]["sharedCounters"]) <= 8
        assert sum(len(c["counters"]) for c in s["spec"]["sharedCounters"]) <= 32
    assert all(len(s["spec"]["devices"]) <= 64 for s in devices)
    assert sum(len(s["spec"]["devices"]) for s in devices) == 72
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in projection.slices} == {len(projection.slices)}
    first = next(iter(counters[0]["spec"]["sharedCounters"]))
    assert first["counters"]["memory"] == {"value": str(192 * 2**30)}
    assert first["counters"]["slot-7"] == {"value": "1"}


@st.composite
def _mig_layouts(draw: st.DrawFn) -> HostInventory:
    """a100-mig with a random set of non-overlapping instances (some without placement or memory)."""
    base = sim("a100-mig").model_dump(mode="json")
    template = base["partitions"][0]
    free = list(range(8))
    parts = []
    for n in range(draw(st.integers(0, 7))):
        size = draw(st.sampled_from([1, 2, 4]))
        starts = [s for s in free if s % size == 0 and all(x in free for x in range(s, s + size))]
        if not starts:
            break
        start = draw(st.sampled_from(starts))
        free = [x for x in free if x not in range(start, start + size)]
        p = json.loads(json.dumps(template))
        p["id"] = f"nvidia:MIG-00000000-0000-4000-8000-{n:012d}"
        p["uuid"] = p["id"].split(":", 1)[1]
        p["binding"]["visible_id"] = p["uuid"]
        p["profile"] = f"{size}g.{size * 10}gb"
        p["gi_id"] = n + 1
        p["placement"] = None if draw(st.booleans()) and size == 1 else {"start": start, "size": size}
        p["memory_bytes"] = None if draw(st.integers(0, 9)) == 0 else size * 10 * 10**9
        p["compute_units"] = size * 14
        parts.append(p)
    base["partitions"] = parts
    return validate(HostInventory, base)


@settings(max_examples=60, deadline=None)
@given(inv=_mig_layouts(), partitionable=st.booleans())
def test_random_mig_layouts_never_overlap(inv: HostInventory, partitionable: bool) -> None:
    silicon = _silicon(inv)
    for pool, ids in pools(inv, partitionable):
        for group in pool.groups():
            for r in range(1, len(group) + 1):
                for combo in itertools.combinations(group, r):
                    if pool.fits(list(combo)):
                        assert _disjoint(list(combo), ids, silicon), combo
        parts = [n for n, d in pool.devices.items() if d["attributes"]["accel.dev/type"]["string"] == "partition"]
        assert pool.fits(parts)


def test_an_unplaced_instance_is_not_named_like_a_placed_sibling() -> None:
    """Found by the property test above: gi_id 2 (no placement) and a placement at slot 2 collided."""
    data = sim("a100-mig").model_dump(mode="json")
    unplaced = json.loads(json.dumps(data["partitions"][2]))  # 1g.10gb at slot 2
    uuid = "MIG-00000000-0000-4000-8000-000000000001"
    unplaced.update(id=f"nvidia:{uuid}", uuid=uuid, placement=None, gi_id=2)
    data["partitions"] = [data["partitions"][2], unplaced]
    names = sorted(d["name"] for d in resource_slices(validate(HostInventory, data)).devices)
    assert names == ["gpu-0000-07-00-0-1g10gb-2", "gpu-0000-07-00-0-1g10gb-gi2"]
