"""HostInventory: everything one host has, as one validated snapshot."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final, Literal

from pydantic import Field, model_validator

from ._base import Bytes, Count, Model
from .device import Device
from .partition import Partition, PartitionProfile
from .telemetry import ProcessUsage
from .topology import DistanceMatrix, Domain, Link, distance_matrix

__all__ = ["SCHEMA_VERSION", "Host", "HostInventory", "NumaNode", "Problem", "ProblemKind", "SourceInfo"]

#: Version of the JSON Schema of :class:`HostInventory`; bump the minor for additive changes.
#: 1.1 added ``problems`` (documents of 1.0 still load); 1.2 added device kind ``hpu``
#: (documents of 1.0 and 1.1 still load).
SCHEMA_VERSION: Final = "1.2"


class NumaNode(Model):
    id: Count
    cpuset: str | None = Field(default=None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
    memory_bytes: Bytes | None = None
    socket: Count | None = None


class Host(Model):
    hostname: str = Field(min_length=1)
    machine_id: str | None = None
    cpu_count: Count | None = None
    memory_bytes: Bytes | None = None
    numa_nodes: tuple[NumaNode, ...] = ()
    rack: str | None = None


class SourceInfo(Model):
    """Where (part of) an inventory came from: the backend, its version and the vendor API."""

    backend: str
    plugin_version: str | None = None
    api: str | None = None
    api_version: str | None = None
    detail: str | None = None
    tool_invocations: Count | None = None


class ProblemKind(StrEnum):
    """What could not be read."""

    #: A record (a table row, a JSON entry, a section) of a tool's output could not be parsed.
    RECORD = "record"
    #: A command or library call failed (exit status, missing binary, refused, timed out).
    COMMAND = "command"
    #: One field of a device could not be read, or was read as a value no device can have.
    FIELD = "field"
    #: A device was listed but could not be made into the model (no identity, refused value).
    DEVICE = "device"
    #: A whole backend could not be read; its devices are missing from this picture.
    BACKEND = "backend"


class Problem(Model):
    """Something a backend could not read while building this inventory.

    A scheduler tells a complete snapshot from a partial one by ``inventory.problems`` (empty
    when complete).  A device the problem concerns, when anything identified it, is named by
    ``device_id`` and is still listed, with health ``unknown`` and a condition naming the
    failure.
    """

    kind: ProblemKind
    backend: str = Field(min_length=1)
    message: str = Field(min_length=1)
    #: The :mod:`accel.errors` code of the failure (``parse-error``, ``tool-timeout``...).
    code: str | None = None
    #: The command (or library call) whose output this was, as run.
    command: str | None = None
    #: 1-based line of the command's output where the unreadable part starts.
    line: int | None = Field(default=None, ge=1)
    device_id: str | None = None


class HostInventory(Model):
    """The whole device picture of a host: devices, partitions, links, domains.

    Cross-references are validated: links and domain members name devices (or partitions)
    of this inventory, partitions name a parent device, placements on one parent do not
    overlap, and partitions never add up to more memory than their parent has.
    """

    schema_version: Literal["1.0", "1.1", "1.2"] = "1.2"
    host: Host
    devices: tuple[Device, ...] = ()
    partitions: tuple[Partition, ...] = ()
    partition_profiles: tuple[PartitionProfile, ...] = ()
    links: tuple[Link, ...] = ()
    domains: tuple[Domain, ...] = ()
    processes: tuple[ProcessUsage, ...] = ()
    collected_at: datetime
    sources: tuple[SourceInfo, ...] = ()
    #: What could not be read: empty when the picture is complete (see :class:`Problem`).
    problems: tuple[Problem, ...] = ()

    @property
    def complete(self) -> bool:
        """True when nothing was left unread (``problems`` is empty)."""
        return not self.problems

    @model_validator(mode="after")
    def _references(self) -> HostInventory:
        ids: dict[str, Device] = {}
        for i, dev in enumerate(self.devices):
            if dev.id in ids:
                raise ValueError(f"devices[{i}].id: duplicate device id {dev.id!r}")
            ids[dev.id] = dev
        part_ids: set[str] = set()
        for i, part in enumerate(self.partitions):
            if part.parent_id not in ids:
                raise ValueError(f"partitions[{i}].parent_id: no device {part.parent_id!r}")
            if part.id in ids or part.id in part_ids:
                raise ValueError(f"partitions[{i}].id: duplicate id {part.id!r}")
            part_ids.add(part.id)
        endpoints = set(ids) | part_ids
        for i, link in enumerate(self.links):
            for end in ("a", "b"):
                if getattr(link, end) not in endpoints:
                    raise ValueError(f"links[{i}].{end}: no device or partition {getattr(link, end)!r}")
        for i, dom in enumerate(self.domains):
            for m in dom.members:
                if m not in endpoints:
                    raise ValueError(f"domains[{i}].members: no device or partition {m!r}")
        for i, prof in enumerate(self.partition_profiles):
            if prof.parent_id not in ids:
                raise ValueError(f"partition_profiles[{i}].parent_id: no device {prof.parent_id!r}")
        for i, proc in enumerate(self.processes):
            if proc.device_id not in endpoints:
                raise ValueError(f"processes[{i}].device_id: no device {proc.device_id!r}")
        for i, problem in enumerate(self.problems):
            if problem.device_id is not None and problem.device_id not in endpoints:
                raise ValueError(f"problems[{i}].device_id: no device {problem.device_id!r}")
        self._check_partitions(ids)
        return self

    def _check_partitions(self, ids: dict[str, Device]) -> None:
        by_parent: dict[str, list[Partition]] = {}
        for part in self.partitions:
            by_parent.setdefault(part.parent_id, []).append(part)
        for parent_id, parts in by_parent.items():
            placed = [p for p in parts if p.placement is not None]
            for x in range(len(placed)):
                for y in range(x + 1, len(placed)):
                    px, py = placed[x].placement, placed[y].placement
                    assert px is not None and py is not None
                    if px.overlaps(py):
                        raise ValueError(f"partitions: {placed[x].id!r} and {placed[y].id!r} overlap on {parent_id!r}")
            total = ids[parent_id].memory_total_bytes
            used = sum(p.memory_bytes or 0 for p in parts)
            if total is not None and used > total:
                raise ValueError(
                    f"partitions: memory of partitions on {parent_id!r} ({used} bytes) exceeds the "
                    f"device's {total} bytes"
                )

    # -- derived views ---------------------------------------------------------------------
    def device(self, device_id: str) -> Device:
        """The device with this id; ``KeyError`` when there is none."""
        for dev in self.devices:
            if dev.id == device_id:
                return dev
        raise KeyError(device_id)

    def distance_matrix(self) -> DistanceMatrix:
        """Pairwise levels (X, LINK, PIX, PXB, PHB, NODE, SYS) derived from links and PCI paths."""
        return distance_matrix(self.devices, self.links)

    def links_between(self, a: str, b: str) -> tuple[Link, ...]:
        pair = frozenset((a, b))
        return tuple(link for link in self.links if link.pair == pair)

    def domains_of(self, device_id: str) -> tuple[Domain, ...]:
        return tuple(d for d in self.domains if device_id in d.members)
