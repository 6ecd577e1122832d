"""A CLI backend's snapshot and the lost-device tracking over successive snapshots.

A device that falls off the bus simply stops being listed by the vendor tool.  :class:`CliBackend`
remembers every device it has reported, so such a device is still reported, with its last known
identity, ``Health(operational=LOST)`` and one ``DeviceLost`` condition
(``<vendor>.tool:device-missing``); it has no telemetry (``telemetry([lost])`` raises
:class:`~accel.errors.DeviceLostError`) nor processes, and the links touching it read ``down``.
When the tool lists it again it is online again.  Over a replay, :meth:`CliBackend.inject_fault`
simulates that (and unreadable health) for the conformance kit (:mod:`._faults`).
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from accel.errors import AccelError, BackendUnavailableError, DeviceError, DeviceLostError
from accel.model import (
    Action,
    Device,
    Domain,
    Health,
    HealthCondition,
    Host,
    HostInventory,
    Link,
    LinkState,
    Operational,
    Partition,
    PartitionProfile,
    Problem,
    ProcessUsage,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
    validate,
)
from accel.plugin import Backend, BackendConfig
from accel.tools import ReplayRunner, Runner

from ._faults import ReplayFaults, with_health
from ._session import check_deadline, snapshot_deadline

__all__ = ["CliBackend", "PartitionsSurface", "ProcessesSurface", "Snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """Everything one collection of tool runs produced."""

    devices: tuple[Device, ...]
    telemetry: tuple[Telemetry, ...] = ()
    partitions: tuple[Partition, ...] = ()
    profiles: tuple[PartitionProfile, ...] = ()
    links: tuple[Link, ...] = ()
    domains: tuple[Domain, ...] = ()
    processes: tuple[ProcessUsage, ...] = ()
    source: SourceInfo | None = None
    collected_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: How many records of the tool's output could not be parsed this time.  When that number
    #: grows, a device missing from this snapshot may be one of them, so it is not declared lost.
    unparsed: int = 0
    #: What could not be read, typed (``HostInventory.problems``): failed records, commands,
    #: devices.  Empty when the snapshot is complete.
    problems: tuple[Problem, ...] = ()
    #: Sources after ``source`` (Hygon keeps its notes apart from the merge it describes).
    extra_sources: tuple[SourceInfo, ...] = ()

    def inventory(self) -> HostInventory:
        """The snapshot as a validated :class:`HostInventory`."""
        ids = {d.id for d in self.devices} | {p.id for p in self.partitions}
        # A problem may name a device this snapshot then left out (a duplicate id): the problem
        # stays, without the dangling reference.
        problems = tuple(
            p if p.device_id is None or p.device_id in ids else p.model_copy(update={"device_id": None})
            for p in self.problems
        )
        return validate(
            HostInventory,
            {
                "host": Host(hostname=socket.gethostname() or "localhost"),
                "devices": self.devices,
                "partitions": self.partitions,
                "partition_profiles": self.profiles,
                "links": self.links,
                "domains": self.domains,
                "processes": self.processes,
                "collected_at": self.collected_at,
                "sources": ((self.source,) if self.source is not None else ()) + self.extra_sources,
                "problems": problems,
            },
            what="inventory",
        )


def _link_key(link: Link) -> tuple[str, str, str]:
    return (link.a, link.b, str(link.type))



class CliBackend(Backend):
    """A backend answered from :class:`Snapshot` objects that ``collect`` builds.

    Every read runs the tools again (a snapshot is "as of now"); a failure inside ``collect``
    that is not an :class:`AccelError` is a plugin bug and is wrapped, so no foreign exception
    leaves a public method.  After :meth:`close`, reads raise
    :class:`~accel.errors.BackendUnavailableError`.

    Lost devices: the backend remembers the last :class:`Device` of every id it has reported
    (and the links touching it).  A device a later snapshot no longer lists is still reported,
    in its first-seen place, with that identity and ``Health(operational=LOST)`` plus one fatal
    ``DeviceLost`` condition (vendor code ``<vendor>.tool:device-missing``); its telemetry and
    processes are omitted, ``telemetry([lost])`` raises :class:`~accel.errors.DeviceLostError`,
    and its links are reported ``down``.  Listed again, it is online again.

    ``config`` and ``runner`` only decide whether :meth:`inject_fault` is allowed (a replay).
    """

    def __init__(
        self,
        name: str,
        collect: Callable[[], Snapshot],
        *,
        config: BackendConfig | None = None,
        runner: Runner | None = None,
    ) -> None:
        self._name = name
        self._collect = collect
        self._snapshot_config = config
        self._closed = False
        # A replay (``--replay DIR`` or a shipped scenario) is a test facility: only there may
        # faults be simulated, never over the real tool.
        replay = isinstance(runner, ReplayRunner) or isinstance(
            getattr(config, "runner", None), ReplayRunner
        ) or bool(config is not None and config.option("scenario"))
        # First-seen order matters: a lost device keeps its place among the survivors.
        self._seen: dict[str, Device] = {}
        self._seen_links: dict[tuple[str, str, str], Link] = {}
        self._lost_since: dict[str, datetime] = {}
        self._problems_before = 0
        self._faults = ReplayFaults(name, replay=replay)

    @property
    def name(self) -> str:
        return self._name

    def snapshot(self) -> Snapshot:
        """Run the tools once and return everything they showed (plus the devices lost since)."""
        if self._closed:
            raise BackendUnavailableError(f"backend {self._name!r} is closed", plugin=self._name)
        budget = self._snapshot_config.tool_timeout_s if self._snapshot_config is not None else 10.0
        try:
            with snapshot_deadline(budget):
                raw = self._collect()
                check_deadline(self._name, "parsing its output")
        except AccelError:
            raise
        except Exception as exc:
            raise BackendUnavailableError(
                f"backend {self._name!r} failed: {type(exc).__name__}: {exc}", plugin=self._name
            ) from exc
        return self._with_lost(self._faults.apply(raw))

    # -- lost devices -------------------------------------------------------------------------
    def lost_ids(self) -> frozenset[str]:
        """Ids of the devices reported before that the last snapshot no longer listed."""
        return frozenset(self._lost_since)

    def _with_lost(self, snap: Snapshot) -> Snapshot:
        """Remember what ``snap`` lists; add back, as lost, what was seen before and is missing."""
        snap = self._known_unread(snap)
        present = {d.id for d in snap.devices}
        # More unparseable records than last time can explain a missing device; the same number
        # (an output that is always partly unreadable) cannot.
        unread = max(snap.unparsed, len(snap.problems))
        unexplained = unread <= self._problems_before
        self._problems_before = unread
        for dev in snap.devices:
            self._seen[dev.id] = dev
            self._lost_since.pop(dev.id, None)
        for link in snap.links:
            self._seen_links[_link_key(link)] = link
        missing = [i for i in self._seen if i not in present]
        if not missing:
            return snap
        now = datetime.now(UTC)
        if not unexplained:
            # A row that failed to parse is not a device that fell off the bus: unknown, not lost.
            lost = {i: self._unread_device(self._seen[i], now) for i in missing}
        else:
            lost = {i: self._lost_device(self._seen[i], now) for i in missing}
        listed = {d.id: d for d in snap.devices}
        # First-seen order (every listed id is in ``_seen`` by now).
        devices = tuple(listed[i] if i in listed else lost[i] for i in self._seen)
        gone = set(lost) if unexplained else set()
        links = [self._down(link) if link.a in gone or link.b in gone else link for link in snap.links]
        have = {_link_key(link) for link in links}
        # The tool stops printing a vanished device's links: its last known ones are reported down.
        links.extend(
            self._down(link)
            for key, link in self._seen_links.items()
            if key not in have and (link.a in gone or link.b in gone) and {link.a, link.b} <= set(self._seen)
        )
        return dataclasses.replace(
            snap,
            devices=devices,
            telemetry=tuple(t for t in snap.telemetry if t.device_id not in lost),
            links=tuple(links),
            processes=tuple(p for p in snap.processes if p.device_id not in lost),
        )

    def _known_unread(self, snap: Snapshot) -> Snapshot:
        """A device listed only because its record failed (``unread_units``) that is a device
        seen before (same bus id, else same index) keeps its known id and last reading, with
        health unknown: one chip is never listed twice under two ids."""
        named = {p.device_id for p in snap.problems if p.device_id is not None}
        present = {d.id for d in snap.devices}
        missing = [self._seen[i] for i in self._seen if i not in present]
        if not named or not missing:
            return snap
        now = datetime.now(UTC)
        renamed: dict[str, str] = {}
        devices: list[Device] = []
        for dev in snap.devices:
            known = None
            if dev.id in named and dev.id not in self._seen:
                bus = dev.pci.bus_id if dev.pci is not None else None
                same_bus = (k for k in missing if bus is not None and k.pci is not None and k.pci.bus_id == bus)
                known = next(same_bus, None)
                if known is None and bus is None and dev.index is not None:
                    known = next((k for k in missing if k.index == dev.index), None)
            if known is None:
                devices.append(dev)
                continue
            missing.remove(known)
            renamed[dev.id] = known.id
            devices.append(self._unread_device(known, now))
        if not renamed:
            return snap
        problems = tuple(
            p.model_copy(update={"device_id": renamed[p.device_id]}) if p.device_id in renamed else p
            for p in snap.problems
        )
        return dataclasses.replace(snap, devices=tuple(devices), problems=problems)

    def _lost_device(self, known: Device, now: datetime) -> Device:
        """``known`` (its last listed reading) with lost health: Operational.LOST and DeviceLost."""
        since = self._lost_since.setdefault(known.id, now)
        where = known.pci.bus_id if known.pci is not None else known.id
        condition = HealthCondition(
            subsystem=Subsystem.PCIE,
            reason="DeviceLost",
            severity=Severity.FATAL,
            action=Action.REBOOT_NODE,
            # The device's vendor prefix, as every other code of this device (huawei for ascend).
            vendor_code=f"{known.vendor}.tool:device-missing",
            message=f"{known.model or 'device'} {where} is no longer listed by the {self._name} tool "
            "(fell off the bus?)",
            first_seen=since,
            last_seen=now,
        )
        # Not being listed is a reading, taken now: the tool was asked and no longer shows it.
        health = Health(operational=Operational.LOST, monitored=True, conditions=(condition,), checked_at=now)
        return with_health(known, health)

    def _unread_device(self, known: Device, now: datetime) -> Device:
        """``known`` when its row could not be read this time: health unknown, not lost."""
        condition = HealthCondition(
            subsystem=Subsystem.MONITORING,
            reason="DeviceNotRead",
            severity=Severity.WARNING,
            action=Action.INVESTIGATE,
            message=f"the {self._name} tool's output for {known.id} could not be parsed this time",
            first_seen=now,
            last_seen=now,
        )
        return with_health(known, Health(monitored=False, conditions=(condition,)))

    @staticmethod
    def _down(link: Link) -> Link:
        return Link.model_validate({**dict(link), "state": LinkState.DOWN})

    # -- fault simulation (replays only) ------------------------------------------------------
    def inject_fault(self, fault: object, device_id: str) -> None:
        """Conformance hook (``accel.conformance.FaultInjector``), only over a replay.

        ``device_lost``: later snapshots drop ``device_id`` from what the tool printed (its
        telemetry, partitions, processes, links and domain membership), as a tool does that no
        longer lists a device, so the lost-device detection runs as it would on a real host.
        ``health_not_supported``: later snapshots report its health as ``Health(monitored=False)``.
        Raises :class:`~accel.errors.NotSupportedError` over a real tool or for another fault,
        and :class:`~accel.errors.DeviceError` for an id the backend has never listed.
        """
        kind = self._faults.check(fault, device_id)
        if device_id not in self._seen:
            self.snapshot()
        if device_id not in self._seen:
            raise DeviceError(f"{self._name}: no device {device_id!r}", device_id=device_id)
        self._faults.add(device_id, kind)

    # -- Backend API --------------------------------------------------------------------------
    def inventory(self) -> HostInventory:
        return self.snapshot().inventory()

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        snap = self.snapshot()
        if ids is None:
            return snap.telemetry
        by_id = {t.device_id: t for t in snap.telemetry}
        known = {d.id for d in snap.devices} | {p.id for p in snap.partitions}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise DeviceError(f"{self._name}: no device {unknown[0]!r}", device_id=unknown[0])
        lost = [i for i in ids if i in self._lost_since]
        if lost:
            raise DeviceLostError(f"{self._name}: device {lost[0]} is lost (no longer listed)", device_id=lost[0])
        return tuple(by_id[i] for i in ids if i in by_id)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        snap = self.snapshot()
        everything = {d.id: d.health for d in snap.devices}
        everything.update({p.id: p.health for p in snap.partitions})
        if ids is None:
            return everything
        unknown = [i for i in ids if i not in everything]
        if unknown:
            raise DeviceError(f"{self._name}: no device {unknown[0]!r}", device_id=unknown[0])
        return {i: everything[i] for i in ids}

    def close(self) -> None:
        self._closed = True


class ProcessesSurface(CliBackend):
    """Mixin: the tool's process table as ``SupportsProcesses`` (declare ``processes``)."""

    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        """Processes the tool lists; ``ids`` filters by device id."""
        procs = self.snapshot().processes
        if ids is None:
            return procs
        wanted = set(ids)
        return tuple(p for p in procs if p.device_id in wanted)


class PartitionsSurface(CliBackend):
    """Mixin: partitions the tool shows as ``SupportsPartitions`` (declare ``partitions``)."""

    def partitions(self) -> tuple[Partition, ...]:
        """Live partitions of this snapshot."""
        return self.snapshot().partitions

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        """The profiles the live partitions use (a CLI lists no catalogue beyond those)."""
        return self.snapshot().profiles
