"""The router's HTTP face: an OpenAI-compatible proxy (a plain ASGI app, served by uvicorn).

``POST /v1/completions`` and ``/v1/chat/completions`` are routed by the policy on the prompt's
block hashes and forwarded as they came; a streamed answer (``"stream": true``, server-sent
events) is passed through chunk by chunk.  ``GET /v1/models`` lists the models the replicas
serve, ``GET /health`` answers 200 while a replica can take requests (503 otherwise),
``GET /metrics`` is the router's own Prometheus page.

The two proxied paths are served by :class:`RouterApp` as a plain ASGI callable (no Starlette
request object, middleware or routing on the path every request takes); the other paths, read
rarely, are a Starlette app behind it.  The request body is parsed once, to read the prompt, the
model and ``stream``, and the client's original bytes are what the replica receives.

Resilience, per request:

- the body is read within ``body_timeout_s`` and at most ``max_body_bytes`` (413 over it), and
  checked as bounded JSON before any work (400 naming what is wrong; never a traceback);
- a replica that fails **before the first byte** of its answer reaches the client (refused or
  reset connection, or a 502 / 503 / 504 of its own) counts against its circuit breaker and the
  request goes to another replica, up to ``retries`` times; nothing has been sent yet, so the
  client sees one answer;
- a stream that breaks after its first chunk ends with one server-sent event
  ``data: {"error": {...}}`` and a clean end of the response (the client can tell it is cut);
  a client that goes away mid-stream closes the replica's connection (its request stops there);
- upstream time limits: ``connect_timeout_s`` to connect and ``read_timeout_s`` between bytes
  (a replica silent longer: 504, not retried, as the request may be running there);
- the router's own lateness is not a replica's fault: a heartbeat measures how late the router's
  event loop runs (:class:`~accel.router._lag.LoopLag`).  An upstream timeout that fires while the
  loop was behind (its lateness summed over the attempt) for at least ``lag_ratio`` of that timeout
  (an overloaded router runs its timers and its I/O seconds late: the timer fires before the loop
  has handled the connection) is not counted against the replica's breaker.  A connect timeout
  (nothing sent, safe) is retried with the connect time limit lengthened by the lag seen, up to
  ``lag_retries`` times within ``lag_deadline_s`` of the request's arrival; past them, and for a
  timeout waiting for the answer
  (the request may be running there: sending it again would double the work of an overloaded
  system), the router answers 503 with ``Retry-After`` (``router_overloaded``, counted in
  ``accel_router_shed_total{reason="loop_lag"}``);
- admission: at most ``max_in_flight`` proxied requests at a time; one more is answered 503 with
  ``Retry-After`` at once (``accel_router_shed_total{reason="in_flight"}``) instead of queueing into
  the loop's lateness.

The upstream client is aiohttp's ``ClientSession`` (one per router, made on the server's event loop
at the first request, its connections kept alive and reused, no cookie jar: a proxy keeps no state
between its clients).  Measured in one run against the same fake engine it costs about a third of
httpx's CPU a request (see ``benchmarks/router/README.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from accel._net.asgi_server import BodyTimeoutError, read_body
from accel._net.bounded_json import JSONLimitError, JSONLimits, loads_bounded

from ._backends import Backend
from ._errors import BadRequestError, RouterError
from ._lag import LoopLag
from ._metrics import RouterMetrics
from ._policy import Picker
from ._prefix import PromptHasher, render_prompt

__all__ = ["ProxyConfig", "RouterApp", "build_app"]

_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
                  "transfer-encoding", "upgrade", "content-length", "host", "content-encoding"})
_HOP_RAW = frozenset(h.encode("latin-1") for h in _HOP)
_RETRY_STATUS = frozenset({502, 503, 504})
#: The proxied paths and whether each is the chat API (its prompt rendered from messages).
_PROXIED = {"/v1/completions": False, "/v1/chat/completions": True}
# "completion_tokens": N outside a JSON string (inside one its quotes are escaped, \"), so a regex
# reads the usage without decoding the whole answer again.
_USAGE = re.compile(rb'"completion_tokens"\s*:\s*(\d{1,12})')

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_RawHeaders = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class ProxyConfig:
    max_body_bytes: int = 4 * 1024 * 1024
    body_timeout_s: float = 10.0
    max_response_bytes: int = 64 * 1024 * 1024
    connect_timeout_s: float = 1.0
    read_timeout_s: float = 300.0
    #: Other replicas tried after the first fails before its first byte (None: every replica).
    retries: int | None = None
    #: Connections open to one replica at a time (kept alive and reused; 0: no limit); a request past them
    #: waits for one in the router, where it counts as the replica's outstanding load (a wait not held
    #: against the replica).  No limit by default: a replica's own queue (vLLM's waiting requests) is
    #: where requests should wait, seen by its scraped metrics.
    max_connections_per_replica: int = 0
    default_model: str = ""
    #: Proxied requests at a time (0: no bound); one more is answered 503 with Retry-After at once.  Below
    #: the server's own connection limit (ServerLimits.max_connections, 1024), whose 503 says less.
    max_in_flight: int = 1000
    #: An upstream timeout during which the router's loop was behind (summed) for at least this share
    #: is the router's, not the replica's (see the module doc).
    lag_ratio: float = 0.5
    #: Attempts sent again after a connect timeout that was the router's lateness (then 503).
    lag_retries: int = 3
    #: No such attempt is sent again later than this after the request arrived (then 503).
    lag_deadline_s: float = 10.0
    #: The Retry-After (seconds) of the router's own 503s (overloaded).
    retry_after_s: int = 1
    #: How often the loop-lag heartbeat runs.
    lag_interval_s: float = 0.05

    def __post_init__(self) -> None:
        if self.max_in_flight < 0 or self.lag_retries < 0 or self.retry_after_s < 0:
            raise ValueError("ProxyConfig: max_in_flight, lag_retries and retry_after_s must be >= 0")
        if not 0 < self.lag_ratio <= 1 or self.lag_deadline_s <= 0 or self.lag_interval_s <= 0:
            raise ValueError("ProxyConfig: lag_ratio must be in (0, 1], lag_deadline_s and lag_interval_s > 0")


@dataclass(frozen=True)
class _Error:
    """An answer of the router's own: ``{"error": {"message", "type", "code"}}`` with ``status``."""

    status: int
    message: str
    kind: str = "invalid_request_error"
    #: Seconds for a Retry-After header (the router's own 503 when overloaded).
    retry_after_s: int | None = None

    def body(self) -> bytes:
        return json.dumps({"error": {"message": self.message, "type": self.kind, "code": self.status}}).encode()


async def _send_whole(send: _Send, status: int, headers: _RawHeaders, content: bytes) -> None:
    headers.append((b"content-length", str(len(content)).encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


async def _send_error(send: _Send, err: _Error) -> None:
    headers = [(b"content-type", b"application/json")]
    if err.retry_after_s is not None:
        headers.append((b"retry-after", str(err.retry_after_s).encode("latin-1")))
    await _send_whole(send, err.status, headers, err.body())


_Headers = list[tuple[str, str]]


class _Upstream:
    """One attempt's open answer (an aiohttp ``ClientResponse``): the first chunk and the rest."""

    __slots__ = ("backend", "first", "response", "rest")

    def __init__(self, backend: Backend, response: Any, first: bytes, rest: AsyncIterator[bytes]) -> None:
        self.backend = backend
        self.response = response
        self.first = first
        self.rest = rest

    def headers(self) -> _RawHeaders:
        """The replica's answer headers less the hop-by-hop ones, and which replica answered."""
        out = [(k.lower(), v) for k, v in self.response.raw_headers if k.lower() not in _HOP_RAW]
        out.append((b"x-accel-backend", self.backend.url.encode("latin-1")))
        return out


class Proxy:
    """Forwards one request at a time to the replica the picker names (see the module doc)."""

    def __init__(self, picker: Picker, hasher: PromptHasher, metrics: RouterMetrics, config: ProxyConfig,
                 on_routed: Callable[[int], None] | None = None,
                 on_finished: Callable[[int], None] | None = None) -> None:
        self.picker = picker
        self.hasher = hasher
        self.metrics = metrics
        self.config = config
        self.on_routed = on_routed
        self.on_finished = on_finished
        # imported here, not at the first request: `accel router` freezes what start-up made out of the
        # garbage collector's walks (_server.main), and the first request does not pay for an import
        try:
            import aiohttp  # noqa: F401
        except ImportError as exc:
            raise RouterError("the router's upstream client needs aiohttp: pip install 'accel-sdk[router]'") from exc

        self._client: Any = None
        self._timeout: Any = None  # the session's aiohttp.ClientTimeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits = JSONLimits(max_bytes=config.max_body_bytes, max_depth=32)
        self._urls: dict[tuple[str, str], Any] = {}
        #: The server loop's lateness, started at the first request (on the server's loop).
        self.lag = LoopLag(config.lag_interval_s)
        self.in_flight = 0
        metrics.loop_lag.set_function(self.lag.current_s)
        metrics.in_flight.set_function(lambda: self.in_flight)

    def client(self) -> Any:
        if self._client is None:  # created on the server's event loop, at the first request
            import aiohttp

            self._loop = asyncio.get_running_loop()
            # sock_connect: the TCP connect only; waiting for a free pooled connection is not the replica's fault
            self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=self.config.connect_timeout_s,
                                                  sock_read=self.config.read_timeout_s)
            self._client = aiohttp.ClientSession(
                # idle connections kept 30 s for the next request to the same replica
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=self.config.max_connections_per_replica,
                                               keepalive_timeout=30),
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True, trust_env=False)
        return self._client

    def close(self, timeout_s: float = 2.0) -> None:
        """Close the upstream connections (from another thread, while the server's loop runs)."""
        client, loop = self._client, self._loop
        self._client = None
        if loop is not None and loop.is_running():
            with contextlib.suppress(RuntimeError):  # closed under us
                loop.call_soon_threadsafe(self.lag.stop)
        if client is not None and loop is not None and loop.is_running():
            with contextlib.suppress(Exception):  # a loop stopping under us: its sockets go with it
                asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout_s)

    def _parse(self, raw: bytes) -> dict[str, Any]:
        try:
            body = loads_bounded(raw, self._limits)
        except JSONLimitError as exc:
            raise BadRequestError(str(exc)) from None  # names "request body" already
        if not isinstance(body, dict):
            raise BadRequestError("request body must be a JSON object")
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise BadRequestError("'model' must be a string")
        if not isinstance(body.get("stream", False), bool):
            raise BadRequestError("'stream' must be true or false")
        return body

    async def serve(self, scope: _Scope, receive: _Receive, send: _Send, path: str, chat: bool) -> None:
        """Answer one proxied request (ASGI), or 503 at once past ``max_in_flight``."""
        if not self.lag.started:
            self.lag.start(asyncio.get_running_loop())
        bound = self.config.max_in_flight
        if bound and self.in_flight >= bound:
            self.metrics.shed.labels("in_flight").inc()
            self.metrics.request("", "503")
            return await _send_error(send, _Error(
                503, f"the router is overloaded: it holds {self.in_flight} requests, its bound (max_in_flight "
                f"{bound}); try again after the Retry-After", "router_overloaded", self.config.retry_after_s))
        self.in_flight += 1
        try:
            await self._serve(scope, receive, send, path, chat)
        finally:
            self.in_flight -= 1

    async def _serve(self, scope: _Scope, receive: _Receive, send: _Send, path: str, chat: bool) -> None:
        start = time.perf_counter()
        arrived = self.lag.clock()
        try:
            raw = await read_body(receive, self.config.max_body_bytes, self.config.body_timeout_s, scope)
        except ValueError as exc:
            self.metrics.request("", "413")
            return await _send_error(send, _Error(413, str(exc)))
        except BodyTimeoutError as exc:
            self.metrics.request("", "408")
            return await _send_error(send, _Error(408, str(exc)))
        try:
            body = self._parse(raw)
            prompt = render_prompt(body, chat=chat)
        except BadRequestError as exc:
            self.metrics.request("", str(exc.status))
            return await _send_error(send, _Error(exc.status, str(exc)))
        model = body.get("model") or self.config.default_model
        blocks, n_ids = self.hasher.hash_prompt(prompt, model, self.picker.blocks_needed(self.hasher.max_blocks))
        if blocks:
            self.metrics.prefix_blocks.inc(len(blocks))
        if self.on_routed is not None:
            self.on_routed(n_ids)
        # the client's headers as they came (ASGI gives them lower-cased), less the hop-by-hop ones
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k not in _HOP_RAW]
        up = await self._attempts(path, raw, headers, blocks, arrived)
        if isinstance(up, _Error):
            if self.on_finished is not None:
                self.on_finished(0)
            self.metrics.duration.observe(time.perf_counter() - start)
            return await _send_error(send, up)
        if body.get("stream") and up.response.content_type == "text/event-stream":
            return await self._stream(up, start, receive, send)
        await self._whole(up, start, arrived, path, raw, headers, blocks, send)

    async def _attempts(self, path: str, raw: bytes, headers: _Headers, blocks: list[int], arrived: float,
                        tried: set[int] | None = None) -> _Upstream | _Error:
        import aiohttp

        tried = set() if tried is None else tried
        limit = self.config.retries
        last_error = "no replica is available (all unhealthy or their circuit breakers open)"
        # replicas whose attempt timed out by the router's own lateness: tried elsewhere first, not excluded
        lagged: set[int] = set()
        lag_tries, lag_seen = 0, 0.0
        client = self.client()
        timeout: Any = self._timeout  # the session's, until a lateness lengthens the connect limit
        connect_s = self.config.connect_timeout_s
        while True:
            if limit is not None and len(tried) > limit:
                break
            picked = self.picker.pick(blocks, tried | lagged) if lagged else self.picker.pick(blocks, tried)
            if picked is None and lagged:
                picked = self.picker.pick(blocks, tried)
            if picked is None:
                break
            backend, matched = picked
            tried.add(backend.id)
            if matched:
                self.metrics.matched_blocks.inc(matched)
            backend.in_flight += 1
            began = self.lag.clock()
            try:
                resp = await client.post(self._url(backend, path), data=raw, headers=headers,
                                                allow_redirects=False, timeout=timeout)
            except aiohttp.ConnectionTimeoutError as exc:  # never connected: safe to send elsewhere
                lag = self.lag.during(began)
                if lag >= self.config.lag_ratio * connect_s:  # the router's lateness: retried, nobody blamed
                    self._lagged(backend, "connect", tried, lagged)
                    lag_tries, lag_seen = lag_tries + 1, max(lag_seen, lag)
                    if (lag_tries > self.config.lag_retries
                            or self.lag.clock() - arrived >= self.config.lag_deadline_s):
                        return self._shed_lag(lag_seen, "connect to a replica")
                    connect_s = self.config.connect_timeout_s + lag_seen
                    timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect_s,
                                                    sock_read=self.config.read_timeout_s)
                    continue
                last_error = self._failed(backend, f"{type(exc).__name__}: {exc}")
                continue
            except (aiohttp.ServerTimeoutError, TimeoutError):
                # connected and silent past read_timeout_s: the request may be running there, not sent again
                lag = self.lag.during(began)
                if lag >= self.config.lag_ratio * self.config.read_timeout_s:
                    self._lagged(backend, "first-byte", tried, lagged)
                    return self._shed_lag(lag, "the replica's answer")
                backend.in_flight -= 1
                backend.breaker.failure(time.monotonic())
                self.metrics.request(backend.url, "504")
                return _Error(504, f"replica {backend.url} did not answer in time", "upstream_timeout")
            except (aiohttp.ClientError, OSError) as exc:  # refused, reset, a broken answer head
                last_error = self._failed(backend, f"{type(exc).__name__}: {exc}")
                continue
            if resp.status in _RETRY_STATUS and self.picker.candidates(tried):
                resp.release()
                last_error = self._failed(backend, f"HTTP {resp.status}")
                continue
            try:
                first = await resp.content.readany()
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                resp.release()
                lag = self.lag.during(began)
                if isinstance(exc, TimeoutError) and lag >= self.config.lag_ratio * self.config.read_timeout_s:
                    self._lagged(backend, "first-byte", tried, lagged)
                    return self._shed_lag(lag, "the replica's answer")
                last_error = self._failed(backend, f"{type(exc).__name__} before the first byte: {exc}")
                continue
            return _Upstream(backend, resp, first, resp.content.iter_any())
        self.metrics.request("", "503" if not tried else "502")
        if not tried:
            return _Error(503, last_error, "no_replica")
        return _Error(502, f"every replica tried failed before answering; last: {last_error}", "upstream_error")

    def _lagged(self, backend: Backend, phase: str, tried: set[int], lagged: set[int]) -> None:
        """An attempt timed out by the router's own lateness: no verdict on the replica."""
        backend.in_flight -= 1
        backend.breaker.cancel()
        tried.discard(backend.id)
        lagged.add(backend.id)
        self.metrics.lag_timeouts.labels(backend.url, phase).inc()

    def _shed_lag(self, lag_s: float, what: str) -> _Error:
        self.metrics.shed.labels("loop_lag").inc()
        self.metrics.request("", "503")
        return _Error(503, f"the router is overloaded: its event loop ran {lag_s:.2f} s late while waiting for {what}, "
                      "so the time limit ran out on the router's side, not the replica's; try again after the "
                      "Retry-After", "router_overloaded", self.config.retry_after_s)

    def _url(self, backend: Backend, path: str) -> Any:
        """The replica's URL for ``path``, parsed once (aiohttp would parse a string each request)."""
        url = self._urls.get((backend.url, path))
        if url is None:
            from yarl import URL

            url = self._urls[(backend.url, path)] = URL(backend.url + path)
        return url

    def _failed(self, backend: Backend, why: str) -> str:
        backend.in_flight -= 1
        backend.breaker.failure(time.monotonic())
        self.metrics.retries.labels(backend.url).inc()
        return f"{backend.url}: {why}"

    def _done(self, up: _Upstream, start: float, code: str, ok: bool, output_tokens: int = 0) -> None:
        b = up.backend
        b.in_flight -= 1
        if ok:
            b.breaker.success()
        else:
            b.breaker.failure(time.monotonic())
        self.metrics.request(b.url, code)
        self.metrics.duration.observe(time.perf_counter() - start)
        if self.on_finished is not None:
            self.on_finished(output_tokens)

    async def _whole(self, up: _Upstream, start: float, arrived: float, path: str, raw: bytes, headers: _Headers,
                     blocks: list[int], send: _Send) -> None:
        """A non-streamed answer, read whole before answering: a replica that breaks mid-body is
        retried like one that broke before its first byte."""
        import aiohttp

        chunks = [up.first]
        size = len(up.first)
        try:
            async for chunk in up.rest:
                size += len(chunk)
                if size > self.config.max_response_bytes:
                    up.response.release()
                    self._done(up, start, "502", ok=True)
                    return await _send_error(send, _Error(
                        502, f"replica answer over {self.config.max_response_bytes} bytes", "upstream_error"))
                chunks.append(chunk)
        except asyncio.CancelledError:  # the server is stopping: close the replica's connection too
            up.response.release()
            up.backend.in_flight -= 1
            if self.on_finished is not None:
                self.on_finished(0)
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            up.response.release()
            self._failed(up.backend, f"{type(exc).__name__} mid-answer: {exc}")
            retry = await self._attempts(path, raw, headers, blocks, arrived, {up.backend.id})
            if isinstance(retry, _Upstream):
                return await self._whole(retry, start, arrived, path, raw, headers, blocks, send)
            if self.on_finished is not None:
                self.on_finished(0)
            self.metrics.duration.observe(time.perf_counter() - start)
            return await _send_error(send, retry)
        up.response.release()
        content = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        status = up.response.status
        self._done(up, start, str(status), ok=status < 500, output_tokens=_usage_tokens(content))
        await _send_whole(send, status, up.headers(), content)

    async def _stream(self, up: _Upstream, start: float, receive: _Receive, send: _Send) -> None:
        """A streamed answer, passed through chunk by chunk; a client that goes away cancels it
        (the body has been read, so the next ``receive`` answers only when the client disconnects
        or the response is complete)."""
        import aiohttp

        task = asyncio.current_task()
        state = {"finished": False, "gone": False}

        def watch(done: asyncio.Future[Any]) -> None:
            if done.cancelled() or done.exception() is not None or state["finished"]:
                return
            if done.result().get("type") == "http.disconnect" and task is not None:
                state["gone"] = True
                task.cancel()

        watcher = asyncio.ensure_future(receive())
        watcher.add_done_callback(watch)
        code, ok, events = str(up.response.status), True, 0
        try:
            await send({"type": "http.response.start", "status": up.response.status, "headers": up.headers()})
            events += up.first.count(b"data:")
            await send({"type": "http.response.body", "body": up.first, "more_body": True})
            try:
                async for chunk in up.rest:
                    events += chunk.count(b"data:")
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                code, ok = "stream-error", False
                self.metrics.stream_errors.labels(up.backend.url).inc()
                err = {"error": {"message": f"replica {up.backend.url} failed mid-stream: {type(exc).__name__}",
                                 "type": "upstream_error", "code": 502}}
                await send({"type": "http.response.body", "body": b"data: " + json.dumps(err).encode() + b"\n\n",
                            "more_body": True})
            state["finished"] = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            code, ok = "499", True  # client closed the connection (nginx's code); the replica did nothing wrong
            if not state["gone"]:
                raise  # the server is stopping
        finally:
            state["finished"] = True
            watcher.cancel()
            up.response.release()  # back to the pool when read to its end, closed if cut
            # the token chunks: every data event but the closing [DONE]
            self._done(up, start, code, ok, output_tokens=max(0, events - 1))


def _usage_tokens(content: bytes) -> int:
    """``usage.completion_tokens`` of an OpenAI answer (0 when it has none)."""
    found = _USAGE.findall(content)
    return int(found[-1]) if found else 0


class RouterApp:
    """The router's ASGI app: the proxied paths served straight by :class:`Proxy`, the rest by a
    Starlette app (``rest``)."""

    def __init__(self, proxy: Proxy, rest: Any) -> None:
        self.proxy = proxy
        self.rest = rest

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http":
            chat = _PROXIED.get(scope["path"])
            if chat is not None:
                if scope["method"] != "POST":
                    return await _send_whole(send, 405, [(b"allow", b"POST"), (b"content-type", b"application/json")],
                                             _Error(405, "use POST").body())
                return await self.proxy.serve(scope, receive, send, scope["path"], chat)
        await self.rest(scope, receive, send)


def build_app(proxy: Proxy, metrics: RouterMetrics,
              source_status: Callable[[], dict[str, Any]] | None = None) -> RouterApp:
    """The ASGI app of a router (see the module doc); ``source_status``: where the replicas come
    from (``--from-serve``), shown on ``/health``."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    picker = proxy.picker

    async def models(request: Any) -> Any:
        now = time.monotonic()
        seen: dict[str, dict[str, Any]] = {}
        for b in picker.backends:
            if b.available(now):
                for m in b.models:
                    seen.setdefault(m, {"id": m, "object": "model", "owned_by": "accel-router"})
        if not seen:
            err = _Error(503, "no available replica has reported its models yet", "no_replica")
            return Response(err.body(), status_code=503, media_type="application/json")
        return JSONResponse({"object": "list", "data": list(seen.values())})

    async def health(request: Any) -> Any:
        now = time.monotonic()
        reps = [{"url": b.url, "role": b.role, "healthy": b.healthy, "breaker": b.breaker.state(now),
                 "in_flight": b.in_flight, "error": b.last_health_error} for b in picker.backends]
        up = sum(1 for b in picker.backends if b.available(now))
        body: dict[str, Any] = {"status": "ok" if up else "unavailable", "available": up, "replicas": reps}
        if source_status is not None:
            body["from_serve"] = source_status()
        return JSONResponse(body, status_code=200 if up else 503)

    async def prom(request: Any) -> Any:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", prom, methods=["GET"]),
    ]
    return RouterApp(proxy, Starlette(routes=routes))
