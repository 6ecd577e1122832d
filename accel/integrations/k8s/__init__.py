"""Kubernetes: DRA ResourceSlices from the model (``accel dra``), and a kube-scheduler extender.

See :mod:`accel.integrations.k8s._dra` for the projection and DRA's limits it enforces, and
:mod:`accel.integrations.k8s._extender` for the extender (``accel k8s extender``).  The extender's
names load lazily: they import :mod:`accel.scheduler` (numpy).
"""

from typing import Any

from ._dra import (
    DEFAULT_DOMAIN,
    MAX_ATTRIBUTES,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS,
    DraProjection,
    resource_slices,
)

_EXTENDER = ("INVENTORY_ANNOTATION", "MAX_EXTENDER_PRIORITY", "REQUEST_ANNOTATION", "RESOURCE_PREFIX", "Binder",
             "Extender", "ExtenderServer", "PodRequest", "host_specs_from_slices", "load_inventories",
             "load_slices", "parse_quantity", "pod_request")

__all__ = [
    "DEFAULT_DOMAIN",
    "INVENTORY_ANNOTATION",
    "MAX_ATTRIBUTES",
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_TAINTS",
    "MAX_EXTENDER_PRIORITY",
    "REQUEST_ANNOTATION",
    "RESOURCE_PREFIX",
    "Binder",
    "DraProjection",
    "Extender",
    "ExtenderServer",
    "PodRequest",
    "host_specs_from_slices",
    "load_inventories",
    "load_slices",
    "parse_quantity",
    "pod_request",
    "resource_slices",
]


def __getattr__(name: str) -> Any:
    if name in _EXTENDER:
        from . import _extender

        return getattr(_extender, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
