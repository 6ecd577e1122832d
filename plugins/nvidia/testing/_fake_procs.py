"""The fake's processes, per-process utilisation, video engines, display and driver model."""

from __future__ import annotations

from typing import Any

from ._fake_core import FakeCore

__all__ = ["ProcessCalls"]


class ProcessCalls(FakeCore):
    """What runs on a GPU, and the modes gpustat and nvitop read besides."""

    def _procs(self, fn: str, handle: Any, kind: str) -> list[Any]:
        gpu, mig, _ = self._enter(fn, handle)
        assert gpu is not None
        out = []
        for p in gpu.processes:
            if p.kind != kind or (mig is not None and p.gi_id != mig.gi_id):
                continue
            out.append(self.pynvml.nvmlFriendlyObject({
                "pid": p.pid, "usedGpuMemory": p.used_bytes, "gpuInstanceId": p.gi_id,
                "computeInstanceId": p.ci_id}))
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses", handle, "compute")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses_v2", handle, "compute")

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses_v3", handle, "compute")

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetGraphicsRunningProcesses", handle, "graphics")

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetGraphicsRunningProcesses_v2", handle, "graphics")

    def nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetGraphicsRunningProcesses_v3", handle, "graphics")

    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[Any]:
        """Samples newer than ``timeStamp`` (µs); NOT_FOUND when there are none (no processes)."""
        gpu = self._gpu("nvmlDeviceGetProcessUtilization", handle)
        if not gpu.processes:
            raise self._err(6)  # the driver's answer for "no sample since timeStamp"
        self._clock_us += 1000
        share = max(1, len(gpu.processes))
        out = []
        for p in gpu.processes:
            s = self.pynvml.c_nvmlProcessUtilizationSample_t()
            s.pid, s.timeStamp = p.pid, max(int(timeStamp), self._clock_us)
            s.smUtil, s.memUtil = gpu.utilization[0] // share, gpu.utilization[1] // share
            s.encUtil = s.decUtil = 0
            out.append(s)
        return out

    # -- video engines, display and modes (read by gpustat and nvitop) --------------------------
    def nvmlDeviceGetEncoderUtilization(self, handle: Any) -> list[int]:
        """``[utilization %, sampling period µs]``; the fake's encoders are idle."""
        self._gpu("nvmlDeviceGetEncoderUtilization", handle)
        return [0, 167_000]

    def nvmlDeviceGetDecoderUtilization(self, handle: Any) -> list[int]:
        self._gpu("nvmlDeviceGetDecoderUtilization", handle)
        return [0, 167_000]

    def nvmlDeviceGetComputeMode(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetComputeMode", handle)
        return 0  # NVML_COMPUTEMODE_DEFAULT

    def nvmlDeviceGetDisplayMode(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetDisplayMode", handle)
        return 0  # headless servers: no display attached

    def nvmlDeviceGetDisplayActive(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetDisplayActive", handle)
        return 0

    def nvmlDeviceGetDriverModel_v2(self, handle: Any, _fn: str = "nvmlDeviceGetDriverModel_v2") -> list[int]:
        self._gpu(_fn, handle)
        raise self._err(3)  # WDDM/TCC driver models exist on Windows only; Linux says NOT_SUPPORTED

    def nvmlDeviceGetDriverModel(self, handle: Any) -> list[int]:
        return self.nvmlDeviceGetDriverModel_v2(handle, _fn="nvmlDeviceGetDriverModel")

    def nvmlDeviceGetCurrentDriverModel(self, handle: Any) -> int:
        return self.nvmlDeviceGetDriverModel_v2(handle, _fn="nvmlDeviceGetCurrentDriverModel")[0]

    def nvmlDeviceGetPendingDriverModel(self, handle: Any) -> int:
        return self.nvmlDeviceGetDriverModel_v2(handle, _fn="nvmlDeviceGetPendingDriverModel")[1]

