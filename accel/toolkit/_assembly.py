"""A device assembled from typed readings: the one assembly NVIDIA, AMD and the toolkit share.

A backend turns what it read into a :class:`DeviceReading`: frozen dataclasses whose field names
are the :class:`~accel.model.Device` field names (``pci.link_gen_max``, ``power.enforced_watts``),
so mypy checks every field a backend fills and a misspelt one is a type error, not a run-time
surprise.  The parts without physical bounds (capabilities, partition mode, sharing, binding,
health) are the model's own objects.  :func:`assemble_device` makes the :class:`Device`.

It is also the one place that tells the two kinds of empty apart:

- **never readable**: the backend names the field path in ``DeviceReading.never`` (a NOT_SUPPORTED
  answer, a tool that never prints it).  If the field is still empty after assembly it goes into
  ``Device.unsupported``; a field some other view did read stays out.
- **not read this time**: the value is ``None`` and a problem says why.  A value outside the
  model's physical bounds is left out (``None``) and reported as an
  :class:`~accel.errors.OutOfBoundsError` in ``problems``; without ``problems`` it is raised.
  A field named in ``missed`` is "not this time" even if it is also in ``never``.

:func:`unsupported_of` is that rule on its own, for telemetry samples and for readings a backend
updates after assembly (NVIDIA's per-scrape values over its once-read static device).

Adding a field from a vendor to the exporter is a walk of four files: see
``docs/guides/adding-a-field.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accel.errors import AccelError, OutOfBoundsError
from accel.model import (
    Binding,
    Capabilities,
    Device,
    DeviceKind,
    FormFactor,
    Health,
    MemoryKind,
    OutOfBounds,
    PartitionMode,
    SharingInfo,
    validate_reading,
)
from accel.plugins._cli._values import PLAUSIBLE

__all__ = [
    "ComputeReading",
    "DeviceReading",
    "MemoryReading",
    "PciReading",
    "PowerReading",
    "ThermalReading",
    "VersionsReading",
    "assemble",
    "assemble_device",
    "device_data",
    "is_empty",
    "out_of_bounds_errors",
    "report_dropped",
    "unsupported_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PciReading:
    """:class:`~accel.model.PciInfo` as read (same field names)."""

    bus_id: str
    vendor_id: str | None = None
    device_id: str | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    link_gen_max: int | None = None
    link_width_max: int | None = None
    link_gen_current: int | None = None
    link_width_current: int | None = None
    is_virtual_function: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryReading:
    """One :class:`~accel.model.MemoryRegion` as read (same field names)."""

    kind: MemoryKind = MemoryKind.UNKNOWN
    total_bytes: int | None = None
    usable_bytes: int | None = None
    used_bytes: int | None = None
    reserved_bytes: int | None = None
    generation: str | None = None
    bus_width_bits: int | None = None
    max_bandwidth_bytes_per_s: float | None = None
    ecc_supported: bool | None = None
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeReading:
    """:class:`~accel.model.ComputeInfo` as read (same field names)."""

    units: int | None = None
    unit_kind: str | None = None
    max_clock_hertz: float | None = None
    memory_max_clock_hertz: float | None = None
    engines: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerReading:
    """:class:`~accel.model.PowerLimits` as read (same field names)."""

    default_watts: float | None = None
    min_watts: float | None = None
    max_watts: float | None = None
    enforced_watts: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ThermalReading:
    """:class:`~accel.model.ThermalLimits` as read (same field names)."""

    slowdown_celsius: float | None = None
    shutdown_celsius: float | None = None
    max_operating_celsius: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionsReading:
    """:class:`~accel.model.VersionInfo` as read (same field names)."""

    driver: str | None = None
    runtime_name: str | None = None
    runtime: str | None = None
    firmware: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceReading:
    """One device as a backend read it: the :class:`~accel.model.Device` field names, typed.

    ``never`` names the field paths (``"serial_number"``, ``"power.min_watts"``,
    ``"memory.total_bytes"``: the names ``Device.unsupported`` takes) this backend can never
    read on this device; ``missed`` those it could not read this time only.  See the module
    docstring for what each becomes.
    """

    id: str
    vendor: str
    kind: DeviceKind
    model: str
    index: int | None = None
    uuid: str | None = None
    uuid_synthesized: bool = False
    serial_number: str | None = None
    brand: str | None = None
    family: str | None = None
    architecture: str | None = None
    compute_capability: str | None = None
    isa: str | None = None
    form_factor: FormFactor | None = None
    pci: PciReading | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    board_id: str | None = None
    versions: VersionsReading = VersionsReading()
    memory: tuple[MemoryReading, ...] = ()
    compute: ComputeReading = ComputeReading()
    power: PowerReading = PowerReading()
    thermal: ThermalReading = ThermalReading()
    capabilities: Capabilities = field(default_factory=Capabilities)
    partition_mode: PartitionMode = field(default_factory=PartitionMode)
    sharing: SharingInfo = field(default_factory=SharingInfo)
    binding: Binding = field(default_factory=Binding)
    health: Health = field(default_factory=Health)
    extras: Mapping[str, str | int | float | bool] = field(default_factory=dict)
    never: frozenset[str] = frozenset()
    missed: frozenset[str] = frozenset()


#: The bookkeeping fields of a DeviceReading (not Device fields).
_BOOKKEEPING = frozenset({"never", "missed"})


def _as_data(value: Any) -> Any:
    """A reading's value as the model validates it: sub-readings become dicts, one level each."""
    if isinstance(value, tuple):
        return tuple(_as_data(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return dict(value)
    return value


def is_empty(value: object) -> bool:
    """``None``, an empty string, mapping or tuple: nothing was read."""
    return value is None or value == "" or value == {} or value == ()


def _at(obj: object, path: str) -> object:
    """The value at ``path`` (``a`` or ``a.b``) of device data or a model object; ``memory.x``
    is the first memory region's."""
    for name in path.split("."):
        if isinstance(obj, (tuple, list)):
            obj = obj[0] if obj else None
        if obj is None:
            return None
        obj = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return obj


def unsupported_of(values: object, never: Iterable[str], missed: Iterable[str] = ()) -> frozenset[str]:
    """The one rule: the paths in ``never`` that are still empty in ``values``, less ``missed``.

    ``values`` is a mapping (device or telemetry data) or a model object; a path is a field name
    or ``part.field`` (``memory.x`` looks at the first memory region).  A field some view did
    read is never unsupported, and one that was only not read this time never is either.
    """
    skip = frozenset(missed)
    return frozenset(p for p in never if p not in skip and is_empty(_at(values, p)))


def out_of_bounds_errors(
    tool: str, dropped: Sequence[OutOfBounds], *, device_id: str | None = None, what: str | None = None
) -> list[OutOfBoundsError]:
    """One :class:`~accel.errors.OutOfBoundsError` per value left out as outside its bounds or
    implausible (``what`` names the device when no id is known yet)."""
    subject = device_id or what or "a device"
    rules = {entry[2] for entry in PLAUSIBLE.values()}
    return [
        OutOfBoundsError(
            f"{tool} gave {item.field} = {item.value!r} for {subject}, which "
            f"{'no running device reports' if item.reason in rules else 'no device can have'} "
            f"({item.reason}); left out as unknown",
            field=item.field,
            device_id=device_id,
        )
        for item in dropped
    ]


def report_dropped(
    tool: str, device_id: str, dropped: Sequence[OutOfBounds], problems: list[AccelError] | None
) -> None:
    """Append one problem per value left out to ``problems``; without ``problems``, raise the first."""
    for err in out_of_bounds_errors(tool, dropped, device_id=device_id):
        if problems is None:
            raise err
        problems.append(err)


def device_data(reading: DeviceReading) -> dict[str, Any]:
    """The reading as the dict :class:`Device` validates, ``unsupported`` settled by the rule
    (on the values as read: a value left out later as out of bounds is "not this time")."""
    data = {
        f.name: _as_data(getattr(reading, f.name)) for f in dataclasses.fields(reading) if f.name not in _BOOKKEEPING
    }
    data["unsupported"] = unsupported_of(data, reading.never, reading.missed)
    return data


def assemble(reading: DeviceReading) -> tuple[Device, tuple[OutOfBounds, ...]]:
    """The :class:`Device` of ``reading``, validated once, and the values left out as outside
    their physical bounds (``None`` now: not read this time).  Raises
    :class:`~accel.errors.ValidationError` for a value the model refuses otherwise."""
    return validate_reading(Device, device_data(reading), what=f"{reading.vendor} device {reading.id}")


def assemble_device(reading: DeviceReading, *, tool: str, problems: list[AccelError] | None = None) -> Device:
    """:func:`assemble` with the values left out reported: appended to ``problems`` as
    :class:`~accel.errors.OutOfBoundsError` (a ``field`` problem of the snapshot), or, without
    ``problems``, the first raised."""
    device, dropped = assemble(reading)
    report_dropped(tool, reading.id, dropped, problems)
    return device
