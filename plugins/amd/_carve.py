"""AMD partition actuation: compute / memory partition modes through amdsmi.

A profile is a mode pair named as the simulator names it, ``<compute>_<memory>`` in lower case
(``cpx_nps4``).  A mode applies to the whole device: creating one sets the device's compute
mode, then its memory mode, and makes all its partitions at once (the call returns the first);
it is only allowed from SPX + NPS1 (the whole device), and refused while processes run.
Destroying any partition of the mode sets the memory mode back to NPS1, then the compute mode
back to SPX, so the whole set goes.

Which pairs a device offers comes from the library, not from a table here: amdsmi 7.0.2's
``amdsmi_get_gpu_accelerator_partition_profile_config`` lists the compute modes with the memory
modes each accepts (``memory_caps``), ``amdsmi_get_gpu_memory_partition_config`` the product's
memory modes (``partition_caps``).  On MI300X the driver's table gives SPX with NPS1 only; DPX
with NPS1 (NPS2 is not an MI300X mode); QPX and CPX with NPS1 or NPS4 (ROCm/amdgpu
``drivers/gpu/drm/amd/amdgpu/aqua_vanjaram.c`` at 1c5625e6e140f925e7bd040f2c83c294e92806fb,
``aqua_vanjaram_get_xcp_res_info`` / ``__aqua_vanjaram_is_valid_mode``).  The compute mode is
set first because the driver validates it against the *current* memory mode (CPX is valid
under NPS1; SPX is not valid under NPS4), and undone in the other order.

The calls (amdsmi 7.0.2 ``amdsmi_interface.py``; C side ROCm/amdsmi ``rocm_smi/src/rocm_smi.cc``
at 0ceca28f4139dced5e9b5739a3f393780d7add48) and how their refusals map:

======================================================  =======================================
``amdsmi_set_gpu_compute_partition(h, AmdSmiComputePartitionType.X)``, then
``amdsmi_set_gpu_memory_partition(h, AmdSmiMemoryPartitionType.Y)``
profile not among the library's pairs                   :class:`PartitionProfileNotSupportedError`
the device is not in SPX + NPS1                         :class:`PartitionNoPlacementError`
processes on the device (checked first)                 :class:`PartitionProcessesRunningError`
``AMDSMI_STATUS_BUSY`` (30): KFD could not be locked     :class:`PartitionProcessesRunningError`
``AMDSMI_STATUS_AMDGPU_RESTART_ERR`` (54)                :class:`PartitionProcessesRunningError`
``AMDSMI_STATUS_SETTING_UNAVAILABLE`` (55), ``INVAL``,   :class:`PartitionProfileNotSupportedError`
``NOT_SUPPORTED``
``AMDSMI_STATUS_NO_PERM`` (10)                           :class:`~accel.errors.PermissionDeniedError`
the memory mode fails after the compute mode             compute undone; :class:`PartitionCreateFailedError`
destroy: processes run / BUSY / RESTART_ERR             :class:`PartitionBusyError`
======================================================  =======================================

After a mode change the logical GPUs re-enumerate (an MI300X in CPX shows 8 processors) and
the old processor handles are gone: every step here fetches the handles again, and the backend
re-opens its layers afterwards (:meth:`XcpCarver.create` / :meth:`XcpCarver.destroy` call the
``reenumerate`` callback) so that no stale handle is used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accel.errors import (
    AccelError,
    DeviceError,
    NotSupportedError,
    PartitionBusyError,
    PartitionCreateFailedError,
    PartitionError,
    PartitionNoPlacementError,
    PartitionNotFoundError,
    PartitionProcessesRunningError,
    PartitionProfileNotSupportedError,
    PermissionDeniedError,
)
from accel.model import Device, Partition, PartitionProfile, Placement, normalize_bus_id

from ._amdsmi import AmdSmiReader

__all__ = ["ACTUATION_CALLS", "Mode", "XcpCarver"]

#: The amdsmi calls actuation needs; a library without one of them cannot carve.
ACTUATION_CALLS = (
    "amdsmi_set_gpu_compute_partition",
    "amdsmi_set_gpu_memory_partition",
    "amdsmi_get_gpu_compute_partition",
    "amdsmi_get_gpu_memory_partition",
    "amdsmi_get_gpu_accelerator_partition_profile_config",
    "amdsmi_get_gpu_memory_partition_config",
)

#: amdsmi status codes (amdsmi 7.0.2 ``amdsmi_wrapper.py``)
INVAL = 1
BUSY = 30
AMDGPU_RESTART_ERR = 54
SETTING_UNAVAILABLE = 55
#: the whole device: not a partition
WHOLE = ("SPX", "NPS1")


@dataclass(frozen=True)
class Mode:
    """One legal compute x memory pair: ``count`` partitions of the device."""

    compute: str
    memory: str
    count: int

    @property
    def name(self) -> str:
        return f"{self.compute}_{self.memory}".lower()


def _vendor(exc: AccelError) -> str | None:
    """The ``amd.smi:<status>`` an error carries (``DriverError`` and kin), else ``None``."""
    code = getattr(exc, "vendor_code", None)
    return code if isinstance(code, str) else None


def _status(exc: AccelError) -> int | None:
    code = _vendor(exc) or ""
    tail = code.removeprefix("amd.smi:")
    return int(tail) if code.startswith("amd.smi:") and tail.isdigit() else None


def _names(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return [str(getattr(v, "name", v)).upper().removeprefix("AMDSMI_MEMORY_PARTITION_") for v in items]


class XcpCarver:
    """Sets and resets the compute / memory partition modes of AMD devices (module docstring).

    ``reader`` is the backend's open amdsmi session; ``reenumerate`` re-opens the backend's
    layers after a mode change (the handles of every layer are stale then).
    """

    def __init__(self, reader: AmdSmiReader, reenumerate: Callable[[], AmdSmiReader]) -> None:
        self._r = reader
        self._reenumerate = reenumerate
        self._modes: dict[str, tuple[Mode, ...]] = {}

    # -- what the library can do ------------------------------------------------------------
    def missing(self) -> str | None:
        """Why this amdsmi cannot carve (a call it lacks), or ``None``."""
        absent = [fn for fn in ACTUATION_CALLS if not self._r.has(fn)]
        return f"this amdsmi lacks {', '.join(absent)}" if absent else None

    def modes(self, bus_id: str, handle: Any) -> tuple[Mode, ...]:
        """The legal pairs of the device at ``bus_id`` (SPX + NPS1 left out), read once."""
        cached = self._modes.get(bus_id)
        if cached is not None:
            return cached
        modes: tuple[Mode, ...] = ()
        if self.missing() is None:
            try:
                config = self._r.call("amdsmi_get_gpu_accelerator_partition_profile_config", handle)
                memory = self._r.call("amdsmi_get_gpu_memory_partition_config", handle)
            except NotSupportedError:
                config, memory = {}, {}
            modes = _pairs(config, memory)
        self._modes[bus_id] = modes
        return modes

    def catalog(self, dev: Device, handle: Any) -> tuple[PartitionProfile, ...]:
        """Every profile ``dev`` can be cut into, with its memory and compute share."""
        if dev.pci is None:
            return ()
        total, units = dev.memory_total_bytes, dev.compute.units
        return tuple(
            PartitionProfile(
                name=m.name,
                parent_id=dev.id,
                memory_bytes=total // m.count if total else None,
                compute_units=units // m.count if units else None,
                compute_ratio=1.0 / m.count,
                max_instances=m.count,
                placements=tuple(Placement(start=k, size=1) for k in range(m.count)),
            )
            for m in self.modes(dev.pci.bus_id, handle)
        )

    # -- plumbing ---------------------------------------------------------------------------
    def _handles(self, dev: Device) -> list[Any]:
        """The device's processor handles as of now (fetched again: a mode change re-enumerates)."""
        bus = dev.pci.bus_id if dev.pci else None
        out = []
        for h in self._r.handles():
            try:
                bdf = self._r.call("amdsmi_get_gpu_device_bdf", h)
            except AccelError:
                continue
            if isinstance(bdf, str) and bus is not None and normalize_bus_id(bdf) == bus:
                out.append(h)
        if not out:
            raise DeviceError(f"amdsmi shows no processor of {dev.id}", device_id=dev.id)
        return out

    def _current(self, h: Any) -> tuple[str, str]:
        compute = str(self._r.call("amdsmi_get_gpu_compute_partition", h)).strip().upper()
        memory = str(self._r.call("amdsmi_get_gpu_memory_partition", h)).strip().upper()
        return compute, memory

    def _pids(self, handles: Sequence[Any]) -> list[int]:
        pids: list[int] = []
        for h in handles:
            try:
                procs = self._r.call("amdsmi_get_gpu_process_list", h)
            except AccelError:
                continue  # unreadable: the driver still refuses a busy device (BUSY)
            for p in procs if isinstance(procs, list | tuple) else ():
                pid = p.get("pid") if isinstance(p, dict) else None
                if isinstance(pid, int):
                    pids.append(pid)
        return pids

    def _set(self, dev: Device, kind: str, value: str) -> None:
        """``amdsmi_set_gpu_<kind>_partition`` on the device's first processor (fetched now)."""
        enum = "AmdSmiComputePartitionType" if kind == "compute" else "AmdSmiMemoryPartitionType"
        member = self._r.member(enum, value)
        if member is None:
            raise PartitionProfileNotSupportedError(f"this amdsmi has no {kind} mode {value}", device_id=dev.id)
        self._r.call(f"amdsmi_set_gpu_{kind}_partition", self._handles(dev)[0], member)

    # -- create -----------------------------------------------------------------------------
    def create(self, dev: Device, profile: str) -> Mode:
        """Put ``dev`` in the mode ``profile`` names (compute first, then memory)."""
        why = self.missing()
        if why is not None:
            raise NotSupportedError(f"cannot partition {dev.id}: {why}", device_id=dev.id)
        handles = self._handles(dev)
        offered = self.modes(dev.pci.bus_id if dev.pci else dev.id, handles[0])
        mode = next((m for m in offered if m.name == profile), None)
        if mode is None:
            raise PartitionProfileNotSupportedError.not_offered(dev.id, dev.model, profile, (m.name for m in offered))
        current = self._current(handles[0])
        if current != WHOLE:
            now = "_".join(current).lower()
            what = "all its partitions already exist" if now == profile else "destroy its partitions first"
            raise PartitionNoPlacementError(
                f"{dev.id} is in {now} ({what}); a mode applies to the whole device", device_id=dev.id, profile=profile
            )
        pids = self._pids(handles)
        if pids:
            raise PartitionProcessesRunningError(
                f"processes run on {dev.id} (pid {', '.join(map(str, sorted(set(pids))[:8]))}): a compute / memory "
                "mode change needs the device idle",
                device_id=dev.id,
                profile=profile,
            )
        try:
            self._set(dev, "compute", mode.compute)
        except AccelError as exc:
            raise self._refusal(exc, dev, profile, "compute", mode.compute) from exc
        self._r = self._reenumerate()  # the logical GPUs changed: every handle is stale
        if mode.memory != WHOLE[1]:
            try:
                self._set(dev, "memory", mode.memory)
            except AccelError as exc:
                raise self._undo(dev, mode, exc) from exc
            self._r = self._reenumerate()
        return mode

    def _refusal(self, exc: AccelError, dev: Device, profile: str, kind: str, value: str) -> AccelError:
        """The typed refusal for a failed setter call (nothing was changed by it)."""
        code = _status(exc)
        where = f"{dev.id} refused {kind} mode {value}"
        if isinstance(exc, PermissionDeniedError):
            return PermissionDeniedError(f"{where}: changing a partition mode needs root (amdsmi status 10)")
        if code in (BUSY, AMDGPU_RESTART_ERR):
            return PartitionProcessesRunningError(
                f"{where}: processes hold the device (amdsmi status {code})",
                device_id=dev.id,
                profile=profile,
                vendor_code=_vendor(exc),
            )
        if isinstance(exc, NotSupportedError) or code in (SETTING_UNAVAILABLE, INVAL):
            return PartitionProfileNotSupportedError(
                f"{where}: the driver does not offer it on this product now ({exc})",
                device_id=dev.id,
                profile=profile,
                vendor_code=_vendor(exc),
            )
        return exc

    def _undo(self, dev: Device, mode: Mode, cause: AccelError) -> PartitionError | AccelError:
        """The memory mode failed after the compute mode: set the compute mode back to SPX."""
        refusal = self._refusal(cause, dev, mode.name, "memory", mode.memory)
        try:
            self._set(dev, "compute", WHOLE[0])
            self._r = self._reenumerate()
        except AccelError as exc:
            left = tuple(f"{dev.id}/{mode.compute.lower()}{k}" for k in range(mode.count))
            return PartitionCreateFailedError(
                f"creating {mode.name} on {dev.id} failed at its memory mode ({refusal}) and setting the compute "
                f"mode back to SPX failed too ({exc}): {dev.id} is left in {mode.compute} + NPS1 with its "
                f"{mode.count} partitions (destroy one, or `accel partition clear`)",
                left_behind=left,
                device_id=dev.id,
                profile=mode.name,
                vendor_code=_vendor(cause),
            )
        return PartitionCreateFailedError(
            f"creating {mode.name} on {dev.id} failed at its memory mode ({refusal}); the compute mode was set "
            "back to SPX, nothing is left",
            device_id=dev.id,
            profile=mode.name,
            vendor_code=_vendor(cause),
        )

    # -- destroy ----------------------------------------------------------------------------
    def destroy(self, dev: Device, part: Partition) -> None:
        """Return ``dev`` to SPX + NPS1 (memory first, then compute): all its partitions go."""
        why = self.missing()
        if why is not None:
            raise NotSupportedError(f"cannot destroy {part.id}: {why}", device_id=dev.id)
        handles = self._handles(dev)
        compute, memory = self._current(handles[0])
        if (compute, memory) == WHOLE:
            raise PartitionNotFoundError(
                f"no partition {part.id!r}: {dev.id} is whole (SPX + NPS1)", device_id=dev.id, partition_id=part.id
            )
        pids = self._pids(handles)
        if pids:
            raise PartitionBusyError(
                f"{part.id} is in use (processes run on {dev.id}: pid {', '.join(map(str, sorted(set(pids))[:8]))}): "
                "not destroyed",
                device_id=dev.id,
                partition_id=part.id,
                profile=part.profile,
            )
        changed = False
        for kind, value, now in (("memory", WHOLE[1], memory), ("compute", WHOLE[0], compute)):
            if now == value:
                continue
            try:
                self._set(dev, kind, value)
            except AccelError as exc:
                raise self._destroy_refusal(exc, dev, part, kind, value, changed) from exc
            changed = True
            self._r = self._reenumerate()  # the logical GPUs changed: every handle is stale

    def _destroy_refusal(
        self, exc: AccelError, dev: Device, part: Partition, kind: str, value: str, changed: bool
    ) -> AccelError:
        code = _status(exc)
        left = f"; {dev.id} is left in its compute mode with NPS1, its partitions still exist" if changed else ""
        where = f"{dev.id} refused {kind} mode {value}{left}"
        if isinstance(exc, PermissionDeniedError):
            return PermissionDeniedError(f"{where}: changing a partition mode needs root (amdsmi status 10)")
        if code in (BUSY, AMDGPU_RESTART_ERR):
            return PartitionBusyError(
                f"{part.id} is in use: {where} (amdsmi status {code}); not destroyed",
                device_id=dev.id,
                partition_id=part.id,
                profile=part.profile,
                vendor_code=_vendor(exc),
            )
        return exc


def _pairs(config: Any, memory: Any) -> tuple[Mode, ...]:
    """Legal (compute, memory) pairs from the two config queries, SPX + NPS1 left out."""
    caps = set(_names(memory.get("partition_caps", []))) if isinstance(memory, dict) else set()
    out: list[Mode] = []
    for prof in config.get("profiles", []) if isinstance(config, dict) else []:
        if not isinstance(prof, dict):
            continue
        compute = _names(prof.get("profile_type", ""))[0]
        count = prof.get("num_partitions")
        if compute in ("", "N/A", "INVALID") or not isinstance(count, int) or count < 1:
            continue
        for nps in _names(prof.get("memory_caps", [])):
            if nps in caps and (compute, nps) != WHOLE:
                out.append(Mode(compute, nps, count))
    return tuple(out)
