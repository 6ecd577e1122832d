"""Ascend vNPU actuation through ``npu-smi``: templates as profiles, vNPUs as partitions.

A vNPU is cut from one chip by a fixed template (``npu-smi set -t create-vnpu -i <npu> -c
<chip> -f <template> -v <vnpu_id>``) and removed by id (``set -t destroy-vnpu -i <npu> -c
<chip> -v <vnpu_id>``); ``info -t template-info -i <npu>`` lists the chip's templates and
``info -t info-vnpu -i <npu> -c <chip>`` its free / total resources and live vNPUs.  Syntax and
id rules: Ascend mind-cluster ``docs/zh/scheduling/usage/virtual_instance.md`` (commit
``71ab398201f0ce2c8c571937960956903d49a4ee``); outputs: :mod:`._vnpu_parse`.

* Products: the tool creates vNPUs on 310P, 910 (Atlas training) and 910B chips only
  (``set_chip_create_vdevice`` of npu-smi's ``npu_chip_set.c``, repository
  ``verylucky01/driver`` at ``e29d066fd6ee84cae705e2000a0387d721d3aaa0``); any other chip
  (310, 910C / A3, 950) offers no profile.
* A profile is a template: ``memory_bytes`` its whole GiB (the tool prints ``MB >> 10``; scaled
  down where the chip shows less memory than its vNPU pool, see :func:`_memory`),
  ``compute_units`` its AI cores, ``compute_ratio`` AI cores / the chip's AI cores (the
  ``AICORE`` total of info-vnpu), ``max_instances`` min(vNPUs a chip holds, cores / template
  cores): 7 on 310P, 16 on training chips (the id range below).
* Ids: the vNPU id lies in ``[phy_id*16 + 100, phy_id*16 + 107]`` (310P) or ``+115`` (training
  chips), ``phy_id`` the ``/dev/davinciN`` number, unique on the server; create names the
  lowest free one (``-v``), so the id is known before the tool runs.  A partition's id is
  ``<device id>/vnpu<vnpu_id>``, its binding ``ASCEND_VISIBLE_DEVICES=<vnpu_id>`` and
  ``/dev/vdavinci<vnpu_id>`` (the Ascend Docker Runtime's static vNPU mount, same document).
* Family: training chips and the 310P ``vir01`` template share AI cores in time (software
  virtualisation, same document) -> ``software_share``; other 310P templates are hardware
  isolated; 910B is not stated there and is reported ``hardware_isolated``.

Refusals -> typed errors (the tool's text decides; its exit status alone does not, see
:mod:`._vnpu_parse`):

=================================================================  ==========================================
chip family without vNPUs; template not in ``template-info``;      :class:`PartitionProfileNotSupportedError`
``Error parameter of -f.``
processes in the chip's ``npu-smi info`` process table             :class:`PartitionProcessesRunningError`
vnpu-mode not docker (``... not in docker mode ...``), SMP mode    :class:`PartitionModeOffError`
no free id, too few AI cores free, ``Insufficient number of ...``  :class:`PartitionNoPlacementError`
``create vnpu failed.``                                            :class:`PartitionCreateFailedError` (what
                                                                   it left is destroyed again, or listed)
destroy: the vNPU's Status is 1 (a container uses it),             :class:`PartitionBusyError`
``destroy vnpu N failed.``
destroy: no such vNPU, ``Error parameter of -v.``                  :class:`PartitionNotFoundError`
=================================================================  ==========================================

A hung ``npu-smi`` raises :class:`~accel.errors.ToolTimeoutError` (the session's timeout).  The
"processes running" refusal is this module's: Huawei's guides ask for the NPU's workloads to
be evicted before it is virtualised (CCE "Automatic NPU Virtualization",
https://support.huaweicloud.com/intl/en-us/usermanual-cce/cce_10_1010.html).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from accel.errors import (
    AccelError,
    DriverError,
    PartitionBusyError,
    PartitionCreateFailedError,
    PartitionError,
    PartitionModeOffError,
    PartitionNoPlacementError,
    PartitionNotFoundError,
    PartitionProcessesRunningError,
    PartitionProfileNotSupportedError,
)
from accel.model import Binding, Device, Partition, PartitionFamily, PartitionProfile, ProcessUsage
from accel.toolkit import ToolSession

from ._vnpu_parse import SetOutcome, VnpuInfo, VnpuTemplate, parse_info_vnpu, parse_set_result, parse_template_info

__all__ = ["VnpuCarver", "VnpuChip", "family_of", "vnpu_chip"]

GIB = 2**30
_SHARED_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
#: exit status of NPU_ERR_CODE_RESOURCE_OCCUPIED (-9020 & 0xff; see :mod:`._vnpu_fake`)
_EXIT_RESOURCE_OCCUPIED = 196


def family_of(model: str) -> str | None:
    """``"310P"``, ``"910"`` (Atlas training, 910A / 910ProA / 910ProB), ``"910B"`` or ``None``
    (no vNPUs: 310, 910C / A3 dies printed ``Ascend910``, 950...)."""
    name = model.replace("Ascend", "").strip().upper()
    if name.startswith("310P"):
        return "310P"
    if name.startswith("910B"):
        return "910B"
    if re.match(r"^910(A|PROA|PROB)", name):
        return "910"
    return None


@dataclass(frozen=True)
class VnpuChip:
    """Where a device's chip is for ``npu-smi``: NPU id, chip id, physical id, family."""

    device: Device
    npu_id: int
    chip_id: int
    phy_id: int
    family: str

    @property
    def ids(self) -> range:
        last = 107 if self.family == "310P" else 115
        return range(self.phy_id * 16 + 100, self.phy_id * 16 + last + 1)

    @property
    def most(self) -> int:
        """vNPUs one chip holds: 7 on 310P (its 7 AI CPUs), 16 on training chips (mind-cluster
        virtual_instance.md: "1个昇腾AI处理器最大支持切分7个虚拟化实例"; 15 / 16 on 30 / 32 cores)."""
        return 7 if self.family == "310P" else 16

    @property
    def where(self) -> tuple[str, ...]:
        return ("-i", str(self.npu_id), "-c", str(self.chip_id))


def vnpu_chip(dev: Device) -> VnpuChip | None:
    """``dev`` as a chip vNPUs can be cut from, or ``None`` when its product has none."""
    family = family_of(dev.model)
    npu, chip = dev.extras.get("huawei.com/npuId"), dev.extras.get("huawei.com/chipId")
    nodes = [n for n in dev.binding.device_nodes if re.fullmatch(r"/dev/davinci\d+", n)]
    if family is None or not isinstance(npu, int) or not isinstance(chip, int) or not nodes:
        return None
    return VnpuChip(dev, npu, chip, int(nodes[0].removeprefix("/dev/davinci")), family)


def _family(chip: VnpuChip, template: str) -> PartitionFamily:
    if chip.family == "910" or (chip.family == "310P" and template == "vir01"):
        return PartitionFamily.SOFTWARE_SHARE
    return PartitionFamily.HARDWARE_ISOLATED


def _memory(chip: VnpuChip, template_gib: int, info: VnpuInfo | None) -> int:
    """A template's memory as the vNPU's workload sees it: the template's GiB, scaled by the
    chip's visible memory over its vNPU pool where the chip shows less than the pool (a 310P3
    shows 21527 MiB of its 24 GiB: a ``vir01`` of 3 GiB gives 2690 MiB in its container, a
    ``vir04`` 10763 MiB; Project-HAMi/website ``tutorials/labs/hami-ascend-vnpu-slicing.md``)."""
    size = template_gib * GIB
    pool = info.total("Memory") if info is not None else None
    visible = chip.device.memory_total_bytes
    if pool and visible and visible < pool * GIB:
        return size * visible // (pool * GIB)
    return size


def profiles_of(chip: VnpuChip, templates: Sequence[VnpuTemplate], info: VnpuInfo | None) -> list[PartitionProfile]:
    """The chip's templates as profiles (module docstring)."""
    cores = info.total("AICORE") if info is not None else None
    most = chip.most
    return [
        PartitionProfile(
            name=t.name,
            parent_id=chip.device.id,
            family=_family(chip, t.name),
            memory_bytes=_memory(chip, t.memory_gib, info),
            compute_units=t.aicore,
            compute_ratio=round(t.aicore / cores, 6) if cores else None,
            max_instances=min(most, cores // t.aicore) if cores and t.aicore else most,
        )
        for t in templates
    ]


def partitions_of(chip: VnpuChip, templates: Sequence[VnpuTemplate], info: VnpuInfo) -> list[Partition]:
    """The chip's live vNPUs as partitions (memory and cores from their template)."""
    by_name = {t.name: t for t in templates}
    cores = info.total("AICORE")
    out = []
    for row in info.vnpus:
        t = by_name.get(row.template or "")
        dev = chip.device
        out.append(
            Partition(
                id=f"{dev.id}/vnpu{row.vnpu_id}",
                parent_id=dev.id,
                profile=row.template or "unknown",
                family=_family(chip, row.template or ""),
                memory_bytes=_memory(chip, t.memory_gib, info) if t is not None else None,
                compute_units=t.aicore if t is not None else None,
                compute_ratio=round(t.aicore / cores, 6) if t is not None and cores else None,
                binding=Binding(
                    visible_env="ASCEND_VISIBLE_DEVICES",
                    visible_id=str(row.vnpu_id),
                    torch_device_type="npu",
                    collective_backend="hccl",
                    ray_resource="NPU",
                    device_nodes=(f"/dev/vdavinci{row.vnpu_id}", *_SHARED_NODES),
                ),
            )
        )
    return out


def _vendor(outcome: SetOutcome, rc: int) -> str:
    return f"huawei.npu-smi:{outcome.value}:{rc}"


class VnpuCarver:
    """Reads and carves vNPUs through ``npu-smi`` (one :class:`ToolSession` per operation)."""

    def __init__(self, session: Callable[[], ToolSession]) -> None:
        self._session = session

    # -- reads -------------------------------------------------------------------------------
    def templates(self, s: ToolSession, chip: VnpuChip) -> list[VnpuTemplate]:
        command = f"npu-smi info -t template-info -i {chip.npu_id}"
        return parse_template_info(s.run("info", "-t", "template-info", "-i", str(chip.npu_id)).stdout, command=command)

    def info(self, s: ToolSession, chip: VnpuChip, profile: str | None = None) -> VnpuInfo:
        """The chip's vNPU view; a mode / SMP refusal is :class:`PartitionModeOffError`."""
        result = s.run("info", "-t", "info-vnpu", *chip.where, check=False)
        said = parse_set_result(result.stdout + result.stderr)
        if said.outcome in (SetOutcome.MODE_OFF, SetOutcome.SMP):
            raise PartitionModeOffError(
                f"{chip.device.id}: vNPUs are unavailable: npu-smi says {said.message!r} (set vnpu-mode to docker: "
                "npu-smi set -t vnpu-mode -d 0)",
                device_id=chip.device.id,
                profile=profile,
                vendor_code=_vendor(said.outcome, result.returncode),
            )
        result.check()
        return parse_info_vnpu(result.stdout, command=f"npu-smi info -t info-vnpu {' '.join(chip.where)}")

    # -- create ------------------------------------------------------------------------------
    def create(
        self, dev: Device, profile: str, processes: Sequence[ProcessUsage], placement_start: int | None = None
    ) -> Partition:
        chip = vnpu_chip(dev)
        if chip is None:
            raise PartitionProfileNotSupportedError(
                f"{dev.id} ({dev.model}) offers no vNPU templates (npu-smi creates vNPUs on 310P, 910 and 910B chips)",
                device_id=dev.id,
                profile=profile,
            )
        if placement_start is not None:
            raise PartitionNoPlacementError(
                f"vNPUs are not placed by slot ({dev.id}); create {profile} without a start",
                device_id=dev.id,
                profile=profile,
            )
        busy = sorted({p.pid for p in processes if p.device_id == dev.id})
        if busy:
            raise PartitionProcessesRunningError(
                f"{dev.id} runs processes {', '.join(map(str, busy[:8]))}: stop them before cutting vNPUs from it",
                device_id=dev.id,
                profile=profile,
            )
        s = self._session()
        templates = self.templates(s, chip)
        tmpl = next((t for t in templates if t.name == profile), None)
        if tmpl is None:
            raise PartitionProfileNotSupportedError.not_offered(
                dev.id, dev.model, profile, (t.name for t in templates), what="template")
        info = self.info(s, chip, profile)
        free_cores = info.free("AICORE")
        used = {r.vnpu_id for r in info.vnpus}
        vid = next((v for v in chip.ids if v not in used), None)
        if vid is None or len(used) >= chip.most:
            raise PartitionNoPlacementError(
                f"{dev.id} already holds {len(used)} vNPUs (the most its ids allow)", device_id=dev.id, profile=profile
            )
        if free_cores is not None and tmpl.aicore > free_cores:
            raise PartitionNoPlacementError(
                f"{profile} needs {tmpl.aicore} AI cores; {dev.id} has {free_cores} free",
                device_id=dev.id,
                profile=profile,
            )
        result = s.run("set", "-t", "create-vnpu", *chip.where, "-f", profile, "-v", str(vid), check=False)
        said = parse_set_result(result.stdout + result.stderr)
        if said.outcome is SetOutcome.OK:
            return self._made(s, chip, templates, vid, profile)
        code = _vendor(said.outcome, result.returncode)
        if said.outcome in (SetOutcome.MODE_OFF, SetOutcome.SMP):
            raise PartitionModeOffError(
                f"{dev.id}: npu-smi refused {profile}: {said.message}",
                device_id=dev.id,
                profile=profile,
                vendor_code=code,
            )
        if said.outcome is SetOutcome.NO_RESOURCE:
            raise PartitionNoPlacementError(
                f"no room for {profile} on {dev.id}: {said.message}",
                device_id=dev.id,
                profile=profile,
                vendor_code=code,
            )
        if said.outcome in (SetOutcome.BAD_TEMPLATE, SetOutcome.NOT_SUPPORTED):
            raise PartitionProfileNotSupportedError(
                f"{dev.id} refused template {profile}: {said.message}",
                device_id=dev.id,
                profile=profile,
                vendor_code=code,
            )
        raise self._undo(s, chip, vid, profile, said.message, code)

    def _made(
        self, s: ToolSession, chip: VnpuChip, templates: Sequence[VnpuTemplate], vid: int, profile: str
    ) -> Partition:
        info = self.info(s, chip, profile)
        for part in partitions_of(chip, templates, info):
            if part.id.endswith(f"/vnpu{vid}"):
                return part
        raise PartitionCreateFailedError(
            f"npu-smi said {profile} was created on {chip.device.id} as vNPU {vid}, but info-vnpu does not list it",
            device_id=chip.device.id,
            profile=profile,
        )

    def _undo(self, s: ToolSession, chip: VnpuChip, vid: int, profile: str, why: str, code: str) -> PartitionError:
        """After a failed create: destroy vNPU ``vid`` if the failure left it; say what remains."""
        dev = chip.device
        pid = f"{dev.id}/vnpu{vid}"
        try:
            left = any(r.vnpu_id == vid for r in self.info(s, chip, profile).vnpus)
        except AccelError as exc:  # a hung or failing read: the vNPU may be there
            return PartitionCreateFailedError(
                f"creating {profile} on {dev.id} failed ({why}) and its vNPUs could not be read ({exc}); vNPU {vid} "
                "may be left",
                left_behind=(pid,),
                device_id=dev.id,
                profile=profile,
                vendor_code=code,
            )
        if not left:
            return PartitionCreateFailedError(
                f"creating {profile} on {dev.id} failed: {why}; nothing was left",
                device_id=dev.id,
                profile=profile,
                vendor_code=code,
            )
        result = s.run("set", "-t", "destroy-vnpu", *chip.where, "-v", str(vid), check=False)
        if parse_set_result(result.stdout + result.stderr).outcome is SetOutcome.OK:
            return PartitionCreateFailedError(
                f"creating {profile} on {dev.id} failed ({why}); the vNPU {vid} it left was destroyed again",
                device_id=dev.id,
                profile=profile,
                vendor_code=code,
            )
        return PartitionCreateFailedError(
            f"creating {profile} on {dev.id} failed ({why}) and the vNPU {vid} it left could not be destroyed",
            left_behind=(pid,),
            device_id=dev.id,
            profile=profile,
            vendor_code=code,
        )

    # -- destroy -----------------------------------------------------------------------------
    def destroy(self, dev: Device, partition_id: str) -> None:
        chip = vnpu_chip(dev)
        m = re.fullmatch(re.escape(dev.id) + r"/vnpu(\d+)", partition_id)
        if chip is None or m is None:
            raise PartitionNotFoundError(f"no vNPU {partition_id!r}", device_id=dev.id, partition_id=partition_id)
        vid = int(m.group(1))
        s = self._session()
        row = next((r for r in self.info(s, chip).vnpus if r.vnpu_id == vid), None)
        if row is None:
            raise PartitionNotFoundError(
                f"no vNPU {vid} on {dev.id} (info-vnpu does not list it)", device_id=dev.id, partition_id=partition_id
            )
        if row.in_use:
            raise PartitionBusyError(
                f"vNPU {vid} on {dev.id} is used by container {row.container_id}: not destroyed",
                device_id=dev.id,
                partition_id=partition_id,
                profile=row.template,
            )
        result = s.run("set", "-t", "destroy-vnpu", *chip.where, "-v", str(vid), check=False)
        said = parse_set_result(result.stdout + result.stderr)
        code = _vendor(said.outcome, result.returncode)
        if said.outcome is SetOutcome.OK:
            return
        if said.outcome is SetOutcome.NO_SUCH_VNPU:
            raise PartitionNotFoundError(
                f"no vNPU {vid} on {dev.id}: {said.message}",
                device_id=dev.id,
                partition_id=partition_id,
                vendor_code=code,
            )
        if said.outcome in (SetOutcome.MODE_OFF, SetOutcome.SMP):
            raise PartitionModeOffError(
                f"{dev.id}: npu-smi refused the destroy: {said.message}",
                device_id=dev.id,
                partition_id=partition_id,
                vendor_code=code,
            )
        if said.outcome is SetOutcome.FAILED or result.returncode == _EXIT_RESOURCE_OCCUPIED:
            raise PartitionBusyError(
                f"vNPU {vid} on {dev.id} was not destroyed: {said.message} (in use?)",
                device_id=dev.id,
                partition_id=partition_id,
                profile=row.template,
                vendor_code=code,
            )
        raise DriverError(
            f"npu-smi destroy-vnpu {vid} on {dev.id}: unexpected output {said.message!r}", vendor_code=code
        )
