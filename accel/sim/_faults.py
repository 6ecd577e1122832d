"""Faults the simulator injects, on a schedule (a tick) or on demand."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..errors import ConfigError

__all__ = ["Fault", "FaultKind", "parse_faults"]


class FaultKind(StrEnum):
    DEVICE_LOST = "device_lost"
    """The device falls off the bus: health ``lost``; its telemetry raises DeviceLostError."""
    ECC_UNCORRECTABLE = "ecc_uncorrectable"
    """A double-bit (uncorrectable) memory error: a critical memory condition."""
    THERMAL_THROTTLE = "thermal_throttle"
    """Hot and throttling: temperature past the slowdown threshold, clocks halved."""
    MEMORY_LEAK = "memory_leak"
    """Used memory grows by ``param`` bytes (default 1 GiB) per tick, up to the total."""
    HUNG_TOOL = "hung_tool"
    """Every read hangs until the tool timeout and then raises ToolTimeoutError."""
    NOT_SUPPORTED = "not_supported"
    """Telemetry fields named in ``param`` (``+``-separated; ``health`` for health) are unsupported."""
    PARTITION_CREATE_FAIL = "partition_create_fail"
    """Creating a partition fails half-way; undone, or left behind and reported with ``=leak``."""
    PARTITION_KILL = "partition_kill"
    """The process is SIGKILLed half-way through a create or destroy (crash-safety chains)."""
    PARTITION_BUSY = "partition_busy"
    """Processes run on the device's partitions: destroy and AMD mode changes are refused."""


@dataclass(frozen=True)
class Fault:
    """One fault: ``device`` is a position in the profile (``None``: every device)."""

    kind: FaultKind
    device: int | None = None
    at_tick: int = 0
    param: str | None = None

    def hits(self, position: int, tick: int) -> bool:
        return tick >= self.at_tick and (self.device is None or self.device == position)


_SPEC = re.compile(
    r"^(?P<kind>[a-z_]+)(?::(?P<device>\*|[0-9]+))?(?:@(?P<tick>[0-9]+))?(?:=(?P<param>[A-Za-z0-9_+.]+))?$"
)


def parse_faults(text: str | None) -> list[Fault]:
    """Parse ``kind[:device][@tick][=param]`` items separated by commas.

    ``device_lost:3@5`` loses device 3 from tick 5 on (a tick moves on when a kind of reading is
    taken again: see SimBackend); ``memory_leak:0=536870912`` leaks 512 MiB per tick on device 0;
    ``not_supported=temperature_celsius+power_watts``.
    """
    faults: list[Fault] = []
    for raw in (text or "").split(","):
        item = raw.strip()
        if not item:
            continue
        m = _SPEC.match(item)
        if not m:
            raise ConfigError(f"bad fault spec {item!r}: expected kind[:device][@tick][=param]")
        try:
            kind = FaultKind(m.group("kind"))
        except ValueError:
            known = ", ".join(k.value for k in FaultKind)
            raise ConfigError(f"unknown fault {m.group('kind')!r}; known faults: {known}") from None
        device = m.group("device")
        faults.append(
            Fault(
                kind=kind,
                device=None if device in (None, "*") else int(device),
                at_tick=int(m.group("tick") or 0),
                param=m.group("param"),
            )
        )
    return faults
