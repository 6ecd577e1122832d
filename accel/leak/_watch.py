"""From inventories to ``MemoryLeakSuspected`` conditions: what the exporter, ``accel health``
and a scheduler's health loop use."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

from ..model import Health, HealthCondition, HostInventory
from ..model.health import Action, ConditionScope, Severity, Subsystem
from ._detector import LeakDetector, LeakVerdict

__all__ = ["LEAK_REASON", "LeakWatch", "leak_condition", "with_leak_conditions"]

#: The condition reason a suspected leak is reported under, on a device or on one of its processes.
LEAK_REASON = "MemoryLeakSuspected"


def _human_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _human_seconds(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def leak_condition(verdict: LeakVerdict, *, pid: int | None = None, name: str | None = None) -> HealthCondition:
    """The warning a verdict raises: device scope, or process scope naming the process."""
    who = "used memory" if pid is None else f"process {pid}{f' ({name})' if name else ''} memory"
    ttf = "device memory is full" if verdict.seconds_to_full <= 0 else (
        f"device full in about {_human_seconds(verdict.seconds_to_full)}")
    return HealthCondition(
        subsystem=Subsystem.MEMORY,
        reason=LEAK_REASON,
        severity=Severity.WARNING,
        scope=ConditionScope.DEVICE if pid is None else ConditionScope.PROCESS,
        action=Action.INVESTIGATE,
        message=(f"{who} floor rising {_human_bytes(verdict.slope_bytes_per_s)}/s over "
                 f"{_human_seconds(verdict.window_s)}; {ttf} "
                 f"(seconds_to_full={verdict.seconds_to_full:.0f})"),
    )


def with_leak_conditions(health: Health, conditions: tuple[HealthCondition, ...]) -> Health:
    """``health`` with its leak conditions replaced by ``conditions`` (the state is re-derived)."""
    kept = tuple(c for c in health.conditions if c.reason != LEAK_REASON)
    if not conditions and len(kept) == len(health.conditions):
        return health
    return health.model_copy(update={"conditions": kept + conditions})


class LeakWatch:
    """A :class:`LeakDetector` fed from successive :class:`~accel.model.HostInventory` readings.

    Each device with a known used and total memory is one key (its id); each process with a
    known ``memory_bytes`` is another (``(device_id, pid, name)``, so a reused pid is a new
    process), measured against the device's headroom.  Devices or processes that stop reporting
    are forgotten after the detector's longest window.  A reading with unknown memory adds
    nothing: unknown is never a sample of 0.
    """

    def __init__(self, detector: LeakDetector | None = None, *, processes: bool = True) -> None:
        self.detector = detector or LeakDetector()
        self.processes = processes

    def observe(self, inventory: HostInventory, t_s: float | None = None) -> None:
        """Add the inventory's memory readings, at ``t_s`` (default: its ``collected_at``)."""
        t = inventory.collected_at.timestamp() if t_s is None else t_s
        if not math.isfinite(t):
            return
        headroom: dict[str, tuple[int, int]] = {}
        for dev in inventory.devices:
            total, used = dev.memory_total_bytes, dev.memory_used_bytes
            if total is None or used is None or total <= 0 or used > total:
                continue
            headroom[dev.id] = (total, total - used)
            self.detector.observe(dev.id, t, used, total)
        if self.processes:
            for proc in inventory.processes:
                room = headroom.get(proc.device_id)
                if room is None or proc.memory_bytes is None or proc.memory_bytes > room[0]:
                    continue
                key: Hashable = (proc.device_id, proc.pid, proc.name)
                self.detector.observe(key, t, proc.memory_bytes, room[0], headroom_bytes=room[1])
        self.detector.forget_stale(t)

    def verdicts(self) -> dict[Hashable, LeakVerdict]:
        out: dict[Hashable, LeakVerdict] = {}
        for key in list(self.detector.keys()):
            v = self.detector.assess(key)
            if v is not None:
                out[key] = v
        return out

    def conditions(self) -> dict[str, tuple[HealthCondition, ...]]:
        """Leak conditions per device id (devices without one are absent)."""
        out: dict[str, list[HealthCondition]] = {}
        for key, v in self.verdicts().items():
            if isinstance(key, tuple):
                device_id, pid, name = key
                out.setdefault(str(device_id), []).append(leak_condition(v, pid=int(pid), name=name))
            else:
                out.setdefault(str(key), []).append(leak_condition(v))
        return {k: tuple(v) for k, v in out.items()}

    def annotate(self, inventory: HostInventory) -> HostInventory:
        """``inventory`` with each device's leak conditions in its health (the others untouched)."""
        conds = self.conditions()
        devices = tuple(
            dev if dev.id not in conds and not any(c.reason == LEAK_REASON for c in dev.health.conditions)
            else dev.model_copy(update={"health": with_leak_conditions(dev.health, conds.get(dev.id, ()))})
            for dev in inventory.devices
        )
        return inventory.model_copy(update={"devices": devices})

    def annotate_health(self, health: Mapping[str, Health]) -> dict[str, Health]:
        conds = self.conditions()
        return {k: with_leak_conditions(h, conds.get(k, ())) for k, h in health.items()}
