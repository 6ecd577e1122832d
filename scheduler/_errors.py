"""Typed errors raised by :mod:`accel.scheduler`.

Every error is a :class:`accel.errors.SchedulerError`, so callers that only care about "the
scheduler refused" catch one class; the subclasses say why and carry the offending field.
"""

from __future__ import annotations

from accel.errors import SchedulerError

__all__ = ["InvalidRequestError", "SchedulerStateError", "UnknownPolicyError"]


class InvalidRequestError(SchedulerError):
    """A placement request is malformed.  ``field`` names the offending field."""

    code = "scheduler.invalid-request"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnknownPolicyError(SchedulerError):
    """A scorer or filter name is not registered (built-in or via the entry-point group)."""

    code = "scheduler.unknown-policy"


class SchedulerStateError(SchedulerError):
    """An operation does not match the cluster state (double release, unknown allocation...)."""

    code = "scheduler.invalid-state"
