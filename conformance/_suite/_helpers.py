"""The suite's shared helpers: failing a row with a fix, the constants the rows compare against."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import NoReturn, TypeVar

import pytest

from accel.errors import AccelError
from accel.model import Device, DomainKind, HostInventory
from accel.plugin import Capability

__all__ = ["NOT_APPLICABLE"]

#: Prefix of the skip reason of a row gated on an undeclared capability (the matrix shows N/A).
NOT_APPLICABLE = "not applicable: "

_T = TypeVar("_T")
_LINK_DOMAINS = frozenset(
    {
        DomainKind.NVLINK_ISLAND,
        DomainKind.NVLINK_CLIQUE,
        DomainKind.XGMI_HIVE,
        DomainKind.HCCS_GROUP,
        DomainKind.MLULINK_GROUP,
        DomainKind.MTLINK_GROUP,
        DomainKind.METAXLINK_GROUP,
        DomainKind.XPULINK_GROUP,
    }
)
_PLACEHOLDER_MODELS = re.compile(r"^(n/?a|unknown|none|null|-+|\[?not supported\]?|[0-9]+|0x[0-9a-f]+)$", re.I)
_VERSION = re.compile(r"^v?[0-9]+(\.[0-9]+)+")
_MIB = 2**20
#: How far a health reading's time may sit outside the read that returned it (clock granularity,
#: a snapshot started just before the read).
_EARNED_SKEW = timedelta(seconds=120)
_TIB = 2**40
#: Telemetry fields owned by a capability: declared -> a value (or listed unsupported per sample);
#: undeclared -> ``None`` and listed unsupported.
_TELEMETRY_FIELDS: dict[Capability, str] = {
    Capability.POWER: "power_watts",
    Capability.ENERGY: "energy_joules",
    Capability.TEMPERATURE: "temperature_celsius",
    Capability.UTILIZATION: "utilization_ratio",
    Capability.CLOCKS: "clocks_hertz",
    Capability.MEMORY_USED: "memory_used_bytes",
}
#: Device fields owned by a capability, for ``inventory.unsupported-declared``.
_DEVICE_FIELDS: dict[str, Capability | None] = {
    "uuid": Capability.UUID,
    "serial_number": Capability.SERIAL,
    "pci": Capability.PCI,
    "numa_node": Capability.NUMA,
    "versions.driver": Capability.VERSIONS,
    "memory": Capability.MEMORY,
    "architecture": None,
}
_MONOTONIC = (
    "energy_joules",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
    "pcie_replay_total",
    "retired_pages_total",
)
_LINK_COUNTERS = ("rx_bytes_total", "tx_bytes_total", "crc_errors_total", "replay_errors_total",
                  "recovery_errors_total")


def _fail(problems: Sequence[str], fix: str) -> NoReturn:
    """Fail a row with one line per problem and what to change; no traceback in the matrix."""
    shown = list(problems[:12])
    if len(problems) > 12:
        shown.append(f"... and {len(problems) - 12} more")
    pytest.fail("; ".join(shown) + f". Fix: {fix}", pytrace=False)


def _check(problems: Sequence[str], fix: str) -> None:
    if problems:
        _fail(problems, fix)


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    kind = type(exc).__name__ + (f"[{code}]" if isinstance(exc, AccelError) else "")
    return f"{kind}: {exc}"


def _is_clean_error(exc: BaseException) -> bool:
    return isinstance(exc, AccelError) and bool(getattr(exc, "code", ""))


def _device_ids(inv: HostInventory) -> list[str]:
    return [d.id for d in inv.devices]


def _get_path(dev: Device, path: str) -> object:
    obj: object = dev
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _empty(value: object) -> bool:
    return value is None or value == () or value == {}


