"""The backend machinery of CLI plugins: a Snapshot answered from one collection of tool runs,
the optional surfaces, and the plugin info and conformance helpers.

A device that falls off the bus simply stops being listed by the vendor tool.  :class:`CliBackend`
remembers every device it has reported, so such a device is still reported, with its last known
identity, ``Health(operational=LOST)`` and one ``DeviceLost`` condition
(``<vendor>.tool:device-missing``); it has no telemetry (``telemetry([lost])`` raises
:class:`~accel.errors.DeviceLostError`) nor processes, and the links touching it read ``down``.
When the tool lists it again it is online again.  Over a replay, :meth:`CliBackend.inject_fault`
simulates that (and unreadable health) for the conformance kit.
"""

from __future__ import annotations

import abc
import dataclasses
import shlex
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from accel.errors import (
    AccelError,
    BackendUnavailableError,
    DeviceError,
    DeviceLostError,
    NotSupportedError,
    ParseError,
    ToolError,
    ToolTimeoutError,
)
from accel.model import (
    Action,
    Binding,
    Device,
    DeviceKind,
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
from accel.plugin import PLUGIN_API, Backend, BackendConfig, Capability, PluginInfo
from accel.tools import ReplayRunner, Runner

from ._listing import ProcessRow, parse_listing
from ._plugin import CliBackendPlugin
from ._problems import census, problems_of, unread_units
from ._session import ToolSession, check_deadline, snapshot_deadline
from ._text import ParseContext
from ._unit import UnitReading, build_units, merge_readings, source_info, visible_binding

__all__ = [
    "BASE_CAPABILITIES",
    "CliBackend",
    "Collection",
    "LazyCliPlugin",
    "PartitionsSurface",
    "ProcessesSurface",
    "Snapshot",
    "ToolBackend",
    "ToolView",
    "cli_plugin_info",
    "conformance_scenarios",
    "with_census",
]


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
                "sources": (self.source,) if self.source is not None else (),
                "problems": problems,
            },
            what="inventory",
        )


#: The faults :meth:`CliBackend.inject_fault` simulates (the values of ``accel.conformance.Fault``).
_DEVICE_LOST = "device_lost"
_HEALTH_NOT_SUPPORTED = "health_not_supported"


def _link_key(link: Link) -> tuple[str, str, str]:
    return (link.a, link.b, str(link.type))


def _with_health(dev: Device, health: Health) -> Device:
    # Through the constructor, so the new health is validated (model_copy would not).
    return Device.model_validate({**dict(dev), "health": health})


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
        self._replay = isinstance(runner, ReplayRunner) or isinstance(
            getattr(config, "runner", None), ReplayRunner
        ) or bool(config is not None and config.option("scenario"))
        # First-seen order matters: a lost device keeps its place among the survivors.
        self._seen: dict[str, Device] = {}
        self._seen_links: dict[tuple[str, str, str], Link] = {}
        self._lost_since: dict[str, datetime] = {}
        self._problems_before = 0
        self._faults: dict[str, str] = {}

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
        return self._with_lost(self._simulate_faults(raw))

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
        return _with_health(known, health)

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
        return _with_health(known, Health(monitored=False, conditions=(condition,)))

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
        kind = str(getattr(fault, "value", fault))
        if not self._replay:
            raise NotSupportedError(
                f"{self._name}: fault injection needs a replay (--replay DIR or option 'scenario')",
                device_id=device_id,
            )
        if kind not in (_DEVICE_LOST, _HEALTH_NOT_SUPPORTED):
            raise NotSupportedError(f"{self._name}: unknown fault {kind!r}", device_id=device_id)
        if device_id not in self._seen:
            self.snapshot()
        if device_id not in self._seen:
            raise DeviceError(f"{self._name}: no device {device_id!r}", device_id=device_id)
        self._faults[device_id] = kind

    def _simulate_faults(self, snap: Snapshot) -> Snapshot:
        if not self._faults:
            return snap
        dropped = {i for i, k in self._faults.items() if k == _DEVICE_LOST}
        unread = {i for i, k in self._faults.items() if k == _HEALTH_NOT_SUPPORTED}
        parts = {p.id for p in snap.partitions if p.parent_id in dropped}
        gone = dropped | parts
        unknown = Health(monitored=False)
        domains = []
        for dom in snap.domains:
            members = tuple(m for m in dom.members if m not in gone)
            if members == dom.members:
                domains.append(dom)
            elif members:
                domains.append(Domain.model_validate({**dict(dom), "members": members}))
        return dataclasses.replace(
            snap,
            devices=tuple(
                _with_health(d, unknown) if d.id in unread else d for d in snap.devices if d.id not in dropped
            ),
            telemetry=tuple(t for t in snap.telemetry if t.device_id not in gone),
            partitions=tuple(
                Partition.model_validate({**dict(p), "health": unknown}) if p.parent_id in unread else p
                for p in snap.partitions
                if p.id not in parts
            ),
            profiles=tuple(p for p in snap.profiles if p.parent_id not in dropped),
            links=tuple(link for link in snap.links if link.a not in gone and link.b not in gone),
            domains=tuple(domains),
            processes=tuple(
                p for p in snap.processes if p.device_id not in gone and p.partition_id not in gone
            ),
        )

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


class ToolBackend(CliBackend):
    """A :class:`CliBackend` over one vendor tool: subclasses set the class attributes and
    implement :meth:`collect`, which reads the tool through a fresh :class:`Collection`."""

    backend_name: ClassVar[str]
    tool: ClassVar[str]
    search_path: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "0.1.0"
    #: What every unit of this backend is, and how a runtime binds it (see :func:`visible_binding`).
    kind: ClassVar[DeviceKind]
    visible_env: ClassVar[str | None] = None
    torch_device_type: ClassVar[str | None] = None
    collective_backend: ClassVar[str | None] = None
    #: The Ray resource name (``GPU`` goes to ``ray start --num-gpus``), from Ray's accelerator
    #: manager or the vendor's vLLM platform ``ray_device_key``; ``None`` when neither names one.
    ray_resource: ClassVar[str | None] = None

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.config = config
        self.runner = runner
        super().__init__(self.backend_name, self._snapshot, config=config, runner=runner)

    def tool_name(self) -> str:
        """The binary to run (Kunlunxin picks ``xpu_smi`` or ``xpu-smi``)."""
        return self.tool

    def _snapshot(self) -> Snapshot:
        session = ToolSession(
            self.runner, self.tool_name(), search_path=self.search_path, timeout_s=self.config.tool_timeout_s
        )
        col = Collection(self.backend_name, self.version, session)
        snap = self.collect(col)
        binding = visible_binding(
            self.visible_env, torch=self.torch_device_type, collective=self.collective_backend, ray=self.ray_resource
        )
        snap = with_census(
            snap,
            col.outputs,
            read=col.read_bus_ids,
            errors=col.problems,
            vendor=self.backend_name,
            kind=self.kind,
            tool=session.tool,
            binding=lambda index: binding(UnitReading(index=index)),
        )
        return dataclasses.replace(snap, unparsed=max(snap.unparsed, len(snap.problems), len(col.problems)))

    @abc.abstractmethod
    def collect(self, col: Collection) -> Snapshot:
        """Run the tool's views through ``col`` and build the snapshot."""

    def build(
        self,
        col: Collection,
        readings: Iterable[UnitReading],
        *,
        versions: Mapping[str, Any],
        per_unit: Callable[[UnitReading], Mapping[str, Any]] | None = None,
        **more: Any,
    ) -> tuple[list[Device], list[Telemetry]]:
        """:func:`build_units` with this backend's vendor, kind, tool and binding rule.

        A record that failed to parse but still identifies its device (bus id, index) is listed
        too, with health ``unknown`` and a ``DeviceNotRead`` condition (:func:`unread_units`),
        and no telemetry sample: one unreadable row never makes a chip disappear.
        """
        binding = visible_binding(
            self.visible_env, torch=self.torch_device_type, collective=self.collective_backend, ray=self.ray_resource
        )
        readings = list(readings)
        col.read_bus_ids.update(r.bus_id for r in readings if r.bus_id is not None)
        devices, samples = build_units(
            readings,
            vendor=self.backend_name,
            problems=col.problems,
            per_unit=per_unit,
            kind=self.kind,
            tool=col.session.tool,
            binding=binding,
            versions=versions,
            timestamp=col.now,
            **more,
        )
        unread = unread_units(
            col.problems,
            devices,
            vendor=self.backend_name,
            kind=self.kind,
            tool=col.session.tool,
            binding=lambda index: binding(UnitReading(index=index)),
        )
        if unread:
            # In the tool's order (by index), as if the row had been read.
            devices = sorted([*devices, *unread], key=lambda d: (d.index is None, d.index or 0))
        return devices, samples


def with_census(
    snap: Snapshot,
    outputs: Iterable[tuple[str, str]],
    *,
    read: Iterable[str],
    errors: Iterable[AccelError],
    vendor: str,
    kind: DeviceKind,
    tool: str,
    binding: Callable[[int | None], Binding] | None = None,
) -> Snapshot:
    """``snap`` checked against the device lists it came from (:func:`census`).

    ``outputs`` are the ``(command, stdout)`` of the views devices are listed from, ``read``
    the bus ids of every unit parsed from them (devices and VFs), ``errors`` the failed records
    already reported.  A bus id printed in a table row and in none of those is a chip the
    parser lost (a mangled rule merged its record into the next, a lost header row ended the
    table early): it becomes a ``record`` problem and a listed device with health ``unknown``
    (:func:`unread_units`), so the snapshot is partial, loudly, instead of short, silently.
    """
    errs = list(errors)
    known = {*read, *(d.pci.bus_id for d in snap.devices if d.pci is not None)}
    missed: list[ParseError] = []
    for command, text in outputs:
        missed.extend(census(text, known, tool=tool, command=command, errors=[*errs, *missed]))
    if not missed:
        return snap
    unread = unread_units(missed, snap.devices, vendor=vendor, kind=kind, tool=tool, binding=binding)
    devices = snap.devices
    if unread:
        devices = tuple(sorted([*devices, *unread], key=lambda d: (d.index is None, d.index or 0)))
    return dataclasses.replace(snap, devices=devices, problems=(*snap.problems, *problems_of(vendor, missed)))


P = TypeVar("P")


class Collection:
    """One snapshot's tool runs for a backend: what ran, what was skipped, what was dropped.

    ``main`` runs the command a device list comes from, ``extra`` a secondary view whose
    absence is expected; both parse with the given function.  Failures (other than a hung
    tool) are remembered rather than raised, so :meth:`snapshot` can report them in the
    source detail, and :meth:`require` raises the first one when no view produced devices.
    """

    def __init__(self, backend: str, version: str, session: ToolSession) -> None:
        self.backend = backend
        self.version = version
        self.session = session
        self.notes: list[str] = []
        self.problems: list[AccelError] = []
        #: Main commands that failed (exit status, missing, refused): typed problems too.
        self.failures: list[AccelError] = []
        #: ``(command, stdout)`` of every main view that ran: the device lists :func:`census`
        #: checks the built devices against.
        self.outputs: list[tuple[str, str]] = []
        #: Bus ids of every unit :meth:`ToolBackend.build` was given (devices and the VFs that
        #: become partitions alike): what the census counts as read.
        self.read_bus_ids: set[str] = set()
        self.now = datetime.now(UTC)
        self._first: AccelError | None = None

    def _parsed(self, args: Sequence[str], parse: Callable[[str, str], P], *, optional: bool) -> P | None:
        command = shlex.join([self.session.tool, *args])
        try:
            result = self.session.optional(*args, notes=self.notes) if optional else self.session.run(*args)
        except ToolTimeoutError:
            raise
        except ToolError as exc:
            self._first = self._first or exc
            self.notes.append(f"{command}: {exc.code}")
            # The main view failing is a partial read; an absent secondary view is expected.
            self.failures.append(exc)
            return None
        if result is None:
            return None
        if not optional:
            self.outputs.append((command, result.stdout))
        try:
            return parse(result.stdout, command)
        except ParseError as exc:
            self._first = self._first or exc
            self.problems.append(exc)
            return None

    def main(self, parse: Callable[[str, str], P], *args: str) -> P | None:
        """Run and parse the main view; ``None`` (remembered) when it fails."""
        return self._parsed(args, parse, optional=False)

    def extra(self, parse: Callable[[str, str], P], *args: str) -> P | None:
        """Run and parse a secondary view; ``None`` when absent or unreadable."""
        return self._parsed(args, parse, optional=True)

    def required(self, parse: Callable[[str, str], P], *args: str) -> P:
        """Run and parse the main view; its failure is raised (no other view lists devices)."""
        parsed = self.main(parse, *args)
        if parsed is None:
            raise self._first or ParseError(f"{self.session.tool} printed nothing to parse", tool=self.session.tool)
        if isinstance(parsed, ToolView):  # the units that view left out belong to this snapshot
            self.problems.extend(parsed.problems)
        return parsed

    def uuids(self, readings: list[UnitReading], words: Sequence[str]) -> tuple[list[UnitReading], bool]:
        """Merge the UUIDs (and names, bus ids) of ``<tool> -L`` into ``readings``.

        Returns the merged readings and whether the listing was available at all.
        """
        tool = self.session.tool
        listed = self.extra(lambda text, cmd: parse_listing(text, words=words, ctx=ParseContext(tool, cmd)), "-L")
        if listed is None:
            return readings, False
        extra = [UnitReading(index=x.index, uuid=x.uuid, bus_id=x.bus_id) for x in listed]
        return merge_readings(readings, extra), True

    def require(self, found: Sized) -> None:
        """Raise the first failure when nothing was found (no view worked)."""
        if not found and self._first is not None:
            raise self._first

    def snapshot(
        self,
        devices: Sequence[Device],
        telemetry: Sequence[Telemetry],
        *,
        partitions: Sequence[Partition] = (),
        profiles: Sequence[PartitionProfile] = (),
        links: Sequence[Link] = (),
        domains: Sequence[Domain] = (),
        processes: Sequence[ProcessUsage] = (),
    ) -> Snapshot:
        return Snapshot(
            devices=tuple(devices),
            telemetry=tuple(telemetry),
            partitions=tuple(partitions),
            profiles=tuple(profiles),
            links=tuple(links),
            domains=tuple(domains),
            processes=tuple(processes),
            source=source_info(
                self.backend,
                version=self.version,
                api=self.session.tool,
                calls=self.session.invocations,
                notes=self.notes,
                problems=self.problems,
            ),
            collected_at=self.now,
            problems=problems_of(self.backend, [*self.failures, *self.problems]),
        )


#: What every CLI backend built on this module reports (vendors add their own on top).
BASE_CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.INVENTORY,
        Capability.MEMORY,
        Capability.MEMORY_USED,
        Capability.PCI,
        Capability.HEALTH,
        Capability.TELEMETRY,
        Capability.TEMPERATURE,
        Capability.UTILIZATION,
        Capability.VERSIONS,
    }
)


def cli_plugin_info(
    name: str,
    *,
    api: str,
    description: str,
    capabilities: Iterable[Capability] = (),
    without: Iterable[Capability] = (),
    version: str = "0.1.0",
) -> PluginInfo:
    """The :class:`PluginInfo` of a CLI plugin: :data:`BASE_CAPABILITIES` plus ``capabilities``
    minus ``without``; ``vendor`` is the lower-case backend id (the human name goes in
    ``description``)."""
    caps = (BASE_CAPABILITIES | frozenset(capabilities)) - frozenset(without)
    return PluginInfo(
        name=name,
        vendor=name,
        version=version,
        api_versions=frozenset({PLUGIN_API}),
        api=api,
        description=description,
        capabilities=caps,
    )


def conformance_scenarios(
    package: str,
    notes: Mapping[str, tuple[str, Mapping[str, str]]],
) -> dict[str, Any]:
    """``CONFORMANCE_SCENARIOS`` for a plugin's ``conformance`` module: every shipped replay
    scenario of ``package``, with ``notes[name] = (description, {row id: why it is xfail})``.

    Imports :mod:`accel.conformance` (only the matrix runner and tests import this module).
    """
    from accel.conformance import Scenario

    from ._scenario import scenario_names

    out: dict[str, Any] = {}
    for name in scenario_names(package):
        description, xfail = notes.get(name, ("", {}))
        out[name] = Scenario(name=name, options={"scenario": name}, xfail=dict(xfail), description=description)
    return out


@dataclass
class ToolView:
    """What one tool view printed: versions, units, processes, and the units left out."""

    driver_version: str | None = None
    readings: list[UnitReading] = field(default_factory=list)
    processes: list[ProcessRow] = field(default_factory=list)
    problems: list[ParseError] = field(default_factory=list)


class LazyCliPlugin(CliBackendPlugin):
    """A :class:`~accel.plugins._cli.CliBackendPlugin` whose backend class is named, not imported:
    ``backend = "accel.plugins.metax._backend:MetaxBackend"`` is imported on :meth:`open` only,
    so the entry-point module stays light.  The class is built as ``cls(config, runner)``."""

    backend: ClassVar[str]

    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        import importlib

        module, _, name = self.backend.partition(":")
        factory = getattr(importlib.import_module(module), name)
        backend: Backend = factory(config, runner)
        return backend
