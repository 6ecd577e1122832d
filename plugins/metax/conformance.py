"""The replay scenarios the conformance kit certifies ``metax`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

CONFORMANCE_SCENARIOS: dict[str, Any] = conformance_scenarios(
    __package__ or "accel.plugins.metax",
    {
        "c550-8": ("MetaX C550 x8, mx-smi 2.2.4, topo -m with two MetaXLink islands of four.", {}),
        "mxc550-8-v2.1": ("MetaX C550 x8, mx-smi 2.1.6 (MXC550 names, no power cap), same topology.", {}),
    },
)
