"""Every fake-NVML scenario of the issue, with assertions on the model, conditions and states."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import BackendUnavailableError
from accel.model import DistanceLevel, DomainKind, HealthState, LinkType, Operational, pcie_level
from accel.plugin import BackendConfig, ProbeStatus, SupportsEvents, SupportsPartitions, SupportsProcesses
from accel.plugins.nvidia import PLUGIN
from accel.plugins.nvidia.testing import dgx_h100_serial, dgx_h100_uuid

DGX_BUSES = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
             "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]


@pytest.mark.parametrize(("name", "reason"), [
    ("no-library", "libnvidia-ml.so.1 is not installed"),
    ("driver-not-loaded", "kernel driver is not loaded"),
    ("version-mismatch", "version mismatch"),
])
def test_library_failures_probe_error_and_open_raises(name: str, reason: str) -> None:
    cfg = BackendConfig(options={"scenario": name})
    probe = PLUGIN.probe(cfg)
    assert probe.status is ProbeStatus.ERROR
    assert reason in probe.reason
    with pytest.raises(BackendUnavailableError):
        PLUGIN.open(cfg)


def test_zero_gpus_probe_absent_and_empty_inventory() -> None:
    cfg = BackendConfig(options={"scenario": "zero-gpus"})
    assert PLUGIN.probe(cfg).status is ProbeStatus.ABSENT
    with PLUGIN.open(cfg) as b:
        inv = b.inventory()
        assert inv.devices == () and inv.links == () and b.health() == {}


def test_real_probe_without_hardware_is_absent(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    probe = PLUGIN.probe(BackendConfig(sysfs_root=tmp_path, dev_root=tmp_path / "dev"))
    assert probe.status is ProbeStatus.ABSENT


def test_dgx_h100_inventory(open_scenario) -> None:
    b, _ = open_scenario("h100-nvswitch-8")
    inv = b.inventory()
    assert len(inv.devices) == 8
    for i, d in enumerate(inv.devices):
        assert d.id == f"nvidia:{dgx_h100_uuid(i)}"
        assert d.uuid == dgx_h100_uuid(i) and d.serial_number == dgx_h100_serial(i)
        assert d.model == "NVIDIA H100 80GB HBM3" and d.architecture == "Hopper"
        assert d.compute_capability == "9.0" and d.brand == "Tesla"
        assert d.pci is not None and d.pci.bus_id == DGX_BUSES[i] and d.pci.device_id == "2330"
        assert d.numa_node == (0 if i < 4 else 1)
        assert d.cpu_affinity == ("0-55,112-167" if i < 4 else "56-111,168-223")
        mem = d.memory[0]
        assert mem.total_bytes == 85520809984 and mem.reserved_bytes == 551 * 2**20
        assert mem.usable_bytes == 85520809984 - 551 * 2**20 and mem.used_bytes == 0
        assert mem.kind.value == "hbm" and mem.ecc_enabled is True
        assert d.power.default_watts == 700.0 and d.power.max_watts == 700.0
        assert d.thermal.shutdown_celsius == 92 and d.thermal.slowdown_celsius == 89
        assert d.versions.driver == "550.54.15" and d.versions.runtime == "12.4"
        assert d.binding.visible_env == "CUDA_VISIBLE_DEVICES" and d.binding.visible_id == dgx_h100_uuid(i)
        assert d.binding.torch_device_type == "cuda" and d.binding.collective_backend == "nccl"
        assert d.health.state is HealthState.HEALTHY and d.health.monitored
        assert d.capabilities.p2p is True and d.extras["nvidia.com/nvlinkCount"] == 18
    assert "test facility" in (inv.sources[0].detail or "")


def test_dgx_h100_topology_nvswitch_between_all_pairs_node_sys_across_sockets(open_scenario) -> None:
    b, _ = open_scenario("h100-nvswitch-8")
    inv = b.inventory()
    dm = inv.distance_matrix()
    for i in range(8):
        for j in range(8):
            assert dm.label(i, j) == ("X" if i == j else "NV18")
    nvs = [lk for lk in inv.links if lk.type is LinkType.NVSWITCH]
    assert len(nvs) == 28 and all(lk.count == 18 and lk.generation == 4 for lk in nvs)
    assert all(lk.bandwidth_bytes_per_s == 450_000_000_000 for lk in nvs)
    (island,) = [d for d in inv.domains if d.kind is DomainKind.NVLINK_ISLAND]
    assert island.size == 8
    d = inv.devices
    # Beneath the NVSwitch fabric, the PCIe/NUMA level from the core: NODE in a socket, SYS across.
    assert pcie_level(d[0], d[3]) is DistanceLevel.NODE
    assert pcie_level(d[0], d[4]) is DistanceLevel.SYS
    from accel.model import distance_matrix

    pcie_only = distance_matrix(d, [lk for lk in inv.links if lk.type not in (LinkType.NVSWITCH, LinkType.NVLINK)])
    assert pcie_only.level(d[1].id, d[2].id) is DistanceLevel.NODE
    assert pcie_only.level(d[1].id, d[6].id) is DistanceLevel.SYS


def test_dgx_h100_with_fake_sysfs_uses_core_pcie_levels(tmp_path: Path) -> None:
    from accel.testing import FakeSysfs

    fs = FakeSysfs(tmp_path)
    fs.add_numa_node(0, "0-55,112-167")
    fs.add_numa_node(1, "56-111,168-223")
    for i, bus in enumerate(DGX_BUSES):
        b = int(bus[5:7], 16)
        fs.add_device(bus, vendor="10de", device="2330", bridges=[f"0000:{b - 2:02x}:01.0", f"0000:{b - 1:02x}:00.0"],
                      numa_node=0 if i < 4 else 1, cpulist="0-55,112-167" if i < 4 else "56-111,168-223")
    cfg = BackendConfig(options={"scenario": "h100-nvswitch-8"}, sysfs_root=tmp_path)
    with PLUGIN.open(cfg) as b:
        inv = b.inventory()
    d = inv.devices
    assert d[0].pci is not None and d[0].pci.pcie_root == "pci0000:16"
    assert len(inv.host.numa_nodes) == 2
    assert not [lk for lk in inv.links if lk.type in (LinkType.NUMA, LinkType.SYSTEM)]
    assert pcie_level(d[0], d[1]) is DistanceLevel.NODE and pcie_level(d[0], d[7]) is DistanceLevel.SYS


def test_consumer_rtx4090(open_scenario) -> None:
    b, _ = open_scenario("rtx4090-4")
    inv = b.inventory()
    assert [d.model for d in inv.devices] == ["NVIDIA GeForce RTX 4090"] * 4
    d0 = inv.devices[0]
    assert d0.serial_number is None and "serial_number" in d0.unsupported
    assert d0.memory[0].ecc_supported is False and d0.capabilities.ecc is False
    assert d0.memory[0].kind.value == "gddr" and d0.memory[0].total_bytes == 24564 * 2**20
    assert d0.capabilities.partitioning == () and d0.partition_mode.scheme.value == "none"
    assert d0.architecture == "Ada Lovelace" and d0.brand == "GeForce" and d0.versions.firmware == {
        "vbios": "95.02.18.80.5F"}
    assert all(d.health.state is HealthState.HEALTHY for d in inv.devices)
    assert not [lk for lk in inv.links if lk.type in (LinkType.NVLINK, LinkType.NVSWITCH)] and inv.domains == ()
    dm = inv.distance_matrix()
    assert dm.label(0, 1) == "NODE" and dm.label(0, 2) == "SYS"
    assert d0.capabilities.p2p is False
    (t0, *_) = b.telemetry()
    assert t0.fan_ratio == 0.3 and t0.temperatures_celsius == {"gpu": 38.0}
    assert t0.ecc_uncorrected_total is None
    (proc,) = b.processes([d0.id])
    assert proc.memory_bytes == 1536 * 2**20


def test_a100_mig_with_holes(open_scenario) -> None:
    b, _ = open_scenario("a100-mig")
    assert isinstance(b, SupportsPartitions)
    inv = b.inventory()
    (gpu,) = inv.devices
    assert gpu.partition_mode.scheme.value == "mig" and gpu.partition_mode.pending is False
    parts = sorted(inv.partitions, key=lambda p: p.gi_id or 0)
    assert [(p.profile, p.gi_id, p.ci_id) for p in parts] == [
        ("3g.40gb", 2, 0), ("2g.20gb", 3, 0), ("1g.10gb", 9, 0), ("1g.10gb", 10, 0)]
    assert [(p.placement.start, p.placement.size) for p in parts if p.placement] == [(4, 4), (0, 2), (2, 1), (3, 1)]
    assert parts[0].uuid == "MIG-5c3a1f00-0000-5a0b-9c1d-000000000002"
    assert parts[0].id == "nvidia:MIG-5c3a1f00-0000-5a0b-9c1d-000000000002"
    assert parts[0].binding.visible_id == parts[0].uuid and parts[0].memory_bytes == 40192 * 2**20
    assert parts[0].compute_units == 42
    profiles = {p.name: p for p in inv.partition_profiles}
    assert set(profiles) == {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
    assert profiles["3g.40gb"].max_instances == 2 and len(profiles["1g.10gb"].placements) == 7
    (proc,) = inv.processes
    assert proc.partition_id == parts[0].id
    (t,) = b.telemetry()
    assert t.utilization_ratio is None and "utilization_ratio" in t.unsupported
    assert gpu.health.state is HealthState.HEALTHY


def test_a100_mig_without_privilege_has_no_placement(open_scenario) -> None:
    b, fake = open_scenario("a100-mig")
    fake.scenario.gpus[0].mig_privileged = False
    parts = b.partitions()
    assert len(parts) == 4 and all(p.placement is None for p in parts)


def test_old_driver_r470_fallbacks(open_scenario) -> None:
    b, fake = open_scenario("old-driver-r470")
    inv = b.inventory()
    assert [d.model for d in inv.devices] == ["Tesla V100-SXM2-32GB"] * 2
    d0 = inv.devices[0]
    mem = d0.memory[0]
    # v1 only: no reserved/usable split, total and used still read.
    assert mem.total_bytes == 32768 * 2**20 and mem.reserved_bytes is None and mem.usable_bytes is None
    assert d0.versions.driver == "470.199.02" and d0.versions.runtime == "11.4"
    (nvl,) = [lk for lk in inv.links if lk.type is LinkType.NVLINK]
    assert nvl.count == 6 and nvl.generation == 2 and nvl.bandwidth_bytes_per_s == 150_000_000_000
    assert inv.distance_matrix().label(0, 1) == "NV6"
    assert any(lk.type is LinkType.PCIE_PXB for lk in inv.links)
    procs = b.processes()
    assert {p.pid for p in procs} == {4242}
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] >= 1
    t = b.telemetry()[0]
    assert t.temperature_celsius == 34.0 and t.power_watts == 43.0
    assert fake.calls["nvmlDeviceGetTemperature"] >= 1 and fake.calls["nvmlDeviceGetPowerUsage"] >= 1
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] >= 1
    assert all(d.health.state is HealthState.HEALTHY for d in inv.devices)


def test_gpu_lost_after_enumeration(open_scenario) -> None:
    b, _ = open_scenario("gpu-lost")
    inv = b.inventory()
    assert len(inv.devices) == 8
    lost = inv.devices[3]
    assert lost.id == f"nvidia:{dgx_h100_uuid(3)}"
    assert lost.health.operational is Operational.LOST and lost.health.state is HealthState.UNHEALTHY
    assert lost.health.conditions[0].reason == "DeviceLost"
    others = [d for i, d in enumerate(inv.devices) if i != 3]
    assert all(d.health.state is HealthState.HEALTHY and d.memory[0].total_bytes for d in others)
    health = b.health()
    assert health[lost.id].operational is Operational.LOST
    assert sum(h.state is HealthState.HEALTHY for h in health.values()) == 7
    tel = {t.device_id: t for t in b.telemetry()}
    assert tel[lost.id].power_watts is None and tel[others[0].id].power_watts == 72.0


def test_gpu_lost_mid_run(open_scenario) -> None:
    b, fake = open_scenario("h100-nvswitch-8")
    first = b.inventory()
    assert all(d.health.state is HealthState.HEALTHY for d in first.devices)
    fake.lose_gpu(5)
    health = b.health()
    lost_id = first.devices[5].id
    assert health[lost_id].operational is Operational.LOST
    assert all(h.operational is Operational.ONLINE for k, h in health.items() if k != lost_id)
    inv = b.inventory()
    assert len(inv.devices) == 8 and inv.device(lost_id).health.state is HealthState.UNHEALTHY
    assert len(b.telemetry()) == 8 and len(b.processes()) == 0


def test_xid_stream(open_scenario) -> None:
    b, _ = open_scenario("xid-stream")
    assert isinstance(b, SupportsEvents)
    events = b.poll_events(0.0)
    assert [e.condition.vendor_code for e in events] == [
        "nvidia.xid:13", "nvidia.xid:31", "nvidia.xid:48", "nvidia.xid:79", "nvidia.xid:95",
        "nvidia.xid:13", "nvidia.xid:13", "nvidia.xid:147"]
    assert b.poll_events(0.0) == ()
    ids = [f"nvidia:{dgx_h100_uuid(i)}" for i in range(8)]
    health = b.health()
    assert health[ids[0]].state is HealthState.HEALTHY  # 13 and 31: the application's fault
    assert {c.scope.value for c in health[ids[0]].conditions} == {"process"}
    assert health[ids[1]].state is HealthState.UNHEALTHY  # 48 DBE
    assert health[ids[2]].operational is Operational.LOST  # 79 fallen off the bus
    assert health[ids[3]].state is HealthState.UNHEALTHY  # 95 uncontained
    (c5,) = health[ids[5]].conditions
    assert c5.count == 2 and health[ids[5]].state is HealthState.HEALTHY
    (c6,) = health[ids[6]].conditions  # unknown XIDs are not ignored
    assert c6.reason == "UnknownXid" and health[ids[6]].state is HealthState.UNHEALTHY
    assert health[ids[7]].state is HealthState.HEALTHY


def test_ecc_double_bit(open_scenario) -> None:
    b, _ = open_scenario("ecc-dbe")
    health = b.health()
    bad = health[f"nvidia:{dgx_h100_uuid(5)}"]
    assert bad.state is HealthState.UNHEALTHY
    (cond,) = bad.conditions
    assert cond.reason == "UncorrectableMemoryError" and cond.vendor_code == "nvidia.dcgm:DCGM_FR_VOLATILE_DBE_DETECTED"
    t = b.telemetry([f"nvidia:{dgx_h100_uuid(5)}"])[0]
    assert t.ecc_uncorrected_total == 2 and t.ecc_corrected_total == 14
    assert sum(h.state is HealthState.HEALTHY for h in health.values()) == 7


def test_retirement_pending(open_scenario) -> None:
    b, _ = open_scenario("retired-pending")
    inv = b.inventory()
    d1 = inv.devices[1]
    assert d1.health.state is HealthState.DEGRADED
    assert [c.reason for c in d1.health.conditions] == ["PageRetirementPending"]
    assert inv.devices[0].health.state is HealthState.HEALTHY
    assert b.telemetry([d1.id])[0].retired_pages_total == 3


def test_row_remap_failure_and_pending(open_scenario) -> None:
    b, _ = open_scenario("row-remap-failure")
    health = b.health()
    g6, g7 = health[f"nvidia:{dgx_h100_uuid(6)}"], health[f"nvidia:{dgx_h100_uuid(7)}"]
    assert g6.state is HealthState.UNHEALTHY and [c.reason for c in g6.conditions] == ["RowRemapFailure"]
    assert g7.state is HealthState.DEGRADED and [c.reason for c in g7.conditions] == ["RowRemapPending"]


def test_nvlink_replay_errors_and_link_down(open_scenario) -> None:
    b, _ = open_scenario("nvlink-replay")
    inv = b.inventory()
    g2 = inv.devices[2]
    reasons = {c.reason for c in g2.health.conditions}
    assert reasons == {"NvLinkReplayErrors", "NvLinkRecoveryErrors", "NvLinkCrcErrors"}
    assert g2.health.state is HealthState.DEGRADED
    g4 = inv.devices[4]
    assert [c.reason for c in g4.health.conditions] == ["LinkDown"] and g4.health.state is HealthState.UNHEALTHY
    t2 = b.telemetry([g2.id])[0]
    assert t2.links[4].replay_errors_total == 17 and t2.links[4].recovery_errors_total == 2
    # The down link shows in the fabric: GPU 4 reaches the others over 17 links.
    degraded = [lk for lk in inv.links if g4.id in (lk.a, lk.b)]
    assert all(lk.count == 17 and lk.state.value == "degraded" for lk in degraded)


def test_container_without_permission_and_host_pids(open_scenario, tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    b, _ = open_scenario("container-no-perm", proc_root=str(tmp_path))
    assert isinstance(b, SupportsProcesses)
    inv = b.inventory()
    # Events cannot be registered: health is unknown, never healthy, and NoPermission is not a fault.
    assert all(d.health.monitored is False and d.health.state is HealthState.UNKNOWN for d in inv.devices)
    procs = b.processes([inv.devices[0].id])
    assert [(p.pid, p.memory_bytes, p.pid_in_namespace) for p in procs] == [
        (3_900_000, 40960 * 2**20, False), (3_900_100, None, False)]
    assert all(not d.unsupported & {"serial_number"} for d in inv.devices)
