"""The Moore Threads backend: ``mthreads-gmi`` table, ``-q -j`` detail and ``mtlink -s``.

One snapshot runs the table (GPUs, device type, lane widths, ECC mode, MPC) and the JSON
query (UUID, serial, MTBios, PCI ids, power) and merges them by bus id, else index; either
view alone is enough.  ``mtlink -s`` adds MTLink links and groups where the driver reports
them.  A used-memory reading above the total (the IOMMU misconfiguration in the S4000 sample)
becomes a ``MemoryTotalBelowUsed`` condition and the used value is dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime

from accel.errors import AccelError, ParseError, ToolError, ToolTimeoutError
from accel.model import (
    Capabilities,
    Device,
    DeviceKind,
    DomainKind,
    Link,
    LinkType,
    Partition,
    PartitionFamily,
    PartitionScheme,
    ProcessUsage,
)
from accel.plugin import BackendConfig
from accel.tools import Runner

from .._cli import ToolSession
from .._cli.extra import (
    CliBackend,
    Snapshot,
    UnitReading,
    build_units,
    link_domains,
    merge_readings,
    source_info,
    visible_binding,
)
from ._parse import SEARCH_PATH, TOOL, GmiTable, GmiUnit, parse_mtlink, parse_query_json, parse_table

__all__ = ["MthreadsBackend"]

VERSION = "0.1.0"
_BIND = visible_binding("MUSA_VISIBLE_DEVICES", torch="musa", collective="mccl")


class MthreadsBackend(CliBackend):
    """Backend ``mthreads`` over a runner (see :mod:`accel.tools`)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self._config = config
        self._runner = runner
        super().__init__("mthreads", self._snapshot)

    def _snapshot(self) -> Snapshot:
        gmi = ToolSession(self._runner, TOOL, search_path=SEARCH_PATH, timeout_s=self._config.tool_timeout_s)
        notes: list[str] = []
        problems: list[AccelError] = []
        now = datetime.now(UTC)
        table: GmiTable | None = None
        first_error: AccelError | None = None
        try:
            table = parse_table(gmi.run().stdout)
            problems.extend(table.problems)
        except ToolTimeoutError:
            raise
        except (ToolError, ParseError) as exc:
            first_error = exc
            notes.append(f"{TOOL}: {exc.code}")
        readings: list[UnitReading] = []
        parts: list[GmiUnit] = []
        if table is not None:
            readings = [u.reading for u in table.units if u.partition is None]
            parts = [u for u in table.units if u.partition is not None]
        driver = table.driver_version if table is not None else None
        query = gmi.optional("-q", "-j", notes=notes)
        if query is not None:
            try:
                parsed = parse_query_json(query.stdout)
            except ParseError as exc:
                first_error = first_error or exc
                problems.append(exc)
            else:
                problems.extend(parsed.problems)
                readings = merge_readings(readings, parsed.readings)
                driver = driver or parsed.driver_version
        if not readings and first_error is not None:
            raise first_error
        versions = {"driver": driver, "runtime_name": "mthreads-gmi", "runtime": table.gmi_version if table else None}
        devices, samples = [], []
        for reading in readings:
            dtype = reading.extras.get("mthreads.com/deviceType")
            mpc_parent = isinstance(dtype, str) and "mpc" in dtype.lower()
            built, tel = build_units(
                [reading],
                vendor="mthreads",
                problems=problems,
                kind=DeviceKind.GPU,
                tool=TOOL,
                binding=_BIND,
                versions=versions,
                capabilities=Capabilities(
                    ecc=True if reading.ecc_enabled is not None else None,
                    partitioning=(PartitionScheme.OTHER,) if reading.extras.get("mthreads.com/mpcCapable") else (),
                ),
                partition_mode={"scheme": PartitionScheme.OTHER, "compute_mode": "mpc"} if mpc_parent else None,
                timestamp=now,
            )
            devices.extend(built)
            samples.extend(tel)
        by_index = {d.index: d for d in devices if d.index is not None}
        partitions = _partitions(parts, by_index, problems)
        links: list[Link] = []
        mtlink = gmi.optional("mtlink", "-s", notes=notes)
        if mtlink is not None:
            for lk in parse_mtlink(mtlink.stdout):
                a, b = by_index.get(lk.a), by_index.get(lk.b)
                if a is not None and b is not None:
                    first, second = sorted((a.id, b.id))
                    links.append(Link(a=first, b=second, type=LinkType.MTLINK, state=lk.state))
        domains = link_domains(links, DomainKind.MTLINK_GROUP, prefix="mtlink", order=[d.id for d in devices])
        procs = []
        if table is not None:
            for p in table.processes:
                dev = by_index.get(p.gpu_index)
                if dev is not None:
                    procs.append(ProcessUsage(pid=p.pid, device_id=dev.id, name=p.name, memory_bytes=p.memory_bytes))
        return Snapshot(
            devices=tuple(devices),
            telemetry=tuple(samples),
            partitions=tuple(partitions),
            links=tuple(links),
            domains=tuple(domains),
            processes=tuple(procs),
            source=source_info(
                "mthreads",
                version=VERSION,
                api=TOOL,
                calls=gmi.invocations,
                notes=notes,
                problems=problems,
            ),
            collected_at=now,
        )


def _partitions(parts: list[GmiUnit], parents: dict[int, Device], problems: list[AccelError]) -> list[Partition]:
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
