"""Moved to :mod:`accel.integrations.exporter`; this name stays so existing imports keep working.

Every public name here is the same object as there, loaded as lazily (importing this module
loads neither the collector nor ``prometheus_client``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import accel.integrations.exporter as _exporter

from .integrations.exporter import DEFAULT_LISTEN, DEFAULT_PORT

if TYPE_CHECKING:
    from .integrations.exporter import (
        COMMON_FAMILIES,
        DCGM_FIELDS,
        DCGM_RULE_GROUPS,
        FAMILIES,
        RULE_GROUPS,
        AccelCollector,
        Attribution,
        BackendRead,
        DcgmField,
        Family,
        FieldSelection,
        HpcJobMapping,
        Snapshot,
        SnapshotSource,
        dcgm_rules_yaml,
        parse_fields,
        rules_yaml,
    )

__all__ = [
    "COMMON_FAMILIES",
    "DCGM_FIELDS",
    "DCGM_RULE_GROUPS",
    "DEFAULT_LISTEN",
    "DEFAULT_PORT",
    "FAMILIES",
    "RULE_GROUPS",
    "AccelCollector",
    "Attribution",
    "BackendRead",
    "DcgmField",
    "Family",
    "FieldSelection",
    "HpcJobMapping",
    "Snapshot",
    "SnapshotSource",
    "dcgm_rules_yaml",
    "parse_fields",
    "rules_yaml",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(_exporter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
