"""The example backend: one ``example-smi --query --format=json`` run per snapshot.

Built on :mod:`accel.toolkit`: :class:`~accel.toolkit.ToolBackend` runs the tool through an
:mod:`accel.tools` runner (a replay of ``scenarios/<name>/`` in tests), remembers lost devices,
answers the three reads from one snapshot and simulates the conformance kit's faults over a
replay.  What is left to write is the parser: tool output in, :class:`UnitReading` out.
"""

from __future__ import annotations

import json
from typing import Any

from accel.errors import ParseError
from accel.model import Action, DeviceKind, MemoryKind, Severity, Subsystem
from accel.toolkit import (
    Collection,
    ParseContext,
    Snapshot,
    ToolBackend,
    UnitReading,
    condition,
    parse_bus_id,
    split_lines,
)

from . import TOOL

__all__ = ["ExampleBackend", "parse_query"]

MIB = 2**20
#: Telemetry example-smi never reports.
NEVER_PRINTED = frozenset({"energy_joules", "clocks_hertz", "memory_utilization_ratio", "fan_ratio"})


def _unit(gpu: dict[str, Any]) -> UnitReading:
    r = UnitReading(memory_kind=MemoryKind.GDDR)
    r.index, r.uuid, r.model = gpu.get("index"), gpu.get("uuid"), gpu["name"]
    r.bus_id = parse_bus_id(gpu["bus_id"])
    r.memory_total_bytes = gpu["memory_total_mib"] * MIB
    r.memory_used_bytes = gpu["memory_used_mib"] * MIB
    r.power_watts, r.temperature_celsius = float(gpu["power_w"]), float(gpu["temperature_c"])
    r.utilization_ratio = gpu["utilization_pct"] / 100.0
    state = gpu.get("state", "ok")
    # Health is earned: only a state the tool printed says anything about it.
    r.health_read = state != "health_not_supported"
    if state == "lost":
        r.conditions.append(condition(Subsystem.DEVICE, "DeviceLost", Severity.FATAL, Action.RESET_DEVICE,
                                      "example-smi: fell off the bus", code="example.xid:79"))
        r.memory_used_bytes = r.power_watts = r.temperature_celsius = r.utilization_ratio = None
        r.dropped |= {"memory_used_bytes", "power_watts", "temperature_celsius", "utilization_ratio"}
    for code in gpu.get("xids", []):
        r.conditions.append(condition(Subsystem.MEMORY, "CorrectableMemoryError", Severity.INFO, Action.NONE,
                                      f"example-smi reported xid {code}", code=f"example.xid:{code}"))
    return r


def parse_query(text: str, command: str) -> tuple[list[UnitReading], str | None, list[ParseError]]:
    """The units, the driver version and the errors of the GPU entries that could not be read,
    from one ``example-smi --query --format=json`` run.

    Unreadable JSON raises a located :class:`~accel.errors.ParseError` (no device list at all);
    a GPU entry that lacks a field is collected as an error naming its index, so one bad entry
    hides no other and its device stays listed (health unknown).
    """
    ctx = ParseContext(TOOL, command)
    try:
        data = json.loads(text)
        gpus = list(data["gpus"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ctx.error(f"unexpected {TOOL} output: {exc!r}", next(iter(split_lines(text)), None)) from None
    units, errors = [], []
    for gpu in gpus:
        try:
            units.append(_unit(gpu))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            err = ctx.error(f"GPU entry lacks or mangles {exc}", json.dumps(gpu))
            index = gpu.get("index") if isinstance(gpu, dict) else None
            err.device_index = index if isinstance(index, int) else None
            errors.append(err)
    return units, data.get("driver_version"), errors


class ExampleBackend(ToolBackend):
    """Backend ``example`` over ``example-smi``."""

    backend_name = "example"
    tool = TOOL
    kind = DeviceKind.GPU
    # EXAMPLE_VISIBLE_DEVICES takes UUIDs: bind by the key the variable takes.
    visible_env = "EXAMPLE_VISIBLE_DEVICES"
    visible_key = "uuid"

    def collect(self, col: Collection) -> Snapshot:
        units, driver, errors = col.required(parse_query, "--query", "--format=json")
        col.problems.extend(errors)  # each a "record" problem of the snapshot
        devices, samples = self.build(col, units, versions={"driver": driver}, telemetry_unsupported=NEVER_PRINTED)
        return col.snapshot(devices, samples)
