"""The Moore Threads backend: ``mthreads-gmi`` table, ``-q -j`` detail and ``mtlink -s``.

One snapshot runs the table (GPUs, device type, lane widths, ECC mode, MPC) and the JSON
query (UUID, serial, MTBios, PCI ids, power) and merges them by bus id, else index; either
view alone is enough.  ``mtlink -s`` adds MTLink links and groups where the driver reports
them.  A used-memory reading above the total (the IOMMU misconfiguration in the S4000 sample)
becomes a ``MemoryTotalBelowUsed`` condition and used is clamped to the total.
"""

from __future__ import annotations

from typing import Any

from accel.errors import AccelError, ParseError
from accel.model import (
    Capabilities,
    Device,
    DeviceKind,
    DomainKind,
    Link,
    LinkType,
    Partition,
    PartitionFamily,
    PartitionProfile,
    PartitionScheme,
)
from accel.toolkit import (
    Collection,
    DualPathBackend,
    NativeLibrary,
    PartitionsSurface,
    ProcessesSurface,
    Snapshot,
    UnitReading,
    link_domains,
    merge_readings,
    processes_of,
)
from accel.tools import Runner

from . import _native
from ._parse import SEARCH_PATH, TOOL, GmiUnit, parse_mtlink, parse_query_json, parse_table

__all__ = ["MthreadsBackend"]


class MthreadsBackend(ProcessesSurface, PartitionsSurface, DualPathBackend):
    """Backend ``mthreads``: MTML (``libmtml.so``) or ``mthreads-gmi`` over a runner (see
    :mod:`accel.tools`); ``-o read=native|cli|auto`` picks (:class:`~accel.toolkit.DualPathBackend`)."""

    backend_name = "mthreads"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.GPU
    visible_env = "MUSA_VISIBLE_DEVICES"
    torch_device_type = "musa"
    collective_backend = "mccl"
    #: vllm-musa's platform: ``ray_device_key = "GPU"`` (Ray has no MUSA manager of its own).
    ray_resource = "GPU"
    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def load_native(self) -> object:
        return _native.load_mtml()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The MTML read: the same units, ids and rules as the ``mthreads-gmi`` path."""
        read = _native.read_mtml(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        col.require(read.readings)
        versions = {"driver": read.driver_version}
        devices, samples = self.build(col, read.readings, versions=versions, per_unit=_modes)
        return col.snapshot(devices, samples)

    def collect_cli(self, col: Collection) -> Snapshot:
        table = col.main(lambda text, cmd: parse_table(text, command=cmd))
        readings: list[UnitReading] = []
        parts: list[GmiUnit] = []
        driver = None
        if table is not None:
            col.problems.extend(table.problems)
            readings = [u.reading for u in table.units if u.partition is None]
            parts = [u for u in table.units if u.partition is not None]
            driver = table.driver_version
        query = col.extra(lambda text, cmd: parse_query_json(text, command=cmd), "-q", "-j")
        if query is not None:
            col.problems.extend(query.problems)
            readings = merge_readings(readings, query.readings)
            driver = driver or query.driver_version
        col.require(readings)
        versions = {"driver": driver, "runtime_name": TOOL, "runtime": table.gmi_version if table else None}
        devices, samples = self.build(col, readings, versions=versions, per_unit=_modes)
        by_index = {d.index: d for d in devices if d.index is not None}
        links: list[Link] = []
        for lk in col.extra(lambda text, _cmd: parse_mtlink(text), "mtlink", "-s") or []:
            a, b = by_index.get(lk.a), by_index.get(lk.b)
            if a is not None and b is not None:
                first, second = sorted((a.id, b.id))
                links.append(Link(a=first, b=second, type=LinkType.MTLINK, state=lk.state))
        partitions = _partitions(parts, by_index, col.problems)
        return col.snapshot(
            devices,
            samples,
            partitions=partitions,
            profiles=_profiles(partitions),
            links=links,
            domains=link_domains(links, DomainKind.MTLINK_GROUP, prefix="mtlink", order=[d.id for d in devices]),
            processes=processes_of(table.processes, devices) if table is not None else [],
        )


def _modes(reading: UnitReading) -> dict[str, Any]:
    """ECC and MPC as the table shows them for this GPU."""
    dtype = reading.extras.get("mthreads.com/deviceType")
    mpc_parent = isinstance(dtype, str) and "mpc" in dtype.lower()
    return {
        "capabilities": Capabilities(
            ecc=True if reading.ecc_enabled is not None else None,
            partitioning=(PartitionScheme.OTHER,) if reading.extras.get("mthreads.com/mpcCapable") else (),
        ),
        "partition_mode": {"scheme": PartitionScheme.OTHER, "compute_mode": "mpc"} if mpc_parent else None,
    }


def _partitions(parts: list[GmiUnit], parents: dict[int, Device], problems: list[AccelError]) -> list[Partition]:
    """MPC partition rows as partitions of their parent GPU (same index)."""
    out: list[Partition] = []
    for unit in parts:
        parent = parents.get(unit.reading.index) if unit.reading.index is not None else None
        if parent is None:
            problems.append(ParseError(f"MPC partition {unit.reading.index}:{unit.partition} has no parent GPU"))
            continue
        out.append(
            Partition(
                id=f"{parent.id}/mpc-{unit.partition}",
                parent_id=parent.id,
                profile=unit.device_type or "mpc",
                family=PartitionFamily.HARDWARE_ISOLATED,
                memory_bytes=unit.reading.memory_total_bytes,
            )
        )
    return out


def _profiles(partitions: list[Partition]) -> list[PartitionProfile]:
    """One profile per (parent, profile name) the live partitions use."""
    seen: dict[tuple[str, str], PartitionProfile] = {}
    for p in partitions:
        seen.setdefault(
            (p.parent_id, p.profile),
            PartitionProfile(name=p.profile, parent_id=p.parent_id, family=p.family, memory_bytes=p.memory_bytes),
        )
    return list(seen.values())
