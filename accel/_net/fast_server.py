"""accel's fast HTTP server: uvicorn with httptools' parser on uvloop, the limits of the shared stack.

:class:`~accel._net.asgi_server.BackgroundServer` (h11, the standard asyncio loop) is the shared
stack; on a service that answers many small requests (``accel router``, on every proxied request's
path; ``accel serve``'s API) h11's pure-Python parser and the standard loop are a large part of
the CPU a request costs (``benchmarks/router/README.md``, ``benchmarks/service/``).
:class:`FastServer` serves the same way with uvicorn's ``httptools`` protocol (llhttp, in C) on
``uvloop`` (libuv), both in the ``[router]`` and ``[server]`` extras; without them installed it is a
``BackgroundServer``.  The limits stay those of :class:`~accel._net.asgi_server.ServerLimits`:

* a complete request head within ``header_timeout_s`` of the connection opening or of the previous
  response (the same deadline as ``BackgroundServer``'s h11 protocol);
* a request head of at most ``max_header_bytes`` (h11 enforces this itself; llhttp does not, so the
  protocol counts the bytes received while a head is incomplete, and the URL and header bytes
  parsed, for a head that arrives whole in one read: over the limit, a 400 and the connection
  closed, as h11 answers);
* ``max_connections`` connections and requests at a time (503 beyond), ``backlog``, ``keep_alive_s``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from accel._net.asgi_server import BackgroundServer, HeadDeadline, ServerLimits

__all__ = ["FastServer", "fast_stack", "serve"]


def fast_stack() -> bool:
    """Whether httptools and uvloop are installed (the ``[router]`` extra)."""
    return all(importlib.util.find_spec(m) is not None for m in ("httptools", "uvloop"))


def _protocol_class(limits: ServerLimits) -> type:
    """uvicorn's httptools protocol with a deadline and a size limit for each request head."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    max_head = limits.max_header_bytes

    class DeadlineProtocol(HeadDeadline, HttpToolsProtocol):
        _head_bytes = 0  # bytes received while a head is incomplete (one never finished)
        _head_parsed = 0  # the parsed head's URL and header bytes (one complete in a single read)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_parsed = 0

        def on_url(self, url: bytes) -> None:
            self._count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

        def _count_head(self, n: int) -> None:
            # raised inside the parser's callback: uvicorn answers its 400 for a bad request
            self._head_parsed += n
            if self._head_parsed > max_head:
                raise ValueError(f"request head over {max_head} bytes")

        def _arm(self) -> None:
            super()._arm()
            self._head_bytes = 0

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self._waiting_for_head():
                return
            self._head_bytes += len(data)
            if self._head_bytes > max_head and not self.transport.is_closing():
                self._disarm()
                self.send_400_response("Invalid HTTP request received.")  # as h11 answers a head too large

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # a pipelined request already parsed (its head complete) has just started: no deadline for it
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self._arm()

    DeadlineProtocol.header_timeout_s = limits.header_timeout_s
    return DeadlineProtocol


class FastServer(BackgroundServer):
    """Serve ``app`` on ``listen:port`` with httptools and uvloop (see the module doc); the
    lifecycle of :class:`~accel._net.asgi_server.BackgroundServer` (bound at construction,
    :meth:`start`, :meth:`close`), only uvicorn's configuration differs."""

    def __init__(self, app: Any, *, listen: str, port: int, limits: ServerLimits | None = None,
                 name: str = "accel-http") -> None:
        super().__init__(app, listen=listen, port=port, limits=ServerLimits() if limits is None else limits,
                         name=name, verbose=False)

    def _config(self, app: Any, limits: ServerLimits, verbose: bool) -> Any:
        import uvicorn

        return uvicorn.Config(
            app, http=_protocol_class(limits), loop="uvloop", lifespan="off", log_config=None, access_log=False,
            timeout_keep_alive=max(1, round(limits.keep_alive_s)), limit_concurrency=limits.max_connections,
            backlog=limits.backlog, timeout_graceful_shutdown=2, server_header=False, date_header=False,
            proxy_headers=False)  # no X-Forwarded-* rewriting of the scope: nothing here reads the client address


def serve(app: Any, *, listen: str, port: int, name: str) -> BackgroundServer:
    """The fast server where httptools and uvloop are installed, else accel's shared one."""
    if fast_stack():
        return FastServer(app, listen=listen, port=port, name=name)
    return BackgroundServer(app, listen=listen, port=port, name=name)
