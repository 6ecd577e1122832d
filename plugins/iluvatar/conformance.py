"""The replay scenarios the conformance kit certifies ``iluvatar`` on (a test facility)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_FRAGMENT = "the sample is a pasted tail of the table, without the IX-ML / Driver Version banner"

_PACKAGE = __package__ or "accel.plugins.iluvatar"
_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "bi-v150-16": ("8 BI-V150 boards = 16 GPUs, ixsmi 4.1.0; board power on one chip of two.", {}),
    "bi-v100-after-reset": ("BI-V100, ixsmi 3.0.1 after ixsmi -r: 7 of 8 GPUs listed.", {}),
    "bi-v100-wedged": (
        "BI-V100 GPUs 4-7 with GPU 5 wedged (sentinel values), then ixsmi -r output.",
        {
            "inventory.versions-parse": _FRAGMENT,
            "inventory.unsupported-declared": _FRAGMENT,
            "telemetry.unsupported-listed": "GPU 5 is wedged: its sentinel readings are dropped this time, "
            "which is 'unknown now', not 'never supported'",
        },
    ),
    "bi-v150-16-health": (
        "The bi-v150-16 sample plus what only IXML sees (native.toml): health bits on GPUs 3 and 9.",
        {},
    ),
}

#: Both paths: the CLI replays and IXML's fake of each (``<name>@native``).
CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **conformance_scenarios(_PACKAGE, _NOTES),
    **native_scenarios(_PACKAGE, _NOTES),
}
