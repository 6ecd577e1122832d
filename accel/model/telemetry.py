"""Timestamped readings and processes: what exporters consume, never part of the inventory."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, field_validator, model_validator

from ._base import Bytes, BytesPerSecond, Celsius, Counter, Hertz, Joules, Model, NonNegInt, Ratio, Watts

__all__ = ["LinkCounters", "ProcessUsage", "Telemetry"]


class LinkCounters(Model):
    """Counters of one device link (NVLink, xGMI...), monotonic ``*_total``."""

    link: str
    rx_bytes_total: Counter | None = None
    tx_bytes_total: Counter | None = None
    crc_errors_total: Counter | None = None
    replay_errors_total: Counter | None = None
    recovery_errors_total: Counter | None = None


class Telemetry(Model):
    """One sample of one device.  ``None`` is "not read"; names in ``unsupported`` never will be."""

    device_id: str
    timestamp: datetime
    utilization_ratio: Ratio | None = None
    memory_utilization_ratio: Ratio | None = None
    memory_used_bytes: Bytes | None = None
    memory_free_bytes: Bytes | None = None
    memory_total_bytes: Bytes | None = None
    power_watts: Watts | None = None
    energy_joules: Joules | None = None
    temperature_celsius: Celsius | None = None
    temperatures_celsius: dict[str, Celsius] = Field(default_factory=dict)
    clocks_hertz: dict[str, Hertz] = Field(default_factory=dict)
    fan_ratio: Ratio | None = None
    throttle_reasons: tuple[str, ...] = ()
    pcie_rx_bytes_per_s: BytesPerSecond | None = None
    pcie_tx_bytes_per_s: BytesPerSecond | None = None
    pcie_replay_total: Counter | None = None
    ecc_corrected_total: Counter | None = None
    ecc_uncorrected_total: Counter | None = None
    retired_pages_total: Counter | None = None
    links: tuple[LinkCounters, ...] = ()
    unsupported: frozenset[str] = frozenset()

    @field_validator("unsupported")
    @classmethod
    def _known(cls, value: frozenset[str]) -> frozenset[str]:
        bad = sorted(v for v in value if v not in Telemetry.model_fields)
        if bad:
            raise ValueError(f"unsupported names unknown telemetry fields: {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _memory(self) -> Telemetry:
        if (
            self.memory_total_bytes is not None
            and self.memory_used_bytes is not None
            and self.memory_used_bytes > self.memory_total_bytes
        ):
            raise ValueError(
                f"memory_used_bytes ({self.memory_used_bytes}) exceeds memory_total_bytes ({self.memory_total_bytes})"
            )
        for name in self.unsupported:
            value = getattr(self, name)
            if value not in (None, (), {}):
                raise ValueError(f"{name} is listed as unsupported but has a value")
        return self


class ProcessUsage(Model):
    """A process using a device.  ``memory_bytes`` is ``None`` when the driver cannot tell."""

    pid: NonNegInt
    device_id: str
    partition_id: str | None = None
    name: str | None = None
    memory_bytes: Bytes | None = None
    utilization_ratio: Ratio | None = None
    container_id: str | None = None
    #: False when the pid is in another pid namespace (a container seeing host pids).
    pid_in_namespace: bool | None = None
    started_at: datetime | None = None
