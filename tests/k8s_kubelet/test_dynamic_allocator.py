"""The allocator model (tests/core/test_dra_safety.py) over dynamic layouts: what the slices of
``--dynamic-partitions`` let the DRA allocator hand out at once is exactly what the hardware's MIG
rules allow, with or without foreign partitions, and stays so while partitions come and go.

Ground truth is not the counters: it is the profile catalog's geometry (memory slices of each
placement, compute slices of each profile, most instances) checked on every set the allocator
accepts, and the simulator's own carving rules (NVIDIA's) on a sample of them, refusals included.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from accel.errors import PartitionNoPlacementError
from accel.integrations.k8s import resource_slices
from accel.integrations.k8s._dra import MIG_COMPUTE_SLICES
from accel.model import HostInventory
from accel.plugin import BackendConfig
from accel.sim import SimPlugin
from tests._helpers import loaded_script

CHAIN = Path(__file__).resolve().parents[2] / "benchmarks" / "partitions" / "kubelet_chain.py"


@pytest.fixture(scope="module")
def chain() -> Any:
    with loaded_script(CHAIN, "accel_kubelet_chain") as module:
        yield module


def _fitting(pool: Any) -> list[list[str]]:
    """Every set of devices the allocator accepts at once (depth-first: only fitting sets grow)."""
    names = sorted(pool.devices)
    out: list[list[str]] = []

    def grow(i: int, cur: list[str]) -> None:
        out.append(cur)
        for j in range(i, len(names)):
            if pool.fits([*cur, names[j]]):
                grow(j + 1, [*cur, names[j]])

    grow(0, [])
    return out


def _backend(foreign: list[tuple[str, int]]) -> Any:
    """a100-mig in memory with exactly ``foreign`` (profile, start) partitions."""
    backend = SimPlugin().open(BackendConfig(options={"profile": "a100-mig"}))
    for p in backend.partitions():
        backend.destroy_partition(p.id)
    gpu = backend.inventory().devices[0].id
    for profile, start in foreign:
        backend.create_partition(gpu, profile, placement_start=start)
    return backend


def _random_foreign(seed: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    backend = _backend([])
    gpu = backend.inventory().devices[0]
    profiles = [p for p in backend.partition_profiles() if p.parent_id == gpu.id]
    made: list[tuple[str, int]] = []
    for _ in range(rng.randint(1, 4)):
        prof = rng.choice(profiles)
        start = rng.choice(prof.placements).start
        try:
            part = backend.create_partition(gpu.id, prof.name, placement_start=start)
        except PartitionNoPlacementError:
            continue
        assert part.placement is not None
        made.append((part.profile, part.placement.start))
    return made


LAYOUTS = [[], [("1g.10gb", 2), ("1g.10gb", 3)], [("3g.40gb", 4)], [("7g.80gb", 0)]] + [
    _random_foreign(seed) for seed in range(4)]


@pytest.mark.parametrize("foreign", LAYOUTS, ids=[",".join(f"{p}@{s}" for p, s in lay) or "empty" for lay in LAYOUTS])
def test_the_allocator_accepts_exactly_the_layouts_the_hardware_allows(chain: Any, foreign: list[tuple[str, int]]
                                                                       ) -> None:
    backend = _backend(foreign)
    inv: HostInventory = backend.inventory()
    gpu = inv.devices[0]
    profiles = {p.name: p for p in inv.partition_profiles if p.parent_id == gpu.id}
    projection = resource_slices(inv, dynamic=True)
    pool = chain.Allocator(projection.slices)
    by_name = {d["name"]: d for d in projection.devices}
    # The foreign partitions are offered as themselves; every other device is a placement.
    live = {p.id for p in inv.partitions}
    assert {d["attributes"]["accel.dev/id"]["string"] for d in by_name.values() if "accel.dev/id" in d["attributes"]
            } == live
    where: dict[str, tuple[str, int]] = {n: (prof, start) for n, (_, prof, start) in projection.placements.items()}
    for part in inv.partitions:
        assert part.placement is not None
        where[next(n for n, d in by_name.items()
                   if d["attributes"].get("accel.dev/id", {}).get("string") == part.id)] = (part.profile,
                                                                                              part.placement.start)
    foreign_names = set(by_name) - set(projection.placements)

    def geometry_allows(chosen: list[str]) -> bool:
        everything = [where[n] for n in chosen if n not in foreign_names] + list(foreign)
        slots: list[int] = []
        for prof, start in everything:
            slots += range(start, start + (profiles[prof].memory_slices or 0))
        compute = sum(int(prof.split("g.")[0]) for prof, _ in everything)
        counts = [sum(p == prof for p, _ in everything) for prof in profiles]
        return (len(slots) == len(set(slots)) and compute <= MIG_COMPUTE_SLICES
                and all(c <= (profiles[p].max_instances or c) for c, p in zip(counts, profiles, strict=True)))

    sets = _fitting(pool)
    assert all(geometry_allows(s) for s in sets)  # nothing the allocator accepts overlaps
    # ... and it accepts everything the geometry allows: each refused extension is illegal.
    names = sorted(pool.devices)
    for s in sets:
        for extra in names:
            if extra not in s and not pool.fits([*s, extra]):
                assert not geometry_allows([*s, extra]), (s, extra)
    # The simulator (NVIDIA's rules) agrees on a sample: it makes every accepted set, refuses the rest.
    rng = random.Random(str(foreign))
    for s in rng.sample(sets, min(12, len(sets))):
        made = [backend.create_partition(gpu.id, where[n][0], placement_start=where[n][1])
                for n in s if n not in foreign_names]
        for extra in rng.sample(names, min(4, len(names))):
            if extra in s or extra in foreign_names or pool.fits([*s, extra]):
                continue
            with pytest.raises(PartitionNoPlacementError):
                backend.create_partition(gpu.id, where[extra][0], placement_start=where[extra][1])
        for part in made:
            backend.destroy_partition(part.id)
    backend.close()


def test_created_partitions_appear_in_the_slices_and_allocations_never_overlap(chain: Any, short_dir: Path) -> None:
    """A cluster's sequence through the plugin: allocate + prepare, unprepare + deallocate."""
    foreign = chain.setup(short_dir)
    backend, plugin = chain._open(short_dir)
    rng = random.Random(7)
    done: dict[str, int] = {}
    try:
        for n in range(40):
            what = chain.step(plugin, rng, str(n))
            done[what] = done.get(what, 0) + 1
            assert what not in ("prepare-failed", "unprepare-failed")
            plugin.refresh()
            inv = backend.inventory()
            profiles = {p.name: p for p in inv.partition_profiles}
            names = {d["name"]: d for s in plugin.view.slices for d in s["spec"].get("devices", [])}
            for uid, claim in plugin.store.claims().items():
                for owned in claim.partitions:
                    part = next(p for p in inv.partitions if p.id == owned.partition_id)
                    # in the inventory with its profile's memory and compute share ...
                    assert part.memory_bytes == profiles[part.profile].memory_bytes
                    assert part.compute_units == profiles[part.profile].compute_units
                    # ... and in the slices, as the placement device the claim was allocated
                    dev = names[owned.device]
                    assert dev["capacity"]["accel.dev/memory"]["value"] == str(part.memory_bytes)
                    assert part.placement is not None
                    assert dev["attributes"]["accel.dev/placementStart"]["int"] == part.placement.start
                    assert claim.devices[0].device == owned.device, uid
            claims = plugin.api.claims()
            taken = [r["device"] for c in claims.values() for r in c["status"]["allocation"]["devices"]["results"]]
            assert chain.Allocator(plugin.view.slices).fits(taken)
    finally:
        plugin.close()
        backend.close()
    bad, _owned = chain.violations(short_dir, foreign)
    assert bad == []
    assert done.get("prepared", 0) >= 5 and done.get("unprepared", 0) >= 5, done


def test_eight_gpus_fit_the_slice_limits() -> None:
    """8 A100s: 144 placements and 8 counter sets, split within DRA's per-slice limits."""
    import json

    from accel.model import validate

    data = _backend([]).inventory().model_dump(mode="json")
    dev, profiles = data["devices"][0], data["partition_profiles"]
    data["devices"], data["partition_profiles"] = [], []
    for i in range(8):
        d = json.loads(json.dumps(dev))
        d["id"] = d["id"][:-2] + f"{i:02d}"
        d["uuid"] = d["id"].split(":", 1)[1]
        d["pci"]["bus_id"] = f"0000:{0x07 + i:02x}:00.0"
        data["devices"].append(d)
        data["partition_profiles"] += [{**p, "parent_id": d["id"]} for p in profiles]
    projection = resource_slices(validate(HostInventory, data), dynamic=True)
    assert len(list(projection.devices)) == 144 and len(projection.placements) == 144
    for s in projection.slices:
        spec = s["spec"]
        assert "devices" not in spec or "sharedCounters" not in spec
        assert len(spec.get("devices", [])) <= 64
        assert len(spec.get("sharedCounters", [])) <= 8
        assert sum(len(c["counters"]) for c in spec.get("sharedCounters", [])) <= 32
        assert spec["pool"]["resourceSliceCount"] == len(projection.slices)
    assert sum(len(s["spec"].get("sharedCounters", [])) for s in projection.slices) == 8
