"""Kubernetes: DRA ResourceSlices, DeviceClasses, example claims and NFD labels (``accel dra``),
and CDI specs (``accel cdi``), from the model.

See :mod:`accel.integrations.k8s._dra` for the projection, its safe-publication modes and
DRA's limits it enforces; :mod:`._classes` for DeviceClasses and ResourceClaimTemplates;
:mod:`._nfd` for node-feature-discovery's feature file; :mod:`._cdi` for the CDI specs (kind
``<vendor>.<domain>/<kind>``, the same vendor names as the DRA drivers).
"""

from ._cdi import (
    CDI_VERSION,
    ENV_MODES,
    SHARED_NODES,
    CdiProblem,
    CdiProjection,
    cdi_specs,
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

__all__ = [
    "CDI_VERSION",
    "DEFAULT_DOMAIN",
    "ENV_MODES",
    "FEATURES_DIR",
    "FEATURE_GATES",
    "MAX_ATTRIBUTES",
    "MAX_COUNTERS",
    "MAX_COUNTER_SETS",
    "MAX_DEVICES",
    "MAX_DEVICES_WITH_TAINTS",
    "SHARED_NODES",
    "CdiProblem",
    "CdiProjection",
    "DraProjection",
    "cdi_specs",
    "claim_templates",
    "device_classes",
    "is_partitioned",
    "nfd_features",
    "resource_slices",
    "spec_file_name",
    "valid_label",
    "write_specs",
]
