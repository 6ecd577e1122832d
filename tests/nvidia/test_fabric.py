"""NVLink cliques from the fabric info (issue 13, finding 6): read right, never silently missing."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py (module pynvml) is not installed")

from accel.model import DomainKind, ProblemKind  # noqa: E402
from accel.plugins.nvidia.testing import FakeNVML  # noqa: E402
from accel.plugins.nvidia.testing._profiles import GB200_CLIQUE_ID  # noqa: E402

from .conftest import open_fake  # noqa: E402

CLIQUE = "nvidia:clique-9c6f5af3-53bf-49b5-a436-b66766c413c3/4026"


def _inventory(fake: FakeNVML) -> Any:
    backend = open_fake(fake)
    try:
        return backend.inventory()
    finally:
        backend.close()


def test_gb200_tray_clique_read_through_the_fake() -> None:
    inv = _inventory(FakeNVML("gb200-nvl72-tray"))
    cliques = [d for d in inv.domains if d.kind is DomainKind.NVLINK_CLIQUE]
    assert [d.id for d in cliques] == [CLIQUE]
    assert cliques[0].members == tuple(d.id for d in inv.devices)
    assert len(inv.devices) == 4 and {d.model for d in inv.devices} == {"NVIDIA GB200"}
    assert inv.devices[0].memory[0].total_bytes == 189471 * 1024 * 1024
    assert inv.devices[0].power.default_watts == 1200.0
    assert inv.problems == ()


def test_dgx_h100_reports_no_clique_and_no_problem() -> None:
    # Fabric state NOT_SUPPORTED (non-MNNVL H100): a fact, not a partial read.
    inv = _inventory(FakeNVML("h100-nvswitch-8"))
    assert not [d for d in inv.domains if d.kind is DomainKind.NVLINK_CLIQUE]
    assert inv.problems == ()


@pytest.mark.parametrize(("code", "accel_code"), [(25, "driver.argument-version-mismatch"),
                                                  (2, "driver.invalid-argument"),
                                                  (4, "permission.denied")])
def test_fabric_failure_is_a_typed_problem_per_device(code: int, accel_code: str) -> None:
    fake = FakeNVML("gb200-nvl72-tray")
    for g in fake.scenario.gpus:
        g.errors["nvmlDeviceGetGpuFabricInfoV"] = code
    inv = _inventory(fake)
    assert not [d for d in inv.domains if d.kind is DomainKind.NVLINK_CLIQUE]
    assert len(inv.problems) == 4
    assert {p.device_id for p in inv.problems} == {d.id for d in inv.devices}
    for p in inv.problems:
        assert p.kind is ProblemKind.FIELD and p.backend == "nvidia"
        assert p.command == "nvmlDeviceGetGpuFabricInfoV" and p.code == accel_code


def test_fabric_not_complete_or_failed_probe_is_a_problem() -> None:
    fake = FakeNVML("gb200-nvl72-tray")
    fake.scenario.gpus[1].fabric = (2, bytes(16), 0)  # IN_PROGRESS
    fake.scenario.gpus[2].fabric_status = 999  # COMPLETED, probe failed
    inv = _inventory(fake)
    by_device = {p.device_id: p.code for p in inv.problems}
    ids = [d.id for d in inv.devices]
    assert by_device == {ids[1]: "device.fabric-not-ready", ids[2]: "device.fabric-failed"}
    (clique,) = [d for d in inv.domains if d.kind is DomainKind.NVLINK_CLIQUE]
    assert clique.members == (ids[0], ids[3])


def test_zero_cluster_uuid_is_no_clique() -> None:
    # torchcomms#1385: non-MNNVL H100 may say COMPLETED with an all-zero cluster UUID.
    fake = FakeNVML("gb200-nvl72-tray")
    for g in fake.scenario.gpus:
        g.fabric = (3, bytes(16), 0)
    inv = _inventory(fake)
    assert not [d for d in inv.domains if d.kind is DomainKind.NVLINK_CLIQUE] and inv.problems == ()


# -- the fake enforces the C calling convention -------------------------------------------------

@pytest.fixture
def handle() -> tuple[FakeNVML, Any]:
    fake = FakeNVML("gb200-nvl72-tray")
    fake.nvmlInit()
    return fake, fake.nvmlDeviceGetHandleByIndex(0)


def test_fake_fills_a_byref_versioned_struct(handle: tuple[FakeNVML, Any]) -> None:
    fake, h = handle
    info = pynvml.c_nvmlGpuFabricInfo_v2_t()
    info.version = pynvml.nvmlGpuFabricInfo_v2
    assert fake.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(info)) == pynvml.NVML_SUCCESS
    assert (int(info.state), int(info.status), int(info.cliqueId)) == (3, 0, GB200_CLIQUE_ID)
    assert bytes(info.clusterUuid).hex() == "9c6f5af353bf49b5a436b66766c413c3"
    v3 = pynvml.c_nvmlGpuFabricInfo_v3_t()  # the binding's constructor sets nvmlGpuFabricInfo_v3
    assert fake.nvmlDeviceGetGpuFabricInfoV(h, ctypes.pointer(v3)) == pynvml.NVML_SUCCESS
    assert int(v3.cliqueId) == GB200_CLIQUE_ID


def _zero_version() -> Any:
    info = pynvml.c_nvmlGpuFabricInfo_v2_t()
    info.version = 0
    return ctypes.byref(info)


@pytest.mark.parametrize(("arg", "error"), [
    (lambda: pynvml.c_nvmlGpuFabricInfo_v2_t(), "NVMLError_ArgumentVersionMismatch"),  # by value (the bug)
    (_zero_version, "NVMLError_ArgumentVersionMismatch"),  # .version not set
    (lambda: ctypes.byref(pynvml.c_nvmlGpuFabricInfo_t()), "NVMLError_ArgumentVersionMismatch"),  # v1 struct
    (lambda: ctypes.byref(ctypes.c_uint(0x02000024)), "NVMLError_InvalidArgument"),  # buffer too small
    (lambda: None, "NVMLError_InvalidArgument"),  # NULL
    (lambda: 0, "NVMLError_InvalidArgument"),  # an int is no pointer
])
def test_fake_refuses_what_the_driver_refuses(handle: tuple[FakeNVML, Any], arg: Any, error: str) -> None:
    fake, h = handle
    with pytest.raises(getattr(pynvml, error)):
        fake.nvmlDeviceGetGpuFabricInfoV(h, arg())
    assert fake.calls["nvmlDeviceGetGpuFabricInfoV"] == 1


def test_fake_raises_ctypes_argument_error_for_unconvertible(handle: tuple[FakeNVML, Any]) -> None:
    fake, h = handle
    with pytest.raises(ctypes.ArgumentError):
        fake.nvmlDeviceGetGpuFabricInfoV(h, object())


def test_fake_checks_arguments_before_support(handle: tuple[FakeNVML, Any]) -> None:
    """A by-value struct fails on a GPU without fabric too: the bug cannot hide behind NOT_SUPPORTED."""
    fake = FakeNVML("rtx4090-4")
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        fake.nvmlDeviceGetGpuFabricInfoV(h, pynvml.c_nvmlGpuFabricInfo_v2_t())
    ok = pynvml.c_nvmlGpuFabricInfo_v2_t()
    ok.version = pynvml.nvmlGpuFabricInfo_v2
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(ok))


def test_fake_legacy_fabric_call_takes_the_unversioned_struct(handle: tuple[FakeNVML, Any]) -> None:
    fake, h = handle
    info = pynvml.c_nvmlGpuFabricInfo_t()
    assert fake.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info)) == pynvml.NVML_SUCCESS
    assert int(info.cliqueId) == GB200_CLIQUE_ID
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetGpuFabricInfo(h, pynvml.c_nvmlGpuFabricInfo_t())  # by value


def test_fake_placements_need_pointers() -> None:
    fake = FakeNVML("a100-mig")
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    arr = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
    count = ctypes.c_uint(8)
    assert fake.nvmlDeviceGetGpuInstancePossiblePlacements(h, 9, arr, ctypes.byref(count)) == 0
    assert count.value == 2 and (arr[1].start, arr[1].size) == (4, 4)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetGpuInstancePossiblePlacements(h, 9, arr, count)  # count by value
    with pytest.raises(pynvml.NVMLError_InsufficientSize):
        fake.nvmlDeviceGetGpuInstancePossiblePlacements(h, 9, (pynvml.c_nvmlGpuInstancePlacement_t * 1)(),
                                                        ctypes.byref(count))


def test_fake_wrapper_level_versions(handle: tuple[FakeNVML, Any]) -> None:
    fake, h = handle
    assert fake.nvmlDeviceGetTemperatureV(h, 0) == fake.scenario.gpus[0].temperature_c
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        fake.nvmlDeviceGetTemperatureV(h, 0, version=0x02000000)
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        fake.nvmlDeviceGetMemoryInfo(h, version=0x01000000)
