"""Kubernetes: DRA ResourceSlices (``accel dra``) and CDI specs (``accel cdi``) from the model.

See :mod:`accel.integrations.k8s._dra` for the projection and DRA's limits it enforces, and
:mod:`accel.integrations.k8s._cdi` for the CDI specs (kind ``<vendor>.<domain>/<kind>``, the same
vendor names as the DRA drivers).
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
from ._dra import (
    DEFAULT_DOMAIN,
    MAX_ATTRIBUTES,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS,
    DraProjection,
    resource_slices,
)

__all__ = ["CDI_VERSION", "DEFAULT_DOMAIN", "ENV_MODES", "MAX_ATTRIBUTES", "MAX_DEVICES", "MAX_DEVICES_WITH_TAINTS",
           "SHARED_NODES", "CdiProblem", "CdiProjection", "DraProjection", "cdi_specs", "resource_slices",
           "spec_file_name", "write_specs"]
