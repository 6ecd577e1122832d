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

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from accel.errors import AccelError, ParseError
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
from accel.plugin import DeviceEvent
from accel.toolkit import (
    TABLE_NEVER_PRINTS,
    Collection,
    NativeEventsSurface,
    NativeLibrary,
    ProcessesSurface,
    Snapshot,
    UnitReading,
    condition,
    matrix_links,
    processes_of,
)
from accel.tools import Runner

from . import _native
from ._parse import SEARCH_PATH, TOOL, CnmonInfo, MluChip, parse_cnmon, parse_topo

__all__ = ["CambriconBackend"]

_TWO_CHIP_CARDS = ("MLU370-X8",)


class CambriconBackend(ProcessesSurface, NativeEventsSurface):
    """Backend ``cambricon``: CNDev (``libcndev.so``) or ``cnmon`` over a runner (real, replayed
    or recording); ``-o read=native|cli|auto`` picks (see :class:`~accel.toolkit.DualPathBackend`)."""

    backend_name = "cambricon"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.MLU
    visible_env = "MLU_VISIBLE_DEVICES"
    torch_device_type = "mlu"
    collective_backend = "cncl"
    ray_resource = "MLU"
    device_nodes = ("/dev/cambricon_dev{index}", "/dev/cambricon_ctl")
    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def load_native(self) -> object:
        return _native.load_cndev()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The CNDev read: the same units, ids and health rules as the ``cnmon`` path."""
        read = _native.read_cndev(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        ids: dict[int, str] = {}
        for r in read.readings:
            _board(r)
            try:
                ids[r.index or 0] = r.stable_id(self.vendor or self.backend_name)
            except ParseError:
                continue
        self._cndev_ids = ids
        self.native_events(0.0)
        for r in read.readings:
            dev_id = ids.get(r.index or 0)
            if dev_id is not None:
                r.conditions.extend(self.event_conditions(dev_id))
                r.health_read = r.health_read or bool(r.conditions)
        devices, samples = self.build(
            col,
            read.readings,
            versions={},
            per_unit=lambda r: {
                "versions": {"driver": str(r.extras.get("cambricon.com/driver") or read.driver_version or "") or None},
                "unsupported": read.never.get(r.index or 0, set()) & {"memory.total_bytes"},
            },
            telemetry_unsupported=TABLE_NEVER_PRINTS - {"ecc_corrected_total"},
        )
        return col.snapshot(devices, samples)

    def read_events(self, lib: NativeLibrary, timeout_s: float) -> Sequence[DeviceEvent]:
        if not getattr(self, "_cndev_ids", None):
            return ()
        if getattr(self, "_cndev_events", None) is None:
            self._cndev_events = _native.EventReader(lib)
        try:
            return self._cndev_events.poll(timeout_s, self._cndev_ids, datetime.now(UTC))
        except AccelError:
            return ()

    def close(self) -> None:
        events = getattr(self, "_cndev_events", None)
        if events is not None:
            events.close()
        super().close()

    def collect_cli(self, col: Collection) -> Snapshot:
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


def _board(r: UnitReading) -> None:
    """The card a native reading's chip sits on, by the rule the ``cnmon`` path uses."""
    two_chips = r.model in _TWO_CHIP_CARDS
    card = r.index or 0
    r.board_id = f"cambricon:card-{card // 2 if two_chips else card}"
    r.extras["cambricon.com/boardIdSource"] = "model-two-chips-per-card" if two_chips else "one-chip-per-card"
    if r.bus_id is None:
        r.extras["cambricon.com/idSource"] = "card-number (CNDev gave no PCI address)"


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
