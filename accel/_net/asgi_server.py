"""An ASGI app served by uvicorn on a thread, with the limits a service facing a network needs.

The standard library's ``ThreadingHTTPServer`` starts one thread per connection and waits forever
for a request line, so 300 idle sockets are 300 threads and a client that sends a byte every few
seconds (slowloris) holds one for ever.  Here one asyncio event loop (uvicorn's, on its own thread)
holds every connection, and:

* a connection must deliver a complete request head within ``header_timeout_s`` of opening (or of
  the previous response), however slowly it trickles bytes (uvicorn itself only times out an idle
  keep-alive connection, and forgets that timer at the first byte);
* a request head is at most ``max_header_bytes`` (h11's limit; over it, a 400);
* at most ``max_connections`` connections and requests at a time (uvicorn's ``limit_concurrency``;
  more get a 503 at once);
* the listen backlog is ``backlog`` (a burst of connects waits in the kernel, not refused);
* an idle keep-alive connection is closed after ``keep_alive_s``.

Reading a request body within a time limit is the app's part (see :func:`read_body`).  The server
runs on a thread in every case, so the caller's signal handlers stay the caller's (uvicorn installs
its own only on the main thread, and re-raises SIGTERM after shutting down).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from dataclasses import dataclass
from typing import Any, Self

__all__ = ["BackgroundServer", "BodyTimeoutError", "ServerLimits", "read_body"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Connection limits of :class:`BackgroundServer` (see the module docstring)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0
    keep_alive_s: float = 5.0
    max_header_bytes: int = 64 * 1024
    max_connections: int = 1024
    backlog: int = 1024


class BodyTimeoutError(Exception):
    """The client did not send its whole body within the time limit."""


async def read_body(receive: Any, limit_bytes: int, timeout_s: float, scope: Any = None) -> bytes:
    """The request body from an ASGI ``receive``, at most ``limit_bytes`` (more raises
    ``ValueError``), all of it within ``timeout_s`` (else :class:`BodyTimeoutError`).  With the
    request's ``scope``, a ``Content-Length`` over the limit raises ``ValueError`` before anything
    is read: the client is answered at once, not after the body timeout."""
    if scope is not None:
        for name, value in scope.get("headers", ()):
            if name.lower() == b"content-length" and value.isdigit() and int(value) > limit_bytes:
                raise ValueError(f"request body is {int(value)} bytes; the limit is {limit_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise BodyTimeoutError("the client went away before sending its body")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit_bytes:
                    raise ValueError(f"request body is over the limit of {limit_bytes} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError as exc:
        raise BodyTimeoutError(f"the request body did not arrive within {timeout_s:g} s") from exc


class HeadDeadline:
    """A deadline for each request head, mixed into a uvicorn HTTP protocol (h11 here, httptools
    in :mod:`accel._net.fast_server`): a complete head within :attr:`header_timeout_s` of the
    connection opening or of the previous response, else the connection is closed.  uvicorn makes
    a new ``cycle`` object when a head is complete, which is how the protocol tells it arrived."""

    header_timeout_s: float = 10.0
    _deadline: asyncio.TimerHandle | None = None
    _waiting_cycle: object = None
    # the uvicorn protocol's own attributes
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def _arm(self) -> None:
        self._disarm()
        self._waiting_cycle = self.cycle
        self._deadline = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.cycle is self._waiting_cycle and not self.transport.is_closing():
            self.transport.close()  # no complete request head in time

    def _waiting_for_head(self) -> bool:
        """After data came in: whether a head is still awaited (a head now complete disarms the
        deadline: the app, and its body timeout, take over)."""
        if self._deadline is None:
            return False
        if self.cycle is not self._waiting_cycle:
            self._disarm()
            return False
        return True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


def _protocol_class(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol with a deadline for each request head."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class DeadlineProtocol(HeadDeadline, H11Protocol):
        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._waiting_for_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

    DeadlineProtocol.header_timeout_s = header_timeout_s
    return DeadlineProtocol


def bind(listen: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on ``listen:port`` (IPv4 or IPv6 literal, or a name); raises
    ``OSError`` as ``bind`` does (the caller turns EADDRINUSE into its own message)."""
    host = listen.strip("[]")
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class BackgroundServer:
    """Serve ``app`` on ``listen:port`` (bound at construction: ``OSError`` then, and :attr:`port`
    is known before :meth:`start`); :meth:`start` runs uvicorn on a thread, :meth:`close` stops it.

    ``verbose`` logs each request (uvicorn's access log) and uvicorn's warnings on stderr; without
    it nothing a client sends writes to stderr."""

    def __init__(self, app: Any, *, listen: str, port: int, limits: ServerLimits = ServerLimits(),
                 name: str = "accel-http", verbose: bool = False) -> None:
        import uvicorn

        self.limits = limits
        self.name = name
        self.socket = bind(listen, port, limits.backlog)
        _quiet_logs(verbose)
        config = self._config(app, limits, verbose)
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._started = threading.Event()

    def _config(self, app: Any, limits: ServerLimits, verbose: bool) -> Any:
        """uvicorn's configuration (h11 with a deadline for each request head, the standard loop)."""
        import uvicorn

        return uvicorn.Config(
            app, http=_protocol_class(limits.header_timeout_s), lifespan="off", log_config=None,
            access_log=verbose, timeout_keep_alive=max(1, round(limits.keep_alive_s)),
            limit_concurrency=limits.max_connections, backlog=limits.backlog,
            h11_max_incomplete_event_size=limits.max_header_bytes, timeout_graceful_shutdown=2,
            server_header=False, date_header=False)

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    def _run(self) -> None:
        self._server.run(sockets=[self.socket])

    def start(self) -> Self:
        """Serve on a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            self._thread.join(0.005)
        return self

    def shutdown(self) -> None:
        """Ask the server to stop (safe from a signal handler or another thread)."""
        self._server.should_exit = True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the server thread ends (after :meth:`shutdown`)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def close(self) -> None:
        """Stop serving and close the listening socket."""
        self.shutdown()
        self.wait(timeout=5)
        self.socket.close()


def _quiet_logs(verbose: bool) -> None:
    """uvicorn logs a malformed request at WARNING; with no handler configured Python's
    last-resort handler would print it on stderr for every bad client.  Errors (a bug in an app)
    still reach stderr."""
    level = logging.INFO if verbose else logging.ERROR
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(level)
    top = logging.getLogger("uvicorn")
    if verbose and not top.handlers:  # the other two propagate to it
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("accel: %(message)s"))
        top.addHandler(handler)
