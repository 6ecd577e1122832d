"""Backend machinery shared by the CLI plugins (Moore Threads, Iluvatar, MetaX, Kunlunxin, Enflame).

The parsing toolkit of :mod:`accel.plugins._cli` turns tool output into values; this module
turns those values into a backend, the same way for every CLI vendor:

* :class:`UnitReading` and :func:`build_unit`: one schedulable unit as a tool prints it, made
  into a :class:`~accel.model.Device` plus a :class:`~accel.model.Telemetry` sample with the
  same rules everywhere (stable id from the UUID else the bus id, ``used > total`` becomes a
  health condition instead of a validation crash).
* :class:`Snapshot` and :class:`CliBackend`: a :class:`~accel.plugin.Backend` whose three reads
  are answered from one collection of tool runs.

Text helpers the toolkit lacked (candidates to fold into :mod:`accel.plugins._cli`):

* :func:`read_header_records`: multi-row device records read against header rows that a caller
  located by landmark (or knows), for tables :func:`~accel.plugins._cli.find_box_tables` cannot
  frame: ``mthreads-gmi`` has no outer border, old ``efsmi`` doubles its rules, a pasted
  ``ixsmi`` fragment has no header at all.
* :class:`Lenient`: read one field and, when its text is garbage, record a monitoring
  condition on the unit instead of losing the whole device.
* :func:`parse_listing`: ``GPU 0: <name> (UUID: ...)`` / ``XPU 0: <name>  GPU-<uuid>`` lines of
  the ``-L`` option of nvidia-smi look-alikes.
* :func:`matrix_links`: a ``topo -m`` :class:`~accel.plugins._cli.Matrix` into typed links and link domains.
"""

from __future__ import annotations

import abc
import re
import shlex
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from accel.errors import AccelError, BackendUnavailableError, DeviceError, ParseError, ToolError, ToolTimeoutError
from accel.model import (
    FAST_LINKS,
    Action,
    Binding,
    Capabilities,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    Health,
    HealthCondition,
    Host,
    HostInventory,
    Link,
    LinkState,
    LinkType,
    MemoryKind,
    Partition,
    PartitionProfile,
    ProcessUsage,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
    device_id_for,
    validate,
)
from accel.plugin import PLUGIN_API, Backend, BackendConfig, Capability, PluginInfo
from accel.tools import Runner

from ._matrix import Matrix, read_matrix, read_records
from ._plugin import CliBackendPlugin
from ._session import ToolSession
from ._tables import BoxRecord, BoxRow, assign_fields, header_fields
from ._text import ParseContext, SourceLine, split_lines
from ._values import clean, parse_bus_id, parse_bytes, parse_int

__all__ = [
    "BASE_CAPABILITIES",
    "NEVER_READ",
    "PCIE_CODES",
    "CliBackend",
    "Collection",
    "LazyCliPlugin",
    "Lenient",
    "Listed",
    "PartitionsSurface",
    "ProcessRow",
    "ProcessesSurface",
    "RecordReader",
    "Snapshot",
    "ToolBackend",
    "ToolView",
    "UnitReading",
    "build_unit",
    "build_units",
    "cli_plugin_info",
    "condition",
    "conformance_scenarios",
    "first_match",
    "header_rows",
    "is_rule",
    "link_domains",
    "matrix_links",
    "memory_condition",
    "merge_readings",
    "parse_listing",
    "parse_process_rows",
    "processes_of",
    "read_header_records",
    "source_info",
    "split_cells",
    "table_under_header",
    "topo_links",
    "unreadable",
    "visible_binding",
]


# --------------------------------------------------------------------------------------------
# One unit as a tool shows it
# --------------------------------------------------------------------------------------------


@dataclass
class UnitReading:
    """One schedulable unit as a vendor tool prints it; every field may be unknown (``None``).

    Parsers fill what their tool shows (bytes, watts, celsius, ratios already converted) and
    the vendor module adds conditions; :func:`build_unit` makes the model objects.
    """

    index: int | None = None
    model: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    serial_number: str | None = None
    board_id: str | None = None
    pci_vendor_id: str | None = None
    pci_device_id: str | None = None
    link_gen_current: int | None = None
    link_gen_max: int | None = None
    link_width_current: int | None = None
    link_width_max: int | None = None
    is_virtual_function: bool | None = None
    memory_kind: MemoryKind = MemoryKind.UNKNOWN
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    fan_ratio: float | None = None
    clocks_hertz: dict[str, float] = field(default_factory=dict)
    ecc_uncorrected_total: int | None = None
    firmware: dict[str, str] = field(default_factory=dict)
    device_nodes: list[str] = field(default_factory=list)
    #: Telemetry fields that are empty *this time* (a hung card's sentinels, an unreadable
    #: cell): never listed as unsupported.  ``"*"`` means "some value was unreadable".
    dropped: set[str] = field(default_factory=set)
    conditions: list[HealthCondition] = field(default_factory=list)
    extras: dict[str, str | int | float | bool] = field(default_factory=dict)

    def stable_id(self, vendor: str) -> str:
        """``<vendor>:<uuid>`` or ``<vendor>:pci-<bdf>``; :class:`ParseError` without either."""
        try:
            return device_id_for(vendor, uuid=self.uuid, bus_id=self.bus_id)
        except ValueError as exc:
            where = f"device {self.index}" if self.index is not None else "a device"
            raise ParseError(f"{where} has neither a UUID nor a PCI bus id; no stable id") from exc


def memory_condition(total: int | None, used: int | None, *, tool: str) -> HealthCondition | None:
    """The condition for a used-memory reading above the total (an IOMMU misconfiguration
    makes Moore Threads S4000 show 32 GiB total with 44 GiB used), else ``None``.

    :func:`build_unit` then clamps used to the total: "full" is the safe reading for a
    scheduler, and the condition keeps the printed value.
    """
    if total is None or used is None or used <= total:
        return None
    return HealthCondition(
        subsystem=Subsystem.MEMORY,
        reason="MemoryTotalBelowUsed",
        # Degraded, not unhealthy: the device computes, but its memory accounting is wrong.
        severity=Severity.ERROR,
        action=Action.INVESTIGATE,
        message=(
            f"{tool} reports {used} bytes used of {total} bytes total; the total is wrong "
            "(IOMMU misconfiguration is the known cause), so used was clamped to the total"
        ),
    )


def build_unit(
    reading: UnitReading,
    *,
    vendor: str,
    kind: DeviceKind,
    tool: str,
    binding: Callable[[UnitReading], Binding],
    versions: Mapping[str, Any] | None = None,
    capabilities: Capabilities | None = None,
    partition_mode: Mapping[str, Any] | None = None,
    sharing: Mapping[str, Any] | None = None,
    unsupported: Iterable[str] = (),
    timestamp: datetime,
    telemetry_unsupported: Iterable[str] = (),
) -> tuple[Device, Telemetry]:
    """The :class:`Device` and its :class:`Telemetry` sample for one reading.

    Raises :class:`ParseError` (no stable id) or :class:`accel.errors.ValidationError` (a value
    the model refuses); the caller turns either into "this device is bad" without hiding others.
    """
    dev_id = reading.stable_id(vendor)
    conditions = list(reading.conditions)
    used = reading.memory_used_bytes
    cond = memory_condition(reading.memory_total_bytes, used, tool=tool)
    if cond is not None:
        conditions.append(cond)
        used = reading.memory_total_bytes
    reserved = reading.memory_reserved_bytes
    if reserved is not None and reading.memory_total_bytes is not None and reserved > reading.memory_total_bytes:
        reserved = None
    memory: list[dict[str, Any]] = []
    if reading.memory_total_bytes is not None or used is not None:
        usable = None
        if reading.memory_total_bytes is not None and reserved is not None:
            usable = reading.memory_total_bytes - reserved
        memory.append(
            {
                "kind": reading.memory_kind,
                "total_bytes": reading.memory_total_bytes,
                "used_bytes": used,
                "reserved_bytes": reserved,
                "usable_bytes": usable,
                "ecc_enabled": reading.ecc_enabled,
                "ecc_pending": reading.ecc_pending,
            }
        )
    pci: dict[str, Any] | None = None
    if reading.bus_id is not None:
        pci = {
            "bus_id": reading.bus_id,
            "vendor_id": reading.pci_vendor_id,
            "device_id": reading.pci_device_id,
            "link_gen_current": reading.link_gen_current,
            "link_gen_max": reading.link_gen_max,
            "link_width_current": reading.link_width_current,
            "link_width_max": reading.link_width_max,
            "is_virtual_function": reading.is_virtual_function,
        }
    ver = dict(versions or {})
    if reading.firmware:
        ver["firmware"] = {**ver.get("firmware", {}), **reading.firmware}
    data: dict[str, Any] = {
        "id": dev_id,
        "vendor": vendor,
        "kind": kind,
        "model": reading.model or "unknown",
        "index": reading.index,
        "uuid": reading.uuid,
        "serial_number": reading.serial_number,
        "board_id": reading.board_id,
        "pci": pci,
        "versions": ver,
        "memory": memory,
        "power": {"enforced_watts": reading.power_limit_watts},
        "capabilities": capabilities or Capabilities(),
        "partition_mode": dict(partition_mode or {}),
        "sharing": dict(sharing or {}),
        "binding": binding(reading),
        "health": {"conditions": conditions},
        "extras": dict(reading.extras),
        "unsupported": frozenset(unsupported),
    }
    data["unsupported"] = frozenset(unsupported) | _silent_device_fields(data)
    device = validate(Device, data, what=f"{vendor} device {dev_id}")
    sample = validate(
        Telemetry,
        {
            "device_id": dev_id,
            "timestamp": timestamp,
            "utilization_ratio": reading.utilization_ratio,
            "memory_utilization_ratio": reading.memory_utilization_ratio,
            "memory_used_bytes": used,
            "memory_total_bytes": reading.memory_total_bytes if used is not None else None,
            "memory_free_bytes": device.memory[0].free_bytes if device.memory else None,
            "power_watts": reading.power_watts,
            "temperature_celsius": reading.temperature_celsius,
            "fan_ratio": reading.fan_ratio,
            "clocks_hertz": dict(reading.clocks_hertz),
            "ecc_uncorrected_total": reading.ecc_uncorrected_total,
            "unsupported": frozenset(telemetry_unsupported) | _silent_telemetry(reading, used),
        },
        what=f"{vendor} telemetry of {dev_id}",
    )
    return device, sample


#: Device fields a CLI view either prints or never prints (architecture: none of these tools).
_VIEW_FIELDS = ("uuid", "serial_number")
#: Telemetry fields owned by capabilities; an empty one that was not dropped is unsupported.
_TELEMETRY_VIEW = ("power_watts", "temperature_celsius", "utilization_ratio", "clocks_hertz", "memory_used_bytes")


def _silent_device_fields(data: Mapping[str, Any]) -> frozenset[str]:
    """Identity fields this unit's views do not print, plus ``architecture`` (no CLI shows it)."""
    return frozenset(name for name in _VIEW_FIELDS if not data.get(name)) | {"architecture"}


def _silent_telemetry(reading: UnitReading, used: int | None) -> frozenset[str]:
    """Telemetry fields empty because the tool never prints them for this unit.

    ``None`` in a column that exists but was unreadable, or a hung card's dropped sentinels,
    is "not this time" (``reading.dropped``) and stays out; ``energy_joules`` is never read.
    """
    if "*" in reading.dropped:
        return NEVER_READ
    values = {
        "power_watts": reading.power_watts,
        "temperature_celsius": reading.temperature_celsius,
        "utilization_ratio": reading.utilization_ratio,
        "clocks_hertz": reading.clocks_hertz,
        "memory_used_bytes": used,
    }
    return NEVER_READ | {k for k, v in values.items() if v in (None, {}) and k not in reading.dropped}


# --------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------

_RULE_LINE = re.compile(r"^\s*[+|]?[-=+| ]*$")


def is_rule(text: str) -> bool:
    """A horizontal rule of a table (``+----+``, ``|====|``, a bare ``-----``)."""
    return bool(_RULE_LINE.match(text)) and ("---" in text or "===" in text)


def split_cells(text: str) -> tuple[str, ...]:
    """The ``|``-separated cells of a row, outer borders removed, positions kept.

    Works for boxed rows (``| a | b |``) and for rows without an outer border
    (``0    MTT S5000   |00000000:18:00.0 |0%``, the ``mthreads-gmi`` table).
    """
    s = text.rstrip()
    lead = len(s) - len(s.lstrip())
    if s[lead : lead + 1] == "|":
        s = " " * (lead + 1) + s[lead + 1 :]
    if s.endswith("|"):
        s = s[:-1]
    return tuple(s.split("|"))


def read_header_records(
    lines: Sequence[SourceLine],
    header: Sequence[str],
    *,
    start: int = 0,
) -> tuple[list[BoxRecord], int]:
    """Read device records below header rows; returns the records and the index where they end.

    ``header`` holds the header row texts (taken from the output by a landmark, or a known
    layout when the output is a headerless fragment).  Rules separate records (several rules
    in a row count as one); data row *k* of a record is read against header row *k* when their
    cell counts agree, else against any header row of the same shape.  The first line that is
    neither a rule nor a row of a known shape (a blank line, a ``Processes:`` banner) ends the
    table.
    """
    parsed = [tuple(header_fields(c) for c in split_cells(h)) for h in header]
    shapes = {len(h) for h in parsed}
    records: list[BoxRecord] = []
    current: list[BoxRow] = []
    i = start
    while i < len(lines):
        line = lines[i]
        if is_rule(line.text):
            if current:
                records.append(BoxRecord(tuple(current)))
                current = []
            i += 1
            continue
        cells = split_cells(line.text)
        if line.blank or "|" not in line.text or len(cells) not in shapes:
            break
        if len(current) == len(parsed):
            # A record has as many rows as the header (one-row tables have no rules between).
            records.append(BoxRecord(tuple(current)))
            current = []
        hdr = parsed[len(current)]
        if len(hdr) != len(cells):
            hdr = next(h for h in parsed if len(h) == len(cells))
        fields: dict[str, str] = {}
        for cell_header, cell in zip(hdr, cells, strict=True):
            for key, value in assign_fields(cell_header, cell).items():
                fields.setdefault(key, value)
        current.append(BoxRow(line, cells, fields))
        i += 1
    if current:
        records.append(BoxRecord(tuple(current)))
    return records, i


def unreadable(ctx: ParseContext, line: SourceLine | None, what: str, exc: AccelError) -> HealthCondition:
    """The condition for a field a tool printed but that could not be read."""
    where = f" (line {line.lineno})" if line is not None else ""
    return HealthCondition(
        subsystem=Subsystem.MONITORING,
        reason="UnreadableValue",
        severity=Severity.WARNING,
        action=Action.NONE,
        message=f"{ctx.command}: {what} unreadable{where}: {exc}"[:500],
    )


T = TypeVar("T")


@dataclass
class Lenient:
    """Reads the fields of one unit; a field that fails becomes ``None`` plus a condition.

    ``strict`` fields (the bus id, the index: what the device's identity rests on) raise a
    located :class:`ParseError` instead, so the caller drops that one device and keeps the rest.
    """

    ctx: ParseContext
    reading: UnitReading

    def get(self, parse: Callable[[str], T | None], text: str | None, line: SourceLine | None, what: str) -> T | None:
        """``parse(text)``, or ``None`` (and an ``UnreadableValue`` condition) when it fails."""
        if text is None:
            return None
        try:
            return parse(text)
        except (ParseError, ValueError, ArithmeticError) as exc:
            err = exc if isinstance(exc, AccelError) else ParseError(str(exc))
            self.reading.conditions.append(unreadable(self.ctx, line, what, err))
            self.reading.dropped.add("*")
            return None

    def strict(
        self, parse: Callable[[str], T | None], text: str | None, line: SourceLine | None, what: str
    ) -> T | None:
        """``parse(text)``, raising a :class:`ParseError` that names tool, command and line."""
        if text is None:
            return None
        with self.ctx.at(line):
            try:
                return parse(text)
            except (ArithmeticError, ValueError) as exc:
                raise ParseError(f"{what}: {exc}") from exc


@dataclass(frozen=True)
class Listed:
    """One line of a ``-L`` listing."""

    index: int
    name: str | None
    uuid: str | None
    bus_id: str | None
    line: SourceLine


_LISTED = re.compile(r"^\s*(?P<word>[A-Za-z]+)\s*#?\s*(?P<index>[0-9]{1,4})\s*[:\uff1a]?\s+(?P<rest>.*)$")
_UUID_PAREN = re.compile(r"\(\s*UUID\s*[:\uff1a]?\s*(?P<uuid>[^)\s]+)\s*\)", re.IGNORECASE)
_UUID_BARE = re.compile(r"(?<![\w-])(?P<uuid>(?:GPU|XPU|MX|MTT|GCU)-[0-9A-Za-z-]{6,})")
_BDF = re.compile(
    r"(?<![0-9A-Fa-f:])(?P<bdf>(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])(?![0-9A-Fa-f])"
)


def parse_listing(text: str, *, words: Sequence[str], ctx: ParseContext) -> list[Listed]:
    """Parse ``-L`` output: ``GPU 0: MXC500 (UUID: GPU-...)``, ``XPU 0: P800 OAM  GPU-...``,
    ``GPU#0  MXC600-AL  0000:06:00.0  Available (UUID: GPU-...)``, ``XPU 0: 00000000:21:00.0``.

    ``words`` are the accepted leading words (``GPU``, ``XPU``).  Lines that do not start with
    one are skipped (banners); a listed line with a malformed index raises a located error.
    """
    accepted = {w.lower() for w in words}
    out: list[Listed] = []
    for line in split_lines(text):
        m = _LISTED.match(line.text)
        if not m or m.group("word").lower() not in accepted:
            continue
        rest = m.group("rest")
        uuid: str | None = None
        um = _UUID_PAREN.search(rest) or _UUID_BARE.search(rest)
        if um:
            uuid = um.group("uuid")
            rest = (rest[: um.start()] + rest[um.end() :]).strip()
        bus_id: str | None = None
        bm = _BDF.search(rest)
        if bm:
            with ctx.at(line):
                bus_id = parse_bus_id(bm.group("bdf"))
            rest = (rest[: bm.start()] + " " + rest[bm.end() :]).strip()
        name = clean(re.sub(r"\s+(Available|Unavailable)\s*$", "", rest).strip(" :"))
        out.append(Listed(int(m.group("index")), name, clean(uuid), bus_id, line))
    return out


def matrix_links(
    matrix: Matrix,
    ids: Mapping[str, str],
    codes: Mapping[str, LinkType],
    *,
    domain_kind: DomainKind | None = None,
    domain_prefix: str = "link",
) -> tuple[list[Link], list[Domain]]:
    """Links and domains from a ``topo -m`` matrix read with :func:`~accel.plugins._cli.read_matrix`.

    ``ids`` maps row/column labels (``GPU0``) to device ids; labels it lacks (``NIC0``, a device
    the inventory dropped) are skipped.  ``codes`` maps cell codes (``MX``, ``XL``, ``SYS``) to
    link types; other codes (``X``, anything unknown) give no link.  Each connected group of
    devices joined by a fast link (:data:`accel.model.FAST_LINKS`) becomes a :class:`Domain` of
    ``domain_kind`` (when given) with at least two members.
    """
    links: dict[frozenset[str], Link] = {}
    for (row, col), code in matrix.codes.items():
        a, b = ids.get(row), ids.get(col)
        if a is None or b is None or a == b or code not in codes:
            continue
        pair = frozenset((a, b))
        if pair not in links:
            first, second = sorted(pair)
            links[pair] = Link(a=first, b=second, type=codes[code])
    ordered = sorted(links.values(), key=lambda lk: (lk.a, lk.b))
    fast = [lk for lk in ordered if lk.type in FAST_LINKS]
    domains = link_domains(fast, domain_kind, prefix=domain_prefix, order=list(ids.values())) if domain_kind else []
    return ordered, domains


def build_units(
    readings: Iterable[UnitReading],
    *,
    vendor: str,
    problems: list[AccelError],
    per_unit: Callable[[UnitReading], Mapping[str, Any]] | None = None,
    **common: Any,
) -> tuple[list[Device], list[Telemetry]]:
    """:func:`build_unit` over many readings; a reading that fails is added to ``problems``
    (and left out) so one bad device never hides the others.

    ``per_unit(reading)`` returns keyword arguments of :func:`build_unit` that depend on the
    unit (its capabilities, partition or sharing mode); they override ``common``.
    """
    devices: list[Device] = []
    samples: list[Telemetry] = []
    seen: set[str] = set()
    for reading in readings:
        try:
            options = {**common, **(per_unit(reading) if per_unit is not None else {})}
            device, sample = build_unit(reading, vendor=vendor, **options)
        except AccelError as exc:
            problems.append(exc)
            continue
        if device.id in seen:
            problems.append(ParseError(f"device id {device.id!r} listed twice; the second one is left out"))
            continue
        seen.add(device.id)
        devices.append(device)
        samples.append(sample)
    return devices, samples


def source_info(
    backend: str,
    *,
    version: str,
    api: str,
    calls: int | None = None,
    notes: Sequence[str] = (),
    problems: Sequence[AccelError] = (),
) -> SourceInfo:
    """The :class:`SourceInfo` of a CLI snapshot; ``detail`` says what was skipped and why."""
    parts = [*notes, *(f"left out: {p}" for p in problems)]
    detail = "; ".join(parts)[:2000] if parts else None
    return SourceInfo(backend=backend, plugin_version=version, api=api, detail=detail, tool_invocations=calls)


def link_domains(
    links: Iterable[Link], kind: DomainKind, *, prefix: str = "link", order: Sequence[str] = ()
) -> list[Domain]:
    """Each connected group (two or more members) of the links that are not down, as a domain.

    Members are listed in ``order`` (the inventory's device order) where given; domain ids are
    ``<prefix>-<n>`` numbered by their first member.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for link in links:
        if link.state is LinkState.DOWN:
            continue
        parent[find(link.a)] = find(link.b)
    groups: dict[str, list[str]] = {}
    for member in list(parent):
        groups.setdefault(find(member), []).append(member)
    rank = {d: i for i, d in enumerate(order)}
    ordered = sorted(
        (sorted(m, key=lambda d: (rank.get(d, len(rank)), d)) for m in groups.values() if len(m) > 1),
        key=lambda m: (rank.get(m[0], len(rank)), m[0]),
    )
    return [Domain(id=f"{prefix}-{n}", kind=kind, members=tuple(m)) for n, m in enumerate(ordered)]


def merge_readings(primary: Sequence[UnitReading], secondary: Iterable[UnitReading]) -> list[UnitReading]:
    """Fill gaps of ``primary`` readings from another view of the same units.

    A secondary reading matches the primary with the same bus id (when both know it), else the
    same index.  Only fields the primary lacks (``None``, empty) are taken; conditions and
    extras are combined.  A secondary reading that matches nothing is appended (the other view
    saw a unit the main table did not).
    """
    out = list(primary)
    for other in secondary:
        match = None
        if other.bus_id is not None:
            match = next((r for r in out if r.bus_id == other.bus_id), None)
        if match is None and other.index is not None:
            match = next(
                (r for r in out if r.index == other.index and (r.bus_id is None or other.bus_id is None)), None
            )
        if match is None:
            out.append(other)
            continue
        for f in fields(UnitReading):
            mine, theirs = getattr(match, f.name), getattr(other, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                for k, v in theirs.items():
                    mine.setdefault(k, v)
            elif mine is None or (f.name == "memory_kind" and mine is MemoryKind.UNKNOWN):
                setattr(match, f.name, theirs)
    return out


def visible_binding(
    env: str | None, *, torch: str | None = None, collective: str | None = None
) -> Callable[[UnitReading], Binding]:
    """A binding rule: ``env=<index>`` plus the torch device type and collective backend."""

    def bind(reading: UnitReading) -> Binding:
        visible = str(reading.index) if env is not None and reading.index is not None else None
        return Binding(
            visible_env=env if visible is not None else None,
            visible_id=visible,
            torch_device_type=torch,
            collective_backend=collective,
            device_nodes=tuple(reading.device_nodes),
        )

    return bind


#: nvidia-smi ``topo -m`` PCIe/NUMA codes as explicit links (a replay has no sysfs to derive them).
PCIE_CODES: Mapping[str, LinkType] = {
    "PIX": LinkType.PCIE_PIX,
    "PXB": LinkType.PCIE_PXB,
    "PHB": LinkType.PCIE_PHB,
    "NODE": LinkType.NUMA,
    "SYS": LinkType.SYSTEM,
}


@dataclass(frozen=True)
class ProcessRow:
    """One row of a tool's process table: the device's tool index, pid, name, memory."""

    device_index: int
    pid: int
    name: str | None
    memory_bytes: int | None
    line: SourceLine


_PROC_ROW = re.compile(
    r"^\s*\|?\s*(?P<dev>[0-9]+)\s+(?:(?:N/A|[0-9]+)\s+(?:N/A|[0-9]+)\s+)?(?P<pid>[0-9]+)\s+"
    r"(?:[CGM+]{1,3}\s+)?(?P<name>\S.*?)\s+(?P<mem>[0-9]+(?:\.[0-9]+)?\s*(?:[KMG]i?B)?)\s*\|?\s*$"
)


def parse_process_rows(lines: Sequence[SourceLine], ctx: ParseContext, *, bare_unit: str = "MiB") -> list[ProcessRow]:
    """Rows of the ``Processes:`` block of an nvidia-smi look-alike (``ixsmi``, ``mx-smi``,
    ``xpu_smi`` 5.x, ``mthreads-gmi``): ``<dev> [XI CI] <pid> [type] <name> <memory>``.

    Only lines after a line mentioning ``Process`` are read; header, rule and "No running
    processes found" lines do not match.  A bare memory number is in ``bare_unit`` (the header
    says ``Usage(MiB)``).
    """
    rows: list[ProcessRow] = []
    seen_banner = False
    for line in lines:
        if not seen_banner:
            seen_banner = "process" in line.text.lower()
            continue
        m = _PROC_ROW.match(line.text)
        if not m or "process" in line.text.lower():
            continue
        with ctx.at(line):
            mem = parse_bytes(m.group("mem").replace(" ", ""), bare_unit=bare_unit, binary_prefixes=True)
        rows.append(ProcessRow(int(m.group("dev")), int(m.group("pid")), clean(m.group("name")), mem, line))
    return rows


def processes_of(rows: Iterable[ProcessRow], devices: Iterable[Device]) -> list[ProcessUsage]:
    """Process rows as :class:`ProcessUsage` of the devices with those tool indices."""
    by_index = {d.index: d.id for d in devices if d.index is not None}
    return [
        ProcessUsage(pid=r.pid, device_id=by_index[r.device_index], name=r.name, memory_bytes=r.memory_bytes)
        for r in rows
        if r.device_index in by_index
    ]


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


def topo_links(
    col: Collection,
    devices: Iterable[Device],
    *,
    label: str,
    fast: Mapping[str, LinkType],
    domain_kind: DomainKind | None = None,
    prefix: str = "link",
    args: Sequence[str] = ("topo", "-m"),
) -> tuple[list[Link], list[Domain]]:
    """Run ``<tool> topo -m`` (optional) and turn its matrix into links and domains.

    Cells may hold ``X``, the PCIe/NUMA codes of :data:`PCIE_CODES` or a vendor's ``fast``
    codes (``MX``, ``XL``); rows and columns are ``<label><index>``.  An unreadable matrix is
    a problem of the snapshot, not a failure: the devices stand without it.
    """
    codes = {**PCIE_CODES, **fast}
    valid = re.compile("|".join(["X", *(re.escape(c) for c in codes)]))
    header = rf"^\s+{re.escape(label)}0(\s|$)"
    tool = col.session.tool
    matrix = col.extra(
        lambda text, cmd: read_matrix(text, ParseContext(tool, cmd), header=header, valid_code=valid), *args
    )
    if matrix is None:
        return [], []
    ids = {f"{label}{d.index}": d.id for d in devices if d.index is not None}
    return matrix_links(matrix, ids, codes, domain_kind=domain_kind, domain_prefix=prefix)


#: Telemetry no CLI backend here can read: tools print no energy counter.
NEVER_READ: frozenset[str] = frozenset({"energy_joules"})


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


# --------------------------------------------------------------------------------------------
# Reading one record, finding banners and headers
# --------------------------------------------------------------------------------------------


def condition(
    subsystem: Subsystem,
    reason: str,
    severity: Severity,
    action: Action,
    message: str,
    *,
    code: str | None = None,
    **more: Any,
) -> HealthCondition:
    """A :class:`HealthCondition` in one call (``code`` is the ``vendor.kind:code`` string)."""
    return HealthCondition(
        subsystem=subsystem, reason=reason, severity=severity, action=action, message=message, vendor_code=code, **more
    )


def first_match(lines: Iterable[SourceLine], pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first match of ``pattern`` in any line (a version banner found by its landmark)."""
    return next((m for m in (pattern.search(ln.text) for ln in lines) if m), None)


def header_rows(
    lines: Sequence[SourceLine], pattern: re.Pattern[str], ctx: ParseContext, what: str
) -> tuple[list[str], int]:
    """The header row texts starting at the first line matching ``pattern`` (down to the next
    rule or non-table line) and the index after them; a located error when there is none."""
    start = next((i for i, ln in enumerate(lines) if pattern.match(ln.text)), None)
    if start is None:
        raise ctx.error(f"no {what} header in the output")
    rows: list[str] = []
    i = start
    while i < len(lines) and not is_rule(lines[i].text) and "|" in lines[i].text:
        rows.append(lines[i].text)
        i += 1
    return rows, i


@dataclass
class RecordReader:
    """Reads the fields of one table record into a fresh :class:`UnitReading`.

    ``get`` is lenient (a garbage cell becomes ``None`` plus a condition), ``strict`` raises a
    located error (for what identity rests on); ``row`` picks the record line to name.
    """

    rec: BoxRecord
    ctx: ParseContext
    fields: dict[str, str]
    reading: UnitReading
    lenient: Lenient

    @classmethod
    def start(
        cls, rec: BoxRecord, ctx: ParseContext, *, index: str | None, fields: Mapping[str, str] | None = None
    ) -> RecordReader:
        """Begin a record whose device index is in column ``index`` (missing: a located error;
        ``None``: the caller reads the index itself)."""
        reading = UnitReading()
        reader = cls(rec, ctx, dict(fields if fields is not None else rec.fields), reading, Lenient(ctx, reading))
        if index is not None:
            reading.index = reader.strict(parse_int, index)
            if reading.index is None:
                raise ctx.error(f"device row without a {index} number", rec.first_line)
        return reader

    def line(self, row: int = 0) -> SourceLine:
        rows = self.rec.rows
        return rows[min(row, len(rows) - 1)].line

    def text(self, column: str) -> str | None:
        """The cell's text, ``None`` for a placeholder."""
        return clean(self.fields.get(column))

    def get(self, parse: Callable[[str], T | None], column: str, row: int = 0) -> T | None:
        return self.lenient.get(parse, self.fields.get(column), self.line(row), column)

    def strict(self, parse: Callable[[str], T | None], column: str, row: int = 0) -> T | None:
        return self.lenient.strict(parse, self.fields.get(column), self.line(row), column)

    def extras(self, prefix: str, columns: Mapping[str, str]) -> None:
        """Store the printed text of ``columns`` (column -> key) as ``<prefix>/<key>`` extras."""
        for column, key in columns.items():
            value = self.text(column)
            if value is not None:
                self.reading.extras[f"{prefix}/{key}"] = value


def table_under_header(
    text: str, ctx: ParseContext, header: re.Pattern[str], what: str, read: Callable[[BoxRecord], T]
) -> tuple[list[SourceLine], list[T], list[ParseError], int]:
    """Find the header by its landmark, read every record below it with ``read`` and return
    ``(lines, units, problems, end)``: one unreadable record is a problem, not a failure."""
    lines = split_lines(text)
    ctx.require(lines, what)
    rows, start = header_rows(lines, header, ctx, what)
    records, end = read_header_records(lines, rows, start=start)
    good, bad = read_records(records, read)
    return lines, good, bad, end


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
