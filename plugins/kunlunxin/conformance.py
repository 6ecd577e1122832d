"""The replay scenarios the conformance kit certifies ``kunlunxin`` on (a test facility): each
shipped replay on the ``xpu_smi`` path, and again on the XPUML path (``<name>@native``, the fake
library rendered from the same recording)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "p800-8": ("Kunlunxin P800 OAM x8, driver 5.0.21.21 (nvidia-smi-like layout).", {}),
    "r300-2": ("Kunlunxin R300 x2, runtime 4.31 (DEVICES/VIDEO/PROCESSES layout).", {}),
    "p800-8-faults": ("p800-8 plus what only XPUML sees (native.toml): XPU 6 in the ERROR state.", {}),
}

CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **conformance_scenarios(__package__ or "accel.plugins.kunlunxin", _NOTES),
    **native_scenarios(__package__ or "accel.plugins.kunlunxin", _NOTES),
}
