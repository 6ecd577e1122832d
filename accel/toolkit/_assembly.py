"""A device assembled from typed readings: the one assembly NVIDIA, AMD and the toolkit share.

A backend turns what it read into a :class:`DeviceReading`: the model's own classes built with
``model_construct`` (not validated yet), so the field names are the :class:`~accel.model.Device`
field names (``pci.link_gen_max``, ``power.enforced_watts``), mypy checks every field a backend
fills and a misspelt one is a type error, not a run-time surprise.  :func:`assemble_device`
validates the reading once and makes the :class:`Device`.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from accel.errors import AccelError, OutOfBoundsError
from accel.model import Device, OutOfBounds, validate_reading

from ._values import PLAUSIBLE

__all__ = [
    "DeviceReading",
    "assemble",
    "assemble_device",
    "device_data",
    "is_empty",
    "out_of_bounds_errors",
    "report_dropped",
    "unsupported_of",
]


@dataclass(frozen=True, slots=True)
class DeviceReading:
    """One device as a backend read it, not validated yet.

    ``device`` is built with the model's own classes and ``model_construct``
    (``Device.model_construct(id=..., pci=PciInfo.model_construct(bus_id=...), ...)``): the
    field names and types are the model's, so mypy (with the pydantic plugin and the models'
    ``extra="forbid"``) checks every field a backend fills and refuses a misspelt one, and a
    field added to the model is a field of the reading with no second list to keep.
    Nothing is validated until :func:`assemble`, which does it once.

    ``never`` names the field paths (``"serial_number"``, ``"power.min_watts"``,
    ``"memory.total_bytes"``: the names ``Device.unsupported`` takes) this backend can never
    read on this device; ``missed`` those it could not read this time only.  See the module
    docstring for what each becomes.
    """

    device: Device
    never: frozenset[str] = frozenset()
    missed: frozenset[str] = frozenset()


def _as_data(value: Any) -> Any:
    """A constructed (unvalidated) model as plain data the model validates, all levels."""
    if isinstance(value, BaseModel):
        return {name: _as_data(v) for name, v in value.__dict__.items()}
    if isinstance(value, tuple):
        return tuple(_as_data(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _as_data(v) for k, v in value.items()}
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
    data: dict[str, Any] = _as_data(reading.device)
    data["unsupported"] = unsupported_of(data, reading.never, reading.missed)
    return data


def assemble(reading: DeviceReading) -> tuple[Device, tuple[OutOfBounds, ...]]:
    """The :class:`Device` of ``reading``, validated once, and the values left out as outside
    their physical bounds (``None`` now: not read this time).  Raises
    :class:`~accel.errors.ValidationError` for a value the model refuses otherwise."""
    return validate_reading(Device, device_data(reading), what=f"{reading.device.vendor} device {reading.device.id}")


def assemble_device(reading: DeviceReading, *, tool: str, problems: list[AccelError] | None = None) -> Device:
    """:func:`assemble` with the values left out reported: appended to ``problems`` as
    :class:`~accel.errors.OutOfBoundsError` (a ``field`` problem of the snapshot), or, without
    ``problems``, the first raised."""
    device, dropped = assemble(reading)
    report_dropped(tool, reading.device.id, dropped, problems)
    return device
