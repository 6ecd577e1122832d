"""``--query-gpu=a,b,c --format=csv[,noheader][,nounits]`` output, as nvidia-smi prints it.

nvidia-smi, ixsmi (Iluvatar) and hl-smi (Intel Gaudi, ``-Q``) share the format: one comma
separated row per device, an optional header whose names carry the unit in brackets
(``memory.total [MiB]``), values with their unit (``16384 MiB``) unless ``nounits`` is given,
and bracketed placeholders (``[N/A]``, ``[Not Supported]``) for readings the device has not.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._text import ParseContext, SourceLine, split_lines
from ._values import is_placeholder

__all__ = ["QueryColumn", "QueryRow", "QueryTable", "parse_query_csv"]

#: Bracketed placeholders that say the device has no such reading at all.
_UNSUPPORTED = frozenset({"[n/a]", "[not supported]"})
_HEADER = re.compile(r"^(?P<name>[^\[\]]+?)\s*(?:\[(?P<unit>[^\[\]]*)\])?$")
_BARE_NUMBER = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$")


@dataclass(frozen=True)
class QueryColumn:
    """One queried field: its name (``memory.total``) and the unit its header names (``MiB``)."""

    name: str
    unit: str | None = None


@dataclass(frozen=True)
class QueryRow:
    """One device's row.  ``cells`` maps a field to its text, ``None`` for a placeholder;
    ``unsupported`` names the fields printed as ``[N/A]`` / ``[Not Supported]`` (the device has
    no such reading, so list them in ``unsupported``), ``unreadable`` other bracketed notes
    (``[Unknown Error]``, ``[GPU is lost]``: unknown this time)."""

    line: SourceLine
    cells: Mapping[str, str | None]
    unsupported: frozenset[str] = frozenset()
    unreadable: frozenset[str] = frozenset()

    def get(self, name: str) -> str | None:
        """The cell of field ``name`` (``None`` for a placeholder or a field not queried)."""
        return self.cells.get(name)


@dataclass(frozen=True)
class QueryTable:
    """The parsed output: the columns in order and one :class:`QueryRow` per non-blank line."""

    columns: tuple[QueryColumn, ...]
    rows: tuple[QueryRow, ...] = field(default=())

    def unit_of(self, name: str) -> str | None:
        """The unit the header gave field ``name``, if any."""
        return next((c.unit for c in self.columns if c.name == name), None)


def _cells(line: SourceLine, ctx: ParseContext) -> list[str]:
    try:
        return [c.strip() for c in next(csv.reader([line.text], skipinitialspace=True), [])]
    except csv.Error as exc:  # a field over csv.field_size_limit(), a stray NUL...
        raise ctx.error(f"unreadable CSV row: {exc}", line) from None


def _header(line: SourceLine, ctx: ParseContext) -> tuple[QueryColumn, ...]:
    columns = []
    for cell in _cells(line, ctx):
        m = _HEADER.match(cell)
        if m is None or not m.group("name").strip():
            raise ctx.error(f"unreadable CSV header field {cell!r}", line)
        unit = (m.group("unit") or "").strip() or None
        columns.append(QueryColumn(m.group("name").strip(), unit))
    return tuple(columns)


def parse_query_csv(
    text: str,
    ctx: ParseContext,
    *,
    fields: Sequence[str] | None = None,
    header: bool = True,
    units: bool = True,
) -> QueryTable:
    """Read ``--format=csv`` output (``header=False`` for ``noheader``, ``units=False`` for
    ``nounits``).

    With a header, its names must be ``fields`` (when given) in order; without one, ``fields``
    is required.  Under ``nounits`` a bare number gets the header's unit appended
    (``16384`` under ``memory.total [MiB]`` reads ``16384 MiB``), so the value helpers
    (:func:`parse_bytes`...) see the unit either way.  A row with the wrong number of columns,
    an unreadable row, a field named twice and an empty output raise a located
    :class:`~accel.errors.ParseError`.
    """
    lines = [ln for ln in split_lines(text) if not ln.blank]
    ctx.require(lines, "CSV rows")
    where: SourceLine | None = None  # the line that named the fields, if the output did
    if header:
        where = lines[0]
        columns = _header(where, ctx)
        if fields is not None and [c.name for c in columns] != list(fields):
            raise ctx.error(f"CSV header names {[c.name for c in columns]}, expected {list(fields)}", lines[0])
        lines = lines[1:]
    elif fields is None:
        raise ctx.error("CSV without a header needs the queried fields")
    else:
        columns = tuple(QueryColumn(f) for f in fields)
    names = [c.name for c in columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        # A second column of the same name would overwrite the first's value: refuse, never lose it.
        raise ctx.error(f"CSV field named twice: {', '.join(twice)}", where)
    rows = []
    for line in lines:
        cells = _cells(line, ctx)
        if len(cells) != len(columns):
            raise ctx.error(f"expected {len(columns)} columns ({', '.join(names)}), got {len(cells)}", line)
        values: dict[str, str | None] = {}
        unsupported, unreadable = set(), set()
        for col, cell in zip(columns, cells, strict=True):
            low = cell.lower()
            if low in _UNSUPPORTED:
                unsupported.add(col.name)
                values[col.name] = None
            elif low.startswith("[") and low.endswith("]"):
                unreadable.add(col.name)
                values[col.name] = None
            elif is_placeholder(cell):
                values[col.name] = None
            elif not units and col.unit and _BARE_NUMBER.match(cell):
                # As the tool prints it without nounits ("81559 MiB", "45 %"): the helpers read both.
                values[col.name] = f"{cell} {col.unit}"
            else:
                values[col.name] = cell
        rows.append(QueryRow(line, values, frozenset(unsupported), frozenset(unreadable)))
    return QueryTable(columns, tuple(rows))
