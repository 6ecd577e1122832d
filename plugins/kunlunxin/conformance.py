"""The replay scenarios the conformance kit certifies ``kunlunxin`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

CONFORMANCE_SCENARIOS: dict[str, Any] = conformance_scenarios(
    __package__ or "accel.plugins.kunlunxin",
    {
        "p800-8": ("Kunlunxin P800 OAM x8, driver 5.0.21.21 (nvidia-smi-like layout).", {}),
        "r300-2": ("Kunlunxin R300 x2, runtime 4.31 (DEVICES/VIDEO/PROCESSES layout).", {}),
    },
)
