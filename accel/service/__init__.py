"""accel.service: the service ring (``accel serve``, and next to it ``accel router``).

Processes that import the scheduler, discovery and the integrations, never the other way round
(DESIGN §11).  This package holds the executor interface today; the HTTP service is built on it.
"""

from __future__ import annotations

from ._executor import (
    Executor,
    ExecutorError,
    ExitReason,
    Handle,
    JobLostError,
    LaunchSpec,
    PlacedDevice,
    RunStatus,
)

__all__ = [
    "Executor",
    "ExecutorError",
    "ExitReason",
    "Handle",
    "JobLostError",
    "LaunchSpec",
    "PlacedDevice",
    "RunStatus",
]
