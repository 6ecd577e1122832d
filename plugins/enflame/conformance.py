"""The replay scenarios the conformance kit certifies ``enflame`` on (a test facility): each
shipped replay on the ``efsmi`` path, and again on the EFML path (``<name>@native``, the fake
library rendered from the same recordings)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_NO_USED = "efsmi's default table prints total memory only; used needs efsmi -q, which this sample lacks"

_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "s60g-sriov": (
        "Enflame S60G seen as two SR-IOV VFs sharing one serial, efsmi 1.6.3.12.",
        {"memory.used-le-total": _NO_USED},
    ),
    "s60-2dev": (
        "Enflame S60 x2, efsmi v1.2.0.301 (doubled rules, squeezed cells).",
        {"memory.used-le-total": _NO_USED},
    ),
    "s60-2dev-faults": (
        "s60-2dev plus what only EFML sees (native.toml): GCU 1 unhealthy, double-bit ECC errors, events.",
        {"memory.used-le-total": _NO_USED},
    ),
    "s60-query": (
        "Enflame S60, efsmi -q 1.4.3.4 only (elided upstream after DEV ID 0).",
        {},
    ),
}

_NO_PAIR = (
    "the replay records no used memory, and EfmlGetDevMem returns total and used in one struct: the fake "
    "answers NOT_SUPPORTED rather than invent a used size (a fake's gap, not the library's)"
)
#: The native path's notes: on a table-only replay its fake cannot render EfmlGetDevMem either.
_NATIVE_NOTES = {
    name: (text, {**xfail, "memory.total-bytes": _NO_PAIR} if "memory.used-le-total" in xfail else xfail)
    for name, (text, xfail) in _NOTES.items()
}

CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **conformance_scenarios(__package__ or "accel.plugins.enflame", _NOTES),
    **native_scenarios(__package__ or "accel.plugins.enflame", _NATIVE_NOTES),
}
