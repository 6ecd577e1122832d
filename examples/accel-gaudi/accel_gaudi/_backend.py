"""The ``hl-smi`` table as accel devices.

``hl-smi`` prints an nvidia-smi-style box: a banner (``HL-SMI Version``, ``Driver Version``,
``Nic Driver Version`` since 1.20), two header rows and two rows per AIP.  The table shows
the AIP index, not the module id ``HABANA_VISIBLE_MODULES`` takes, so units are bound by index
through ``HABANA_VISIBLE_DEVICES`` (the container runtime's variable, which takes indices).
The third column counts uncorrectable errors: ``Volatile Uncorr. ECC`` up to 1.16, renamed
``Volatile Uncor-Events`` later; either is a health reading.
"""

from __future__ import annotations

import re

from accel.errors import ParseError
from accel.model import Action, DeviceKind, MemoryKind, Severity, Subsystem
from accel.toolkit import (
    TABLE_NEVER_PRINTS,
    BoxRecord,
    Collection,
    Lenient,
    ParseContext,
    Snapshot,
    ToolBackend,
    UnitReading,
    clean,
    condition,
    find_box_tables,
    parse_bus_id,
    parse_celsius,
    parse_int,
    parse_power_pair,
    parse_ratio,
    parse_used_total,
    read_records,
    select_table,
)

__all__ = ["GaudiBackend", "parse_hl_smi"]

_ERRORS = ("Volatile Uncorr. ECC", "Volatile Uncor-Events")


def _unit(record: BoxRecord, ctx: ParseContext) -> UnitReading:
    f, line = record.fields, record.rows[0].line
    r = UnitReading(memory_kind=MemoryKind.HBM)
    lenient = Lenient(ctx, r)
    r.index = lenient.strict(parse_int, f.get("AIP"), line, "AIP")
    r.bus_id = lenient.strict(parse_bus_id, f.get("Bus-Id"), line, "Bus-Id")
    r.model = clean(f.get("Name"))
    r.temperature_celsius = lenient.get(parse_celsius, f.get("Temp"), line, "Temp")
    power = lenient.get(parse_power_pair, f.get("Pwr:Usage/Cap"), line, "Pwr:Usage/Cap")
    r.power_watts, r.power_limit_watts = power or (None, None)
    memory = lenient.get(parse_used_total, f.get("Memory-Usage"), line, "Memory-Usage")
    r.memory_used_bytes, r.memory_total_bytes = memory or (None, None)
    r.utilization_ratio = lenient.get(parse_ratio, f.get("AIP-Util"), line, "AIP-Util")
    header = next((h for h in _ERRORS if h in f), None)
    errors = lenient.get(parse_int, f.get(header) if header else None, line, header or "")
    if errors is not None:
        r.health_read = True  # a counter of uncorrectable errors, read: it says "none" or not
        r.extras["habana.ai/uncorrectableErrors"] = errors
        if header == _ERRORS[0]:
            r.ecc_uncorrected_total = errors
        if errors:
            message = f"{errors} uncorrectable errors since the driver loaded ({header})"
            r.conditions.append(
                condition(Subsystem.MEMORY, "UncorrectableErrors", Severity.ERROR, Action.RESET_DEVICE, message)
            )
    return r


def parse_hl_smi(text: str, command: str = "hl-smi") -> tuple[list[UnitReading], dict[str, str], list[ParseError]]:
    """The units, the banner's versions (``hl_smi``, ``driver``, ``nic_driver``) and the
    errors of the device records that could not be read (one bad record hides no other)."""
    ctx = ParseContext("hl-smi", command)
    table = select_table(find_box_tables(text), ("AIP", "Bus-Id"), ctx, text, "hl-smi device table")
    versions = {}
    for row in table.title:
        key, _, value = row.text.partition(":")
        name = {"HL-SMI Version": "hl_smi", "Driver Version": "driver", "Nic Driver Version": "nic_driver"}.get(key)
        if name and clean(value):
            versions[name] = value.strip()
    # Records without a Bus-Id are the process table below the devices.
    units, errors = read_records([r for r in table.records if "Bus-Id" in r.fields], lambda r: _unit(r, ctx))
    return units, versions, errors


class GaudiBackend(ToolBackend):
    """Backend ``gaudi`` over ``hl-smi``."""

    backend_name = "gaudi"
    vendor = "intel"
    tool = "hl-smi"
    search_path = ("/usr/bin",)
    kind = DeviceKind.HPU
    visible_env = "HABANA_VISIBLE_DEVICES"
    torch_device_type = "hpu"
    collective_backend = "hccl"
    ray_resource = "HPU"

    def collect(self, col: Collection) -> Snapshot:
        readings, versions, errors = col.required(parse_hl_smi)
        col.problems.extend(errors)  # listed by what identifies them, health unknown
        # "hl-1.16.0-fw-50.1.2.0": the tool's release and the firmware it was built for.
        fw = re.search(r"-fw-([0-9][0-9.]*)", versions.get("hl_smi", ""))
        ver = {"driver": versions.get("driver"), "firmware": {"fw": fw.group(1)} if fw else {}}
        # No fan on these boards (N/A), and the newer counter is not ECC alone.
        never = TABLE_NEVER_PRINTS | {"fan_ratio"}
        if not any(r.ecc_uncorrected_total is not None for r in readings):
            never |= {"ecc_uncorrected_total"}
        devices, samples = self.build(col, readings, versions=ver, telemetry_unsupported=never)
        return col.snapshot(devices, samples)
