"""The call-counting harness of benchmarks/nvml_calls (no gpustat or nvitop needed) and the fake's
symbols those tools read."""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path
from typing import Any

import pynvml
import pytest

from accel.plugins.nvidia.testing import FakeNVML
from tests._helpers import loaded_script

_HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "nvml_calls" / "compare.py"


@pytest.fixture(scope="module")
def harness() -> Any:
    with loaded_script(_HARNESS, "nvml_calls_compare") as module:
        yield module


def test_accel_counts_agree_with_the_backend_counter_and_warm_reads_no_identity(harness: Any) -> None:
    row = harness.measure_accel("h100-nvswitch-8")
    assert row["gpus"] == 8
    # The fake's counters and the backend's own wrapper counter see the same calls.
    assert row["backend_counter"] == row["all_cold"] + row["all_warm"]
    warm = row["calls_warm"]
    assert row["all_warm"] < row["all_cold"]
    # Identity, limits and NVLink wiring are cached after the first snapshot.
    for fn in ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetEnforcedPowerLimit",
               "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetTopologyCommonAncestor"):
        assert fn not in warm
    # One per GPU: the telemetry() that follows inventory() borrows its reading (plugins/nvidia/_backend.py _lent).
    assert warm["nvmlDeviceGetFieldValues"] == 8
    assert row["fake_lacks"] == []
    assert 0 < row["common_warm"] < row["all_warm"]


def test_common_calls_counts_session_and_common_fields_across_versions(harness: Any) -> None:
    calls = Counter({"nvmlInit": 1, "nvmlDeviceGetCount": 1, "nvmlDeviceGetHandleByIndex": 2,
                     "nvmlDeviceGetName": 2, "nvmlDeviceGetComputeRunningProcesses_v3": 2,
                     "nvmlDeviceGetEncoderUtilization": 2, "nvmlDeviceGetClockInfo": 8, "nvmlShutdown": 1})
    assert harness.common_calls(calls) == 1 + 1 + 2 + 2 + 2 + 1


def test_patched_namespace_reaches_a_tools_copy_of_the_binding_and_restores_it(harness: Any) -> None:
    # A tool that did ``from pynvml import *`` at import holds its own references to the wrappers.
    tool = types.ModuleType("tool")
    # (a stand-in for nvitop's libnvml; pynvml has no __all__, so * copies every public name)
    vars(tool).update({k: v for k, v in vars(pynvml).items() if not k.startswith("_")})
    original_count = tool.nvmlDeviceGetCount
    original_init = tool.nvmlInit

    def custom_count() -> int:
        return -1

    fake = FakeNVML("rtx4090-4")
    with fake.installed(), harness.patched_namespace(tool, fake, keep=frozenset({"nvmlInit"}),
                                                     resolve={"nvmlShutdown": custom_count}) as replaced:
        assert replaced > 100
        assert tool.nvmlInit is original_init  # kept: it is the real wrapper...
        tool.nvmlInit()  # ...which now calls into the installed fake
        assert tool.nvmlDeviceGetCount() == 4
        h = tool.nvmlDeviceGetHandleByIndex(0)
        assert tool.nvmlDeviceGetName(h) == fake.scenario.gpus[0].name
        assert tool.nvmlShutdown() == -1
        assert tool.nvmlExceptionClass is pynvml.nvmlExceptionClass  # pure helper: untouched
    # The real nvmlInit wrapper calls the module's nvmlInitWithFlags(0): the fake's.
    assert fake.calls == Counter({"nvmlInitWithFlags": 1, "nvmlDeviceGetCount": 1, "nvmlDeviceGetHandleByIndex": 1,
                                  "nvmlDeviceGetName": 1})
    assert tool.nvmlDeviceGetCount is original_count and tool.nvmlShutdown is pynvml.nvmlShutdown


def test_install_leaves_the_bindings_pure_helpers_alone() -> None:
    helpers = (pynvml.nvmlExceptionClass, pynvml.nvmlStructToFriendlyObject, pynvml.nvmlFriendlyObjectToStruct)
    with FakeNVML("rtx4090-4").installed():
        assert (pynvml.nvmlExceptionClass, pynvml.nvmlStructToFriendlyObject,
                pynvml.nvmlFriendlyObjectToStruct) == helpers
        assert pynvml.nvmlExceptionClass(3) is pynvml.NVMLError_NotSupported


def test_video_display_mode_and_process_utilisation_symbols() -> None:
    fake = FakeNVML("rtx4090-4")
    with fake.installed():
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            assert pynvml.nvmlDeviceGetEncoderUtilization(h) == [0, 167_000]
            assert pynvml.nvmlDeviceGetDecoderUtilization(h) == [0, 167_000]
            assert pynvml.nvmlDeviceGetComputeMode(h) == pynvml.NVML_COMPUTEMODE_DEFAULT
            assert pynvml.nvmlDeviceGetDisplayMode(h) == 0 and pynvml.nvmlDeviceGetDisplayActive(h) == 0
            # Driver models are a Windows (WDDM/TCC) notion: Linux drivers say NOT_SUPPORTED.
            for fn in (pynvml.nvmlDeviceGetDriverModel, pynvml.nvmlDeviceGetCurrentDriverModel,
                       pynvml.nvmlDeviceGetPendingDriverModel, pynvml.nvmlDeviceGetDriverModel_v2):
                with pytest.raises(pynvml.NVMLError_NotSupported):
                    fn(h)
            pids = {p.pid for p in fake.scenario.gpus[0].processes}
            if pids:
                samples = pynvml.nvmlDeviceGetProcessUtilization(h, 0)
                assert {s.pid for s in samples} == pids
                assert all(isinstance(s, pynvml.c_nvmlProcessUtilizationSample_t) for s in samples)
            idle = next(i for i, g in enumerate(fake.scenario.gpus) if not g.processes)
            with pytest.raises(pynvml.NVMLError_NotFound):  # no sample since the timestamp
                pynvml.nvmlDeviceGetProcessUtilization(pynvml.nvmlDeviceGetHandleByIndex(idle), 0)
        finally:
            pynvml.nvmlShutdown()


def test_mig_handles_do_not_answer_video_or_process_utilisation() -> None:
    fake = FakeNVML("a100-mig")
    fake.nvmlInit()
    gpu = fake.nvmlDeviceGetHandleByIndex(0)
    slot = min(fake.scenario.gpus[0].mig_slots)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu, slot)
    for fn in (fake.nvmlDeviceGetEncoderUtilization, fake.nvmlDeviceGetComputeMode):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            fn(mig)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetProcessUtilization(mig, 0)
