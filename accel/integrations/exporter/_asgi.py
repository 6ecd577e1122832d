"""The exporter's HTTP face: an ASGI app that renders a Prometheus registry (served by uvicorn).

It answers as prometheus_client's own server does (every path but ``/favicon.ico`` is the
metrics page; ``Accept`` picks the text or OpenMetrics format; ``Accept-Encoding: gzip``
compresses; ``name[]`` narrows to some families), but a scrape runs on a small thread pool, so one
slow collection (a device that takes seconds to answer) never stalls the event loop that holds
every other connection.
"""

from __future__ import annotations

import asyncio
import gzip
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

__all__ = ["MetricsApp"]

MAX_QUERY_CHARS = 4096
"""Longest query string accepted (``name[]`` filters); longer gets HTTP 414."""


class MetricsApp:
    """``registry`` (a prometheus_client ``CollectorRegistry``) as an ASGI app; at most
    ``workers`` scrapes are collected at once, the rest wait their turn."""

    def __init__(self, registry: Any, *, workers: int = 2) -> None:
        self.registry = registry
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="accel-scrape")

    def _render(self, accept: str, encoding: str, query: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
        from prometheus_client.exposition import choose_encoder, gzip_accepted

        encoder, content_type = choose_encoder(accept)
        registry = self.registry
        names = parse_qs(query).get("name[]")
        if names:
            registry = registry.restricted_registry(names)
        output: bytes = encoder(registry)
        headers = [(b"content-type", content_type.encode())]
        if gzip_accepted(encoding):
            output = gzip.compress(output)
            headers.append((b"content-encoding", b"gzip"))
        return headers, output

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/favicon.ico":
            await _send(send, 200, [], b"")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, [(b"content-type", b"text/plain")], b"GET /metrics\n")
            return
        query = scope.get("query_string", b"").decode("latin-1")
        if len(query) > MAX_QUERY_CHARS:
            await _send(send, 414, [(b"content-type", b"text/plain")], b"query string too long\n")
            return
        headers = dict(scope["headers"])
        accept = headers.get(b"accept", b"").decode("latin-1")
        encoding = headers.get(b"accept-encoding", b"").decode("latin-1")
        loop = asyncio.get_running_loop()
        out_headers, body = await loop.run_in_executor(self.pool, self._render, accept, encoding, query)
        await _send(send, 200, out_headers, b"" if scope["method"] == "HEAD" else body, length=len(body))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


async def _send(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes,
                length: int | None = None) -> None:
    size = len(body) if length is None else length
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", b"%d" % size)]})
    await send({"type": "http.response.body", "body": body})
