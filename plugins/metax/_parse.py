"""Parsers for ``mx-smi`` (MetaX C500/C550/C600, N260).

* the default view, 2.1.x and 2.2.x: a preamble (``mx-smi  version``, ``Attached GPUs : 8``),
  a box whose title carries ``Kernel Mode Driver Version`` / ``MACA Version`` / ``BIOS
  Version``, and two rows per GPU.  2.1.6 prints ``MXC550``, ``Power`` without a cap and no
  state; 2.2.x prints ``MetaX C550``, ``Pwr:Usage/Cap`` and ``GPU-State``.  Newer builds add
  ``Persistence-M``, ``Perf`` and ``sGPU-M``: columns are read by header name, so they are
  picked up where present.  Memory is ``858/65536 MiB`` (used/total, unit after).
* ``topo -m``: ``X`` / ``MX`` (MetaXLink) / ``SYS``; MetaXLink islands become domains.
* ``-L`` (no sample here; gpustack and mxtop read ``GPU 0: MXC500 (UUID: ...)`` and
  ``GPU#0  MXC600-AL  0000:06:00.0  Available (UUID: GPU-...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from accel.model import Action, HealthCondition, Severity, Subsystem
from accel.toolkit import (
    BoxRecord,
    ParseContext,
    RecordReader,
    ToolView,
    UnitReading,
    clean,
    condition,
    find_box_tables,
    parse_bus_id,
    parse_celsius,
    parse_power_pair,
    parse_process_rows,
    parse_ratio,
    parse_used_total,
    read_records,
    select_table,
    split_lines,
)

__all__ = ["MxSmi", "parse_mx_smi"]

TOOL = "mx-smi"
#: The driver package installs mx-smi here (searched before PATH).
SEARCH_PATH = ("/opt/mxdriver/bin", "/usr/bin", "/usr/local/bin")

# "mx-smi  version: 2.1.12" in the preamble, or only the banner "| MX-SMI 2.2.9  Kernel Mode ...".
_VERSION = re.compile(r"mx-smi(?:\s+version:\s*|\s+)(?P<v>[0-9]\S*)", re.IGNORECASE)
_KMD = re.compile(r"Kernel Mode Driver Version:\s*(?P<v>\S+)")
_MACA = re.compile(r"MACA Version:\s*(?P<v>\S+)")
_BIOS = re.compile(r"BIOS Version:\s*(?P<v>\S+)")
_ATTACHED = re.compile(r"^\s*Attached GPUs\s*:\s*(?P<n>[0-9]+)")
#: ``sGPU-M`` values that mean "no sGPU sharing configured".
_SGPU_OFF = {"disabled", "disable", "native", "off"}


@dataclass
class MxSmi(ToolView):
    """What ``mx-smi`` printed (``driver_version`` is the kernel-mode driver's)."""

    mx_smi_version: str | None = None
    maca_version: str | None = None
    bios_version: str | None = None
    attached: int | None = None


def _state_condition(state: str) -> HealthCondition:
    return condition(
        Subsystem.DEVICE,
        "DeviceUnavailable",
        Severity.CRITICAL,
        Action.INVESTIGATE,
        f"mx-smi GPU-State is {state!r} (mx-smi --show-unavailable-reason tells why)",
        code=f"metax.gpu-state:{state}",
    )


def _reading(rec: BoxRecord, ctx: ParseContext) -> UnitReading:
    v = RecordReader.start(rec, ctx, index="GPU")
    r = v.reading
    r.model = v.text("NAME") or v.text("Name")
    r.bus_id = v.strict(parse_bus_id, "Bus-id" if "Bus-id" in v.fields else "Bus-Id")
    r.utilization_ratio = v.get(parse_ratio, "GPU-Util")
    r.temperature_celsius = v.get(parse_celsius, "Temp", 1)
    power = v.get(parse_power_pair, "Pwr:Usage/Cap" if "Pwr:Usage/Cap" in v.fields else "Power", 1)
    if power is not None:
        r.power_watts, r.power_limit_watts = power
    mem = v.get(parse_used_total, "Memory-Usage", 1)
    if mem is not None:
        r.memory_used_bytes, r.memory_total_bytes = mem
    state = v.text("GPU-State")
    # Health is earned: mx-smi 2.2+ prints a GPU-State column; older tables print none.
    r.health_read = state is not None
    if state is not None and state.lower() != "available":
        r.conditions.append(_state_condition(state))
    v.extras(
        "metax-tech.com",
        {"GPU-State": "gpuState", "Persistence-M": "persistenceMode", "Perf": "perfState", "sGPU-M": "sgpuMode"},
    )
    return r


def sgpu_enabled(reading: UnitReading) -> bool:
    """Whether the ``sGPU-M`` column shows sGPU sharing switched on."""
    mode = reading.extras.get("metax-tech.com/sgpuMode")
    return isinstance(mode, str) and mode.lower() not in _SGPU_OFF


def parse_mx_smi(text: str, *, command: str = "mx-smi") -> MxSmi:
    """Parse the default ``mx-smi`` view; a GPU that cannot be read goes to ``problems``."""
    ctx = ParseContext(TOOL, command)
    lines = split_lines(text)
    ctx.require(lines, "the mx-smi table")
    out = MxSmi()
    for line in lines:
        for pattern, attr in ((_VERSION, "mx_smi_version"), (_KMD, "driver_version"), (_MACA, "maca_version"),
                              (_BIOS, "bios_version")):  # fmt: skip
            m = pattern.search(line.text)
            if m and getattr(out, attr) is None:
                setattr(out, attr, clean(m.group("v")))
        m = _ATTACHED.match(line.text)
        if m and out.attached is None:
            out.attached = int(m.group("n"))
    devices = select_table(find_box_tables(lines), ("GPU", "Bus-id"), ctx, text, "mx-smi device table")
    out.readings, out.problems = read_records(devices.records, lambda rec: _reading(rec, ctx))
    out.processes = parse_process_rows([ln for ln in lines if ln.lineno > devices.end_lineno], ctx)
    return out
