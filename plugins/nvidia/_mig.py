"""MIG: a GPU's mode, its live GPU/compute instances (partitions) and its instance profiles.

Reads only: creating and destroying instances is :mod:`._carve`, which uses these reads (the
profiles and placements, and the MIG device a new instance shows up as).  Slots are sparse (an
empty one answers NOT_FOUND), and a placement needs privileges a container may lack
(NO_PERMISSION: the placement stays unknown).

A GPU instance without a compute instance (a create killed between its two NVML calls) has no
MIG device, so the MIG device slots miss it.  :meth:`Mig.partitions` therefore also lists the
GPU instances of each profile (``nvmlDeviceGetGpuInstances``; nvml.h, NVIDIA/go-nvml
``gen/nvml/nvml.h`` at 2f9e261fe40a7a1c54783d66805e8920564763b4: the caller's buffer holds the
profile's ``instanceCount`` handles, ``count`` returns how many were written; it needs MIG mode on
and privileges) and reports each one no MIG device shows as a *bare* partition: id
``<device id>/gi<N>`` (what :class:`~accel.errors.PartitionCreateFailedError` names in
``left_behind``), no UUID, ``ci_id`` ``None``, operational ``offline`` with a
``NoComputeInstance`` condition (so no scheduler places work on it), its profile's memory and
placement.  Destroying it destroys the GPU instance (:mod:`._carve`).  Without privileges the
GPU instances cannot be listed (NO_PERMISSION), as placements cannot: none is reported.  The
same listing gives the MIG devices' placements (one call per profile, not two per device); when it
is refused, each placement is asked for by GPU instance id, as before.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ...errors import AccelError, DeviceLostError
from ...model import (
    Action,
    Binding,
    ConditionScope,
    Health,
    HealthCondition,
    Operational,
    Partition,
    PartitionMode,
    PartitionProfile,
    PartitionScheme,
    Placement,
    Severity,
    Subsystem,
)
from ._handles import NvmlPart, Read, now, text
from ._nvml import C, nvml_code_of
from ._static import Static

__all__ = ["BARE_REASON", "MIB", "Mig", "is_bare", "partition_mode"]

MIB = 1024 * 1024
_MODES: dict[tuple[bool, bool | None], PartitionMode] = {}


#: The condition reason of a GPU instance without a compute instance (a bare partition).
BARE_REASON = "NoComputeInstance"


def is_bare(part: Partition) -> bool:
    """Whether ``part`` is a GPU instance without a compute instance (see the module docstring)."""
    return part.ci_id is None and any(c.reason == BARE_REASON for c in part.health.conditions)


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
            gis = self._gpu_instances(st, h)
            count = self._get(r, None, "nvmlDeviceGetMaxMigDeviceCount", h) or 0
            for slot in range(int(count)):
                try:
                    mh = self._nv.call("nvmlDeviceGetMigDeviceHandleByIndex", h, slot)
                except DeviceLostError:
                    raise
                except AccelError:
                    continue  # NOT_FOUND: an empty slot; slots are sparse, so go on
                part = self._partition(st, h, mh, int(count), r, gis)
                if part is not None:
                    parts.append(part)
            parts += self._bare(st, parts, gis)
        return parts, pending != current

    def _gpu_instances(self, st: Static, h: Any) -> dict[int, tuple[PartitionProfile, Placement | None]] | None:
        """Every GPU instance by id: its profile and placement (``None``: they cannot be listed)."""
        out: dict[int, tuple[PartitionProfile, Placement | None]] = {}
        for prof in self.profiles(st, h):
            if prof.profile_id is None or not prof.max_instances:
                continue
            arr = self._nv.new_array("c_nvmlGpuInstance_t", prof.max_instances)
            count = ctypes.c_uint(0)
            try:
                self._nv.call("nvmlDeviceGetGpuInstances", h, prof.profile_id, arr, ctypes.byref(count))
                infos = [self._nv.call("nvmlGpuInstanceGetInfo", arr[i]) for i in range(count.value)]
            except DeviceLostError:
                raise
            except AccelError as exc:
                if nvml_code_of(exc) in (C.ERROR_NO_PERMISSION, C.ERROR_NOT_SUPPORTED):
                    return None  # every profile answers the same: no privileges, or MIG mode went off
                continue
            for info in infos:
                size = int(info.placement.size)
                out[int(info.id)] = (prof, Placement(start=int(info.placement.start), size=size) if size else None)
        return out

    def _bare(self, st: Static, parts: list[Partition],
              gis: dict[int, tuple[PartitionProfile, Placement | None]] | None) -> list[Partition]:
        """The GPU instances no MIG device shows: no compute instance (see the module docstring)."""
        seen = {p.gi_id for p in parts}
        if gis is None or None in seen:
            return []  # not listed, or a MIG device whose GPU instance is unknown: which is bare cannot be told
        return [self._bare_partition(st, prof, gi_id, placement)
                for gi_id, (prof, placement) in sorted(gis.items()) if gi_id not in seen]

    def _bare_partition(self, st: Static, prof: PartitionProfile, gi_id: int,
                        placement: Placement | None) -> Partition:
        pid = f"{st.device_id}/gi{gi_id}"
        cond = HealthCondition(
            subsystem=Subsystem.PARTITION, reason=BARE_REASON, severity=Severity.ERROR,
            scope=ConditionScope.PARTITION, action=Action.INVESTIGATE,
            message=f"GPU instance {gi_id} ({prof.name}) has no compute instance (a create stopped half-way): "
                    f"nothing can run on it; `accel partition destroy {pid}` or `accel partition clear` "
                    "destroys it")
        return Partition(
            id=pid, parent_id=st.device_id, profile=prof.name, gi_id=gi_id, ci_id=None, placement=placement,
            memory_bytes=prof.memory_bytes, compute_units=prof.compute_units,
            health=Health(operational=Operational.OFFLINE, conditions=(cond,), checked_at=now()))

    def _partition(self, st: Static, parent: Any, mh: Any, slots: int, r: Read,
                   gis: dict[int, tuple[PartitionProfile, Placement | None]] | None) -> Partition | None:
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
        listed = gis.get(int(gi)) if gis is not None and gi is not None else None
        placement = listed[1] if listed is not None else self._placement(parent, gi)
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
