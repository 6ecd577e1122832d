"""No NVML exception escapes: every public method under every NVML error code gives accel errors only."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pynvml
import pytest

from accel.errors import AccelError, DeviceLostError, DriverVersionError, LibraryNotFoundError, NotSupportedError
from accel.plugin import BackendConfig, ProbeStatus
from accel.plugins.nvidia import PLUGIN
from accel.plugins.nvidia._nvml import ERROR_CLASSES, C, Nvml, map_error
from accel.plugins.nvidia.testing import FakeNVML

from .conftest import open_fake

CODES = sorted(pynvml.NVMLError._valClassMapping)
EXTRA: list[Callable[[], BaseException]] = [
    lambda: pynvml.NVMLLibraryMismatchError("no _v3"),
    lambda: UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"),
    lambda: pynvml.NVMLError(4242),
    lambda: OSError("segv-ish"),
]


def _public_calls(b: Any) -> list[Callable[[], object]]:
    return [b.inventory, b.telemetry, b.health, b.processes, b.partitions, b.partition_profiles,
            lambda: b.poll_events(0.0)]


def test_every_code_has_a_mapping() -> None:
    assert set(CODES) <= set(ERROR_CLASSES)
    assert isinstance(map_error(pynvml.NVMLError_GpuIsLost()), DeviceLostError)
    assert isinstance(map_error(pynvml.NVMLError_NotSupported()), NotSupportedError)
    assert isinstance(map_error(pynvml.NVMLError_LibraryNotFound()), LibraryNotFoundError)
    assert isinstance(map_error(pynvml.NVMLError_LibRmVersionMismatch()), DriverVersionError)


@pytest.mark.parametrize("scenario", ["h100-nvswitch-8", "a100-mig", "old-driver-r470"])
@pytest.mark.parametrize("failure", [*CODES, *range(len(EXTRA))], ids=[f"nvml{c}" for c in CODES]
                         + [f"extra{i}" for i in range(len(EXTRA))])
def test_public_methods_raise_only_accel_errors(scenario: str, failure: int) -> None:
    is_extra = failure < len(EXTRA) and failure not in CODES
    fake = FakeNVML(scenario)
    b = open_fake(fake)
    try:
        b.inventory()
        if is_extra:
            fake.fail_all(exc=EXTRA[failure])
        else:
            fake.fail_all(failure)
        for call in _public_calls(b):
            try:
                call()
            except AccelError:
                pass
            except Exception as exc:  # noqa: BLE001 -- catching anything that escapes is the test
                pytest.fail(f"{type(exc).__name__} escaped {call}: {exc}")
    finally:
        b.close()
        b.close()


@pytest.mark.parametrize("code", CODES)
def test_open_and_probe_under_every_code(code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNVML("h100-nvswitch-8")
    fake.fail_all(code)
    monkeypatch.setattr("accel.plugins.nvidia._fake_library", lambda _cfg: fake)
    cfg = BackendConfig(options={"scenario": "h100-nvswitch-8"})
    assert PLUGIN.probe(cfg).status in (ProbeStatus.ERROR, ProbeStatus.ABSENT, ProbeStatus.PRESENT)
    with pytest.raises(AccelError):
        PLUGIN.open(cfg)


def test_constants_match_the_binding() -> None:
    pairs = {
        "NVML_ERROR_GPU_IS_LOST": C.ERROR_GPU_IS_LOST, "nvmlMemory_v2": C.NVML_MEMORY_V2,
        "nvmlGpuFabricInfo_v2": C.GPU_FABRIC_INFO_V2, "NVML_GPU_FABRIC_STATE_COMPLETED": C.GPU_FABRIC_STATE_COMPLETED,
        "NVML_GPU_FABRIC_STATE_NOT_SUPPORTED": C.GPU_FABRIC_STATE_NOT_SUPPORTED,
        "NVML_ERROR_ARGUMENT_VERSION_MISMATCH": C.ERROR_ARGUMENT_VERSION_MISMATCH,
        "NVML_FI_DEV_ECC_DBE_VOL_TOTAL": C.FI_ECC_DBE_VOL_TOTAL,
        "NVML_FI_DEV_REMAPPED_FAILURE": C.FI_REMAPPED_FAILURE,
        "NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY": C.FI_NVLINK_ERROR_DL_REPLAY,
        "NVML_FI_DEV_POWER_INSTANT": C.FI_POWER_INSTANT,
        "NVML_FI_DEV_NVLINK_GET_STATE": 165, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION": C.FI_GPU_RECOVERY_ACTION,
        "NVML_TOPOLOGY_SYSTEM": C.TOPOLOGY_SYSTEM, "NVML_NVLINK_DEVICE_TYPE_SWITCH": C.NVLINK_DEVICE_TYPE_SWITCH,
        "nvmlEventTypeXidCriticalError": C.EVENT_XID_CRITICAL, "NVML_GPU_INSTANCE_PROFILE_COUNT":
        C.GPU_INSTANCE_PROFILE_COUNT, "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION": C.FI_TOTAL_ENERGY,
        "NVML_FI_DEV_RETIRED_PENDING": C.FI_RETIRED_PENDING, "NVML_FI_DEV_MEMORY_TEMP": C.FI_MEMORY_TEMP,
    }
    for name, value in pairs.items():
        assert getattr(pynvml, name) == value, name
    assert pynvml.NVML_P2P_CAPS_INDEX_READ == (0,)  # the binding's trailing-comma bug we avoid


def test_import_prints_nothing_and_loads_no_binding() -> None:
    code = "import accel.plugins.nvidia, sys; assert 'pynvml' not in sys.modules"
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""


def test_nvml_session_is_balanced() -> None:
    fake = FakeNVML("h100-nvswitch-8")
    b = open_fake(fake)
    assert fake.refcount == 1
    b.inventory()
    b.close()
    b.close()
    assert fake.refcount == 0
    with pytest.raises(AccelError):
        b.inventory()
    nv = Nvml(fake)
    with pytest.raises(AccelError):
        nv.call("nvmlDeviceGetCount")  # uninitialised -> mapped, not NVMLError
