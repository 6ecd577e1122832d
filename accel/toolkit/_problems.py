"""Typed problems of a CLI snapshot, and the devices a failed record still identifies.

A record of a tool's output that cannot be parsed must not make its device disappear
(DESIGN section 8): :func:`identify_record` reads what identifies the device in the record's
raw text (a PCI bus id, the index in its first cell), :func:`~accel.toolkit.read_records`
attaches that identity to the record's :class:`~accel.errors.ParseError`, and
:func:`unread_units` turns every identified failure that matches no parsed device into a
listed device with health ``unknown`` and a ``DeviceNotRead`` condition naming the failure.
:func:`problem_of` makes every collected error a typed :class:`~accel.model.Problem`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from accel.errors import AccelError, OutOfBoundsError, ParseError, ToolError
from accel.model import (
    Action,
    Binding,
    Device,
    DeviceKind,
    HealthCondition,
    Problem,
    ProblemKind,
    Severity,
    Subsystem,
    normalize_bus_id,
    validate,
)

from ._tables import BoxRecord

__all__ = ["census", "identify_record", "identify_text", "problem_of", "problems_of", "unread_units"]

# A PCI address in any of the forms tools print: 0000:3b:00.0, 00000000:3B:00.0, 3b:00.0,
# efsmi's 00:01:00.0.  Bounded repetitions only: this runs on untrusted text.
_BUS = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{2,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7](?![0-9A-Fa-f])")
_INDEX = re.compile(r"[0-9]{1,6}")


def identify_text(text: str) -> tuple[int | None, str | None]:
    """``(index, bus_id)`` of a device from one record's raw text (either may be ``None``).

    The index is the leading number of the text's first non-empty ``|`` cell (where every
    sampled box table prints the device number); the bus id is the only PCI address in the
    text (several addresses identify nothing).
    """
    index = None
    for cell in text.splitlines()[0].split("|") if text else ():
        tokens = cell.split()
        if not tokens:
            continue
        first = tokens[0]
        if _INDEX.fullmatch(first):
            index = int(first)
        break
    buses = set()
    for match in _BUS.finditer(text):
        try:
            buses.add(normalize_bus_id(match.group(0)))
        except (ValueError, AccelError):
            continue
    return index, (buses.pop() if len(buses) == 1 else None)


def identify_record(rec: BoxRecord) -> tuple[int | None, str | None]:
    """:func:`identify_text` over every row of a box record."""
    return identify_text("\n".join(row.line.text for row in rec.rows))


def census(
    text: str,
    listed: Iterable[str | None],
    *,
    tool: str,
    command: str,
    errors: Iterable[AccelError] = (),
) -> list[ParseError]:
    """A located error for every PCI address a table row (a line with ``|``) of the device
    list ``text`` prints that no device of ``listed`` (their bus ids) and no failed record of
    ``errors`` accounts for.

    The safety net under every table reader: whatever a mangled output does to the framing
    (a lost rule that merges two records, a lost header row that ends the table early), a
    chip whose bus id is still printed is never silently missing.  Each error carries the bus
    id, so :func:`unread_units` lists the chip with health ``unknown``.  Only for the output
    devices are listed in (a tool's device table prints one address per device, and no other).
    """
    known: set[str] = set()
    for bus in [*listed, *(getattr(exc, "bus_id", None) for exc in errors)]:
        if isinstance(bus, str):
            try:
                known.add(normalize_bus_id(bus))
            except (ValueError, AccelError):
                known.add(bus)
    out: list[ParseError] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if "|" not in line:
            # Only table rows: a message under the table ("GPU 0000:14:00.0 was successfully
            # reset") names a device without listing it.
            continue
        for match in _BUS.finditer(line):
            try:
                bus = normalize_bus_id(match.group(0))
            except (ValueError, AccelError):
                continue
            if bus in known:
                continue
            known.add(bus)
            exc = ParseError(
                f"{tool} prints a device at {bus} that no record of its table was read for",
                tool=tool,
                command=command,
                line=line,
                lineno=lineno,
            )
            exc.bus_id = bus
            out.append(exc)
    return out


def _unread_condition(exc: AccelError, tool: str) -> HealthCondition:
    return HealthCondition(
        subsystem=Subsystem.MONITORING,
        reason="DeviceNotRead",
        severity=Severity.WARNING,
        action=Action.INVESTIGATE,
        message=f"{tool} printed this device but its record could not be parsed: {exc.message}"[:500],
    )


def unread_units(
    problems: Sequence[AccelError],
    devices: Sequence[Device],
    *,
    vendor: str,
    kind: DeviceKind,
    tool: str,
    binding: Callable[[int | None], Binding] | None = None,
) -> list[Device]:
    """A device for every identified failed record that matches none of ``devices``.

    The device has the identity the record showed (id ``<vendor>:pci-<bdf>`` when a bus id was
    read, else ``<vendor>:index-<n>``), model ``unknown``, no readings, health ``unknown``
    (nothing was read) with a ``DeviceNotRead`` condition; the error's ``device_id`` is set
    so the snapshot's problem names it.
    """
    buses = {d.pci.bus_id for d in devices if d.pci is not None}
    indices = {d.index for d in devices if d.index is not None}
    ids = {d.id for d in devices}
    out: list[Device] = []
    for exc in problems:
        if not isinstance(exc, ParseError) or getattr(exc, "device_id", None):
            continue
        index, bus = exc.device_index, exc.bus_id
        if bus is not None and bus in buses:
            continue
        if bus is None and (index is None or index in indices):
            continue
        dev_id = f"{vendor}:pci-{bus}" if bus is not None else f"{vendor}:index-{index}"
        if dev_id in ids:
            continue
        data = {
            "id": dev_id,
            "vendor": vendor,
            "kind": kind,
            "model": "unknown",
            "index": index,
            "pci": {"bus_id": bus} if bus is not None else None,
            "binding": binding(index) if binding is not None else Binding(),
            "health": {"monitored": False, "conditions": (_unread_condition(exc, tool),)},
        }
        try:
            device = validate(Device, data, what=f"{vendor} unread device {dev_id}")
        except AccelError:
            continue
        exc.device_id = dev_id
        ids.add(dev_id)
        if bus is not None:
            buses.add(bus)
        if index is not None:
            indices.add(index)
        out.append(device)
    return out


def _kind_of(exc: AccelError) -> ProblemKind:
    if isinstance(exc, OutOfBoundsError):
        return ProblemKind.FIELD
    if isinstance(exc, ToolError):
        return ProblemKind.COMMAND
    if isinstance(exc, ParseError):
        if exc.lineno is not None or exc.line is not None:
            return ProblemKind.RECORD
        # A whole output that did not parse names its command; one that names none is about
        # a device built from readings (a duplicate id, no stable id).
        return ProblemKind.COMMAND if exc.command is not None and exc.device_id is None else ProblemKind.DEVICE
    return ProblemKind.DEVICE


def problem_of(backend: str, exc: AccelError, *, kind: ProblemKind | None = None) -> Problem:
    """The typed :class:`~accel.model.Problem` for one collected error."""
    command = getattr(exc, "command", None)
    if command is None and isinstance(exc, ToolError) and exc.argv:
        command = " ".join(exc.argv)
    lineno = getattr(exc, "lineno", None)
    return Problem(
        kind=kind or _kind_of(exc),
        backend=backend,
        message=(exc.message or type(exc).__name__)[:1000],
        code=exc.code,
        command=command,
        line=lineno if isinstance(lineno, int) and lineno >= 1 else None,
        device_id=getattr(exc, "device_id", None),
    )


def problems_of(
    backend: str, errors: Iterable[AccelError], *, kinds: Mapping[int, ProblemKind] | None = None
) -> tuple[Problem, ...]:
    """:func:`problem_of` over many errors, the same error once; ``kinds`` states the kind of
    some (by ``id()`` of the error) where the inferred one is not right."""
    seen: set[int] = set()
    out: list[Problem] = []
    for exc in errors:
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        out.append(problem_of(backend, exc, kind=(kinds or {}).get(id(exc))))
    return tuple(out)
