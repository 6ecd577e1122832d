"""The fake's MIG: the driver's MIG objects (:class:`MigState`) and the MIG surface of pynvml.

The scenario's :class:`GpuSpec` says which MIG mode, profiles and instances (``mig_slots``) a GPU
has; :class:`MigState` holds what the driver hands out for them: a handle buffer per MIG device
slot and one per GPU or compute instance looked up, and the GPU instances that have no compute
instance yet (``bare``: no MIG device, so no slot).

Creating and destroying instances enforces the driver's rules, with the return codes nvml.h
documents for each call (NVIDIA/go-nvml ``gen/nvml/nvml.h`` at
2f9e261fe40a7a1c54783d66805e8920564763b4): creating a GPU instance needs MIG mode on (else
NOT_SUPPORTED) and privileges (NO_PERMISSION); a profile id the GPU lacks or a placement its
profile does not list is INVALID_ARGUMENT; a placement that overlaps a live instance's memory
slices, more instances of a profile than it allows, or more than 7 compute slices in all is
INSUFFICIENT_RESOURCES.  Destroying a compute instance with processes on it, or a GPU instance
that still has a compute instance or processes, is IN_USE.  A stale instance handle is
INVALID_ARGUMENT.  Without a placement the fake takes the free one with the highest start (the
real driver's choice is its own).  ``GpuSpec.errors`` keyed by a function name makes that call
fail with the code given (a half-way failure: ``nvmlGpuInstanceCreateComputeInstance`` -> 23).
``nvmlDeviceGetGpuInstances`` lists the GPU instances of a profile, the bare ones included (what
a process killed between the two create calls leaves: no MIG device shows it).
"""

from __future__ import annotations

import ctypes
from typing import Any

from ._fake_core import FakeCore
from ._profiles import MigSlot, Scenario

__all__ = ["Killed", "MigCalls", "MigState"]


class Killed(BaseException):
    """The calling process died (SIGKILL) as the call named in :attr:`MigState.kill_at` began:
    nothing after it runs, no undo; what the driver made before stays."""


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
        self._ci_addr: dict[int, tuple[int, MigSlot]] = {}
        #: GPU instances without a compute instance: (GPU index, GI id) -> the instance (ci_id -1)
        self.bare: dict[tuple[int, int], MigSlot] = {}
        self.made = 0
        #: A GPU-instance call (``nvmlGpuInstanceCreateComputeInstance``...) at which the caller
        #: is killed once (:class:`Killed`), as by SIGKILL between two create / destroy steps.
        self.kill_at: str | None = None

    def _add_slot(self, index: int, slot: int) -> None:
        buf = (ctypes.c_int * 1)(1000 * (index + 1) + slot)
        self._slots[(index, slot)] = buf
        self._handles[ctypes.addressof(buf)] = (index, slot)

    def add_slot(self, index: int, slot: int) -> None:
        """A MIG device now lives in ``slot`` (its compute instance was created)."""
        self._add_slot(index, slot)

    def drop_slot(self, index: int, slot: int) -> None:
        """The MIG device in ``slot`` is gone: a handle to it is stale from now on."""
        buf = self._slots.pop((index, slot))
        self._handles.pop(ctypes.addressof(buf), None)

    def compute_instance(self, index: int, mig: MigSlot) -> Any:
        """A new compute-instance buffer for ``mig`` of GPU ``index``."""
        buf = (ctypes.c_int * 1)(mig.ci_id)
        self._gi_bufs.append(buf)
        self._ci_addr[ctypes.addressof(buf)] = (index, mig)
        return buf

    def compute_instance_at(self, addr: int | None) -> tuple[int, MigSlot] | None:
        return self._ci_addr.get(addr) if addr is not None else None

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
        for mig in self._gis(gi):
            if mig.gi_id == gpuInstanceId:
                return ctypes.cast(self._migs.gpu_instance(gi, mig), self.pynvml.c_nvmlGpuInstance_t)
        raise self._err(6)

    def nvmlDeviceGetGpuInstances(self, device: Any, profileId: int, gpuInstancesRef: Any, countRef: Any) -> int:
        """Every live GPU instance of ``profileId``, with or without a compute instance.

        Both pointers are forwarded to C unchanged: an array of ``c_nvmlGpuInstance_t`` (a
        handle each) and ``byref(c_uint())``, which gets the count (output only).  nvml.h: the
        buffer must hold the profile's ``instanceCount``; MIG mode off is NOT_SUPPORTED, no
        privileges NO_PERMISSION, an unknown profile or a NULL pointer INVALID_ARGUMENT.
        """
        fn = "nvmlDeviceGetGpuInstances"
        _gpu, index, prof = self._mig_profile(fn, device, profileId)
        count = self._out_uint(fn, 4, countRef)
        addr, size = self._pointee(fn, 3, gpuInstancesRef)
        item = self.pynvml.c_nvmlGpuInstance_t
        if addr < 0 or size < ctypes.sizeof(item) * prof.max_instances:
            raise self._err(2)  # the driver would write past the buffer (or through a non-pointer)
        found: dict[int, MigSlot] = {}
        for mig in self._gis(index):
            if mig.profile == prof.name:
                found.setdefault(mig.gi_id, mig)  # a GPU instance with several compute instances: once
        arr = (item * prof.max_instances).from_address(addr)
        for i, gi_id in enumerate(sorted(found)):
            arr[i] = ctypes.cast(self._migs.gpu_instance(index, found[gi_id]), item)
        count.value = len(found)
        return 0

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        self._enter("nvmlGpuInstanceGetInfo")
        addr = ctypes.cast(gpuInstance, ctypes.c_void_p).value
        found = self._live_gi(addr)
        gi, mig = found
        gpu = self.scenario.gpus[gi]
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        info = self.pynvml.c_nvmlGpuInstanceInfo_t()
        info.device = self._handle(gi)
        info.id, info.profileId = mig.gi_id, prof.profile_id
        info.placement.start, info.placement.size = mig.placement
        return info


    # -- creating and destroying instances (see the module docstring for the rules) --------------

    def _live_gi(self, addr: int | None) -> tuple[int, MigSlot]:
        """The GPU index and GPU instance a handle names, if that instance still exists."""
        found = self._migs.gpu_instance_at(addr)
        if found is None:
            raise self._err(2)
        index, mig = found
        gpu = self.scenario.gpus[index]
        live = [m for m in gpu.mig_slots.values() if m.gi_id == mig.gi_id]
        bare = self._migs.bare.get((index, mig.gi_id))
        if live:
            return index, live[0]
        if bare is not None:
            return index, bare
        raise self._err(2)  # destroyed: the handle is stale

    def _gis(self, index: int) -> list[MigSlot]:
        gpu = self.scenario.gpus[index]
        return [*gpu.mig_slots.values(), *(m for (i, _g), m in self._migs.bare.items() if i == index)]

    def _mig_profile(self, fn: str, device: Any, profileId: int) -> tuple[Any, int, Any]:
        """(gpu, index, profile) for a MIG call on ``device``: MIG mode off NOT_SUPPORTED (3), no
        privileges NO_PERMISSION (4), a profile the GPU does not have INVALID_ARGUMENT (2)."""
        gpu, _mig, index = self._enter(fn, device)
        assert gpu is not None
        if gpu.mig_mode is None or gpu.mig_mode[0] != 1:
            raise self._err(3)
        if not gpu.mig_privileged:
            raise self._err(4)
        prof = next((p for p in gpu.mig_profiles if p.profile_id == profileId), None)
        if prof is None:
            raise self._err(2)
        return gpu, index, prof

    def _create_gi(self, fn: str, device: Any, profileId: int, want: tuple[int, int] | None) -> Any:
        gpu, index, prof = self._mig_profile(fn, device, profileId)
        if want is not None and want not in prof.placements:
            raise self._err(2)
        live = self._gis(index)
        if sum(1 for m in live if m.profile == prof.name) >= prof.max_instances:
            raise self._err(23)
        slices = {p.name: p.slices for p in gpu.mig_profiles}
        if sum(slices.get(m.profile, 1) for m in live) + prof.slices > 7:
            raise self._err(23)

        def free(place: tuple[int, int]) -> bool:
            start, size = place
            return all(start + size <= s or s + n <= start for s, n in (m.placement for m in live))

        options = [pl for pl in prof.placements if (want is None or pl == want) and free(pl)]
        if not options:
            raise self._err(23)
        placement = max(options)
        ids = {m.gi_id for m in live}
        gi_id = next(i for i in range(1, 64) if i not in ids)
        self._migs.made += 1
        uuid = f"MIG-fa4e0000-{index:04x}-5000-8000-{gi_id:04x}{self._migs.made:08x}"
        mig = MigSlot(prof.name, gi_id=gi_id, ci_id=-1, placement=placement, uuid=uuid)
        self._migs.bare[(index, gi_id)] = mig
        return ctypes.cast(self._migs.gpu_instance(index, mig), self.pynvml.c_nvmlGpuInstance_t)

    def nvmlDeviceCreateGpuInstance(self, device: Any, profileId: int) -> Any:
        return self._create_gi("nvmlDeviceCreateGpuInstance", device, profileId, None)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device: Any, profileId: int, placement: Any) -> Any:
        fn = "nvmlDeviceCreateGpuInstanceWithPlacement"
        # forwarded to C unchanged: a pointer to a placement struct (a struct by value is garbage)
        want = self._counted(fn, lambda: self._out_struct(fn, 3, placement,
                                                          struct=self.pynvml.c_nvmlGpuInstancePlacement_t))
        return self._create_gi(fn, device, profileId, (int(want.start), int(want.size)))

    def _gi_call(self, fn: str, gpuInstance: Any) -> tuple[int, MigSlot]:
        self._enter(fn)
        if self._migs.kill_at == fn:
            self._migs.kill_at = None
            raise Killed(fn)
        index, mig = self._live_gi(ctypes.cast(gpuInstance, ctypes.c_void_p).value)
        gpu = self.scenario.gpus[index]
        if gpu.lost:
            raise self._err(15)
        if fn in gpu.errors:
            raise self._err(gpu.errors[fn])
        return index, mig

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, device: Any, profile: int, engProfile: int,
                                                     version: int = 2) -> Any:
        """``device`` is the GPU instance (the binding's parameter name); only the shared engine
        profile exists, and a compute profile larger than the GPU instance is NOT_SUPPORTED."""
        fn = "nvmlGpuInstanceGetComputeInstanceProfileInfo"
        if version not in (1, 2):
            self.calls[fn] += 1
            raise self.pynvml.NVMLError_FunctionNotFound()
        index, mig = self._gi_call(fn, device)
        gpu = self.scenario.gpus[index]
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        slices = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}.get(profile)
        if engProfile != 0 or slices is None or slices > prof.slices:
            raise self._err(3)
        info = (self.pynvml.c_nvmlComputeInstanceProfileInfo_v2_t() if version == 2
                else self.pynvml.c_nvmlComputeInstanceProfileInfo_t())
        info.id, info.sliceCount, info.instanceCount = profile, slices, prof.slices // slices
        info.multiprocessorCount = prof.sm_count * slices // prof.slices
        if version == 2:
            info.name = f"MIG {slices}c.{mig.profile}".encode()
        return info

    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance: Any, profileId: int) -> Any:
        index, mig = self._gi_call("nvmlGpuInstanceCreateComputeInstance", gpuInstance)
        gpu = self.scenario.gpus[index]
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        slices = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}.get(profileId)
        if slices is None or slices > prof.slices:
            raise self._err(3)
        if self._migs.bare.get((index, mig.gi_id)) is None:
            raise self._err(23)  # the fake holds one compute instance per GPU instance
        free = [s for s in range(gpu.mig_max) if s not in gpu.mig_slots]
        if not free:
            raise self._err(23)
        del self._migs.bare[(index, mig.gi_id)]
        made = MigSlot(mig.profile, gi_id=mig.gi_id, ci_id=0, placement=mig.placement, uuid=mig.uuid)
        gpu.mig_slots[free[0]] = made
        self._migs.add_slot(index, free[0])
        return ctypes.cast(self._migs.compute_instance(index, made), self.pynvml.c_nvmlComputeInstance_t)

    def nvmlGpuInstanceGetComputeInstanceById(self, gpuInstance: Any, computeInstanceId: int) -> Any:
        index, mig = self._gi_call("nvmlGpuInstanceGetComputeInstanceById", gpuInstance)
        gpu = self.scenario.gpus[index]
        for made in gpu.mig_slots.values():
            if made.gi_id == mig.gi_id and made.ci_id == computeInstanceId:
                return ctypes.cast(self._migs.compute_instance(index, made), self.pynvml.c_nvmlComputeInstance_t)
        raise self._err(6)

    def _live_ci(self, fn: str, computeInstance: Any) -> tuple[int, int, MigSlot]:
        self._enter(fn)
        found = self._migs.compute_instance_at(ctypes.cast(computeInstance, ctypes.c_void_p).value)
        if found is None:
            raise self._err(2)
        index, mig = found
        gpu = self.scenario.gpus[index]
        slot = next((k for k, m in gpu.mig_slots.items() if m is mig), None)
        if slot is None:
            raise self._err(2)  # destroyed: the handle is stale
        if fn in gpu.errors:
            raise self._err(gpu.errors[fn])
        return index, slot, mig

    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> Any:
        index, _slot, mig = self._live_ci("nvmlComputeInstanceGetInfo", computeInstance)
        info = self.pynvml.c_nvmlComputeInstanceInfo_t()
        info.device = self._handle(index)
        info.id = mig.ci_id
        gpu = self.scenario.gpus[index]
        prof = next(p for p in gpu.mig_profiles if p.name == mig.profile)
        info.profileId = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}[prof.slices]
        info.placement.start, info.placement.size = 0, prof.slices
        return info

    def nvmlComputeInstanceDestroy(self, computeInstance: Any) -> int:
        index, slot, mig = self._live_ci("nvmlComputeInstanceDestroy", computeInstance)
        gpu = self.scenario.gpus[index]
        if any(p.gi_id == mig.gi_id and p.ci_id == mig.ci_id for p in gpu.processes):
            raise self._err(19)
        del gpu.mig_slots[slot]
        self._migs.drop_slot(index, slot)
        self._migs.bare[(index, mig.gi_id)] = MigSlot(mig.profile, gi_id=mig.gi_id, ci_id=-1,
                                                      placement=mig.placement, uuid=mig.uuid)
        return 0

    def nvmlGpuInstanceDestroy(self, gpuInstance: Any) -> int:
        index, mig = self._gi_call("nvmlGpuInstanceDestroy", gpuInstance)
        gpu = self.scenario.gpus[index]
        if self._migs.bare.get((index, mig.gi_id)) is None:
            raise self._err(19)  # a compute instance is still active on it
        if any(p.gi_id == mig.gi_id for p in gpu.processes):
            raise self._err(19)
        del self._migs.bare[(index, mig.gi_id)]
        return 0
