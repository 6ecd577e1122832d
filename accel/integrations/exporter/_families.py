"""The exporter's metric families and the field selection (``accel exporter --fields``).

No ``prometheus_client`` here: the command line parses ``--fields`` and the docs tests list the
families without it.  Each :class:`Family` belongs to one *group*: a
:class:`~accel.plugin.Reading` (the backend reads it only when a selected family needs it),
``partitions`` (always read: it places processes), ``identity`` (``accel_device_info``, always
exported), ``attribution`` (which pod or Slurm job holds a device; exported when the exporter is
told where to look, :mod:`accel.integrations.exporter._attribution`) or ``exporter`` (the exporter's own
families: backend up, read errors, inventory complete and problems; always exported, since they
say whether a scrape can be trusted).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...errors import ConfigError
from ...plugin import Reading

__all__ = ["COMMON_FAMILIES", "FAMILIES", "PROFILES", "Family", "FieldSelection", "parse_fields"]


@dataclass(frozen=True)
class Family:
    """One metric family: exposition ``name`` (counters with ``_total``), type, labels, help, and
    the ``group`` that selects it (a :class:`~accel.plugin.Reading` value, ``partitions``,
    ``identity`` or ``exporter``)."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str
    group: str

    @property
    def reading(self) -> Reading | None:
        """The backend reading this family needs (``None``: none beyond identity)."""
        return _READING_OF.get(self.group)


_READING_OF = {r.value: r for r in Reading}
#: Groups that are not backend readings.
_OTHER_GROUPS = ("identity", "partitions", "exporter", "attribution")
_PROCESS_FAMILY = "accel_process_memory_bytes"


def _f(name: str, kind: str, group: str, labels: str, help_text: str) -> Family:
    assert group in _READING_OF or group in _OTHER_GROUPS, group
    return Family(name, kind, tuple(labels.split()) if labels else (), help_text, group)


_DEV = "device"
#: Every family the collector can emit, in exposition order.
FAMILIES: tuple[Family, ...] = (
    _f("accel_device_info", "gauge", "identity", "device backend vendor kind model uuid bus_id driver hostname index",
       "Identity of a device (value 1); join on device for model, vendor, uuid, bus id, driver, hostname and "
       "the vendor tool's enumeration index."),
    _f("accel_device_pod_info", "gauge", "attribution", "device namespace pod container",
       "A Kubernetes container the kubelet allocated this device to (value 1; PodResources List)."),
    _f("accel_device_hpc_job_info", "gauge", "attribution", "device hpc_job",
       "A Slurm (HPC) job the job-mapping directory assigns this device to (value 1)."),
    _f("accel_device_accel_job_info", "gauge", "attribution", "device accel_job tenant",
       "An accel serve job (and its tenant) running on this device (value 1; accel serve --attribution-dir)."),
    _f("accel_memory_total_bytes", "gauge", "memory", _DEV, "Device memory in bytes."),
    _f("accel_memory_used_bytes", "gauge", "memory", _DEV, "Device memory in use, bytes."),
    _f("accel_memory_free_bytes", "gauge", "memory", _DEV, "Device memory free, bytes."),
    _f("accel_utilization_ratio", "gauge", "utilization", _DEV, "Compute utilisation, 0..1."),
    _f("accel_memory_utilization_ratio", "gauge", "utilization", _DEV,
       "Memory (controller or bandwidth) utilisation, 0..1."),
    _f("accel_power_watts", "gauge", "power", _DEV, "Power draw, watts."),
    _f("accel_power_limit_watts", "gauge", "power", _DEV, "Enforced power limit, watts."),
    _f("accel_energy_joules_total", "counter", "energy", _DEV, "Energy consumed as the device counts it, joules."),
    _f("accel_temperature_celsius", "gauge", "temperature", _DEV,
       "The device temperature the vendor reports as its main one."),
    _f("accel_sensor_temperature_celsius", "gauge", "temperature", "device sensor", "Temperature per sensor, celsius."),
    _f("accel_temperature_limit_celsius", "gauge", "temperature", "device limit",
       "Thermal thresholds (slowdown, shutdown, max_operating), celsius."),
    _f("accel_clock_hertz", "gauge", "clocks", "device clock", "Current clock per domain, hertz."),
    _f("accel_fan_ratio", "gauge", "fan", _DEV, "Fan speed, 0..1 of its maximum."),
    _f("accel_throttle_reason", "gauge", "throttle", "device reason", "An active clock throttle reason (value 1)."),
    _f("accel_pcie_rx_bytes_per_second", "gauge", "pcie", _DEV, "PCIe receive throughput, bytes per second."),
    _f("accel_pcie_tx_bytes_per_second", "gauge", "pcie", _DEV, "PCIe transmit throughput, bytes per second."),
    _f("accel_pcie_replay_total", "counter", "errors", _DEV, "PCIe replays."),
    _f("accel_ecc_corrected_total", "counter", "errors", _DEV, "Corrected ECC memory errors."),
    _f("accel_ecc_uncorrected_total", "counter", "errors", _DEV, "Uncorrected ECC memory errors."),
    _f("accel_retired_pages_total", "counter", "errors", _DEV, "Retired (or remapped) memory pages."),
    _f("accel_health_state", "gauge", "health", "device state",
       "Health state: one series per state, 1 on the current one (healthy, degraded, unhealthy, unknown)."),
    _f("accel_operational_state", "gauge", "health", "device state",
       "Operational status: one series per status, 1 on the current one (online ... lost)."),
    _f("accel_health_checked_timestamp_seconds", "gauge", "health", _DEV,
       "When health was last read (Unix seconds); absent when nothing that tells health was read."),
    _f("accel_health_condition", "gauge", "health", "device subsystem reason severity vendor_code action scope",
       "An active health condition (value 1)."),
    _f("accel_memory_leak_seconds_to_full", "gauge", "health", "device pid",
       "A suspected memory leak: seconds until the device's memory is full at the leak's rate "
       "(pid empty: the device's used memory; else that process's)."),
    _f("accel_memory_leak_bytes_per_second", "gauge", "health", "device pid",
       "A suspected memory leak: growth of the floor of used memory, bytes per second."),
    _f("accel_link_state", "gauge", "topology", "device peer type state",
       "A device-to-device link: one series per state, 1 on the current one."),
    _f("accel_link_lanes", "gauge", "topology", "device peer type", "Bonded links (or lanes) between two devices."),
    _f("accel_link_bandwidth_bytes_per_second", "gauge", "topology", "device peer type",
       "Nominal per-direction bandwidth of a link, bytes per second."),
    _f("accel_link_rx_bytes_total", "counter", "links", "device link", "Bytes received over one link."),
    _f("accel_link_tx_bytes_total", "counter", "links", "device link", "Bytes sent over one link."),
    _f("accel_link_crc_errors_total", "counter", "links", "device link", "CRC errors of one link."),
    _f("accel_link_replay_errors_total", "counter", "links", "device link", "Replay errors of one link."),
    _f("accel_link_recovery_errors_total", "counter", "links", "device link", "Recovery errors of one link."),
    _f("accel_partition_info", "gauge", "partitions", "partition parent profile family uuid",
       "A live partition (MIG instance, XCP, vNPU...), value 1."),
    _f("accel_partition_memory_bytes", "gauge", "partitions", "partition", "Memory of a partition, bytes."),
    _f("accel_partition_compute_ratio", "gauge", "partitions", "partition", "Share of the parent's compute, 0..1."),
    _f("accel_partition_health_state", "gauge", "health", "partition state",
       "Partition health: one series per state, 1 on the current one."),
    _f("accel_process_memory_bytes", "gauge", "processes", "device partition pid name",
       "Device memory a process holds, bytes (only with --processes)."),
    _f("accel_exporter_backend_up", "gauge", "exporter", "backend",
       "1 when the backend answered every read of this scrape, else 0."),
    _f("accel_exporter_scrape_duration_seconds", "gauge", "exporter", "", "How long the read behind this scrape took."),
    _f("accel_exporter_reads_total", "counter", "exporter", "", "Reads of the backends since the exporter started."),
    _f("accel_exporter_read_errors_total", "counter", "exporter", "backend call", "Failed backend calls per call."),
    _f("accel_inventory_complete", "gauge", "exporter", "", "1 when nothing was left unread in this snapshot, else 0."),
    _f("accel_inventory_problems", "gauge", "exporter", "backend kind", "Problems of this snapshot's read, per kind."),
    _f("accel_device_read_problems", "gauge", "exporter", "device backend kind",
       "Problems of this snapshot's read that name a device (a record that failed to parse...), per kind."),
    _f("accel_attribution_up", "gauge", "attribution", "source",
       "1 when the last ask of an attribution source (pod-resources, hpc-job-mapping) answered, else 0."),
)

_BY_NAME = {f.name: f for f in FAMILIES}

#: The families ``--fields common`` exports: the fields nvitop-exporter also exports (memory,
#: utilisation, clocks, power draw and limit, GPU temperature, fan, PCIe throughput, per-process
#: memory), plus identity and the exporter's own families.
COMMON_FAMILIES: frozenset[str] = frozenset({
    "accel_device_info", "accel_memory_total_bytes", "accel_memory_used_bytes", "accel_memory_free_bytes",
    "accel_utilization_ratio", "accel_memory_utilization_ratio", "accel_power_watts", "accel_power_limit_watts",
    "accel_temperature_celsius", "accel_clock_hertz", "accel_fan_ratio", "accel_pcie_rx_bytes_per_second",
    "accel_pcie_tx_bytes_per_second", _PROCESS_FAMILY,
    *(f.name for f in FAMILIES if f.group == "exporter"),
})

#: Named selections of ``--fields``.
PROFILES = ("full", "common")


@dataclass(frozen=True)
class FieldSelection:
    """What one exporter exports: ``families`` (``None``: every family) and the backend
    ``readings`` they need (``None``: everything; the backends' ``BackendConfig.readings``)."""

    spec: str
    families: frozenset[str] | None
    readings: frozenset[Reading] | None

    def exports(self, family: str) -> bool:
        return self.families is None or family in self.families

    @property
    def health(self) -> bool:
        """Whether health (and so leak detection, which reports as health) is exported."""
        return self.readings is None or Reading.HEALTH in self.readings


def _selection(spec: str, families: Iterable[str], *, processes: bool) -> FieldSelection:
    names = {n for n in families if processes or n != _PROCESS_FAMILY}
    names |= {f.name for f in FAMILIES if f.group in ("identity", "exporter", "attribution")}
    readings = {r for r in (_BY_NAME[n].reading for n in names) if r is not None}
    if Reading.HEALTH in readings:
        readings.add(Reading.PROCESSES)  # leak detection (a health condition) watches each process's memory
    return FieldSelection(spec=spec, families=frozenset(names), readings=frozenset(readings))


def parse_fields(spec: str, *, processes: bool = False) -> FieldSelection:
    """The selection ``--fields`` names.

    ``full`` (every family, everything read), ``common`` (:data:`COMMON_FAMILIES`), or a
    comma-separated list of groups (``memory,utilization,health``: every family of those groups).
    ``processes`` is ``--processes``: without it the per-process family stays off and processes
    are not read.  An unknown name is a :class:`~accel.errors.ConfigError` listing the known ones.
    """
    text = spec.strip().lower()
    if text == "full":
        families = None if processes else frozenset(_BY_NAME) - {_PROCESS_FAMILY}
        return FieldSelection(spec="full", families=families, readings=None)
    if text == "common":
        return _selection("common", COMMON_FAMILIES, processes=processes)
    groups = [g.strip() for g in text.split(",") if g.strip()]
    known = [*_READING_OF, "partitions"]
    bad = [g for g in groups if g not in known]
    if bad or not groups:
        why = f"unknown group {bad[0]!r}" if bad else "no group named"
        raise ConfigError(f"--fields {spec!r}: {why} (use full, common, or a comma list of: {', '.join(known)})")
    return _selection(",".join(groups), (f.name for f in FAMILIES if f.group in groups), processes=processes)
