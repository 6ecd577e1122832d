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

from typing import Any

from accel.model import (
    Action,
    Capabilities,
    DeviceKind,
    Domain,
    DomainKind,
    Link,
    LinkType,
    PartitionScheme,
    Severity,
    Subsystem,
)
from accel.toolkit import (
    TABLE_NEVER_PRINTS,
    Collection,
    ProcessesSurface,
    Snapshot,
    ToolBackend,
    UnitReading,
    condition,
    matrix_links,
    processes_of,
)

from ._parse import SEARCH_PATH, TOOL, CnmonInfo, MluChip, parse_cnmon, parse_topo

__all__ = ["CambriconBackend"]

_TWO_CHIP_CARDS = ("MLU370-X8",)

class CambriconBackend(ProcessesSurface, ToolBackend):
    """Backend ``cambricon`` over a runner (real, replayed or recording)."""

    backend_name = "cambricon"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.MLU
    visible_env = "MLU_VISIBLE_DEVICES"
    torch_device_type = "mlu"
    collective_backend = "cncl"
    ray_resource = "MLU"
    device_nodes = ("/dev/cambricon_dev{index}", "/dev/cambricon_ctl")

    def collect(self, col: Collection) -> Snapshot:
        info = col.required(lambda text, cmd: parse_cnmon(text, command=cmd))
        col.api_version = info.version
        col.problems.extend(info.errors)
        by_card = {chip.card: chip for chip in info.chips}
        devices, samples = self.build(
            col,
            [_reading(chip) for chip in info.chips],
            versions={},
            per_unit=lambda r: _per_unit(by_card[r.index or 0], info),
            telemetry_unsupported=TABLE_NEVER_PRINTS,
        )
        links: list[Link] = []
        domains: list[Domain] = []
        topo = col.extra(lambda text, cmd: parse_topo(text, command=cmd), "topo", "-m")
        if topo is not None:
            ids = {f"MLU{d.index}": d.id for d in devices if d.index is not None}
            links, domains = matrix_links(
                topo,
                ids,
                {code: LinkType.MLULINK for code in set(topo.codes.values()) if code.startswith("MLK")},
                domain_kind=DomainKind.MLULINK_GROUP,
                domain_prefix="mlulink-group",
                count_of=lambda code: int(code[3:] or 1),
            )
        return col.snapshot(
            devices, samples, links=links, domains=domains, processes=processes_of(info.processes, devices)
        )


def _reading(chip: MluChip) -> UnitReading:
    """One chip; the index is the printed Card number, not the row's position: a row that
    failed to parse must not shift the binding of every chip below it onto its neighbour."""
    two_chips = chip.name in _TWO_CHIP_CARDS
    r = UnitReading(
        index=chip.card,
        model=chip.name,
        bus_id=chip.bus_id,
        pci_vendor_id="cabc" if chip.bus_id else None,
        board_id=f"cambricon:card-{chip.card // 2 if two_chips else chip.card}",
        fallback_id=f"card-{chip.card}",
        memory_total_bytes=chip.memory_total_bytes,
        # A used figure against a masked total is no reading of either.
        memory_used_bytes=chip.memory_used_bytes if chip.memory_total_bytes is not None else None,
        utilization_ratio=chip.utilization_ratio,
        temperature_celsius=chip.temperature_celsius,
        power_watts=chip.power_watts,
        power_limit_watts=chip.power_cap_watts,
        fan_ratio=chip.fan_ratio,
        ecc_uncorrected_total=chip.ecc_errors,
        firmware={"mlu": chip.firmware} if chip.firmware else {},
        # Health is earned: only a numeric Ecc-Error count is a health reading ("N/A" is not).
        health_read=chip.ecc_errors is not None,
    )
    if chip.memory_total_bytes is None:
        r.dropped.add("memory_used_bytes")
    if chip.ecc_errors:
        r.conditions.append(
            condition(
                Subsystem.MEMORY,
                "EccErrors",
                Severity.ERROR,
                Action.INVESTIGATE,
                f"cnmon reports {chip.ecc_errors} ECC errors on card {chip.card}",
                code="cambricon.mlu:ecc-error",
                count=chip.ecc_errors,
            )
        )
    r.extras["cambricon.com/card"] = chip.card
    r.extras["cambricon.com/boardIdSource"] = "model-two-chips-per-card" if two_chips else "one-chip-per-card"
    if chip.bus_id is None:
        r.extras["cambricon.com/idSource"] = "card-number (cnmon printed no Bus-Id)"
    if chip.compute_mode:
        r.extras["cambricon.com/computeMode"] = chip.compute_mode
    if chip.mode:
        r.extras["cambricon.com/mode"] = chip.mode
    if chip.vmemory_total_bytes is not None:
        r.extras["cambricon.com/vMemoryTotalBytes"] = chip.vmemory_total_bytes
    return r


def _per_unit(chip: MluChip, info: CnmonInfo) -> dict[str, Any]:
    """The chip's driver (v4 prints one per row), ECC capability and MIM partitioning mode."""
    mode = chip.mode
    return {
        "versions": {"driver": (chip.driver or "").lstrip("v") or info.driver_version},
        "capabilities": Capabilities(
            partitioning=(PartitionScheme.CAMBRICON_MIM,) if mode is not None else (),
            ecc=True if chip.ecc_errors is not None else None,
        ),
        "partition_mode": {"scheme": PartitionScheme.NONE, "compute_mode": mode} if mode is not None else {},
    }
