"""The exporter's HTTP server (issue 32 §1): prometheus_client's page, served by one event loop
with timeouts, so idle or slow sockets cost no thread and nothing a client sends reaches stderr."""

from __future__ import annotations

import gzip
import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("prometheus_client")
pytest.importorskip("uvicorn")

from prometheus_client import CollectorRegistry, Gauge

from accel._net.asgi_server import BackgroundServer, ServerLimits
from accel.integrations.exporter._asgi import MAX_QUERY_CHARS, MetricsApp

LIMITS = ServerLimits(header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1)


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    registry = CollectorRegistry()
    Gauge("accel_test_up", "a test gauge", registry=registry).set(1)
    Gauge("accel_test_other", "another", registry=registry).set(2)
    app = MetricsApp(registry)
    srv = BackgroundServer(app, listen="127.0.0.1", port=0, limits=LIMITS).start()
    yield srv
    srv.close()
    app.close()


def get(srv: BackgroundServer, path: str, headers: dict[str, str] | None = None,
        method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_page_is_prometheus_clients(server: BackgroundServer) -> None:
    status, headers, body = get(server, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert b"accel_test_up 1.0" in body and b"accel_test_other 2.0" in body
    status, headers, body = get(server, "/metrics", {"Accept-Encoding": "gzip"})
    assert headers["content-encoding"] == "gzip" and b"accel_test_up 1.0" in gzip.decompress(body)
    _, headers, body = get(server, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["content-type"].startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
    _, _, body = get(server, "/metrics?name[]=accel_test_other")
    assert b"accel_test_other" in body and b"accel_test_up" not in body
    status, headers, body = get(server, "/metrics", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0
    assert get(server, "/metrics", method="POST")[0] == 405
    assert get(server, "/metrics?" + "x" * (MAX_QUERY_CHARS + 1))[0] == 414


def test_half_open_sockets_cost_no_thread_and_are_closed(server: BackgroundServer) -> None:
    before = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(300)]
    try:
        for s in socks[::2]:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")  # a head that never ends
        assert threading.active_count() <= before + 2
        status, _, body = get(server, "/metrics")
        assert status == 200 and b"accel_test_up" in body
        deadline = time.monotonic() + 10
        for s in socks:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass  # closed by the server, too
    finally:
        for s in socks:
            s.close()


def test_a_hostile_client_writes_nothing_on_stderr(server: BackgroundServer, capfd: pytest.CaptureFixture[str]) -> None:
    for raw in (b"\x16\x03\x01\x02\x00 TLS hello\r\n\r\n", b"GET / HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nContent-Length: x\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            try:
                s.sendall(raw)
                s.settimeout(5)
                head = s.recv(4096)
            except ConnectionResetError:
                head = b"HTTP/1.1 400 (reset)"
        assert head.startswith(b"HTTP/1.1 4"), head
    assert capfd.readouterr().err == ""


def test_the_port_in_use_is_an_oserror_at_construction() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(OSError):
            BackgroundServer(MetricsApp(CollectorRegistry()), listen="127.0.0.1", port=taken.getsockname()[1])
