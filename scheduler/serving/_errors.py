"""Typed errors of :mod:`accel.scheduler.serving`.

Bad input (a negative token count, an empty replica set, a malformed trace line) raises the
scheduler's :class:`~accel.scheduler.InvalidRequestError` with ``field`` naming what was wrong;
a model or device the cost data does not know raises :class:`UnknownModelError`.
"""

from __future__ import annotations

from accel.errors import SchedulerError
from accel.scheduler import InvalidRequestError

__all__ = ["InvalidRequestError", "UnknownModelError"]


class UnknownModelError(SchedulerError):
    """A model (or a model/device cost profile) is not in the serving cost data."""

    code = "scheduler.serving.unknown-model"

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name
