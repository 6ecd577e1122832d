"""The backend machinery of CLI plugins: a Snapshot answered from one collection of tool runs,
the optional surfaces, and the plugin info and conformance helpers."""

from __future__ import annotations

import abc
import shlex
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from accel.errors import AccelError, BackendUnavailableError, DeviceError, ParseError, ToolError, ToolTimeoutError
from accel.model import (
    Device,
    DeviceKind,
    Domain,
    Health,
    Host,
    HostInventory,
    Link,
    Partition,
    PartitionProfile,
    ProcessUsage,
    SourceInfo,
    Telemetry,
    validate,
)
from accel.plugin import PLUGIN_API, Backend, BackendConfig, Capability, PluginInfo
from accel.tools import Runner

from ._listing import ProcessRow, parse_listing
from ._plugin import CliBackendPlugin
from ._session import ToolSession
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

    def inventory(self) -> HostInventory:
        """The snapshot as a validated :class:`HostInventory`."""
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
            },
            what="inventory",
        )


class CliBackend(Backend):
    """A backend answered from :class:`Snapshot` objects that ``collect`` builds.

    Every read runs the tools again (a snapshot is "as of now"); a failure inside ``collect``
    that is not an :class:`AccelError` is a plugin bug and is wrapped, so no foreign exception
    leaves a public method.  After :meth:`close`, reads raise
    :class:`~accel.errors.BackendUnavailableError`.
    """

    def __init__(self, name: str, collect: Callable[[], Snapshot]) -> None:
        self._name = name
        self._collect = collect
        self._closed = False

    @property
    def name(self) -> str:
        return self._name

    def snapshot(self) -> Snapshot:
        """Run the tools once and return everything they showed."""
        if self._closed:
            raise BackendUnavailableError(f"backend {self._name!r} is closed", plugin=self._name)
        try:
            return self._collect()
        except AccelError:
            raise
        except Exception as exc:
            raise BackendUnavailableError(
                f"backend {self._name!r} failed: {type(exc).__name__}: {exc}", plugin=self._name
            ) from exc

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

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.config = config
        self.runner = runner
        super().__init__(self.backend_name, self._snapshot)

    def tool_name(self) -> str:
        """The binary to run (Kunlunxin picks ``xpu_smi`` or ``xpu-smi``)."""
        return self.tool

    def _snapshot(self) -> Snapshot:
        session = ToolSession(
            self.runner, self.tool_name(), search_path=self.search_path, timeout_s=self.config.tool_timeout_s
        )
        return self.collect(Collection(self.backend_name, self.version, session))

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
        """:func:`build_units` with this backend's vendor, kind, tool and binding rule."""
        return build_units(
            readings,
            vendor=self.backend_name,
            problems=col.problems,
            per_unit=per_unit,
            kind=self.kind,
            tool=col.session.tool,
            binding=visible_binding(self.visible_env, torch=self.torch_device_type, collective=self.collective_backend),
            versions=versions,
            timestamp=col.now,
            **more,
        )


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
            return None
        if result is None:
            return None
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
