"""The replay scenarios the conformance kit certifies ``cambricon`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_MASKED = "the published sample masks the total memory as 'xxxxx'"

_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "mlu370-x8": ("MLU370-X8, two chips of one card, cnmon v5.10.13.", {}),
    "mlu370-x4": (
        "3x MLU370-X4, cnmon v4.20.11 (no Bus-Id column, vMemory column).",
        {
            "inventory.ids-canonical": "cnmon v4.20 prints no Bus-Id and no UUID: the id falls back to the card",
            "inventory.ids-match-pci": "cnmon v4.20 prints no Bus-Id",
            "inventory.unsupported-declared": "cnmon v4.20 prints no Bus-Id although newer cnmon does",
        },
    ),
    "mlu5xx-8": (
        "8x MLU5xx (model and memory masked by the doc author), cnmon v5.10.31.",
        {
            "memory.total-bytes": _MASKED,
            "memory.used-le-total": _MASKED,
            "telemetry.unsupported-listed": "used memory is dropped while the total is masked",
        },
    ),
    "mlu370-x8-faults": (
        "The mlu370-x8 cnmon sample plus what only CNDev sees (native.toml): ECC counters, "
        "a memory health incident and an XID event.",
        {},
    ),
}

_PACKAGE = __package__ or "accel.plugins.cambricon"
_NATIVE_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    **_NOTES,
    "mlu370-x4": (
        _NOTES["mlu370-x4"][0],
        {
            "inventory.ids-canonical": "the fake holds no PCI address: cnmon v4.20 printed none",
            "inventory.ids-match-pci": "the fake holds no PCI address: cnmon v4.20 printed none",
            "inventory.unsupported-declared": "the fake holds no PCI address: cnmon v4.20 printed none",
        },
    ),
    "mlu5xx-8": (
        _NOTES["mlu5xx-8"][0],
        {
            "memory.total-bytes": _MASKED,
            "memory.used-le-total": _MASKED,
            "inventory.unsupported-declared": "the fake answers NOT_SUPPORTED for the masked memory",
        },
    ),
}

CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **conformance_scenarios(_PACKAGE, _NOTES),
    **native_scenarios(_PACKAGE, _NATIVE_NOTES),
}
