"""A CLI backend over one vendor tool: :class:`ToolBackend` runs the tool's views through a
:class:`Collection` per snapshot, builds the units with :func:`~accel.toolkit.build_units`,
and checks what it built against the device lists (:func:`with_census`)."""

from __future__ import annotations

import abc
import dataclasses
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from accel.errors import (
    AccelError,
    BackendUnavailableError,
    ParseError,
    ReplayMissingError,
    ToolError,
    ToolTimeoutError,
)
from accel.model import (
    Binding,
    Device,
    DeviceKind,
    Domain,
    HostInventory,
    Link,
    Partition,
    PartitionProfile,
    ProblemKind,
    ProcessUsage,
    Telemetry,
)
from accel.plugin import BackendConfig
from accel.sysfs import enrich_inventory
from accel.tools import Runner

from ._listing import ProcessRow, parse_listing
from ._problems import census, problems_of, unread_units
from ._session import ToolSession
from ._snapshot import CliBackend, Snapshot
from ._text import ParseContext
from ._unit import UnitReading, build_units, merge_readings, source_info, visible_binding

__all__ = ["Collection", "ToolBackend", "ToolView", "with_census"]


class ToolBackend(CliBackend):
    """A :class:`CliBackend` over one vendor tool: subclasses set the class attributes and
    implement :meth:`collect`, which reads the tool through a fresh :class:`Collection`."""

    backend_name: ClassVar[str]
    #: The vendor its devices report and their ids start with (``huawei`` for backend
    #: ``ascend``); the backend id when not set.
    vendor: ClassVar[str | None] = None
    tool: ClassVar[str]
    search_path: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "0.1.0"
    #: What every unit of this backend is, and how a runtime binds it (see :func:`visible_binding`).
    kind: ClassVar[DeviceKind]
    visible_env: ClassVar[str | None] = None
    #: What ``visible_env`` takes (``"index"``, ``"uuid"``, ``"bus_id"`` or a namespaced extras
    #: key such as a module id); see :func:`visible_binding`.
    visible_key: ClassVar[str] = "index"
    torch_device_type: ClassVar[str | None] = None
    collective_backend: ClassVar[str | None] = None
    #: The Ray resource name (``GPU`` goes to ``ray start --num-gpus``), from Ray's accelerator
    #: manager or the vendor's vLLM platform ``ray_device_key``; ``None`` when neither names one.
    ray_resource: ClassVar[str | None] = None
    #: Device files a container needs for a unit, ``{index}`` standing for its index
    #: (``/dev/cambricon_dev{index}``); see :func:`visible_binding`.
    device_nodes: ClassVar[tuple[str, ...]] = ()
    #: ``(tool, search path)`` pairs in order of preference (Hygon: ``hy-smi``, else the DTK
    #: ``rocm-smi``): the first the runner finds is the tool, and opening raises
    #: :class:`~accel.errors.BackendUnavailableError` when none is found.  Empty: ``tool``.
    alternatives: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    #: The backend itself fills PCI place, NUMA node and CPU affinity of its inventory from
    #: ``config.sysfs_root`` (:func:`accel.sysfs.enrich_inventory`) where the tool left them
    #: empty (Hygon).  Apart from ``BackendConfig.enrich_from_sysfs``, which is the core's.
    fills_from_sysfs: ClassVar[bool] = False

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.config = config
        self.runner = runner
        self._search: tuple[str, ...] = self.search_path
        self._chosen: str | None = None
        if self.alternatives:
            found = next(((t, p) for t, p in self.alternatives if runner.which(t, p)), None)
            if found is None:
                tried = "; ".join(f"{t} ({', '.join(p) or 'PATH'})" for t, p in self.alternatives)
                raise BackendUnavailableError(
                    f"{self.backend_name} backend unavailable: none of its tools was found: {tried}",
                    plugin=self.backend_name,
                )
            self._chosen, self._search = found
        super().__init__(self.backend_name, self._snapshot, config=config, runner=runner)

    def inventory(self) -> HostInventory:
        inv = super().inventory()
        return enrich_inventory(inv, self.config.sysfs_root) if self.fills_from_sysfs else inv

    def binding_rule(self) -> Callable[[UnitReading], Binding]:
        """How a runtime selects a unit of this backend (:func:`visible_binding` of the class
        attributes)."""
        return visible_binding(
            self.visible_env,
            key=self.visible_key,
            torch=self.torch_device_type,
            collective=self.collective_backend,
            ray=self.ray_resource,
            nodes=self.device_nodes,
        )

    def tool_name(self) -> str:
        """The binary to run (Kunlunxin picks ``xpu_smi`` or ``xpu-smi``; see ``alternatives``)."""
        return self._chosen or self.tool

    def _snapshot(self) -> Snapshot:
        session = ToolSession(
            self.runner, self.tool_name(), search_path=self._search, timeout_s=self.config.tool_timeout_s
        )
        col = Collection(self.backend_name, self.version, session)
        snap = self.collect(col)
        binding = self.binding_rule()
        snap = with_census(
            snap,
            col.outputs,
            read=col.read_bus_ids,
            errors=col.problems,
            vendor=self.vendor or self.backend_name,
            backend=self.backend_name,
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
        binding = self.binding_rule()
        readings = list(readings)
        col.read_bus_ids.update(r.bus_id for r in readings if r.bus_id is not None)
        devices, samples = build_units(
            readings,
            vendor=self.vendor or self.backend_name,
            problems=col.problems,
            per_unit=per_unit,
            kind=self.kind,
            tool=col.session.tool,
            binding=binding,
            versions=versions,
            timestamp=col.now,
            **more,
        )
        unread = self.unread(col, devices)
        if unread:
            # In the tool's order (by index), as if the row had been read.
            devices = sorted([*devices, *unread], key=lambda d: (d.index is None, d.index or 0))
        return devices, samples


    def unread(self, col: Collection, devices: Sequence[Device]) -> list[Device]:
        """The devices that failed records of ``col`` still identify and ``devices`` lack
        (:func:`unread_units`), bound by this backend's rule: listed with health ``unknown``."""
        binding = self.binding_rule()
        return unread_units(
            col.problems,
            devices,
            vendor=self.vendor or self.backend_name,
            kind=self.kind,
            tool=col.session.tool,
            binding=lambda index: binding(UnitReading(index=index)),
        )


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
    backend: str | None = None,
) -> Snapshot:
    """``snap`` checked against the device lists it came from (:func:`census`).

    ``outputs`` are the ``(command, stdout)`` of the views devices are listed from, ``read``
    the bus ids of every unit parsed from them (devices and VFs), ``errors`` the failed records
    already reported.  A bus id printed in a table row and in none of those is a chip the
    parser lost (a mangled rule merged its record into the next, a lost header row ended the
    table early): it becomes a ``record`` problem and a listed device with health ``unknown``
    (:func:`unread_units`), so the snapshot is partial, loudly, instead of short, silently.
    The problems name ``backend`` (``vendor`` when not given).
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
    problems = (*snap.problems, *problems_of(backend or vendor, missed))
    return dataclasses.replace(snap, devices=devices, problems=problems)


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
        #: Every tool this snapshot ran: ``session`` and those of :meth:`session_for`.
        self.sessions: list[ToolSession] = [session]
        #: The tool's version as its output printed it (the source's ``api_version``).
        self.api_version: str | None = None
        #: Problem kinds stated by :meth:`problem` (by ``id()`` of the error).
        self.kinds: dict[int, ProblemKind] = {}
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

    def secondary(self, parse: Callable[[str, str], P], *args: str) -> P | None:
        """Run and parse a secondary view the host is expected to answer (Ascend's ``info -m``):
        ``None`` when it fails, and the failure is a ``command`` problem of the snapshot; only a
        command a replay never recorded (never run on the recorded host) is just a note.  A
        hung tool still raises."""
        command = shlex.join([self.session.tool, *args])
        try:
            result = self.session.run(*args)
        except ToolTimeoutError:
            raise
        except ReplayMissingError as exc:
            self.notes.append(f"{command}: {exc.code}")
            return None
        except ToolError as exc:
            self.problems.append(exc)
            return None
        try:
            return parse(result.stdout, command)
        except ParseError as exc:
            if exc.command is None:
                exc.command = command
            self.problems.append(exc)
            return None

    def problem(self, exc: AccelError, kind: ProblemKind) -> None:
        """Record ``exc`` as a problem of ``kind`` where the kind :func:`problem_of` infers
        from the error is not what it is (a located record whose chip has no stable id is a
        ``device`` problem)."""
        self.kinds[id(exc)] = kind
        self.problems.append(exc)

    def session_for(self, tool: str, search_path: Sequence[str] = ()) -> ToolSession:
        """A session for a second tool of this snapshot (Hygon's ``rocminfo``), with the main
        session's runner and timeout; its runs count in the source's ``tool_invocations``."""
        main = self.session
        other = ToolSession(main.runner, tool, search_path=tuple(search_path), timeout_s=main.timeout_s)
        self.sessions.append(other)
        return other

    @property
    def invocations(self) -> int:
        """How many tool runs this snapshot took, all its tools together."""
        return sum(s.invocations for s in self.sessions)

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
                calls=self.invocations,
                notes=self.notes,
                problems=self.problems,
                api_version=self.api_version,
            ),
            collected_at=self.now,
            problems=problems_of(self.backend, [*self.failures, *self.problems], kinds=self.kinds),
        )


@dataclass
class ToolView:
    """What one tool view printed: versions, units, processes, and the units left out."""

    driver_version: str | None = None
    readings: list[UnitReading] = field(default_factory=list)
    processes: list[ProcessRow] = field(default_factory=list)
    problems: list[ParseError] = field(default_factory=list)
