"""The router's HTTP face: an OpenAI-compatible proxy (Starlette, served by uvicorn).

``POST /v1/completions`` and ``/v1/chat/completions`` are routed by the policy on the prompt's
block hashes and forwarded as they came; a streamed answer (``"stream": true``, server-sent
events) is passed through chunk by chunk.  ``GET /v1/models`` lists the models the replicas
serve, ``GET /health`` answers 200 while a replica can take requests (503 otherwise),
``GET /metrics`` is the router's own Prometheus page.

Resilience, per request:

- the body is read within ``body_timeout_s`` and at most ``max_body_bytes`` (413 over it), and
  checked as bounded JSON before any work (400 naming what is wrong; never a traceback);
- a replica that fails **before the first byte** of its answer reaches the client (refused or
  reset connection, or a 502 / 503 / 504 of its own) counts against its circuit breaker and the
  request goes to another replica, up to ``retries`` times; nothing has been sent yet, so the
  client sees one answer;
- a stream that breaks after its first chunk ends with one server-sent event
  ``data: {"error": {...}}`` and a clean end of the response (the client can tell it is cut);
- upstream time limits: ``connect_timeout_s`` to connect and ``read_timeout_s`` between bytes
  (a replica silent longer: 504, not retried, as the request may be running there).

The upstream client is aiohttp's ``ClientSession`` (one per router, made on the server's event loop
at the first request, no cookie jar: a proxy keeps no state between its clients).  Measured in one
run against the same fake engine it costs about a third of httpx's CPU a request (see
``benchmarks/router/README.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from accel._net.asgi_server import BodyTimeoutError, read_body
from accel._net.bounded_json import JSONLimitError, JSONLimits, loads_bounded

from ._backends import Backend
from ._errors import BadRequestError
from ._metrics import RouterMetrics
from ._policy import Picker
from ._prefix import PromptHasher, render_prompt

__all__ = ["ProxyConfig", "build_app"]

_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
                  "transfer-encoding", "upgrade", "content-length", "host", "content-encoding"})
_HOP_RAW = frozenset(h.encode("latin-1") for h in _HOP)
_RETRY_STATUS = frozenset({502, 503, 504})


@dataclass(frozen=True)
class ProxyConfig:
    max_body_bytes: int = 4 * 1024 * 1024
    body_timeout_s: float = 10.0
    max_response_bytes: int = 64 * 1024 * 1024
    connect_timeout_s: float = 1.0
    read_timeout_s: float = 300.0
    #: Other replicas tried after the first fails before its first byte (None: every replica).
    retries: int | None = None
    default_model: str = ""


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


_Headers = list[tuple[str, str]]


class _Upstream:
    """One attempt's open answer (an aiohttp ``ClientResponse``): the first chunk and the rest."""

    __slots__ = ("backend", "content_type", "first", "response", "rest")

    def __init__(self, backend: Backend, response: Any, first: bytes, rest: AsyncIterator[bytes]) -> None:
        self.backend = backend
        self.response = response
        self.first = first
        self.rest = rest
        self.content_type: str = response.headers.get("content-type", "")


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
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits = JSONLimits(max_bytes=config.max_body_bytes, max_depth=32)

    def client(self) -> Any:
        if self._client is None:  # created on the server's event loop, at the first request
            import aiohttp

            self._loop = asyncio.get_running_loop()
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=None, connect=self.config.connect_timeout_s,
                                              sock_read=self.config.read_timeout_s),
                cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True, trust_env=False)
        return self._client

    def close(self, timeout_s: float = 2.0) -> None:
        """Close the upstream connections (from another thread, while the server's loop runs)."""
        client, loop = self._client, self._loop
        self._client = None
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

    async def handle(self, request: Any, path: str, chat: bool) -> Any:
        start = time.perf_counter()
        try:
            raw = await read_body(request.receive, self.config.max_body_bytes, self.config.body_timeout_s)
        except ValueError as exc:
            self.metrics.requests.labels("", "413").inc()
            return _error(413, str(exc))
        except BodyTimeoutError as exc:
            self.metrics.requests.labels("", "408").inc()
            return _error(408, str(exc))
        try:
            body = self._parse(raw)
            prompt = render_prompt(body, chat=chat)
        except BadRequestError as exc:
            self.metrics.requests.labels("", str(exc.status)).inc()
            return _error(exc.status, str(exc))
        model = body.get("model") or self.config.default_model
        blocks, n_ids = self.hasher.hash_prompt(prompt, model)
        self.metrics.prefix_blocks.inc(len(blocks))
        if self.on_routed is not None:
            self.on_routed(n_ids)
        # the client's headers as they came (ASGI gives them lower-cased), less the hop-by-hop ones
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]
                   if k not in _HOP_RAW]
        up = await self._attempts(path, raw, headers, blocks)
        if not isinstance(up, _Upstream):
            if self.on_finished is not None:
                self.on_finished(0)
            self.metrics.duration.observe(time.perf_counter() - start)
            return up
        if body.get("stream") and up.content_type.startswith("text/event-stream"):
            return self._stream(up, start)
        return await self._whole(up, start, path, raw, headers, blocks)

    async def _attempts(self, path: str, raw: bytes, headers: _Headers, blocks: list[int],
                        tried: set[int] | None = None) -> Any:
        import aiohttp

        tried = set() if tried is None else tried
        limit = self.config.retries
        last_error = "no replica is available (all unhealthy or their circuit breakers open)"
        while True:
            if limit is not None and len(tried) > limit:
                break
            picked = self.picker.pick(blocks, tried)
            if picked is None:
                break
            backend, matched = picked
            tried.add(backend.id)
            self.metrics.matched_blocks.inc(matched)
            backend.in_flight += 1
            try:
                resp = await self.client().post(backend.url + path, data=raw, headers=headers,
                                                allow_redirects=False)
            except aiohttp.ConnectionTimeoutError as exc:  # never connected: safe to send elsewhere
                last_error = self._failed(backend, f"{type(exc).__name__}: {exc}")
                continue
            except (aiohttp.ServerTimeoutError, TimeoutError):
                # connected and silent past read_timeout_s: the request may be running there
                backend.in_flight -= 1
                backend.breaker.failure(time.monotonic())
                self.metrics.requests.labels(backend.url, "504").inc()
                return _error(504, f"replica {backend.url} did not answer in time", "upstream_timeout")
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
                last_error = self._failed(backend, f"{type(exc).__name__} before the first byte: {exc}")
                continue
            return _Upstream(backend, resp, first, resp.content.iter_any())
        self.metrics.requests.labels("", "503" if not tried else "502").inc()
        if not tried:
            return _error(503, last_error, "no_replica")
        return _error(502, f"every replica tried failed before answering; last: {last_error}", "upstream_error")

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
        self.metrics.requests.labels(b.url, code).inc()
        self.metrics.duration.observe(time.perf_counter() - start)
        if self.on_finished is not None:
            self.on_finished(output_tokens)

    async def _whole(self, up: _Upstream, start: float, path: str, raw: bytes, headers: _Headers,
                     blocks: list[int]) -> Any:
        """A non-streamed answer, read whole before answering: a replica that breaks mid-body is
        retried like one that broke before its first byte."""
        import aiohttp
        from starlette.responses import Response

        chunks = [up.first]
        size = len(up.first)
        try:
            async for chunk in up.rest:
                size += len(chunk)
                if size > self.config.max_response_bytes:
                    up.response.release()
                    self._done(up, start, "502", ok=True)
                    return _error(502, f"replica answer over {self.config.max_response_bytes} bytes",
                                  "upstream_error")
                chunks.append(chunk)
        except asyncio.CancelledError:  # the client went away: close the replica's connection too
            up.response.release()
            up.backend.in_flight -= 1
            if self.on_finished is not None:
                self.on_finished(0)
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            up.response.release()
            self._failed(up.backend, f"{type(exc).__name__} mid-answer: {exc}")
            retry = await self._attempts(path, raw, headers, blocks, {up.backend.id})
            if isinstance(retry, _Upstream):
                return await self._whole(retry, start, path, raw, headers, blocks)
            if self.on_finished is not None:
                self.on_finished(0)
            self.metrics.duration.observe(time.perf_counter() - start)
            return retry
        up.response.release()
        content = b"".join(chunks)
        status = up.response.status
        self._done(up, start, str(status), ok=status < 500, output_tokens=_usage_tokens(content))
        return Response(content, status_code=status, headers=_answer_headers(up))

    def _stream(self, up: _Upstream, start: float) -> Any:
        import aiohttp
        from starlette.responses import StreamingResponse

        async def body() -> AsyncIterator[bytes]:
            code, ok, events = str(up.response.status), True, 0
            try:
                events += up.first.count(b"data:")
                yield up.first
                async for chunk in up.rest:
                    events += chunk.count(b"data:")
                    yield chunk
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                code, ok = "stream-error", False
                self.metrics.stream_errors.labels(up.backend.url).inc()
                err = {"error": {"message": f"replica {up.backend.url} failed mid-stream: {type(exc).__name__}",
                                 "type": "upstream_error", "code": 502}}
                yield b"data: " + json.dumps(err).encode() + b"\n\n"
            finally:
                up.response.release()  # back to the pool when read to its end, closed if cut
                # the token chunks: every data event but the closing [DONE]
                self._done(up, start, code, ok, output_tokens=max(0, events - 1))

        return StreamingResponse(body(), status_code=up.response.status, headers=_answer_headers(up))


def _answer_headers(up: _Upstream) -> dict[str, str]:
    out = {k: v for k, v in up.response.headers.items() if k.lower() not in _HOP}
    out["x-accel-backend"] = up.backend.url
    return out


def _usage_tokens(content: bytes) -> int:
    try:  # a replica's answer goes through the bounded reader too: deep nesting is 0, not a RecursionError
        doc = loads_bounded(content, what="the replica's answer")
        return int(doc["usage"]["completion_tokens"])
    except (ValueError, KeyError, TypeError):
        return 0


def build_app(proxy: Proxy, metrics: RouterMetrics) -> Any:
    """The Starlette app of a router (see the module doc)."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    picker = proxy.picker

    async def completions(request: Any) -> Any:
        return await proxy.handle(request, "/v1/completions", chat=False)

    async def chat(request: Any) -> Any:
        return await proxy.handle(request, "/v1/chat/completions", chat=True)

    async def models(request: Any) -> Any:
        now = time.monotonic()
        seen: dict[str, dict[str, Any]] = {}
        for b in picker.backends:
            if b.available(now):
                for m in b.models:
                    seen.setdefault(m, {"id": m, "object": "model", "owned_by": "accel-router"})
        if not seen:
            return _error(503, "no available replica has reported its models yet", "no_replica")
        return JSONResponse({"object": "list", "data": list(seen.values())})

    async def health(request: Any) -> Any:
        now = time.monotonic()
        reps = [{"url": b.url, "role": b.role, "healthy": b.healthy, "breaker": b.breaker.state(now),
                 "in_flight": b.in_flight, "error": b.last_health_error} for b in picker.backends]
        up = sum(1 for b in picker.backends if b.available(now))
        return JSONResponse({"status": "ok" if up else "unavailable", "available": up, "replicas": reps},
                            status_code=200 if up else 503)

    async def prom(request: Any) -> Any:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    routes = [
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", prom, methods=["GET"]),
    ]
    return Starlette(routes=routes)
