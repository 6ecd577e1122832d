"""The fake behaves like nvidia-ml-py where the plugin could tell the difference."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from accel.plugin import BackendConfig
from accel.plugins.nvidia import PLUGIN
from accel.plugins.nvidia.testing import SCENARIOS, FakeNVML, dgx_h100_uuid


def test_installed_over_the_module_and_real_code_path() -> None:
    fake = FakeNVML("h100-nvswitch-8")
    original = pynvml.nvmlInit
    with fake.installed():
        with pytest.raises(pynvml.NVMLError_Uninitialized):
            pynvml.nvmlDeviceGetCount()
        with PLUGIN.open(BackendConfig()) as b:  # no scenario: the real binding, patched
            inv = b.inventory()
        assert [d.uuid for d in inv.devices] == [dgx_h100_uuid(i) for i in range(8)]
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):
            pynvml.nvmlDeviceGetHandleBySerial("1650223000000")
    assert pynvml.nvmlInit is original


def test_handles_are_new_unhashable_and_identity_compared() -> None:
    fake = FakeNVML("h100-nvswitch-8")
    fake.nvmlInit()
    h1, h2 = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(h1, pynvml.c_nvmlDevice_t) and h1 is not h2 and h1 != h2
    with pytest.raises(TypeError):
        hash(h1)
    assert fake.nvmlDeviceGetUUID(h1) == fake.nvmlDeviceGetUUID(h2)
    assert fake.nvmlDeviceGetPciInfo(h1).busId == "00000000:18:00.0"
    assert fake.nvmlDeviceGetHandleByPciBusId("0000:2A:00.0") is not None
    assert isinstance(fake.nvmlDeviceIsMigDeviceHandle(h1), ctypes.c_uint)


def test_refcount_and_extra_shutdown() -> None:
    fake = FakeNVML("zero-gpus")
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlShutdown()  # library never loaded
    fake.nvmlInit()
    fake.nvmlInit()
    fake.nvmlShutdown()
    assert fake.nvmlDeviceGetCount() == 0
    fake.nvmlShutdown()
    fake.nvmlShutdown()  # more shutdowns than inits: no error once loaded (nvml.h)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()


def test_memory_v1_includes_reserved_v2_splits_it() -> None:
    fake = FakeNVML("h100-nvswitch-8")
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    v1 = fake.nvmlDeviceGetMemoryInfo(h)
    v2 = fake.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert isinstance(v1, pynvml.c_nvmlMemory_t) and isinstance(v2, pynvml.c_nvmlMemory_v2_t)
    assert v1.used == v2.reserved + v2.used and v1.total == v2.total == 85520809984
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        fake.nvmlDeviceGetMemoryInfo(h, version=0x01000028)


def test_p2p_rejects_the_tuple_constant_and_events_time_out_without_sleeping() -> None:
    fake = FakeNVML("h100-nvswitch-8")
    fake.nvmlInit()
    a, b = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(ctypes.ArgumentError):
        fake.nvmlDeviceGetP2PStatus(a, b, pynvml.NVML_P2P_CAPS_INDEX_READ)
    assert fake.nvmlDeviceGetP2PStatus(a, b, 0) == pynvml.NVML_P2P_STATUS_OK
    es = fake.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_Timeout):
        fake.nvmlEventSetWait(es, 10_000)


def test_sparse_mig_slots_and_lost_gpu_blocks_uuid_lookup() -> None:
    fake = FakeNVML("a100-mig")
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    found = []
    for i in range(fake.nvmlDeviceGetMaxMigDeviceCount(h)):
        try:
            found.append(fake.nvmlDeviceGetGpuInstanceId(fake.nvmlDeviceGetMigDeviceHandleByIndex(h, i)))
        except pynvml.NVMLError_NotFound:
            continue
    assert found == [2, 3, 9, 10]
    dgx = FakeNVML("h100-nvswitch-8")
    dgx.nvmlInit()
    dgx.lose_gpu(7)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        dgx.nvmlDeviceGetHandleByUUID(dgx_h100_uuid(0))


def test_field_values_report_per_field_failures() -> None:
    fake = FakeNVML("rtx4090-4")
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    vals = fake.nvmlDeviceGetFieldValues(
        h, [pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION])
    assert vals[0].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED and vals[1].nvmlReturn == 0
    assert vals[1].value.ullVal == 456_789_012


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_opens_or_fails_cleanly(name: str) -> None:
    cfg = BackendConfig(options={"scenario": name})
    PLUGIN.probe(cfg)
    try:
        b = PLUGIN.open(cfg)
    except Exception as exc:  # noqa: BLE001
        from accel.errors import AccelError

        assert isinstance(exc, AccelError)
        return
    with b:
        inv = b.inventory()
        assert len(inv.devices) == len(FakeNVML(name).scenario.gpus)
