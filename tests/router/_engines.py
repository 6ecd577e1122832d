"""Fake engines and routers on loopback for the router tests (threads in this process)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from accel._net.asgi_server import BackgroundServer
from accel.router import FakeEngine, FakeEngineConfig, MonitorConfig, RunningRouter, start_router

# Checks often, but patient with a loaded machine: a dead port fails at once, a slow answer is not dead.
FAST = MonitorConfig(health_interval_s=0.1, health_timeout_s=3.0, unhealthy_after=3, scrape_interval_s=0.1)


@dataclass
class Engine:
    engine: FakeEngine
    server: BackgroundServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def close(self) -> None:
        self.server.close()
        self.engine.close()


def start_engine(**config: Any) -> Engine:
    config.setdefault("model", "m")
    config.setdefault("time_scale", 200.0)
    engine = FakeEngine(FakeEngineConfig(**config))
    return Engine(engine, BackgroundServer(engine.app(), listen="127.0.0.1", port=0).start())


def wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@contextmanager
def router_over(engines: list[Engine], *, kv: bool = False, extra_urls: tuple[str, ...] = (),
                **kwargs: Any) -> Iterator[RunningRouter]:
    urls = [e.url for e in engines] + list(extra_urls)
    kv_events = {e.url: e.engine.kv_endpoint for e in engines if kv and e.engine.kv_endpoint}
    kwargs.setdefault("monitor_config", FAST)
    router = start_router(urls, kv_events=kv_events, **kwargs)
    try:
        wait_for(lambda: all(b.models for b in router.picker.backends if b.url not in extra_urls))
        yield router
    finally:
        router.close()
