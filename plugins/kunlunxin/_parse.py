"""Parsers for Kunlunxin ``xpu_smi`` / ``xpu-smi``: two unrelated layouts, ``-L`` and ``topo -m``.

* driver 4.x (R200/R300): ``Runtime Version`` / ``Driver Version`` lines, then ``DEVICES``,
  ``VIDEO`` and ``PROCESSES`` tables ruled with bare dashes, one row per device: DevID, PCI
  Addr, Model, SN (masked ``02Kxxx`` in the sample), INODE ``/dev/xpuN``, UseRate, L3 and
  Memory as ``0 / 32768 MB`` (MB meaning MiB: 32768 MB is the R300's 32 GiB).
* driver 5.x (P800): an nvidia-smi-like box, three rows per XPU with ``L3-Usage`` and
  ``SR-IOV M.``, memory in MiB, ``Volatile Uncorr. ECC``.
* ``-L``: ``XPU 0: P800 OAM  GPU-<uuid>`` (or ``XPU 0: 00000000:21:00.0`` on some builds).
* ``topo -m`` (no sample): ``XL`` inside groups, ``SYS`` across NUMA, ``PIX``/``PHB`` to NICs.

Intel's GPU tool is also called ``xpu-smi``; its output has none of these landmarks, so it
is refused with a :class:`ParseError` that says so rather than read as Kunlunxin's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    BoxRecord,
    ParseContext,
    ProcessRow,
    RecordReader,
    SourceLine,
    ToolView,
    UnitReading,
    clean,
    condition,
    find_box_tables,
    is_masked,
    parse_bus_id,
    parse_bytes,
    parse_celsius,
    parse_int,
    parse_process_rows,
    parse_ratio,
    parse_used_total,
    parse_watts,
    read_header_records,
    read_records,
    select_table,
    split_lines,
)

__all__ = ["XpuSmi", "parse_xpu_smi"]

#: Both names ship with the driver; ``xpu_smi`` first (Intel's tool is ``xpu-smi`` only).
TOOLS = ("xpu_smi", "xpu-smi")
SEARCH_PATH = ("/usr/local/bin", "/usr/bin")

_RUNTIME4 = re.compile(r"^\s*Runtime Version:\s*(?P<v>\S+)")
_DRIVER4 = re.compile(r"^\s*Driver Version:\s*(?P<v>\S+)")
_BANNER5 = re.compile(r"XPU-SMI\s+Driver Version:\s*(?P<driver>\S+)(?:\s+XPU-RT Version:\s*(?P<rt>\S+))?")
_DEVICES4 = re.compile(r"\|\s*DevID\s*\|\s*PCI Addr\s*\|")
_PROCS4 = re.compile(r"\|\s*DevID\s*\|\s*PID\s*\|")
_VIDEO4 = re.compile(r"\|\s*DevID\s*\|\s*Model\s*\|\s*DEC\s*\|")


@dataclass
class XpuSmi(ToolView):
    """What ``xpu_smi`` printed; ``layout`` is ``"4.x"`` or ``"5.x"``."""

    layout: str = ""
    runtime_version: str | None = None


def ecc_condition(count: int) -> HealthCondition:
    """Volatile uncorrectable ECC errors since the driver loaded."""
    return condition(
        Subsystem.MEMORY,
        "UncorrectableMemoryError",
        Severity.ERROR,
        Action.RESET_DEVICE,
        f"xpu_smi reports {count} volatile uncorrectable ECC error(s)",
        code="kunlunxin.ecc:volatile-uncorrectable",
        count=count,
    )


def _mib_pair(text: str) -> tuple[int | None, int | None]:
    # 4.x prints "0 / 32768 MB" meaning MiB (32768 MB is the R300's 32 GiB).
    return parse_used_total(text, binary_prefixes=True)


def _l3(v: RecordReader, column: str, row: int = 0) -> None:
    l3 = v.get(_mib_pair, column, row)
    if l3 is not None and l3[1] is not None:
        v.reading.extras["kunlunxin.com/l3TotalBytes"] = l3[1]


def _reading4(rec: BoxRecord, ctx: ParseContext) -> UnitReading:
    v = RecordReader.start(rec, ctx, index="DevID")
    r = v.reading
    r.bus_id = v.strict(parse_bus_id, "PCI Addr")
    r.model = v.text("Model")
    serial = v.text("SN")
    if serial is not None and is_masked(serial):
        r.extras["kunlunxin.com/serialMasked"] = serial
    else:
        r.serial_number = serial
    node = v.text("INODE")
    if node is not None:
        r.device_nodes.append(node)
    r.utilization_ratio = v.get(parse_ratio, "UseRate")
    mem = v.get(_mib_pair, "Memory")
    if mem is not None:
        r.memory_used_bytes, r.memory_total_bytes = mem
    _l3(v, "L3")
    return r


def _reading5(rec: BoxRecord, ctx: ParseContext) -> UnitReading:
    # "00000000:03:00.0 N/A": the bus id and Disp.A share one chunk (a single space apart).
    fields = dict(rec.fields)
    fields["Bus-Id"] = next(iter((fields.get("Bus-Id") or "").split()), "")
    v = RecordReader.start(rec, ctx, index="XPU", fields=fields)
    r = v.reading
    r.model = v.text("Name")
    r.bus_id = v.strict(parse_bus_id, "Bus-Id")
    ecc = v.get(parse_int, "Volatile Uncorr. ECC")
    if ecc is not None:
        r.ecc_uncorrected_total = ecc
        r.health_read = True  # a numeric uncorrected-ECC counter is a health reading
        if ecc > 0:
            r.conditions.append(ecc_condition(ecc))
    r.fan_ratio = v.get(parse_ratio, "Fan", 1)
    r.temperature_celsius = v.get(parse_celsius, "Temp", 1)
    power = v.get(lambda s: [parse_watts(p) for p in s.split("/")], "Pwr:Usage/Cap", 1)
    if power is not None and len(power) == 2:
        r.power_watts, r.power_limit_watts = power
    mem = v.get(parse_used_total, "Memory-Usage", 1)
    if mem is not None:
        r.memory_used_bytes, r.memory_total_bytes = mem
    r.utilization_ratio = v.get(parse_ratio, "XPU-Util", 1)
    _l3(v, "L3-Usage", 2)
    v.extras(
        "kunlunxin.com",
        {
            "Persistence-M": "persistenceMode",
            "Perf": "perfState",
            "Compute M.": "computeMode",
            "SR-IOV M.": "sriovMode",
        },
    )
    return r


def sriov_enabled(reading: UnitReading) -> bool:
    mode = reading.extras.get("kunlunxin.com/sriovMode")
    return isinstance(mode, str) and mode.lower() in ("enabled", "enable", "on")


def _records4(lines: list[SourceLine], pattern: re.Pattern[str]) -> tuple[list[BoxRecord], int]:
    start = next((i for i, ln in enumerate(lines) if pattern.search(ln.text)), None)
    if start is None:
        return [], len(lines)
    return read_header_records(lines, [lines[start].text], start=start + 1)


def parse_xpu_smi(text: str, *, command: str = "xpu_smi") -> XpuSmi:
    """Parse the default view of either layout; a device that cannot be read goes to ``problems``."""
    tool = command.split()[0] if command else "xpu_smi"
    ctx = ParseContext(tool, command)
    lines = split_lines(text)
    ctx.require(lines, "the xpu_smi device table")
    banner5 = next((m for m in (_BANNER5.search(ln.text) for ln in lines) if m), None)
    if banner5 is not None:
        out = XpuSmi(layout="5.x", driver_version=banner5.group("driver"), runtime_version=clean(banner5.group("rt")))
        table = select_table(find_box_tables(lines), ("XPU", "Bus-Id"), ctx, text, "XPU-SMI device table")
        out.readings, out.problems = read_records(table.records, lambda rec: _reading5(rec, ctx))
        out.processes = parse_process_rows([ln for ln in lines if ln.lineno > table.end_lineno], ctx)
        return out
    if any(_DEVICES4.search(ln.text) for ln in lines):
        out = XpuSmi(layout="4.x")
        for ln in lines:
            m4 = _RUNTIME4.match(ln.text)
            if m4 and out.runtime_version is None:
                out.runtime_version = m4.group("v")
            m4 = _DRIVER4.match(ln.text)
            if m4 and out.driver_version is None:
                out.driver_version = m4.group("v")
        records, _end = _records4(lines, _DEVICES4)
        out.readings, out.problems = read_records(records, lambda rec: _reading4(rec, ctx))
        # The VIDEO table lists every device again, one row each: a DevID there that the
        # DEVICES table did not yield (a row lost to a mangled line) is a device, not read.
        video, _ = _records4(lines, _VIDEO4)
        read = {r.index for r in out.readings} | {e.device_index for e in out.problems}
        for rec in video:
            dev_text = clean(rec.fields.get("DevID"))
            dev = int(dev_text) if dev_text is not None and dev_text.isdigit() and len(dev_text) <= 6 else None
            if dev is not None and dev not in read:
                err = ctx.error(f"DevID {dev} is in the VIDEO table but no DEVICES row was read for it", rec.first_line)
                err.device_index = dev
                out.problems.append(err)
                read.add(dev)
        procs, _ = _records4(lines, _PROCS4)
        for rec in procs:
            f = rec.fields
            with ctx.at(rec.first_line):
                dev, pid = parse_int(f.get("DevID")), parse_int(f.get("PID"))
                mem = parse_bytes(f.get("Memory"), bare_unit="MiB", binary_prefixes=True)
            if dev is not None and pid is not None:
                out.processes.append(ProcessRow(dev, pid, clean(f.get("Command")), mem, rec.first_line))
        return out
    raise ctx.error(
        "not Kunlunxin xpu_smi output (no 'XPU-SMI' banner, no 'DevID | PCI Addr' table); "
        "Intel's GPU tool is also called xpu-smi"
    )
