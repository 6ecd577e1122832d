"""The ``-L`` device listings and process rows of nvidia-smi look-alikes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accel.model import (
    Device,
    ProcessUsage,
)

from ._text import ParseContext, SourceLine, split_lines
from ._values import clean, parse_bus_id, parse_bytes

__all__ = ["Listed", "ProcessRow", "parse_listing", "parse_process_rows", "processes_of"]


@dataclass(frozen=True)
class Listed:
    """One line of a ``-L`` listing."""

    index: int
    name: str | None
    uuid: str | None
    bus_id: str | None
    line: SourceLine


_LISTED = re.compile(r"^\s*(?P<word>[A-Za-z]+)\s*#?\s*(?P<index>[0-9]{1,4})\s*[:\uff1a]?\s+(?P<rest>.*)$")


_UUID_PAREN = re.compile(r"\(\s*UUID\s*[:\uff1a]?\s*(?P<uuid>[^)\s]+)\s*\)", re.IGNORECASE)


_UUID_BARE = re.compile(r"(?<![\w-])(?P<uuid>(?:GPU|XPU|MX|MTT|GCU)-[0-9A-Za-z-]{6,})")


_BDF = re.compile(
    r"(?<![0-9A-Fa-f:])(?P<bdf>(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])(?![0-9A-Fa-f])"
)


def parse_listing(text: str, *, words: Sequence[str], ctx: ParseContext) -> list[Listed]:
    """Parse ``-L`` output: ``GPU 0: MXC500 (UUID: GPU-...)``, ``XPU 0: P800 OAM  GPU-...``,
    ``GPU#0  MXC600-AL  0000:06:00.0  Available (UUID: GPU-...)``, ``XPU 0: 00000000:21:00.0``.

    ``words`` are the accepted leading words (``GPU``, ``XPU``).  Lines that do not start with
    one are skipped (banners); a listed line with a malformed index raises a located error.
    """
    accepted = {w.lower() for w in words}
    out: list[Listed] = []
    for line in split_lines(text):
        m = _LISTED.match(line.text)
        if not m or m.group("word").lower() not in accepted:
            continue
        rest = m.group("rest")
        uuid: str | None = None
        um = _UUID_PAREN.search(rest) or _UUID_BARE.search(rest)
        if um:
            uuid = um.group("uuid")
            rest = (rest[: um.start()] + rest[um.end() :]).strip()
        bus_id: str | None = None
        bm = _BDF.search(rest)
        if bm:
            with ctx.at(line):
                bus_id = parse_bus_id(bm.group("bdf"))
            rest = (rest[: bm.start()] + " " + rest[bm.end() :]).strip()
        name = clean(re.sub(r"\s+(Available|Unavailable)\s*$", "", rest).strip(" :"))
        out.append(Listed(int(m.group("index")), name, clean(uuid), bus_id, line))
    return out


@dataclass(frozen=True)
class ProcessRow:
    """One row of a tool's process table: the device's tool index, pid, name, memory."""

    device_index: int
    pid: int
    name: str | None
    memory_bytes: int | None
    line: SourceLine


_PROC_ROW = re.compile(
    r"^\s*\|?\s*(?P<dev>[0-9]+)\s+(?:(?:N/A|[0-9]+)\s+(?:N/A|[0-9]+)\s+)?(?P<pid>[0-9]+)\s+"
    r"(?:[CGM+]{1,3}\s+)?(?P<name>\S.*?)\s+(?P<mem>[0-9]+(?:\.[0-9]+)?\s*(?:[KMG]i?B)?)\s*\|?\s*$"
)


def parse_process_rows(lines: Sequence[SourceLine], ctx: ParseContext, *, bare_unit: str = "MiB") -> list[ProcessRow]:
    """Rows of the ``Processes:`` block of an nvidia-smi look-alike (``ixsmi``, ``mx-smi``,
    ``xpu_smi`` 5.x, ``mthreads-gmi``): ``<dev> [XI CI] <pid> [type] <name> <memory>``.

    Only lines after a line mentioning ``Process`` are read; header, rule and "No running
    processes found" lines do not match.  A bare memory number is in ``bare_unit`` (the header
    says ``Usage(MiB)``).
    """
    rows: list[ProcessRow] = []
    seen_banner = False
    for line in lines:
        if not seen_banner:
            seen_banner = "process" in line.text.lower()
            continue
        m = _PROC_ROW.match(line.text)
        if not m or "process" in line.text.lower():
            continue
        with ctx.at(line):
            mem = parse_bytes(m.group("mem").replace(" ", ""), bare_unit=bare_unit, binary_prefixes=True)
        rows.append(ProcessRow(int(m.group("dev")), int(m.group("pid")), clean(m.group("name")), mem, line))
    return rows


def processes_of(rows: Iterable[ProcessRow], devices: Iterable[Device]) -> list[ProcessUsage]:
    """Process rows as :class:`ProcessUsage` of the devices with those tool indices."""
    by_index = {d.index: d.id for d in devices if d.index is not None}
    return [
        ProcessUsage(pid=r.pid, device_id=by_index[r.device_index], name=r.name, memory_bytes=r.memory_bytes)
        for r in rows
        if r.device_index in by_index
    ]
