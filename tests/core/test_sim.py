"""The simulator: profiles match real hardware, faults behave, values are deterministic."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from accel.errors import ConfigError, DeviceError, DeviceLostError, ProfileError, ToolTimeoutError
from accel.model import DistanceLevel, DomainKind, HealthState, LinkType, Operational
from accel.plugin import BackendConfig, SupportsEvents, SupportsPartitions, SupportsProcesses
from accel.sim import PLUGIN, Fault, FaultKind, SimBackend, generate_cluster, list_profiles, parse_faults

GiB = 2**30


def open_sim(profile: str, **options: object) -> SimBackend:
    backend = PLUGIN.open(BackendConfig(options={"profile": profile, **options}, tool_timeout_s=0.2))
    assert isinstance(backend, SimBackend)
    return backend


def test_required_profiles_exist() -> None:
    assert set(list_profiles()) >= {
        "dgx-h100",
        "a100-mig",
        "mi300x-8",
        "ascend-910b-8",
        "mlu370-x8",
        "rtx4090-4",
        "mixed-nvidia-ascend",
    }


@pytest.mark.parametrize("name", list_profiles())
def test_every_profile_builds_a_valid_inventory(name: str) -> None:
    inv = open_sim(name).inventory()
    ids = [d.id for d in inv.devices]
    assert len(ids) == len(set(ids)) > 0
    m = inv.distance_matrix()
    assert all(m.levels[i][i] is DistanceLevel.X for i in range(len(ids)))
    for d in inv.devices:
        assert d.memory_total_bytes and d.memory_total_bytes > 0
        assert d.binding.visible_env and d.binding.torch_device_type and d.binding.collective_backend
        assert d.health.state is HealthState.HEALTHY


def test_dgx_h100_matches_the_real_machine() -> None:
    inv = open_sim("dgx-h100").inventory()
    assert len(inv.devices) == 8
    for i, d in enumerate(inv.devices):
        assert d.model == "NVIDIA H100 80GB HBM3"
        assert d.memory_total_bytes == 81559 * 2**20  # what nvidia-smi prints: 81559 MiB
        assert d.uuid == f"GPU-7b1e0c{i:02d}-1d2a-4c3b-9e4f-00000000{i:04d}"
        assert d.compute_capability == "9.0" and d.compute.units == 132
        assert d.numa_node == (0 if i < 4 else 1)
    assert len(inv.links) == 28 and {link.type for link in inv.links} == {LinkType.NVSWITCH}
    assert all(link.count == 18 for link in inv.links)
    m = inv.distance_matrix()
    assert all(m.label(i, j) == "NV18" for i in range(8) for j in range(8) if i != j)
    assert m.pcie_levels[0][1] is DistanceLevel.NODE and m.pcie_levels[0][4] is DistanceLevel.SYS
    assert [(d.kind, d.size) for d in inv.domains] == [(DomainKind.NVLINK_ISLAND, 8)]


def test_mi300x_hive_and_ascend_hccs_and_mlu_boards() -> None:
    mi = open_sim("mi300x-8").inventory()
    assert {d.memory_total_bytes for d in mi.devices} == {192 * GiB}
    assert [d.kind for d in mi.domains] == [DomainKind.XGMI_HIVE] and mi.domains[0].size == 8
    assert {link.type for link in mi.links} == {LinkType.XGMI} and len(mi.links) == 28
    asc = open_sim("ascend-910b-8").inventory()
    assert {d.memory_total_bytes for d in asc.devices} == {64 * GiB}
    assert [d.pci.bus_id for d in asc.devices if d.pci][:2] == ["0000:c1:00.0", "0000:c2:00.0"]
    assert asc.distance_matrix().label(0, 7) == "HCCS"
    assert asc.devices[0].cpu_affinity == "144-167"
    mlu = open_sim("mlu370-x8").inventory()
    boards = {d.board_id for d in mlu.devices}
    assert len(mlu.devices) == 8 and len(boards) == 4


def test_consumer_rtx_has_no_ecc_no_mig_no_serial() -> None:
    inv = open_sim("rtx4090-4").inventory()
    for d in inv.devices:
        assert d.serial_number is None and "serial_number" in d.unsupported
        assert d.capabilities.ecc is False and d.capabilities.partitioning == ()
    m = inv.distance_matrix()
    assert not inv.links and m.levels[0][1] is DistanceLevel.NODE and m.levels[0][2] is DistanceLevel.SYS
    sample = open_sim("rtx4090-4").telemetry()[0]
    assert sample.ecc_uncorrected_total is None and "ecc_uncorrected_total" in sample.unsupported


def test_a100_mig_partitions_in_sparse_slots() -> None:
    backend = open_sim("a100-mig")
    assert isinstance(backend, SupportsPartitions)
    inv = backend.inventory()
    (gpu,) = inv.devices
    assert gpu.partition_mode.scheme.value == "mig"
    parts = sorted(inv.partitions, key=lambda p: p.gi_id or 0)
    # GPU-instance ids are sparse (2, 3, 9, 10), as NVML reports them after creates and destroys.
    assert [(p.gi_id, p.profile, p.placement.start if p.placement else None) for p in parts] == [
        (2, "3g.40gb", 4), (3, "2g.20gb", 0), (9, "1g.10gb", 2), (10, "1g.10gb", 3)]
    assert sum(p.memory_bytes or 0 for p in parts) <= (gpu.memory_total_bytes or 0)
    assert {p.name for p in inv.partition_profiles} >= {"1g.10gb", "3g.40gb", "7g.80gb"}


def test_values_are_deterministic_from_the_seed() -> None:
    a, b, c = open_sim("dgx-h100", seed=7), open_sim("dgx-h100", seed=7), open_sim("dgx-h100", seed=8)
    ta, tb, tc = a.telemetry(), b.telemetry(), c.telemetry()
    assert [t.power_watts for t in ta] == [t.power_watts for t in tb]
    assert [t.power_watts for t in ta] != [t.power_watts for t in tc]


def test_energy_is_monotonic_and_units_sane() -> None:
    backend = open_sim("mi300x-8")
    first, second = backend.telemetry(), backend.telemetry()
    for x, y in zip(first, second, strict=True):
        assert x.energy_joules is not None and y.energy_joules is not None and y.energy_joules > x.energy_joules
        assert x.power_watts is not None and 0 < x.power_watts <= 750
        assert x.utilization_ratio is not None and 0 <= x.utilization_ratio <= 1


def test_device_lost_leaves_the_others_readable() -> None:
    backend = open_sim("dgx-h100", faults="device_lost:3@1")
    assert backend.inventory().devices[3].health.state is HealthState.HEALTHY  # tick 0: not yet
    inv = backend.inventory()
    lost = inv.devices[3]
    assert lost.health.operational is Operational.LOST and lost.health.state is HealthState.UNHEALTHY
    assert lost.health.conditions[0].vendor_code == "nvidia.xid:79"
    assert all(d.health.state is HealthState.HEALTHY for i, d in enumerate(inv.devices) if i != 3)
    assert len(backend.telemetry()) == 7
    with pytest.raises(DeviceLostError):
        backend.telemetry([lost.id])


def test_ecc_and_throttle_and_leak() -> None:
    backend = open_sim("dgx-h100", faults="ecc_uncorrectable:0,thermal_throttle:1,memory_leak:2=10737418240", load=0.0)
    health = backend.health()
    ids = list(health)
    assert health[ids[0]].state is HealthState.UNHEALTHY
    assert health[ids[0]].conditions[0].reason == "UncorrectableMemoryError"
    assert health[ids[1]].state is HealthState.HEALTHY  # a throttle is a warning
    first = backend.telemetry()
    second = backend.telemetry()
    assert first[0].ecc_uncorrected_total == 1
    assert first[1].throttle_reasons == ("hw_thermal_slowdown",)
    assert first[2].memory_used_bytes is not None and second[2].memory_used_bytes is not None
    assert second[2].memory_used_bytes - first[2].memory_used_bytes == 10 * GiB


def test_hung_tool_times_out() -> None:
    backend = open_sim("dgx-h100", faults="hung_tool")
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError, match="did not answer"):
        backend.inventory()
    assert time.monotonic() - start < 5


def test_not_supported_fields_and_health() -> None:
    backend = open_sim("dgx-h100", faults="not_supported=temperature_celsius+power_watts+health")
    sample = backend.telemetry()[0]
    assert sample.temperature_celsius is None and sample.power_watts is None
    assert {"temperature_celsius", "power_watts"} <= sample.unsupported
    assert all(h.state is HealthState.UNKNOWN for h in backend.health().values())


def test_faults_on_demand_and_events() -> None:
    backend = open_sim("dgx-h100")
    assert isinstance(backend, SupportsEvents) and isinstance(backend, SupportsProcesses)
    assert backend.poll_events() == ()
    dev = backend.inventory().devices[5].id
    backend.lose_device(dev)
    events = backend.poll_events()
    assert [(e.device_id, e.condition.reason) for e in events] == [(dev, "DeviceLost")]
    assert backend.poll_events() == ()
    with pytest.raises(DeviceError):
        backend.lose_device("nvidia:nope")


@pytest.mark.parametrize(
    ("spec", "message"),
    [("zap", "unknown fault"), ("device_lost:x", "bad fault spec"), ("not_supported=bogus", "unknown field")],
)
def test_bad_fault_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_sim("dgx-h100", faults=spec)


def test_fault_spec_syntax() -> None:
    assert parse_faults("device_lost:3@5, memory_leak:*=5") == [
        Fault(FaultKind.DEVICE_LOST, 3, 5),
        Fault(FaultKind.MEMORY_LEAK, None, 0, "5"),
    ]


def test_unknown_profile_and_options() -> None:
    with pytest.raises(ConfigError, match="unknown simulator profile 'nope'"):
        open_sim("nope")
    with pytest.raises(ConfigError, match="unknown option"):
        open_sim("dgx-h100", colour="blue")
    with pytest.raises(ConfigError, match="load"):
        open_sim("dgx-h100", load=3)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.pop("host"), "host"),
        (lambda p: p["devices"][0].update(template="nope"), "is not one of"),
        (lambda p: p["templates"]["h100"]["memory"][0].update(total_bytes=-5), "total_bytes"),
        (lambda p: p["link_groups"][0].update(members=[0, 99]), "no device at position 99"),
        (lambda p: p["templates"]["h100"].update(kind="toaster"), "kind"),
    ],
)
def test_malformed_profiles(tmp_path: Path, mutate: object, message: str) -> None:
    from importlib import resources

    data = json.loads(resources.files("accel.sim").joinpath("profiles/dgx-h100.json").read_text())
    mutate(data)  # type: ignore[operator]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=message):
        open_sim(str(path))


def test_unreadable_and_invalid_json_profiles(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot be read"):
        open_sim(str(tmp_path / "missing.json"))
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(ProfileError, match="not valid JSON"):
        open_sim(str(tmp_path / "x.json"))


def test_probe_needs_a_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCEL_SIM", raising=False)
    assert PLUGIN.probe(BackendConfig()).status.value == "absent"
    monkeypatch.setenv("ACCEL_SIM", "mi300x-8")
    assert PLUGIN.probe(BackendConfig()).status.value == "present"
    assert len(PLUGIN.open(BackendConfig()).inventory().devices) == 8


def test_cluster_generator() -> None:
    hosts = generate_cluster(20, {"dgx-h100": 1, "mi300x-8": 1}, seed=3, hosts_per_rack=4)
    assert len(hosts) == 20
    ids = [d.id for h in hosts for d in h.devices]
    assert len(ids) == len(set(ids)) == 160
    assert {h.host.rack for h in hosts} == {f"rack-{r:04d}" for r in range(5)}
    assert {h.devices[0].vendor for h in hosts} == {"nvidia", "amd"}
    again = generate_cluster(20, {"dgx-h100": 1, "mi300x-8": 1}, seed=3, hosts_per_rack=4)
    assert [d.id for h in again for d in h.devices] == ids
    for h in hosts:
        assert all(set(link.pair) <= {d.id for d in h.devices} for link in h.links)
    with pytest.raises(ConfigError):
        generate_cluster(-1)
