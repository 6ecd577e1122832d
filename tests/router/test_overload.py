"""The router's own overload is not a replica's fault: a timeout that fired because the router's
event loop ran late opens no breaker and is retried or answered 503 with Retry-After; past the
in-flight bound a request is answered 503 at once."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from accel.router import MonitorConfig, ProxyConfig, RunningRouter
from accel.router._lag import LoopLag

from ._engines import Engine, router_over, start_engine, wait_for

# health checks rare: the test decides which replica is available when
RARE = MonitorConfig(health_interval_s=60.0, health_timeout_s=0.5, unhealthy_after=3, scrape_interval_s=60.0)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lag_probe_measures_lateness_within_the_window() -> None:
    clock = _Clock()
    lag = LoopLag(interval_s=0.05, clock=clock)
    assert lag.during(99.0) == 0.0
    lag.record(100.0, 0.0)
    lag.record(101.0, 0.8)  # due at 100.2, ran at 101.0
    assert lag.during(100.9, now=101.1) == pytest.approx(0.1)  # only the part after 100.9 counts
    assert lag.during(100.0, now=101.1) == pytest.approx(0.8)
    assert lag.during(101.05, now=101.1) == 0.0  # nothing late since
    assert lag.current_s() == pytest.approx(0.8)
    # a loop late by a little at every turn: the time behind adds up over the attempt
    steady = LoopLag(interval_s=0.05, clock=clock)
    for k in range(1, 4):
        steady.record(100.0 + 0.3 * k, 0.25)
    assert steady.during(100.0, now=100.95) == pytest.approx(0.75)
    assert steady.during(100.5, now=100.95) == pytest.approx(0.1 + 0.25)  # 100.6's late span from 100.5 on
    with pytest.raises(ValueError, match="interval_s"):
        LoopLag(interval_s=0)


def test_lag_probe_on_a_blocked_loop() -> None:
    async def main() -> tuple[float, float, float]:
        lag = LoopLag(interval_s=0.01)
        lag.start(asyncio.get_running_loop())
        await asyncio.sleep(0.05)
        began = lag.clock()
        time.sleep(0.3)  # the loop blocked: the heartbeat due is overdue, then runs late
        overdue = lag.during(began)
        await asyncio.sleep(0.02)
        after = lag.during(began)
        lag.stop()
        return overdue, after, max(late for _, late in lag.samples)

    overdue, after, last = asyncio.run(main())
    assert overdue >= 0.25 and after >= 0.25 and last >= 0.25


@pytest.fixture()
def blackhole() -> Iterator[str]:
    """A listening port whose accept queue is full: a connect to it hangs (Linux drops the SYN), so an
    attempt to it ends in a real connect timeout."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    fill = []
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(srv.getsockname())
        fill.append(c)
    time.sleep(0.05)
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    for c in fill:
        c.close()
    srv.close()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    e = start_engine()
    yield e
    e.close()


def _backend(router: RunningRouter, url: str) -> object:
    return next(b for b in router.picker.backends if b.url == url)


def _block_loop_once_attempt_started(router: RunningRouter, hole: str, block_s: float,
                                     then: object = None) -> None:
    """Once the request's attempt to ``hole`` is in flight, block the router's loop for ``block_s``
    (the router starved of CPU), then run ``then`` (from this thread)."""
    b = _backend(router, hole)
    wait_for(lambda: b.in_flight == 1, 5.0)  # type: ignore[attr-defined]
    loop = router.proxy._loop
    assert loop is not None
    loop.call_soon_threadsafe(time.sleep, block_s)
    if callable(then):
        then()


def _post(router: RunningRouter, out: dict[str, httpx.Response]) -> threading.Thread:
    def go() -> None:
        with httpx.Client(base_url=router.url, timeout=30) as c:
            out["r"] = c.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 2})

    t = threading.Thread(target=go)
    t.start()
    return t


def test_timeout_from_the_routers_lateness_is_retried_not_blamed(engine: Engine, blackhole: str) -> None:
    cfg = ProxyConfig(connect_timeout_s=1.0)
    with router_over([engine], extra_urls=(blackhole,), policy="round-robin", proxy_config=cfg,
                     monitor_config=RARE) as router:
        good, hole = _backend(router, engine.url), _backend(router, blackhole)
        good.healthy = False  # type: ignore[attr-defined]  # the first attempt goes to the black hole
        out: dict[str, httpx.Response] = {}
        t = _post(router, out)

        def good_back() -> None:
            good.healthy = True  # type: ignore[attr-defined]

        _block_loop_once_attempt_started(router, blackhole, 1.2, good_back)
        t.join(20)
        r = out["r"]
        assert r.status_code == 200, r.text
        assert r.headers["x-accel-backend"] == engine.url
        assert hole.breaker.failures == 0 and hole.breaker.state() == "closed"  # type: ignore[attr-defined]
        assert hole.in_flight == 0  # type: ignore[attr-defined]
        page = httpx.get(router.url + "/metrics").text
        assert f'accel_router_lag_timeouts_total{{backend="{blackhole}",phase="connect"}} 1.0' in page
        assert "accel_router_loop_lag_seconds" in page

        # without lateness the same timeout is the replica's: its breaker counts it
        good.healthy = False  # type: ignore[attr-defined]
        with httpx.Client(base_url=router.url, timeout=30) as c:
            r = c.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 2})
        assert r.status_code == 502 and "ConnectionTimeoutError" in r.json()["error"]["message"]
        assert hole.breaker.failures == 1  # type: ignore[attr-defined]


def test_router_overload_sheds_with_retry_after(blackhole: str) -> None:
    cfg = ProxyConfig(connect_timeout_s=0.6, lag_retries=0)
    with router_over([], extra_urls=(blackhole,), proxy_config=cfg, monitor_config=RARE) as router:
        hole = _backend(router, blackhole)
        out: dict[str, httpx.Response] = {}
        t = _post(router, out)
        _block_loop_once_attempt_started(router, blackhole, 0.8)
        t.join(20)
        r = out["r"]
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        err = r.json()["error"]
        assert err["type"] == "router_overloaded" and "not the replica's" in err["message"]
        assert hole.breaker.failures == 0 and hole.breaker.state() == "closed"  # type: ignore[attr-defined]
        page = httpx.get(router.url + "/metrics").text
        assert 'accel_router_shed_total{reason="loop_lag"} 1.0' in page


def test_in_flight_bound_answers_503_at_once(blackhole: str) -> None:
    cfg = ProxyConfig(connect_timeout_s=0.6, max_in_flight=1)
    with router_over([], extra_urls=(blackhole,), proxy_config=cfg, monitor_config=RARE) as router:
        out: dict[str, httpx.Response] = {}
        t = _post(router, out)  # held by the black hole for the connect timeout
        wait_for(lambda: router.proxy.in_flight == 1, 5.0)
        with httpx.Client(base_url=router.url, timeout=30) as c:
            started = time.monotonic()
            r = c.post("/v1/completions", json={"model": "m", "prompt": "hi"})
            took = time.monotonic() - started
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["type"] == "router_overloaded" and "max_in_flight 1" in r.json()["error"]["message"]
        assert took < 0.6 and router.proxy.in_flight == 1  # answered without waiting for the one in flight
        t.join(20)
        assert out["r"].status_code == 502  # the held one: a real connect timeout, the replica's
        assert router.proxy.in_flight == 0
        page = httpx.get(router.url + "/metrics").text
        assert 'accel_router_shed_total{reason="in_flight"} 1.0' in page


def test_proxy_config_is_checked() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        ProxyConfig(max_in_flight=-1)
    with pytest.raises(ValueError, match="lag_ratio"):
        ProxyConfig(lag_ratio=0.0)
