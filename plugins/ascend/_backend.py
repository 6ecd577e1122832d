"""The Ascend backend: ``npu-smi`` outputs made into accel model objects.

Per snapshot the backend runs (``tool_invocations`` in the inventory's source says how many):

1. ``npu-smi info`` - every chip with health, power, temperature, DDR and HBM, bus id, and
   the process table (required: without it there is no inventory);
2. ``npu-smi info -m`` - chip logic ids (what ``ASCEND_RT_VISIBLE_DEVICES`` counts) and MCU
   rows, which are not devices (optional: without it logic ids follow table order);
3. ``npu-smi info -t topo`` - HCCS / SIO / HCCS_SW / PCIe links and CPU affinity (optional);
4. only for chips whose Health is not ``OK``: ``npu-smi info -t health -i N -c C`` for the
   error codes (optional);
5. only with ``options["board"]`` true: ``npu-smi info -t board -i N -c C`` per chip for the
   VDie ID, which then becomes the stable id (one run per chip, so off by default; without it
   the id is the PCI address).

So a healthy 8x 910B host costs 3 runs.  The schedulable unit is the chip the runtime sees
(logic id); its NPU id (card or module) is kept in ``board_id``, so 310 (4 chips), 310P Duo
(2 chips) and 910C (2 dies) keep their package relation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from accel.errors import AccelError, ParseError, ToolError
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
    ProcessUsage,
    Severity,
    SharingMode,
    Subsystem,
    Telemetry,
    device_id_for,
    validate,
)
from accel.plugin import BackendConfig
from accel.tools import Runner

from .._cli import ProcessesSurface, Snapshot, ToolSession, is_masked, source_info
from ._parse import (
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

__all__ = ["NPU_SMI_PATHS", "AscendBackend", "collect"]

VENDOR = "huawei"
PLUGIN_VERSION = "0.1.0"
NPU_SMI_PATHS = ("/usr/local/bin", "/usr/local/sbin", "/usr/sbin")
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


def _memory(chip: NpuChip) -> list[dict[str, Any]]:
    regions: list[dict[str, Any]] = []
    # 910B/910C print DDR "0 / 0": no DDR is visible to the runtime, so no region.
    if chip.hbm_total_bytes:
        regions.append({"kind": MemoryKind.HBM, "total_bytes": chip.hbm_total_bytes, "used_bytes": chip.hbm_used_bytes})
    if chip.ddr_total_bytes:
        regions.append({"kind": MemoryKind.DDR, "total_bytes": chip.ddr_total_bytes, "used_bytes": chip.ddr_used_bytes})
    return regions


def _device_nodes(dev_no: int | None) -> tuple[str, ...]:
    shared = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
    return ((f"/dev/davinci{dev_no}",) if dev_no is not None else ()) + shared


def _build_device(
    chip: NpuChip,
    *,
    logic_id: int,
    mapped: ChipMapping | None,
    info: NpuSmiInfo,
    uuid: str | None,
    dev_id: str,
    codes: Sequence[str],
    affinity: str | None,
    firmware: str | None,
    soft_sliced: bool,
) -> Device:
    # /dev/davinciN is numbered by the physical id (Phy-ID on A3, the Device column on older
    # layouts); 910B tables print neither, where it equals the logic id on a bare host.
    dev_no = chip.phy_id if chip.phy_id is not None else chip.device_id if chip.device_id is not None else logic_id
    extras: dict[str, str | int | float | bool] = {
        "huawei.com/npuId": chip.npu_id,
        "huawei.com/chipId": chip.chip_id,
        "huawei.com/chipLogicId": logic_id,
    }
    if chip.phy_id is not None:
        extras["huawei.com/chipPhyId"] = chip.phy_id
    if chip.name:
        extras["huawei.com/chipName"] = chip.name
    if chip.hugepages_total is not None:
        extras["huawei.com/hugepagesTotal"] = chip.hugepages_total
    if chip.hugepages_used is not None:
        extras["huawei.com/hugepagesUsed"] = chip.hugepages_used
    if info.tool_version:
        extras["huawei.com/npuSmiVersion"] = info.tool_version
    sharing: dict[str, Any] = {}
    if soft_sliced:
        # Inside a HAMi soft slice the tool shows the quota, not the chip.
        sharing = {"mode": SharingMode.VENDOR_SHARE, "divisible_memory": True, "divisible_compute": True}
        extras["huawei.com/softSliced"] = True
    data: dict[str, Any] = {
        "id": dev_id,
        "vendor": VENDOR,
        "kind": DeviceKind.NPU,
        "model": _model_name(chip, mapped),
        "index": logic_id,
        "uuid": uuid,
        "family": "Ascend",
        "pci": {"bus_id": chip.bus_id, "vendor_id": "19e5"} if chip.bus_id else None,
        "cpu_affinity": affinity,
        "board_id": f"ascend:npu-{chip.npu_id}",
        "versions": {
            "driver": info.driver_version,
            "firmware": {"npu": firmware} if firmware else {},
        },
        "memory": _memory(chip),
        "sharing": sharing,
        "binding": {
            "visible_env": "ASCEND_RT_VISIBLE_DEVICES",
            "visible_id": str(logic_id),
            "torch_device_type": "npu",
            "collective_backend": "hccl",
            "ray_resource": "NPU",
            "device_nodes": _device_nodes(dev_no),
        },
        "health": {"conditions": _conditions(chip, codes)},
        "extras": extras,
        "unsupported": frozenset({"architecture"} | ({"serial_number"} if uuid is None else set())),
    }
    return validate(Device, data, what=f"ascend device NPU {chip.npu_id} chip {chip.chip_id}")


def _telemetry(dev: Device, chip: NpuChip, now: datetime) -> Telemetry:
    # npu-smi prints a placeholder ('-', 'NA') for power where the chip cannot report it (the
    # second die of an A3 NPU, whose power is the NPU's on the first; 310P3 cards): never, not
    # "not this time".  Garbage in the cell is a ParseError, so None here means the placeholder.
    no_power = {"power_watts"} if chip.power_watts is None else set()
    hbm = chip.hbm_total_bytes not in (None, 0)
    used = chip.hbm_used_bytes if hbm else chip.ddr_used_bytes
    total = chip.hbm_total_bytes if hbm else chip.ddr_total_bytes
    return validate(
        Telemetry,
        {
            "device_id": dev.id,
            "timestamp": now,
            "utilization_ratio": chip.aicore_ratio,
            "memory_used_bytes": used,
            "memory_total_bytes": total,
            "memory_free_bytes": (total - used) if used is not None and total is not None else None,
            "power_watts": chip.power_watts,
            "temperature_celsius": chip.temperature_celsius,
            "unsupported": frozenset(
                {
                    "energy_joules",
                    "fan_ratio",
                    "clocks_hertz",
                    "temperatures_celsius",
                    "throttle_reasons",
                    "pcie_rx_bytes_per_s",
                    "pcie_tx_bytes_per_s",
                    "pcie_replay_total",
                    "ecc_corrected_total",
                    "ecc_uncorrected_total",
                    "retired_pages_total",
                    "links",
                    "memory_utilization_ratio",
                }
                | no_power
            ),
        },
        what=f"ascend telemetry of {dev.id}",
    )


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


def _links(topo: TopoMatrix, ids: dict[str, str]) -> list[Link]:
    seen: dict[frozenset[str], Link] = {}
    for (ra, cb), code in topo.codes.items():
        a, b = ids.get(ra), ids.get(cb)
        lt = _LINK_CODES.get(code)
        if a is None or b is None or a == b or lt is None:
            continue
        key = frozenset((a, b))
        if key in seen:
            continue
        x, y = sorted(key)
        via = "hccs-switch" if lt is LinkType.HCCS_SWITCH else None
        seen[key] = Link(a=x, b=y, type=lt, via=via)
    return sorted(seen.values(), key=lambda lk: (lk.a, lk.b))


def _components(members: Iterable[str], links: Iterable[Link], order: Sequence[str]) -> list[list[str]]:
    """Connected groups over ``links`` (breadth-first), in device order, groups of 2+."""
    adj: dict[str, set[str]] = {m: set() for m in members}
    for lk in links:
        adj.setdefault(lk.a, set()).add(lk.b)
        adj.setdefault(lk.b, set()).add(lk.a)
    rank = {d: i for i, d in enumerate(order)}
    done: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(adj, key=lambda d: rank.get(d, len(rank))):
        if start in done or not adj[start]:
            continue
        frontier, group = [start], []
        done.add(start)
        while frontier:
            node = frontier.pop(0)
            group.append(node)
            for nxt in sorted(adj[node] - done):
                done.add(nxt)
                frontier.append(nxt)
        groups.append(sorted(group, key=lambda d: rank.get(d, len(rank))))
    return groups


def _domains(links: list[Link], order: Sequence[str]) -> list[Domain]:
    hccs = [lk for lk in links if lk.type in (LinkType.HCCS, LinkType.HCCS_SWITCH)]
    sio = [lk for lk in links if lk.type is LinkType.SIO]
    out = [
        Domain(id=f"hccs-group-{i}", kind=DomainKind.HCCS_GROUP, members=tuple(g))
        for i, g in enumerate(_components(order, hccs, order))
    ]
    out.extend(
        Domain(id=f"die-pair-{i}", kind=DomainKind.DIE_PAIR, members=tuple(g))
        for i, g in enumerate(_components(order, sio, order))
    )
    return out


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def collect(session: ToolSession, config: BackendConfig) -> Snapshot:
    """Run the tools once (see the module docstring) and build a :class:`Snapshot`."""
    start = session.invocations
    now = datetime.now(UTC)
    notes: list[str] = []
    info = parse_info(session.run("info").stdout)
    notes.extend(f"skipped: {e}" for e in info.errors)
    mapping: dict[tuple[int, int], ChipMapping] = {}
    res = session.optional("info", "-m", notes=notes)
    if res is not None:
        try:
            mapping = {(m.npu_id, m.chip_id): m for m in parse_mapping(res.stdout)}
        except ParseError as exc:
            notes.append(f"ignored npu-smi info -m: {exc}")
    topo: TopoMatrix | None = None
    res = session.optional("info", "-t", "topo", notes=notes)
    if res is not None:
        try:
            topo = parse_topo(res.stdout)
        except ParseError as exc:
            notes.append(f"ignored npu-smi info -t topo: {exc}")
    soft_sliced = any(c.npu_id == _HAMI_SOFT_SLICE_NPU_ID for c in info.chips) or any(
        "limiter" in ln for ln in info.preamble
    )
    read_board = _truthy(config.option("board", False))
    devices: dict[tuple[int, int], Device] = {}
    telemetry: list[Telemetry] = []
    chips = [
        c for c in info.chips if not (mapping.get((c.npu_id, c.chip_id)) and mapping[(c.npu_id, c.chip_id)].is_mcu)
    ]
    used_ids: set[str] = set()
    for position, chip in enumerate(chips):
        try:
            mapped = mapping.get((chip.npu_id, chip.chip_id))
            logic_id = mapped.logic_id if mapped is not None and mapped.logic_id is not None else position
            uuid = firmware = None
            if read_board:
                b = session.optional(
                    "info", "-t", "board", "-i", str(chip.npu_id), "-c", str(chip.chip_id), notes=notes
                )
                if b is not None:
                    board = parse_board(b.stdout)
                    uuid, firmware = board.uuid, board.firmware_version
            codes: tuple[str, ...] = ()
            if (chip.health or "").upper() != "OK":
                h = session.optional(
                    "info", "-t", "health", "-i", str(chip.npu_id), "-c", str(chip.chip_id), notes=notes
                )
                if h is not None:
                    codes = parse_health(h.stdout).error_codes
            dev_id = device_id_for(VENDOR, uuid=uuid, bus_id=chip.bus_id) if (uuid or chip.bus_id) else None
            if dev_id is None:
                raise ParseError(f"NPU {chip.npu_id} chip {chip.chip_id} has neither a die id nor a bus id")
            if dev_id in used_ids:  # 310P Duo chips can share one BDF
                dev_id = f"{dev_id}-chip{chip.chip_id}"
            affinity = None
            if topo is not None:
                for label in (f"NPU{chip.npu_id}", f"Phy-ID{chip.phy_id}", f"NPU{logic_id}"):
                    if label in topo.affinity:
                        affinity = topo.affinity[label]
                        break
            dev = _build_device(
                chip,
                logic_id=logic_id,
                mapped=mapped,
                info=info,
                uuid=uuid,
                dev_id=dev_id,
                codes=codes,
                affinity=affinity,
                firmware=firmware,
                soft_sliced=soft_sliced,
            )
            used_ids.add(dev.id)
            devices[(chip.npu_id, chip.chip_id)] = dev
            telemetry.append(_telemetry(dev, chip, now))
        except ToolError:
            raise  # a hung or broken tool is the snapshot's failure, not one device's
        except AccelError as exc:
            notes.append(f"skipped NPU {chip.npu_id} chip {chip.chip_id}: {exc}")
    order = [d.id for d in devices.values()]
    links: list[Link] = []
    domains: list[Domain] = []
    if topo is not None:
        links = _links(topo, _label_map(topo, devices, chips))
        domains = _domains(links, order)
    processes = [
        ProcessUsage(pid=p.pid, device_id=devices[(p.npu_id, p.chip_id)].id, name=p.name, memory_bytes=p.memory_bytes)
        for p in info.processes
        if (p.npu_id, p.chip_id) in devices
    ]
    source = source_info(
        "ascend", version=PLUGIN_VERSION, api="npu-smi", api_version=info.tool_version, notes=notes,
        calls=session.invocations - start,
    )
    return Snapshot(
        devices=tuple(devices.values()),
        telemetry=tuple(telemetry),
        links=tuple(links),
        domains=tuple(domains),
        processes=tuple(processes),
        source=source,
        collected_at=now,
    )


class AscendBackend(ProcessesSurface):
    """An open Ascend backend over a runner (real, replayed or recording)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.session = ToolSession(runner, "npu-smi", search_path=NPU_SMI_PATHS, timeout_s=config.tool_timeout_s)
        super().__init__("ascend", lambda: collect(self.session, config), config=config, runner=runner)
