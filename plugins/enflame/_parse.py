"""Parsers for Enflame ``efsmi``: the default table (v1.2 and 1.6 layouts) and ``efsmi -q``.

* the table: a banner box, ``EFSMI <ver>  Driver Ver: <ver>``, two header rows (``DEV NAME |
  FW VER | BUS-ID ECC`` / ``TEMP Dpm|Lpm Pwr(Usage/Cap) | Mem GCU Virt | DUsed SN``) and two
  rows per device.  Bus ids have no domain (``00:2e:00.0``); temperatures are ``39 C`` or
  ``34℃``; v1.2 doubles its rules and squeezes ``49120MiB Disable`` into one chunk.  SR-IOV
  virtual functions (``GCU Virt`` = ``SRIOV``) of one card share its serial number.
* ``-q``: ``DEV ID n`` sections with Device Info (UUID, SN, Health), PCIe Info (split
  Domain/Bus/Dev/Func, current vs max link), Power, Device Mem Info (Total/Reserved/Used/Free
  Size), Temperature, ECC Mode and RMA Info (Flags, Total DBE).  An elided section (``...``,
  as in the sample's ``DEV ID 1``) yields no device and a problem saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accel.errors import ParseError
from accel.model import Action, ConditionScope, HealthCondition, Severity, Subsystem
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
    condition,
    first_match,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_int,
    parse_kv,
    parse_power_pair,
    parse_ratio,
    parse_watts,
    split_lines,
    table_under_header,
)

__all__ = ["EfsmiQuery", "EfsmiTable", "is_vf", "normalise_model", "parse_query", "parse_table", "rma_conditions"]

TOOL = "efsmi"
SEARCH_PATH = ("/usr/bin", "/usr/local/bin", "/usr/local/efsmi")

_BANNER = re.compile(r"EFSMI\s*:?\s*V?(?P<efsmi>[0-9][\w.]*)\s+Driver Ver\s*:\s*(?P<driver>\S+)", re.IGNORECASE)
_HEADER = re.compile(r"^\s*\|\s*DEV\s+NAME\b")
_DEV_ID = re.compile(r"^DEV ID\s+(?P<n>[0-9]+)$")
_GEN = re.compile(r"^\s*Gen\s*(?P<n>[0-9]+)\s*$", re.IGNORECASE)
_WIDTH = re.compile(r"^\s*x\s*(?P<n>[0-9]+)\s*$", re.IGNORECASE)


@dataclass
class EfsmiTable(ToolView):
    """What the default ``efsmi`` view printed."""

    efsmi_version: str | None = None


def normalise_model(name: str | None) -> str | None:
    """efsmi 1.2 prints ``S60``, 1.6 ``Enflame S60G``: one naming, with the vendor prefix."""
    if name is None or name.lower().startswith("enflame"):
        return name
    return f"Enflame {name}"


def _set_model(r: UnitReading, raw: str | None) -> None:
    r.model = normalise_model(raw)
    if raw is not None and r.model != raw:
        r.extras["enflame.com/rawName"] = raw


def is_vf(reading: UnitReading) -> bool:
    """An SR-IOV virtual function (``GCU Virt`` = ``SRIOV``)."""
    mode = reading.extras.get("enflame.com/gcuVirt")
    return isinstance(mode, str) and mode.upper().startswith("SRIOV")


def _on(text: str | None) -> bool | None:
    value = clean(text)
    if value is None:
        return None
    return value.lower() in ("enable", "enabled", "on", "true", "yes")


def _table_reading(rec: BoxRecord, ctx: ParseContext) -> UnitReading:
    fields = dict(rec.fields)
    # v1.2 squeezes "49120MiB Disable" (Mem and GCU Virt one space apart) into one chunk.
    mem_words = (fields.get("Mem") or "").split()
    if len(mem_words) == 2 and "GCU Virt" not in fields:
        fields["Mem"], fields["GCU Virt"] = mem_words
    v = RecordReader.start(rec, ctx, index="DEV", fields=fields)
    r = v.reading
    _set_model(r, v.text("NAME"))
    r.bus_id = v.strict(parse_bus_id, "BUS-ID")
    r.ecc_enabled = _on(v.text("ECC"))
    fw = v.text("FW VER") or v.text("Boot FW VER")
    if fw:
        r.firmware["fw"] = fw
    r.temperature_celsius = v.get(parse_celsius, "TEMP", 1)
    power = v.get(lambda s: parse_power_pair(s, space_separated=True), "Pwr(Usage/Cap)", 1)
    if power is not None:
        r.power_watts, r.power_limit_watts = power
    r.memory_total_bytes = v.get(parse_bytes, "Mem", 1)
    r.utilization_ratio = v.get(parse_ratio, "DUsed", 1)
    r.serial_number = v.text("SN")
    v.extras("enflame.com", {"GCU Virt": "gcuVirt", "Dpm": "dpm", "Lpm": "lpm"})
    if is_vf(r):
        r.is_virtual_function = True
    return r


def parse_table(text: str, *, command: str = "efsmi") -> EfsmiTable:
    """Parse the default ``efsmi`` table; a device that cannot be read goes to ``problems``."""
    ctx = ParseContext(TOOL, command)
    what = "the '| DEV  NAME | FW VER | BUS-ID' table"
    lines, readings, problems, _end = table_under_header(text, ctx, _HEADER, what, lambda r: _table_reading(r, ctx))
    banner = first_match(lines, _BANNER)
    version = (banner.group("efsmi"), banner.group("driver")) if banner else (None, None)
    return EfsmiTable(efsmi_version=version[0], driver_version=version[1], readings=readings, problems=problems)


# --------------------------------------------------------------------------------------------
# efsmi -q
# --------------------------------------------------------------------------------------------


@dataclass
class EfsmiQuery(ToolView):
    """What ``efsmi -q`` printed."""


def _get(sec: KVSection, *path: str) -> tuple[str | None, SourceLine | None]:
    """The value at ``section/.../key`` and its line (keys also found loose in the section)."""
    *sections, key = path
    current: KVSection | None = sec
    for name in sections:
        current = current.section(name) if current is not None else None
    if current is None:
        return None, None
    entry = current.entry(key)
    return (entry.value, entry.line) if entry is not None else (None, None)


def _gen(text: str) -> int:
    m = _GEN.match(text)
    if not m:
        raise ParseError(f"expected a PCIe generation like 'Gen4', got {text!r}")
    return int(m.group("n"))


def _width(text: str) -> int:
    m = _WIDTH.match(text)
    if not m:
        raise ParseError(f"expected a link width like 'X16', got {text!r}")
    return int(m.group("n"))


def _hex_field(text: str, digits: int) -> str:
    value = text.strip().lower().removeprefix("0x")
    if not re.fullmatch(rf"[0-9a-f]{{1,{digits}}}", value):
        raise ParseError(f"expected up to {digits} hex digits, got {text!r}")
    return value.rjust(digits, "0")


def rma_conditions(flag: bool | None, dbe: int | None) -> list[HealthCondition]:
    """RMA flag and double-bit ECC error count of ``efsmi -q`` as conditions."""
    out: list[HealthCondition] = []
    if flag:
        out.append(
            condition(
                Subsystem.BOARD,
                "RmaRequired",
                Severity.CRITICAL,
                Action.REPLACE_HARDWARE,
                "efsmi -q RMA Info Flags is True: the card is marked for return",
                code="enflame.rma:flags",
                scope=ConditionScope.BOARD,
            )
        )
    if dbe:
        out.append(
            condition(
                Subsystem.MEMORY,
                "UncorrectableMemoryError",
                Severity.ERROR,
                Action.RESET_DEVICE,
                f"efsmi -q reports {dbe} double-bit ECC error(s) (RMA Info Total DBE)",
                code="enflame.rma:total-dbe",
                count=dbe,
            )
        )
    return out


def _query_reading(sec: KVSection, index: int, ctx: ParseContext) -> UnitReading:
    r = UnitReading(index=index)
    lenient = Lenient(ctx, r)
    _set_model(r, clean(_get(sec, "Device Info", "Dev Name")[0]))
    r.uuid = clean(_get(sec, "Device Info", "Dev UUID")[0])
    r.serial_number = clean(_get(sec, "Device Info", "Dev SN")[0])
    part, _ = _get(sec, "Device Info", "Dev PN")
    if clean(part):
        r.extras["enflame.com/partNumber"] = clean(part) or ""
    health, hline = _get(sec, "Device Info", "Health")
    # Health is earned: only a printed Health field (True or otherwise) is a health reading.
    r.health_read = clean(health) is not None
    if clean(health) is not None and clean(health) != "True":
        r.conditions.append(
            condition(
                Subsystem.DEVICE,
                "DeviceUnhealthy",
                Severity.CRITICAL,
                Action.INVESTIGATE,
                f"efsmi -q Device Info Health is {health!r} (line {hline.lineno if hline else '?'})",
                code=f"enflame.health:{clean(health)}",
            )
        )
    vendor, vline = _get(sec, "PCIe Info", "Vendor ID")
    r.pci_vendor_id = lenient.get(lambda s: _hex_field(s, 4), clean(vendor), vline, "Vendor ID")
    device, dline = _get(sec, "PCIe Info", "Device ID")
    r.pci_device_id = lenient.get(lambda s: _hex_field(s, 4), clean(device), dline, "Device ID")
    parts = [_get(sec, "PCIe Info", k) for k in ("Domain", "Bus", "Dev", "Func")]
    if all(clean(v) is not None for v, _ in parts):
        (dom, line), (bus, _), (dev, _), (fn, _) = parts
        assert dom is not None and bus is not None and dev is not None and fn is not None
        r.bus_id = lenient.strict(
            lambda _s: parse_bus_id(f"{_hex_field(dom, 4)}:{_hex_field(bus, 2)}:{_hex_field(dev, 2)}.{fn.strip()}"),
            dom,
            line,
            "PCIe Domain/Bus/Dev/Func",
        )
    for key, attr, fn_ in (
        ("Max Link Speed", "link_gen_max", _gen),
        ("Cur Link Speed", "link_gen_current", _gen),
        ("Max Link Width", "link_width_max", _width),
        ("Cur Link Width", "link_width_current", _width),
    ):
        value, line = _get(sec, "PCIe Info", key)
        setattr(r, attr, lenient.get(fn_, clean(value), line, key))
    if r.link_width_current is not None and r.link_width_max is not None and r.link_width_current < r.link_width_max:
        # Idle links drop their speed to save power; a narrower width is a seating or slot problem.
        r.conditions.append(
            condition(
                Subsystem.PCIE,
                "PcieLinkDegraded",
                Severity.WARNING,
                Action.RESEAT_OR_CHECK_MECHANICALS,
                f"PCIe link runs x{r.link_width_current} of x{r.link_width_max}",
            )
        )
    power, pline = _get(sec, "Power Info", "Cur Power")
    r.power_watts = lenient.get(parse_watts, power, pline, "Cur Power")
    cap, cline = _get(sec, "Power Info", "Power Capa")
    r.power_limit_watts = lenient.get(parse_watts, cap, cline, "Power Capa")
    for key, attr in (
        ("Total Size", "memory_total_bytes"),
        ("Reserved Size", "memory_reserved_bytes"),
        ("Used Size", "memory_used_bytes"),
        ("Mem Size", "memory_total_bytes"),  # older drivers
    ):
        value, line = _get(sec, "Device Mem Info", key)
        if value is not None and getattr(r, attr) is None:
            setattr(r, attr, lenient.get(parse_bytes, value, line, key))
    temp, tline = _get(sec, "Temperature Info", "GCU Temp")
    r.temperature_celsius = lenient.get(parse_celsius, temp, tline, "GCU Temp")
    usage, uline = _get(sec, "Device Usage Info", "GCU Usage")
    r.utilization_ratio = lenient.get(lambda s: parse_ratio(s.replace(" ", "")), usage, uline, "GCU Usage")
    current, _ = _get(sec, "ECC Mode", "Current")
    pending, _ = _get(sec, "ECC Mode", "Pending")
    r.ecc_enabled = _on(current)
    if _on(pending) is not None and r.ecc_enabled is not None:
        r.ecc_pending = _on(pending) != r.ecc_enabled
    flags, _ = _get(sec, "RMA Info", "Flags")
    dbe, dbe_line = _get(sec, "RMA Info", "Total DBE")
    dbe_count = lenient.get(parse_int, dbe, dbe_line, "Total DBE")
    r.ecc_uncorrected_total = dbe_count
    r.conditions.extend(rma_conditions(_on(flags), dbe_count))
    return r


def parse_query(text: str, *, command: str = "efsmi -q") -> EfsmiQuery:
    """Parse ``efsmi -q``; an elided or unreadable ``DEV ID`` section goes to ``problems``."""
    ctx = ParseContext(TOOL, command)
    lines = split_lines(text)
    ctx.require(lines, "the efsmi -q report")
    root = parse_kv(lines)
    sections = [(s, _DEV_ID.match(s.name or "")) for s in root.walk()]
    devs = [(s, m) for s, m in sections if m is not None]
    if not devs:
        raise ctx.error("no 'DEV ID n' section in the output")
    out = EfsmiQuery()
    for sec, m in devs:
        index = int(m.group("n"))
        out.driver_version = out.driver_version or clean(_get(sec, "Driver Info", "Ver")[0])
        if not sec.sections and not sec.entries:
            out.problems.append(ctx.error(f"DEV ID {index} has no fields (elided in this output)", sec.line))
            continue
        try:
            out.readings.append(_query_reading(sec, index, ctx))
        except ParseError as exc:
            out.problems.append(exc)
    return out
