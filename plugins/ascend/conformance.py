"""The replay scenarios the conformance kit certifies ``ascend`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_PACKAGE = __package__ or "accel.plugins.ascend"
_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "910b-8": ("Atlas 800T A2: 8x Ascend 910B3, HCCS full mesh (npu-smi 24.1.rc1).", {}),
    "910a-8": ("8x Ascend 910A in two HCCS groups of four (npu-smi 24.1.RC2).", {}),
    "910c-16": ("Atlas A3: 8 NPUs x 2 dies paired by SIO (npu-smi 25.3.rc1).", {}),
    "310p3-2": ("2x Atlas 300I Duo (310P3, two chips per card), npu-smi 25.5.1.", {}),
    "950pr-3": ("3x Ascend 950PR, two in Health Alarm, npu-smi 25.7.rc1 (NPU ID layout).", {}),
    "910b-8-faults": (
        "The 910b-8 recordings plus what only DCMI sees (native.toml): HBM ECC counters, "
        "double-bit errors on NPU 3, a DMS fault event on NPU 5.",
        {},
    ),
}
_ALL: dict[str, Any] = conformance_scenarios(_PACKAGE, _NOTES)
_NATIVE: dict[str, Any] = native_scenarios(_PACKAGE, _NOTES)
#: Certified scenarios, on both paths; the other shipped replays are partial views (one NPU, a
#: container slice).
CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **{k: _ALL[k] for k in _NOTES},
    **{f"{k}@native": _NATIVE[f"{k}@native"] for k in _NOTES},
}
