"""The Enflame backend: ``efsmi`` table and ``efsmi -q`` detail.

The two views merge by bus id.  SR-IOV virtual functions (``GCU Virt`` = ``SRIOV``) that
share a serial number are one card: the card is the device (id ``enflame:sn-<serial>``,
since a VM or container sees no physical function to name it by) and each VF is a
``sriov_vf`` partition named by its own PCI address.  RMA flags and double-bit ECC counts
of ``-q`` are health conditions.

No visibility variable is set: the reference lists Enflame's as "(vendor toolkit)", not a
documented name, so ``binding.visible_env`` stays unknown rather than guessed.
"""

from __future__ import annotations

from typing import Any

from accel.errors import AccelError, ParseError
from accel.model import (
    Capabilities,
    Device,
    DeviceKind,
    Health,
    Partition,
    PartitionFamily,
    PartitionScheme,
    Telemetry,
    device_id_for,
    validate,
)
from accel.plugin import BackendConfig
from accel.tools import Runner

from .._cli import ToolSession
from .._cli.extra import (
    CliBackend,
    Collection,
    Snapshot,
    UnitReading,
    build_units,
    merge_readings,
    visible_binding,
)
from ._parse import SEARCH_PATH, TOOL, is_vf, parse_query, parse_table

__all__ = ["EnflameBackend"]

VERSION = "0.1.0"
_BIND = visible_binding(None)


class EnflameBackend(CliBackend):
    """Backend ``enflame`` over a runner (see :mod:`accel.tools`)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self._config = config
        self._runner = runner
        super().__init__("enflame", self._snapshot)

    def _snapshot(self) -> Snapshot:
        col = Collection(
            "enflame",
            VERSION,
            ToolSession(self._runner, TOOL, search_path=SEARCH_PATH, timeout_s=self._config.tool_timeout_s),
        )
        table = col.main(lambda text, cmd: parse_table(text, command=cmd))
        readings: list[UnitReading] = []
        driver = None
        if table is not None:
            col.problems.extend(table.problems)
            readings, driver = table.readings, table.driver_version
        query = col.extra(lambda text, cmd: parse_query(text, command=cmd), "-q")
        if query is not None:
            col.problems.extend(query.problems)
            readings = merge_readings(readings, query.readings)
            driver = driver or query.driver_version
        col.require(readings)
        common: dict[str, Any] = {
            "vendor": "enflame",
            "problems": col.problems,
            "kind": DeviceKind.GCU,
            "tool": TOOL,
            "binding": _BIND,
            "versions": {"driver": driver},
            "timestamp": col.now,
        }
        whole = [r for r in readings if not is_vf(r)]
        devices, samples = build_units(whole, **common)
        cards: dict[str, list[UnitReading]] = {}
        for r in readings:
            if is_vf(r):
                cards.setdefault(r.serial_number or f"unknown-{r.bus_id}", []).append(r)
        partitions: list[Partition] = []
        for serial, vfs in cards.items():
            card, parts, tel = _card(serial, vfs, driver, common, col.problems)
            if card is not None:
                devices.append(card)
                partitions.extend(parts)
                samples.extend(tel)
        return col.snapshot(devices, samples, partitions=partitions)


def _card(
    serial: str, vfs: list[UnitReading], driver: str | None, common: dict[str, Any], problems: list[AccelError]
) -> tuple[Device | None, list[Partition], list[Telemetry]]:
    """One SR-IOV card (a device) and its virtual functions (partitions), with VF telemetry."""
    first = vfs[0]
    card_id = device_id_for("enflame", uuid=f"sn-{serial}")
    built, tel = build_units(vfs, **common)
    conditions = tuple(c for d in built for c in d.health.conditions)
    try:
        card = validate(
            Device,
            {
                "id": card_id,
                "vendor": "enflame",
                "kind": DeviceKind.GCU,
                "model": first.model or "unknown",
                "serial_number": None if serial.startswith("unknown-") else serial,
                "versions": {"driver": driver, "firmware": dict(first.firmware)},
                "capabilities": Capabilities(sriov=True, partitioning=(PartitionScheme.SRIOV,)),
                "partition_mode": {"scheme": PartitionScheme.SRIOV},
                "health": Health(conditions=conditions),
                "extras": {"enflame.com/virtualFunctions": len(built)},
            },
            what=f"enflame card {card_id}",
        )
    except AccelError as exc:
        problems.append(exc)
        return None, [], []
    parts: list[Partition] = []
    for vf in built:
        parts.append(
            Partition(
                id=vf.id,
                parent_id=card_id,
                profile="sriov-vf",
                family=PartitionFamily.SRIOV_VF,
                memory_bytes=vf.memory_total_bytes,
                binding=vf.binding,
                health=vf.health,
            )
        )
    if not parts:
        problems.append(ParseError(f"no readable virtual function of card {serial}"))
        return None, [], []
    return card, parts, tel
