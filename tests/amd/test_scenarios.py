"""The AMD backend on every fake scenario: what a person reads in ``accel ls/topo/health``."""

from __future__ import annotations

import pytest

from accel.errors import BackendUnavailableError, DriverError
from accel.model import DistanceLevel, DomainKind, HealthState, LinkType, MemoryKind, Severity
from accel.plugin import BackendConfig, ProbeStatus, SupportsPartitions, SupportsProcesses
from accel.plugins.amd import PLUGIN
from accel.plugins.amd.testing import MI300X_BUS_IDS, mi300x_unique_id

GIB = 2**30


def open_scenario(name: str):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(options={"scenario": name}))


def test_mi300x_8_inventory_matches_the_simulator_profile() -> None:
    with open_scenario("mi300x-8") as b:
        inv = b.inventory()
    assert [d.id for d in inv.devices] == [f"amd:0x{mi300x_unique_id(i):016x}" for i in range(8)]
    assert inv.devices[0].id == "amd:0x5a3c8b2e00000000"
    assert [d.pci.bus_id for d in inv.devices if d.pci] == list(MI300X_BUS_IDS)
    for i, d in enumerate(inv.devices):
        assert d.model == "AMD Instinct MI300X"
        assert (d.architecture, d.isa) == ("CDNA3", "gfx942")
        assert d.memory_total_bytes == 206158430208 == 192 * GIB
        assert d.memory[0].kind is MemoryKind.HBM and d.memory[0].generation == "HBM3"
        assert d.numa_node == (0 if i < 4 else 1)
        assert d.power.enforced_watts == 750.0
        assert d.compute.units == 304
        assert d.index == i
        assert d.health.state is HealthState.HEALTHY
        assert d.serial_number == f"6923120000{i:02d}"
        assert d.binding.visible_env == "HIP_VISIBLE_DEVICES" and d.binding.visible_id == str(i)
        assert (d.binding.torch_device_type, d.binding.collective_backend) == ("cuda", "rccl")
        assert d.extras["amd.com/rocrVisibleDevice"] == f"GPU-{mi300x_unique_id(i):016x}"
        assert d.unsupported == frozenset()
        assert d.uuid == f"0x{mi300x_unique_id(i):016x}"  # as the simulator: id == amd:<uuid>
        assert d.extras["amd.com/deviceUuid"].endswith(f"{mi300x_unique_id(i) & 0xFFFFFFFFFFFF:012x}")
    # The xGMI hive is one domain of 8 and every pair is linked.
    assert len(inv.domains) == 1
    hive = inv.domains[0]
    assert hive.kind is DomainKind.XGMI_HIVE and set(hive.members) == {d.id for d in inv.devices}
    assert len(inv.links) == 28
    assert {frozenset((link.a, link.b)) for link in inv.links} == {
        frozenset((a.id, b.id)) for i, a in enumerate(inv.devices) for b in inv.devices[i + 1 :]
    }
    assert all(link.type is LinkType.XGMI for link in inv.links)
    matrix = inv.distance_matrix()
    assert all(
        matrix.levels[i][j] is DistanceLevel.LINK for i in range(8) for j in range(8) if i != j
    )
    apis = [s.api for s in inv.sources]
    assert "pyrsmi (package mode)" in apis and "amdsmi" in apis and "amdgpu-sysfs" in apis


def test_mi300x_8_agrees_with_sim_profile() -> None:
    from accel.sim import PLUGIN as SIM

    sim = SIM.open(BackendConfig(options={"profile": "mi300x-8"}))
    with sim, open_scenario("mi300x-8") as b:
        ours, theirs = b.inventory(), sim.inventory()
    assert [d.id for d in ours.devices] == [d.id for d in theirs.devices]
    for a, s in zip(ours.devices, theirs.devices, strict=True):
        assert (a.model, a.memory_total_bytes, a.numa_node, a.isa, a.architecture) == (
            s.model, s.memory_total_bytes, s.numa_node, s.isa, s.architecture)
        assert a.pci is not None and s.pci is not None
        assert (a.pci.bus_id, a.pci.pcie_root, a.pci.bridge_path) == (s.pci.bus_id, s.pci.pcie_root,
                                                                       s.pci.bridge_path)
        assert a.power.enforced_watts == s.power.enforced_watts
        assert a.serial_number == s.serial_number
    assert {frozenset(lk.pair) for lk in ours.links} == {frozenset(lk.pair) for lk in theirs.links}
    assert [(d.kind, set(d.members), d.id) for d in ours.domains] == [
        (d.kind, set(d.members), d.id) for d in theirs.domains
    ]
    assert ours.distance_matrix().levels == theirs.distance_matrix().levels


def test_cpx_partitions_several_handles_per_device() -> None:
    with open_scenario("mi300x-8-cpx") as b:
        inv = b.inventory()
        assert isinstance(b, SupportsPartitions)
        parts, profiles = b.partitions(), b.partition_profiles()
    assert len(inv.devices) == 8
    assert len(inv.partitions) == 64 == len(parts)
    dev0 = inv.devices[0]
    mine = [p for p in inv.partitions if p.parent_id == dev0.id]
    assert [p.id for p in mine] == [f"{dev0.id}/cpx{k}" for k in range(8)]
    assert all(p.profile == "cpx_nps4" for p in mine)
    assert [p.binding.visible_id for p in mine] == [str(k) for k in range(8)]
    assert sum(p.memory_bytes or 0 for p in mine) == dev0.memory_total_bytes == 192 * GIB
    assert all(p.compute_units == 38 for p in mine)
    assert dev0.compute.units == 304
    assert dev0.partition_mode.compute_mode == "cpx" and dev0.partition_mode.memory_mode == "nps4"
    assert dev0.binding.visible_id == "0,1,2,3,4,5,6,7"
    assert len(profiles) == 8 and profiles[0].max_instances == 8 and profiles[0].name == "cpx_nps4"
    # Partition UUIDs are real and distinct.
    assert len({p.uuid for p in inv.partitions}) == 64
    # Topology is still per physical device.
    assert len(inv.links) == 28 and len(inv.domains) == 1 and len(inv.domains[0].members) == 8


@pytest.mark.parametrize("name", ["amdsmi-absent", "amdsmi-broken"])
def test_amdsmi_absent_pyrsmi_ctypes_mode_and_sysfs_topology(name: str) -> None:
    with open_scenario(name) as b:
        inv = b.inventory()
        tel = b.telemetry()
    assert len(inv.devices) == 8
    pyrsmi = next(s for s in inv.sources if s.api and s.api.startswith("pyrsmi"))
    assert pyrsmi.api == "pyrsmi (ctypes mode)"
    for name_ in ("name", "memory_total_bytes", "bus_id"):
        assert name_ in (pyrsmi.detail or "")
    for i, d in enumerate(inv.devices):
        assert d.model == "AMD Instinct MI300X"
        assert d.memory_total_bytes == 192 * GIB
        assert d.id == f"amd:0x{mi300x_unique_id(i):016x}"
        # PCIe and NUMA levels from the core, xGMI from sysfs (hive file + KFD io-links).
        assert d.pci is not None and d.pci.pcie_root is not None and d.numa_node == (0 if i < 4 else 1)
        # What nobody can give without amdsmi is None and listed.
        assert d.isa is None and "isa" in d.unsupported
        assert d.versions.firmware == {} and "versions.firmware" in d.unsupported
        assert d.compute.units is None and "compute.units" in d.unsupported
        # ...while sysfs still gives power caps, temperatures, RAS and the serial.
        assert d.power.enforced_watts == 750.0
        assert d.serial_number is not None and "serial_number" not in d.unsupported
        assert d.health.monitored
    assert len(inv.domains) == 1 and len(inv.links) == 28
    assert any(s.api == "kfd-sysfs" for s in inv.sources)
    assert all("clocks_hertz" in t.unsupported for t in tel)
    assert all(t.temperatures_celsius.get("junction") == 45.0 for t in tel)


def test_no_library_pyrsmi_ctypes_fails_cleanly_sysfs_still_reports() -> None:
    with open_scenario("no-library") as b:
        inv = b.inventory()
    notes = next(s for s in inv.sources if s.api == "notes")
    assert "libamd_smi.so" in (notes.detail or "") and "not found" in (notes.detail or "")
    assert not any((s.api or "").startswith("pyrsmi") for s in inv.sources)
    assert len(inv.devices) == 8
    assert inv.devices[0].memory_total_bytes == 192 * GIB
    assert inv.devices[0].model == "AMD Instinct MI300X"  # sysfs product_name


def test_uncorrectable_ras_makes_one_gpu_unhealthy() -> None:
    with open_scenario("ras-uncorrectable") as b:
        health = b.health()
        inv = b.inventory()
    bad = f"amd:0x{mi300x_unique_id(2):016x}"
    assert health[bad].state is HealthState.UNHEALTHY
    codes = {c.vendor_code: c for c in health[bad].conditions}
    assert codes["amd.ras:UMC/ue"].count == 3 and codes["amd.ras:UMC/ue"].severity is Severity.CRITICAL
    assert "amd.ras:UMC/MULT_UC" in codes
    assert codes["amd.ras:UMC/ce"].severity is Severity.INFO
    assert all(h.state is HealthState.HEALTHY for k, h in health.items() if k != bad)
    assert len(health) == 8 and all(h.checked_at is not None for h in health.values())
    assert inv.device(bad).health.state is HealthState.UNHEALTHY


def test_bad_pages_over_threshold() -> None:
    with open_scenario("bad-pages") as b:
        health = b.health()
        inv = b.inventory()
        tel = {t.device_id: t for t in b.telemetry()}
    bad = f"amd:0x{mi300x_unique_id(5):016x}"
    h = health[bad]
    assert h.state is HealthState.UNHEALTHY
    reasons = {c.reason: c for c in h.conditions}
    assert reasons["BadPageThresholdExceeded"].count == 131
    assert reasons["RetiredPagePending"].count == 1
    dev = inv.device(bad)
    assert dev.extras["amd.com/retiredPages"] == 131 and dev.extras["amd.com/badPageThreshold"] == 128
    assert dev.memory[0].ecc_pending is True
    assert tel[bad].retired_pages_total == 131


def test_xgmi_errors_and_throttle() -> None:
    with open_scenario("xgmi-errors") as b:
        health = b.health()
    one = health[f"amd:0x{mi300x_unique_id(1):016x}"]
    assert one.state is HealthState.DEGRADED
    assert {c.reason for c in one.conditions} == {"XgmiErrors", "XgmiLinkDown"}
    seven = health[f"amd:0x{mi300x_unique_id(7):016x}"]
    assert [c.reason for c in seven.conditions] == ["ThermalThrottle"]
    assert seven.state is HealthState.HEALTHY  # a warning without a reset pending


def test_consumer_radeon_no_ecc_matches_the_rocm_smi_sample() -> None:
    with open_scenario("radeon-rx7800xt") as b:
        inv = b.inventory()
        tel = b.telemetry()
    (d,) = inv.devices
    assert d.id == "amd:0x5c88007d760374f3"
    assert d.model == "Navi 32 [Radeon RX 7700 XT / 7800 XT]"
    assert d.memory_total_bytes == 17163091968 and d.memory_used_bytes == 11615076352
    assert d.memory[0].kind is MemoryKind.GDDR and d.memory[0].ecc_enabled is False
    assert d.capabilities.ecc is None and d.capabilities.partitioning == ()
    assert d.serial_number is None and "serial_number" in d.unsupported
    assert d.uuid == "0x5c88007d760374f3"
    # amdsmi has no device UUID here; pyrsmi's BDF-derived stand-in is not taken for one.
    assert "amd.com/deviceUuid" not in d.extras
    assert d.architecture == "RDNA3" and d.isa == "gfx1101"
    assert d.health.state is HealthState.HEALTHY and d.health.conditions == ()
    assert inv.links == () and inv.domains == () and inv.partitions == ()
    assert tel[0].utilization_ratio == 1.0 and tel[0].power_watts == 53.0
    assert tel[0].temperatures_celsius == {"edge": 45.0, "junction": 51.0, "memory": 54.0}


def test_driver_not_live() -> None:
    cfg = BackendConfig(options={"scenario": "driver-not-live"})
    probe = PLUGIN.probe(cfg)
    assert probe.status is ProbeStatus.ERROR and "not live" in probe.reason
    with pytest.raises(BackendUnavailableError) as err:
        PLUGIN.open(cfg)
    assert err.value.code == "driver.not-loaded"
    assert isinstance(err.value.__cause__, DriverError)
    assert "amdsmi status 34" in str(err.value) and "pyrsmi" in str(err.value)


def test_processes_and_unknown_ids() -> None:
    from dataclasses import replace

    from accel.errors import DeviceError
    from accel.plugins.amd._backend import AmdBackend
    from accel.plugins.amd.testing import FakeProcess, install, scenario

    host = scenario("mi300x-8")
    gpus = list(host.gpus)
    gpus[3] = replace(gpus[3], processes=(FakeProcess(4242, "python3", 8 * GIB),))
    host = replace(host, gpus=tuple(gpus))
    inst = install(host, build_sysfs=True)
    try:
        b = AmdBackend(BackendConfig(sysfs_root=inst.sysfs_root))
        with b:
            assert isinstance(b, SupportsProcesses)
            procs = b.processes()
            inv = b.inventory()
            with pytest.raises(DeviceError):
                b.telemetry(["amd:nope"])
    finally:
        inst.cleanup()
    assert [(p.pid, p.name, p.memory_bytes) for p in procs] == [(4242, "python3", 8 * GIB)]
    assert procs[0].device_id == inv.devices[3].id
    assert inv.processes == procs


def test_close_is_idempotent_and_restores_globals() -> None:
    import sys

    before = sys.modules.get("amdsmi", "missing")
    b = open_scenario("mi300x-8")
    assert "amdsmi" in sys.modules
    b.close()
    b.close()
    assert sys.modules.get("amdsmi", "missing") == before
