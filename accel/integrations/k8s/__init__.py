"""Kubernetes: DRA ResourceSlices, DeviceClasses, example claims and NFD labels (``accel dra``),
CDI specs (``accel cdi``) and a kube-scheduler extender (``accel k8s extender``), from the model.

See :mod:`accel.integrations.k8s._dra` for the projection, its safe-publication modes and
DRA's limits it enforces; :mod:`._classes` for DeviceClasses and ResourceClaimTemplates;
:mod:`._nfd` for node-feature-discovery's feature file; :mod:`._cdi` for the CDI specs (kind
``<vendor>.<domain>/<kind>``, the same vendor names as the DRA drivers); :mod:`._extender` for
the extender; :mod:`._kubelet` for the DRA kubelet plugin (``accel k8s kubelet-plugin``: gRPC
from the committed protos in ``_proto``, the checkpoint in :mod:`._kubelet_state`, the API server
through :mod:`._kubeapi`).  The extender's and the kubelet plugin's names load lazily: they import
:mod:`accel.scheduler` (numpy), and gRPC / the Kubernetes client when used.
"""

from typing import Any

from ._cdi import (
    CDI_VERSION,
    ENV_MODES,
    SHARED_NODES,
    CdiProblem,
    CdiProjection,
    cdi_specs,
    device_edits,
    spec_file_name,
    write_specs,
)
from ._classes import claim_templates, device_classes
from ._dra import (
    DEFAULT_DOMAIN,
    FEATURE_GATES,
    MAX_ATTRIBUTES,
    MAX_COUNTER_SETS,
    MAX_COUNTERS,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS,
    DraProjection,
    is_partitioned,
    resource_slices,
)
from ._nfd import FEATURES_DIR, nfd_features, valid_label

_EXTENDER = ("INVENTORY_ANNOTATION", "MAX_EXTENDER_PRIORITY", "REQUEST_ANNOTATION", "RESOURCE_PREFIX", "Binder",
             "Extender", "ExtenderServer", "PodRequest", "host_specs_from_slices", "load_inventories",
             "load_slices", "parse_quantity", "pod_request")
_KUBELET = {"KubeletPlugin": "_kubelet", "KubeletPluginServer": "_kubelet", "PluginInUseError": "_kubelet_state",
            "ClientApi": "_kubeapi", "KubeApi": "_kubeapi", "KubeApiError": "_kubeapi",
            "KubeApiTimeoutError": "_kubeapi"}

__all__ = [
    "CDI_VERSION",
    "DEFAULT_DOMAIN",
    "ENV_MODES",
    "FEATURES_DIR",
    "FEATURE_GATES",
    "INVENTORY_ANNOTATION",
    "MAX_ATTRIBUTES",
    "MAX_COUNTERS",
    "MAX_COUNTER_SETS",
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_TAINTS",
    "MAX_EXTENDER_PRIORITY",
    "REQUEST_ANNOTATION",
    "RESOURCE_PREFIX",
    "SHARED_NODES",
    "Binder",
    "CdiProblem",
    "CdiProjection",
    "ClientApi",
    "DraProjection",
    "Extender",
    "ExtenderServer",
    "KubeApi",
    "KubeApiError",
    "KubeApiTimeoutError",
    "KubeletPlugin",
    "KubeletPluginServer",
    "PluginInUseError",
    "PodRequest",
    "cdi_specs",
    "claim_templates",
    "device_classes",
    "device_edits",
    "host_specs_from_slices",
    "is_partitioned",
    "load_inventories",
    "load_slices",
    "nfd_features",
    "parse_quantity",
    "pod_request",
    "resource_slices",
    "spec_file_name",
    "valid_label",
    "write_specs",
]


def __getattr__(name: str) -> Any:
    if name in _EXTENDER:
        from . import _extender

        return getattr(_extender, name)
    if name in _KUBELET:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_KUBELET[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
