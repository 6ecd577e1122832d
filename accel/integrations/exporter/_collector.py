"""The ``prometheus_client`` collector: one snapshot in, metric families in base units out.

Unknown is absent: a field the model holds as ``None`` (not read) or names in ``unsupported``
(never readable) emits no sample, never a 0.  Families are listed in :data:`FAMILIES` (name,
type, help) so the docs, the dashboard test and the collector agree.

Labels (``accel exporter --labels``): ``accel`` (default) puts only ``device`` on a device's
value series, identity being one join away in ``accel_device_info``; ``dcgm`` adds
dcgm-exporter's identifying labels to every series keyed by ``device`` (:data:`DCGM_LABELS`:
``gpu``, ``UUID``, ``modelName``, ``Hostname``, ``pci_bus_id``, ``DCGM_FI_DRIVER_VERSION``, and
``namespace``/``pod``/``container`` and ``hpc_job`` when attribution is on), one copy of a series
per holder as dcgm-exporter does.  ``benchmarks/exporter_scrape/labels.py`` measures what that
costs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ...model import (
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
from ._attribution import HPC_SOURCE, POD_SOURCE, Attribution, AttributionRead
from ._families import _BY_NAME, FAMILIES, Family, FieldSelection
from ._snapshot import BackendRead, Snapshot, SnapshotSource

__all__ = ["DCGM_LABELS", "FAMILIES", "LABEL_MODES", "AccelCollector", "Family", "render"]

#: ``--labels`` values.
LABEL_MODES = ("accel", "dcgm")
#: dcgm-exporter's identifying labels (internal/pkg/rendermetrics; tag 4.5.3-4.8.2 spelling,
#: ``Hostname`` capitalised), added to value series by ``--labels dcgm``.
DCGM_LABELS = ("gpu", "UUID", "modelName", "Hostname", "pci_bus_id", "DCGM_FI_DRIVER_VERSION")
#: dcgm-exporter's attribution labels (``--kubernetes``; the HPC job mapping).
POD_LABELS = ("namespace", "pod", "container")
HPC_LABEL = "hpc_job"
#: Families keyed by ``device`` that never get the extra labels: they are identity or attribution already.
_NO_EXTRA = frozenset({"accel_device_info", "accel_device_pod_info", "accel_device_hpc_job_info",
                       "accel_device_accel_job_info",
                       "accel_device_read_problems"})


_Slot = tuple[GaugeMetricFamily | CounterMetricFamily, set[tuple[str, ...]], int]
#: The one-hot state label values, in enum order (built once, not per device and link).
_LINK_STATES = tuple(s.value for s in LinkState)
_HEALTH_STATES = tuple(s.value for s in HealthState)
_OPERATIONAL = tuple(s.value for s in Operational)


class _Families:
    """The families of one collect, created on first use, emitted in :data:`FAMILIES` order.

    ``only``: the family names to emit (``None``: all); a sample of any other family is dropped
    before it costs anything.
    """

    def __init__(self, only: frozenset[str] | None = None, extra_names: tuple[str, ...] = (),
                 extras: Mapping[str, Sequence[tuple[str, ...]]] | None = None) -> None:
        self._only = only
        #: name -> (family, label sets seen, label count), or None for a family not emitted.
        self._slots: dict[str, _Slot | None] = {}
        #: ``--labels dcgm``: the extra label names and, per device id, one value tuple per copy.
        self._extra_names = extra_names
        self._extras = extras or {}
        self._blank = (("",) * len(extra_names),)
        self._extended: set[str] = set()

    def exports(self, name: str) -> bool:
        return self._only is None or name in self._only

    def _open(self, name: str) -> _Slot | None:
        fam = _BY_NAME[name]
        slot: _Slot | None = None
        if self.exports(name):
            kind = CounterMetricFamily if fam.type == "counter" else GaugeMetricFamily
            names = list(fam.labels)
            if self._extra_names and names[:1] == ["device"] and name not in _NO_EXTRA:
                names += self._extra_names
                self._extended.add(name)
            slot = (kind(name, fam.help, labels=names), set(), len(fam.labels))
        self._slots[name] = slot
        return slot

    def add(self, name: str, labels: Sequence[str | int | None], value: float | None) -> None:
        """One sample; ``None`` (unknown) adds nothing, a repeated label set is dropped."""
        if value is None:
            return
        try:
            slot = self._slots[name]
        except KeyError:
            slot = self._open(name)
        if slot is None:
            return
        made, seen, width = slot
        values = tuple([v if type(v) is str else "" if v is None else str(v) for v in labels])
        assert len(values) == width, name
        if values in seen:
            return
        seen.add(values)
        number = value if type(value) is float else float(value)
        if name in self._extended:
            for extra in self._extras.get(values[0], self._blank):
                made.add_metric(values + extra, number)
            return
        made.add_metric(values, number)

    def __iter__(self) -> Iterator[Metric]:
        for fam in FAMILIES:
            slot = self._slots.get(fam.name)
            if slot is not None:
                yield slot[0]


def _one_hot(out: _Families, name: str, key: Sequence[str], states: Iterable[str], current: str) -> None:
    for state in states:
        out.add(name, [*key, state], 1 if state == current else 0)


class AccelCollector(Collector):
    """A custom collector over a :class:`SnapshotSource`: each ``collect()`` is one snapshot.

    ``processes`` adds ``accel_process_memory_bytes`` per process (one series per pid: high
    cardinality, so off by default).  ``fields`` (``accel exporter --fields``, see
    :func:`~accel.integrations.exporter._families.parse_fields`) limits the families emitted; the backends
    should be opened with its ``readings`` so that they read no more than that.
    """

    def __init__(self, source: SnapshotSource, *, processes: bool = False,
                 fields: FieldSelection | None = None, labels: str = "accel",
                 attribution: Attribution | None = None) -> None:
        if labels not in LABEL_MODES:
            from ...errors import ConfigError

            raise ConfigError(f"--labels {labels!r}: use one of {', '.join(LABEL_MODES)}")
        self.source = source
        self.processes = processes
        self.fields = fields
        self.labels = labels
        self.attribution = attribution

    def collect(self) -> Iterable[Metric]:
        snap = self.source.get()
        who = None
        if self.attribution is not None:
            who = self.attribution.read(d for r in snap.backends if r.inventory is not None
                                        for d in r.inventory.devices)
        return list(render(snap, processes=self.processes, fields=self.fields, labels=self.labels,
                           attribution=who))


def _extra_labels(
    snap: Snapshot, who: AttributionRead | None
) -> tuple[tuple[str, ...], dict[str, list[tuple[str, ...]]]]:
    """``--labels dcgm``: the extra label names and each device's value tuples (one per holder)."""
    names: tuple[str, ...] = DCGM_LABELS
    pods = who is not None and POD_SOURCE in who.states
    jobs = who is not None and HPC_SOURCE in who.states
    if pods:
        names += POD_LABELS
    if jobs:
        names += (HPC_LABEL,)
    extras: dict[str, list[tuple[str, ...]]] = {}
    for read in snap.backends:
        if read.inventory is None:
            continue
        hostname = read.inventory.host.hostname
        for dev in read.inventory.devices:
            index = "" if dev.index is None else str(dev.index)
            ident: tuple[str, ...] = (index, dev.uuid or "", dev.model, hostname or "",
                                      dev.pci.bus_id if dev.pci else "", dev.versions.driver or "")
            copies: list[tuple[str, ...]] = [ident]
            if pods:
                assert who is not None
                holders = who.pods.get(dev.id) or ()
                copies = ([(*c, h.namespace, h.pod, h.container) for c in copies for h in holders]
                          or [(*c, "", "", "") for c in copies])
            if jobs:
                assert who is not None
                ids = who.jobs.get(dev.id) or ()
                copies = [(*c, j) for c in copies for j in ids] or [(*c, "") for c in copies]
            extras[dev.id] = copies
    return names, extras


def render(snap: Snapshot, *, processes: bool = False, fields: FieldSelection | None = None,
           labels: str = "accel", attribution: AttributionRead | None = None) -> _Families:
    """The metric families of one snapshot (what one scrape shows).

    ``labels``: ``accel`` or ``dcgm`` (see the module docstring); ``attribution``: who holds
    each device (``accel_device_pod_info``, ``accel_device_hpc_job_info``, ``accel_attribution_up``).
    """
    only = fields.families if fields is not None else None
    if labels == "dcgm":
        names, extras = _extra_labels(snap, attribution)
        out = _Families(only, names, extras)
    else:
        out = _Families(only)
    if attribution is not None:
        _attribution(out, attribution)
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
        _device_problems(out, read)
    for (backend, call), n in sorted(snap.read_errors.items()):
        out.add("accel_exporter_read_errors_total", [backend, call], n)
    out.add("accel_exporter_scrape_duration_seconds", [], snap.duration_s)
    out.add("accel_exporter_reads_total", [], snap.reads)
    out.add("accel_inventory_complete", [], 1 if snap.complete else 0)
    return out


def _attribution(out: _Families, who: AttributionRead) -> None:
    for name, state in sorted(who.states.items()):
        out.add("accel_attribution_up", [name], 1 if state.up else 0)
    for device, holders in sorted(who.pods.items()):
        for h in holders:
            out.add("accel_device_pod_info", [device, h.namespace, h.pod, h.container], 1)
    for device, jobs in sorted(who.jobs.items()):
        for job in jobs:
            out.add("accel_device_hpc_job_info", [device, job], 1)
    for device, held in sorted(who.serve.items()):
        for job, tenant in held:
            out.add("accel_device_accel_job_info", [device, job, tenant], 1)


def _device_problems(out: _Families, read: BackendRead) -> None:
    """Problems that name a device, counted per device and kind: a device whose record did not
    parse is still listed (health unknown), and this is the series an alert can fire on for it."""
    counts: dict[tuple[str, str], int] = {}
    for problem in read.problems:
        if problem.device_id:
            key = (problem.device_id, problem.kind.value)
            counts[key] = counts.get(key, 0) + 1
    for (device, kind), n in sorted(counts.items()):
        out.add("accel_device_read_problems", [device, read.name, kind], n)


def _inventory(out: _Families, read: BackendRead, processes: bool) -> None:
    inv = read.inventory
    assert inv is not None
    samples = {t.device_id: t for t in read.telemetry}
    for dev in inv.devices:
        _device(out, read.name, inv, dev, samples.get(dev.id), read.health.get(dev.id, dev.health))
    for link in inv.links if out.exports("accel_link_state") or out.exports("accel_link_lanes") else ():
        key = [link.a, link.b, link.type.value]
        _one_hot(out, "accel_link_state", key, _LINK_STATES, link.state.value)
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
         dev.versions.driver, inv.host.hostname, dev.index],
        1,
    )
    total = t.memory_total_bytes if t is not None and t.memory_total_bytes is not None else dev.memory_total_bytes
    used = t.memory_used_bytes if t is not None and t.memory_used_bytes is not None else dev.memory_used_bytes
    out.add("accel_memory_total_bytes", d, total)
    out.add("accel_memory_used_bytes", d, used)
    out.add("accel_power_limit_watts", d, dev.power.enforced_watts)
    if out.exports("accel_temperature_limit_celsius"):
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
    if out.exports("accel_sensor_temperature_celsius"):
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
    for lc in t.links if out.exports("accel_link_rx_bytes_total") or out.exports("accel_link_crc_errors_total") else ():
        key = [t.device_id, lc.link]
        out.add("accel_link_rx_bytes_total", key, lc.rx_bytes_total)
        out.add("accel_link_tx_bytes_total", key, lc.tx_bytes_total)
        out.add("accel_link_crc_errors_total", key, lc.crc_errors_total)
        out.add("accel_link_replay_errors_total", key, lc.replay_errors_total)
        out.add("accel_link_recovery_errors_total", key, lc.recovery_errors_total)


def _health(out: _Families, device_id: str, health: Health) -> None:
    if not out.exports("accel_health_state"):
        return  # not selected (every health family is one group), and perhaps not read
    _one_hot(out, "accel_health_state", [device_id], _HEALTH_STATES, health.state.value)
    _one_hot(out, "accel_operational_state", [device_id], _OPERATIONAL, health.operational.value)
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
    _one_hot(out, "accel_partition_health_state", [part.id], _HEALTH_STATES, health.state.value)


def family_names() -> Mapping[str, Family]:
    """Every family by exposition name (the dashboard and docs tests use it)."""
    return dict(_BY_NAME)
