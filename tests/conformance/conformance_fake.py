"""A small, faithful fake backend for the kit's own tests: correct by default, broken on request.

``BackendConfig.options["break"]`` is a comma-separated list of breakages (see ``BREAKS``); each
violates one requirement on purpose so the tests can show that exactly the matching rows fail.
The fake reads its PCI place from a :class:`accel.testing.FakeSysfs` tree and runs one recorded
``acme-smi`` call per snapshot through the config's runner, like a CLI plugin would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from accel.conformance import Fault, SysfsOracle
from accel.errors import DeviceError, DeviceLostError, NotSupportedError, PluginError
from accel.model import (
    Action,
    Binding,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    Health,
    HealthCondition,
    Host,
    HostInventory,
    Link,
    LinkType,
    MemoryKind,
    MemoryRegion,
    Operational,
    Partition,
    PartitionProfile,
    PciInfo,
    Placement,
    ProcessUsage,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
    VersionInfo,
)
from accel.plugin import (
    ApiVersion,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    PluginInfo,
    ProbeResult,
)
from accel.sysfs import enrich_inventory, scan_pci
from accel.testing import FakeSysfs
from accel.tools import ReplayRunner

VENDOR_ID = "1d0f"
DEVICE_ID = "ac01"
GIB = 2**30
TOTAL = 80 * GIB

#: breakage -> the rows it must fail (and no others).
BREAKS: dict[str, set[str]] = {
    # The plugin module (conformance_slow_import) sleeps 3 s and starts a thread at import.
    "import-slow-thread": {"discovery.entry-point-light"},
    "probe-raises": {"discovery.probe-never-raises"},
    "probe-runs-tools": {"discovery.probe-cheap"},
    # probe() replays the tool through a runner it builds itself, as replay plugins do: the
    # config's runner never sees it, the audit event of accel.tools does.
    "probe-runs-own-replay": {"discovery.probe-cheap"},
    "probe-flaky": {"discovery.probe-reentrant", "inventory.devices-present"},
    "probe-count-wrong": {"inventory.devices-present"},
    "probe-not-threadsafe": {"discovery.probe-threadsafe"},
    "undeclared-protocol": {"discovery.capabilities-honest"},
    "bad-api-version": {"discovery.plugin-info"},
    "ids-unstable": {"inventory.ids-stable"},
    "index-ids": {"inventory.ids-canonical"},
    "bad-pci-ids": {"inventory.ids-match-pci"},
    "model-placeholder": {"inventory.model-vendor-filled"},
    "version-garbage": {"inventory.versions-parse"},
    "no-binding": {"inventory.binding-filled"},
    "serial-missing": {"inventory.unsupported-declared"},
    "no-sources": {"inventory.sources"},
    "memory-mib": {"memory.total-bytes", "memory.oracle-1pct"},
    "memory-off-2pct": {"memory.oracle-1pct"},
    "used-unknown": {"memory.used-le-total", "telemetry.unsupported-listed"},
    "telemetry-total-mb": {"memory.telemetry-consistent"},
    "dup-links": {"topology.links-reference-devices"},
    "gbit-bandwidth": {"topology.link-bandwidth-units"},
    "domain-split": {"topology.domains-consistent"},
    "bad-bridges": {"topology.pcie-levels-match-sysfs"},
    "profile-unknown": {"partitions.profiles-known"},
    "profile-slices": {"partitions.no-overlap"},
    "partitions-disagree": {"partitions.protocol"},
    "health-filter-ignored": {"health.covers-devices"},
    "health-state-mismatch": {"health.state-derived"},
    "unsupported-is-unhealthy": {"health.not-supported-unknown"},
    "health-stale": {"health.earned"},
    "lost-breaks-all": {"health.lost-device-isolated"},
    "vendor-code-foreign": {"health.vendor-codes"},
    "telemetry-filter-ignored": {"telemetry.one-per-device"},
    "clock-mhz": {"telemetry.units-sane"},
    "energy-resets": {"telemetry.counters-monotonic"},
    "power-unlisted": {"telemetry.unsupported-listed"},
    # Backend's outer guard (issue 14) turns a leaked KeyError into a typed error, so only the
    # wrong type for an unknown id fails, and a vendor exception after close is neutralised.
    "keyerror": {"errors.unknown-id"},
    "vendor-exception-after-close": set(),
    "close-twice-raises": {"lifecycle.close-idempotent"},
    "swallow-exit": {"lifecycle.context-manager"},
    "close-after-lost-raises": {"lifecycle.close-after-failure"},
    "not-threadsafe": {"lifecycle.concurrent-reads"},
    "expensive": {"cost.snapshot-budget"},
}


class VendorLibError(Exception):
    """Stands for a vendor library's own exception type (pynvml.NVMLError and friends)."""


def breaks_of(config: BackendConfig) -> frozenset[str]:
    raw = str(config.option("break", "") or "")
    return frozenset(b for b in raw.split(",") if b)


SMI_OUTPUT = "acme-smi 1.0\n4 devices\n"


def make_config(tmp_path: Path, breaks: str = "") -> BackendConfig:
    """A fake 4-GPU host: sysfs with two PCIe switches on two sockets, one recorded acme-smi."""
    sysfs = FakeSysfs(tmp_path / "sys")
    sysfs.dual_socket_server(VENDOR_ID, DEVICE_ID, gpus_per_switch=2, switches_per_socket=1)
    runner = ReplayRunner.from_mapping({"acme-smi -q": SMI_OUTPUT})
    return BackendConfig(options={"break": breaks}, sysfs_root=tmp_path / "sys", dev_root=tmp_path / "dev",
                         runner=runner)


class FakeBackend(Backend):
    """Four ``acme`` GPUs: NVLink-like pairs, MIG-like partitions on device 0, health, telemetry."""

    def __init__(self, config: BackendConfig, open_number: int) -> None:
        self._config = config
        self._breaks = breaks_of(config)
        self._open_number = open_number
        self._lock = threading.Lock()
        self._busy = threading.Lock()
        self._closed = False
        self._close_calls = 0
        self._lost: set[str] = set()
        self._unreadable: set[str] = set()
        self._energy = 100000.0
        self._calls = 0
        self._t0 = datetime(2025, 1, 1, tzinfo=UTC)
        self._ticks = 0
        self._bus_ids = [fn.bus_id for fn in scan_pci(config.sysfs_root, vendor_ids=[VENDOR_ID])]

    # -- helpers ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return "acme"

    @property
    def vendor_call_count(self) -> int:
        return self._calls

    def _guard(self) -> None:
        if self._closed:
            if "vendor-exception-after-close" in self._breaks:
                raise VendorLibError("ACME_ERROR_UNINITIALIZED")
            raise PluginError("the acme backend is closed", plugin="acme")

    def _enter(self) -> None:
        if "not-threadsafe" in self._breaks:
            if not self._busy.acquire(blocking=False):
                raise VendorLibError("ACME_ERROR_IN_USE: handle used from two threads")
            time.sleep(0.01)
            self._busy.release()

    def _uuid(self, i: int) -> str:
        suffix = f"-{self._open_number}" if "ids-unstable" in self._breaks else ""
        return f"GPU-{i:04d}-acme{suffix}"

    def _id(self, i: int) -> str:
        return f"acme:{i}" if "index-ids" in self._breaks else f"acme:{self._uuid(i)}"

    def _ids(self) -> list[str]:
        return [self._id(i) for i in range(len(self._bus_ids))]

    def _check_ids(self, ids: Sequence[str] | None) -> list[str]:
        known = self._ids()
        if ids is None:
            return known
        for i in ids:
            if i not in known:
                if "keyerror" in self._breaks:
                    raise KeyError(i)
                raise DeviceError(f"no acme device {i!r}", device_id=i)
        return list(ids)

    def _total(self) -> int:
        if "memory-mib" in self._breaks:
            return 81920  # MiB reported as bytes
        if "memory-off-2pct" in self._breaks:
            return int(TOTAL * 1.02)
        return TOTAL

    def _health(self, dev_id: str) -> Health:
        if dev_id in self._lost:
            return Health(operational=Operational.LOST, checked_at=datetime.now(UTC), conditions=(HealthCondition(
                subsystem=Subsystem.DEVICE, reason="DeviceLost", severity=Severity.FATAL,
                action=Action.RESET_DEVICE, vendor_code="acme.xid:79"),))
        if dev_id in self._unreadable:
            if "unsupported-is-unhealthy" in self._breaks:
                bogus = HealthCondition(subsystem=Subsystem.MONITORING, reason="NotSupported",
                                        severity=Severity.CRITICAL)
                return Health.read(datetime.now(UTC), (bogus,))
            return Health.unknown()
        conds: tuple[HealthCondition, ...] = ()
        if dev_id == self._id(2):
            vendor = "nvidia" if "vendor-code-foreign" in self._breaks else "acme"
            conds = (HealthCondition(subsystem=Subsystem.MEMORY, reason="CorrectableMemoryError",
                                     severity=Severity.INFO, vendor_code=f"{vendor}.xid:48"),)
        # Health is earned: this reading says it, at this time (Health() alone is ``unknown``).
        if "health-stale" in self._breaks:  # a cached reading from yesterday passed off as now
            return Health.read(datetime.now(UTC) - timedelta(days=1), conds)
        return Health.read(datetime.now(UTC), conds)

    # -- Backend ---------------------------------------------------------------------------
    def inventory(self) -> HostInventory:
        self._guard()
        self._enter()
        with self._lock:
            runs = 100 if "expensive" in self._breaks else 1
            for _ in range(runs):
                self._calls += 1
            if self._config.runner is not None:
                self._config.runner.run(["acme-smi", "-q"])
            devices = []
            for i, bus in enumerate(self._bus_ids):
                dev_id = self._id(i)
                if dev_id in self._lost:
                    continue
                total = self._total()
                used = None if "used-unknown" in self._breaks else total // 100
                health = self._health(dev_id)
                if "health-state-mismatch" in self._breaks and i == 1:
                    health = Health(operational=Operational.DRAINING)
                pci = PciInfo(bus_id=bus, vendor_id=VENDOR_ID,
                              device_id="ffff" if "bad-pci-ids" in self._breaks else DEVICE_ID)
                devices.append(Device(
                    id=dev_id, vendor="acme", kind=DeviceKind.GPU,
                    model="N/A" if "model-placeholder" in self._breaks else "Acme A100X 80GB",
                    index=i, uuid=self._uuid(i),
                    serial_number=None if "serial-missing" in self._breaks else f"SN{i:06d}",
                    architecture="acme3", pci=pci,
                    versions=VersionInfo(driver="unknown" if "version-garbage" in self._breaks else "535.104.05",
                                         runtime_name="acmert", runtime="12.2", firmware={"vbios": "1.2.3"}),
                    memory=(MemoryRegion(kind=MemoryKind.HBM, total_bytes=total, used_bytes=used,
                                         ecc_supported=True, ecc_enabled=True),),
                    binding=Binding() if "no-binding" in self._breaks else Binding(
                        visible_env="ACME_VISIBLE_DEVICES", visible_id=self._uuid(i)),
                    health=health,
                ))
            ids = [d.id for d in devices]
            links = []
            for a, b in ((0, 1), (2, 3)):
                if a < len(ids) and b < len(ids):
                    bw = 25 if "gbit-bandwidth" in self._breaks else 100 * 10**9
                    links.append(Link(a=ids[a], b=ids[b], type=LinkType.NVLINK, count=4, bandwidth_bytes_per_s=bw))
                    if "dup-links" in self._breaks:
                        links.append(Link(a=ids[b], b=ids[a], type=LinkType.NVLINK, count=4,
                                          bandwidth_bytes_per_s=bw))
            pairs = [(0, 2), (1, 3)] if "domain-split" in self._breaks else [(0, 1), (2, 3)]
            domains = [Domain(id=f"island-{n}", kind=DomainKind.NVLINK_ISLAND, members=(ids[a], ids[b]))
                       for n, (a, b) in enumerate(pairs) if b < len(ids)]
            parts, profiles = self._partitions(ids, devices)
            inv = HostInventory(
                host=Host(hostname="acme-host"), devices=tuple(devices), links=tuple(links), domains=tuple(domains),
                partitions=parts, partition_profiles=profiles, collected_at=self._t0,
                sources=() if "no-sources" in self._breaks else (
                    SourceInfo(backend="acme", plugin_version=PLUGIN.info.version, api="acme-smi"),),
            )
        inv = enrich_inventory(inv, self._config.sysfs_root)
        if "bad-bridges" in self._breaks:
            # Claims every device hangs off one switch, where sysfs shows two sockets.
            wrong = tuple(
                d.model_copy(update={"pci": PciInfo(bus_id=d.pci.bus_id, vendor_id=VENDOR_ID, device_id=DEVICE_ID,
                                                    pcie_root="pci0000:15",
                                                    bridge_path=("0000:15:01.0", "0000:16:00.0"))})
                for d in inv.devices if d.pci is not None
            )
            inv = inv.model_copy(update={"devices": wrong})
        return inv

    def _partitions(self, ids: list[str], devices: list[Device]) -> tuple[tuple[Partition, ...],
                                                                          tuple[PartitionProfile, ...]]:
        if not ids or not devices or devices[0].memory_total_bytes is None:
            return (), ()
        parent, total = ids[0], devices[0].memory_total_bytes
        slices = 2 if "profile-slices" in self._breaks else 1
        prof = PartitionProfile(name="1g.10gb", parent_id=parent, memory_bytes=total // 8, memory_slices=slices,
                                max_instances=7, placements=tuple(Placement(start=s, size=1) for s in range(7)))
        name = "9g.99gb" if "profile-unknown" in self._breaks else "1g.10gb"
        parts = tuple(Partition(id=f"{parent}/mig-{s}", parent_id=parent, profile=name,
                                placement=Placement(start=s, size=1), memory_bytes=total // 8) for s in range(2))
        return parts, (prof,)

    def partitions(self) -> tuple[Partition, ...]:
        self._guard()
        parts = self.inventory().partitions
        return parts[:1] if "partitions-disagree" in self._breaks else parts

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        self._guard()
        return self.inventory().partition_profiles

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        self._guard()
        self._enter()
        wanted = self._check_ids(ids)
        if "telemetry-filter-ignored" in self._breaks and ids is not None and len(ids) == 1:
            wanted = self._ids()
        with self._lock:
            self._ticks += 1
            self._energy += -50 if "energy-resets" in self._breaks else 50
            out = []
            for dev_id in wanted:
                if dev_id in self._lost:
                    if ids is not None:
                        raise DeviceLostError(f"{dev_id} is lost", device_id=dev_id)
                    continue
                clock = 1410.0 if "clock-mhz" in self._breaks else 1.41e9
                total = 81920 * 10**6 if "telemetry-total-mb" in self._breaks else self._total()
                unlisted = "power-unlisted" in self._breaks
                out.append(Telemetry(
                    device_id=dev_id, timestamp=self._t0 + timedelta(seconds=self._ticks),
                    utilization_ratio=0.25,
                    memory_used_bytes=None if "used-unknown" in self._breaks else self._total() // 100,
                    memory_total_bytes=total, power_watts=None if unlisted else 120.0, energy_joules=self._energy,
                    temperature_celsius=41.0, clocks_hertz={"sm": clock}, ecc_corrected_total=3,
                    ecc_uncorrected_total=0,
                ))
            return tuple(out)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        self._guard()
        self._enter()
        if "lost-breaks-all" in self._breaks and self._lost:
            raise VendorLibError("ACME_ERROR_GPU_IS_LOST")
        wanted = self._check_ids(ids)
        if "health-filter-ignored" in self._breaks:
            wanted = self._ids()
        return {i: self._health(i) for i in wanted}

    def inject_fault(self, fault: Fault, device_id: str) -> None:
        if fault is Fault.DEVICE_LOST:
            self._lost.add(device_id)
        elif fault is Fault.HEALTH_NOT_SUPPORTED:
            self._unreadable.add(device_id)
        else:  # pragma: no cover - future faults
            raise NotSupportedError(f"fault {fault} not simulated")

    def close(self) -> None:
        self._close_calls += 1
        if "close-twice-raises" in self._breaks and self._close_calls > 1:
            raise VendorLibError("ACME_ERROR_UNINITIALIZED: shutdown called twice")
        if "close-after-lost-raises" in self._breaks and self._lost:
            raise PluginError("cannot shut down with a lost device")
        self._closed = True

    def __exit__(self, *exc: object) -> bool:  # type: ignore[override]
        self.close()
        return "swallow-exit" in self._breaks


class FakeBackendWithProcesses(FakeBackend):
    """Implements SupportsProcesses without declaring it (the 'undeclared-protocol' break)."""

    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        return ()


class FakePlugin(BackendPlugin):
    info = PluginInfo(
        name="acme", vendor="acme", version="0.3.1", api_versions=frozenset({ApiVersion(1, 0)}), api="acme-smi",
        capabilities=frozenset(Capability) - {Capability.PROCESSES, Capability.EVENTS},
    )

    def __init__(self) -> None:
        self._opens = 0
        self._lock = threading.Lock()
        self._probing = 0
        self._open_backends = 0

    def probe(self, config: BackendConfig) -> ProbeResult:
        breaks = breaks_of(config)
        try:
            found = scan_pci(config.sysfs_root, vendor_ids=[VENDOR_ID])
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return ProbeResult.error(f"sysfs scan failed: {exc}")
        if "probe-not-threadsafe" in breaks:
            with self._lock:
                self._probing += 1
                racing = self._probing > 1
            time.sleep(0.02)
            with self._lock:
                self._probing -= 1
            if racing:
                raise VendorLibError("probe state corrupted by a concurrent call")
        if "probe-runs-tools" in breaks and config.runner is not None:
            for _ in range(3):
                config.runner.run(["acme-smi", "-q"])
        if "probe-runs-own-replay" in breaks:
            own = ReplayRunner.from_mapping({"acme-smi -q": SMI_OUTPUT})
            for _ in range(2):
                own.run(["acme-smi", "-q"])
        if "probe-flaky" in breaks and self._open_backends:
            return ProbeResult.absent("a backend holds the device")
        if not found:
            if "probe-raises" in breaks:
                raise VendorLibError("ACME_ERROR_NO_DEVICE")
            return ProbeResult.absent(f"no PCI device with vendor id {VENDOR_ID} under {config.sysfs_root}")
        count = len(found) - (1 if "probe-count-wrong" in breaks else 0)
        return ProbeResult.present(f"{len(found)} acme PCI functions", device_count=count)

    def open(self, config: BackendConfig) -> Backend:
        with self._lock:
            self._opens += 1
            self._open_backends += 1
            number = self._opens
        cls = FakeBackendWithProcesses if "undeclared-protocol" in breaks_of(config) else FakeBackend
        return cls(config, number)


class BadApiPlugin(FakePlugin):
    info = FakePlugin.info.model_copy(update={"api_versions": frozenset({ApiVersion(9, 0)})})


PLUGIN = FakePlugin()


class AcmeOracle(SysfsOracle):
    """Bus ids from sysfs; memory from the spec sheet (80 GiB), independent of the backend."""

    def memory_total_bytes(self, device: Device) -> int | None:
        return TOTAL


def plugin_for(breaks: str) -> FakePlugin:
    if "import-slow-thread" in breaks:
        # Imported only for this breakage: the module costs 3 s (the point of it).
        from tests.conformance.conformance_slow_import import PLUGIN as SLOW

        return SLOW
    return BadApiPlugin() if "bad-api-version" in breaks else FakePlugin()
