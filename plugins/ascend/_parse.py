"""Pure parsers for ``npu-smi`` output: text in, plain records out (no model objects).

Every parser locates its table or block by landmarks (header names, banners), so container
shim log lines before the table, ``N/A``/``NA``/``-`` placeholders, masked ``xxx`` names and
each sampled layout version are handled:

* ``npu-smi info`` (:func:`parse_info`): 1.9.3 (910A, DDR + HBM), 20.2.0 / 22.0.3 / 25.5.1
  (``Chip  Device`` header row, DDR only), 23.0 / 24.1 / 26.0 (910B, HBM), 24.1 / 25.x A3/910C
  (``Chip  Phy-ID``, two dies per NPU id, second die power ``-``), 25.6 / 25.7 Ascend 950
  (header split as ``NPU ID | Name``, no Chip row: one chip per NPU, ``NPU Util(%)``, Bus-Id
  may be ``NA``), plus the process table (``NPU  Chip`` or, on 950, ``NPU ID``).
* ``npu-smi info -m`` (:func:`parse_mapping`): NPU ID / Chip ID / Chip Logic ID / Chip Name;
  MCU rows (logic id ``-``) are kept but flagged ``is_mcu``.
* ``npu-smi info -t topo`` (:func:`parse_topo`): the link matrix with its CPU Affinity column.
* ``npu-smi info -t board -i N [-c C]``, ``-t common -i N``, ``-t usages -i N``
  (:func:`parse_board`, :func:`parse_common`, :func:`parse_usages`): ``Key : Value`` blocks.
* ``npu-smi info -t health -i N -c C`` (:func:`parse_health`): no recorded sample exists; the
  parser reads the ``Key : Value`` form the reference describes (``Health Status``, ``Error
  Code``).

Memory: Ascend prints ``MB`` meaning MiB (reference/vendors.md section 3), so every byte
value here is ``MB * 2**20``.  Per-device parse failures are collected in ``errors`` (a
:class:`~accel.errors.ParseError` naming tool, command and line) and never hide the chips
that did parse; text with no recognisable table at all raises.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accel.errors import ParseError
from accel.toolkit import (
    BoxRecord,
    BoxRow,
    BoxTable,
    KVSection,
    Matrix,
    ParseContext,
    SourceLine,
    clean,
    find_aligned_table,
    find_box_tables,
    first_line,
    identify_text,
    is_masked,
    is_rule,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_float,
    parse_hertz,
    parse_int,
    parse_kv,
    parse_ratio,
    parse_used_total,
    parse_watts,
    read_matrix,
    read_records,
    select_table,
    split_lines,
    title_match,
)

__all__ = [
    "BoardInfo",
    "ChipCommon",
    "ChipMapping",
    "ChipUsages",
    "HealthDetail",
    "NpuChip",
    "NpuProcess",
    "NpuSmiInfo",
    "TopoMatrix",
    "parse_board",
    "parse_common",
    "parse_health",
    "parse_info",
    "parse_mapping",
    "parse_topo",
    "parse_usages",
]

TOOL = "npu-smi"
#: Where the driver package installs npu-smi (searched before PATH).
SEARCH_PATH = ("/usr/local/bin", "/usr/local/sbin", "/usr/sbin")
MB = "MB"  # what a bare number under a "(MB)" header means; binary for Ascend


def _ctx(command: str) -> ParseContext:
    return ParseContext(TOOL, command)


def _mib(text: str | None) -> int | None:
    return parse_bytes(text, bare_unit=MB, binary_prefixes=True)


def _used_total(text: str | None) -> tuple[int | None, int | None]:
    return parse_used_total(text, bare_unit=MB, binary_prefixes=True)


# --------------------------------------------------------------------------------------------
# npu-smi info
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NpuChip:
    """One chip (die) row pair of ``npu-smi info``.  ``None`` where the tool printed a
    placeholder or no such column exists in this layout."""

    npu_id: int
    chip_id: int
    name: str | None
    health: str | None
    bus_id: str | None
    line: SourceLine
    #: Place of this chip's record among all chip records of the table (0-based), counting
    #: records that failed to parse: the fallback logic id (see docs/ascend.md).
    position: int = 0
    #: False for the 950 layout, which prints no Chip row (its ``-t`` views take no ``-c``).
    chip_printed: bool = True
    device_id: int | None = None  # "Device" column (old layouts): the /dev/davinciN number
    phy_id: int | None = None  # "Phy-ID" column (A3 / 910C)
    power_watts: float | None = None
    temperature_celsius: float | None = None
    hugepages_used: int | None = None
    hugepages_total: int | None = None
    aicore_ratio: float | None = None
    ddr_used_bytes: int | None = None
    ddr_total_bytes: int | None = None
    hbm_used_bytes: int | None = None
    hbm_total_bytes: int | None = None


@dataclass(frozen=True)
class NpuProcess:
    npu_id: int
    chip_id: int
    pid: int
    name: str | None
    memory_bytes: int | None
    line: SourceLine


@dataclass(frozen=True)
class NpuSmiInfo:
    """What ``npu-smi info`` showed.  ``errors`` holds one located error per chip or process
    row that could not be read; the other rows are still in ``chips`` / ``processes``."""

    tool_version: str | None
    driver_version: str | None
    chips: tuple[NpuChip, ...]
    processes: tuple[NpuProcess, ...] = ()
    errors: tuple[ParseError, ...] = ()
    #: Lines printed before the table (a HAMi soft-slicing limiter logs there).
    preamble: tuple[str, ...] = ()
    #: For each chip-record error in ``errors`` (by ``id()``), the record's position.
    error_positions: tuple[tuple[int, int], ...] = ()

    def position_of(self, exc: ParseError) -> int | None:
        """Where the failed chip record ``exc`` stood among the chip records, if it was one."""
        return next((pos for key, pos in self.error_positions if key == id(exc)), None)


_VERSION = re.compile(r"npu-smi\s+(?P<tool>\S+)\s+Version:\s*(?P<driver>\S+)", re.IGNORECASE)


#: Ascend 950 (npu-smi 25.7) prints "NPU Util(%) Memory-Usage(MB)" with one space between the
#: two headers, so they read as one column; its value is "<util> <used> / <total>".
_UTIL_AND_MEMORY = "NPU Util(%) Memory-Usage(MB)"


def _split_util_memory(value: str | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    util, _, memory = value.strip().partition(" ")
    return util or None, memory.strip() or None


def _chip_from_record(rec: BoxRecord, ctx: ParseContext, position: int = 0) -> NpuChip:
    f = rec.fields
    line = rec.first_line
    if len(rec.rows) < 2:
        raise ctx.error("a chip record needs two rows (NPU/Name and Chip/Bus-Id)", line)
    with ctx.at(line):
        npu_text = f.get("NPU") if "NPU" in f else f.get("NPU ID")
        npu_id = parse_int(npu_text)
        if npu_id is None:
            raise ParseError(f"no NPU id in {npu_text!r}")
        power = parse_watts(f.get("Power(W)"), bare_unit="W")
        temp = parse_celsius(f.get("Temp(C)"), bare_unit="C")
        huge_used, huge_total = (None, None)
        huge = f.get("Hugepages-Usage(page)")
        if huge is not None:
            hu, _, ht = huge.partition("/")
            huge_used, huge_total = parse_int(hu), parse_int(ht)
    line2 = rec.rows[1].line
    with ctx.at(line2):
        if "Chip" in f or "NPU" in f:
            chip_id = parse_int(f.get("Chip"))
            if chip_id is None:
                raise ParseError(f"no chip id in {f.get('Chip')!r}")
        else:
            chip_id = 0  # one chip per NPU id, as the 950 layout prints no Chip row
        bus_id = parse_bus_id(f.get("Bus-Id"))
        util_text, memory_text = f.get("AICore(%)") or f.get("NPU Util(%)"), f.get("Memory-Usage(MB)")
        if _UTIL_AND_MEMORY in f:
            util_text, memory_text = _split_util_memory(f.get(_UTIL_AND_MEMORY))
        aicore = parse_ratio(util_text, bare_unit="%")
        ddr_used, ddr_total = _used_total(memory_text)
        hbm_used, hbm_total = _used_total(f.get("HBM-Usage(MB)"))
        device_id = parse_int(f.get("Device"))
        phy_id = parse_int(f.get("Phy-ID"))
    for used, total, what in ((ddr_used, ddr_total, "Memory-Usage"), (hbm_used, hbm_total, "HBM-Usage")):
        if used is not None and total is not None and used > total:
            raise ctx.error(f"{what} used {used} bytes exceeds total {total} bytes", line2)
    return NpuChip(
        npu_id=npu_id,
        chip_id=chip_id,
        name=clean(f.get("Name")),
        health=clean(f.get("Health")),
        bus_id=bus_id,
        line=line,
        position=position,
        chip_printed="Chip" in f or "NPU" in f,
        device_id=device_id,
        phy_id=phy_id,
        power_watts=power,
        temperature_celsius=temp,
        hugepages_used=huge_used,
        hugepages_total=huge_total,
        aicore_ratio=aicore,
        ddr_used_bytes=ddr_used,
        ddr_total_bytes=ddr_total,
        hbm_used_bytes=hbm_used,
        hbm_total_bytes=hbm_total,
    )


_NO_PROCS = re.compile(r"No running processes found", re.IGNORECASE)


def _processes(rec: BoxRecord, ctx: ParseContext) -> tuple[list[NpuProcess], list[ParseError]]:
    procs: list[NpuProcess] = []
    errors: list[ParseError] = []
    for row in rec.rows:
        if _NO_PROCS.search(row.text):
            continue
        f = dict(row.fields)
        if "NPU ID" in f and "NPU" not in f:  # 950: "NPU ID | Process id | ...", one chip per NPU
            f["NPU"], f["Chip"] = f["NPU ID"], "0"
        try:
            with ctx.at(row.line):
                if f.get("NPU") is None or f.get("Chip") is None or f.get("Process id") is None:
                    raise ParseError("expected 'NPU Chip | Process id | Process name | Process memory(MB)'")
                npu, chip, pid = parse_int(f.get("NPU")), parse_int(f.get("Chip")), parse_int(f.get("Process id"))
                if npu is None or chip is None or pid is None or pid < 0:
                    raise ParseError("process row without NPU, chip or pid")
                procs.append(
                    NpuProcess(
                        npu, chip, pid, clean(f.get("Process name")), _mib(f.get("Process memory(MB)")), row.line
                    )
                )
        except ParseError as exc:
            errors.append(exc)
    return procs, errors


def _rows_of(table: BoxTable) -> Iterable[BoxRow]:
    yield from table.title
    yield from table.header
    for rec in table.records:
        yield from rec.rows


def _stray_lines(
    lines: Sequence[SourceLine], tables: Sequence[BoxTable], dev_table: BoxTable, ctx: ParseContext
) -> list[ParseError]:
    """A located error for every line of the device table's region that belongs to no record.

    A mangled border (``x 4  910A | OK ...``) unframes a record: the box reader then sees no
    record, or a new table, where a chip was printed.  Such a line is not silently dropped; it is
    one :class:`ParseError` naming the line (with the bus id or NPU id it still shows)."""
    covered = {row.line.lineno for row in _rows_of(dev_table)}
    start = max((row.line.lineno for row in dev_table.header), default=dev_table.start_lineno)
    procs = [t for t in tables if "Process id" in t.column_names and t.start_lineno > start]
    end = min((min((r.line.lineno for r in _rows_of(t)), default=t.start_lineno) for t in procs), default=None)
    out: list[ParseError] = []
    for ln in lines:
        if ln.lineno <= start or (end is not None and ln.lineno >= end) or ln.lineno in covered:
            continue
        if ln.blank or is_rule(ln.text) or _NO_PROCS.search(ln.text) or set(ln.text.strip()) <= set("+-=| "):
            continue
        exc = ctx.error("line outside any device record (a mangled table row?)", ln)
        exc.device_index, exc.bus_id = identify_text(ln.text)
        out.append(exc)
    return out


def parse_info(text: str, *, command: str = "npu-smi info") -> NpuSmiInfo:
    """Parse ``npu-smi info``.  Raises :class:`ParseError` when no device table is found."""
    ctx = _ctx(command)
    lines = split_lines(text)
    tables = find_box_tables(lines)
    dev_table = next(
        (t for t in tables if {"Health", "Bus-Id"} <= set(t.column_names) and "Process id" not in t.column_names),
        None,
    ) or select_table(tables, ("NPU", "Health", "Bus-Id"), ctx, text, "device table")
    names = set(dev_table.column_names)
    if "NPU" not in names and "NPU ID" not in names:
        raise ctx.error("device table has no 'NPU' or 'NPU ID' column", first_line(text))
    if "NPU" in names and "Chip" not in names:
        raise ctx.error("device table has no 'Chip' column", dev_table.header[-1].line if dev_table.header else None)
    m = title_match(dev_table, _VERSION)
    tool_version, driver_version = (m.group("tool"), m.group("driver")) if m else (None, None)
    records = list(dev_table.records)
    chips: list[NpuChip] = []
    errors: list[ParseError] = []
    positions: list[tuple[int, int]] = []
    for position, rec in enumerate(records):
        good, bad = read_records([rec], functools.partial(_chip_from_record, ctx=ctx, position=position))
        chips.extend(good)
        for exc in bad:
            positions.append((id(exc), position))
            errors.append(exc)
    errors.extend(_stray_lines(lines, tables, dev_table, ctx))
    processes: list[NpuProcess] = []
    for t in tables:
        if "Process id" in t.column_names:
            for rec in t.records:
                p, e = _processes(rec, ctx)
                processes.extend(p)
                errors.extend(e)
    preamble = tuple(ln.text for ln in lines if ln.lineno < dev_table.start_lineno and not ln.blank)
    if not chips and errors:
        raise errors[0]
    return NpuSmiInfo(
        tool_version, driver_version, tuple(chips), tuple(processes), tuple(errors), preamble, tuple(positions)
    )


# --------------------------------------------------------------------------------------------
# npu-smi info -m
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipMapping:
    npu_id: int
    chip_id: int
    logic_id: int | None
    name: str | None
    line: SourceLine

    @property
    def is_mcu(self) -> bool:
        """MCU rows (``Mcu``, logic id ``-``) are board controllers, not devices."""
        return (self.name or "").strip().lower() == "mcu" or self.logic_id is None


def parse_mapping(text: str, *, command: str = "npu-smi info -m") -> list[ChipMapping]:
    """Parse ``npu-smi info -m``; raises :class:`ParseError` on a missing header or bad row."""
    ctx = _ctx(command)
    table = find_aligned_table(text, r"NPU ID\s{2,}Chip ID\s{2,}Chip Logic ID")
    if table is None:
        first = next((ln for ln in split_lines(text) if not ln.blank), None)
        raise ctx.error("no 'NPU ID  Chip ID  Chip Logic ID' header", first)
    out: list[ChipMapping] = []
    for line, row in table.rows:
        with ctx.at(line):
            npu, chip = parse_int(row.get("NPU ID")), parse_int(row.get("Chip ID"))
            if npu is None or chip is None:
                raise ParseError("mapping row without NPU ID or Chip ID")
            out.append(ChipMapping(npu, chip, parse_int(row.get("Chip Logic ID")), clean(row.get("Chip Name")), line))
    return out


# --------------------------------------------------------------------------------------------
# npu-smi info -t topo
# --------------------------------------------------------------------------------------------


TopoMatrix = Matrix
_TOPO_CODES = re.compile(r"X|HCCS|HCCS_SW|SIO|PIX|PXB|PHB|SYS|NODE|NA")


def parse_topo(text: str, *, command: str = "npu-smi info -t topo") -> Matrix:
    """Parse ``npu-smi info -t topo`` (``NPUn`` or ``Phy-IDn`` labels, codes HCCS, HCCS_SW,
    SIO, PIX, PXB, PHB, SYS, NA, and the CPU Affinity column); raises :class:`ParseError` on a
    missing header, an unknown code or a ragged row.  The Legend block is ignored."""
    return read_matrix(text, _ctx(command), header=r"^\s*(NPU|Phy-ID)\s*[0-9]+\s{2,}", valid_code=_TOPO_CODES)


# --------------------------------------------------------------------------------------------
# Key/value views: -t board, -t common, -t usages, -t health
# --------------------------------------------------------------------------------------------


def _kv(text: str, command: str, must_have: str) -> tuple[KVSection, ParseContext]:
    ctx = _ctx(command)
    root = parse_kv(text)
    if root.get(must_have) is None:
        first = next((ln for ln in split_lines(text) if not ln.blank), None)
        raise ctx.error(f"no '{must_have}' line", first)
    return root, ctx


def _int_field(root: KVSection, ctx: ParseContext, key: str) -> int | None:
    entry = root.entry(key)
    if entry is None:
        return None
    with ctx.at(entry.line):
        return parse_int(entry.value, base=16 if entry.value.lower().startswith("0x") else 10)


def _die_id(value: str | None) -> str | None:
    """A die id printed as hex groups (``901421D4 02103514 ...``) as one token, or None."""
    v = clean(value)
    if v is None or is_masked(v):
        return None
    token = "".join(v.split())
    return token if re.fullmatch(r"[0-9A-Fa-f]{8,64}", token) else None


@dataclass(frozen=True)
class BoardInfo:
    npu_id: int | None
    chip_id: int | None
    chip_name: str | None
    vdie_id: str | None
    ndie_id: str | None
    die_id: str | None
    bus_id: str | None
    firmware_version: str | None
    serial_number: str | None
    product_name: str | None
    board_id: str | None
    software_version: str | None

    @property
    def uuid(self) -> str | None:
        """What GPUStack and HAMi use as the chip's UUID: the VDie ID, else the Die ID."""
        return self.vdie_id or self.die_id


def parse_board(text: str, *, command: str = "npu-smi info -t board") -> BoardInfo:
    """Parse the chip view (``-i N -c C``: VDie/NDie or Die ID, PCIe Bus Info, firmware) or the
    card view (``-i N``: Product Name, Serial Number, Software/Firmware Version)."""
    root, ctx = _kv(text, command, "NPU ID")
    bus = root.entry("PCIe Bus Info")
    bus_id = None
    if bus is not None:
        with ctx.at(bus.line):
            bus_id = parse_bus_id(bus.value)
    return BoardInfo(
        npu_id=_int_field(root, ctx, "NPU ID"),
        chip_id=_int_field(root, ctx, "Chip ID"),
        chip_name=clean(root.get("Chip Name")),
        vdie_id=_die_id(root.get("VDie ID")),
        ndie_id=_die_id(root.get("NDie ID")),
        die_id=_die_id(root.get("Die ID")),
        bus_id=bus_id,
        firmware_version=clean(root.get("Firmware Version")),
        serial_number=None if is_masked(root.get("Serial Number")) else clean(root.get("Serial Number")),
        product_name=clean(root.get("Product Name")),
        board_id=clean(root.get("Board ID")),
        software_version=clean(root.get("Software Version")),
    )


@dataclass(frozen=True)
class ChipCommon:
    """One block of ``-t common``: a chip (``chip_id``) or the MCU (``is_mcu``)."""

    chip_id: int | None
    is_mcu: bool
    memory_usage_ratio: float | None = None
    hbm_usage_ratio: float | None = None
    aicore_usage_ratio: float | None = None
    aicore_max_hertz: float | None = None
    aicore_current_hertz: float | None = None
    aicore_count: int | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None


def _ratio(block: KVSection, ctx: ParseContext, key: str) -> float | None:
    e = block.entry(key)
    if e is None:
        return None
    with ctx.at(e.line):
        return parse_ratio(e.value, bare_unit="%")


def _blocks(root: KVSection) -> list[KVSection]:
    out = []
    for entries in root.blocks:
        sec = KVSection(None)
        sec.entries.extend(entries)
        out.append(sec)
    return out


def parse_common(text: str, *, command: str = "npu-smi info -t common") -> tuple[int | None, list[ChipCommon]]:
    """Parse ``-t common -i N``: ``(npu_id, blocks)``; the MCU block is flagged ``is_mcu``."""
    root, ctx = _kv(text, command, "NPU ID")
    npu_id = _int_field(root, ctx, "NPU ID")
    out: list[ChipCommon] = []
    for block in _blocks(root):
        is_mcu = (block.get("Chip Name") or "").lower() == "mcu"
        if block.get("Chip ID") is None and not is_mcu:
            continue
        entries = {k: block.entry(k) for k in ("Aicore Freq(MHZ)", "Aicore curFreq(MHZ)", "Temperature(C)")}
        values: dict[str, float | None] = {}
        for key, e in entries.items():
            if e is None:
                values[key] = None
                continue
            with ctx.at(e.line):
                values[key] = (
                    parse_celsius(e.value, bare_unit="C")
                    if key.startswith("Temp")
                    else parse_hertz(e.value, bare_unit="MHz")
                )
        power = block.entry("NPU Real-time Power(W)")
        watts = None
        if power is not None:
            with ctx.at(power.line):
                watts = parse_watts(power.value, bare_unit="W")
        out.append(
            ChipCommon(
                chip_id=_int_field(block, ctx, "Chip ID"),
                is_mcu=is_mcu,
                memory_usage_ratio=_ratio(block, ctx, "Memory Usage Rate(%)"),
                hbm_usage_ratio=_ratio(block, ctx, "HBM Usage Rate(%)"),
                aicore_usage_ratio=_ratio(block, ctx, "Aicore Usage Rate(%)"),
                aicore_max_hertz=values["Aicore Freq(MHZ)"],
                aicore_current_hertz=values["Aicore curFreq(MHZ)"],
                aicore_count=_int_field(block, ctx, "Aicore Count"),
                temperature_celsius=values["Temperature(C)"],
                power_watts=watts,
            )
        )
    return npu_id, out


@dataclass(frozen=True)
class ChipUsages:
    chip_id: int | None
    ddr_capacity_bytes: int | None
    ddr_usage_ratio: float | None
    hbm_capacity_bytes: int | None
    hbm_usage_ratio: float | None
    aicore_usage_ratio: float | None
    hugepages_total: int | None


def parse_usages(text: str, *, command: str = "npu-smi info -t usages") -> tuple[int | None, list[ChipUsages]]:
    """Parse ``-t usages -i N``.  Capacities are MB (= MiB); usage is a *rate*, not bytes.
    The ``Chip ID`` line may come after the block it describes (310P), so a block is the run of
    lines between blank lines, wherever its ``Chip ID`` sits."""
    root, ctx = _kv(text, command, "NPU ID")
    npu_id = _int_field(root, ctx, "NPU ID")
    out: list[ChipUsages] = []
    for block in _blocks(root):
        if block.get("DDR Capacity(MB)") is None and block.get("HBM Capacity(MB)") is None:
            continue
        caps: dict[str, int | None] = {}
        for key in ("DDR Capacity(MB)", "HBM Capacity(MB)"):
            e = block.entry(key)
            caps[key] = None
            if e is not None:
                with ctx.at(e.line):
                    caps[key] = _mib(e.value)
        out.append(
            ChipUsages(
                chip_id=_int_field(block, ctx, "Chip ID"),
                ddr_capacity_bytes=caps["DDR Capacity(MB)"],
                ddr_usage_ratio=_ratio(block, ctx, "DDR Usage Rate(%)"),
                hbm_capacity_bytes=caps["HBM Capacity(MB)"],
                hbm_usage_ratio=_ratio(block, ctx, "HBM Usage Rate(%)"),
                aicore_usage_ratio=_ratio(block, ctx, "Aicore Usage Rate(%)"),
                hugepages_total=_int_field(block, ctx, "DDR Hugepages Total(page)"),
            )
        )
    return npu_id, out


@dataclass(frozen=True)
class HealthDetail:
    status: str | None
    error_codes: tuple[str, ...]


_CODE = re.compile(r"^(?:0x)?([0-9A-Fa-f]{1,8})$")


def parse_health(text: str, *, command: str = "npu-smi info -t health") -> HealthDetail:
    """Parse ``-t health -i N -c C`` in the reference's ``Key : Value`` form (no recorded sample
    exists): ``Health Status : Warning`` and ``Error Code : 80E18401 80CB8009`` (hex, with or
    without ``0x``, separated by spaces or commas; ``NA``/``0`` means none).  Codes come back
    upper-case with a ``0x`` prefix."""
    ctx = _ctx(command)
    root = parse_kv(text)
    status_key = next((k for k in ("Health Status", "Health Status Code", "Health") if root.get(k)), None)
    if status_key is None:
        first = next((ln for ln in split_lines(text) if not ln.blank), None)
        raise ctx.error("no 'Health Status' line", first)
    codes: list[str] = []
    for e in root.entries:
        if not e.key.lower().startswith("error code"):
            continue
        for tok in re.split(r"[\s,]+", e.value.strip()):
            if clean(tok) is None or tok in {"0", "0x0", "0x00000000", "00000000"}:
                continue
            m = _CODE.match(tok)
            if not m:
                raise ctx.error(f"error code {tok!r} is not hexadecimal", e.line)
            codes.append("0x" + m.group(1).upper().rjust(8, "0"))
    return HealthDetail(clean(root.get(status_key)), tuple(codes))


# Reserved for callers that want float parsing with the same placeholder rules.
_ = parse_float
