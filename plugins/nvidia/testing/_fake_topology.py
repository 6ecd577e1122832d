"""The fake's topology surface: NUMA and CPU affinity, PCIe ancestors, P2P, NVLink, fabric."""

from __future__ import annotations

import ctypes
from typing import Any

from ._fake_core import FakeCore
from ._profiles import GpuSpec

__all__ = ["TopologyCalls"]


def _cpus(cpulist: str) -> list[int]:
    out: list[int] = []
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out



class TopologyCalls(FakeCore):
    """Where a GPU sits and what it is wired to."""

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:
        gpu = self._gpu("nvmlDeviceGetMemoryAffinity", handle)
        arr = (ctypes.c_ulonglong * nodeSetSize)()
        if gpu.numa_node // 64 < nodeSetSize:
            arr[gpu.numa_node // 64] = 1 << (gpu.numa_node % 64)
        return arr

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> Any:
        gpu = self._gpu("nvmlDeviceGetCpuAffinity", handle)
        arr = (ctypes.c_ulonglong * cpuSetSize)()
        for cpu in _cpus(gpu.cpus):
            if cpu // 64 < cpuSetSize:
                arr[cpu // 64] |= 1 << (cpu % 64)
        return arr

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        self._gpu("nvmlDeviceGetNumaNodeId", handle)
        # Only coherent (Grace) platforms make GPUs NUMA nodes.
        raise self._err(3)

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        self._gpu("nvmlDeviceGetTopologyCommonAncestor", device1)
        a = self._resolve(device1)[0]
        b = self._resolve(device2)[0]
        if self.scenario.gpus[b].lost:
            raise self._err(15)
        if a == b:
            return 0
        key = (min(a, b), max(a, b))
        if key in self.scenario.ancestors:
            return self.scenario.ancestors[key]
        same = self.scenario.gpus[a].numa_node == self.scenario.gpus[b].numa_node
        return 40 if same else 50

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        if not isinstance(p2pIndex, int):
            # ctypes cannot convert NVML_P2P_CAPS_INDEX_READ, which the bindings define as (0,).
            raise ctypes.ArgumentError("argument 3: <class 'TypeError'>: wrong type")
        gpu = self._gpu("nvmlDeviceGetP2PStatus", device1)
        b = self._resolve(device2)[0]
        if self.scenario.gpus[b].lost:
            raise self._err(15)
        return 2 if gpu.brand == 5 else 0

    # -- NVLink -------------------------------------------------------------------------------
    def _link(self, fn: str, device: Any, link: int) -> Any:
        gpu = self._gpu(fn, device)
        if not 0 <= link < len(gpu.nvlinks):
            raise self._err(2)
        return gpu.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        return 1 if self._link("nvmlDeviceGetNvLinkState", device, link).active else 0

    def nvmlDeviceGetNvLinkVersion(self, device: Any, link: int) -> int:
        return self._link("nvmlDeviceGetNvLinkVersion", device, link).version  # type: ignore[no-any-return]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        return self._pci(self._link("nvmlDeviceGetNvLinkRemotePciInfo", device, link).remote_bus_id)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        return self._link("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link).remote_type  # type: ignore[no-any-return]

    def nvmlDeviceGetNvLinkCapability(self, device: Any, link: int, capability: int) -> int:
        self._link("nvmlDeviceGetNvLinkCapability", device, link)
        return 1

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        lk = self._link("nvmlDeviceGetNvLinkErrorCounter", device, link)
        return {0: lk.replay, 1: lk.recovery, 2: lk.crc}.get(counter, 0)  # type: ignore[no-any-return]

    def _fill_fabric(self, gpu: GpuSpec, info: Any) -> None:
        state, cluster, clique = gpu.fabric  # type: ignore[misc]
        info.state = state
        info.status = gpu.fabric_status
        info.cliqueId = clique
        for i, byte in enumerate(cluster[:16]):
            info.clusterUuid[i] = byte
        if hasattr(info, "healthMask"):
            info.healthMask = 0

    def nvmlDeviceGetGpuFabricInfoV(self, device: Any, gpuFabricInfo: Any) -> int:
        """Versioned: ``gpuFabricInfo`` is ``byref(c_nvmlGpuFabricInfo_v2_t)`` (or v3) with ``.version`` set.

        The wrapper forwards it to C unchanged, so the fake checks what the C function would see
        (:meth:`_out_struct`): by value or a wrong/absent version is ARGUMENT_VERSION_MISMATCH,
        ``None`` is INVALID_ARGUMENT, an object ctypes cannot convert is ``ctypes.ArgumentError``.
        """
        fn = "nvmlDeviceGetGpuFabricInfoV"
        py = self.pynvml
        versions = {py.nvmlGpuFabricInfo_v2: py.c_nvmlGpuFabricInfo_v2_t}
        if hasattr(py, "nvmlGpuFabricInfo_v3"):
            versions[py.nvmlGpuFabricInfo_v3] = py.c_nvmlGpuFabricInfo_v3_t
        # The driver checks its arguments before the device: a bad call fails on every GPU.
        info = self._counted(fn, lambda: self._out_struct(fn, 2, gpuFabricInfo, versions=versions))
        gpu = self._gpu(fn, device)
        if gpu.fabric is None:
            raise self._err(3)
        self._fill_fabric(gpu, info)
        if hasattr(info, "healthSummary"):
            info.healthSummary = 0
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, device: Any, gpuFabricInfo: Any) -> int:
        """Unversioned (deprecated in 13.x): ``byref(c_nvmlGpuFabricInfo_t)``."""
        fn = "nvmlDeviceGetGpuFabricInfo"
        info = self._counted(fn, lambda: self._out_struct(fn, 2, gpuFabricInfo,
                                                          struct=self.pynvml.c_nvmlGpuFabricInfo_t))
        gpu = self._gpu(fn, device)
        if gpu.fabric is None or "nvmlDeviceGetGpuFabricInfoV" in gpu.not_supported:
            raise self._err(3)
        self._fill_fabric(gpu, info)
        return 0

