"""The ``prometheus_client`` collector: one snapshot in, metric families in base units out.

Unknown is absent: a field the model holds as ``None`` (not read) or names in ``unsupported``
(never readable) emits no sample, never a 0.  Families are listed in :data:`FAMILIES` (name,
type, help) so the docs, the dashboard test and the collector agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..model import (
    Device,
    Health,
    HealthState,
    HostInventory,
    LinkState,
    Operational,
    Partition,
    ProblemKind,
    Telemetry,
)
from ._snapshot import BackendRead, Snapshot, SnapshotSource

__all__ = ["FAMILIES", "AccelCollector", "Family"]


@dataclass(frozen=True)
class Family:
    """One metric family: exposition ``name`` (counters with ``_total``), type, labels, help."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str


def _f(name: str, kind: str, labels: str, help_text: str) -> Family:
    return Family(name, kind, tuple(labels.split()) if labels else (), help_text)


_DEV = "device"
#: Every family the collector can emit, in exposition order.
FAMILIES: tuple[Family, ...] = (
    _f("accel_device_info", "gauge", "device backend vendor kind model uuid bus_id driver hostname",
       "Identity of a device (value 1); join on device for model, vendor, uuid, bus id, driver, hostname."),
    _f("accel_memory_total_bytes", "gauge", _DEV, "Device memory in bytes."),
    _f("accel_memory_used_bytes", "gauge", _DEV, "Device memory in use, bytes."),
    _f("accel_memory_free_bytes", "gauge", _DEV, "Device memory free, bytes."),
    _f("accel_utilization_ratio", "gauge", _DEV, "Compute utilisation, 0..1."),
    _f("accel_memory_utilization_ratio", "gauge", _DEV, "Memory (controller or bandwidth) utilisation, 0..1."),
    _f("accel_power_watts", "gauge", _DEV, "Power draw, watts."),
    _f("accel_power_limit_watts", "gauge", _DEV, "Enforced power limit, watts."),
    _f("accel_energy_joules_total", "counter", _DEV, "Energy consumed as the device counts it, joules."),
    _f("accel_temperature_celsius", "gauge", _DEV, "The device temperature the vendor reports as its main one."),
    _f("accel_sensor_temperature_celsius", "gauge", "device sensor", "Temperature per sensor, celsius."),
    _f("accel_temperature_limit_celsius", "gauge", "device limit",
       "Thermal thresholds (slowdown, shutdown, max_operating), celsius."),
    _f("accel_clock_hertz", "gauge", "device clock", "Current clock per domain, hertz."),
    _f("accel_fan_ratio", "gauge", _DEV, "Fan speed, 0..1 of its maximum."),
    _f("accel_throttle_reason", "gauge", "device reason", "An active clock throttle reason (value 1)."),
    _f("accel_pcie_rx_bytes_per_second", "gauge", _DEV, "PCIe receive throughput, bytes per second."),
    _f("accel_pcie_tx_bytes_per_second", "gauge", _DEV, "PCIe transmit throughput, bytes per second."),
    _f("accel_pcie_replay_total", "counter", _DEV, "PCIe replays."),
    _f("accel_ecc_corrected_total", "counter", _DEV, "Corrected ECC memory errors."),
    _f("accel_ecc_uncorrected_total", "counter", _DEV, "Uncorrected ECC memory errors."),
    _f("accel_retired_pages_total", "counter", _DEV, "Retired (or remapped) memory pages."),
    _f("accel_health_state", "gauge", "device state",
       "Health state: one series per state, 1 on the current one (healthy, degraded, unhealthy, unknown)."),
    _f("accel_operational_state", "gauge", "device state",
       "Operational status: one series per status, 1 on the current one (online ... lost)."),
    _f("accel_health_checked_timestamp_seconds", "gauge", _DEV,
       "When health was last read (Unix seconds); absent when nothing that tells health was read."),
    _f("accel_health_condition", "gauge", "device subsystem reason severity vendor_code action scope",
       "An active health condition (value 1)."),
    _f("accel_memory_leak_seconds_to_full", "gauge", "device pid",
       "A suspected memory leak: seconds until the device's memory is full at the leak's rate "
       "(pid empty: the device's used memory; else that process's)."),
    _f("accel_memory_leak_bytes_per_second", "gauge", "device pid",
       "A suspected memory leak: growth of the floor of used memory, bytes per second."),
    _f("accel_link_state", "gauge", "device peer type state",
       "A device-to-device link: one series per state, 1 on the current one."),
    _f("accel_link_lanes", "gauge", "device peer type", "Bonded links (or lanes) between two devices."),
    _f("accel_link_bandwidth_bytes_per_second", "gauge", "device peer type",
       "Nominal per-direction bandwidth of a link, bytes per second."),
    _f("accel_link_rx_bytes_total", "counter", "device link", "Bytes received over one link."),
    _f("accel_link_tx_bytes_total", "counter", "device link", "Bytes sent over one link."),
    _f("accel_link_crc_errors_total", "counter", "device link", "CRC errors of one link."),
    _f("accel_link_replay_errors_total", "counter", "device link", "Replay errors of one link."),
    _f("accel_link_recovery_errors_total", "counter", "device link", "Recovery errors of one link."),
    _f("accel_partition_info", "gauge", "partition parent profile family uuid",
       "A live partition (MIG instance, XCP, vNPU...), value 1."),
    _f("accel_partition_memory_bytes", "gauge", "partition", "Memory of a partition, bytes."),
    _f("accel_partition_compute_ratio", "gauge", "partition", "Share of the parent's compute, 0..1."),
    _f("accel_partition_health_state", "gauge", "partition state",
       "Partition health: one series per state, 1 on the current one."),
    _f("accel_process_memory_bytes", "gauge", "device partition pid name",
       "Device memory a process holds, bytes (only with --processes)."),
    _f("accel_exporter_backend_up", "gauge", "backend",
       "1 when the backend answered every read of this scrape, else 0."),
    _f("accel_exporter_scrape_duration_seconds", "gauge", "", "How long the read behind this scrape took."),
    _f("accel_exporter_reads_total", "counter", "", "Reads of the backends since the exporter started."),
    _f("accel_exporter_read_errors_total", "counter", "backend call", "Failed backend calls per call."),
    _f("accel_inventory_complete", "gauge", "", "1 when nothing was left unread in this snapshot, else 0."),
    _f("accel_inventory_problems", "gauge", "backend kind", "Problems of this snapshot's read, per kind."),
)

_BY_NAME = {f.name: f for f in FAMILIES}


class _Families:
    """The families of one collect, created on first use, emitted in :data:`FAMILIES` order."""

    def __init__(self) -> None:
        self._made: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        self._seen: dict[str, set[tuple[str, ...]]] = {}

    def add(self, name: str, labels: Sequence[str | int | None], value: float | None) -> None:
        """One sample; ``None`` (unknown) adds nothing, a repeated label set is dropped."""
        if value is None:
            return
        fam = _BY_NAME[name]
        values = tuple("" if v is None else str(v) for v in labels)
        assert len(values) == len(fam.labels), name
        seen = self._seen.setdefault(name, set())
        if values in seen:
            return
        seen.add(values)
        made = self._made.get(name)
        if made is None:
            if fam.type == "counter":
                made = CounterMetricFamily(name, fam.help, labels=list(fam.labels))
            else:
                made = GaugeMetricFamily(name, fam.help, labels=list(fam.labels))
            self._made[name] = made
        made.add_metric(list(values), float(value))

    def __iter__(self) -> Iterator[Metric]:
        for fam in FAMILIES:
            made = self._made.get(fam.name)
            if made is not None:
                yield made


def _one_hot(out: _Families, name: str, key: Sequence[str], states: Iterable[str], current: str) -> None:
    for state in states:
        out.add(name, [*key, state], 1 if state == current else 0)


class AccelCollector(Collector):
    """A custom collector over a :class:`SnapshotSource`: each ``collect()`` is one snapshot.

    ``processes`` adds ``accel_process_memory_bytes`` per process (one series per pid: high
    cardinality, so off by default).
    """

    def __init__(self, source: SnapshotSource, *, processes: bool = False) -> None:
        self.source = source
        self.processes = processes

    def collect(self) -> Iterable[Metric]:
        snap = self.source.get()
        return list(render(snap, processes=self.processes))


def render(snap: Snapshot, *, processes: bool = False) -> _Families:
    """The metric families of one snapshot (what one scrape shows)."""
    out = _Families()
    for key, verdict in snap.leaks.items():
        device, pid = (key[0], key[1]) if isinstance(key, tuple) else (key, None)
        out.add("accel_memory_leak_seconds_to_full", [str(device), pid], verdict.seconds_to_full)
        out.add("accel_memory_leak_bytes_per_second", [str(device), pid], verdict.slope_bytes_per_s)
    for read in snap.backends:
        out.add("accel_exporter_backend_up", [read.name], 1 if read.up else 0)
        if read.inventory is not None:
            _inventory(out, read, processes)
        counts = {kind: 0 for kind in ProblemKind}
        for problem in read.problems:
            counts[problem.kind] += 1
        for kind, n in counts.items():
            out.add("accel_inventory_problems", [read.name, kind.value], n)
    for (backend, call), n in sorted(snap.read_errors.items()):
        out.add("accel_exporter_read_errors_total", [backend, call], n)
    out.add("accel_exporter_scrape_duration_seconds", [], snap.duration_s)
    out.add("accel_exporter_reads_total", [], snap.reads)
    out.add("accel_inventory_complete", [], 1 if snap.complete else 0)
    return out


def _inventory(out: _Families, read: BackendRead, processes: bool) -> None:
    inv = read.inventory
    assert inv is not None
    samples = {t.device_id: t for t in read.telemetry}
    for dev in inv.devices:
        _device(out, read.name, inv, dev, samples.get(dev.id), read.health.get(dev.id, dev.health))
    for link in inv.links:
        key = [link.a, link.b, link.type.value]
        _one_hot(out, "accel_link_state", key, [s.value for s in LinkState], link.state.value)
        out.add("accel_link_lanes", key, link.count)
        out.add("accel_link_bandwidth_bytes_per_second", key, link.bandwidth_bytes_per_s)
    for part in inv.partitions:
        _partition(out, part, read.health.get(part.id, part.health))
    if processes:
        for proc in inv.processes:
            out.add("accel_process_memory_bytes", [proc.device_id, proc.partition_id, proc.pid, proc.name],
                    proc.memory_bytes)


def _device(
    out: _Families, backend: str, inv: HostInventory, dev: Device, t: Telemetry | None, health: Health
) -> None:
    d = [dev.id]
    out.add(
        "accel_device_info",
        [dev.id, backend, dev.vendor, dev.kind.value, dev.model, dev.uuid, dev.pci.bus_id if dev.pci else None,
         dev.versions.driver, inv.host.hostname],
        1,
    )
    total = t.memory_total_bytes if t is not None and t.memory_total_bytes is not None else dev.memory_total_bytes
    used = t.memory_used_bytes if t is not None and t.memory_used_bytes is not None else dev.memory_used_bytes
    out.add("accel_memory_total_bytes", d, total)
    out.add("accel_memory_used_bytes", d, used)
    out.add("accel_power_limit_watts", d, dev.power.enforced_watts)
    for limit, value in (
        ("slowdown", dev.thermal.slowdown_celsius),
        ("shutdown", dev.thermal.shutdown_celsius),
        ("max_operating", dev.thermal.max_operating_celsius),
    ):
        out.add("accel_temperature_limit_celsius", [dev.id, limit], value)
    if t is not None:
        _telemetry(out, t)
    _health(out, dev.id, health)


def _telemetry(out: _Families, t: Telemetry) -> None:
    d = [t.device_id]
    out.add("accel_memory_free_bytes", d, t.memory_free_bytes)
    out.add("accel_utilization_ratio", d, t.utilization_ratio)
    out.add("accel_memory_utilization_ratio", d, t.memory_utilization_ratio)
    out.add("accel_power_watts", d, t.power_watts)
    out.add("accel_energy_joules_total", d, t.energy_joules)
    out.add("accel_temperature_celsius", d, t.temperature_celsius)
    for sensor, value in sorted(t.temperatures_celsius.items()):
        out.add("accel_sensor_temperature_celsius", [t.device_id, sensor], value)
    for clock, hz in sorted(t.clocks_hertz.items()):
        out.add("accel_clock_hertz", [t.device_id, clock], hz)
    out.add("accel_fan_ratio", d, t.fan_ratio)
    for reason in t.throttle_reasons:
        out.add("accel_throttle_reason", [t.device_id, reason], 1)
    out.add("accel_pcie_rx_bytes_per_second", d, t.pcie_rx_bytes_per_s)
    out.add("accel_pcie_tx_bytes_per_second", d, t.pcie_tx_bytes_per_s)
    out.add("accel_pcie_replay_total", d, t.pcie_replay_total)
    out.add("accel_ecc_corrected_total", d, t.ecc_corrected_total)
    out.add("accel_ecc_uncorrected_total", d, t.ecc_uncorrected_total)
    out.add("accel_retired_pages_total", d, t.retired_pages_total)
    for lc in t.links:
        key = [t.device_id, lc.link]
        out.add("accel_link_rx_bytes_total", key, lc.rx_bytes_total)
        out.add("accel_link_tx_bytes_total", key, lc.tx_bytes_total)
        out.add("accel_link_crc_errors_total", key, lc.crc_errors_total)
        out.add("accel_link_replay_errors_total", key, lc.replay_errors_total)
        out.add("accel_link_recovery_errors_total", key, lc.recovery_errors_total)


def _health(out: _Families, device_id: str, health: Health) -> None:
    _one_hot(out, "accel_health_state", [device_id], [s.value for s in HealthState], health.state.value)
    _one_hot(out, "accel_operational_state", [device_id], [s.value for s in Operational], health.operational.value)
    if health.checked_at is not None:
        out.add("accel_health_checked_timestamp_seconds", [device_id], health.checked_at.timestamp())
    for cond in health.conditions:
        if not cond.active:
            continue
        out.add(
            "accel_health_condition",
            [device_id, cond.subsystem.value, cond.reason, cond.severity.value, cond.vendor_code, cond.action.value,
             cond.scope.value],
            1,
        )


def _partition(out: _Families, part: Partition, health: Health) -> None:
    out.add("accel_partition_info", [part.id, part.parent_id, part.profile, part.family.value, part.uuid], 1)
    out.add("accel_partition_memory_bytes", [part.id], part.memory_bytes)
    out.add("accel_partition_compute_ratio", [part.id], part.compute_ratio)
    _one_hot(out, "accel_partition_health_state", [part.id], [s.value for s in HealthState], health.state.value)


def family_names() -> Mapping[str, Family]:
    """Every family by exposition name (the dashboard and docs tests use it)."""
    return dict(_BY_NAME)
