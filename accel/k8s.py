"""Moved to :mod:`accel.integrations.k8s`; this name stays so existing imports keep working."""

from .integrations.k8s import (
    DEFAULT_DOMAIN,
    MAX_ATTRIBUTES,
    MAX_DEVICES,
    MAX_DEVICES_WITH_TAINTS,
    DraProjection,
    resource_slices,
)

__all__ = ["DEFAULT_DOMAIN", "MAX_ATTRIBUTES", "MAX_DEVICES", "MAX_DEVICES_WITH_TAINTS", "DraProjection",
           "resource_slices"]
