"""The replay scenarios the conformance kit certifies ``ascend`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_ALL: dict[str, Any] = conformance_scenarios(
    __package__ or "accel.plugins.ascend",
    {
        "910b-8": ("Atlas 800T A2: 8x Ascend 910B3, HCCS full mesh (npu-smi 24.1.rc1).", {}),
        "910a-8": ("8x Ascend 910A in two HCCS groups of four (npu-smi 24.1.RC2).", {}),
        "910c-16": ("Atlas A3: 8 NPUs x 2 dies paired by SIO (npu-smi 25.3.rc1).", {}),
        "310p3-2": ("2x Atlas 300I Duo (310P3, two chips per card), npu-smi 25.5.1.", {}),
        "950pr-3": ("3x Ascend 950PR, two in Health Alarm, npu-smi 25.7.rc1 (NPU ID layout).", {}),
    },
)
#: Certified scenarios; the other shipped replays are partial views (one NPU, a container slice).
CONFORMANCE_SCENARIOS: dict[str, Any] = {k: _ALL[k] for k in ("910b-8", "910a-8", "910c-16", "310p3-2", "950pr-3")}
