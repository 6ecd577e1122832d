"""The plugin contract: what a vendor backend implements and how accel finds it.

Entry-point group :data:`ENTRY_POINT_GROUP` (``accel.backends``); the entry-point name is the
backend id.  See :class:`BackendPlugin` and :class:`Backend`.
"""

from ._actuation import SupportsPartitionActuation, actuator
from ._capabilities import CAPABILITY_DOCS, Capability
from ._contract import (
    Backend,
    BackendConfig,
    BackendPlugin,
    DeviceEvent,
    PluginInfo,
    ProbeResult,
    ProbeStatus,
    SupportsEvents,
    SupportsPartitions,
    SupportsProcesses,
)
from ._options import check_options
from ._readings import READING_DOCS, Reading, describe_readings
from ._registry import ENTRY_POINT_GROUP, register, registered, unregister
from ._version import PLUGIN_API, SUPPORTED_API_VERSIONS, ApiVersion, negotiate

__all__ = [
    "CAPABILITY_DOCS",
    "ENTRY_POINT_GROUP",
    "PLUGIN_API",
    "READING_DOCS",
    "SUPPORTED_API_VERSIONS",
    "ApiVersion",
    "Backend",
    "BackendConfig",
    "BackendPlugin",
    "Capability",
    "DeviceEvent",
    "PluginInfo",
    "ProbeResult",
    "ProbeStatus",
    "Reading",
    "SupportsEvents",
    "SupportsPartitionActuation",
    "SupportsPartitions",
    "SupportsProcesses",
    "actuator",
    "check_options",
    "describe_readings",
    "negotiate",
    "register",
    "registered",
    "unregister",
]
