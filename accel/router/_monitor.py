"""The router's background work: active health checks, engine metric scrapes, the autoscaler.

One daemon thread runs an asyncio loop with its own HTTP client, so a slow engine never holds the
proxy's event loop.  Every ``health_interval_s`` each replica's ``GET /health`` (vLLM and SGLang
both serve it) must answer 2xx within ``health_timeout_s``: ``unhealthy_after`` failures in a row
take the replica out of routing, one success puts it back (its models are then read from
``GET /v1/models``).  Every ``scrape_interval_s`` each replica's ``GET /metrics`` is parsed
(:func:`parse_engine_metrics`); a failed scrape leaves the load unknown, not zero.  Every
``sync_s`` of the autoscaler, its decision on the live load (:class:`LiveLoad`) becomes the
desired replica count.

The thread's HTTP client is aiohttp's (as the proxy's): it shares the interpreter lock with the
proxy's loop, so its work a check is held into proxied requests; httpx cost about three times
aiohttp's CPU a request (``benchmarks/router/README.md``).  A metrics page is read up to
``max_scrape_bytes`` and no further.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accel.scheduler.serving import Autoscaler, ServingSnapshot

from ._backends import Backend
from ._scrape import parse_engine_metrics

__all__ = ["LiveLoad", "Monitor", "MonitorConfig"]


@dataclass(frozen=True)
class MonitorConfig:
    health_interval_s: float = 1.0
    health_timeout_s: float = 1.0
    unhealthy_after: int = 2
    scrape_interval_s: float = 1.0
    scrape_timeout_s: float = 2.0
    max_scrape_bytes: int = 8 * 1024 * 1024


def _why(exc: BaseException, timeout_s: float) -> str:
    """A failed check, as ``/health`` shows it: the kind of failure first, in the words it had
    before the checks moved from httpx to aiohttp (``ConnectError``: no connection, ``Timeout``: no
    answer in time), so that what a reader matches on does not change with the client library."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"ConnectError: {exc}"
    if isinstance(exc, TimeoutError):
        return f"Timeout: no answer within {timeout_s:g} s"
    return f"{type(exc).__name__}: {exc}"


class LiveLoad:
    """What the router has seen, in the shape the autoscalers read (:class:`ServingSnapshot`).

    Arrivals and their prompt length (in the router's ids: tokens, or characters in character
    mode), finished requests and their output tokens (the answer's ``usage``, or the streamed
    chunks), the requests outstanding at the router; queued requests and KV use from the engines'
    scrapes.  Written from the proxy's loop, read from the monitor's thread: plain counters.
    """

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.backends = backends
        self.started = time.monotonic()
        self.arrived = 0
        self.arrived_prompt_tokens = 0
        self.finished = 0
        self.finished_output_tokens = 0

    def routed(self, prompt_ids: int) -> None:
        self.arrived += 1
        self.arrived_prompt_tokens += prompt_ids

    def done(self, output_tokens: int) -> None:
        self.finished += 1
        self.finished_output_tokens += output_tokens

    def snapshot(self) -> ServingSnapshot:
        now = time.monotonic()
        ready = [b for b in self.backends if b.available(now)]
        waiting = sum(b.load.waiting for b in ready if b.load is not None and b.load.waiting is not None)
        kv = [b.load.kv_usage for b in ready if b.load is not None and b.load.kv_usage is not None]
        mean_prompt = self.arrived_prompt_tokens / self.arrived if self.arrived else 0.0
        return ServingSnapshot(
            now=now - self.started, arrived=self.arrived, arrived_prompt_tokens=self.arrived_prompt_tokens,
            finished=self.finished, finished_output_tokens=self.finished_output_tokens,
            outstanding=max(0, self.arrived - self.finished), queued=round(waiting),
            queued_prompt_tokens=round(waiting * mean_prompt), ready=len(ready), starting=0,
            kv_utilization=sum(kv) / len(kv) if kv else 0.0)


class Monitor:
    """Runs the checks on a daemon thread (see the module doc); :meth:`close` stops it."""

    def __init__(self, backends: Sequence[Backend], config: MonitorConfig = MonitorConfig(), *,
                 live: LiveLoad | None = None, autoscaler: Autoscaler | None = None,
                 min_replicas: int = 0, max_replicas: int = 1000) -> None:
        self.backends = backends
        self.config = config
        self.live = live
        self.autoscaler = autoscaler
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.desired: int | None = None
        self.active = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accel-router-monitor", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    def start(self) -> Monitor:
        self._thread.start()
        self._ready.wait(5)
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        asyncio.run(self._main())

    def _session(self) -> Any:
        import aiohttp

        # no cookie jar, no proxy from the environment; connections to the replicas kept alive between rounds
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
                                     cookie_jar=aiohttp.DummyCookieJar(), trust_env=False)

    async def _main(self) -> None:
        async with self._session() as client:
            self._ready.set()
            await asyncio.gather(self._every(self.config.health_interval_s, self._health, client),
                                 self._every(self.config.scrape_interval_s, self._scrape, client),
                                 self._scale_loop())

    async def _sleep_until(self, deadline: float) -> None:
        """Sleep until ``deadline`` (monotonic) or until :meth:`close`, whichever comes first."""
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(0.05, left))

    async def _every(self, interval: float, fn: Any, client: Any) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            await asyncio.gather(*(fn(client, b) for b in self.backends))
            await self._sleep_until(started + interval)

    async def check_now(self) -> None:
        """One round of health checks and scrapes (tests and start-up)."""
        async with self._session() as client:
            await asyncio.gather(*(self._health(client, b) for b in self.backends))
            await asyncio.gather(*(self._scrape(client, b) for b in self.backends))

    async def _get(self, client: Any, url: str, timeout_s: float, max_bytes: int) -> tuple[int, bytes]:
        """``GET url``: its status and its body when 200, read to its end or to one byte past
        ``max_bytes`` (no further: the caller tells it is too long).  Raises ``aiohttp.ClientError``,
        ``OSError`` or ``TimeoutError`` when it fails."""
        import aiohttp

        async with client.get(url, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return resp.status, b""
            chunks, size = [], 0
            while size <= max_bytes:
                chunk = await resp.content.read(max_bytes + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return resp.status, b"".join(chunks)

    async def _health(self, client: Any, b: Backend) -> None:
        import aiohttp

        try:
            async with client.get(b.url + "/health", allow_redirects=False,
                                  timeout=aiohttp.ClientTimeout(total=self.config.health_timeout_s)) as resp:
                ok, why = resp.status < 300, f"HTTP {resp.status}"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            ok, why = False, _why(exc, self.config.health_timeout_s)
        if ok:
            b.health_failures = 0
            b.healthy = True
            b.last_health_error = None
            if not b.models:
                await self._models(client, b)
        else:
            b.health_failures += 1
            b.last_health_error = why
            if b.health_failures >= self.config.unhealthy_after:
                b.healthy = False

    async def _models(self, client: Any, b: Backend) -> None:
        import aiohttp

        try:
            status, data = await self._get(client, b.url + "/v1/models", self.config.health_timeout_s,
                                           self.config.max_scrape_bytes)
            if len(data) > self.config.max_scrape_bytes:
                raise ValueError("models list too long")
            listed = json.loads(data).get("data", []) if status == 200 else []
            b.models = tuple(str(m["id"]) for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str))
            if b.block_map is not None and b.block_map.model is None and b.models:
                b.block_map.model = b.models[0]  # the seed of the replica's block chains
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, AttributeError, RecursionError):
            b.models = ()

    async def _scrape(self, client: Any, b: Backend) -> None:
        import aiohttp

        try:
            status, data = await self._get(client, b.url + "/metrics", self.config.scrape_timeout_s,
                                           self.config.max_scrape_bytes)
            if status != 200:
                raise ValueError(f"HTTP {status}")
            if len(data) > self.config.max_scrape_bytes:
                raise ValueError(f"metrics page over {self.config.max_scrape_bytes} bytes")
            b.load = parse_engine_metrics(data.decode("utf-8", "replace"))
            b.scraped_at = time.monotonic()
            b.scrape_error = None
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            b.load = None
            b.scrape_error = _why(exc, self.config.scrape_timeout_s)

    def decide(self) -> int | None:
        """One autoscaler decision on the live load, clamped to the bounds (also kept in :attr:`desired`)."""
        if self.autoscaler is None or self.live is None:
            return None
        snap = self.live.snapshot()
        current = self.desired if self.desired is not None else max(snap.ready, self.min_replicas)
        want = self.autoscaler.decide(snap, current)
        self.desired = max(self.min_replicas, min(self.max_replicas, want))
        self.active = self.desired > 0 or snap.outstanding > 0
        return self.desired

    async def _scale_loop(self) -> None:
        if self.autoscaler is None:
            return
        while not self._stop.is_set():
            self.decide()
            await self._sleep_until(time.monotonic() + self.autoscaler.sync_s)
