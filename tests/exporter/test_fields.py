"""``accel exporter --fields``: the common profile exports exactly the common families, with the
values of the full scrape, reads less, and claims no health it did not read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accel.discovery import discover
from accel.errors import ConfigError
from accel.exporter import COMMON_FAMILIES, AccelCollector, FieldSelection, SnapshotSource, parse_fields
from accel.model import HealthState
from accel.plugin import READING_DOCS, BackendConfig, Reading, describe_readings

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
SCENARIO = "h100-nvswitch-8"


def _source(fields: FieldSelection, scenario: str = SCENARIO) -> SnapshotSource:
    config = BackendConfig(options={"scenario": scenario}, enrich_from_sysfs=False, readings=fields.readings)
    report = discover({"nvidia": config}, backends=["nvidia"])
    return SnapshotSource(report, {"nvidia": config}, config, min_interval_s=0.0)


def _scrape(source: SnapshotSource, fields: FieldSelection) -> Samples:
    registry = CollectorRegistry()
    registry.register(AccelCollector(source, processes=True, fields=fields))
    out: Samples = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value_count(got: Samples, name: str) -> int:
    return sum(1 for n, _ in got if n == name)


@pytest.fixture
def scrapes() -> Iterator[tuple[Samples, Samples, SnapshotSource, SnapshotSource]]:
    full_fields, common_fields = parse_fields("full", processes=True), parse_fields("common", processes=True)
    full, common = _source(full_fields), _source(common_fields)
    try:
        _scrape(full, full_fields), _scrape(common, common_fields)  # the first read caches identity
        yield _scrape(full, full_fields), _scrape(common, common_fields), full, common
    finally:
        full.close()
        common.close()


def test_common_exports_exactly_the_common_families_with_the_full_scrapes_values(
    scrapes: tuple[Samples, Samples, SnapshotSource, SnapshotSource],
) -> None:
    full, common, _, _ = scrapes
    got = {name for name, _ in common}
    # Only common families (the exporter's own are part of that set), and each device family of
    # the set that the full scrape shows on this host is there too.
    assert got <= COMMON_FAMILIES
    volatile = {"accel_exporter_scrape_duration_seconds", "accel_exporter_reads_total"}
    shown_in_full = {name for name, _ in full if name in COMMON_FAMILIES} - volatile
    assert shown_in_full <= got
    assert {"accel_memory_used_bytes", "accel_utilization_ratio", "accel_clock_hertz", "accel_power_watts",
            "accel_power_limit_watts", "accel_temperature_celsius", "accel_pcie_rx_bytes_per_second",
            "accel_device_info"} <= got
    # Same values, sample by sample (two fresh fakes of one scenario are the same machine).
    for key, v in common.items():
        if key[0] in volatile:
            continue
        assert key in full, key
        assert full[key] == v, key
    # Health, topology, errors, links and partitions are not exported.
    assert not any(name.startswith(("accel_health", "accel_link", "accel_ecc", "accel_operational"))
                   for name in got)
    assert any(name.startswith("accel_health_state") for name, _ in full)


def test_unknown_stays_absent_in_the_common_profile(
    scrapes: tuple[Samples, Samples, SnapshotSource, SnapshotSource],
) -> None:
    full, common, _, _ = scrapes
    # The H100 SXM reports no fan (NOT_SUPPORTED): absent in both, never a 0.
    assert not any(name == "accel_fan_ratio" for name, _ in full)
    assert not any(name == "accel_fan_ratio" for name, _ in common)
    assert value_count(common, "accel_inventory_complete") == 1
    assert common[("accel_inventory_complete", frozenset())] == 1.0


def test_a_read_without_health_claims_no_health_and_values_it_was_not_asked_for_stay_unread() -> None:
    fields = parse_fields("common")
    source = _source(fields)
    try:
        snap = source.get()
    finally:
        source.close()
    (read,) = snap.backends
    assert read.up and read.inventory is not None
    assert len(read.inventory.devices) == 8
    for dev in read.inventory.devices:
        # Health is earned: nothing that tells health was read, so unknown, never healthy.
        assert dev.health.state is HealthState.UNKNOWN
        assert not dev.health.monitored and dev.health.checked_at is None
        assert dev.uuid and dev.model.startswith("NVIDIA H100") and dev.memory_total_bytes
    assert read.inventory.links == () and read.inventory.processes == ()  # not asked (no --processes)
    assert "narrowed read" in (read.inventory.sources[0].detail or "")
    for t in read.telemetry:
        assert t.power_watts is not None and t.memory_used_bytes is not None and t.clocks_hertz
        # Not asked: None, and not "unsupported" (nothing refused them).
        assert t.energy_joules is None and t.ecc_corrected_total is None and t.links == ()
        assert t.throttle_reasons == ()
        assert not t.unsupported & {"energy_joules", "ecc_corrected_total", "throttle_reasons"}


def test_the_nvidia_backend_reads_less_for_the_common_fields() -> None:
    calls = {}
    for spec in ("full", "common"):
        fields = parse_fields(spec, processes=True)
        source = _source(fields)
        try:
            source.get()
            backend = source._sessions["nvidia"].backends["nvidia"]
            before = backend.nvml_calls  # type: ignore[attr-defined]
            source.get()
            calls[spec] = backend.nvml_calls - before  # type: ignore[attr-defined]
        finally:
            source.close()
    assert 0 < calls["common"] < calls["full"]


def test_an_explicit_health_call_still_reads_health_on_a_narrowed_backend() -> None:
    from accel.plugins.nvidia import PLUGIN

    config = BackendConfig(options={"scenario": SCENARIO}, enrich_from_sysfs=False,
                           readings=parse_fields("common").readings)
    with PLUGIN.open(config) as backend:
        inv = backend.inventory()
        assert {d.health.state for d in inv.devices} == {HealthState.UNKNOWN}
        health = backend.health()
    assert len(health) == 8
    assert all(h.checked_at is not None and h.monitored for h in health.values())
    assert {h.state for h in health.values()} == {HealthState.HEALTHY}


@pytest.mark.parametrize("name", ["sim", "ascend"])
def test_backends_that_do_not_narrow_still_answer_correctly(name: str) -> None:
    """The sim and a CLI plugin (ascend, npu-smi) ignore the hint: full, correct answers, and the
    exporter still emits only the selected families."""
    options = {"profile": "dgx-h100"} if name == "sim" else {"scenario": "910b-8"}
    fields = parse_fields("common")
    base = BackendConfig(options=options, enrich_from_sysfs=False)
    narrowed = dataclasses.replace(base, readings=fields.readings)
    got = {}
    for label, config in (("full", base), ("narrowed", narrowed)):
        report = discover({name: config}, backends=[name])
        source = SnapshotSource(report, {name: config}, config, min_interval_s=0.0)
        try:
            snap = source.get()
            got[label] = snap
            if label == "narrowed":
                scraped = _scrape(source, fields)
        finally:
            source.close()
    full_inv, narrow_inv = got["full"].backends[0].inventory, got["narrowed"].backends[0].inventory
    assert full_inv is not None and narrow_inv is not None
    assert [d.id for d in narrow_inv.devices] == [d.id for d in full_inv.devices]
    assert [d.health.state for d in narrow_inv.devices] == [d.health.state for d in full_inv.devices]
    assert {n for n, _ in scraped} <= COMMON_FAMILIES
    assert any(n == "accel_memory_total_bytes" for n, _ in scraped)


def test_field_specs() -> None:
    assert parse_fields("full").readings is None
    assert parse_fields("full").exports("accel_health_state")
    assert not parse_fields("full").exports("accel_process_memory_bytes")  # needs --processes
    assert parse_fields("full", processes=True).families is None
    common = parse_fields("common")
    assert common.readings is not None and Reading.HEALTH not in common.readings
    assert Reading.PROCESSES not in common.readings and not common.health
    assert Reading.PROCESSES in parse_fields("common", processes=True).readings  # type: ignore[operator]
    groups = parse_fields("power, health")
    assert groups.readings == {Reading.POWER, Reading.HEALTH, Reading.PROCESSES}  # leaks watch processes
    assert groups.exports("accel_power_watts") and groups.exports("accel_health_condition")
    assert groups.exports("accel_exporter_backend_up") and groups.exports("accel_device_info")
    assert not groups.exports("accel_clock_hertz")
    assert parse_fields("partitions").readings == frozenset()
    for bad in ("bogus", "power,nope", ",", "Common,power"):
        with pytest.raises(ConfigError, match="--fields"):
            parse_fields(bad)


def test_every_reading_is_documented_and_described_in_a_stable_order() -> None:
    assert set(READING_DOCS) == set(Reading)
    assert describe_readings({Reading.POWER, Reading.MEMORY}) == "narrowed read: memory, power"
    assert describe_readings(()) == "narrowed read: identity only"
    # Every group a family names is a reading, partitions, identity, attribution or exporter.
    from accel.exporter import FAMILIES

    others = {"partitions", "identity", "exporter", "attribution"}
    assert {f.group for f in FAMILIES} <= {r.value for r in Reading} | others


def test_a_narrowed_read_still_reports_a_lost_gpu_lost() -> None:
    from accel.model import Operational
    from accel.plugins.nvidia import PLUGIN

    config = BackendConfig(options={"scenario": SCENARIO}, enrich_from_sysfs=False,
                           readings=parse_fields("common").readings)
    with PLUGIN.open(config) as backend:
        first = backend.inventory()
        victim = first.devices[3].id
        backend.inject_fault("device_lost", victim)  # type: ignore[attr-defined]
        inv = backend.inventory()
        samples = {t.device_id: t for t in backend.telemetry()}
    lost = next(d for d in inv.devices if d.id == victim)
    assert lost.health.operational is Operational.LOST and lost.health.state is HealthState.UNHEALTHY
    assert all(d.health.state is HealthState.UNKNOWN for d in inv.devices if d.id != victim)
    assert samples[victim].utilization_ratio is None and samples[victim].power_watts is None
    assert len(inv.devices) == 8
