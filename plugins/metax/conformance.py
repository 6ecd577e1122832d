"""The replay scenarios the conformance kit certifies ``metax`` on (a test facility): each shipped
replay on the ``mx-smi`` path, and again on the MXSML path (``<name>@native``, the fake library
rendered from the same recordings)."""

from __future__ import annotations

from typing import Any

from accel.toolkit.testing import conformance_scenarios, native_scenarios

__all__ = ["CONFORMANCE_SCENARIOS"]

_NOTES: dict[str, tuple[str, dict[str, str]]] = {
    "c550-8": ("MetaX C550 x8, mx-smi 2.2.4, topo -m with two MetaXLink islands of four.", {}),
    "mxc550-8-v2.1": ("MetaX C550 x8, mx-smi 2.1.6 (MXC550 names, no power cap), same topology.", {}),
    "c550-8-faults": (
        "c550-8 plus what only MXSML sees (native.toml): uncorrectable HBM ECC errors on GPU 3.",
        {},
    ),
}

CONFORMANCE_SCENARIOS: dict[str, Any] = {
    **conformance_scenarios(__package__ or "accel.plugins.metax", _NOTES),
    **native_scenarios(__package__ or "accel.plugins.metax", _NOTES),
}
