"""The fake's MIG: the driver's MIG objects (:class:`MigState`) and the MIG surface of pynvml.

The scenario's :class:`GpuSpec` says which MIG mode, profiles and instances (``mig_slots``) a GPU
has; :class:`MigState` holds what the driver hands out for them: a handle buffer per MIG device
slot and one per GPU instance looked up.  Creating and destroying instances (issue 38) adds and
removes slots here, next to the reads that see them.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ._fake_core import FakeCore
from ._profiles import MigSlot, Scenario

__all__ = ["MigCalls", "MigState"]


class MigState:
    """The fake driver's MIG objects; registers each handle buffer in the fake's handle table."""

    def __init__(self, scenario: Scenario, handles: dict[int, tuple[int, int | None]]) -> None:
        #: The fake's handle table (buffer address -> GPU index, MIG slot): shared, not copied.
        self._handles = handles
        self._slots: dict[tuple[int, int], Any] = {}
        for i, gpu in enumerate(scenario.gpus):
            for slot in gpu.mig_slots:
                self._add_slot(i, slot)
        self._gi_bufs: list[Any] = []
        self._gi_addr: dict[int, tuple[int, MigSlot]] = {}

    def _add_slot(self, index: int, slot: int) -> None:
        buf = (ctypes.c_int * 1)(1000 * (index + 1) + slot)
        self._slots[(index, slot)] = buf
        self._handles[ctypes.addressof(buf)] = (index, slot)

    def buffer(self, index: int, slot: int) -> Any:
        """The buffer the handle of MIG device ``slot`` of GPU ``index`` points at."""
        return self._slots[(index, slot)]

    def gpu_instance(self, index: int, mig: MigSlot) -> Any:
        """A new GPU-instance buffer for ``mig`` of GPU ``index`` (a new object per lookup, as NVML)."""
        buf = (ctypes.c_int * 1)(mig.gi_id)
        self._gi_bufs.append(buf)
        self._gi_addr[ctypes.addressof(buf)] = (index, mig)
        return buf

    def gpu_instance_at(self, addr: int | None) -> tuple[int, MigSlot] | None:
        """The GPU index and instance a GPU-instance handle's address names (``None``: not one)."""
        return self._gi_addr.get(addr) if addr is not None else None


class MigCalls(FakeCore):
    """MIG mode, MIG device handles and their ids and attributes, instance profiles and placements."""

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetMigMode", device)
        if gpu.mig_mode is None:
            raise self._err(3)
        return list(gpu.mig_mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetMaxMigDeviceCount", device)
        if gpu.mig_mode is None:
            raise self._err(3)
        return gpu.mig_max if gpu.mig_mode[0] == 1 else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        gpu, _mig, gi = self._enter("nvmlDeviceGetMigDeviceHandleByIndex", device)
        assert gpu is not None
        if gpu.mig_mode is None or gpu.mig_mode[0] != 1 or not 0 <= index < gpu.mig_max:
            raise self._err(2)
        if index not in gpu.mig_slots:
            raise self._err(6)  # an empty slot: callers must continue, not stop
        return self._handle(gi, index)

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> Any:
        _gpu, mig, _ = self._enter("nvmlDeviceIsMigDeviceHandle", device)
        return ctypes.c_uint(1 if mig is not None else 0)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        _gpu, mig, gi = self._enter("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", migDevice)
        if mig is None:
            raise self._err(2)
        return self._handle(gi)

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        _gpu, mig, _ = self._enter("nvmlDeviceGetGpuInstanceId", device)
        if mig is None:
            raise self._err(3)
        return mig.gi_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        _gpu, mig, _ = self._enter("nvmlDeviceGetComputeInstanceId", device)
        if mig is None:
            raise self._err(3)
        return mig.ci_id

    def nvmlDeviceGetAttributes_v2(self, device: Any) -> Any:
        return self.nvmlDeviceGetAttributes(device, _fn="nvmlDeviceGetAttributes_v2")

    def nvmlDeviceGetAttributes(self, device: Any, _fn: str = "nvmlDeviceGetAttributes") -> Any:
        gpu, mig, _ = self._enter(_fn, device)
        assert gpu is not None
        if mig is None:
            raise self._err(3)  # "currently only supports MIG device handles"
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        attrs = self.pynvml.c_nvmlDeviceAttributes()
        attrs.multiprocessorCount = prof.sm_count
        attrs.gpuInstanceSliceCount = prof.slices
        attrs.computeInstanceSliceCount = prof.slices
        attrs.memorySizeMB = prof.memory_mib
        attrs.sharedCopyEngineCount = max(1, prof.slices)
        return attrs

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        """``version`` 2 (default) gives the v2 struct with ``name``, 1 the v1 struct; others FunctionNotFound."""
        if version not in (1, 2):
            self.calls["nvmlDeviceGetGpuInstanceProfileInfo"] += 1
            raise self.pynvml.NVMLError_FunctionNotFound()  # what the wrapper raises
        gpu = self._gpu("nvmlDeviceGetGpuInstanceProfileInfo", device)
        if gpu.mig_mode is None:
            raise self._err(3)
        for p in gpu.mig_profiles:
            if p.profile_index == profile:
                info = (self.pynvml.c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2
                        else self.pynvml.c_nvmlGpuInstanceProfileInfo_t())
                info.id, info.sliceCount, info.instanceCount = p.profile_id, p.slices, p.max_instances
                info.multiprocessorCount, info.memorySizeMB = p.sm_count, p.memory_mib
                if version == 2:
                    info.name = f"MIG {p.name}".encode()
                return info
        raise self._err(3)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, device: Any, profileId: int, placementsRef: Any,
                                                   countRef: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetGpuInstancePossiblePlacements", device)
        prof = next((p for p in gpu.mig_profiles if p.profile_id == profileId), None)
        if prof is None:
            raise self._err(2)
        # Both are forwarded to C unchanged: an array (or pointer) of placements, or None to ask
        # for the count, and ``byref(c_uint())``.
        count = self._out_uint("nvmlDeviceGetGpuInstancePossiblePlacements", 4, countRef)
        if placementsRef is None:
            count.value = len(prof.placements)
            return 0
        addr, size = self._pointee("nvmlDeviceGetGpuInstancePossiblePlacements", 3, placementsRef)
        item = self.pynvml.c_nvmlGpuInstancePlacement_t
        if addr < 0:
            raise self._err(2)
        if size < ctypes.sizeof(item) * len(prof.placements):
            raise self._err(7)  # the fake refuses what the driver would write past the buffer
        arr = (item * len(prof.placements)).from_address(addr)
        for i, (start, psize) in enumerate(prof.placements):
            arr[i].start, arr[i].size = start, psize
        count.value = len(prof.placements)
        return 0

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        gpu, _mig, gi = self._enter("nvmlDeviceGetGpuInstanceById", device)
        assert gpu is not None
        if not gpu.mig_privileged:
            raise self._err(4)
        for mig in gpu.mig_slots.values():
            if mig.gi_id == gpuInstanceId:
                return ctypes.cast(self._migs.gpu_instance(gi, mig), self.pynvml.c_nvmlGpuInstance_t)
        raise self._err(6)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        self._enter("nvmlGpuInstanceGetInfo")
        addr = ctypes.cast(gpuInstance, ctypes.c_void_p).value
        found = self._migs.gpu_instance_at(addr)
        if found is None:
            raise self._err(2)
        gi, mig = found
        gpu = self.scenario.gpus[gi]
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        info = self.pynvml.c_nvmlGpuInstanceInfo_t()
        info.device = self._handle(gi)
        info.id, info.profileId = mig.gi_id, prof.profile_id
        info.placement.start, info.placement.size = mig.placement
        return info

