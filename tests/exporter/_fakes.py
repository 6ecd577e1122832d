"""A counting fake backend for the exporter tests: known values, unknown ones, and a gate to hang on."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from accel.model import (
    Device,
    DeviceKind,
    Health,
    Host,
    HostInventory,
    MemoryKind,
    MemoryRegion,
    PciInfo,
    PowerLimits,
    Problem,
    ProcessUsage,
    Telemetry,
    ThermalLimits,
    VersionInfo,
)
from accel.plugin import PLUGIN_API, Backend, BackendConfig, BackendPlugin, PluginInfo, ProbeResult

GiB = 1024**3
DEV_A = "fake:GPU-11111111-2222-3333-4444-555555555555"
DEV_B = "fake:pci-0000:3b:00.0"


def _devices() -> tuple[Device, ...]:
    a = Device(
        id=DEV_A, vendor="fake", kind=DeviceKind.GPU, model="Fake X100",
        uuid="GPU-11111111-2222-3333-4444-555555555555", pci=PciInfo(bus_id="0000:1a:00.0"),
        versions=VersionInfo(driver="1.2.3"),
        memory=(MemoryRegion(kind=MemoryKind.HBM, total_bytes=80 * GiB, used_bytes=None),),
        power=PowerLimits(enforced_watts=700.0),
        thermal=ThermalLimits(slowdown_celsius=87.0),
        health=Health.read(datetime.now(UTC)),
    )
    # B: nothing but identity and the model is known; health was never read.
    b = Device(id=DEV_B, vendor="fake", kind=DeviceKind.NPU, model="Fake N1", pci=PciInfo(bus_id="0000:3b:00.0"))
    return a, b


class FakeBackend(Backend):
    """Counts reads; ``gate`` (when set up) makes ``inventory()`` wait until released."""

    def __init__(self) -> None:
        self.calls = {"inventory": 0, "telemetry": 0, "health": 0}
        self.lock = threading.Lock()
        self.entered = threading.Event()
        self.gate: threading.Event | None = None
        self.fail_telemetry = False
        #: Problems the inventory reports (a device's record that did not parse...).
        self.problems: tuple[Problem, ...] = ()

    @property
    def name(self) -> str:
        return "fake"

    def _count(self, call: str) -> None:
        with self.lock:
            self.calls[call] += 1

    def inventory(self) -> HostInventory:
        self._count("inventory")
        self.entered.set()
        if self.gate is not None:
            self.gate.wait()
        devices = _devices()
        return HostInventory(
            host=Host(hostname="fakehost"), devices=devices, collected_at=datetime.now(UTC),
            processes=(ProcessUsage(pid=4242, device_id=DEV_A, name="python3", memory_bytes=3 * GiB),),
            problems=self.problems,
        )

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        self._count("telemetry")
        if self.fail_telemetry:
            from accel.errors import BackendUnavailableError

            raise BackendUnavailableError("fake telemetry failed", plugin="fake")
        now = datetime.now(UTC)
        return (
            Telemetry(
                device_id=DEV_A, timestamp=now, utilization_ratio=0.25, memory_used_bytes=None,
                power_watts=None, temperature_celsius=50.0, temperatures_celsius={"hbm": 55.5},
                clocks_hertz={"sm": 1_980_000_000}, ecc_uncorrected_total=2, energy_joules=1234.5,
                unsupported=frozenset({"fan_ratio"}),
            ),
            Telemetry(device_id=DEV_B, timestamp=now),
        )

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        self._count("health")
        return {d.id: d.health for d in _devices()}

    def close(self) -> None:
        pass


class FakePlugin(BackendPlugin):
    info = PluginInfo(name="fake", vendor="fake", version="1.0", api_versions=frozenset({PLUGIN_API}))

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend

    def probe(self, config: BackendConfig) -> ProbeResult:
        return ProbeResult.present("fake")

    def open(self, config: BackendConfig) -> Backend:
        return self.backend


class HangingBackend(FakeBackend):
    """Every inventory read blocks until ``release`` is set (a hung vendor library)."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.gate = release

    @property
    def name(self) -> str:
        return "hung"


class HangingPlugin(FakePlugin):
    info = PluginInfo(name="hung", vendor="fake", version="1.0", api_versions=frozenset({PLUGIN_API}))
