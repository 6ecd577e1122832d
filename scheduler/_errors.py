"""Typed errors raised by :mod:`accel.scheduler`.

Every error is a :class:`accel.errors.SchedulerError`, so callers that only care about "the
scheduler refused" catch one class; the subclasses say why and carry the offending field.
"""

from __future__ import annotations

from accel.errors import SchedulerError

__all__ = ["InvalidRequestError", "SchedulerStateError", "UnknownScorerError"]


class InvalidRequestError(SchedulerError):
    """A placement request is malformed.  ``field`` names the offending field."""

    code = "scheduler.invalid-request"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnknownScorerError(SchedulerError):
    """No scorer has this name (registered, built in, or in the entry-point group), or the name's
    entry point holds no scorer.  Was ``UnknownPolicyError``, still importable as a deprecated alias."""

    code = "scheduler.unknown-scorer"


class SchedulerStateError(SchedulerError):
    """An operation does not match the cluster state (double release, unknown allocation...)."""

    code = "scheduler.invalid-state"
