"""The Ascend backend: ``npu-smi`` outputs made into accel model objects.

Per snapshot the backend runs (``tool_invocations`` in the inventory's source says how many):

1. ``npu-smi info`` - every chip with health, power, temperature, DDR and HBM, bus id, and
   the process table (required: without it there is no inventory);
2. ``npu-smi info -m`` - chip logic ids (what ``ASCEND_RT_VISIBLE_DEVICES`` takes) and MCU
   rows, which are not devices (optional: without it the logic id is the chip's place among the
   chip records of ``npu-smi info``, counting records that failed to parse; docs/ascend.md);
3. ``npu-smi info -t topo`` - HCCS / SIO / HCCS_SW / PCIe links and CPU affinity (optional);
4. only for chips whose Health is not ``OK``: ``npu-smi info -t health -i N -c C`` for the
   error codes (optional);
5. only with ``options["board"]`` true: ``npu-smi info -t board -i N -c C`` per chip for the
   VDie ID, which then becomes the stable id (one run per chip, so off by default; without it
   the id is the PCI address);
6. only with ``options["vnpu"]`` true: ``npu-smi info -t template-info -i N`` once per chip model and
   ``npu-smi info -t info-vnpu -i N -c C`` per chip that can hold vNPUs (310P, 910, 910B): the
   vNPU templates become partition profiles and the live vNPUs partitions of the inventory
   (:mod:`._vnpu`; off by default, like ``board``).

Partition actuation (``create_partition`` / ``destroy_partition``) runs ``npu-smi set -t
create-vnpu`` / ``destroy-vnpu`` (:mod:`._vnpu`) and needs option ``vnpu`` (without it it raises
:class:`~accel.errors.NotSupportedError`): what it makes must be in every next inventory, and
``partitions()`` / ``partition_profiles()`` are the snapshot's.

So a healthy 8x 910B host costs 3 runs.  What could not be read is a typed
:class:`~accel.model.Problem` of the inventory (``inventory.problems``): a chip record that did
not parse (``record``; the chip is still listed, health unknown, when its record shows a bus id
or its place gives a logic id), a secondary command that failed (``command``), a chip that could
not be made into a device (``device``).  A command a replay never recorded is only a note.

The schedulable unit is the chip the runtime sees (logic id); its NPU id (card or module) is
kept in ``board_id``, so 310 (4 chips), 310P Duo (2 chips) and 910C (2 dies) keep their package
relation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from accel.errors import AccelError, ParseError
from accel.model import (
    Action,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    HealthCondition,
    Link,
    LinkType,
    MemoryKind,
    Partition,
    PartitionProfile,
    ProblemKind,
    Severity,
    SharingMode,
    Subsystem,
    Telemetry,
)
from accel.plugin import BackendConfig, DeviceEvent
from accel.toolkit import (
    TABLE_NEVER_PRINTS,
    Collection,
    Matrix,
    NativeEventsSurface,
    NativeLibrary,
    ProcessesSurface,
    ProcessRow,
    Snapshot,
    ToolSession,
    UnitReading,
    is_masked,
    link_domains,
    matrix_links,
    processes_of,
)
from accel.tools import Runner

from . import _native
from ._parse import (
    SEARCH_PATH,
    TOOL,
    BoardInfo,
    ChipMapping,
    NpuChip,
    NpuSmiInfo,
    TopoMatrix,
    parse_board,
    parse_health,
    parse_info,
    parse_mapping,
    parse_topo,
)
from ._vnpu import VnpuCarver, partitions_of, profiles_of, vnpu_chip
from ._vnpu_parse import VnpuTemplate, parse_info_vnpu, parse_template_info

__all__ = ["AscendBackend"]

P = TypeVar("P")

_HAMI_SOFT_SLICE_NPU_ID = 32768  # the NPU id a HAMi soft-sliced container sees

#: npu-smi topology codes that are device links (the rest are PCIe/NUMA levels).
_LINK_CODES: dict[str, LinkType] = {
    "HCCS": LinkType.HCCS,
    "HCCS_SW": LinkType.HCCS_SWITCH,
    "SIO": LinkType.SIO,
    "PIX": LinkType.PCIE_PIX,
    "PXB": LinkType.PCIE_PXB,
    "PHB": LinkType.PCIE_PHB,
    "NODE": LinkType.NUMA,
    "SYS": LinkType.SYSTEM,
}

#: Health column value -> (severity, reason, action).  OK gives no condition.  DCMI's health
#: codes are 0 ok, 1 minor alarm, 2 major alarm, 3 critical alarm; npu-smi prints them as
#: OK / Warning / Alarm / Critical (runbooks also list Fault).
_HEALTH: dict[str, tuple[Severity, str, Action]] = {
    "warning": (Severity.WARNING, "NpuHealthWarning", Action.INVESTIGATE),
    "alarm": (Severity.ERROR, "NpuHealthAlarm", Action.INVESTIGATE),
    "critical": (Severity.CRITICAL, "NpuHealthCritical", Action.RESET_DEVICE),
    "fault": (Severity.CRITICAL, "NpuHealthFault", Action.REPLACE_HARDWARE),
}

_SHARED_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")

#: Telemetry npu-smi info never prints (power too, where it prints a placeholder).
_NOT_PRINTED = TABLE_NEVER_PRINTS | {"fan_ratio", "ecc_uncorrected_total"}
#: Telemetry the DCMI path does not read (it reads the ECC counters npu-smi info does not print).
_NATIVE_NOT_READ = TABLE_NEVER_PRINTS | {"fan_ratio"}


class AscendBackend(ProcessesSurface, NativeEventsSurface):
    """Backend ``ascend`` (devices of vendor ``huawei``) over a runner (real, replayed or recording)."""

    backend_name = "ascend"
    vendor = "huawei"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.NPU
    #: ASCEND_RT_VISIBLE_DEVICES takes the chip logic id (docs/ascend.md).
    visible_env = "ASCEND_RT_VISIBLE_DEVICES"
    torch_device_type = "npu"
    collective_backend = "hccl"
    ray_resource = "NPU"
    device_nodes = _SHARED_NODES

    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def load_native(self) -> object:
        return _native.load_dcmi()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_cli(self, col: Collection) -> Snapshot:
        info = col.required(_by(parse_info), "info")
        col.api_version = info.tool_version
        listed = col.secondary(_by(parse_mapping), "info", "-m")
        mapping = {(m.npu_id, m.chip_id): m for m in listed or ()}
        for failed in info.errors:
            # A chip record that did not parse: the chip is still identified by its logic id
            # (its bus id, when the record showed one, names it first).  A stray line (no
            # record) has no place; its leading number is an NPU id, a logic id only via -m.
            failed.device_index = _failed_logic_id(failed, info, mapping)
            col.problem(failed, ProblemKind.RECORD)
        topo = col.secondary(_by(parse_topo), "info", "-t", "topo")
        soft_sliced = any(c.npu_id == _HAMI_SOFT_SLICE_NPU_ID for c in info.chips) or any(
            "limiter" in ln for ln in info.preamble
        )
        read_board = _truthy(self.config.option("board", False))
        # MCU rows of -m are not devices.
        chips = [c for c in info.chips if not ((m := mapping.get((c.npu_id, c.chip_id))) and m.is_mcu)]

        def details(chip: NpuChip) -> tuple[tuple[str, ...], BoardInfo | None]:
            # Ascend 950 takes no -c (SwanHubX/SwanLab#1719); the others name the chip.
            where = ("-i", str(chip.npu_id), "-c", str(chip.chip_id)) if chip.chip_printed else ("-i", str(chip.npu_id))
            board = col.secondary(_by(parse_board), "info", "-t", "board", *where) if read_board else None
            codes: tuple[str, ...] = ()
            if (chip.health or "").upper() != "OK":
                detail = col.secondary(_by(parse_health), "info", "-t", "health", *where)
                codes = detail.error_codes if detail is not None else ()
            return codes, board

        def affinity(chip: NpuChip, logic_id: int) -> str | None:
            if topo is None:
                return None
            labels = (f"NPU{chip.npu_id}", f"Phy-ID{chip.phy_id}", f"NPU{logic_id}")
            return next((topo.affinity[lb] for lb in labels if lb in topo.affinity), None)

        readings = self._readings(col, chips, mapping, info, soft_sliced, details, affinity)
        built, samples, devices = self._built(col, readings, info.driver_version)
        links: list[Link] = []
        if topo is not None:
            links, _ = matrix_links(topo, _label_map(topo, devices, chips), _LINK_CODES)
        rows = [
            ProcessRow(devices[(p.npu_id, p.chip_id)].index or 0, p.pid, p.name, p.memory_bytes, p.line)
            for p in info.processes
            if (p.npu_id, p.chip_id) in devices
        ]
        processes = processes_of(rows, devices.values(), problems=col.problems, tool=TOOL)
        links, domains = _with_domains(links, devices)
        parts: list[Partition] = []
        profiles: list[PartitionProfile] = []
        if _truthy(self.config.option("vnpu", False)):
            profiles, parts = _read_vnpus(col, devices.values())
        return col.snapshot(
            built, samples, links=links, domains=domains, processes=processes, partitions=parts, profiles=profiles
        )

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The DCMI read: the same records, assembly, ids and health rules as the npu-smi path."""
        read = _native.read_dcmi(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        info = NpuSmiInfo(None, read.driver_version, tuple(c.chip for c in read.chips))
        mapping = {(c.chip.npu_id, c.chip.chip_id): c.mapping for c in read.chips}
        by_key = {(c.chip.npu_id, c.chip.chip_id): c for c in read.chips}
        soft_sliced = any(c.npu_id == _HAMI_SOFT_SLICE_NPU_ID for c in info.chips)
        readings = self._readings(
            col,
            list(info.chips),
            mapping,
            info,
            soft_sliced,
            lambda chip: (by_key[(chip.npu_id, chip.chip_id)].error_codes, None),
            lambda chip, _logic: by_key[(chip.npu_id, chip.chip_id)].cpu_affinity,
        )
        ids = {key: r.stable_id(self.vendor or self.backend_name) for key, r in readings.items()}
        self._native_ids = ids
        self.native_events(0.0)
        for key, r in readings.items():
            got = by_key[key]
            r.conditions.extend(got.conditions)
            r.conditions.extend(self.event_conditions(ids[key]))
            r.ecc_uncorrected_total = got.ecc_uncorrected_total
            r.ecc_enabled = got.ecc_enabled
            r.health_read = r.health_read or got.health_read
            for name in ("temperature_celsius", "utilization_ratio", "memory_used_bytes"):
                r.dropped.discard(name)  # DCMI answered NOT_SUPPORT: never, not this time
        built, samples, devices = self._built(col, readings, read.driver_version, native=True)
        codes = {(ids[a], ids[b]): code for (a, b), code in read.topo.items() if a in ids and b in ids}
        labels = tuple(dict.fromkeys(ids.values()))
        matrix = Matrix(labels, {**codes, **{(b, a): c for (a, b), c in codes.items()}})
        links, _ = matrix_links(matrix, {d.id: d.id for d in devices.values()}, _LINK_CODES)
        links, domains = _with_domains(links, devices)
        return col.snapshot(built, samples, links=links, domains=domains)

    # -- vNPU actuation (SupportsPartitionActuation; see ._vnpu) ----------------------------------
    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        super().__init__(config, runner)
        #: One create / destroy at a time: each reads the chip, then changes it.
        self._vnpu_lock = threading.Lock()
        self._vnpu_carver = VnpuCarver(
            lambda: ToolSession(
                self.runner, self.tool_name(), search_path=self._search, timeout_s=self.config.tool_timeout_s
            )
        )

    def _vnpu_option(self) -> None:
        if not _truthy(self.config.option("vnpu", False)):
            from accel.errors import NotSupportedError

            raise NotSupportedError(
                "ascend: vNPU actuation needs option vnpu=1 (-o vnpu=1), so that every inventory lists the "
                "vNPUs it makes"
            )

    def partitions(self) -> tuple[Partition, ...]:
        """Live vNPUs, from the same read as the inventory (none without option ``vnpu``)."""
        return self.snapshot().partitions

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        """vNPU templates as profiles, from the same read as the inventory (option ``vnpu``)."""
        return self.snapshot().profiles

    def create_partition(self, device_id: str, profile: str, *, placement_start: int | None = None) -> Partition:
        """Cut one vNPU of template ``profile`` from chip ``device_id`` (``npu-smi set -t create-vnpu``)."""
        from accel.errors import DeviceError

        self._vnpu_option()
        carver = self._vnpu_carver
        with self._vnpu_lock:
            snap = self.snapshot()
            dev = next((d for d in snap.devices if d.id == device_id), None)
            if dev is None:
                raise DeviceError(f"no Ascend device {device_id!r}", device_id=device_id)
            return carver.create(dev, profile, snap.processes, placement_start)

    def destroy_partition(self, partition_id: str) -> None:
        """Destroy vNPU ``partition_id`` (``<device id>/vnpu<N>``) with ``npu-smi set -t destroy-vnpu``."""
        from accel.errors import PartitionNotFoundError

        self._vnpu_option()
        carver = self._vnpu_carver
        with self._vnpu_lock:
            parent, _, _ = partition_id.rpartition("/vnpu")
            dev = next((d for d in self.snapshot().devices if d.id == parent), None)
            if dev is None:
                raise PartitionNotFoundError(f"no partition {partition_id!r}", partition_id=partition_id)
            carver.destroy(dev, partition_id)

    def read_events(self, lib: NativeLibrary, timeout_s: float) -> Sequence[DeviceEvent]:
        ids = getattr(self, "_native_ids", None)
        if not ids:
            return ()
        if getattr(self, "_dcmi_faults", None) is None:
            self._dcmi_faults = _native.FaultEvents(lib)
        now = datetime.now(UTC)
        try:
            found = self._dcmi_faults.poll(ids)
        except AccelError:
            return ()
        return [DeviceEvent(device_id=dev_id, timestamp=now, condition=cond) for dev_id, cond in found]

    def _readings(
        self,
        col: Collection,
        chips: Sequence[NpuChip],
        mapping: dict[tuple[int, int], ChipMapping],
        info: NpuSmiInfo,
        soft_sliced: bool,
        details: Callable[[NpuChip], tuple[tuple[str, ...], BoardInfo | None]],
        affinity: Callable[[NpuChip, int], str | None],
    ) -> dict[tuple[int, int], UnitReading]:
        """One reading per chip (both paths): logic ids, health, the 310P Duo id suffix."""
        readings: dict[tuple[int, int], UnitReading] = {}
        used_ids: set[str] = set()
        for chip in chips:
            mapped = mapping.get((chip.npu_id, chip.chip_id))
            # Without -m the logic id is the chip's place among the table's chip records (the
            # runtime numbers the chips it sees 0..n-1 in that order; the NPU id is a card/slot
            # number, not this).
            logic_id = mapped.logic_id if mapped is not None and mapped.logic_id is not None else chip.position
            if (chip.npu_id, chip.chip_id) in readings:
                # Two records claim one chip (a mangled NPU id): neither may silently replace
                # the other.  This one is reported and, by its bus id, still listed.
                err = _record_error(f"NPU {chip.npu_id} chip {chip.chip_id} is printed twice", chip)
                err.device_index, err.bus_id = None, chip.bus_id
                col.problem(err, ProblemKind.RECORD)
                continue
            codes, board = details(chip)
            r = _reading(chip, logic_id, mapped, info, codes, soft_sliced)
            if board is not None:
                r.uuid = board.uuid
                if board.firmware_version:
                    r.firmware["npu"] = board.firmware_version
            if r.uuid is None and r.bus_id is None:
                err = _record_error(
                    f"NPU {chip.npu_id} chip {chip.chip_id} has neither a die id nor a bus id "
                    "(Bus-Id printed as NA; option board=true reads the die id)",
                    chip,
                )
                # Still identified by its logic id, and listed by it with health unknown.
                err.device_index, err.bus_id = logic_id, None
                col.problem(err, ProblemKind.DEVICE)
                continue
            dev_id = r.stable_id(self.vendor)
            if dev_id in used_ids:  # 310P Duo chips can share one BDF
                r.id_suffix = f"-chip{chip.chip_id}"
            used_ids.add(r.stable_id(self.vendor))
            r.cpu_affinity = affinity(chip, logic_id)
            readings[(chip.npu_id, chip.chip_id)] = r
        return readings

    def _built(
        self,
        col: Collection,
        readings: dict[tuple[int, int], UnitReading],
        driver_version: str | None,
        *,
        native: bool = False,
    ) -> tuple[list[Device], list[Telemetry], dict[tuple[int, int], Device]]:
        built, samples = self.build(
            col,
            readings.values(),
            versions={"driver": driver_version},
            per_unit=_per_unit,
            telemetry_unsupported=_NATIVE_NOT_READ if native else _NOT_PRINTED,
        )
        by_id = {d.id: d for d in built}
        devices = {key: by_id[ids] for key, r in readings.items() if (ids := r.stable_id(self.vendor)) in by_id}
        return built, samples, devices


def _read_vnpus(col: Collection, devices: Iterable[Device]) -> tuple[list[PartitionProfile], list[Partition]]:
    """Templates (once per chip model) and vNPUs (per chip) of the vNPU-capable chips, as secondary
    views: a view that fails or is refused (vNPU mode off) is a ``command`` problem."""
    profiles: list[PartitionProfile] = []
    parts: list[Partition] = []
    # Templates are per product (the chip's model and bin): one template-info per model printed.
    templates: dict[str, list[VnpuTemplate] | None] = {}
    for dev in devices:
        chip = vnpu_chip(dev)
        if chip is None:
            continue
        if dev.model not in templates:
            templates[dev.model] = col.secondary(
                _by(parse_template_info), "info", "-t", "template-info", "-i", str(chip.npu_id)
            )
        tmpl = templates[dev.model]
        info = col.secondary(_by(parse_info_vnpu), "info", "-t", "info-vnpu", *chip.where)
        if tmpl is not None:
            profiles += profiles_of(chip, tmpl, info)
        if info is not None:
            parts += partitions_of(chip, tmpl or [], info)
    return profiles, parts


def _with_domains(links: list[Link], devices: dict[tuple[int, int], Device]) -> tuple[list[Link], list[Domain]]:
    """HCCS-switch links go through the switch; HCCS groups and die pairs become domains."""
    links = [_via_switch(lk) if lk.type is LinkType.HCCS_SWITCH else lk for lk in links]
    order = [d.id for d in devices.values()]
    hccs = [lk for lk in links if lk.type in (LinkType.HCCS, LinkType.HCCS_SWITCH)]
    domains = link_domains(hccs, DomainKind.HCCS_GROUP, prefix="hccs-group", order=order)
    sio = [lk for lk in links if lk.type is LinkType.SIO]
    domains += link_domains(sio, DomainKind.DIE_PAIR, prefix="die-pair", order=order)
    return links, domains


def _by(parse: Callable[..., P]) -> Callable[[str, str], P]:
    """A ``(text, command)`` parser for :class:`Collection` from ``parse(text, command=...)``."""
    return lambda text, command: parse(text, command=command)


def _via_switch(link: Link) -> Link:
    """An HCCS_SW cell is a link through the HCCS switch."""
    return Link.model_validate({**dict(link), "via": "hccs-switch"})


def _record_error(message: str, chip: NpuChip) -> ParseError:
    return ParseError(message, tool=TOOL, command="npu-smi info", line=chip.line.text, lineno=chip.line.lineno)


def _reading(
    chip: NpuChip,
    logic_id: int,
    mapped: ChipMapping | None,
    info: NpuSmiInfo,
    codes: tuple[str, ...],
    soft_sliced: bool,
) -> UnitReading:
    """One chip as the runtime schedules it: index is the logic id, the NPU id its board."""
    # /dev/davinciN is numbered by the physical id (Phy-ID on A3, the Device column on older
    # layouts); 910B tables print neither, where it equals the logic id on a bare host.
    dev_no = chip.phy_id if chip.phy_id is not None else chip.device_id if chip.device_id is not None else logic_id
    # 910B/910C print DDR "0 / 0": no DDR is visible to the runtime, so no region.  The
    # telemetry sample reads HBM where there is HBM, else DDR.
    hbm = chip.hbm_total_bytes not in (None, 0)
    r = UnitReading(
        index=logic_id,
        model=_model_name(chip, mapped),
        family="Ascend",
        bus_id=chip.bus_id,
        pci_vendor_id="19e5" if chip.bus_id else None,
        board_id=f"ascend:npu-{chip.npu_id}",
        memory_kind=MemoryKind.HBM if hbm else MemoryKind.DDR,
        memory_total_bytes=chip.hbm_total_bytes if hbm else chip.ddr_total_bytes,
        memory_used_bytes=chip.hbm_used_bytes if hbm else chip.ddr_used_bytes,
        utilization_ratio=chip.aicore_ratio,
        temperature_celsius=chip.temperature_celsius,
        power_watts=chip.power_watts,
        device_nodes=[f"/dev/davinci{dev_no}", *_SHARED_NODES],
        conditions=_conditions(chip, codes),
        # The Health column is a health reading (OK / Warning / Alarm / Critical): earned, read
        # now.  A record without a value read nothing.
        health_read=clean_health(chip),
    )
    if hbm and chip.ddr_total_bytes:
        r.other_memory.append((MemoryKind.DDR, chip.ddr_total_bytes, chip.ddr_used_bytes))
    # npu-smi prints a placeholder ('-', 'NA') for power where the chip cannot report it (the
    # second die of an A3 NPU, whose power is the NPU's on the first; 310P3 cards): never, not
    # "not this time", so an empty power is unsupported.  Other empty cells are this time only.
    for name in ("temperature_celsius", "utilization_ratio", "memory_used_bytes"):
        if getattr(r, name) is None:
            r.dropped.add(name)
    r.extras.update(
        {
            "huawei.com/npuId": chip.npu_id,
            "huawei.com/chipId": chip.chip_id,
            "huawei.com/chipLogicId": logic_id,
            # Where the logic id came from: "npu-smi info -m" (printed), else "table-order".
            "huawei.com/chipLogicIdSource": "npu-smi info -m"
            if mapped is not None and mapped.logic_id is not None
            else "table-order",
        }
    )
    for key, value in (
        ("chipPhyId", chip.phy_id),
        ("chipName", chip.name or None),
        ("hugepagesTotal", chip.hugepages_total),
        ("hugepagesUsed", chip.hugepages_used),
        ("npuSmiVersion", info.tool_version or None),
    ):
        if value is not None:
            r.extras[f"huawei.com/{key}"] = value
    if soft_sliced:
        # Inside a HAMi soft slice the tool shows the quota, not the chip.
        r.extras["huawei.com/softSliced"] = True
    return r


def _per_unit(r: UnitReading) -> dict[str, object]:
    """The die id, read with ``board=true``, is what the uuid field holds (no serial then)."""
    out: dict[str, object] = {"supported": {"uuid", "serial_number"} if r.uuid else {"uuid"}}
    if r.extras.get("huawei.com/softSliced"):
        out["sharing"] = {"mode": SharingMode.VENDOR_SHARE, "divisible_memory": True, "divisible_compute": True}
    return out


def _model_name(chip: NpuChip, mapped: ChipMapping | None) -> str:
    name = chip.name
    if mapped is not None and mapped.name and (name is None or is_masked(name)) and not is_masked(mapped.name):
        name = mapped.name  # the table masked it ("xxx") but -m did not ("Ascend 910A")
    name = name or "unknown"
    # npu-smi info prints "910B3"; -m prints "Ascend 910A"; A3 dies print "Ascend910".
    return name if name.lower().startswith("ascend") else f"Ascend {name}"


def _conditions(chip: NpuChip, codes: Sequence[str]) -> list[HealthCondition]:
    status = (chip.health or "").strip()
    if status.upper() == "OK":
        return []
    if not status:
        return [
            HealthCondition(
                subsystem=Subsystem.MONITORING,
                reason="HealthNotReported",
                severity=Severity.WARNING,
                message=f"npu-smi printed no Health value for NPU {chip.npu_id} chip {chip.chip_id}",
            )
        ]
    severity, reason, action = _HEALTH.get(
        status.lower(), (Severity.WARNING, "NpuHealthUnknownStatus", Action.INVESTIGATE)
    )
    out = [
        HealthCondition(
            subsystem=Subsystem.DEVICE,
            reason=reason,
            severity=severity,
            action=action,
            vendor_code=f"huawei.npu:{status}",
            message=f"npu-smi reports Health {status!r} for NPU {chip.npu_id} chip {chip.chip_id}",
        )
    ]
    out.extend(
        HealthCondition(
            subsystem=Subsystem.DEVICE,
            reason="NpuErrorCode",
            severity=severity,
            action=action,
            vendor_code=f"huawei.npu:{code}",
            message=f"error code {code} on NPU {chip.npu_id} chip {chip.chip_id}",
        )
        for code in codes
    )
    return out


def clean_health(chip: NpuChip) -> bool:
    """Whether the chip's record printed a Health value."""
    return bool((chip.health or "").strip())


def _label_map(topo: TopoMatrix, devices: dict[tuple[int, int], Device], chips: Sequence[NpuChip]) -> dict[str, str]:
    """Matrix label -> device id.  ``Phy-IDn`` names a chip by physical id; ``NPUn`` names the
    single chip of NPU id n (910A/910B), else the chip with logic id n."""
    out: dict[str, str] = {}
    by_phy = {
        c.phy_id: devices[(c.npu_id, c.chip_id)]
        for c in chips
        if c.phy_id is not None and (c.npu_id, c.chip_id) in devices
    }
    by_npu: dict[int, list[Device]] = {}
    for (npu, _chip), each in devices.items():
        by_npu.setdefault(npu, []).append(each)
    by_logic = {d.index: d for d in devices.values()}
    for label in topo.labels:
        n = topo.label_index(label)
        if n is None:
            continue
        found: Device | None
        if label.lower().startswith("phy"):
            found = by_phy.get(n) or by_logic.get(n)
        else:
            single = by_npu.get(n, [])
            found = single[0] if len(single) == 1 else by_logic.get(n)
        if found is not None:
            out[label] = found.id
    return out


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def _failed_logic_id(exc: ParseError, info: NpuSmiInfo, mapping: dict[tuple[int, int], ChipMapping]) -> int | None:
    """The logic id of a chip whose record did not parse: from ``-m`` when the record's NPU id
    names exactly one chip there, else the record's place among the chip records."""
    npu = exc.device_index  # what the record's first cell showed: the NPU id
    if npu is not None and mapping:
        chips = [m for (n, _c), m in mapping.items() if n == npu and not m.is_mcu]
        if len(chips) == 1 and chips[0].logic_id is not None:
            return chips[0].logic_id
    return info.position_of(exc)
