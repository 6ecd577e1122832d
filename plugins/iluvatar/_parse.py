"""Parsers for ``ixsmi``, Iluvatar CoreX's nvidia-smi look-alike.

* the default table (IX-ML 3.0.1 and 4.1.0): a ``IX-ML: x  Driver Version: y  CUDA Version: z``
  banner, two header rows, two rows per GPU; memory ``116MiB / 32768MiB``; power
  ``93W / 350W`` or ``N/A / N/A`` (a BI-V150 board reports its power on one chip only).  A
  pasted tail of the table (no header, followed by ``ixsmi -r`` lines) is read with the known
  header.
* wedged GPUs print sentinels instead of failing: ``65535W / 250`` (uint16 max), ``0C``,
  ``100%``, ``25MHz 33MHz``.  They become a ``DeviceWedged`` condition, never readings.
* ``--query-gpu=... --format=csv,noheader``: values keep their units (``16384 MiB``, ``30 C``).
* ``-L`` and ``topo -m`` have no sample: the nvidia-smi layouts the reference describes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    BoxRecord,
    Lenient,
    ParseContext,
    RecordReader,
    ToolView,
    UnitReading,
    clean,
    condition,
    find_box_tables,
    first_match,
    is_rule,
    is_sentinel,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_hertz,
    parse_int,
    parse_power_pair,
    parse_process_rows,
    parse_ratio,
    parse_used_total,
    parse_watts,
    read_header_records,
    read_records,
    split_lines,
)
from accel.toolkit import parse_query_csv as parse_query_csv_rows

__all__ = [
    "DUAL_CHIP_MODELS",
    "QUERY_FIELDS",
    "IxsmiTable",
    "pair_boards",
    "parse_query_csv",
    "parse_table",
    "wedged_condition",
]

TOOL = "ixsmi"
#: The CoreX SDK installs ixsmi here (searched before PATH).
SEARCH_PATH = ("/usr/local/corex/bin", "/usr/bin", "/usr/local/bin")

_BANNER = re.compile(r"IX-ML:\s*(?P<ixml>\S+)\s+Driver Version:\s*(?P<driver>\S+)(?:\s+CUDA Version:\s*(?P<cuda>\S+))?")
# The header of ixsmi 3.0.1 / 4.1.0, used when the output is a headerless fragment.
_KNOWN_HEADER = (
    "| GPU  Name                     | Bus-Id               | Clock-SM  Clock-Mem  |",
    "| Fan  Temp  Perf  Pwr:Usage/Cap|      Memory-Usage    | GPU-Util  Compute M. |",
)
_RESET = re.compile(r"^\s*GPU\s+(?P<bdf>\S+)\s+was successfully reset", re.IGNORECASE)
#: Iluvatar models whose board carries two GPUs (power is reported once per board).
DUAL_CHIP_MODELS = ("BI-V150",)


@dataclass
class IxsmiTable(ToolView):
    """What ``ixsmi`` printed."""

    ixml_version: str | None = None
    cuda_version: str | None = None
    #: Bus ids ``ixsmi -r`` reported as reset (the wedged-GPU sample ends with them).
    resets: list[str] = field(default_factory=list)


def wedged_condition(reasons: Sequence[str]) -> HealthCondition:
    """The condition for a GPU whose readings are the hung-card sentinels."""
    return condition(
        Subsystem.DEVICE,
        "DeviceWedged",
        Severity.CRITICAL,
        Action.RESET_DEVICE,
        "ixsmi shows hung-card sentinel values (" + ", ".join(reasons) + "); reset it with ixsmi -r",
        code="iluvatar.ixsmi:sentinel-values",
    )


def _reading(rec: BoxRecord, ctx: ParseContext) -> UnitReading:
    v = RecordReader.start(rec, ctx, index="GPU")
    r = v.reading
    r.model = v.text("Name")
    r.bus_id = v.strict(parse_bus_id, "Bus-Id")
    sm = v.get(parse_hertz, "Clock-SM")
    mem_clock = v.get(parse_hertz, "Clock-Mem")
    r.fan_ratio = v.get(parse_ratio, "Fan", 1)
    r.temperature_celsius = v.get(parse_celsius, "Temp", 1)
    power = v.get(parse_power_pair, "Pwr:Usage/Cap", 1)
    if power is not None:
        r.power_watts, r.power_limit_watts = power
    mem = v.get(parse_used_total, "Memory-Usage", 1)
    if mem is not None:
        r.memory_used_bytes, r.memory_total_bytes = mem
    r.utilization_ratio = v.get(parse_ratio, "GPU-Util", 1)
    v.extras("iluvatar.com", {"Perf": "perfState", "Compute M.": "computeMode"})
    sentinels = []
    raw_power = v.fields.get("Pwr:Usage/Cap") or ""
    raw_usage = raw_power.partition("/")[0]
    if is_sentinel(raw_usage):
        sentinels.append(f"power {raw_usage.strip()}")
    if r.temperature_celsius == 0 and r.utilization_ratio == 1.0:
        sentinels.append("0 C at 100% utilisation")
    if sentinels:
        r.conditions.append(wedged_condition(sentinels))
        # The sensor readings of a hung card mean nothing; its memory use still reads sanely.
        r.power_watts = r.temperature_celsius = r.utilization_ratio = r.fan_ratio = None
        r.dropped |= {"power_watts", "temperature_celsius", "utilization_ratio", "clocks_hertz"}
        return r
    for name, value in (("sm", sm), ("memory", mem_clock)):
        if value is not None:
            r.clocks_hertz[name] = value
    return r


def parse_table(text: str, *, command: str = "ixsmi") -> IxsmiTable:
    """Parse the default ``ixsmi`` table (or a pasted fragment of it).

    A GPU that cannot be read is left out with its error in ``problems``; the others stay.
    """
    ctx = ParseContext(TOOL, command)
    lines = split_lines(text)
    ctx.require(lines, "the ixsmi table")
    out = IxsmiTable()
    banner = first_match(lines, _BANNER)
    if banner:
        out.ixml_version, out.driver_version = banner.group("ixml"), banner.group("driver")
        out.cuda_version = clean(banner.group("cuda"))
    records: list[BoxRecord] = []
    tables = [t for t in find_box_tables(lines) if "Bus-Id" in t.column_names]
    if tables:
        records = list(tables[0].records)
        rest = [ln for ln in lines if ln.lineno > tables[0].end_lineno]
    else:
        # A fragment: the device rows without the header (the wedged-GPU sample).
        start = next((i for i, ln in enumerate(lines) if is_rule(ln.text)), None)
        if start is None:
            raise ctx.error("no ixsmi device table (no 'Bus-Id' header and no table rows)")
        records, end = read_header_records(lines, _KNOWN_HEADER, start=start)
        rest = lines[end:]
        if not records:
            raise ctx.error("no ixsmi device rows", lines[start])
    out.readings, out.problems = read_records(records, lambda rec: _reading(rec, ctx))
    out.processes = parse_process_rows(rest, ctx)
    for line in rest:
        m = _RESET.match(line.text)
        if m:
            with ctx.at(line):
                bdf = parse_bus_id(m.group("bdf"))
            if bdf is not None:
                out.resets.append(bdf)
    return out


def pair_boards(readings: list[UnitReading]) -> None:
    """Give the two GPUs of each dual-chip board (BI-V150) the same ``board_id``.

    Chips of one board enumerate next to each other and exactly one of the pair prints the
    board's power; the other prints ``N/A / N/A``.  ``board_id`` is ``board-<bus id of the
    first chip>`` and ``iluvatar.com/boardPowerReporter`` says which chip carries the power.
    """
    dual = sorted(
        (r for r in readings if r.index is not None and any(m in (r.model or "") for m in DUAL_CHIP_MODELS)),
        key=lambda r: r.index or 0,
    )
    for a, b in zip(dual[::2], dual[1::2], strict=False):
        if a.index is None or b.index != a.index + 1 or a.model != b.model:
            continue
        board = f"board-{a.bus_id or a.index}"
        for chip, other in ((a, b), (b, a)):
            chip.board_id = board
            reports = chip.power_watts is not None or (other.power_watts is None and chip.power_limit_watts is not None)
            chip.extras["iluvatar.com/boardPowerReporter"] = reports
            if reports:
                chip.extras["iluvatar.com/powerScope"] = "board"


# --------------------------------------------------------------------------------------------
# --query-gpu CSV
# --------------------------------------------------------------------------------------------

#: The query the backend runs; the CSV sample (gpustack's) used the first six without uuid/bus.
QUERY_FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "name",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)


def parse_query_csv(text: str, fields: Sequence[str], *, command: str | None = None) -> list[UnitReading]:
    """Parse ``ixsmi --query-gpu=<fields> --format=csv,noheader`` (values keep their units).

    A row with the wrong number of columns, or an index or bus id that cannot be read, raises
    a located :class:`ParseError`; a bad reading (``abc MiB``) becomes a condition on the unit.
    """
    cmd = command or f"ixsmi --query-gpu={','.join(fields)} --format=csv,noheader"
    ctx = ParseContext(TOOL, cmd)
    out: list[UnitReading] = []
    for row in parse_query_csv_rows(text, ctx, fields=fields, header=False).rows:
        line = row.line
        r = UnitReading()
        lenient = Lenient(ctx, r)
        r.index = lenient.strict(parse_int, row.get("index"), line, "index")
        r.uuid = clean(row.get("uuid"))
        r.bus_id = lenient.strict(parse_bus_id, row.get("pci.bus_id"), line, "pci.bus_id")
        r.model = clean(row.get("name"))
        r.memory_total_bytes = lenient.get(parse_bytes, row.get("memory.total"), line, "memory.total")
        r.memory_used_bytes = lenient.get(parse_bytes, row.get("memory.used"), line, "memory.used")
        r.utilization_ratio = lenient.get(parse_ratio, row.get("utilization.gpu"), line, "utilization.gpu")
        r.temperature_celsius = lenient.get(parse_celsius, row.get("temperature.gpu"), line, "temperature.gpu")
        r.power_watts = lenient.get(parse_watts, row.get("power.draw"), line, "power.draw")
        r.power_limit_watts = lenient.get(parse_watts, row.get("power.limit"), line, "power.limit")
        out.append(r)
    return out
