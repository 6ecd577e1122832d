"""The simulator's partition actuation: MIG GPU instances, AMD compute / memory modes, Ascend vNPUs.

The rules are the vendors' (see :mod:`._catalog`):

* MIG: MIG mode must be on (the profile's ``partition_mode``); a GPU instance takes one of its
  profile's placements, which must not overlap a live instance's memory slices, at most
  ``max_instances`` of a profile and 7 compute slices in all.  Without a requested start the
  simulator takes the free placement with the highest start, which keeps slot 0 (the only start
  of 4g and 7g) free longest.  The real driver chooses its own.
* AMD: a mode pair (``cpx_nps4``) applies to the whole device at once: creating one makes all
  its ``count`` partitions (the call returns the first) and is only allowed on a device in
  SPX + NPS1, with no process on it.  Destroying any of them returns the device to SPX + NPS1.
* Ascend: a vNPU takes its template's AI cores and memory from the chip, at most
  ``max_vnpus`` per chip; vNPU ids are ``phy_id * 16 + 100 + k``.

Faults (:class:`~accel.sim.FaultKind`): ``partition_create_fail`` makes a create fail half-way
(after the GPU instance, before the compute instance): undone, or with ``=leak`` left behind and
reported (the error lists it, the next inventory shows it); ``partition_busy`` puts processes on
a device's partitions: destroy is refused, and so is an AMD mode change; ``partition_kill``
SIGKILLs the process between the two steps of a create or destroy.

Crash safety: like the hardware, a create and a destroy take two steps (GPU instance, then
compute instance; compute mode, then memory mode), each one transaction of the state.  Step 1
records an *intent* naming the process and the partitions; step 2 finishes and drops it.  Before
every change (and when a backend opens over a state file) the intents of dead processes are
reconciled: a create is undone, a destroy completed.  A process killed at any instant thus leaves
no orphan: what it made is either whole and listed, or removed by the next process; between the
steps the half-made partition is listed too (a MIG one with ``ci_id`` ``None``).
"""

from __future__ import annotations

import os
import re
import signal
import uuid as uuidlib
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import (
    AccelError,
    DeviceLostError,
    PartitionBusyError,
    PartitionCreateFailedError,
    PartitionModeOffError,
    PartitionNoPlacementError,
    PartitionNotFoundError,
    PartitionProcessesRunningError,
    PartitionProfileNotSupportedError,
)
from ..model import Device, Operational, Partition, PartitionMode, PartitionProfile, PartitionScheme, Placement
from ._catalog import AMD_MODES, MIB, mig_catalog, vnpu_catalog
from ._faults import Fault, FaultKind
from ._state import MemoryState, StateFile

__all__ = ["Carver"]

#: compute slices of a MIG-capable GPU (A100, H100)
MIG_COMPUTE_SLICES = 7
#: XCD slots of an MI300X (placements of AMD partitions are in these)
AMD_XCDS = 8
_NAMESPACE = uuidlib.UUID("8f7d2c1e-4b3a-5d6e-9f80-a1b2c3d4e5f6")


def _family(dev: Device, profiles: Sequence[PartitionProfile]) -> str | None:
    if dev.vendor == "nvidia" and profiles:
        return "mig"
    if dev.vendor == "amd" and profiles:
        return "amd"
    if dev.vendor == "huawei" and profiles:
        return "vnpu"
    return None


class Carver:
    """Creates and destroys the partitions of one simulated host (see the module docstring).

    ``devices`` is a callable giving the devices as of now (health included), ``static`` the
    profile's devices (what profiles depend on), ``builtins`` the profile's own partitions and
    profiles, ``faults`` the active faults for a device position.
    """

    def __init__(
        self,
        devices: Callable[[], Sequence[Device]],
        static: Sequence[Device],
        builtin_partitions: Sequence[Partition],
        builtin_profiles: Sequence[PartitionProfile],
        faults: Callable[[FaultKind, int], list[Fault]],
        store: MemoryState | StateFile | None = None,
    ) -> None:
        self._devices = devices
        self._static = tuple(static)
        self._all_profiles: tuple[PartitionProfile, ...] | None = None
        self._parsed: tuple[dict[str, Any] | None, tuple[Partition, ...]] = (None, ())
        self._builtin = tuple(builtin_partitions)
        self._builtin_profiles = tuple(builtin_profiles)
        self._faults = faults
        self._store: MemoryState | StateFile = store if store is not None else MemoryState()
        self._profiles: dict[str, tuple[PartitionProfile, ...]] = {}
        if isinstance(store, StateFile):
            self.reconcile()  # a process killed half-way before this one opened

    # -- reading -------------------------------------------------------------------------------
    def profiles(self, dev: Device) -> tuple[PartitionProfile, ...]:
        """The profiles ``dev`` offers: the simulator profile's own, else its product's catalog."""
        cached = self._profiles.get(dev.id)
        if cached is None:
            own = tuple(p for p in self._builtin_profiles if p.parent_id == dev.id)
            cached = self._profiles[dev.id] = own or _catalog_profiles(dev)
        return cached

    def all_profiles(self) -> tuple[PartitionProfile, ...]:
        """Every device's profiles (they depend on the product only: computed once)."""
        if self._all_profiles is None:
            self._all_profiles = tuple(p for dev in self._static for p in self.profiles(dev))
        return self._all_profiles

    def read(self) -> dict[str, Any]:
        """The state as of now (read-only), for one reading to use throughout."""
        return self._store.read()

    def partitions(self, state: dict[str, Any] | None = None) -> tuple[Partition, ...]:
        """The live partitions of a state :meth:`read` returned (read-only: parsed once)."""
        state = state if state is not None else self._store.read()
        last, parts = self._parsed
        if state is last:
            return parts
        parts = self._parse(state)
        self._parsed = (state, parts)
        return parts

    def _parse(self, state: dict[str, Any]) -> tuple[Partition, ...]:
        """The partitions of ``state`` (a transaction's copy changes: never cached)."""
        removed = set(state["removed"])
        made = tuple(Partition.model_validate(p) for p in state["made"])
        return tuple(p for p in self._builtin if p.id not in removed) + made

    def device(self, dev: Device, state: dict[str, Any] | None = None) -> Device:
        """``dev`` with its AMD compute / memory mode as the state has it."""
        if dev.vendor != "amd":
            return dev
        mode = (state if state is not None else self._store.read())["modes"].get(dev.id)
        if mode is None:
            return dev
        compute, memory = mode.split("_")
        scheme = PartitionMode(scheme=PartitionScheme.AMD_XCP, compute_mode=compute, memory_mode=memory)
        return dev.model_copy(update={"partition_mode": scheme})

    # -- helpers -------------------------------------------------------------------------------
    def _find(self, device_id: str) -> tuple[int, Device]:
        for i, dev in enumerate(self._devices()):
            if dev.id == device_id:
                if dev.health.operational is Operational.LOST:
                    raise DeviceLostError(f"device {device_id} is lost (fell off the bus)", device_id=device_id)
                return i, dev
        from ..errors import DeviceError

        raise DeviceError(f"no simulated device {device_id!r}", device_id=device_id)

    def _busy(self, position: int) -> bool:
        return bool(self._faults(FaultKind.PARTITION_BUSY, position))

    # -- create --------------------------------------------------------------------------------
    def create(self, device_id: str, profile: str, placement_start: int | None = None) -> Partition:
        position, dev = self._find(device_id)
        offered = self.profiles(dev)
        prof = next((p for p in offered if p.name == profile), None)
        if prof is None:
            names = (p.name for p in offered)
            raise PartitionProfileNotSupportedError.not_offered(device_id, dev.model, profile, names)
        family = _family(dev, offered)
        error: AccelError | None = None
        finals: list[dict[str, Any]] = []
        # Step 1 (the GPU instance; the AMD compute mode; the vNPU): what is made is recorded
        # with an intent naming this process, so a crash before step 2 is undone by the next one.
        with self._store.transaction() as state:
            self._reconcile(state)
            before = len(state["made"])
            if family == "mig":
                made, error = self._mig(position, dev, prof, self._live(state, device_id), placement_start, state)
            elif family == "amd":
                made, error = self._amd(position, dev, prof, state)
            else:
                made, error = self._vnpu(position, dev, prof, self._live(state, device_id), state)
            if error is None:
                finals = state["made"][before:]
                state["made"][before:] = [_partial(d) for d in finals]
                state["intents"].append({"op": "create", "pid": os.getpid(), "ids": [d["id"] for d in finals],
                                         "mode": device_id if family == "amd" else None})
            state["seq"] += 1
        if error is not None:
            raise error
        assert made is not None
        self._maybe_die(position)
        # Step 2 (the compute instance; the memory mode): the partition is whole, the intent done.
        by_id = {d["id"]: d for d in finals}
        with self._store.transaction() as state:
            state["made"] = [by_id.get(d["id"], d) for d in state["made"]]
            state["intents"] = [i for i in state["intents"] if not _mine(i, by_id)]
        return made

    def _live(self, state: dict[str, Any], device_id: str) -> list[Partition]:
        return [p for p in self._parse(state) if p.parent_id == device_id]

    def _maybe_die(self, position: int) -> None:
        """The ``partition_kill`` fault: this process is SIGKILLed between the two steps."""
        if self._faults(FaultKind.PARTITION_KILL, position):
            os.kill(os.getpid(), signal.SIGKILL)

    def _reconcile(self, state: dict[str, Any]) -> None:
        """Finish what a dead process left half-way: undo its creates, complete its destroys."""
        keep = []
        for intent in state["intents"]:
            if _alive(int(intent.get("pid", 0))):
                keep.append(intent)
                continue
            ids = set(intent.get("ids", ()))
            state["made"] = [d for d in state["made"] if d["id"] not in ids]
            if intent.get("op") == "destroy":
                state["removed"].extend(p.id for p in self._builtin if p.id in ids and p.id not in state["removed"])
            if intent.get("mode"):
                state["modes"].pop(intent["mode"], None)
        state["intents"] = keep

    def reconcile(self) -> None:
        """Reconcile now (a backend opening over a state file does, before its first read)."""
        with self._store.transaction() as state:
            self._reconcile(state)

    def _half_way(self, position: int, dev: Device, prof: PartitionProfile,
                  leftover: Partition, state: dict[str, Any]) -> PartitionCreateFailedError | None:
        faults = self._faults(FaultKind.PARTITION_CREATE_FAIL, position)
        if not faults:
            return None
        if any(f.param == "leak" for f in faults):
            state["made"].append(leftover.model_dump(mode="json"))
            return PartitionCreateFailedError(
                f"creating {prof.name} on {dev.id} failed half-way (simulated) and could not be undone: "
                f"{leftover.id} is left behind (destroy it, or `accel partition clear`)",
                left_behind=(leftover.id,), device_id=dev.id, profile=prof.name)
        return PartitionCreateFailedError(
            f"creating {prof.name} on {dev.id} failed half-way (simulated); what was made was undone",
            device_id=dev.id, profile=prof.name)

    def _mig(self, position: int, dev: Device, prof: PartitionProfile, live: list[Partition],
             start: int | None, state: dict[str, Any]) -> tuple[Partition | None, AccelError | None]:
        if dev.partition_mode.scheme is not PartitionScheme.MIG:
            return None, PartitionModeOffError(
                f"MIG mode is off on {dev.id}: enable it first (nvidia-smi -i <gpu> -mig 1)",
                device_id=dev.id, profile=prof.name)
        same = sum(1 for p in live if p.profile == prof.name)
        if prof.max_instances is not None and same >= prof.max_instances:
            return None, PartitionNoPlacementError(
                f"{dev.id} already has {same} {prof.name} (the most it can hold)", device_id=dev.id, profile=prof.name)
        used = sum(_slices(p.profile) for p in live)
        if used + _slices(prof.name) > MIG_COMPUTE_SLICES:
            return None, PartitionNoPlacementError(
                f"{prof.name} needs {_slices(prof.name)} compute slices; {dev.id} has "
                f"{MIG_COMPUTE_SLICES - used} of {MIG_COMPUTE_SLICES} free", device_id=dev.id, profile=prof.name)
        taken = [p.placement for p in live if p.placement is not None]
        legal = list(prof.placements)
        if start is not None and all(pl.start != start for pl in legal):
            starts = ", ".join(str(pl.start) for pl in legal)
            return None, PartitionNoPlacementError(
                f"{prof.name} cannot start at slot {start}; its placements start at {starts}",
                device_id=dev.id, profile=prof.name)
        free = [pl for pl in legal if (start is None or pl.start == start) and not any(pl.overlaps(t) for t in taken)]
        if not free:
            where = f"at slot {start}" if start is not None else "anywhere"
            return None, PartitionNoPlacementError(
                f"no placement left for {prof.name} {where} on {dev.id}: its memory slices overlap live instances",
                device_id=dev.id, profile=prof.name)
        placement = max(free, key=lambda pl: pl.start)
        gis = {p.gi_id for p in live if p.gi_id is not None}
        gi = next(i for i in range(1, 64) if i not in gis)
        seq = state["seq"]
        uid = f"MIG-{uuidlib.uuid5(_NAMESPACE, f'{dev.id}/{gi}/{seq}')}"
        fields = dict(parent_id=dev.id, profile=prof.name, placement=placement, uuid=uid, gi_id=gi,
                      memory_bytes=prof.memory_bytes, compute_units=prof.compute_units,
                      compute_ratio=prof.compute_ratio or round(_slices(prof.name) / MIG_COMPUTE_SLICES, 6),
                      binding=dev.binding.model_copy(update={"visible_id": uid}))
        error = self._half_way(position, dev, prof, Partition(id=f"nvidia:{uid}", ci_id=None, **fields), state)
        if error is not None:
            return None, error
        part = Partition(id=f"nvidia:{uid}", ci_id=0, **fields)
        state["made"].append(part.model_dump(mode="json"))
        return part, None

    def _amd(self, position: int, dev: Device, prof: PartitionProfile,
             state: dict[str, Any]) -> tuple[Partition | None, AccelError | None]:
        current = state["modes"].get(dev.id)
        if current is not None:
            what = "all its partitions already exist" if current == prof.name else "destroy its partitions first"
            return None, PartitionNoPlacementError(
                f"{dev.id} is in {current} ({what}); a mode applies to the whole device",
                device_id=dev.id, profile=prof.name)
        if self._busy(position):
            return None, PartitionProcessesRunningError(
                f"processes run on {dev.id}: a compute / memory mode change needs the device idle",
                device_id=dev.id, profile=prof.name)
        count = prof.max_instances or 1
        parts = [
            Partition(id=f"{dev.id}/xcp{k}", parent_id=dev.id, profile=prof.name, placement=prof.placements[k],
                      memory_bytes=prof.memory_bytes, compute_units=prof.compute_units,
                      compute_ratio=prof.compute_ratio,
                      binding=dev.binding.model_copy(update={"visible_id": f"{dev.binding.visible_id}.{k}"}))
            for k in range(count)
        ]
        error = self._half_way(position, dev, prof, parts[0], state)
        if error is not None:
            if error.left_behind:
                state["modes"][dev.id] = prof.name
            return None, error
        state["modes"][dev.id] = prof.name
        state["made"].extend(p.model_dump(mode="json") for p in parts)
        return parts[0], None

    def _vnpu(self, position: int, dev: Device, prof: PartitionProfile, live: list[Partition],
              state: dict[str, Any]) -> tuple[Partition | None, AccelError | None]:
        chip = vnpu_catalog(dev.model)
        total_cores = chip.aicore if chip else (dev.compute.units or 0)
        total_mib = chip.memory_mib if chip else (dev.memory_total_bytes or 0) // MIB
        most = chip.max_vnpus if chip else 16
        cores = sum(p.compute_units or 0 for p in live)
        mib = sum((p.memory_bytes or 0) // MIB for p in live)
        need_cores, need_mib = prof.compute_units or 0, (prof.memory_bytes or 0) // MIB
        if len(live) >= most:
            why = f"{dev.id} already has {len(live)} vNPUs (the most a chip holds)"
        elif cores + need_cores > total_cores:
            why = f"{prof.name} needs {need_cores} AI cores; {dev.id} has {total_cores - cores} free"
        elif mib + need_mib > total_mib:
            why = f"{prof.name} needs {need_mib} MiB; {dev.id} has {total_mib - mib} MiB free"
        else:
            why = ""
        if why:
            return None, PartitionNoPlacementError(why, device_id=dev.id, profile=prof.name)
        # Ids follow npu-smi's rule: phy_id * 16 + 100 + k, phy_id the /dev/davinciN number (a
        # 310P3 card with NPU id 7 on davinci0-6 gave 100-106: plugins/ascend/_vnpu.py's sources).
        nodes = [n for n in dev.binding.device_nodes if re.fullmatch(r"/dev/davinci\d+", n)]
        phy: object = nodes[0].removeprefix("/dev/davinci") if nodes else dev.extras.get("huawei.com/npuId", position)
        used = {p.id for p in live}
        base = int(str(phy)) * 16 + 100 if str(phy).isdigit() else 100 + 16 * position
        vid = next(base + k for k in range(16) if f"{dev.id}/vnpu{base + k}" not in used)
        part = Partition(id=f"{dev.id}/vnpu{vid}", parent_id=dev.id, profile=prof.name,
                         memory_bytes=prof.memory_bytes, compute_units=prof.compute_units,
                         compute_ratio=prof.compute_ratio,
                         binding=dev.binding.model_copy(update={"visible_id": str(vid)}))
        error = self._half_way(position, dev, prof, part, state)
        if error is not None:
            return None, error
        state["made"].append(part.model_dump(mode="json"))
        return part, None

    # -- destroy -------------------------------------------------------------------------------
    def destroy(self, partition_id: str) -> None:
        error: AccelError | None = None
        gone: set[str] = set()
        position = -1
        # Step 1 (the compute instance): the intent names what goes, so a crash is completed later.
        with self._store.transaction() as state:
            self._reconcile(state)
            live = self._parse(state)
            part = next((p for p in live if p.id == partition_id), None)
            if part is None:
                error = PartitionNotFoundError(f"no partition {partition_id!r}", partition_id=partition_id)
            else:
                position, _dev = self._find(part.parent_id)
                if self._busy(position):
                    error = PartitionBusyError(
                        f"{partition_id} is in use (processes run on it): not destroyed",
                        device_id=part.parent_id, partition_id=partition_id, profile=part.profile)
                else:
                    mode = part.parent_id if part.parent_id in state["modes"] else None
                    gone = {p.id for p in live if p.parent_id == part.parent_id} if mode else {partition_id}
                    state["made"] = [_partial(d) if d["id"] in gone else d for d in state["made"]]
                    state["intents"].append({"op": "destroy", "pid": os.getpid(), "ids": sorted(gone), "mode": mode})
        if error is not None:
            raise error
        self._maybe_die(position)
        # Step 2 (the GPU instance; the mode back to SPX + NPS1): gone, the intent done.
        with self._store.transaction() as state:
            mine = [i for i in state["intents"] if i.get("op") == "destroy" and _mine(i, gone)]
            for intent in mine:
                if intent.get("mode"):
                    state["modes"].pop(intent["mode"], None)
            state["made"] = [d for d in state["made"] if d["id"] not in gone]
            state["removed"].extend(p.id for p in self._builtin if p.id in gone and p.id not in state["removed"])
            state["intents"] = [i for i in state["intents"] if not any(i is m for m in mine)]


def _partial(dump: dict[str, Any]) -> dict[str, Any]:
    """A partition between the two steps: a MIG GPU instance without its compute instance."""
    return {**dump, "ci_id": None} if dump.get("gi_id") is not None else dump


def _mine(intent: dict[str, Any], ids: Any) -> bool:
    return int(intent.get("pid", 0)) == os.getpid() and set(intent.get("ids", ())) == set(ids)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _slices(profile: str) -> int:
    """The compute slices of a MIG profile name (``3g.40gb`` -> 3; unknown forms count 1)."""
    head = profile.split("g.", 1)[0]
    return int(head) if head.isdigit() else 1


def _catalog_profiles(dev: Device) -> tuple[PartitionProfile, ...]:
    if dev.vendor == "nvidia":
        return tuple(
            PartitionProfile(name=p.name, parent_id=dev.id, profile_id=p.profile_id, memory_bytes=p.memory_mib * MIB,
                             compute_units=p.sm_count, compute_ratio=round(p.slices / MIG_COMPUTE_SLICES, 6),
                             memory_slices=p.memory_slices, max_instances=p.max_instances,
                             placements=tuple(Placement(start=s, size=p.memory_slices) for s in p.starts))
            for p in mig_catalog(dev.model, dev.memory_total_bytes)
        )
    if dev.vendor == "amd" and "MI300" in dev.model.upper():
        total, cus = dev.memory_total_bytes, dev.compute.units
        out = []
        for mode in AMD_MODES:
            size = AMD_XCDS // mode.count
            out.append(PartitionProfile(
                name=mode.name, parent_id=dev.id, memory_bytes=total // mode.count if total else None,
                compute_units=cus // mode.count if cus else None, compute_ratio=round(1 / mode.count, 6),
                max_instances=mode.count,
                placements=tuple(Placement(start=k * size, size=size) for k in range(mode.count))))
        return tuple(out)
    if dev.vendor == "huawei":
        chip = vnpu_catalog(dev.model)
        if chip is None:
            return ()
        return tuple(
            PartitionProfile(name=t.name, parent_id=dev.id, memory_bytes=t.memory_mib * MIB, compute_units=t.aicore,
                             compute_ratio=round(t.aicore / chip.aicore, 6),
                             max_instances=min(chip.max_vnpus, chip.aicore // t.aicore))
            for t in chip.templates
        )
    return ()
