"""Parser for ``rocm-smi ... --json`` (AMD) and its Hygon forks (DTK ``rocm-smi``, ``hy-smi``).

One function, text in, readings out; keys are matched by pattern, not by position, because
the forks rename them:

==============================  ===================================  ===========================
AMD (ROCm 6.x)                  Hygon DTK                             parsed into
==============================  ===================================  ===========================
``VRAM Total Memory (B)``       ``vram Total Memory (MiB)``           memory_total_bytes
``VRAM Total Used Memory (B)``  ``vram Total Used Memory (MiB)``      memory_used_bytes
``GPU use (%)``                 ``DCU use (%)`` / ``HCU use (%)``     utilization_ratio
``Temperature (Sensor memory)`` ``Temperature (Sensor mem)``          temperatures_celsius
``Card Series``/``Device Name`` ``Card Series``                       name
==============================  ===================================  ===========================

The unit is read from the key's parenthesis (``B``, ``KiB``, ``MiB``, ``GiB``); any other unit
is an error rather than a guess.  ``N/A``, empty strings and author-masked values (``xxxx``)
are absent, never 0.  Output may be preceded by log lines: the JSON object is located by its
first ``{``.  A card that cannot be parsed is reported as a :class:`~accel.errors.ParseError`
in :attr:`RocmSmiJson.errors` and never hides the cards that did parse; only text with no
parseable card at all raises.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from accel.errors import ParseError

from ._readings import GpuReading, normalize_unique_id

__all__ = ["RocmSmiJson", "is_masked", "parse_rocm_smi_json"]

_UNITS = {"B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
_MEM = re.compile(r"^(vram|vis_vram|gtt)\s+total\s+(used\s+)?memory\s*\(([A-Za-z]+)\)$", re.I)
_USE = re.compile(r"^(gpu|dcu|hcu)\s+use\s*\(%\)$", re.I)
_MEM_USE = re.compile(r"^(gpu|dcu|hcu)\s+memory\s+(use|allocated)\s*\(%\)$", re.I)
_TEMP = re.compile(r"^temperature\s*\(sensor\s+([A-Za-z0-9 _-]+)\)\s*\(c\)$", re.I)
_POWER = re.compile(r"^(average|current socket)\s+graphics\s+package\s+power\s*\(w\)$", re.I)
_MAXPOWER = re.compile(r"^max\s+graphics\s+package\s+power\s*\(w\)$", re.I)
_CARD = re.compile(r"^card([0-9]+)$")
_MASK = re.compile(r"x{3,}", re.I)
_TEMP_LABEL = {"mem": "memory", "hotspot": "junction"}


@dataclass
class RocmSmiJson:
    """Parsed output: one reading per ``cardN`` (``index`` = N), plus per-card problems."""

    readings: list[GpuReading] = field(default_factory=list)
    errors: list[ParseError] = field(default_factory=list)
    driver_version: str | None = None
    #: The memory unit of this output (``B`` for AMD, ``MiB`` for Hygon), as printed.
    memory_unit: str | None = None


def is_masked(text: str) -> bool:
    """Whether a value was masked by whoever published it (``DCU xxxx``, ``TPXxxxx``)."""
    return bool(_MASK.search(text))


def _text(value: Any) -> str | None:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    text = str(value).strip()
    if not text or text.upper() in ("N/A", "NA", "-", "NONE", "UNKNOWN") or is_masked(text):
        return None
    return text


def _float(value: Any, lo: float, hi: float) -> float | None:
    text = _text(value)
    if text is None:
        return None
    try:
        num = float(text.rstrip("%").rstrip("WC").strip())
    except ValueError:
        return None
    if not math.isfinite(num) or num < lo or num > hi:
        return None
    return num


def _int(value: Any) -> int | None:
    text = _text(value)
    if text is None or not re.fullmatch(r"[0-9]{1,30}", text):
        return None
    return int(text)


def _hex4(value: Any) -> str | None:
    text = _text(value)
    if text is None:
        return None
    m = re.fullmatch(r"(?:0x)?([0-9a-fA-F]{1,4})", text)
    return f"{int(m.group(1), 16):04x}" if m else None


def _locate(text: str, tool: str, command: str) -> Any:
    start = text.find("{")
    if start < 0:
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        raise ParseError("no JSON object in the output", tool=tool, command=command, line=first or "<empty>",
                         lineno=1)
    try:
        obj, _ = json.JSONDecoder().raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError) as exc:
        pos = getattr(exc, "pos", start)
        lines = text.splitlines()
        # The error can sit past the last newline (truncated output): name the last line then.
        lineno = min(text.count("\n", 0, pos) + 1, max(len(lines), 1))
        line = lines[lineno - 1] if lines else ""
        raise ParseError(f"malformed JSON ({getattr(exc, 'msg', type(exc).__name__)})", tool=tool,
                         command=command, line=line, lineno=lineno) from exc
    return obj


def _card(name: str, data: dict[str, Any], out: RocmSmiJson, tool: str, command: str) -> GpuReading | None:
    m = _CARD.match(name)
    assert m is not None
    r = GpuReading(index=int(m.group(1)))
    problems: list[str] = []
    for raw_key, value in data.items():
        key = raw_key.strip() if isinstance(raw_key, str) else ""
        if not key:
            continue  # Hygon DTK prints an empty "" key
        mm = _MEM.match(key)
        if mm:
            if mm.group(1).lower() != "vram":
                continue
            unit = mm.group(3)
            scale = _UNITS.get(unit.upper()) if unit not in ("MB", "KB", "GB") else None
            if scale is None:
                problems.append(f"unknown memory unit {unit!r} in key {key!r}")
                continue
            out.memory_unit = out.memory_unit or unit
            num = _int(value)
            if num is None:
                if _text(value) is not None:
                    problems.append(f"{key!r} is not a number: {value!r}")
                continue
            if mm.group(2):
                r.memory_used_bytes = num * scale
            else:
                r.memory_total_bytes = num * scale
            continue
        if _USE.match(key):
            pct = _float(value, 0, 100)
            r.utilization_ratio = pct / 100.0 if pct is not None else None
            continue
        if _MEM_USE.match(key):
            pct = _float(value, 0, 100)
            r.memory_utilization_ratio = pct / 100.0 if pct is not None else None
            continue
        mt = _TEMP.match(key)
        if mt:
            label = mt.group(1).strip().lower()
            temp = _float(value, -273.0, 1000.0)
            if temp is not None:
                r.temperatures_celsius[_TEMP_LABEL.get(label, label)] = temp
            continue
        if _POWER.match(key):
            watts = _float(value, 0, 1e6)
            if watts is not None and r.power_watts is None:
                r.power_watts = watts
            continue
        if _MAXPOWER.match(key):
            r.power_cap_max_watts = _float(value, 0, 1e6)
            continue
        low = key.lower()
        if low == "unique id":
            r.unique_id = normalize_unique_id(_text(value))
        elif low == "serial number":
            r.serial_number = _text(value)
        elif low == "device id":
            r.pci_device_id = _hex4(value)
        elif low == "device rev":
            rev = _hex4(value)
            r.pci_revision = f"0x{int(rev, 16):02x}" if rev and int(rev, 16) <= 0xFF else None
        elif low == "subsystem id":
            r.subsystem_id = _hex4(value)
        elif low in ("card series", "device name", "card model") and r.name is None:
            text = _text(value)
            # "Card Model" is a hex id on AMD ("0x747e"), not a name.
            if text and not re.fullmatch(r"0x[0-9a-fA-F]+", text):
                r.name = text
        elif low == "gfx version":
            text = _text(value)
            r.isa = text if text and text.startswith("gfx") else None
        elif low == "pci bus":
            text = _text(value)
            if text:
                from accel.errors import ValidationError
                from accel.model import normalize_bus_id

                try:
                    r.bus_id = normalize_bus_id(text)
                except ValidationError:
                    problems.append(f"'PCI Bus' is not a bus id: {value!r}")
    total, used = r.memory_total_bytes, r.memory_used_bytes
    if total is not None and used is not None and used > total:
        problems.append(f"used memory {r.memory_used_bytes} exceeds total {r.memory_total_bytes}")
        r.memory_used_bytes = None
    for p in problems:
        out.errors.append(ParseError(f"{name}: {p}", tool=tool, command=command, line=f'"{name}": ...'))
    layer = tool
    for f in ("name", "unique_id", "memory_total_bytes", "memory_used_bytes", "utilization_ratio", "power_watts"):
        if getattr(r, f) not in (None, {}):
            r.sources[f] = layer
    return r


def parse_rocm_smi_json(text: str, *, tool: str = "rocm-smi", command: str = "rocm-smi --json") -> RocmSmiJson:
    """Parse ``rocm-smi --json`` output; raises :class:`~accel.errors.ParseError` only when no
    card parses.  ``tool`` and ``command`` name what ran, for messages."""
    obj = _locate(text, tool, command)
    out = RocmSmiJson()
    if not isinstance(obj, dict):
        raise ParseError(f"the JSON root is a {type(obj).__name__}, not an object", tool=tool, command=command,
                         line=text.strip()[:80])
    for name, data in obj.items():
        if not isinstance(name, str):
            continue
        if name.lower() == "system" and isinstance(data, dict):
            for k, v in data.items():
                if isinstance(k, str) and "driver version" in k.lower():
                    out.driver_version = _text(v)
            continue
        if not _CARD.match(name):
            continue
        if not isinstance(data, dict):
            out.errors.append(ParseError(f"{name} is a {type(data).__name__}, not an object", tool=tool,
                                         command=command, line=f'"{name}": {str(data)[:60]}'))
            continue
        reading = _card(name, data, out, tool, command)
        if reading is not None:
            out.readings.append(reading)
    if not out.readings:
        if out.errors:
            raise out.errors[0]
        raise ParseError("no cardN entries in the JSON", tool=tool, command=command, line=text.strip()[:80])
    out.readings.sort(key=lambda r: r.index or 0)
    return out
