"""Typed errors of :mod:`accel.router`."""

from __future__ import annotations

from accel.errors import AccelError, ParseError

__all__ = ["BadRequestError", "KVEventError", "RouterError"]


class RouterError(AccelError):
    """The router cannot do what was asked (no replica can take a request, a bad option)."""

    code = "router.error"


class BadRequestError(RouterError):
    """A client's request is not acceptable; ``status`` is the HTTP status to answer with."""

    code = "router.bad-request"

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class KVEventError(ParseError):
    """A KV-event message (ZMQ frames or its msgpack payload) is not in vLLM's wire format."""

    code = "router.kv-event"
