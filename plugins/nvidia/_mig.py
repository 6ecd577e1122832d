"""MIG: a GPU's mode, its live GPU/compute instances (partitions) and its instance profiles.

Reads only: creating and destroying instances is :mod:`._carve`, which uses these reads (the
profiles and placements, and the MIG device a new instance shows up as).  Slots are sparse (an
empty one answers NOT_FOUND), and a placement needs privileges a container may lack
(NO_PERMISSION: the placement stays unknown).
"""

from __future__ import annotations

import ctypes
from typing import Any

from ...errors import AccelError, DeviceLostError
from ...model import Binding, Partition, PartitionMode, PartitionProfile, PartitionScheme, Placement
from ._handles import NvmlPart, Read, text
from ._nvml import C
from ._static import Static

__all__ = ["MIB", "Mig", "partition_mode"]

MIB = 1024 * 1024
_MODES: dict[tuple[bool, bool | None], PartitionMode] = {}


def partition_mode(mig_on: bool, pending: bool | None) -> PartitionMode:
    """The (frozen, validated once) partition mode for MIG on/off and a pending change."""
    mode = _MODES.get((mig_on, pending))
    if mode is None:
        mode = PartitionMode(scheme=PartitionScheme.MIG if mig_on else PartitionScheme.NONE, pending=pending)
        _MODES[(mig_on, pending)] = mode
    return mode


class Mig(NvmlPart):
    """Reads the MIG state of one GPU at a time (its :class:`Static` and handle)."""

    def partitions(self, st: Static, h: Any, r: Read) -> tuple[list[Partition], bool | None]:
        """The live MIG instances and whether a mode change is pending (``None``: no MIG mode);
        :attr:`Read.mig_enabled` records the current mode, so nobody asks NVML twice."""
        mode = self._get(r, None, "nvmlDeviceGetMigMode", h)
        if mode is None:
            return [], None
        current, pending = int(mode[0]), int(mode[1])
        r.mig_enabled = current == C.DEVICE_MIG_ENABLE
        parts: list[Partition] = []
        if current == C.DEVICE_MIG_ENABLE:
            count = self._get(r, None, "nvmlDeviceGetMaxMigDeviceCount", h) or 0
            for slot in range(int(count)):
                try:
                    mh = self._nv.call("nvmlDeviceGetMigDeviceHandleByIndex", h, slot)
                except DeviceLostError:
                    raise
                except AccelError:
                    continue  # NOT_FOUND: an empty slot; slots are sparse, so go on
                part = self._partition(st, h, mh, int(count), r)
                if part is not None:
                    parts.append(part)
        return parts, pending != current

    def _partition(self, st: Static, parent: Any, mh: Any, slots: int, r: Read) -> Partition | None:
        uuid = self._get(r, None, "nvmlDeviceGetUUID", mh)
        if uuid is None:
            return None
        uuid = text(uuid)
        gi = self._get(r, None, "nvmlDeviceGetGpuInstanceId", mh)
        ci = self._get(r, None, "nvmlDeviceGetComputeInstanceId", mh)
        if uuid.startswith("MIG-GPU-") and "/" in uuid and (gi is None or ci is None):
            # Legacy R450/R460 form MIG-GPU-<gpu-uuid>/<gi>/<ci>: the ids are in the UUID.
            _, gi_text, ci_text = uuid.rsplit("/", 2)
            gi, ci = int(gi_text), int(ci_text)
        name = text(self._get(r, None, "nvmlDeviceGetName", mh) or "")
        attrs = self._get(r, None, "nvmlDeviceGetAttributes", mh)
        profile = name.rsplit("MIG ", 1)[1].strip() if "MIG " in name else None
        if profile is None and attrs is not None:
            profile = f"{int(attrs.gpuInstanceSliceCount)}g.{round(int(attrs.memorySizeMB) / 1024)}gb"
        placement = self._placement(parent, gi)
        memory = int(attrs.memorySizeMB) * MIB if attrs is not None else None
        return Partition(
            id=f"nvidia:{uuid}", parent_id=st.device_id, profile=profile or "unknown", placement=placement,
            uuid=uuid, gi_id=int(gi) if gi is not None else None, ci_id=int(ci) if ci is not None else None,
            memory_bytes=memory,
            compute_units=int(attrs.multiprocessorCount) if attrs is not None else None,
            # GPU-instance slices over the parent's slot count (7 compute slices on A100/H100).
            compute_ratio=min(1.0, int(attrs.gpuInstanceSliceCount) / slots) if attrs is not None and slots else None,
            binding=Binding(visible_env="CUDA_VISIBLE_DEVICES", visible_id=uuid, torch_device_type="cuda",
                            collective_backend="nccl", ray_resource="GPU"),
        )

    def _placement(self, parent: Any, gi: Any) -> Placement | None:
        """Where GPU instance ``gi`` sits on its parent (``None``: unknown or no privileges)."""
        if gi is None:
            return None
        try:
            ginst = self._nv.call("nvmlDeviceGetGpuInstanceById", parent, int(gi))
            info = self._nv.call("nvmlGpuInstanceGetInfo", ginst)
            return Placement(start=int(info.placement.start), size=int(info.placement.size))
        except DeviceLostError:
            raise
        except AccelError:
            return None  # needs privileges (NO_PERMISSION in containers)

    def profiles(self, st: Static, h: Any) -> tuple[PartitionProfile, ...]:
        """The GPU instance profiles of a MIG-capable GPU, read once and kept on ``st``."""
        if st.profiles_read or not st.mig_capable:
            return st.profiles
        out: list[PartitionProfile] = []
        for pidx in range(C.GPU_INSTANCE_PROFILE_COUNT):
            try:
                info = self._nv.call("nvmlDeviceGetGpuInstanceProfileInfo", h, pidx)
            except DeviceLostError:
                raise
            except AccelError:
                continue  # this GPU has no such profile
            name = text(info.name).removeprefix("MIG ").strip() or f"{int(info.sliceCount)}g"
            out.append(PartitionProfile(name=name, parent_id=st.device_id, profile_id=int(info.id),
                                        memory_bytes=int(info.memorySizeMB) * MIB,
                                        compute_units=int(info.multiprocessorCount),
                                        max_instances=int(info.instanceCount),
                                        placements=tuple(self._placements(h, int(info.id)))))
        st.profiles = tuple(out)
        st.profiles_read = True
        return st.profiles

    def _placements(self, h: Any, profile_id: int) -> list[Placement]:
        """Where an instance of ``profile_id`` may be placed (empty when NVML does not say)."""
        try:
            arr = self._nv.new_array("c_nvmlGpuInstancePlacement_t", 8)
            count = ctypes.c_uint(len(arr))
            self._nv.call("nvmlDeviceGetGpuInstancePossiblePlacements", h, profile_id, arr, ctypes.byref(count))
            return [Placement(start=int(arr[i].start), size=int(arr[i].size)) for i in range(count.value)]
        except AccelError:
            return []
