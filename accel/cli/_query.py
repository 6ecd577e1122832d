"""``--query FIELD,... --format csv[,noheader][,nounits]``: nvidia-smi's scripting habit, for
every vendor.

Fields are the model's (``memory_total_bytes``) or nvidia-smi's names for the same thing
(``memory.total``); values are in the model's SI base units (bytes, watts, hertz, celsius, a
0..1 ratio), never rescaled, and the header names the unit (``memory.total [B]``).  A value the
backend did not read is ``[N/A]``, as nvidia-smi prints it, never 0.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..model import Device, Telemetry

__all__ = ["FIELDS", "QueryFormat", "parse_format", "parse_query", "render"]


@dataclass(frozen=True)
class Field:
    name: str
    unit: str | None
    get: Callable[[Device, Telemetry | None], object]


def _t(attr: str) -> Callable[[Device, Telemetry | None], object]:
    return lambda d, t: getattr(t, attr) if t is not None else None


def _clock(name: str) -> Callable[[Device, Telemetry | None], object]:
    return lambda d, t: t.clocks_hertz.get(name) if t is not None else None


def _core(d: Device, t: Telemetry | None) -> object:
    from ._dmon import core_clock

    return core_clock(t) if t is not None else None


#: Every queryable field: the model's name, its unit, and how to read it.
FIELDS: dict[str, Field] = {
    f.name: f
    for f in [
        Field("index", None, lambda d, t: d.index),
        Field("id", None, lambda d, t: d.id),
        Field("uuid", None, lambda d, t: d.uuid),
        Field("vendor", None, lambda d, t: d.vendor),
        Field("kind", None, lambda d, t: d.kind.value),
        Field("model", None, lambda d, t: d.model),
        Field("serial_number", None, lambda d, t: d.serial_number),
        Field("bus_id", None, lambda d, t: d.pci.bus_id if d.pci else None),
        Field("driver", None, lambda d, t: d.versions.driver),
        Field("numa_node", None, lambda d, t: d.numa_node),
        Field("memory_total_bytes", "B", lambda d, t: d.memory_total_bytes),
        Field("memory_used_bytes", "B", _t("memory_used_bytes")),
        Field("memory_free_bytes", "B", _t("memory_free_bytes")),
        Field("utilization_ratio", "ratio", _t("utilization_ratio")),
        Field("memory_utilization_ratio", "ratio", _t("memory_utilization_ratio")),
        Field("power_watts", "W", _t("power_watts")),
        Field("power_limit_watts", "W", lambda d, t: d.power.enforced_watts),
        Field("energy_joules", "J", _t("energy_joules")),
        Field("temperature_celsius", "C", _t("temperature_celsius")),
        Field("fan_ratio", "ratio", _t("fan_ratio")),
        Field("clock_core_hertz", "Hz", _core),
        Field("clock_memory_hertz", "Hz", _clock("memory")),
        Field("ecc_corrected_total", None, _t("ecc_corrected_total")),
        Field("ecc_uncorrected_total", None, _t("ecc_uncorrected_total")),
        Field("health", None, lambda d, t: d.health.state.value),
        Field("timestamp", None, lambda d, t: t.timestamp.isoformat() if t is not None else None),
    ]
}

#: nvidia-smi ``--query-gpu`` names for the same fields (values stay in SI base units).
ALIASES: Mapping[str, str] = {
    "name": "model",
    "gpu_name": "model",
    "gpu_uuid": "uuid",
    "serial": "serial_number",
    "pci.bus_id": "bus_id",
    "driver_version": "driver",
    "memory.total": "memory_total_bytes",
    "memory.used": "memory_used_bytes",
    "memory.free": "memory_free_bytes",
    "utilization.gpu": "utilization_ratio",
    "utilization.memory": "memory_utilization_ratio",
    "power.draw": "power_watts",
    "power.limit": "power_limit_watts",
    "temperature.gpu": "temperature_celsius",
    "fan.speed": "fan_ratio",
    "clocks.sm": "clock_core_hertz",
    "clocks.gr": "clock_core_hertz",
    "clocks.mem": "clock_memory_hertz",
    "ecc.errors.corrected.volatile.total": "ecc_corrected_total",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected_total",
}


@dataclass(frozen=True)
class QueryFormat:
    header: bool = True
    units: bool = True


def parse_query(text: str) -> list[tuple[str, Field]]:
    """``(as asked, field)`` per comma-separated name; an unknown name is a :class:`ConfigError`
    listing the known ones."""
    out = []
    for raw in text.split(","):
        name = raw.strip()
        key = ALIASES.get(name, name)
        if key not in FIELDS:
            known = ", ".join(sorted(FIELDS))
            raise ConfigError(f"--query: unknown field {name!r}; known: {known} (and nvidia-smi's names)")
        out.append((name, FIELDS[key]))
    return out


def parse_format(text: str) -> QueryFormat:
    """``csv``, ``csv,noheader``, ``csv,nounits``, ``csv,noheader,nounits``."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or parts[0] != "csv" or any(p not in ("noheader", "nounits") for p in parts[1:]):
        raise ConfigError(f"--format: expected csv[,noheader][,nounits], got {text!r}")
    return QueryFormat(header="noheader" not in parts, units="nounits" not in parts)


def _value(value: object, unit: str | None, fmt: QueryFormat) -> str:
    if value is None:
        return "[N/A]"
    # Floats as short as exact allows (repr), integral ones without ".0"; never rescaled.
    text = (f"{value:.0f}" if value.is_integer() else repr(value)) if isinstance(value, float) else str(value)
    return f"{text} {unit}" if fmt.units and unit is not None and unit != "ratio" else text


def _cell(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow([text])
        return buf.getvalue()
    return text


def render(
    fields: Sequence[tuple[str, Field]],
    rows: Sequence[tuple[Device, Telemetry | None]],
    fmt: QueryFormat,
    *,
    header: bool = True,
) -> str:
    """The CSV text: ``, ``-separated like nvidia-smi, a cell quoted only where it needs it."""
    lines = []
    if fmt.header and header:
        lines.append(", ".join(_cell(f"{n} [{f.unit}]" if fmt.units and f.unit else n) for n, f in fields))
    for device, sample in rows:
        lines.append(", ".join(_cell(_value(f.get(device, sample), f.unit, fmt)) for _, f in fields))
    return "\n".join(lines)
