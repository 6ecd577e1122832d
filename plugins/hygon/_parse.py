"""Pure parsers for Hygon DCU tool output: text in, readings out, typed errors.

* :func:`parse_concise` - the default table of ``hy-smi`` and of DTK ``rocm-smi`` (columns
  ``DCU Temp AvgPwr [Fan] Perf PwrCap VRAM% DCU% [Mode]`` between the "System Management
  Interface" and "End of SMI Log" banners; older DTK 4.x builds print the AMD "Concise Info"
  layout with ``GPU%``).  Located by its header, never by line number.
* :func:`parse_json` - ``--showid --showmeminfo vram ... --json``: the AMD parser
  (:func:`accel.plugins.amd.layers.parse_rocm_smi_json`) reads it; Hygon's keys carry ``(MiB)``
  where AMD's carry ``(B)``, and the unit comes from the key.
* :func:`parse_rocminfo` - HSA agents (``Device Type: DCU``, ``Name: gfx928``, ``Marketing
  Name``, ``Uuid: GPU-<unique id>``, ``Compute Unit``); the ANSI banner line is skipped.
* :func:`parse_showtopo` - ``--showtopo``: the weight / hops / link-type matrices and the
  ``DCU[0] : (Topology) Numa Node: 0`` lines.  **No recorded sample exists**; the format is the
  one the reference describes (rocm-smi's, with ``DCU``/``HCU`` labels and ``XGMI``/``HSW``).

Every parser raises :class:`accel.errors.ParseError` only, naming tool, command and line, and
only when nothing parses; a bad row is collected in ``errors`` and never hides the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from accel.errors import ParseError
from accel.plugins.amd.layers import GpuReading, normalize_unique_id, parse_rocm_smi_json
from accel.toolkit import (
    ParseContext,
    SourceLine,
    clean,
    find_aligned_table,
    identify_text,
    is_masked,
    parse_celsius,
    parse_int,
    parse_ratio,
    parse_watts,
    split_lines,
)

__all__ = [
    "Agent",
    "ConciseRow",
    "Topology",
    "parse_concise",
    "parse_json",
    "parse_rocminfo",
    "parse_showtopo",
]

#: ``DCU  Temp ...`` (Hygon), ``GPU  Temp ...`` (ROCm 5/6) and the two-line ROCm 6.1+ layout
#: ``Device  Node  IDs  Temp  Power  Partitions ...`` whose second line is units in parentheses.
_HEADER = re.compile(r"^\s*((DCU|HCU|GPU)\s{2,}Temp\b|Device\s{2,}Node\s{2,}IDs\s{2,}Temp\b)")
_RULE = re.compile(r"^\s*=+")


@dataclass(frozen=True)
class ConciseRow:
    """One row of the concise table, already in SI units (``None`` where the tool printed N/A)."""

    index: int
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_cap_watts: float | None = None
    fan_ratio: float | None = None
    vram_used_ratio: float | None = None
    utilization_ratio: float | None = None
    performance_level: str | None = None
    mode: str | None = None


def _field(fields: dict[str, str], *names: str) -> str | None:
    for name in names:
        for key, value in fields.items():
            if key.replace(" ", "").lower() == name.lower():
                return value
    return None


def parse_concise(text: str, ctx: ParseContext) -> tuple[list[ConciseRow], list[ParseError]]:
    """Rows of the concise table; raises when there is no table or no row parses."""
    lines = split_lines(text)
    head = next((i for i, ln in enumerate(lines) if _HEADER.search(ln.text)), None)
    if head is not None:
        # ROCm 6.1+: a units line in parentheses and a rule sit between header and rows.
        drop = set()
        j = head + 1
        if j < len(lines) and lines[j].text.lstrip().startswith("("):
            drop.add(j)
            j += 1
            if j < len(lines) and _RULE.search(lines[j].text):
                drop.add(j)
        lines = [ln for k, ln in enumerate(lines) if k not in drop]
    table = find_aligned_table(lines, _HEADER, stop=_RULE)
    if table is None:
        first = next((ln for ln in lines if not ln.blank), None)
        raise ctx.error("no concise table (header 'DCU  Temp ...') in the output", first)
    rows: list[ConciseRow] = []
    errors: list[ParseError] = []
    label = table.header_line.text.split()[0]
    for line, raw in table.rows:
        fields = dict(raw)
        idx_text = _field(fields, label, "DCU", "HCU", "GPU", "Device")
        try:
            with ctx.at(line):
                index = parse_int(idx_text)
                if index is None or index < 0 or index > 4095:
                    raise ParseError(f"no {label} index in the row")
                rows.append(
                    ConciseRow(
                        index=index,
                        temperature_celsius=parse_celsius(_field(fields, "Temp"), bare_unit="C"),
                        power_watts=parse_watts(_field(fields, "AvgPwr", "Power"), bare_unit="W"),
                        power_cap_watts=parse_watts(_field(fields, "PwrCap"), bare_unit="W"),
                        fan_ratio=parse_ratio(_field(fields, "Fan"), bare_unit="%"),
                        vram_used_ratio=parse_ratio(_field(fields, "VRAM%"), bare_unit="%"),
                        utilization_ratio=parse_ratio(_field(fields, "DCU%", "HCU%", "GPU%"), bare_unit="%"),
                        performance_level=clean(_field(fields, "Perf")),
                        mode=clean(_field(fields, "Mode")),
                    )
                )
        except ParseError as exc:
            # The row's leading number still names the DCU: it stays listed, health unknown.
            exc.device_index, exc.bus_id = identify_text(line.text)
            errors.append(exc)
    if not rows:
        if errors:
            raise errors[0]
        raise ctx.error("the concise table has no rows", table.header_line)
    seen: set[int] = set()
    unique = []
    for row in rows:
        if row.index in seen:
            errors.append(ctx.error(f"{label} {row.index} appears twice; the second row is ignored"))
            continue
        seen.add(row.index)
        unique.append(row)
    return unique, errors


def parse_json(text: str, ctx: ParseContext) -> tuple[list[GpuReading], list[ParseError], str | None]:
    """Readings from the ``--json`` query (memory in the unit each key names: MiB on Hygon)."""
    parsed = parse_rocm_smi_json(text, tool=ctx.tool, command=ctx.command)
    return parsed.readings, parsed.errors, parsed.memory_unit


@dataclass
class Agent:
    """One HSA agent of ``rocminfo`` (DCU / GPU agents only are returned)."""

    name: str | None = None
    marketing_name: str | None = None
    uuid: str | None = None
    unique_id: str | None = None
    device_type: str | None = None
    compute_units: int | None = None
    node: int | None = None
    chip_id: str | None = None
    lineno: int = 0


_AGENT = re.compile(r"^\s*Agent\s+([0-9]+)\s*$")
_KEYVAL = re.compile(r"^  (\S[^:]*?):\s*(.*?)\s*$")  # exactly two spaces: an agent's own keys


def _first_int(text: str | None) -> int | None:
    m = re.match(r"^\s*([0-9]{1,9})\b", text or "")
    return int(m.group(1)) if m else None


def parse_rocminfo(text: str, ctx: ParseContext) -> list[Agent]:
    """The DCU/GPU agents of ``rocminfo``; raises when the output has no agent section."""
    lines = split_lines(text)
    agents: list[Agent] = []
    current: Agent | None = None
    saw_agents = False
    for line in lines:
        m = _AGENT.match(line.text)
        if m:
            saw_agents = True
            current = Agent(lineno=line.lineno)
            agents.append(current)
            continue
        if current is None:
            continue
        kv = _KEYVAL.match(line.text)
        if not kv:
            continue
        key, value = kv.group(1).strip().lower(), kv.group(2)
        if key == "name" and current.name is None:
            current.name = clean(value)
        elif key == "marketing name":
            current.marketing_name = clean(value)
        elif key == "uuid":
            current.uuid = clean(value)
            raw = (current.uuid or "").removeprefix("GPU-")
            current.unique_id = normalize_unique_id(raw) if not is_masked(raw) else None
        elif key == "device type":
            current.device_type = clean(value)
        elif key == "compute unit":
            current.compute_units = _first_int(value)
        elif key == "node":
            current.node = _first_int(value)
        elif key == "chip id":
            m2 = re.search(r"\(0x([0-9a-fA-F]{1,4})\)", value)
            current.chip_id = f"{int(m2.group(1), 16):04x}" if m2 else None
    if not saw_agents:
        first = next((ln for ln in lines if not ln.blank), None)
        raise ctx.error("no 'Agent N' sections in the rocminfo output", first)
    return [a for a in agents if (a.device_type or "").upper() in ("DCU", "GPU", "HCU")]


@dataclass
class Topology:
    """What ``--showtopo`` says: per-pair link type / hops / weight and per-device NUMA."""

    link_type: dict[tuple[int, int], str] = field(default_factory=dict)
    hops: dict[tuple[int, int], int] = field(default_factory=dict)
    weight: dict[tuple[int, int], int] = field(default_factory=dict)
    numa_node: dict[int, int] = field(default_factory=dict)
    numa_affinity: dict[int, int] = field(default_factory=dict)
    errors: list[ParseError] = field(default_factory=list)

    def xgmi_pairs(self) -> list[tuple[int, int]]:
        """Pairs with a direct device link (XGMI, or HSW on BW-series OAM boards)."""
        return sorted(
            (a, b) for (a, b), kind in self.link_type.items() if a < b and kind.upper() in ("XGMI", "HSW")
        )


_NUMA = re.compile(r"^\s*(?:GPU|DCU|HCU)\[([0-9]+)\]\s*:\s*\(Topology\)\s*Numa\s+(Node|Affinity)\s*:?\s*(-?[0-9]+)")
_LABEL = re.compile(r"^(?:GPU|DCU|HCU)\[?([0-9]+)\]?$")
_SECTION = re.compile(r"(Weight|Hops|Link Type)\s+between\s+two", re.I)


def _matrix(lines: list[SourceLine], start: int, ctx: ParseContext, topo: Topology, kind: str) -> None:
    header_at = None
    for i in range(start, min(start + 4, len(lines))):
        words = lines[i].text.split()
        if words and all(_LABEL.match(w) for w in words):
            header_at = i
            break
    if header_at is None:
        topo.errors.append(ctx.error(f"no column header after the '{kind}' banner", lines[start - 1]))
        return
    cols = [int(_LABEL.match(w).group(1)) for w in lines[header_at].text.split()]  # type: ignore[union-attr]
    for line in lines[header_at + 1 :]:
        words = line.text.split()
        if not words or _RULE.match(line.text):
            break
        m = _LABEL.match(words[0])
        if not m or len(words) - 1 != len(cols):
            topo.errors.append(ctx.error(f"malformed '{kind}' matrix row", line))
            continue
        row = int(m.group(1))
        for col, cell in zip(cols, words[1:], strict=True):
            if col == row or cell in ("X", "N/A", "-"):
                continue
            if kind == "link type":
                if re.fullmatch(r"[A-Za-z]+", cell):
                    topo.link_type[(row, col)] = cell.upper()
            elif re.fullmatch(r"[0-9]{1,9}", cell):
                (topo.hops if kind == "hops" else topo.weight)[(row, col)] = int(cell)


def parse_showtopo(text: str, ctx: ParseContext) -> Topology:
    """Parse ``--showtopo`` (reference format; no recorded sample); raises when nothing parses."""
    lines = split_lines(text)
    topo = Topology()
    for i, line in enumerate(lines):
        m = _NUMA.match(line.text)
        if m:
            target = topo.numa_node if m.group(2) == "Node" else topo.numa_affinity
            value = int(m.group(3))
            if value >= 0:
                target[int(m.group(1))] = value
            continue
        s = _SECTION.search(line.text)
        if s and _RULE.match(line.text):
            _matrix(lines, i + 1, ctx, topo, s.group(1).lower())
    if not (topo.link_type or topo.hops or topo.weight or topo.numa_node or topo.numa_affinity):
        if topo.errors:
            raise topo.errors[0]
        first = next((ln for ln in lines if not ln.blank), None)
        raise ctx.error("no topology matrix or NUMA line in the output", first)
    return topo
