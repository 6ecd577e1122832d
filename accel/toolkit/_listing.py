"""The ``-L`` device listings and process rows of nvidia-smi look-alikes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accel.errors import AccelError
from accel.model import (
    Device,
    ProcessUsage,
)

from ._text import ParseContext, SourceLine, split_lines
from ._unit import validated
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


# ``<dev> [GI CI] <pid> [type]`` at the start of a row; possessive quantifiers, so a long
# line that is no process row fails in linear time.  The name and the memory at the end are
# split off without a regex (a lazy name before ``\s+<mem>$`` is quadratic on long lines).
_PROC_HEAD = re.compile(
    r"\s*+(?:\|\s*+)?(?P<dev>[0-9]++)\s++(?:(?:N/A|[0-9]++)\s++(?:N/A|[0-9]++)\s++)?(?P<pid>[0-9]++)\s++"
    r"(?:[CGM+]{1,3}\s++)?(?=\S)"
)
_PROC_MEM = re.compile(r"[0-9]++(?:\.[0-9]++)?(?:[KMG]i?B)?")
_PROC_UNIT = re.compile(r"[KMG]i?B")


def _process_row(text: str) -> tuple[int, int, str, str] | None:
    """``(dev, pid, name, memory text)`` of a process row, or ``None``."""
    m = _PROC_HEAD.match(text)
    if m is None:
        return None
    body = text[m.end() :].rstrip()
    if body.endswith("|"):
        body = body[:-1].rstrip()
    parts = body.rsplit(None, 1)
    if len(parts) != 2:
        return None
    name, mem = parts
    if _PROC_UNIT.fullmatch(mem):
        more = name.rsplit(None, 1)
        if len(more) != 2:
            return None
        name, mem = more[0], more[1] + mem
    if not _PROC_MEM.fullmatch(mem) or not name.strip():
        return None
    return int(m.group("dev")), int(m.group("pid")), name, mem


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
        row = _process_row(line.text)
        if row is None or "process" in line.text.lower():
            continue
        dev, pid, name, mem_text = row
        with ctx.at(line):
            mem = parse_bytes(mem_text, bare_unit=bare_unit, binary_prefixes=True)
        rows.append(ProcessRow(dev, pid, clean(name), mem, line))
    return rows


def processes_of(
    rows: Iterable[ProcessRow], devices: Iterable[Device], *, problems: list[AccelError] | None = None, tool: str = ""
) -> list[ProcessUsage]:
    """Process rows as :class:`ProcessUsage` of the devices with those tool indices.

    With ``problems``, a value no process can have is left out (unknown) and appended there as
    an :class:`~accel.errors.OutOfBoundsError` (see :func:`~accel.toolkit.validated`).
    """
    by_index = {d.index: d.id for d in devices if d.index is not None}
    out: list[ProcessUsage] = []
    for r in rows:
        if r.device_index not in by_index:
            continue
        data = {"pid": r.pid, "device_id": by_index[r.device_index], "name": r.name, "memory_bytes": r.memory_bytes}
        if problems is None:
            out.append(ProcessUsage(**data))
        else:
            device_id = by_index[r.device_index]
            out.append(
                validated(
                    ProcessUsage, data, what=f"{tool} process", tool=tool, device_id=device_id, problems=problems
                )
            )
    return out
