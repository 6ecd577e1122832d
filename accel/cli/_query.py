"""``--query FIELD,... --format csv[,noheader][,nounits]``: nvidia-smi's scripting habit, for
every vendor.

A field is asked for by one of two kinds of name, and the name decides the unit:

* the model's name (``memory_total_bytes``, ``power_watts``): the model's SI base value (bytes,
  watts, hertz, celsius, a 0..1 ratio), never rescaled; the header names the unit
  (``memory_total_bytes [B]``);
* nvidia-smi's name (``memory.total``, ``power.draw``, ``clocks.sm``): the value nvidia-smi
  would print, in its unit and with its header (``memory.total [MiB]`` / ``81559 MiB``,
  ``power.draw [W]`` / ``46.83 W``, ``clocks.current.sm [MHz]`` / ``1980 MHz``, ``utilization.gpu
  [%]`` / ``0 %``, ``temperature.gpu`` / ``46``, ``pci.bus_id`` / ``00000000:1B:00.0``).  An alias
  is answered under nvidia-smi's canonical name, as nvidia-smi does (``clocks.sm`` is printed as
  ``clocks.current.sm [MHz]``, ``used_memory`` as ``used_gpu_memory [MiB]``).

``nounits`` drops the unit after each value and keeps it in the header; ``noheader`` drops the
header line: what nvidia-smi does.  A value the backend did not read is ``[N/A]``, as nvidia-smi
prints it, never 0.  A cell is quoted only when it holds a comma, quote or newline.

The nvidia-smi formats follow real nvidia-smi CSV output quoted in public repositories (found
with the ``search`` tool; no nvidia-smi sample ships in the vendor samples, whose nvidia-smi
clone ``ixsmi`` prints the same ``MiB`` / ``%`` cells: ``iluvatar/ixsmi-query-gpu-csv_*``):
``--query-gpu=clocks.sm,clocks.mem,power.draw --format=csv`` printing ``clocks.current.sm [MHz],
clocks.current.memory [MHz], power.draw [W]`` / ``2827 MHz, 14001 MHz, 46.83 W``;
``timestamp, name, temperature.gpu, utilization.gpu [%], power.draw [W]`` / ``..., 46, 0 %, 8.48
W`` (no unit for temperature); ``csv,nounits`` keeping ``power.draw [W]`` in the header over
``48.99``; ``--query-compute-apps=pid,process_name,used_memory`` printing ``pid, process_name,
used_gpu_memory [MiB]`` / ``..., 6010 MiB``; ``pci.bus_id`` as ``00000000:9D:00.0`` (8-digit
domain, upper-case hex) where ``lspci`` prints ``0000:9d:00.0``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..errors import ConfigError
from ..model import Device, ProcessUsage, Telemetry

__all__ = [
    "FIELDS",
    "PROCESS_FIELDS",
    "PROCESS_SMI_FIELDS",
    "SMI_FIELDS",
    "Field",
    "GpuRow",
    "ProcessRow",
    "QueryFormat",
    "parse_format",
    "parse_process_query",
    "parse_query",
    "render",
    "smi_bus_id",
]

R = TypeVar("R")

#: A ``--query-gpu`` row: the device and its sample (``None`` when none was read).
GpuRow = tuple[Device, Telemetry | None]
#: A ``ps --query-compute-apps`` row: the process and its device (``None`` if not listed).
ProcessRow = tuple[ProcessUsage, Device | None]


@dataclass(frozen=True)
class Field(Generic[R]):
    """One queryable column.

    ``name`` is what the header prints, ``unit`` the header's ``[unit]`` and each value's suffix
    (``None``: neither), ``get`` reads the model's value, and ``show`` (nvidia-smi's fields only)
    turns that SI value into nvidia-smi's number text (``None``: the model's value as it is).
    """

    name: str
    unit: str | None
    get: Callable[[R], object]
    show: Callable[[float], str] | None = None


# -- values: the model's, and nvidia-smi's conversions of them ------------------------------------


def _tel(attr: str) -> Callable[[GpuRow], object]:
    return lambda row: getattr(row[1], attr) if row[1] is not None else None


def _clock(*names: str) -> Callable[[GpuRow], object]:
    """The first of ``names`` in the sample's clocks, else the core clock under any vendor name."""

    def get(row: GpuRow) -> object:
        from ._dmon import core_clock

        t = row[1]
        if t is None:
            return None
        found = next((t.clocks_hertz[n] for n in names if n in t.clocks_hertz), None)
        return found if found is not None or "memory" in names else core_clock(t)

    return get


def _memory_total(row: GpuRow) -> object:
    d, t = row
    return d.memory_total_bytes if d.memory_total_bytes is not None else (t.memory_total_bytes if t else None)


def _mib(value: float) -> str:
    return str(int(value) // 2**20)  # nvidia-smi prints whole MiB


def _percent(value: float) -> str:
    return f"{value * 100:.0f}"


def _watts(value: float) -> str:
    return f"{value:.2f}"  # nvidia-smi: 46.83 W, 400.00 W


def _mhz(value: float) -> str:
    return f"{value / 1e6:.0f}"


def _whole(value: float) -> str:
    return f"{value:.0f}"


def smi_bus_id(bus_id: str) -> str:
    """nvidia-smi's spelling of a PCI address: ``0000:1b:00.0`` -> ``00000000:1B:00.0``."""
    domain, sep, rest = bus_id.partition(":")
    if not sep:
        return bus_id.upper()
    try:
        return f"{int(domain, 16):08X}:{rest.upper()}"
    except ValueError:
        return bus_id.upper()


def _smi_bus(row: GpuRow) -> object:
    pci = row[0].pci
    return smi_bus_id(pci.bus_id) if pci is not None else None


def _pci(attr: str) -> Callable[[GpuRow], object]:
    return lambda row: getattr(row[0].pci, attr) if row[0].pci is not None else None


#: Every model field of ``ls``/``watch --query``: its unit (SI base) and how to read it.
FIELDS: dict[str, Field[GpuRow]] = {
    f.name: f
    for f in [
        Field[GpuRow]("index", None, lambda r: r[0].index),
        Field[GpuRow]("id", None, lambda r: r[0].id),
        Field[GpuRow]("uuid", None, lambda r: r[0].uuid),
        Field[GpuRow]("vendor", None, lambda r: r[0].vendor),
        Field[GpuRow]("kind", None, lambda r: r[0].kind.value),
        Field[GpuRow]("model", None, lambda r: r[0].model),
        Field[GpuRow]("serial_number", None, lambda r: r[0].serial_number),
        Field[GpuRow]("bus_id", None, lambda r: r[0].pci.bus_id if r[0].pci else None),
        Field[GpuRow]("driver", None, lambda r: r[0].versions.driver),
        Field[GpuRow]("numa_node", None, lambda r: r[0].numa_node),
        Field[GpuRow]("memory_total_bytes", "B", _memory_total),
        Field[GpuRow]("memory_used_bytes", "B", _tel("memory_used_bytes")),
        Field[GpuRow]("memory_free_bytes", "B", _tel("memory_free_bytes")),
        Field[GpuRow]("utilization_ratio", "ratio", _tel("utilization_ratio")),
        Field[GpuRow]("memory_utilization_ratio", "ratio", _tel("memory_utilization_ratio")),
        Field[GpuRow]("power_watts", "W", _tel("power_watts")),
        Field[GpuRow]("power_limit_watts", "W", lambda r: r[0].power.enforced_watts),
        Field[GpuRow]("energy_joules", "J", _tel("energy_joules")),
        Field[GpuRow]("temperature_celsius", "C", _tel("temperature_celsius")),
        Field[GpuRow]("fan_ratio", "ratio", _tel("fan_ratio")),
        Field[GpuRow]("clock_core_hertz", "Hz", _clock()),
        Field[GpuRow]("clock_memory_hertz", "Hz", _clock("memory")),
        Field[GpuRow]("ecc_corrected_total", None, _tel("ecc_corrected_total")),
        Field[GpuRow]("ecc_uncorrected_total", None, _tel("ecc_uncorrected_total")),
        Field[GpuRow]("health", None, lambda r: r[0].health.state.value),
        Field[GpuRow]("timestamp", None, lambda r: r[1].timestamp.isoformat() if r[1] is not None else None),
    ]
}

_SMI_GPU: list[tuple[Field[GpuRow], tuple[str, ...]]] = [
    (Field[GpuRow]("index", None, lambda r: r[0].index), ()),
    (Field[GpuRow]("name", None, lambda r: r[0].model), ("gpu_name",)),
    (Field[GpuRow]("uuid", None, lambda r: r[0].uuid), ("gpu_uuid",)),
    (Field[GpuRow]("serial", None, lambda r: r[0].serial_number), ("gpu_serial",)),
    (Field[GpuRow]("pci.bus_id", None, _smi_bus), ("gpu_bus_id",)),
    (Field[GpuRow]("driver_version", None, lambda r: r[0].versions.driver), ()),
    (Field[GpuRow]("vbios_version", None, lambda r: r[0].versions.firmware.get("vbios")), ()),
    (Field[GpuRow]("memory.total", "MiB", _memory_total, _mib), ()),
    (Field[GpuRow]("memory.used", "MiB", _tel("memory_used_bytes"), _mib), ()),
    (Field[GpuRow]("memory.free", "MiB", _tel("memory_free_bytes"), _mib), ()),
    (Field[GpuRow]("utilization.gpu", "%", _tel("utilization_ratio"), _percent), ()),
    (Field[GpuRow]("utilization.memory", "%", _tel("memory_utilization_ratio"), _percent), ()),
    (Field[GpuRow]("fan.speed", "%", _tel("fan_ratio"), _percent), ()),
    (Field[GpuRow]("power.draw", "W", _tel("power_watts"), _watts), ()),
    (Field[GpuRow]("power.limit", "W", lambda r: r[0].power.enforced_watts, _watts), ()),
    (Field[GpuRow]("enforced.power.limit", "W", lambda r: r[0].power.enforced_watts, _watts), ()),
    (Field[GpuRow]("power.default_limit", "W", lambda r: r[0].power.default_watts, _watts), ()),
    (Field[GpuRow]("power.min_limit", "W", lambda r: r[0].power.min_watts, _watts), ()),
    (Field[GpuRow]("power.max_limit", "W", lambda r: r[0].power.max_watts, _watts), ()),
    # nvidia-smi prints the GPU temperature with no unit at all, header or value (degrees C).
    (Field[GpuRow]("temperature.gpu", None, _tel("temperature_celsius"), _whole), ()),
    (Field[GpuRow]("clocks.current.graphics", "MHz", _clock("graphics"), _mhz), ("clocks.gr",)),
    (Field[GpuRow]("clocks.current.sm", "MHz", _clock("sm"), _mhz), ("clocks.sm",)),
    (Field[GpuRow]("clocks.current.memory", "MHz", _clock("memory"), _mhz), ("clocks.mem",)),
    (Field[GpuRow]("clocks.max.graphics", "MHz", lambda r: r[0].compute.max_clock_hertz, _mhz), ("clocks.max.gr",)),
    (Field[GpuRow]("clocks.max.sm", "MHz", lambda r: r[0].compute.max_clock_hertz, _mhz), ()),
    (Field[GpuRow]("clocks.max.memory", "MHz", lambda r: r[0].compute.memory_max_clock_hertz, _mhz),
     ("clocks.max.mem",)),
    (Field[GpuRow]("pcie.link.gen.current", None, _pci("link_gen_current")), ()),
    (Field[GpuRow]("pcie.link.gen.max", None, _pci("link_gen_max")), ()),
    (Field[GpuRow]("pcie.link.width.current", None, _pci("link_width_current")), ()),
    (Field[GpuRow]("pcie.link.width.max", None, _pci("link_width_max")), ()),
    (Field[GpuRow]("ecc.errors.corrected.volatile.total", None, _tel("ecc_corrected_total")), ()),
    (Field[GpuRow]("ecc.errors.uncorrected.volatile.total", None, _tel("ecc_uncorrected_total")), ()),
]


def _by_name(table: Sequence[tuple[Field[R], tuple[str, ...]]]) -> dict[str, Field[R]]:
    out: dict[str, Field[R]] = {}
    for f, aliases in table:
        for name in (f.name, *aliases):
            out[name] = f
    return out


#: nvidia-smi's ``--query-gpu`` names (aliases included), answered in nvidia-smi's units.
SMI_FIELDS: dict[str, Field[GpuRow]] = _by_name(_SMI_GPU)


def _proc_device(attr: Callable[[Device], object]) -> Callable[[ProcessRow], object]:
    return lambda row: attr(row[1]) if row[1] is not None else None


#: The model's process fields of ``ps --query`` (SI base units).
PROCESS_FIELDS: dict[str, Field[ProcessRow]] = {
    f.name: f
    for f in [
        Field[ProcessRow]("pid", None, lambda r: r[0].pid),
        Field[ProcessRow]("name", None, lambda r: r[0].name),
        Field[ProcessRow]("device_id", None, lambda r: r[0].device_id),
        Field[ProcessRow]("partition_id", None, lambda r: r[0].partition_id),
        Field[ProcessRow]("memory_bytes", "B", lambda r: r[0].memory_bytes),
        Field[ProcessRow]("utilization_ratio", "ratio", lambda r: r[0].utilization_ratio),
        Field[ProcessRow]("container_id", None, lambda r: r[0].container_id),
    ]
}

#: nvidia-smi's ``--query-compute-apps`` names, answered in nvidia-smi's units.
PROCESS_SMI_FIELDS: dict[str, Field[ProcessRow]] = _by_name([
    (Field[ProcessRow]("pid", None, lambda r: r[0].pid), ()),
    (Field[ProcessRow]("process_name", None, lambda r: r[0].name), ()),
    (Field[ProcessRow]("used_gpu_memory", "MiB", lambda r: r[0].memory_bytes, _mib), ("used_memory",)),
    (Field[ProcessRow]("gpu_uuid", None, _proc_device(lambda d: d.uuid)), ()),
    (Field[ProcessRow]("gpu_name", None, _proc_device(lambda d: d.model)), ()),
    (Field[ProcessRow]("gpu_bus_id", None, _proc_device(lambda d: smi_bus_id(d.pci.bus_id) if d.pci else None)), ()),
    (Field[ProcessRow]("gpu_serial", None, _proc_device(lambda d: d.serial_number)), ()),
])


@dataclass(frozen=True)
class QueryFormat:
    header: bool = True
    units: bool = True


def _parse(
    text: str, model: Mapping[str, Field[R]], smi: Mapping[str, Field[R]], option: str
) -> list[Field[R]]:
    out = []
    for raw in text.split(","):
        name = raw.strip()
        # nvidia-smi's name first: where both spell a field alike (index, uuid, pid) they agree.
        field = smi.get(name) or model.get(name)
        if field is None:
            raise ConfigError(
                f"{option}: unknown field {name!r}; model fields (SI units): {', '.join(model)}; "
                f"nvidia-smi fields (nvidia-smi units): {', '.join(sorted(smi))}"
            )
        out.append(field)
    return out


def parse_query(text: str) -> list[Field[GpuRow]]:
    """The fields of a ``--query`` / ``--query-gpu`` list; an unknown name is a
    :class:`ConfigError` listing every accepted one."""
    return _parse(text, FIELDS, SMI_FIELDS, "--query")


def parse_process_query(text: str) -> list[Field[ProcessRow]]:
    """The fields of a ``ps --query`` / ``--query-compute-apps`` list (unknown: a :class:`ConfigError`)."""
    return _parse(text, PROCESS_FIELDS, PROCESS_SMI_FIELDS, "--query-compute-apps")


def parse_format(text: str) -> QueryFormat:
    """``csv``, ``csv,noheader``, ``csv,nounits``, ``csv,noheader,nounits``."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or parts[0] != "csv" or any(p not in ("noheader", "nounits") for p in parts[1:]):
        raise ConfigError(f"--format: expected csv[,noheader][,nounits], got {text!r}")
    return QueryFormat(header="noheader" not in parts, units="nounits" not in parts)


def _number(value: object) -> str:
    # Floats as short as exact allows (repr), integral ones without ".0"; never rescaled.
    if isinstance(value, float):
        return f"{value:.0f}" if value.is_integer() else repr(value)
    return str(value)


def _value(field: Field[R], value: object, fmt: QueryFormat) -> str:
    if value is None:
        return "[N/A]"
    if field.show is not None and isinstance(value, int | float) and not isinstance(value, bool):
        text = field.show(float(value))
    else:
        text = _number(value)
    return f"{text} {field.unit}" if fmt.units and field.unit is not None and field.unit != "ratio" else text


def _cell(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow([text])
        return buf.getvalue()
    return text


def render(fields: Sequence[Field[R]], rows: Sequence[R], fmt: QueryFormat, *, header: bool = True) -> str:
    """The CSV text: ``, ``-separated like nvidia-smi, a cell quoted only where it needs it.

    The header names each field with its unit in brackets, also under ``nounits`` (nvidia-smi
    keeps the unit there and drops it from the values)."""
    lines = []
    if fmt.header and header:
        lines.append(", ".join(_cell(f"{f.name} [{f.unit}]" if f.unit else f.name) for f in fields))
    for row in rows:
        lines.append(", ".join(_cell(_value(f, f.get(row), fmt)) for f in fields))
    return "\n".join(lines)
