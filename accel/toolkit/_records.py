"""Reading records of tables the box reader cannot frame, leniently, with located errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from accel.errors import AccelError, ParseError
from accel.model import (
    Action,
    HealthCondition,
    Severity,
    Subsystem,
)

from ._matrix import read_records
from ._tables import BoxRecord, BoxRow, assign_fields, header_fields, mangled_rule
from ._text import ParseContext, SourceLine, split_lines
from ._unit import UnitReading
from ._values import clean, parse_int

__all__ = [
    "Lenient",
    "RecordReader",
    "condition",
    "first_match",
    "header_rows",
    "is_rule",
    "read_header_records",
    "split_cells",
    "table_under_header",
    "unreadable",
]


# Possessive quantifiers: a long line of spaces that is no rule fails in linear time.
_RULE_LINE = re.compile(r"^\s*+[-=+| ]*+$")


def is_rule(text: str) -> bool:
    """A horizontal rule of a table (``+----+``, ``|====|``, a bare ``-----``), also with a few
    stray characters in it (:func:`~accel.toolkit.mangled_rule`)."""
    return (bool(_RULE_LINE.match(text)) and ("---" in text or "===" in text)) or mangled_rule(text, bare=True)


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
    cell counts agree, else against any header row of the same shape.  A ``|`` row of no
    header's shape is kept without fields (its record then fails to read, loudly).  The first
    line that is neither a rule nor a ``|`` row (a blank line, a ``Processes:`` banner) ends
    the table.
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
        if line.blank or "|" not in line.text:
            break
        if len(current) == len(parsed):
            # A record has as many rows as the header (one-row tables have no rules between).
            records.append(BoxRecord(tuple(current)))
            current = []
        if len(cells) not in shapes:
            # A mangled row inside the table (a cell border lost or doubled): it stays in its
            # record without fields, so that record fails to read and is reported, instead of
            # silently ending the table and dropping every device below it.
            current.append(BoxRow(line, cells, {}))
            i += 1
            continue
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
