"""The Cambricon backend: ``cnmon`` made into accel model objects.

Per snapshot: ``cnmon`` (required) and ``cnmon topo -m`` (optional; MLU-Link links and
``mlulink_group`` domains when present), so 2 runs.  Each table row is a chip, the unit
``MLU_VISIBLE_DEVICES`` counts (torch ``mlu``, collectives ``cncl``).  The stable id is the
PCI address; ``cnmon`` prints no UUID in its default table, and v4 prints no Bus-Id either,
in which case the id falls back to the card number (``cambricon:card-N``, flagged in extras).

Card relation: an MLU370-X8 board carries two chips that ``cnmon`` lists as consecutive
rows; ``board_id`` is ``cambricon:card-<Card // 2>`` for that model (source noted in
``cambricon.com/boardIdSource``), and the chip's own row otherwise.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from accel.errors import AccelError, ParseError, ToolError
from accel.model import (
    Action,
    Binding,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    HealthCondition,
    Link,
    LinkType,
    MemoryKind,
    PartitionScheme,
    ProcessUsage,
    Severity,
    Subsystem,
    Telemetry,
    device_id_for,
    validate,
)
from accel.plugin import BackendConfig
from accel.tools import Runner

from .._cli import (
    ProcessesSurface,
    Snapshot,
    ToolSession,
    problems_of,
    source_info,
    unread_units,
    validated,
    with_census,
)
from ._parse import CnmonInfo, MluChip, MluTopo, parse_cnmon, parse_topo

__all__ = ["CNMON_PATHS", "CambriconBackend", "collect"]

VENDOR = "cambricon"
PLUGIN_VERSION = "0.1.0"
CNMON_PATHS = ("/usr/bin", "/usr/local/neuware/bin")
_TWO_CHIP_CARDS = ("MLU370-X8",)


def _conditions(chip: MluChip) -> list[HealthCondition]:
    if chip.ecc_errors:
        return [
            HealthCondition(
                subsystem=Subsystem.MEMORY,
                reason="EccErrors",
                severity=Severity.ERROR,
                action=Action.INVESTIGATE,
                vendor_code="cambricon.mlu:ecc-error",
                count=chip.ecc_errors,
                message=f"cnmon reports {chip.ecc_errors} ECC errors on card {chip.card}",
            )
        ]
    return []


def _board(chip: MluChip) -> tuple[str, str]:
    if chip.name in _TWO_CHIP_CARDS:
        return f"cambricon:card-{chip.card // 2}", "model-two-chips-per-card"
    return f"cambricon:card-{chip.card}", "one-chip-per-card"


def _binding(index: int | None) -> dict[str, Any]:
    """How a runtime selects chip ``index`` (the number cnmon prints in its Card column)."""
    out: dict[str, Any] = {"torch_device_type": "mlu", "collective_backend": "cncl", "ray_resource": "MLU"}
    if index is not None:
        out.update(
            visible_env="MLU_VISIBLE_DEVICES",
            visible_id=str(index),
            device_nodes=(f"/dev/cambricon_dev{index}", "/dev/cambricon_ctl"),
        )
    return out


def _device(
    chip: MluChip, info: CnmonInfo, now: datetime | None = None, problems: list[AccelError] | None = None
) -> Device:
    """One card as a Device; ``now`` stamps health only when cnmon printed a numeric Ecc-Error.

    The index is the printed Card number, not the row's position: a row that failed to parse
    must not shift the binding of every chip below it onto its neighbour."""
    board, board_src = _board(chip)
    extras: dict[str, str | int | float | bool] = {
        "cambricon.com/card": chip.card,
        "cambricon.com/boardIdSource": board_src,
    }
    if chip.bus_id is not None:
        dev_id = device_id_for(VENDOR, bus_id=chip.bus_id)
    else:
        dev_id = f"{VENDOR}:card-{chip.card}"
        extras["cambricon.com/idSource"] = "card-number (cnmon printed no Bus-Id)"
    if chip.compute_mode:
        extras["cambricon.com/computeMode"] = chip.compute_mode
    if chip.mode:
        extras["cambricon.com/mode"] = chip.mode
    if chip.vmemory_total_bytes is not None:
        extras["cambricon.com/vMemoryTotalBytes"] = chip.vmemory_total_bytes
    region: dict[str, Any] = {
        "kind": MemoryKind.UNKNOWN,
        "total_bytes": chip.memory_total_bytes,
        "used_bytes": chip.memory_used_bytes if chip.memory_total_bytes is not None else None,
    }
    data: dict[str, Any] = {
        "id": dev_id,
        "vendor": VENDOR,
        "kind": DeviceKind.MLU,
        "model": chip.name or "unknown",
        "index": chip.card,
        "pci": {"bus_id": chip.bus_id, "vendor_id": "cabc"} if chip.bus_id else None,
        "board_id": board,
        "versions": {
            "driver": (chip.driver or "").lstrip("v") or info.driver_version,
            "firmware": {"mlu": chip.firmware} if chip.firmware else {},
        },
        "memory": [region],
        "power": {"enforced_watts": chip.power_cap_watts},
        "capabilities": {
            "partitioning": (PartitionScheme.CAMBRICON_MIM,) if chip.mode is not None else (),
            "ecc": True if chip.ecc_errors is not None else None,
        },
        "partition_mode": {"scheme": PartitionScheme.NONE, "compute_mode": chip.mode} if chip.mode is not None else {},
        "binding": _binding(chip.card),
        # Health is earned: only a numeric Ecc-Error count is a health reading ("N/A" is not).
        "health": {
            "conditions": _conditions(chip),
            "checked_at": now if chip.ecc_errors is not None else None,
        },
        "extras": extras,
        "unsupported": frozenset({"uuid", "serial_number", "architecture"}),
    }
    if problems is None:
        return validate(Device, data, what=f"cambricon card {chip.card}")
    return validated(
        Device, data, what=f"cambricon card {chip.card}", tool="cnmon", device_id=dev_id, problems=problems
    )


def _telemetry(dev: Device, chip: MluChip, now: datetime, problems: list[AccelError]) -> Telemetry:
    total, used = chip.memory_total_bytes, chip.memory_used_bytes
    known = total is not None and used is not None
    return validated(
        Telemetry,
        {
            "device_id": dev.id,
            "timestamp": now,
            "utilization_ratio": chip.utilization_ratio,
            "memory_used_bytes": used if known else None,
            "memory_total_bytes": total if known else None,
            "memory_free_bytes": (total - used) if known and total is not None and used is not None else None,
            "power_watts": chip.power_watts,
            "temperature_celsius": chip.temperature_celsius,
            "fan_ratio": chip.fan_ratio,
            "ecc_uncorrected_total": chip.ecc_errors,
            "unsupported": frozenset(
                {
                    "energy_joules",
                    "clocks_hertz",
                    "temperatures_celsius",
                    "throttle_reasons",
                    "pcie_rx_bytes_per_s",
                    "pcie_tx_bytes_per_s",
                    "pcie_replay_total",
                    "ecc_corrected_total",
                    "retired_pages_total",
                    "links",
                    "memory_utilization_ratio",
                }
            ),
        },
        what=f"cambricon telemetry of {dev.id}",
        tool="cnmon",
        device_id=dev.id,
        problems=problems,
    )


def _topology(topo: MluTopo, ids: dict[str, str]) -> tuple[list[Link], list[Domain]]:
    links: dict[frozenset[str], Link] = {}
    for (ra, cb), code in topo.codes.items():
        a, b = ids.get(ra), ids.get(cb)
        if a is None or b is None or a == b or not code.startswith("MLK"):
            continue
        count = int(code[3:]) if code[3:] else 1
        x, y = sorted((a, b))
        links.setdefault(frozenset((a, b)), Link(a=x, b=y, type=LinkType.MLULINK, count=count))
    # Groups: devices reachable over MLU-Link, found by repeated merging of overlapping sets.
    groups: list[set[str]] = []
    for lk in links.values():
        merged = {lk.a, lk.b}
        for g in [g for g in groups if g & merged]:
            merged |= g
            groups.remove(g)
        groups.append(merged)
    order = list(ids.values())
    domains = [
        Domain(id=f"mlulink-group-{i}", kind=DomainKind.MLULINK_GROUP, members=tuple(sorted(g, key=order.index)))
        for i, g in enumerate(sorted(groups, key=lambda g: min(order.index(m) for m in g)))
    ]
    return sorted(links.values(), key=lambda lk: (lk.a, lk.b)), domains


def collect(session: ToolSession, config: BackendConfig) -> Snapshot:
    """Run ``cnmon`` (and ``cnmon topo -m`` when it answers) once and build a snapshot."""
    del config
    start = session.invocations
    now = datetime.now(UTC)
    notes: list[str] = []
    stdout = session.run().stdout
    info = parse_cnmon(stdout)
    notes.extend(f"skipped: {e}" for e in info.errors)
    errors: list[AccelError] = list(info.errors)
    devices: list[Device] = []
    telemetry: list[Telemetry] = []
    by_card: dict[int, Device] = {}
    for chip in info.chips:
        try:
            dev = _device(chip, info, now, errors)
        except ToolError:
            raise
        except AccelError as exc:
            notes.append(f"skipped card {chip.card}: {exc}")
            err = ParseError(f"card {chip.card}: {exc.message}", tool="cnmon", command="cnmon", lineno=chip.line.lineno)
            err.device_index, err.bus_id = chip.card, chip.bus_id
            errors.append(err)
            continue
        devices.append(dev)
        by_card[chip.card] = dev
        telemetry.append(_telemetry(dev, chip, now, errors))
    links: list[Link] = []
    domains: list[Domain] = []
    res = session.optional("topo", "-m", notes=notes)
    if res is not None:
        try:
            topo = parse_topo(res.stdout)
            ids = {label: d.id for label, d in ((f"MLU{c}", d) for c, d in by_card.items()) if label in topo.labels}
            links, domains = _topology(topo, ids)
        except ParseError as exc:
            notes.append(f"ignored cnmon topo -m: {exc}")
    processes = [
        ProcessUsage(pid=p.pid, device_id=by_card[p.card].id, name=p.command, memory_bytes=p.memory_bytes)
        for p in info.processes
        if p.card in by_card
    ]
    source = source_info(
        "cambricon", version=PLUGIN_VERSION, api="cnmon", api_version=info.version, notes=notes,
        calls=session.invocations - start,
    )
    # A record that failed but names its chip is still listed (health unknown), and a bus id
    # the table prints that no record was read for is a problem too (the census).
    listed = unread_units(errors, devices, vendor=VENDOR, kind=DeviceKind.MLU, tool="cnmon", binding=_unread_binding)
    snap = Snapshot(
        devices=tuple(sorted([*devices, *listed], key=lambda d: (d.index is None, d.index or 0))),
        telemetry=tuple(telemetry),
        links=tuple(links),
        domains=tuple(domains),
        processes=tuple(processes),
        source=source,
        collected_at=now,
        problems=problems_of(VENDOR, errors),
    )
    snap = with_census(
        snap,
        [("cnmon", stdout)],
        read=[c.bus_id for c in info.chips if c.bus_id is not None],
        errors=errors,
        vendor=VENDOR,
        kind=DeviceKind.MLU,
        tool="cnmon",
        binding=_unread_binding,
    )
    return dataclasses.replace(snap, unparsed=len(snap.problems))


def _unread_binding(index: int | None) -> Binding:
    return Binding(**_binding(index))


class CambriconBackend(ProcessesSurface):
    """An open Cambricon backend over a runner (real, replayed or recording)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self.session = ToolSession(runner, "cnmon", search_path=CNMON_PATHS, timeout_s=config.tool_timeout_s)
        super().__init__("cambricon", lambda: collect(self.session, config), config=config, runner=runner)
