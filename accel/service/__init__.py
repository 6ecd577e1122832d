"""accel.service: the service ring (``accel serve``, and next to it ``accel router``).

Processes that import the scheduler, discovery and the integrations, never the other way round
(DESIGN §11).  ``accel serve`` (:mod:`._server`) runs the HTTP app (:mod:`._app`) over the live
service (:mod:`._core`), which drives the queueing engine on the wall clock and runs what it
places on executors (:mod:`.executors`, one contract: :mod:`._executor`).

The names below load on first use: ``accel --help`` imports this package to list ``accel serve``,
``accel job`` and ``accel bill`` (:mod:`._commands`), and must not pull in the device model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import _executor

        return getattr(_executor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
