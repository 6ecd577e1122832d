"""Conformance rows of section ``partitions`` (Partitions).

Hardware partitions (MIG, CPX/NPS, vNPU, MIM) and their profiles.
"""

from __future__ import annotations

from typing import Any

from accel.plugin import SupportsPartitions

from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _check, _fail

__all__ = ["PartitionsRows"]


class PartitionsRows(SuiteBase):
    """The ``partitions.*`` rows of requirements.json."""

    @row("partitions.protocol")
    def test_partitions_protocol(self, accel: _Harness) -> None:
        backend = accel.backend
        if not isinstance(backend, SupportsPartitions):
            _fail(["the backend does not implement SupportsPartitions"],
                  "add partitions() and partition_profiles(), or drop the 'partitions' capability")
        live = accel.call("partitions()", backend.partitions)
        accel.call("partition_profiles()", backend.partition_profiles)
        mine, theirs = sorted(p.id for p in live), sorted(p.id for p in accel.inventory.partitions)
        if mine != theirs:
            _fail([f"partitions() lists {mine}, inventory().partitions {theirs}"],
                  "build both from the same read of the vendor library")

    @row("partitions.no-overlap")
    def test_partitions_no_overlap(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        by_parent: dict[str, list[Any]] = {}
        for part in inv.partitions:
            if part.placement is not None:
                by_parent.setdefault(part.parent_id, []).append(part)
        for parent, parts in by_parent.items():
            for i, x in enumerate(parts):
                for y in parts[i + 1:]:
                    if x.placement.overlaps(y.placement):
                        problems.append(f"{x.id} and {y.id} overlap on {parent}")
        for prof in inv.partition_profiles:
            for place in prof.placements:
                if prof.memory_slices is not None and place.size != prof.memory_slices:
                    problems.append(f"profile {prof.name} on {prof.parent_id}: placement at {place.start} has size "
                                    f"{place.size}, the profile takes {prof.memory_slices} slices")
        _check(problems, "report placements in the parent's memory-slice units, as the vendor library gives them")

    @row("partitions.memory-within-parent")
    def test_partitions_memory_within_parent(self, accel: _Harness) -> None:
        inv = accel.inventory
        totals = {d.id: d.memory_total_bytes for d in inv.devices}
        used: dict[str, int] = {}
        for part in inv.partitions:
            used[part.parent_id] = used.get(part.parent_id, 0) + (part.memory_bytes or 0)
        problems = [f"partitions on {pid} add up to {n} bytes, the device has {totals[pid]}"
                    for pid, n in used.items() if totals.get(pid) is not None and n > (totals[pid] or 0)]
        _check(problems, "report each partition's own memory, in bytes")

    @row("partitions.profiles-known")
    def test_partitions_profiles_known(self, accel: _Harness) -> None:
        inv = accel.inventory
        offered: dict[tuple[str, str], Any] = {(p.parent_id, p.name): p for p in inv.partition_profiles}
        problems = []
        for part in inv.partitions:
            prof = offered.get((part.parent_id, part.profile))
            if prof is None:
                problems.append(f"{part.id} uses profile {part.profile!r}, which {part.parent_id} does not offer")
            elif prof.placements and part.placement is not None and part.placement not in prof.placements:
                problems.append(f"{part.id} sits at {part.placement.start}+{part.placement.size}, not a placement "
                                f"of {part.profile}")
        _check(problems, "list every profile a parent supports in partition_profiles")
