"""The replay scenarios the conformance kit certifies ``enflame`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_NO_USED = "efsmi's default table prints total memory only; used needs efsmi -q, which this sample lacks"

CONFORMANCE_SCENARIOS: dict[str, Any] = conformance_scenarios(
    __package__ or "accel.plugins.enflame",
    {
        "s60g-sriov": (
            "Enflame S60G seen as two SR-IOV VFs sharing one serial, efsmi 1.6.3.12.",
            {"memory.used-le-total": _NO_USED},
        ),
        "s60-2dev": (
            "Enflame S60 x2, efsmi v1.2.0.301 (doubled rules, squeezed cells).",
            {"memory.used-le-total": _NO_USED},
        ),
        "s60-query": (
            "Enflame S60, efsmi -q 1.4.3.4 only (elided upstream after DEV ID 0).",
            {},
        ),
    },
)
