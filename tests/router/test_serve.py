"""The router's fast server (httptools on uvloop) keeps the limits of accel's shared stack, and the
plain-ASGI proxy path keeps the HTTP behaviour Starlette gave it."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from accel._net.asgi_server import ServerLimits
from accel._net.fast_server import FastServer, fast_stack

from ._engines import Engine, router_over, start_engine, wait_for

pytestmark = pytest.mark.skipif(not fast_stack(), reason="httptools and uvloop (the [router] extra) not installed")


async def _hello(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def server() -> Iterator[FastServer]:
    s = FastServer(_hello, listen="127.0.0.1", port=0,
                     limits=ServerLimits(header_timeout_s=0.5, keep_alive_s=5, max_header_bytes=8192)).start()
    yield s
    s.close()


def _recv_all(sock: socket.socket, timeout_s: float) -> tuple[bytes, bool]:
    """What the server sends until it closes the connection (True) or ``timeout_s`` passes (False)."""
    sock.settimeout(timeout_s)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except TimeoutError:
        return out, False
    return out, True


def test_a_head_that_trickles_past_the_deadline_is_closed(server: FastServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        start = time.monotonic()
        for _ in range(4):  # a byte now and then does not extend the deadline
            time.sleep(0.1)
            s.sendall(b"X")
        out, closed = _recv_all(s, 5.0)
        assert closed and out == b"" and time.monotonic() - start < 3.0


def test_a_head_over_the_limit_is_a_400_and_closed(server: FastServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000)
        out, closed = _recv_all(s, 5.0)
    assert closed and out.startswith(b"HTTP/1.1 400")


@pytest.mark.parametrize("head", [
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n",  # one big header, complete
    b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a long URL
    b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 100) for i in range(200)) + b"\r\n",  # many
])
def test_a_head_over_the_limit_that_arrives_whole_is_a_400(server: FastServer, head: bytes) -> None:
    # the whole head in one read is parsed at once: the limit is counted on what the parser read
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head)
        out, closed = _recv_all(s, 5.0)
    assert closed and out.startswith(b"HTTP/1.1 400"), out[:60]


def test_keep_alive_requests_and_a_head_under_the_limit_are_served(server: FastServer) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as c:
        for _ in range(3):
            time.sleep(0.3)  # each wait under the head deadline, together over it: re-armed per request
            r = c.get("/", headers={"x-fill": "a" * 4000})
            assert r.status_code == 200 and r.text == "ok"


def test_pipelined_requests_are_each_answered(server: FastServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        out, closed = _recv_all(s, 5.0)
    assert closed and out.count(b"HTTP/1.1 200") == 2 and out.endswith(b"ok")


@pytest.fixture(scope="module")
def slow_engine() -> Iterator[Engine]:
    e = start_engine(time_scale=1.0)  # the profile's own pace: a few hundred tokens take seconds
    yield e
    e.close()


def test_a_client_gone_mid_stream_stops_the_replicas_request(slow_engine: Engine) -> None:
    with router_over([slow_engine]) as router, httpx.Client(base_url=router.url, timeout=10) as c:
        with c.stream("POST", "/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 2000,
                                                       "stream": True}) as s:
            assert s.status_code == 200
            chunks = s.iter_raw()  # kept: a generator dropped here would close the connection at once
            first = next(chunks)
            assert first.startswith(b"data: ")
            assert slow_engine.engine.running == 1 and router.picker.backends[0].in_flight == 1
        # closed after the first chunk: the router closes the replica's connection, the engine stops
        wait_for(lambda: router.picker.backends[0].in_flight == 0 and slow_engine.engine.running == 0)
        page = c.get("/metrics").text
    assert f'accel_router_requests_total{{backend="{slow_engine.url}",code="499"}} 1.0' in page
    assert router.picker.backends[0].breaker.failures == 0  # the replica did nothing wrong


def test_only_post_reaches_the_proxied_paths(slow_engine: Engine) -> None:
    with router_over([slow_engine]) as router:
        r = httpx.get(router.url + "/v1/chat/completions")
        assert r.status_code == 405 and r.headers["allow"] == "POST" and r.json()["error"]["code"] == 405
        assert httpx.post(router.url + "/v1/models").status_code == 405
        assert httpx.get(router.url + "/nowhere").status_code == 404
