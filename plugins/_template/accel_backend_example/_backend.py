"""The example backend: one ``example-smi --query --format=json`` run per snapshot.

Everything a real CLI-based plugin needs is here in small: runs go through an
:mod:`accel.tools` runner (a :class:`~accel.tools.ReplayRunner` over the recorded scenario in
tests), every failure is mapped to :mod:`accel.errors`, a lost device is reported per device,
and the snapshot says what it cost (``SourceInfo.tool_invocations``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from accel.errors import BackendUnavailableError, DeviceError, DeviceLostError, ParseError
from accel.model import (
    Action,
    Binding,
    Device,
    DeviceKind,
    Health,
    HealthCondition,
    Host,
    HostInventory,
    MemoryKind,
    MemoryRegion,
    Operational,
    PciInfo,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
    VersionInfo,
    device_id_for,
    normalize_bus_id,
)
from accel.plugin import Backend, BackendConfig
from accel.tools import ReplayRunner, Runner, SubprocessRunner

from . import TOOL, __version__, recordings

ARGV = (TOOL, "--query", "--format=json")
MIB = 2**20
#: Telemetry fields example-smi never reports.
UNSUPPORTED = frozenset({"energy_joules", "clocks_hertz", "memory_utilization_ratio", "fan_ratio"})


class ExampleBackend(Backend):
    def __init__(self, config: BackendConfig) -> None:
        scenario = config.option("scenario")
        self._runner: Runner = config.runner or (ReplayRunner(recordings(str(scenario))) if scenario
                                                 else SubprocessRunner())
        self._timeout = config.tool_timeout_s
        self._lock = threading.Lock()  # one tool run at a time; the runner itself is thread-safe
        self._closed = False

    @property
    def name(self) -> str:
        return "example"

    # -- the one vendor call -----------------------------------------------------------------
    def _query(self) -> tuple[dict[str, Any], int]:
        if self._closed:
            raise BackendUnavailableError("the example backend is closed", plugin="example")
        with self._lock:
            before = self._runner.call_count
            result = self._runner.run(list(ARGV), timeout_s=self._timeout)
            spent = self._runner.call_count - before
        try:
            data = json.loads(result.stdout)
            gpus = data["gpus"]
            if not isinstance(gpus, list):
                raise TypeError("'gpus' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise ParseError(f"unexpected {TOOL} output: {exc}", tool=TOOL, command=" ".join(ARGV)) from exc
        return data, spent

    @staticmethod
    def _id(gpu: dict[str, Any]) -> str:
        return device_id_for("example", uuid=gpu.get("uuid"), bus_id=normalize_bus_id(gpu["bus_id"]))

    def _health(self, gpu: dict[str, Any]) -> Health:
        state = gpu.get("state", "ok")
        if state == "lost":
            return Health(operational=Operational.LOST, checked_at=datetime.now(UTC), conditions=(HealthCondition(
                subsystem=Subsystem.DEVICE, reason="DeviceLost", severity=Severity.FATAL,
                action=Action.RESET_DEVICE, vendor_code="example.xid:79", message="fell off the bus"),))
        if state == "health_not_supported":
            return Health.unknown()
        conds = tuple(
            HealthCondition(subsystem=Subsystem.MEMORY, reason="CorrectableMemoryError", severity=Severity.INFO,
                            vendor_code=f"example.xid:{code}")
            for code in gpu.get("xids", [])
        )
        # Health is earned: this reading says it, at this time (Health() alone is ``unknown``).
        return Health.read(datetime.now(UTC), conds)

    # -- Backend -----------------------------------------------------------------------------
    def inventory(self) -> HostInventory:
        data, spent = self._query()
        devices = []
        for gpu in data["gpus"]:
            try:
                lost = gpu.get("state") == "lost"
                devices.append(Device(
                    id=self._id(gpu), vendor="example", kind=DeviceKind.GPU, model=gpu["name"],
                    index=gpu.get("index"), uuid=gpu.get("uuid"), architecture=gpu.get("arch"),
                    pci=PciInfo(bus_id=normalize_bus_id(gpu["bus_id"])),
                    versions=VersionInfo(driver=data.get("driver_version")),
                    memory=(MemoryRegion(kind=MemoryKind.GDDR, total_bytes=gpu["memory_total_mib"] * MIB,
                                         used_bytes=None if lost else gpu["memory_used_mib"] * MIB),),
                    binding=Binding(visible_env="EXAMPLE_VISIBLE_DEVICES", visible_id=gpu.get("uuid")),
                    health=self._health(gpu),
                ))
            except (KeyError, TypeError) as exc:
                raise ParseError(f"{TOOL}: device entry lacks {exc}", tool=TOOL, command=" ".join(ARGV),
                                 line=json.dumps(gpu)) from exc
        return HostInventory(
            host=Host(hostname=str(data.get("hostname") or "example-host")), devices=tuple(devices),
            collected_at=datetime.now(UTC),
            sources=(SourceInfo(backend="example", plugin_version=__version__, api=TOOL, tool_invocations=spent),),
        )

    def _select(self, gpus: list[dict[str, Any]], ids: Sequence[str] | None) -> list[dict[str, Any]]:
        by_id = {self._id(g): g for g in gpus}
        if ids is None:
            return list(by_id.values())
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise DeviceError(f"no example device {missing[0]!r}; known: {sorted(by_id)}", device_id=missing[0])
        return [by_id[i] for i in ids]

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        data, _ = self._query()
        now = datetime.now(UTC)
        out = []
        for gpu in self._select(data["gpus"], ids):
            if gpu.get("state") == "lost":
                if ids is not None:
                    raise DeviceLostError(f"{self._id(gpu)} is lost", device_id=self._id(gpu))
                continue  # a lost device has no sample; the others still do
            out.append(Telemetry(
                device_id=self._id(gpu), timestamp=now,
                utilization_ratio=gpu["utilization_pct"] / 100.0,
                memory_used_bytes=gpu["memory_used_mib"] * MIB, memory_total_bytes=gpu["memory_total_mib"] * MIB,
                power_watts=float(gpu["power_w"]), temperature_celsius=float(gpu["temperature_c"]),
                unsupported=UNSUPPORTED,
            ))
        return tuple(out)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        data, _ = self._query()
        return {self._id(g): self._health(g) for g in self._select(data["gpus"], ids)}

    def close(self) -> None:
        self._closed = True  # nothing to release for a CLI backend; safe to call twice
