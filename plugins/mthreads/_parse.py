"""Parsers for ``mthreads-gmi``: the 3-row table, ``-q -j`` JSON, ``-q`` text and ``mtlink -s``.

Layouts seen in the samples:

* the table (gmi 1.12.2 and 2.4.1): a ``mthreads-gmi:<ver>  Driver Version:<ver>`` banner,
  then three header rows without an outer border (``ID Name | PCIe | %GPU Mem``, ``Device Type
  [Perf] | Pcie Lane Width | Temp MPC Capable``, ``ECC Mode``) and three rows per GPU.  Memory
  is ``usedMiB(totalMiB)``; lane width ``cur(max)`` (``16x(16x)``); 2.4.1 adds ``Perf``.
* ``--query --json`` (3.3.5): string values that carry their units (``81920MiB``, ``27C``,
  ``96.66W``), Driver Version at the top level, and ``"Power Draw "`` with a trailing space.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ParseError
from accel.model import LinkState
from accel.toolkit import (
    BoxRecord,
    KVSection,
    Lenient,
    ParseContext,
    RecordReader,
    SourceLine,
    ToolView,
    UnitReading,
    clean,
    first_match,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_kv,
    parse_process_rows,
    parse_ratio,
    parse_used_total,
    parse_watts,
    split_lines,
    table_under_header,
)

__all__ = [
    "GmiTable",
    "GmiUnit",
    "MtLink",
    "parse_mtlink",
    "parse_query_json",
    "parse_query_text",
    "parse_table",
]

TOOL = "mthreads-gmi"
#: Where the driver package installs the tool (searched before PATH).
SEARCH_PATH = ("/usr/bin", "/usr/local/bin")

_BANNER = re.compile(r"mthreads-gmi\s*:\s*(?P<gmi>\S+)\s+Driver Version\s*:\s*(?P<driver>\S+)")
_HEADER = re.compile(r"^\s*ID\s+Name\b.*\|")
_WIDTH = re.compile(r"^\s*(?P<cur>[0-9]+)x\s*\(\s*(?P<max>[0-9]+)x\s*\)\s*$", re.IGNORECASE)
_ID = re.compile(r"^(?P<gpu>[0-9]{1,4})(?:\s*[:./-]\s*(?P<part>[0-9]{1,4}))?$")


@dataclass
class GmiUnit:
    """One GPU row of the table (or one MPC partition row: ``partition`` is its number)."""

    reading: UnitReading
    device_type: str | None = None
    partition: int | None = None
    line: SourceLine | None = None


@dataclass
class GmiTable(ToolView):
    """What ``mthreads-gmi`` printed: versions, GPUs (and MPC partitions), processes."""

    gmi_version: str | None = None
    units: list[GmiUnit] = field(default_factory=list)


def _lane_width(text: str) -> tuple[int, int]:
    m = _WIDTH.match(text)
    if not m:
        raise ParseError(f"expected lane width 'NNx(MMx)', got {text!r}")
    return int(m.group("cur")), int(m.group("max"))


def _ecc(mode: str | None) -> bool | None:
    if mode is None:
        return None
    return mode.lower() not in ("off", "disable", "disabled", "no")


def _yes(text: str | None) -> bool | None:
    if text is None:
        return None
    return text.strip().upper() in ("YES", "Y", "TRUE", "ON", "ENABLED")


def _unit_from_record(rec: BoxRecord, ctx: ParseContext) -> GmiUnit:
    v = RecordReader.start(rec, ctx, index=None)
    r = v.reading
    raw_id = (v.fields.get("ID") or "").strip()
    m = _ID.match(raw_id)
    if not m:
        raise ctx.error(f"GPU row without a numeric ID (got {raw_id!r})", rec.first_line)
    r.index = int(m.group("gpu"))
    r.model = v.text("Name")
    r.bus_id = v.strict(parse_bus_id, "PCIe")
    r.utilization_ratio = v.get(parse_ratio, "%GPU")
    mem = v.get(parse_used_total, "Mem")
    if mem is not None:
        r.memory_used_bytes, r.memory_total_bytes = mem
    lanes = v.get(_lane_width, "Pcie Lane Width", 1)
    if lanes is not None:
        r.link_width_current, r.link_width_max = lanes
    r.temperature_celsius = v.get(parse_celsius, "Temp", 1)
    r.ecc_enabled = _ecc(v.text("ECC Mode"))
    mpc = _yes(v.text("MPC Capable"))
    if mpc is not None:
        r.extras["mthreads.com/mpcCapable"] = mpc
    v.extras("mthreads.com", {"Device Type": "deviceType", "Perf": "perfState", "ECC Mode": "eccMode"})
    part = int(m.group("part")) if m.group("part") else None
    return GmiUnit(reading=r, device_type=v.text("Device Type"), partition=part, line=rec.first_line)


def parse_table(text: str, *, command: str = "mthreads-gmi") -> GmiTable:
    """Parse the default ``mthreads-gmi`` table.

    A GPU whose row cannot be read is left out and its :class:`ParseError` kept in
    ``problems``; the others are still returned.  No header at all is an error.
    """
    ctx = ParseContext(TOOL, command)
    what = "the 'ID  Name | PCIe | %GPU  Mem' table"
    lines, units, problems, end = table_under_header(text, ctx, _HEADER, what, lambda rec: _unit_from_record(rec, ctx))
    banner = first_match(lines, _BANNER)
    return GmiTable(
        gmi_version=banner.group("gmi") if banner else None,
        driver_version=banner.group("driver") if banner else None,
        units=units,
        problems=problems,
        processes=parse_process_rows(lines[end:], ctx),
    )


# --------------------------------------------------------------------------------------------
# --query (JSON and text)
# --------------------------------------------------------------------------------------------


@dataclass
class GmiQuery(ToolView):
    """What ``mthreads-gmi -q [-j]`` printed."""


def _norm_keys(value: Any) -> Any:
    # "Power Draw " has a trailing space in gmi 3.3.5; compare keys by their stripped text.
    if isinstance(value, dict):
        return {" ".join(str(k).split()): _norm_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_norm_keys(v) for v in value]
    return value


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _hex_id(text: str | None) -> str | None:
    value = clean(text)
    if value is None:
        return None
    low = value.lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]{1,8}", low):
        raise ParseError(f"expected a hex PCI id, got {text!r}")
    return low[-4:].rjust(4, "0")


def _reading_from_gpu(gpu: dict[str, Any], ctx: ParseContext, line: SourceLine | None) -> UnitReading:
    reading = UnitReading()
    lenient = Lenient(ctx, reading)
    index = _text(gpu.get("Index"))
    if index is not None:
        reading.index = lenient.strict(lambda s: int(s.strip()), index, line, "Index")
    reading.model = clean(_text(gpu.get("Product Name")))
    reading.uuid = clean(_text(gpu.get("GPU UUID")))
    reading.serial_number = clean(_text(gpu.get("Serial Number")))
    bios = clean(_text(gpu.get("MTBios Version")))
    if bios:
        reading.firmware["mtbios"] = bios
    brand = clean(_text(gpu.get("Product Brand")))
    if brand:
        reading.extras["mthreads.com/brand"] = brand
    pci = gpu.get("PCI")
    if isinstance(pci, dict):
        reading.bus_id = lenient.strict(parse_bus_id, _text(pci.get("Bus ID")), line, "PCI Bus ID")
        reading.pci_vendor_id = lenient.get(_hex_id, _text(pci.get("Vendor ID")), line, "PCI Vendor ID")
        reading.pci_device_id = lenient.get(_hex_id, _text(pci.get("Device ID")), line, "PCI Device ID")
    mem = gpu.get("FB Memory Usage")
    if isinstance(mem, dict):
        reading.memory_total_bytes = lenient.get(parse_bytes, _text(mem.get("Total")), line, "FB Memory Total")
        reading.memory_used_bytes = lenient.get(parse_bytes, _text(mem.get("Used")), line, "FB Memory Used")
    util = gpu.get("Utilization")
    if isinstance(util, dict):
        reading.utilization_ratio = lenient.get(parse_ratio, _text(util.get("Gpu")), line, "Utilization Gpu")
        reading.memory_utilization_ratio = lenient.get(
            parse_ratio, _text(util.get("Memory")), line, "Utilization Memory"
        )
    temp = gpu.get("Temperature")
    if isinstance(temp, dict):
        reading.temperature_celsius = lenient.get(
            parse_celsius, _text(temp.get("GPU Current Temp")), line, "GPU Current Temp"
        )
    power = gpu.get("Power Readings")
    if isinstance(power, dict):
        reading.power_watts = lenient.get(parse_watts, _text(power.get("Power Draw")), line, "Power Draw")
        reading.power_limit_watts = lenient.get(
            parse_watts, _text(power.get("Current Power Limit")), line, "Current Power Limit"
        )
    return reading


def _readings(data: Any, ctx: ParseContext, out: GmiQuery, line_of: dict[int, SourceLine]) -> None:
    if not isinstance(data, dict):
        raise ctx.error("the JSON document is not an object")
    data = _norm_keys(data)
    out.driver_version = clean(_text(data.get("Driver Version")))
    gpus = data.get("GPU")
    if isinstance(gpus, dict):
        gpus = [gpus]
    if not isinstance(gpus, list):
        raise ctx.error("no 'GPU' list in the query output")
    for n, gpu in enumerate(gpus):
        line = line_of.get(n)
        if not isinstance(gpu, dict):
            out.problems.append(ctx.error(f"GPU entry {n} is not an object", line))
            continue
        try:
            out.readings.append(_reading_from_gpu(gpu, ctx, line))
        except ParseError as exc:
            out.problems.append(exc)


def parse_query_json(text: str, *, command: str = "mthreads-gmi -q -j") -> GmiQuery:
    """Parse ``mthreads-gmi --query --json``; a malformed GPU entry is kept in ``problems``."""
    ctx = ParseContext(TOOL, command)
    ctx.require(split_lines(text), "a JSON document")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        lineno = getattr(exc, "lineno", None)
        lines = split_lines(text)
        line = lines[lineno - 1] if isinstance(lineno, int) and 0 < lineno <= len(lines) else None
        raise ctx.error(f"not valid JSON: {getattr(exc, 'msg', exc)}", line, lineno) from exc
    # Line numbers of each GPU object, for errors: the lines holding '"Index":'.
    line_of = {n: ln for n, ln in enumerate(ln for ln in split_lines(text) if '"Index"' in ln.text)}
    out = GmiQuery()
    _readings(data, ctx, out, line_of)
    return out


def parse_query_text(text: str, *, command: str = "mthreads-gmi -q") -> GmiQuery:
    """Parse ``mthreads-gmi -q`` (no sample: the reference's nvidia-smi-like layout).

    ``Driver Version : x`` at the top, then one ``GPU <bus id>`` section per GPU whose keys
    and sub-sections (``PCI``, ``FB Memory Usage``...) are those of the JSON form.
    """
    ctx = ParseContext(TOOL, command)
    lines = split_lines(text)
    ctx.require(lines, "the mthreads-gmi -q report")
    root = parse_kv(lines)

    def as_dict(sec: KVSection) -> dict[str, Any]:
        d: dict[str, Any] = {e.key: e.value for e in reversed(sec.entries)}
        for sub in sec.sections:
            if sub.name is not None:
                d.setdefault(sub.name, as_dict(sub))
        return d

    gpus: list[dict[str, Any]] = []
    lines_of: dict[int, SourceLine] = {}
    for sec in root.walk():
        if sec.name is not None and re.match(r"^GPU\b", sec.name) and sec.line is not None:
            gpu = as_dict(sec)
            rest = sec.name[3:].strip()
            pci = gpu.setdefault("PCI", {})
            if isinstance(pci, dict) and "Bus ID" not in pci and rest:
                pci["Bus ID"] = rest
            lines_of[len(gpus)] = sec.line
            gpus.append(gpu)
    driver = next((sec.get("Driver Version") for sec in root.walk() if sec.get("Driver Version")), None)
    out = GmiQuery()
    _readings({"Driver Version": driver, "GPU": gpus}, ctx, out, lines_of)
    return out


# --------------------------------------------------------------------------------------------
# mtlink -s
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MtLink:
    """One MTLink between two GPUs (by tool index) and its state."""

    a: int
    b: int
    state: LinkState
    line: SourceLine


_MTLINK = re.compile(
    r"GPU\s*(?P<a>[0-9]+)\b.*?(?:->|<->|to|peer|GPU)\s*(?:GPU\s*)?(?P<b>[0-9]+)\b.*?\b(?P<state>up|down|active|inactive)\b",
    re.IGNORECASE,
)
_STATES = {"up": LinkState.UP, "active": LinkState.UP, "down": LinkState.DOWN, "inactive": LinkState.DOWN}


def parse_mtlink(text: str) -> list[MtLink]:
    """Parse ``mthreads-gmi mtlink -s`` (no sample: the reference describes only "MTLink state").

    Accepts one link per line naming two GPUs and a state (``GPU0 Link0 -> GPU1: Up``).  The
    published failure text ("the requested operation is not available") yields no links.
    """
    out: list[MtLink] = []
    seen: set[tuple[int, int]] = set()
    for line in split_lines(text):
        m = _MTLINK.search(line.text)
        if not m:
            continue
        a, b = int(m.group("a")), int(m.group("b"))
        key = (min(a, b), max(a, b))
        if a == b or key in seen:
            continue
        seen.add(key)
        out.append(MtLink(a, b, _STATES[m.group("state").lower()], line))
    return out
