"""Tables in vendor text, found by landmarks and read by column position.

Two shapes cover the sampled tools:

* **Whitespace-aligned tables** (``npu-smi info -m``, ``npu-smi info -t topo``, ``cnmon topo
  -m``, ``mx-smi topo -m``): a header line whose column names are separated by two or more
  spaces, then rows.  :func:`find_aligned_table` locates the header with a regex (a landmark,
  never a line number) and reads rows until a blank line.
* **Box-drawing tables** (``npu-smi info``, ``cnmon``, ``nvidia-smi``-like tools): ``+---+``
  and ``|===|`` rules and ``|``-separated cells, each cell holding several aligned fields
  (``| NPU   Name  | Health | Power(W)  Temp(C) |``).  :func:`find_box_tables` returns every
  table in the text, skipping lines before, between and after them (container shims print
  log lines first).

Field assignment (:func:`header_fields`, :func:`assign_fields`): header names are split on
runs of two or more spaces (``Process memory(MB)`` stays one name).  Value chunks, split the
same way (a chunk starting or ending with ``/`` rejoins its neighbour), go to the header field
their columns overlap most, and chunks landing on the same field are joined with one space.
That keeps ``0    / 0`` together, tolerates right-aligned
values (``Bus-Id``, ``Ecc-Error``), a value shifted by a column, and a missing value (the field
is simply absent from the result, so a caller's ``get`` returns ``None``).

Column spans and the tie rule.  Field *i*'s span runs from its header name's start to the next
name's start (the last one to the end of the line); a chunk's overlap with a field is the
number of columns it shares with that span.  When a chunk overlaps two or more fields equally
(a value wider than its column, or shifted by one so it straddles a boundary: ``57`` printed
one column left of ``Temp(C)``), the tie is decided by alignment, from the header name's
start ``s``, end ``e`` and the chunk's start ``a`` and end ``b``: a left-aligned cell starts
where its name starts, a right-aligned cell ends where its name ends, a centred cell shares
its name's centre.  The chunk goes to the tied field whose nearest alignment anchor is
closest, ``min(|a - s|, |b - e|, |(a + b) - (s + e)| / 2)``; only when that distance is also
equal (a layout that is genuinely ambiguous) does the leftmost field win.  Then a repair by
alignment: when two chunks land on one field and a neighbouring field got
none, a chunk exactly left- or right-aligned with that neighbour's name (and not with its own
field's) moves there (mx-smi 2.2.9 prints ``0     MetaX C500`` under ``Board       Name``).  The
rule is property-tested (``tests/cli_toolkit/test_tables_property.py``): any table whose every value
overlaps its own column at least as much as any other, and, where tied, is strictly nearer
its own column's anchor, parses back to exactly its cells.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ._text import ParseContext, SourceLine, split_lines

__all__ = [
    "AlignedTable",
    "BoxRecord",
    "BoxRow",
    "BoxTable",
    "HeaderField",
    "assign_fields",
    "find_aligned_table",
    "find_box_tables",
    "header_fields",
    "mangled_rule",
]

_GAP = re.compile(r"\S+(?: \S+)*")  # maximal runs of text with single spaces inside


@dataclass(frozen=True)
class HeaderField:
    """One column name and where it starts and ends in its header text."""

    name: str
    start: int
    end: int


def _chunks(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0)) for m in _GAP.finditer(text)]


def _value_chunks(text: str) -> list[tuple[int, int, str]]:
    """Chunks of a value line, with padded ``used  / total`` pairs rejoined.

    Tools pad the used figure (``0    / 0``); a chunk starting or ending with ``/`` belongs to
    its neighbour.  A lone ``/`` (Cambricon's empty VF column) stays a value of its own.
    """
    out: list[tuple[int, int, str]] = []
    for start, end, chunk in _chunks(text):
        if (
            out
            and chunk != "/"
            and (chunk.startswith("/") or (out[-1][2].endswith("/") and out[-1][2] != "/"))
        ):
            ps, _, pc = out.pop()
            out.append((ps, end, f"{pc} {chunk}"))
        else:
            out.append((start, end, chunk))
    return out


def header_fields(text: str) -> tuple[HeaderField, ...]:
    """Column names of a header text, split on runs of 2+ spaces, with their positions."""
    return tuple(HeaderField(name, s, e) for s, e, name in _chunks(text))


def _alignment_distance(f: HeaderField, start: int, end: int) -> float:
    """How far the chunk ``[start, end)`` is from being left-, right- or centre-aligned with
    the header name ``f`` (0 when it is exactly one of them)."""
    return min(abs(start - f.start), abs(end - f.end), abs((start + end) - (f.start + f.end)) / 2)


def assign_fields(header: Sequence[HeaderField], text: str, *, label: str | None = None) -> dict[str, str]:
    """Map each chunk of ``text`` to the header field it overlaps most, ties decided by
    alignment (see the module doc).

    A field's span runs from its start to the next field's start (the last one to the end of
    the line).  A chunk that ends before the first field starts goes to ``label`` when given
    (the row label of a matrix, which has no header) and to the first field otherwise.
    """
    result: dict[str, list[str]] = {}
    if not header:
        return {}
    bounds = [
        (f.start, header[i + 1].start if i + 1 < len(header) else 1 << 30) for i, f in enumerate(header)
    ]
    placed: list[tuple[int, int, int, str]] = []  # (field, start, end, chunk)
    for start, end, chunk in _value_chunks(text):
        if label is not None and end <= header[0].start:
            result.setdefault(label, []).append(chunk)
            continue
        overlaps = [min(end, hi) - max(start, lo) for lo, hi in bounds]
        top = max(overlaps)
        tied = [i for i, o in enumerate(overlaps) if o == top]
        # min() keeps the first (leftmost) of equal distances: the documented last resort.
        best = min(tied, key=lambda i: _alignment_distance(header[i], start, end))
        placed.append((best, start, end, chunk))
    # Alignment repair: two chunks on one field while a neighbouring field got none, and one of
    # them is exactly aligned with that field's name (``Board       Name`` over
    # ``0     MetaX C500``: the right-aligned name ends where ``Name`` ends) -> it is that field's.
    for k, (best, start, end, chunk) in enumerate(placed):
        if sum(1 for p in placed if p[0] == best) < 2:
            continue
        for j in (best - 1, best + 1):
            if 0 <= j < len(header) and not any(p[0] == j for p in placed):
                f = header[j]
                if (end == f.end or start == f.start) and not (end == header[best].end or start == header[best].start):
                    placed[k] = (j, start, end, chunk)
                    break
    for best, _, _, chunk in placed:
        result.setdefault(header[best].name, []).append(chunk)
    return {k: " ".join(v) for k, v in result.items()}


# --------------------------------------------------------------------------------------------
# Whitespace-aligned tables
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlignedTable:
    """A whitespace-aligned table: its header line, columns and rows as field mappings.

    ``rows`` pairs each source line with its fields; a matrix row label (text left of the
    first column, like ``NPU0`` in ``npu-smi info -t topo``) is under the key ``""``.
    """

    header_line: SourceLine
    columns: tuple[HeaderField, ...]
    rows: tuple[tuple[SourceLine, Mapping[str, str]], ...]
    end_lineno: int

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def find_aligned_table(
    text: str | Sequence[SourceLine],
    header: str | re.Pattern[str],
    *,
    ctx: ParseContext | None = None,
    stop: str | re.Pattern[str] | None = None,
    row_label: bool = False,
    start: int = 0,
) -> AlignedTable | None:
    """Find the first header line matching ``header`` (a regex searched in each line) and read
    rows until a blank line, a line matching ``stop``, or the end.

    :param row_label: the rows carry a label left of the first column (a matrix).
    :param start: index into the lines to start searching from (to find a second table).
    :returns: the table, or ``None`` when no line matches ``header`` (the caller decides
        whether that is an error; use ``ctx`` only to get better messages from helpers).
    """
    del ctx  # reserved: errors are raised by callers that know what the table must contain
    lines = split_lines(text) if isinstance(text, str) else list(text)
    pattern = re.compile(header) if isinstance(header, str) else header
    stop_re = re.compile(stop) if isinstance(stop, str) else stop
    for i in range(start, len(lines)):
        if not pattern.search(lines[i].text):
            continue
        cols = header_fields(lines[i].text)
        rows: list[tuple[SourceLine, Mapping[str, str]]] = []
        end = lines[i].lineno
        for line in lines[i + 1 :]:
            if line.blank or (stop_re is not None and stop_re.search(line.text)):
                break
            rows.append((line, assign_fields(cols, line.text, label="" if row_label else None)))
            end = line.lineno
        return AlignedTable(lines[i], cols, tuple(rows), end)
    return None


# --------------------------------------------------------------------------------------------
# Box-drawing tables
# --------------------------------------------------------------------------------------------

# Possessive: a long line of dashes with one stray character fails in linear time (the dash
# that must be there is checked by ``_is_rule``'s "---" / "===").
_RULE = re.compile(r"^\s*+[+|][-=+|: ]*+$")


def _is_rule(text: str) -> bool:
    # At least three dashes or equals: a cell holding a lone "-" placeholder is not a rule.
    return (bool(_RULE.match(text)) and ("---" in text or "===" in text)) or mangled_rule(text, bare=False)


def mangled_rule(text: str, *, bare: bool) -> bool:
    """A long rule with a few stray characters (``0+-----+-----+``, a rule with text pasted
    into it): still a rule.  Read as the end of the table instead, it would silently drop
    every record below it; a rule carries no data, so reading it as one loses nothing.

    At least 20 characters with a run of five dashes or equals, at most one in ten characters
    that are not rule characters, and (unless ``bare``) a ``+`` or ``|`` joint.
    """
    s = text.strip()
    if len(s) < 20 or ("-----" not in s and "=====" not in s):
        return False
    if not bare and "+" not in s and "|" not in s:
        return False
    stray = sum(1 for c in s if c not in "-=+|: ")
    return 0 < stray * 10 <= len(s)


def _is_content(text: str) -> bool:
    s = text.strip()
    return s.startswith("|") and len(s) > 1 and not _is_rule(text)


def _cells(text: str) -> tuple[str, ...]:
    s = text.strip()
    if s.startswith("|"):
        s = s[1:]
    inner = s[:-1] if s.endswith("|") else s
    return tuple(inner.split("|"))


@dataclass(frozen=True)
class BoxRow:
    """One content line of a box table: its raw cells (unstripped, positions intact) and, for
    data rows, the fields read against the matching header row."""

    line: SourceLine
    cells: tuple[str, ...]
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """All cells joined by single spaces, whitespace collapsed (for banner rows)."""
        return " ".join(" ".join(c.split()) for c in self.cells if c.strip())


@dataclass(frozen=True)
class BoxRecord:
    """The rows between two rules: one device in ``npu-smi info`` / ``cnmon``, one NPU's
    processes in the process table."""

    rows: tuple[BoxRow, ...]

    @property
    def fields(self) -> dict[str, str]:
        """The fields of all rows merged (first occurrence of a name wins)."""
        merged: dict[str, str] = {}
        for row in self.rows:
            for k, v in row.fields.items():
                merged.setdefault(k, v)
        return merged

    def get(self, name: str) -> str | None:
        return self.fields.get(name)

    @property
    def first_line(self) -> SourceLine:
        return self.rows[0].line


@dataclass(frozen=True)
class BoxTable:
    """A box-drawing table.

    ``title`` holds the banner rows above the header (``npu-smi 23.0.rc3  Version: 23.0.rc3``,
    ``CNMON v5.10.13  Driver v5.10.13``, ``Processes:``).  ``header`` holds the header rows
    (cells with the column names); record row *k* is read against header row
    ``k % len(header)`` when their cell counts agree, so a two-line device block pairs with a
    two-line header.  A row with a different cell count (``| No running processes found |``)
    keeps empty ``fields``: read its ``text``.
    """

    title: tuple[BoxRow, ...]
    header: tuple[BoxRow, ...]
    records: tuple[BoxRecord, ...]
    start_lineno: int
    end_lineno: int

    @property
    def column_names(self) -> tuple[str, ...]:
        """Every column name of every header row, in order."""
        names: list[str] = []
        for row in self.header:
            for cell in row.cells:
                names.extend(f.name for f in header_fields(cell))
        return tuple(names)

    @property
    def rows(self) -> tuple[BoxRow, ...]:
        """All data rows of all records, in order."""
        return tuple(r for rec in self.records for r in rec.rows)


def _read_fields(header: Sequence[tuple[HeaderField, ...]], cells: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for hdr, cell in zip(header, cells, strict=False):
        for k, v in assign_fields(hdr, cell).items():
            out.setdefault(k, v)
    return out


def _build_table(block: list[tuple[SourceLine, bool]]) -> BoxTable | None:
    """``block`` is a run of (line, is_rule); split it into title, header and records."""
    content = [(i, ln) for i, (ln, rule) in enumerate(block) if not rule]
    if not content:
        return None
    eq_rules = [i for i, (ln, rule) in enumerate(block) if rule and "=" in ln.text]
    first_eq = eq_rules[0] if eq_rules else None
    if first_eq is not None:
        # The header is the content between the last plain rule before the first '=' rule and
        # that rule; content above it is the title.
        plain_before = [i for i, (ln, rule) in enumerate(block[:first_eq]) if rule]
        hstart = plain_before[-1] if plain_before else -1
        header_idx = [i for i, _ in content if hstart < i < first_eq]
        title_idx = [i for i, _ in content if i < hstart]
        body_from = first_eq
    else:
        rules = [i for i, (_, rule) in enumerate(block) if rule]
        # No '=' rule: the first content block is the header.
        first_c = content[0][0]
        after = [r for r in rules if r > first_c]
        hend = after[0] if after else len(block)
        header_idx = [i for i, _ in content if i < hend]
        title_idx = []
        body_from = hend
    header_rows = [BoxRow(block[i][0], _cells(block[i][0].text)) for i in header_idx]
    title_rows = [BoxRow(block[i][0], _cells(block[i][0].text)) for i in title_idx]
    # Leading header rows that are a single label ("Processes:") are banners, not columns.
    while len(header_rows) > 1 and sum(len(header_fields(c)) for c in header_rows[0].cells) <= 1:
        title_rows.append(header_rows.pop(0))
    parsed_header = [tuple(header_fields(c) for c in row.cells) for row in header_rows]
    records: list[BoxRecord] = []
    current: list[BoxRow] = []
    for ln, rule in block[body_from:]:
        if rule:
            if current:
                records.append(BoxRecord(tuple(current)))
                current = []
            continue
        cells = _cells(ln.text)
        fields: dict[str, str] = {}
        if parsed_header:
            hdr = parsed_header[len(current) % len(parsed_header)]
            if len(hdr) != len(cells):  # try any header row with the same shape
                hdr = next((h for h in parsed_header if len(h) == len(cells)), hdr)
            if len(hdr) == len(cells):
                fields = _read_fields(hdr, cells)
        current.append(BoxRow(ln, cells, fields))
    if current:
        records.append(BoxRecord(tuple(current)))
    return BoxTable(
        title=tuple(title_rows),
        header=tuple(header_rows),
        records=tuple(records),
        start_lineno=block[0][0].lineno,
        end_lineno=block[-1][0].lineno,
    )


def find_box_tables(text: str | Iterable[SourceLine]) -> list[BoxTable]:
    """Every box-drawing table in ``text``, in order.

    A table is a run of rule and ``|`` lines; anything else (a blank line, a log line, a date)
    ends it, unless a table line follows at once (then it is a mangled line of the table).
    Two rules in a row also end one table and start the next (``npu-smi info``
    prints the process table right under the device table).
    """
    lines = split_lines(text) if isinstance(text, str) else list(text)
    tables: list[BoxTable] = []
    block: list[tuple[SourceLine, bool]] = []

    def flush() -> None:
        if block:
            table = _build_table(block)
            if table is not None:
                tables.append(table)
            block.clear()

    def table_line(k: int) -> bool:
        return k < len(lines) and (_is_rule(lines[k].text) or _is_content(lines[k].text))

    for k, line in enumerate(lines):
        rule = _is_rule(line.text)
        if not rule and block and not line.blank and not _is_content(line.text) and table_line(k + 1):
            # A line that is no table line between two table lines is a mangled one (a rule
            # with text pasted into it, a row without borders): the table goes on.  Ending it
            # here would silently cut every record below into a headerless table of its own.
            rule = "---" in line.text or "===" in line.text
            if not rule:
                block.append((line, False))
                continue
        if rule:
            if block and block[-1][1] and len(block) > 1:
                # Two consecutive rules: the previous table ended at the first one.
                flush()
            block.append((line, True))
        elif _is_content(line.text) or (block and line.text.count("|") >= 2):
            # Inside a table, a row that lost its left border is still a row (mangled: its
            # record then fails to read, loudly), not the end of the table.
            block.append((line, False))
        else:
            flush()
    flush()
    return tables
