"""Kubernetes: DRA ResourceSlices from the model (``accel dra``).

See :mod:`accel.integrations.k8s._dra` for the projection and DRA's limits it enforces.
"""

from ._dra import (
    DEFAULT_DOMAIN,
    MAX_ATTRIBUTES,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS,
    DraProjection,
    resource_slices,
)

__all__ = ["DEFAULT_DOMAIN", "MAX_ATTRIBUTES", "MAX_DEVICES", "MAX_DEVICES_WITH_TAINTS", "DraProjection",
           "resource_slices"]
