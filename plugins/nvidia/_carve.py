"""MIG actuation: create a GPU instance and its compute instance from a profile, and destroy them.

A partition is one GPU instance with one compute instance that takes all of it (what
``nvidia-smi mig -cgi <profile> -C`` makes): its MIG device then appears in the next inventory.

NVML's rules and return codes, as nvml.h documents them (NVIDIA/go-nvml ``gen/nvml/nvml.h`` at
2f9e261fe40a7a1c54783d66805e8920564763b4), mapped to the typed refusals:

========================================================  =====================================
``nvmlDeviceGetMigMode`` current mode disabled            :class:`PartitionModeOffError`
profile name not among the GPU's profiles                 :class:`PartitionProfileNotSupportedError`
create: ``NVML_ERROR_INSUFFICIENT_RESOURCES`` (23)        :class:`PartitionNoPlacementError`
create with placement: ``NVML_ERROR_INVALID_ARGUMENT``    :class:`PartitionNoPlacementError`
create: ``NVML_ERROR_NOT_SUPPORTED`` (3)                  :class:`PartitionModeOffError`
the compute instance fails after the GPU instance         undone; :class:`PartitionCreateFailedError`
destroy: ``NVML_ERROR_IN_USE`` (19)                       :class:`PartitionBusyError`
destroy: ``NVML_ERROR_NOT_FOUND`` (6) / no such id        :class:`PartitionNotFoundError`
========================================================  =====================================

``NVML_ERROR_NO_PERMISSION`` stays :class:`~accel.errors.PermissionDeniedError` (creating needs
a privileged user).  The pynvml calling convention: the create / destroy wrappers take the
handle and ids and return the new handle; ``nvmlDeviceCreateGpuInstanceWithPlacement`` forwards
``placement`` to C unchanged, so it gets ``byref(c_nvmlGpuInstancePlacement_t)``.

A process killed between the GPU instance and its compute instance leaves a bare GPU instance:
:mod:`._mig` lists it (``<device>/gi<N>``, operational offline) and :meth:`MigCarver.destroy`
destroys it, so ``accel partition clear`` leaves none behind.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ...errors import (
    AccelError,
    DeviceLostError,
    NotSupportedError,
    PartitionBusyError,
    PartitionCreateFailedError,
    PartitionError,
    PartitionModeOffError,
    PartitionNoPlacementError,
    PartitionNotFoundError,
    PartitionProfileNotSupportedError,
)
from ...model import Partition
from ._handles import NvmlPart, Read
from ._mig import Mig, is_bare
from ._nvml import C, nvml_code_of
from ._static import Static

__all__ = ["MigCarver"]

#: NVML return codes of the MIG calls (nvml.h, see the module docstring)
ERROR_IN_USE = 19
ERROR_INSUFFICIENT_RESOURCES = 23
#: NVML_COMPUTE_INSTANCE_PROFILE_<N>_SLICE by compute slices (nvml.h / pynvml constants)
CI_PROFILE_BY_SLICES = {1: 0x0, 2: 0x1, 3: 0x2, 4: 0x3, 7: 0x4, 8: 0x5, 6: 0x6}
#: NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
ENGINE_PROFILE_SHARED = 0x0


def _vendor(err: AccelError) -> str | None:
    code = nvml_code_of(err)
    return f"nvidia.nvml:{code}" if code is not None else None


class MigCarver(NvmlPart):
    """Creates and destroys MIG instances of one GPU at a time (its :class:`Static` and handle)."""

    def __init__(self, handles: Any, mig: Mig) -> None:
        super().__init__(handles)
        self._mig = mig

    def create(self, st: Static, h: Any, profile: str, placement_start: int | None) -> Partition:
        dev = st.device_id
        try:
            mode = self._nv.call("nvmlDeviceGetMigMode", h, device_id=dev)
        except NotSupportedError as exc:
            raise PartitionProfileNotSupportedError(
                f"{dev} is not MIG-capable: no profile can be created", device_id=dev, profile=profile,
                vendor_code=_vendor(exc)) from exc
        if int(mode[0]) != C.DEVICE_MIG_ENABLE:
            raise PartitionModeOffError(f"MIG mode is off on {dev}: enable it first (nvidia-smi -i <gpu> -mig 1)",
                                        device_id=dev, profile=profile)
        offered = self._mig.profiles(st, h)
        prof = next((p for p in offered if p.name == profile), None)
        if prof is None or prof.profile_id is None:
            raise PartitionProfileNotSupportedError.not_offered(dev, None, profile, (p.name for p in offered))
        gi = self._create_gi(st, h, prof.profile_id, profile, placement_start,
                             [(p.start, p.size) for p in prof.placements])
        gi_info = self._nv.call("nvmlGpuInstanceGetInfo", gi, device_id=dev)
        gi_id = int(gi_info.id)
        try:
            slices = int(profile.split("g.", 1)[0]) if profile.split("g.", 1)[0].isdigit() else 1
            ci_prof = self._nv.call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi,
                                    CI_PROFILE_BY_SLICES.get(slices, 0), ENGINE_PROFILE_SHARED, device_id=dev)
            ci = self._nv.call("nvmlGpuInstanceCreateComputeInstance", gi, int(ci_prof.id), device_id=dev)
            ci_id = int(self._nv.call("nvmlComputeInstanceGetInfo", ci, device_id=dev).id)
        except DeviceLostError:
            raise
        except AccelError as exc:
            raise self._undo(st, gi, gi_id, profile, exc) from exc
        for part in self._mig.partitions(st, h, Read())[0]:
            if part.gi_id == gi_id and part.ci_id == ci_id:
                return part
        raise PartitionCreateFailedError(
            f"{profile} on {dev}: GPU instance {gi_id} / compute instance {ci_id} were made but no MIG device "
            "shows them; it is left for `accel partition clear`", left_behind=(f"{dev}/gi{gi_id}",),
            device_id=dev, profile=profile)

    def _create_gi(self, st: Static, h: Any, profile_id: int, profile: str, start: int | None,
                   legal: list[tuple[int, int]]) -> Any:
        dev = st.device_id
        try:
            if start is None:
                return self._nv.call("nvmlDeviceCreateGpuInstance", h, profile_id, device_id=dev)
            size = next((n for s, n in legal if s == start), None)
            if legal and size is None:
                starts = ", ".join(str(s) for s, _ in legal)
                raise PartitionNoPlacementError(f"{profile} cannot start at slot {start}; its placements start at "
                                                f"{starts}", device_id=dev, profile=profile)
            placement = self._nv.new("c_nvmlGpuInstancePlacement_t")
            placement.start, placement.size = start, size or 0
            return self._nv.call("nvmlDeviceCreateGpuInstanceWithPlacement", h, profile_id, ctypes.byref(placement),
                                 device_id=dev)
        except (DeviceLostError, PartitionError):
            raise
        except AccelError as exc:
            code = nvml_code_of(exc)
            where = "anywhere" if start is None else f"at slot {start}"
            if code in (ERROR_INSUFFICIENT_RESOURCES, C.ERROR_INVALID_ARGUMENT):
                raise PartitionNoPlacementError(
                    f"no placement left for {profile} {where} on {dev} (NVML error {code})", device_id=dev,
                    profile=profile, vendor_code=_vendor(exc)) from exc
            if code == C.ERROR_NOT_SUPPORTED:
                raise PartitionModeOffError(f"{dev} refused a GPU instance: MIG mode is not enabled (NVML error 3)",
                                            device_id=dev, profile=profile, vendor_code=_vendor(exc)) from exc
            raise

    def _undo(self, st: Static, gi: Any, gi_id: int, profile: str, cause: AccelError) -> PartitionError:
        """Destroy the GPU instance a failed compute instance left; the error says what remains."""
        dev = st.device_id
        try:
            self._nv.call("nvmlGpuInstanceDestroy", gi, device_id=dev)
        except AccelError as exc:
            return PartitionCreateFailedError(
                f"creating {profile} on {dev} failed after GPU instance {gi_id} ({cause}) and destroying it failed "
                f"too ({exc}): GPU instance {gi_id} is left behind", left_behind=(f"{dev}/gi{gi_id}",),
                device_id=dev, profile=profile, vendor_code=_vendor(cause))
        return PartitionCreateFailedError(
            f"creating {profile} on {dev} failed at its compute instance ({cause}); GPU instance {gi_id} was "
            "destroyed again", device_id=dev, profile=profile, vendor_code=_vendor(cause))

    def destroy(self, st: Static, h: Any, part: Partition) -> None:
        """Destroy ``part``'s compute instance, then its GPU instance; a bare GPU instance (no
        compute instance, see :mod:`._mig`) is destroyed alone."""
        dev, pid = st.device_id, part.id
        bare = is_bare(part)
        if part.gi_id is None or (part.ci_id is None and not bare):
            raise PartitionNotFoundError(f"{pid}: its GPU / compute instance ids are unknown (no privileges?)",
                                         device_id=dev, partition_id=pid)
        try:
            gi = self._nv.call("nvmlDeviceGetGpuInstanceById", h, part.gi_id, device_id=dev)
            if not bare:
                ci = self._nv.call("nvmlGpuInstanceGetComputeInstanceById", gi, part.ci_id, device_id=dev)
                self._nv.call("nvmlComputeInstanceDestroy", ci, device_id=dev)
            self._nv.call("nvmlGpuInstanceDestroy", gi, device_id=dev)
        except DeviceLostError:
            raise
        except AccelError as exc:
            code = nvml_code_of(exc)
            if code == ERROR_IN_USE:
                raise PartitionBusyError(f"{pid} is in use (processes run on it): not destroyed (NVML error 19)",
                                         device_id=dev, partition_id=pid, profile=part.profile,
                                         vendor_code=_vendor(exc)) from exc
            if code == C.ERROR_NOT_FOUND:
                raise PartitionNotFoundError(f"no partition {pid!r} (NVML error 6)", device_id=dev,
                                             partition_id=pid, vendor_code=_vendor(exc)) from exc
            raise
