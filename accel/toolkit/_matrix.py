"""Device matrices (``npu-smi info -t topo``, ``cnmon topo -m``, ``* topo -m``) and helpers
that read every record of a box table while collecting per-record errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from accel.errors import ParseError

from ._problems import identify_record
from ._tables import BoxRecord, BoxTable, find_aligned_table
from ._text import ParseContext, SourceLine, split_lines
from ._values import clean

__all__ = ["Matrix", "first_line", "read_matrix", "read_records", "select_table", "title_match"]

T = TypeVar("T")
_CPULIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")


@dataclass(frozen=True)
class Matrix:
    """A device matrix: ``labels`` in header order, ``codes[(row, col)]`` upper-cased cell
    codes, ``affinity[row]`` the CPU Affinity cell (``None`` when absent or a placeholder)."""

    labels: tuple[str, ...]
    codes: dict[tuple[str, str], str] = field(default_factory=dict)
    affinity: dict[str, str | None] = field(default_factory=dict)

    @staticmethod
    def label_index(label: str) -> int | None:
        """The number at the end of a label (``NPU3`` -> 3, ``Phy-ID12`` -> 12)."""
        m = re.search(r"([0-9]+)$", label)
        return int(m.group(1)) if m else None


def first_line(text: str | Sequence[SourceLine]) -> SourceLine | None:
    """The first non-blank line (to name in an error about the whole output)."""
    lines = split_lines(text) if isinstance(text, str) else text
    return next((ln for ln in lines if not ln.blank), None)


def read_matrix(
    text: str,
    ctx: ParseContext,
    *,
    header: str,
    valid_code: re.Pattern[str],
    affinity_column: str = "CPU Affinity",
    stop: str = r"^\s*Legend",
) -> Matrix:
    """Read a square matrix whose header matches ``header`` (a regex) and whose cells match
    ``valid_code``; a ``Legend`` block after it is ignored.  Raises a located
    :class:`ParseError` for a missing header, a row label that is not a column, a missing or
    unknown cell, or an affinity that is not a CPU list."""
    table = find_aligned_table(text, header, row_label=True, stop=stop)
    if table is None:
        raise ctx.error(f"no matrix header matching {header!r}", first_line(text))
    labels = tuple(c for c in table.column_names if c.lower() != affinity_column.lower())
    matrix = Matrix(labels)
    for line, row in table.rows:
        label = row.get("")
        if label not in labels:
            raise ctx.error(f"row label {label!r} is not a column of the header", line)
        for col in labels:
            code = (row.get(col) or "").strip().upper()
            if not valid_code.fullmatch(code):
                raise ctx.error(f"unknown or missing code {code!r} under {col}", line)
            matrix.codes[(label, col)] = code
        aff = clean(row.get(affinity_column))
        if aff is not None and not _CPULIST.match(aff):
            raise ctx.error(f"{affinity_column} {aff!r} is not a CPU list", line)
        matrix.affinity[label] = aff
    if not matrix.affinity:
        raise ctx.error("matrix header without rows", table.header_line)
    return matrix


def select_table(
    tables: Iterable[BoxTable], columns: Iterable[str], ctx: ParseContext, text: str, what: str
) -> BoxTable:
    """The first table whose columns include all of ``columns``, else a located error."""
    wanted = set(columns)
    for t in tables:
        if wanted <= set(t.column_names):
            return t
    raise ctx.error(f"no {what} (header with {', '.join(sorted(wanted))}) in the output", first_line(text))


def title_match(table: BoxTable, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first banner row of ``table`` matching ``pattern`` (tool and driver versions)."""
    return next((m for m in (pattern.search(r.text) for r in table.title) if m), None)


def read_records(records: Iterable[BoxRecord], read: Callable[[BoxRecord], T]) -> tuple[list[T], list[ParseError]]:
    """``read`` every record; one record's :class:`ParseError` is collected, not raised, so
    one bad device never hides the others.  The error carries what the record's raw text
    identifies (``device_index``, ``bus_id``: :func:`identify_record`)."""
    good: list[T] = []
    bad: list[ParseError] = []
    for rec in records:
        try:
            good.append(read(rec))
        except ParseError as exc:
            # What still identifies the device, so it stays listed (see ``unread_units``).
            index, bus = identify_record(rec)
            if exc.device_index is None:
                exc.device_index = index
            if exc.bus_id is None:
                exc.bus_id = bus
            bad.append(exc)
    return good, bad
