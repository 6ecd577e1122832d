"""Faults through the public API: a GPU that falls off the bus, a GPU whose health reads NOT_SUPPORTED.

The faults are put in place by ``AmdBackend.inject_fault`` (the conformance kit's FaultInjector),
which drives the fakes: amdsmi answers ``AMDSMI_STATUS_NOT_FOUND`` for the lost GPU, pyrsmi's
ctypes calls fail, its DRM card leaves sysfs; for NOT_SUPPORTED its RAS/ECC/bad-page/xGMI/throttle
calls raise ``AMDSMI_STATUS_NOT_SUPPORTED`` and its ``ras/`` directory goes.
"""

from __future__ import annotations

import pytest

from accel.conformance import Fault
from accel.errors import DeviceError, DeviceLostError, NotSupportedError
from accel.model import HealthState, Operational, Severity
from accel.plugin import BackendConfig
from accel.plugins.amd import PLUGIN
from accel.plugins.amd.testing import HEALTH_FUNCTIONS, MI300X_BUS_IDS, STATUS, install, mi300x_unique_id

GIB = 2**30
IDS = [f"amd:0x{mi300x_unique_id(i):016x}" for i in range(8)]


def open_scenario(name: str):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(options={"scenario": name}))


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("mi300x-8", "amd.smi:AMDSMI_STATUS_NOT_FOUND"),
        ("mi300x-8-cpx", "amd.smi:AMDSMI_STATUS_NOT_FOUND"),
        # pyrsmi only: it turns NOT_FOUND into -1, so the signal is the device leaving every layer.
        ("amdsmi-absent", "amd.sysfs:drm-card-removed"),
    ],
)
def test_lost_gpu_keeps_its_identity_and_the_others_keep_answering(name: str, code: str) -> None:
    with open_scenario(name) as b:
        before = b.inventory()
        assert [d.id for d in before.devices] == IDS
        lost = IDS[3]
        b.inject_fault(Fault.DEVICE_LOST, lost)

        inv = b.inventory()
        assert [d.id for d in inv.devices] == IDS  # same order, nobody dropped
        dev = next(d for d in inv.devices if d.id == lost)
        assert dev.model == "AMD Instinct MI300X"
        assert dev.pci is not None and dev.pci.bus_id == MI300X_BUS_IDS[3]
        assert dev.memory_total_bytes == 192 * GIB
        assert dev.numa_node == 0
        assert dev.health.operational is Operational.LOST

        health = b.health()
        assert set(health) == set(IDS)
        h = health[lost]
        assert (h.operational, h.state) == (Operational.LOST, HealthState.UNHEALTHY)
        [cond] = h.conditions
        assert (cond.reason, cond.severity, cond.vendor_code) == ("DeviceLost", Severity.FATAL, code)
        assert MI300X_BUS_IDS[3] in (cond.message or "")
        for other in IDS:
            if other != lost:
                assert health[other].operational is Operational.ONLINE
                assert health[other].state is HealthState.HEALTHY

        samples = b.telemetry()
        assert [s.device_id for s in samples] == [i for i in IDS if i != lost]
        assert all(s.memory_total_bytes == 192 * GIB for s in samples if s.memory_total_bytes is not None)
        assert [s.device_id for s in b.telemetry([IDS[0], IDS[7]])] == [IDS[0], IDS[7]]
        with pytest.raises(DeviceLostError) as err:
            b.telemetry([lost])
        assert err.value.device_id == lost
        with pytest.raises(DeviceLostError):
            b.telemetry([IDS[0], lost])
        # The lost GPU's processes and partitions are gone; the others' are not.
        assert all(p.device_id != lost for p in b.processes())


def test_lost_gpu_stays_lost_and_is_fatal_in_the_hive() -> None:
    with open_scenario("mi300x-8") as b:
        b.inventory()
        b.inject_fault(Fault.DEVICE_LOST, IDS[0])
        first = b.health()[IDS[0]].conditions[0]
        second = b.health()[IDS[0]].conditions[0]
        assert first.first_seen == second.first_seen  # one loss, not a new one per call
        inv = b.inventory()
        # The links among the seven survivors remain; none refers to an id outside the inventory.
        ids = {d.id for d in inv.devices}
        assert all(link.a in ids and link.b in ids for link in inv.links)
        survivors = {frozenset((link.a, link.b)) for link in inv.links if IDS[0] not in (link.a, link.b)}
        assert len(survivors) == 21  # 7 choose 2: the rest of the hive is still fully linked


def test_lost_gpu_without_a_prior_inventory_uses_the_first_reading() -> None:
    # health() first: the backend still learns each identity before the loss.
    with open_scenario("mi300x-8") as b:
        assert b.health()[IDS[5]].state is HealthState.HEALTHY
        b.inject_fault(Fault.DEVICE_LOST, IDS[5])
        assert b.health()[IDS[5]].operational is Operational.LOST
        assert len(b.telemetry()) == 7


def test_fake_amdsmi_lost_gpu_fails_like_the_library() -> None:
    with install("mi300x-8") as inst:
        amdsmi = inst.amdsmi
        assert amdsmi is not None
        amdsmi.amdsmi_init()
        try:
            handles = amdsmi.amdsmi_get_processor_handles()
            inst.lose_gpu(2)
            assert len(amdsmi.amdsmi_get_processor_handles()) == 8  # enumerated at init
            with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
                amdsmi.amdsmi_get_gpu_device_bdf(handles[2])
            assert err.value.get_error_code() == STATUS["NOT_FOUND"] == 31
            assert err.value.get_error_info() == "AMDSMI_STATUS_NOT_FOUND"
            assert amdsmi.amdsmi_get_gpu_device_bdf(handles[1]) == MI300X_BUS_IDS[1]
        finally:
            amdsmi.amdsmi_shut_down()


def test_fake_health_not_supported_answers_not_supported() -> None:
    with install("mi300x-8") as inst:
        amdsmi = inst.amdsmi
        assert amdsmi is not None
        amdsmi.amdsmi_init()
        try:
            h = amdsmi.amdsmi_get_processor_handles()[0]
            inst.make_health_unsupported(0)
            assert "amdsmi_get_gpu_total_ecc_count" in HEALTH_FUNCTIONS
            with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
                amdsmi.amdsmi_get_gpu_total_ecc_count(h)
            assert err.value.get_error_code() == STATUS["NOT_SUPPORTED"] == 2
            # Identity and telemetry still answer.
            assert amdsmi.amdsmi_get_gpu_asic_info(h)["market_name"] == "AMD Instinct MI300X"
        finally:
            amdsmi.amdsmi_shut_down()


@pytest.mark.parametrize("name", ["mi300x-8", "amdsmi-absent", "ras-uncorrectable"])
def test_health_not_supported_is_unknown_not_unhealthy(name: str) -> None:
    with open_scenario(name) as b:
        assert b.health()[IDS[0]].state is HealthState.HEALTHY
        b.inject_fault(Fault.HEALTH_NOT_SUPPORTED, IDS[0])
        health = b.health()
        h = health[IDS[0]]
        assert (h.monitored, h.state, h.operational) == (False, HealthState.UNKNOWN, Operational.ONLINE)
        assert h.conditions == ()
        assert all(health[i].monitored for i in IDS[1:])
        # Nothing else about the device is lost: it is still inventoried and sampled.
        inv = b.inventory()
        assert inv.devices[0].model == "AMD Instinct MI300X"
        assert inv.devices[0].memory_total_bytes == 192 * GIB
        assert [s.device_id for s in b.telemetry([IDS[0]])] == [IDS[0]]


def test_health_not_supported_on_a_consumer_radeon() -> None:
    with open_scenario("radeon-rx7800xt") as b:
        [dev] = b.inventory().devices
        assert dev.health.monitored  # "ECC disabled" is a known state
        b.inject_fault(Fault.HEALTH_NOT_SUPPORTED, dev.id)
        assert b.health()[dev.id].state is HealthState.UNKNOWN


def test_inject_fault_errors() -> None:
    with open_scenario("mi300x-8") as b:
        with pytest.raises(DeviceError):
            b.inject_fault(Fault.DEVICE_LOST, "amd:0xdeadbeef")
        with pytest.raises(NotSupportedError):
            b.inject_fault("melt", IDS[0])
        assert b.health()[IDS[0]].state is HealthState.HEALTHY


def test_inject_fault_needs_a_fake_scenario(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Over real libraries (here: none, but a fake sysfs card) there is nothing to break.
    from accel.plugins.amd.testing import build_amdgpu_sysfs, scenario

    host = scenario("mi300x-8")
    build_amdgpu_sysfs(host, tmp_path)
    with install("amdsmi-absent"), PLUGIN.open(BackendConfig(sysfs_root=tmp_path)) as b:
        dev = b.inventory().devices[0]
        with pytest.raises(NotSupportedError, match="fake amd scenario"):
            b.inject_fault(Fault.DEVICE_LOST, dev.id)
        assert b.health()[dev.id].operational is Operational.ONLINE
