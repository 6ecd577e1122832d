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
   the id is the PCI address).

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

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from accel.errors import AccelError, ParseError, ReplayMissingError, ToolError, ToolTimeoutError
from accel.model import (
    Action,
    Binding,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    Health,
    HealthCondition,
    Link,
    LinkType,
    MemoryKind,
    ProblemKind,
    ProcessUsage,
    Severity,
    SharingMode,
    Subsystem,
    Telemetry,
    device_id_for,
)
from accel.plugin import BackendConfig
from accel.tools import Runner, ToolResult

from .._cli import ProcessesSurface, Snapshot, ToolSession, is_masked, source_info, validated, with_census
from .._cli._problems import problem_of, unread_units
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


_SHARED_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")


def _binding(logic_id: int | None) -> Binding:
    """How a runtime addresses a chip: ``ASCEND_RT_VISIBLE_DEVICES`` takes the logic id."""
    return Binding(
        visible_env="ASCEND_RT_VISIBLE_DEVICES",
        visible_id=str(logic_id) if logic_id is not None else None,
        torch_device_type="npu",
        collective_backend="hccl",
        ray_resource="NPU",
        device_nodes=_SHARED_NODES,
    )


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


def _memory(chip: NpuChip) -> list[dict[str, Any]]:
    regions: list[dict[str, Any]] = []
    # 910B/910C print DDR "0 / 0": no DDR is visible to the runtime, so no region.
    if chip.hbm_total_bytes:
        regions.append({"kind": MemoryKind.HBM, "total_bytes": chip.hbm_total_bytes, "used_bytes": chip.hbm_used_bytes})
    if chip.ddr_total_bytes:
        regions.append({"kind": MemoryKind.DDR, "total_bytes": chip.ddr_total_bytes, "used_bytes": chip.ddr_used_bytes})
    return regions


def _device_nodes(dev_no: int | None) -> tuple[str, ...]:
    return ((f"/dev/davinci{dev_no}",) if dev_no is not None else ()) + _SHARED_NODES


def _build_device(
    chip: NpuChip,
    *,
    logic_id: int,
    mapped: ChipMapping | None,
    info: NpuSmiInfo,
    now: datetime,
    uuid: str | None,
    dev_id: str,
    codes: Sequence[str],
    affinity: str | None,
    firmware: str | None,
    soft_sliced: bool,
    problems: list[AccelError],
) -> Device:
    # /dev/davinciN is numbered by the physical id (Phy-ID on A3, the Device column on older
    # layouts); 910B tables print neither, where it equals the logic id on a bare host.
    dev_no = chip.phy_id if chip.phy_id is not None else chip.device_id if chip.device_id is not None else logic_id
    extras: dict[str, str | int | float | bool] = {
        "huawei.com/npuId": chip.npu_id,
        "huawei.com/chipId": chip.chip_id,
        "huawei.com/chipLogicId": logic_id,
        # Where the logic id came from: "npu-smi info -m" (printed), else "table-order".
        "huawei.com/chipLogicIdSource": "npu-smi info -m"
        if mapped is not None and mapped.logic_id is not None
        else "table-order",
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
        # The Health column is a health reading (OK / Warning / Alarm / Critical): earned, read
        # now.  A record without a value read nothing.
        "health": Health.read(now, tuple(_conditions(chip, codes)))
        if clean_health(chip)
        else {"monitored": False, "conditions": _conditions(chip, codes)},
        "extras": extras,
        "unsupported": frozenset({"architecture"} | ({"serial_number"} if uuid is None else set())),
    }
    return validated(
        Device, data, what=f"ascend device NPU {chip.npu_id} chip {chip.chip_id}", tool="npu-smi", device_id=dev_id,
        problems=problems,
    )


def _telemetry(dev: Device, chip: NpuChip, now: datetime, problems: list[AccelError]) -> Telemetry:
    # npu-smi prints a placeholder ('-', 'NA') for power where the chip cannot report it (the
    # second die of an A3 NPU, whose power is the NPU's on the first; 310P3 cards): never, not
    # "not this time".  Garbage in the cell is a ParseError, so None here means the placeholder.
    no_power = {"power_watts"} if chip.power_watts is None else set()
    hbm = chip.hbm_total_bytes not in (None, 0)
    used = chip.hbm_used_bytes if hbm else chip.ddr_used_bytes
    total = chip.hbm_total_bytes if hbm else chip.ddr_total_bytes
    return validated(
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
        tool="npu-smi",
        device_id=dev.id,
        problems=problems,
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


class _Problems:
    """What one collection could not read, as typed errors with their problem kind."""

    def __init__(self) -> None:
        self.errors: list[tuple[AccelError, ProblemKind]] = []
        self.notes: list[str] = []

    def add(self, exc: AccelError, kind: ProblemKind) -> None:
        self.errors.append((exc, kind))

    def optional(self, session: ToolSession, *args: str) -> ToolResult | None:
        """Run a secondary command: its failure is a ``command`` problem, not the snapshot's.

        A hung tool still raises.  A command a replay never recorded was never run on the host
        the replay comes from, so it is a note (``... : replay.missing``), not a problem."""
        try:
            return session.run(*args)
        except ToolTimeoutError:
            raise
        except ReplayMissingError as exc:
            self.notes.append(f"{' '.join([session.tool, *args])}: {exc.code}")
            return None
        except ToolError as exc:
            self.add(exc, ProblemKind.COMMAND)
            return None

    def parsed(self, exc: ParseError, command: str) -> None:
        """A secondary command's output that did not parse (the devices stand without it)."""
        if exc.command is None:
            exc.command = command
        self.add(exc, ProblemKind.RECORD if exc.lineno is not None else ProblemKind.COMMAND)


def _failed_logic_id(
    exc: ParseError, info: NpuSmiInfo, mapping: dict[tuple[int, int], ChipMapping]
) -> int | None:
    """The logic id of a chip whose record did not parse: from ``-m`` when the record's NPU id
    names exactly one chip there, else the record's place among the chip records."""
    npu = exc.device_index  # what the record's first cell showed: the NPU id
    if npu is not None and mapping:
        chips = [m for (n, _c), m in mapping.items() if n == npu and not m.is_mcu]
        if len(chips) == 1 and chips[0].logic_id is not None:
            return chips[0].logic_id
    return info.position_of(exc)


def collect(session: ToolSession, config: BackendConfig) -> Snapshot:
    """Run the tools once (see the module docstring) and build a :class:`Snapshot`."""
    start = session.invocations
    now = datetime.now(UTC)
    found = _Problems()
    info_text = session.run("info").stdout
    info = parse_info(info_text)
    mapping: dict[tuple[int, int], ChipMapping] = {}
    res = found.optional(session, "info", "-m")
    if res is not None:
        try:
            mapping = {(m.npu_id, m.chip_id): m for m in parse_mapping(res.stdout)}
        except ParseError as exc:
            found.parsed(exc, "npu-smi info -m")
    for failed in info.errors:
        # A chip record that did not parse: the chip is still identified by its logic id (its
        # bus id, when the record showed one, names it first).  A stray line (no record) has no
        # place; its leading number is an NPU id, which is a logic id only through -m.
        failed.device_index = _failed_logic_id(failed, info, mapping)
        found.add(failed, ProblemKind.RECORD)
    topo: TopoMatrix | None = None
    res = found.optional(session, "info", "-t", "topo")
    if res is not None:
        try:
            topo = parse_topo(res.stdout)
        except ParseError as exc:
            found.parsed(exc, "npu-smi info -t topo")
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
    out_of_bounds: list[AccelError] = []  # values no device can have, left out (field problems)
    for chip in chips:
        mapped = mapping.get((chip.npu_id, chip.chip_id))
        # ASCEND_RT_VISIBLE_DEVICES takes the chip logic id (docs/ascend.md): printed by -m;
        # without it, the chip's place among the table's chip records (the runtime numbers the
        # chips it sees 0..n-1 in that order; the NPU id is a card/slot number, not this).
        logic_id = mapped.logic_id if mapped is not None and mapped.logic_id is not None else chip.position
        try:
            if (chip.npu_id, chip.chip_id) in devices:
                # Two records claim one chip (a mangled NPU id): neither may silently replace
                # the other.  This one is reported and, by its bus id, still listed.
                err = ParseError(
                    f"NPU {chip.npu_id} chip {chip.chip_id} is printed twice",
                    tool="npu-smi",
                    command="npu-smi info",
                    line=chip.line.text,
                    lineno=chip.line.lineno,
                )
                err.device_index, err.bus_id = None, chip.bus_id
                found.add(err, ProblemKind.RECORD)
                continue
            uuid = firmware = None
            # Ascend 950 takes no -c (SwanHubX/SwanLab#1719); the others name the chip.
            where = ("-i", str(chip.npu_id), "-c", str(chip.chip_id)) if chip.chip_printed else ("-i", str(chip.npu_id))
            if read_board:
                b = found.optional(session, "info", "-t", "board", *where)
                if b is not None:
                    try:
                        board = parse_board(b.stdout)
                        uuid, firmware = board.uuid, board.firmware_version
                    except ParseError as exc:
                        found.parsed(exc, " ".join(["npu-smi", "info", "-t", "board", *where]))
            codes: tuple[str, ...] = ()
            if (chip.health or "").upper() != "OK":
                h = found.optional(session, "info", "-t", "health", *where)
                if h is not None:
                    try:
                        codes = parse_health(h.stdout).error_codes
                    except ParseError as exc:
                        found.parsed(exc, " ".join(["npu-smi", "info", "-t", "health", *where]))
            dev_id = device_id_for(VENDOR, uuid=uuid, bus_id=chip.bus_id) if (uuid or chip.bus_id) else None
            if dev_id is None:
                raise ParseError(
                    f"NPU {chip.npu_id} chip {chip.chip_id} has neither a die id nor a bus id "
                    "(Bus-Id printed as NA; option board=true reads the die id)",
                    tool="npu-smi",
                    command="npu-smi info",
                    line=chip.line.text,
                    lineno=chip.line.lineno,
                )
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
                now=now,
                uuid=uuid,
                dev_id=dev_id,
                codes=codes,
                affinity=affinity,
                firmware=firmware,
                soft_sliced=soft_sliced,
                problems=out_of_bounds,
            )
            used_ids.add(dev.id)
            devices[(chip.npu_id, chip.chip_id)] = dev
            telemetry.append(_telemetry(dev, chip, now, out_of_bounds))
        except ToolError:
            raise  # a hung or broken tool is the snapshot's failure, not one device's
        except AccelError as exc:
            if isinstance(exc, ParseError):
                # Still identified by its logic id (a bus id, when it had one, made it a device).
                exc.device_index, exc.bus_id = logic_id, None
            found.add(exc, ProblemKind.DEVICE)
    order = [d.id for d in devices.values()]
    links: list[Link] = []
    domains: list[Domain] = []
    if topo is not None:
        links = _links(topo, _label_map(topo, devices, chips))
        domains = _domains(links, order)
    processes = [
        validated(
            ProcessUsage,
            {
                "pid": p.pid,
                "device_id": devices[(p.npu_id, p.chip_id)].id,
                "name": p.name,
                "memory_bytes": p.memory_bytes,
            },
            what="ascend process",
            tool="npu-smi",
            device_id=devices[(p.npu_id, p.chip_id)].id,
            problems=out_of_bounds,
        )
        for p in info.processes
        if (p.npu_id, p.chip_id) in devices
    ]
    for oob in out_of_bounds:
        found.add(oob, ProblemKind.FIELD)
    listed = list(devices.values())
    unread = unread_units(
        [exc for exc, _ in found.errors], listed, vendor=VENDOR, kind=DeviceKind.NPU, tool="npu-smi", binding=_binding
    )
    problems = tuple(problem_of("ascend", exc, kind=kind) for exc, kind in found.errors)
    source = source_info(
        "ascend", version=PLUGIN_VERSION, api="npu-smi", api_version=info.tool_version, notes=found.notes,
        calls=session.invocations - start,
    )
    snap = Snapshot(
        devices=(*listed, *unread),
        telemetry=tuple(telemetry),
        links=tuple(links),
        domains=tuple(domains),
        processes=tuple(processes),
        source=source,
        collected_at=now,
        problems=problems,
    )
    # A bus id the chip table prints that no chip record was read for (a lost rule merged two
    # records, the header swallowed one) is a chip lost by the parser: listed, unknown, loud.
    snap = with_census(
        snap,
        [("npu-smi info", info_text)],
        read=[c.bus_id for c in info.chips if c.bus_id is not None],
        errors=[exc for exc, _ in found.errors],
        vendor=VENDOR,
        kind=DeviceKind.NPU,
        tool="npu-smi",
        binding=_binding,
    )
    return dataclasses.replace(snap, unparsed=len(snap.problems))


class AscendBackend(ProcessesSurface):
    """An open Ascend backend over a runner (real, replayed or recording)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.session = ToolSession(runner, "npu-smi", search_path=NPU_SMI_PATHS, timeout_s=config.tool_timeout_s)
        super().__init__("ascend", lambda: collect(self.session, config), config=config, runner=runner)
