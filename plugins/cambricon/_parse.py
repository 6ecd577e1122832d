"""Pure parsers for Cambricon ``cnmon`` output.

* ``cnmon`` (:func:`parse_cnmon`): the default table in the sampled layouts - v4.20 (``Inited
  Driver`` and ``vMemory-Usage`` columns, no Bus-Id), v5.10.13 (``Bus-Id``, ``SR-IOV
  Compute-Mode``) and v5.10.31 (``Mode Compute-Mode`` with ``FULL``; masked ``MLUXXX-XX``
  names and ``xxxxx`` totals).  Memory is MiB; temperature ``32C``; power ``106 W/ 250 W``.
  A date line before the table is skipped.  Each row is one chip (what ``MLU_VISIBLE_DEVICES``
  counts), even on a two-chip MLU370-X8 card.
* ``cnmon topo -m`` (:func:`parse_topo`): **no recorded sample exists**; the parser reads the
  format reference/vendors.md section 4 describes: an ``MLU0 MLU1 ...`` matrix with ``X``,
  ``MLK`` (MLU-Link, optionally with a link count such as ``MLK2``), PCIe levels
  (``PIX``/``PXB``/``PHB``/``NODE``/``SYS``) and a ``CPU Affinity`` column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accel.errors import ParseError
from accel.toolkit import (
    BoxRecord,
    Matrix,
    ParseContext,
    ProcessRow,
    SourceLine,
    clean,
    find_box_tables,
    first_line,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_int,
    parse_ratio,
    parse_used_total,
    parse_watts,
    read_matrix,
    read_records,
    select_table,
    split_lines,
    title_match,
)

__all__ = ["SEARCH_PATH", "TOOL", "CnmonInfo", "MluChip", "MluTopo", "parse_cnmon", "parse_topo"]

TOOL = "cnmon"
#: Where the driver package installs cnmon (searched before PATH).
SEARCH_PATH = ("/usr/bin", "/usr/local/neuware/bin")


@dataclass(frozen=True)
class MluChip:
    card: int
    name: str | None
    line: SourceLine
    vf: str | None = None
    firmware: str | None = None
    bus_id: str | None = None
    driver: str | None = None
    inited: str | None = None
    utilization_ratio: float | None = None
    ecc_errors: int | None = None
    ecc_text: str | None = None
    fan_ratio: float | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_cap_watts: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    vmemory_used_bytes: int | None = None
    vmemory_total_bytes: int | None = None
    sriov: str | None = None
    mode: str | None = None
    compute_mode: str | None = None


@dataclass(frozen=True)
class CnmonInfo:
    version: str | None
    driver_version: str | None
    chips: tuple[MluChip, ...]
    processes: tuple[ProcessRow, ...] = ()
    errors: tuple[ParseError, ...] = ()


_VERSION = re.compile(r"CNMON\s+v?(?P<v>\S+)(?:.*Driver\s+v?(?P<d>\S+))?", re.IGNORECASE)


def _pair(text: str | None, sep: str = "/") -> tuple[str | None, str | None]:
    if text is None or sep not in text:
        return text, None
    a, _, b = text.partition(sep)
    return a.strip(), b.strip()


def _chip(rec: BoxRecord, ctx: ParseContext) -> MluChip:
    f = rec.fields
    line = rec.first_line
    if len(rec.rows) != 2:
        # Fewer: a row was lost; more: a lost rule merged two cards' records into one.
        raise ctx.error(f"a card record has two rows, this one {len(rec.rows)}", line)
    with ctx.at(line):
        card = parse_int(f.get("Card"))
        if card is None:
            raise ParseError(f"no card number in {f.get('Card')!r}")
        ecc_text = clean(f.get("Ecc-Error"))
        ecc = parse_int(ecc_text) if ecc_text is not None and ecc_text.isdigit() else None
        bus = parse_bus_id(f.get("Bus-Id"))
        util = parse_ratio(f.get("Util"))
    row2 = rec.rows[1].line
    with ctx.at(row2):
        pw, cap = _pair(f.get("Pwr:Usage/Cap"))
        mem_used, mem_total = parse_used_total(f.get("Memory-Usage"), binary_prefixes=None)
        vmem = f.get("vMemory-Usage")
        v_used, v_total = parse_used_total(vmem) if vmem else (None, None)
        chip = MluChip(
            card=card,
            name=clean(f.get("Name")),
            line=line,
            vf=clean(f.get("VF")),
            firmware=clean(f.get("Firmware")),
            bus_id=bus,
            driver=clean(f.get("Driver")),
            inited=clean(f.get("Inited")),
            utilization_ratio=util,
            ecc_errors=ecc,
            ecc_text=ecc_text,
            fan_ratio=parse_ratio(f.get("Fan")),
            temperature_celsius=parse_celsius(f.get("Temp")),
            power_watts=parse_watts(pw),
            power_cap_watts=parse_watts(cap),
            memory_used_bytes=mem_used,
            memory_total_bytes=mem_total,
            vmemory_used_bytes=v_used,
            vmemory_total_bytes=v_total,
            sriov=clean(f.get("SR-IOV")),
            mode=clean(f.get("Mode")),
            compute_mode=clean(f.get("Compute-Mode")),
        )
    if ecc_text is not None and chip.ecc_errors is None and ecc_text.lower() not in {"n/a", "na"}:
        raise ctx.error(f"Ecc-Error {ecc_text!r} is not a count", line)
    if mem_used is not None and mem_total is not None and mem_used > mem_total:
        raise ctx.error("Memory-Usage used exceeds total", row2)
    return chip


_PROC = re.compile(r"^\s*(?P<card>[0-9]+)\s+(?P<mi>\S+)\s+(?P<pid>[0-9]+)\s+(?P<cmd>.*?)\s+(?P<mem>[0-9.]+\s*MiB)\s*$")


def parse_cnmon(text: str, *, command: str = "cnmon") -> CnmonInfo:
    """Parse the default ``cnmon`` table; :class:`ParseError` when there is no card table."""
    ctx = ParseContext(TOOL, command)
    tables = find_box_tables(split_lines(text))
    table = select_table(tables, ("Card", "Name", "Memory-Usage"), ctx, text, "card table")
    m = title_match(table, _VERSION)
    version, driver = (m.group("v"), m.group("d")) if m else (None, None)
    if not table.records:
        raise ctx.error("the card table has a header but no card rows", first_line(text))
    chips, errors = read_records(table.records, lambda rec: _chip(rec, ctx))
    procs: list[ProcessRow] = []
    for t in tables:
        if "PID" not in t.column_names:
            continue
        for row in t.rows:
            if re.search(r"No running processes", row.text, re.IGNORECASE):
                continue
            m = _PROC.match(row.text)
            if not m:
                errors.append(ctx.error("unreadable process row", row.line))
                continue
            try:
                with ctx.at(row.line):
                    mem = parse_bytes(m.group("mem"))
                procs.append(
                    ProcessRow(int(m.group("card")), int(m.group("pid")), clean(m.group("cmd")), mem, row.line)
                )
            except ParseError as exc:
                errors.append(exc)
    if not chips and errors:
        raise errors[0]
    return CnmonInfo(version, driver, tuple(chips), tuple(procs), tuple(errors))


MluTopo = Matrix
_CODE = re.compile(r"X|MLK[0-9]*|PIX|PXB|PHB|NODE|SYS|NA")


def parse_topo(text: str, *, command: str = "cnmon topo -m") -> Matrix:
    """Parse ``cnmon topo -m`` in the reference's described format (no recorded sample)."""
    return read_matrix(text, ParseContext(TOOL, command), header=r"^\s*MLU\s*0\s{2,}", valid_code=_CODE)
