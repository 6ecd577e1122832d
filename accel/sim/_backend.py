"""The simulated backend: a data-driven host with deterministic telemetry and fault injection."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import ConfigError, DeviceError, DeviceLostError, NotSupportedError, ToolTimeoutError
from ..model import (
    Action,
    Device,
    Health,
    HealthCondition,
    HostInventory,
    LinkState,
    MemoryRegion,
    Operational,
    Partition,
    PartitionProfile,
    ProcessUsage,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
)
from ..plugin import Backend, DeviceEvent
from ._carve import Carver
from ._clock import SharedClock
from ._faults import Fault, FaultKind
from ._profile import Built
from ._state import StateFile

__all__ = ["SimBackend"]

GiB = 1024**3
_TELEMETRY_FIELDS = frozenset(Telemetry.model_fields)


class SimBackend(Backend):
    """A simulated host built from a profile.

    A tick is one instant of simulated time.  Reads of different kinds (``inventory``,
    ``telemetry``, ``health``, ``processes``) at the same instant see the same machine: one
    command's ``inventory()`` then ``telemetry()`` (``ls --query``, the first refresh of
    ``watch`` and ``dmon``) report the same ``memory.used`` that ``ls``, ``show`` and ``ps``
    report.  Time moves on when a kind is read again (the second refresh of ``watch`` is the
    next instant), unless ``tick_on_read`` is off; faults scheduled ``@tick`` start then.
    Values are a pure function of ``(seed, tick, device)``: one source per reading, so two
    backends with the same seed read the same numbers.
    """

    def __init__(
        self,
        built: Built,
        *,
        seed: int = 0,
        faults: Sequence[Fault] = (),
        tick_on_read: bool = True,
        tool_timeout_s: float = 10.0,
        load: float | None = None,
        clock: SharedClock | None = None,
        state: StateFile | None = None,
    ) -> None:
        self._built = built
        # a clock shared through a file: each read takes its tick (and its time) from there
        self._clock = clock
        self._clock_t: float | None = None
        self._seed = seed
        self._faults: list[Fault] = list(faults)
        self._tick = 0
        #: The kinds of reading already taken at the current tick (see the class docstring).
        self._read_now: set[str] = set()
        self._tick_on_read = tick_on_read
        self._timeout = tool_timeout_s
        self._load = load
        self._energy = [0.0] * len(built.devices)
        self._energy_tick = [-1] * len(built.devices)
        self._lock = threading.RLock()
        self._closed = False
        self._seen_events: set[tuple[str, str]] = set()
        self.reads = 0
        for fault in self._faults:
            self._check(fault)
        self._carver = Carver(
            lambda: [self._device_now(i, self._tick) for i in range(len(self._built.devices))],
            built.devices, built.partitions, built.partition_profiles, self._active, state)

    # -- control ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return "sim"

    @property
    def profile_name(self) -> str:
        return self._built.profile.name

    @property
    def tick(self) -> int:
        return self._tick

    def _check(self, fault: Fault) -> None:
        if fault.device is not None and fault.device >= len(self._built.devices):
            raise ConfigError(
                f"fault {fault.kind.value}: no device at position {fault.device} "
                f"(profile {self.profile_name!r} has {len(self._built.devices)})"
            )
        if fault.kind is FaultKind.NOT_SUPPORTED:
            names = set((fault.param or "").split("+")) - {""}
            bad = sorted(names - _TELEMETRY_FIELDS - {"health"})
            if not names or bad:
                raise ConfigError(f"fault not_supported: unknown field(s) {', '.join(bad) or '(none given)'}")

    def inject(self, fault: Fault) -> None:
        """Add a fault now (``at_tick`` relative values are absolute ticks)."""
        self._check(fault)
        with self._lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._seen_events.clear()

    def advance(self, ticks: int = 1) -> None:
        """Move simulated time forward."""
        with self._lock:
            self._tick += ticks
            self._read_now.clear()

    def position(self, device_id: str) -> int:
        for i, dev in enumerate(self._built.devices):
            if dev.id == device_id:
                return i
        raise DeviceError(f"no simulated device {device_id!r}", device_id=device_id)

    def lose_device(self, device_id: str) -> None:
        """Make one device fall off the bus from now on (for conformance and tests)."""
        self.inject(Fault(FaultKind.DEVICE_LOST, self.position(device_id), self._tick))

    def inject_fault(self, fault: object, device_id: str) -> None:
        """The conformance kit's fault hook: ``device_lost`` or ``health_not_supported``.

        ``fault`` is the kit's enum (or its string value); the simulator does not import the kit.
        """
        kind = str(getattr(fault, "value", fault))
        position = self.position(device_id)
        if kind == "device_lost":
            self.inject(Fault(FaultKind.DEVICE_LOST, position, self._tick))
        elif kind == "health_not_supported":
            self.inject(Fault(FaultKind.NOT_SUPPORTED, position, self._tick, "health"))
        else:
            raise NotSupportedError(f"the simulator cannot inject {kind!r}", device_id=device_id)

    # -- helpers ---------------------------------------------------------------------------
    def _active(self, kind: FaultKind, position: int) -> list[Fault]:
        return [f for f in self._faults if f.kind is kind and f.hits(position, self._tick)]

    def _begin_read(self, kind: str) -> int:
        """The tick a ``kind`` reading is taken at: the current one, unless that kind was already
        read at it (then time moves on, and every kind reads the next instant)."""
        if self._closed:
            raise DeviceError("the simulated backend is closed")
        with self._lock:
            if self._clock is not None:
                # A clock file shared across processes: every read is the next instant of it.
                self._tick, self._clock_t = self._clock.take()
            elif self._tick_on_read and kind in self._read_now:
                self._tick += 1
                self._read_now.clear()
            self._read_now.add(kind)
            tick = self._tick
            self.reads += 1
        hung = [f for f in self._faults if f.kind is FaultKind.HUNG_TOOL and tick >= f.at_tick]
        if hung:
            # Behave like a hung vendor tool under accel.tools: wait out the timeout, then fail.
            time.sleep(min(self._timeout, 30.0))
            raise ToolTimeoutError(
                f"sim-smi did not answer within {self._timeout:g} s (simulated hung tool)",
                tool="sim-smi",
                argv=("sim-smi", "query"),
            )
        return tick

    def _rng(self, tick: int, position: int) -> random.Random:
        return random.Random(f"{self._seed}:{tick}:{position}")

    def _unsupported(self, position: int, tick: int) -> frozenset[str]:
        names = set(self._built.telemetry[position].unsupported)
        for f in self._faults:
            if f.kind is FaultKind.NOT_SUPPORTED and tick >= f.at_tick and (f.device in (None, position)):
                names |= set((f.param or "").split("+")) - {"", "health"}
        return frozenset(names)

    def _conditions(self, position: int, tick: int) -> tuple[Operational, tuple[HealthCondition, ...], bool]:
        params = self._built.telemetry[position]
        prefix = params.vendor_code_prefix
        conds: list[HealthCondition] = []
        operational = Operational.ONLINE
        monitored = True
        for f in self._faults:
            if not f.hits(position, tick):
                continue
            if f.kind is FaultKind.DEVICE_LOST:
                operational = Operational.LOST
                conds.append(
                    HealthCondition(
                        subsystem=Subsystem.PCIE,
                        reason="DeviceLost",
                        severity=Severity.FATAL,
                        action=Action.REBOOT_NODE,
                        vendor_code=f"{prefix}:{params.lost_code}",
                        message="the device fell off the bus (simulated)",
                    )
                )
            elif f.kind is FaultKind.ECC_UNCORRECTABLE:
                conds.append(
                    HealthCondition(
                        subsystem=Subsystem.MEMORY,
                        reason="UncorrectableMemoryError",
                        severity=Severity.CRITICAL,
                        action=Action.RESET_DEVICE,
                        vendor_code=f"{prefix}:{params.ecc_code}",
                        message="uncorrectable (double-bit) ECC error (simulated)",
                    )
                )
            elif f.kind is FaultKind.THERMAL_THROTTLE:
                conds.append(
                    HealthCondition(
                        subsystem=Subsystem.THERMAL,
                        reason="Throttled",
                        severity=Severity.WARNING,
                        action=Action.CHECK_COOLING,
                        message="hardware thermal slowdown active (simulated)",
                    )
                )
            elif f.kind is FaultKind.NOT_SUPPORTED and "health" in (f.param or "").split("+"):
                monitored = False
        return operational, tuple(conds), monitored

    def _health(self, position: int, tick: int) -> Health:
        operational, conds, monitored = self._conditions(position, tick)
        # The simulator "reads" health on every call; a health-not-supported fault reads nothing.
        return Health(
            operational=operational, conditions=conds, monitored=monitored,
            checked_at=datetime.now(UTC) if monitored else None,
        )

    def _used(self, position: int, tick: int) -> int | None:
        dev = self._built.devices[position]
        total = dev.memory_total_bytes
        params = self._built.telemetry[position]
        rng = self._rng(tick, position)
        load = self._load if self._load is not None else rng.uniform(0.0, 0.6)
        used = params.idle_used_bytes
        if total is not None:
            used += int(load * 0.5 * (total - used))
            for f in self._active(FaultKind.MEMORY_LEAK, position):
                per_tick = int(f.param) if f.param and f.param.isdigit() else GiB
                used += per_tick * (tick - f.at_tick + 1)
            used = min(used, total)
        return used

    def _device_now(self, position: int, tick: int, state: dict[str, Any] | None = None) -> Device:
        dev = self._built.devices[position]
        health = self._health(position, tick)
        lost = health.operational is Operational.LOST
        memory = tuple(
            MemoryRegion.model_validate(
                {**region.model_dump(), "used_bytes": None if lost or k else self._used(position, tick)}
            )
            for k, region in enumerate(dev.memory)
        )
        return self._carver.device(dev.model_copy(update={"health": health, "memory": memory}), state)

    # -- Backend ---------------------------------------------------------------------------
    def inventory(self) -> HostInventory:
        tick = self._begin_read("inventory")
        built = self._built
        state = self._carver.read()  # one reading of the partitions for the whole inventory
        devices = tuple(self._device_now(i, tick, state) for i in range(len(built.devices)))
        lost = {d.id for d in devices if d.health.operational is Operational.LOST}
        links = tuple(
            link.model_copy(update={"state": LinkState.DOWN}) if (link.pair & lost) else link for link in built.links
        )
        return HostInventory(
            host=built.profile.host,
            devices=devices,
            partitions=self._carver.partitions(state),
            partition_profiles=self._carver.all_profiles(),
            links=links,
            domains=tuple(built.domains),
            processes=self._processes(tick, None),
            collected_at=datetime.now(UTC) if self._clock_t is None else datetime.fromtimestamp(self._clock_t, UTC),
            sources=(
                SourceInfo(
                    backend="sim",
                    plugin_version=_plugin_version(),
                    api="sim",
                    detail=f"profile {built.profile.name} (seed {self._seed}, tick {tick})",
                    tool_invocations=1,
                ),
            ),
        )

    def _resolve(self, ids: Sequence[str] | None) -> list[int]:
        if ids is None:
            return list(range(len(self._built.devices)))
        return [self.position(i) for i in ids]

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        positions = self._resolve(ids)
        tick = self._begin_read("telemetry")
        out: list[Telemetry] = []
        for p in positions:
            health = self._health(p, tick)
            if health.operational is Operational.LOST:
                if ids is not None:
                    dev_id = self._built.devices[p].id
                    raise DeviceLostError(f"device {dev_id} is lost (fell off the bus)", device_id=dev_id)
                continue
            out.append(self._sample(p, tick))
        return tuple(out)

    def _sample(self, p: int, tick: int) -> Telemetry:
        dev = self._built.devices[p]
        params = self._built.telemetry[p]
        rng = self._rng(tick, p)
        load = self._load if self._load is not None else rng.uniform(0.0, 0.6)
        max_w = dev.power.enforced_watts or dev.power.max_watts or (params.idle_watts * 3)
        power = params.idle_watts + load * (max_w - params.idle_watts) * rng.uniform(0.85, 1.0)
        with self._lock:
            if self._energy_tick[p] < tick:
                self._energy[p] += power * 1.0
                self._energy_tick[p] = tick
            energy = self._energy[p]
        temp = params.base_temp_celsius + load * 30.0 + rng.uniform(-1.0, 1.0)
        clock = dev.compute.max_clock_hertz
        throttle: tuple[str, ...] = ()
        if self._active(FaultKind.THERMAL_THROTTLE, p):
            temp = (dev.thermal.slowdown_celsius or 85.0) + 2.0
            throttle = ("hw_thermal_slowdown",)
            clock = clock / 2 if clock else clock
        ecc_uncorrected = len(self._active(FaultKind.ECC_UNCORRECTABLE, p))
        used = self._used(p, tick)
        total = dev.memory_total_bytes
        values: dict[str, object] = {
            "device_id": dev.id,
            "timestamp": datetime.now(UTC),
            "utilization_ratio": round(load, 4),
            "memory_utilization_ratio": round(load * 0.7, 4),
            "memory_used_bytes": used,
            "memory_total_bytes": total,
            "memory_free_bytes": (total - used) if total is not None and used is not None else None,
            "power_watts": round(power, 3),
            "energy_joules": round(energy, 3),
            "temperature_celsius": round(temp, 2),
            "temperatures_celsius": {"core": round(temp, 2), "memory": round(temp + 4.0, 2)},
            "clocks_hertz": {"compute": clock} if clock else {},
            "fan_ratio": None,
            "throttle_reasons": throttle,
            "ecc_corrected_total": 0,
            "ecc_uncorrected_total": ecc_uncorrected,
            "retired_pages_total": 0,
        }
        unsupported = self._unsupported(p, tick)
        if not clock:
            # No clock in the profile (the vendor tool prints none): say so, never an empty reading.
            unsupported = unsupported | {"clocks_hertz"}
        for name in unsupported:
            default = Telemetry.model_fields[name].default
            values[name] = default if default is not None else None
        values["unsupported"] = unsupported
        return Telemetry.model_validate(values)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        positions = self._resolve(ids)
        tick = self._begin_read("health")
        return {self._built.devices[p].id: self._health(p, tick) for p in positions}

    # -- optional surfaces -----------------------------------------------------------------
    def partitions(self) -> tuple[Partition, ...]:
        return self._carver.partitions()

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        return self._carver.all_profiles()

    def create_partition(self, device_id: str, profile: str, *, placement_start: int | None = None) -> Partition:
        """Create a partition (see :mod:`accel.sim._carve` for the rules and the faults)."""
        if self._closed:
            raise DeviceError("the simulated backend is closed")
        with self._lock:
            return self._carver.create(device_id, profile, placement_start)

    def destroy_partition(self, partition_id: str) -> None:
        if self._closed:
            raise DeviceError("the simulated backend is closed")
        with self._lock:
            self._carver.destroy(partition_id)

    def _processes(self, tick: int, ids: Sequence[str] | None) -> tuple[ProcessUsage, ...]:
        wanted = set(self._resolve(ids))
        procs: list[ProcessUsage] = []
        for p, dev in enumerate(self._built.devices):
            if p not in wanted or self._health(p, tick).operational is Operational.LOST:
                continue
            used = self._used(p, tick)
            idle = self._built.telemetry[p].idle_used_bytes
            if used is None or used <= idle:
                continue
            procs.append(
                ProcessUsage(
                    pid=40000 + p,
                    device_id=dev.id,
                    name="python3",
                    memory_bytes=used - idle,
                    pid_in_namespace=True,
                )
            )
        return tuple(procs)

    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        self._resolve(ids)
        tick = self._begin_read("processes")
        return self._processes(tick, ids)

    def poll_events(self, timeout_s: float = 0.0) -> tuple[DeviceEvent, ...]:
        """Conditions that became active since the last poll, one event each."""
        tick = self._tick
        fresh: list[DeviceEvent] = []
        with self._lock:
            for p, dev in enumerate(self._built.devices):
                _, conds, _ = self._conditions(p, tick)
                for cond in conds:
                    key = (dev.id, cond.reason)
                    if key not in self._seen_events:
                        self._seen_events.add(key)
                        fresh.append(DeviceEvent(device_id=dev.id, timestamp=datetime.now(UTC), condition=cond))
        if not fresh and timeout_s > 0:
            time.sleep(min(timeout_s, 0.05))
        return tuple(fresh)

    def close(self) -> None:
        self._closed = True


def _plugin_version() -> str:
    from . import SimPlugin

    return SimPlugin.info.version
