"""One schedulable unit as a CLI tool shows it, made into a Device and a Telemetry sample
with the same rules for every vendor (stable ids, ``used > total`` as a condition)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from accel.errors import AccelError, ConfigError, ParseError
from accel.model import (
    Action,
    Binding,
    Capabilities,
    Device,
    DeviceKind,
    Health,
    HealthCondition,
    MemoryKind,
    MemoryRegion,
    OutOfBounds,
    PartitionMode,
    PciInfo,
    PowerLimits,
    Severity,
    SharingInfo,
    SourceInfo,
    Subsystem,
    Telemetry,
    VersionInfo,
    bound_of,
    device_id_for,
    validate_reading,
)

from ._assembly import DeviceReading, assemble, out_of_bounds_errors, unsupported_of
from ._values import extra_implausible, implausible

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound="DataclassInstance")

__all__ = [
    "NEVER_READ",
    "TABLE_NEVER_PRINTS",
    "UnitReading",
    "bounded",
    "build_unit",
    "build_units",
    "memory_condition",
    "merge_readings",
    "out_of_bounds_errors",
    "source_info",
    "validated",
    "visible_binding",
]


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
    #: True only when the tool printed something that tells this unit's health (a health or
    #: status column, ECC error counters): health is earned, so without it the unit's health
    #: is ``unknown`` (``monitored=False``), never ``healthy``.
    health_read: bool = False
    extras: dict[str, str | int | float | bool] = field(default_factory=dict)
    #: The id (after ``<vendor>:``) of a unit the tool prints neither a UUID nor a bus id for,
    #: from something else it does print for it (cnmon v4: ``card-<n>``); the vendor flags
    #: where it came from in ``extras``.  Unused when a UUID or bus id is known.
    fallback_id: str | None = None
    #: Appended to the stable id of a unit that shares its PCI function with another (the two
    #: chips of an Ascend 310P Duo card print one bus id): ``<vendor>:pci-<bdf>-chip1``.
    id_suffix: str = ""
    family: str | None = None
    #: The CPUs close to the unit, as the tool prints them (``0-23``), from a topology view.
    cpu_affinity: str | None = None
    #: Memory regions after the first (Ascend 310 chips show DDR next to HBM): ``(kind, total,
    #: used)``.  Device regions only; the telemetry sample reads the first.
    other_memory: list[tuple[MemoryKind, int | None, int | None]] = field(default_factory=list)

    def stable_id(self, vendor: str) -> str:
        """``<vendor>:<uuid>`` or ``<vendor>:pci-<bdf>``, else ``<vendor>:<fallback_id>``;
        :class:`ParseError` without any of them."""
        try:
            return device_id_for(vendor, uuid=self.uuid, bus_id=self.bus_id) + self.id_suffix
        except ValueError as exc:
            if self.fallback_id is not None and not self.uuid:
                return f"{vendor}:{self.fallback_id}"
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
    supported: Iterable[str] = (),
    timestamp: datetime,
    telemetry_unsupported: Iterable[str] = (),
    problems: list[AccelError] | None = None,
) -> tuple[Device, Telemetry]:
    """The :class:`Device` and its :class:`Telemetry` sample for one reading.

    The device is assembled by :func:`accel.toolkit.assemble_device`'s rules, as NVIDIA's and
    AMD's are.  A value outside the model's physical bounds (:data:`accel.model.BOUNDS`) is
    left out (unknown) and appended to ``problems`` as an :class:`~accel.errors.OutOfBoundsError`
    (a ``field`` problem of the snapshot); without ``problems`` it is an error.  ``unsupported``
    names fields the tool never prints (listed where still empty); identity fields the unit's
    views left empty are too, except those in ``supported`` (another view reads them: Ascend's
    die id with ``board=true``).  Raises :class:`ParseError` (no stable id) or
    :class:`accel.errors.ValidationError` (a value the model refuses); the caller turns either
    into "this device is bad" without hiding others.
    """
    dev_id = reading.stable_id(vendor)
    reading, out_of_bounds = bounded(reading)
    unit = unit_reading(
        reading, dev_id, vendor=vendor, kind=kind, tool=tool, binding=binding, versions=versions,
        capabilities=capabilities, partition_mode=partition_mode, sharing=sharing,
        never=frozenset(unsupported), supported=frozenset(supported), timestamp=timestamp,
    )
    device, dropped = assemble(unit)
    clamped = memory_condition(reading.memory_total_bytes, reading.memory_used_bytes, tool=tool) is not None
    used = reading.memory_total_bytes if clamped else reading.memory_used_bytes
    tdata: dict[str, Any] = {
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
    }
    tdata["unsupported"] = unsupported_of(tdata, telemetry_unsupported) | _silent_telemetry(reading, tdata)
    sample, dropped_t = validate_reading(Telemetry, tdata, what=f"{vendor} telemetry of {dev_id}")
    _report_dropped(vendor, dev_id, tool, (*out_of_bounds, *dropped, *dropped_t), problems)
    return device, sample


def unit_reading(
    reading: UnitReading,
    dev_id: str,
    *,
    vendor: str,
    kind: DeviceKind,
    tool: str,
    binding: Callable[[UnitReading], Binding],
    versions: Mapping[str, Any] | None,
    capabilities: Capabilities | None,
    partition_mode: Mapping[str, Any] | None,
    sharing: Mapping[str, Any] | None,
    never: frozenset[str],
    supported: frozenset[str],
    timestamp: datetime,
) -> DeviceReading:
    """The typed :class:`DeviceReading` of one tool row (a bounded :class:`UnitReading`).

    ``used > total`` becomes a ``MemoryTotalBelowUsed`` condition with used clamped to the
    total; identity fields the tool left empty (UUID, serial) and ``architecture`` (no CLI
    shows it) join ``never``: the assembly lists them as unsupported where still empty.
    """
    conditions = list(reading.conditions)
    cond = memory_condition(reading.memory_total_bytes, reading.memory_used_bytes, tool=tool)
    if cond is not None:
        conditions.append(cond)
    ver = dict(versions or {})
    if reading.firmware:
        ver["firmware"] = {**ver.get("firmware", {}), **reading.firmware}
    device = Device.model_construct(
        id=dev_id,
        vendor=vendor,
        kind=kind,
        model=reading.model or "unknown",
        index=reading.index,
        uuid=reading.uuid,
        family=reading.family,
        cpu_affinity=reading.cpu_affinity,
        serial_number=reading.serial_number,
        board_id=reading.board_id,
        pci=_unit_pci(reading),
        versions=VersionInfo.model_construct(**ver),
        memory=_unit_memory(reading, clamp=cond is not None),
        power=PowerLimits.model_construct(enforced_watts=reading.power_limit_watts),
        capabilities=capabilities or Capabilities(),
        partition_mode=PartitionMode.model_construct(**dict(partition_mode or {})),
        sharing=SharingInfo.model_construct(**dict(sharing or {})),
        binding=binding(reading),
        # Health is earned: a reading time only when the tool printed a health reading.
        health=Health.model_construct(conditions=tuple(conditions),
                                      checked_at=timestamp if reading.health_read else None),
        extras=dict(reading.extras),
    )
    silent = {name for name in _VIEW_FIELDS if not getattr(reading, name)} | {"architecture"}
    return DeviceReading(device, never=(never | silent) - supported)


def _unit_memory(reading: UnitReading, *, clamp: bool) -> tuple[MemoryRegion, ...]:
    """The unit's memory regions: the first from the main columns, then ``other_memory``."""
    total = reading.memory_total_bytes
    used = total if clamp else reading.memory_used_bytes
    reserved = reading.memory_reserved_bytes
    if reserved is not None and total is not None and reserved > total:
        reserved = None
    regions: list[MemoryRegion] = []
    # A memory column whose values are unreadable this time (masked, dropped) still says the
    # unit has memory: the region is listed, its sizes unknown.
    if total is not None or used is not None or _MEMORY_FIELDS & reading.dropped:
        regions.append(MemoryRegion.model_construct(
            kind=reading.memory_kind, total_bytes=total, used_bytes=used, reserved_bytes=reserved,
            usable_bytes=total - reserved if total is not None and reserved is not None else None,
            ecc_enabled=reading.ecc_enabled, ecc_pending=reading.ecc_pending,
        ))
    regions.extend(MemoryRegion.model_construct(kind=k, total_bytes=t, used_bytes=u)
                   for k, t, u in reading.other_memory)
    return tuple(regions)


def _unit_pci(reading: UnitReading) -> PciInfo | None:
    if reading.bus_id is None:
        return None
    return PciInfo.model_construct(
        bus_id=reading.bus_id, vendor_id=reading.pci_vendor_id, device_id=reading.pci_device_id,
        link_gen_current=reading.link_gen_current, link_gen_max=reading.link_gen_max,
        link_width_current=reading.link_width_current, link_width_max=reading.link_width_max,
        is_virtual_function=reading.is_virtual_function,
    )


def validated(
    cls: type[M], data: Any, *, what: str, tool: str, device_id: str, problems: list[AccelError]
) -> M:
    """``cls`` validated from ``data`` with the values outside the model's physical bounds left
    out (unknown) and appended to ``problems`` as :class:`~accel.errors.OutOfBoundsError`, for
    plugins that build model objects themselves (:func:`build_unit` does this already)."""
    model, dropped = validate_reading(cls, data, what=what)
    _report_dropped(device_id.split(":", 1)[0], device_id, tool, dropped, problems)
    return model


def _report_dropped(
    vendor: str, dev_id: str, tool: str, dropped: Sequence[OutOfBounds], problems: list[AccelError] | None
) -> None:
    for err in out_of_bounds_errors(tool, dropped, device_id=dev_id):
        if problems is None:
            raise err
        problems.append(err)


def bounded(reading: R) -> tuple[R, list[OutOfBounds]]:
    """A reading dataclass (:class:`UnitReading`, AMD's ``GpuReading``...) without the values
    outside their unit's physical bounds, by the unit suffix of each field's name
    (``memory_total_bytes``, ``power_watts``, ``clocks_hertz``: :data:`accel.model.BOUNDS`),
    non-finite floats and out-of-bounds extras included; and what was left out."""
    dropped: list[OutOfBounds] = []
    changes: dict[str, Any] = {}
    for f in fields(reading):
        value = getattr(reading, f.name)
        bound = bound_of(f.name)
        if isinstance(value, dict):
            if f.name == "extras":
                kept = {k: v for k, v in value.items() if extra_implausible(k, v) is None}
                dropped.extend(
                    OutOfBounds(f"extras[{k!r}]", v, str(extra_implausible(k, v)))
                    for k, v in value.items()
                    if k not in kept
                )
            else:
                kept = {k: v for k, v in value.items() if _refusal(f.name, v, bound) is None}
                dropped.extend(
                    OutOfBounds(f"{f.name}[{k!r}]", v, str(_refusal(f.name, v, bound)))
                    for k, v in value.items()
                    if k not in kept
                )
            if len(kept) != len(value):
                changes[f.name] = kept
        elif (why := _refusal(f.name, value, bound)) is not None:
            dropped.append(OutOfBounds(f.name, value, why))
            changes[f.name] = None
    if not changes:
        return reading, dropped
    return dataclasses.replace(reading, **changes), dropped


def _refusal(name: str, value: object, bound: tuple[float, float] | None) -> str | None:
    """Why reading ``name = value`` is left out: outside what any device can have (the model's
    bound), or than a running device reports (:func:`implausible`); ``None``: it is kept."""
    if not _within(value, bound):
        return _why(bound)
    return implausible(name, value)


def _within(value: object, bound: tuple[float, float] | None) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return bound is None or bound[0] <= value <= bound[1]


def _why(bound: tuple[float, float] | None) -> str:
    return "not a finite number" if bound is None else f"outside {bound[0]:g}..{bound[1]:g}"


#: Readings whose being dropped (``UnitReading.dropped``) still lists a memory region.
_MEMORY_FIELDS = frozenset({"memory_total_bytes", "memory_used_bytes"})


#: Device fields a CLI view either prints or never prints (architecture: none of these tools).
_VIEW_FIELDS = ("uuid", "serial_number")


#: Telemetry fields owned by capabilities; an empty one that was not dropped is unsupported.
_TELEMETRY_VIEW = ("power_watts", "temperature_celsius", "utilization_ratio", "clocks_hertz", "memory_used_bytes")


def _silent_telemetry(reading: UnitReading, tdata: Mapping[str, Any]) -> frozenset[str]:
    """Telemetry fields empty because the tool never prints them for this unit.

    ``None`` in a column that exists but was unreadable, or a hung card's dropped sentinels,
    is "not this time" (``reading.dropped``: the assembly's ``missed``) and stays out;
    ``energy_joules`` is never read.
    """
    if "*" in reading.dropped:
        return NEVER_READ
    return NEVER_READ | unsupported_of(tdata, _TELEMETRY_VIEW, missed=reading.dropped)


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
            device, sample = build_unit(reading, vendor=vendor, problems=problems, **options)
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
    api_version: str | None = None,
) -> SourceInfo:
    """The :class:`SourceInfo` of a CLI snapshot; ``detail`` says what was skipped and why."""
    parts = [*notes, *(f"left out: {p}" for p in problems)]
    detail = "; ".join(parts)[:2000] if parts else None
    return SourceInfo(
        backend=backend, plugin_version=version, api=api, api_version=api_version, detail=detail,
        tool_invocations=calls,
    )


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
    env: str | None,
    *,
    key: str = "index",
    torch: str | None = None,
    collective: str | None = None,
    ray: str | None = None,
    nodes: Sequence[str] = (),
) -> Callable[[UnitReading], Binding]:
    """A binding rule: ``env=<key of the unit>`` plus the torch device type, collective backend
    and the Ray resource name the unit is scheduled under (see ``docs/frameworks.md``).

    ``key`` is what the vendor's visibility variable takes: a :class:`UnitReading` field
    (``"index"``, the default; ``"uuid"``, ``"bus_id"``, ``"serial_number"``, ``"board_id"``)
    or a namespaced key of the reading's ``extras`` (``"habana.ai/moduleId"``, stored there by
    the parser).  Ascend's
    ``ASCEND_RT_VISIBLE_DEVICES`` takes the chip logic id, which its parser makes the index;
    a runtime that takes a module id names the extras key it is stored under.  A unit whose
    key is unknown gets no ``visible_env`` (never a guess).

    ``nodes`` are the device files a container needs for a unit, ``{index}`` standing for its
    index (``/dev/cambricon_dev{index}``); a node with ``{index}`` is left out when the index
    is unknown.  A reading's own ``device_nodes``, when the tool printed them, win.
    """
    field_key = key in _READING_FIELDS
    if not field_key and "/" not in key:
        # Extras keys are namespaced ("huawei.com/chipLogicId"), so a misspelt field is caught here.
        raise ConfigError(
            f"visible_binding key {key!r} is neither a UnitReading field ({', '.join(sorted(_READING_FIELDS))}) "
            "nor a namespaced extras key ('vendor.com/name')"
        )

    def bind(reading: UnitReading) -> Binding:
        value = getattr(reading, key) if field_key else reading.extras.get(key)
        visible = None if env is None or value is None or isinstance(value, bool) else str(value)
        files = tuple(reading.device_nodes) or tuple(
            n.format(index=reading.index) for n in nodes if reading.index is not None or "{index}" not in n
        )
        return Binding(
            visible_env=env if visible is not None else None,
            visible_id=visible,
            torch_device_type=torch,
            collective_backend=collective,
            ray_resource=ray,
            device_nodes=files,
        )

    return bind


#: The UnitReading fields a visibility variable can take (the rest are readings, not keys).
_READING_FIELDS = frozenset({"index", "uuid", "bus_id", "serial_number", "board_id", "fallback_id"})


#: Telemetry no CLI backend here can read: tools print no energy counter.
NEVER_READ: frozenset[str] = frozenset({"energy_joules"})

#: Telemetry a vendor tool's default device table prints nowhere (``cnmon``, ``npu-smi info``):
#: clocks, per-sensor temperatures, throttle reasons, PCIe throughput and replays, corrected
#: ECC, retired pages, per-link counters, memory utilisation and energy.  A backend reading
#: only such a table passes it (plus what its own table lacks) as ``telemetry_unsupported``.
TABLE_NEVER_PRINTS: frozenset[str] = NEVER_READ | {
    "clocks_hertz",
    "temperatures_celsius",
    "throttle_reasons",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "pcie_replay_total",
    "ecc_corrected_total",
    "retired_pages_total",
    "links",
    "memory_utilization_ratio",
}
