"""The router over fake engines on loopback: the OpenAI API passed through, bad requests refused,
prefix routing, retries, circuit breakers and the router's own metrics."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

from accel.router import CircuitBreaker, MonitorConfig, ProxyConfig, RunningRouter

from ._engines import Engine, router_over, start_engine, wait_for


@pytest.fixture(scope="module")
def engines() -> Iterator[list[Engine]]:
    pair = [start_engine(kv_events_endpoint="tcp://127.0.0.1:*") for _ in range(2)]
    yield pair
    for e in pair:
        e.close()


@pytest.fixture(scope="module")
def router(engines: list[Engine]) -> Iterator[RunningRouter]:
    with router_over(engines, kv=True, proxy_config=ProxyConfig(max_body_bytes=4096)) as r:
        yield r


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on (bound, then closed)
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _events(text: str) -> list[str]:
    return [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]


def test_completions_chat_streams_models_health_and_metrics(engines: list[Engine], router: RunningRouter) -> None:
    with httpx.Client(base_url=router.url) as c:
        r = c.post("/v1/completions", json={"model": "m", "prompt": "hello " * 30, "max_tokens": 3})
        assert r.status_code == 200 and r.headers["x-accel-backend"] in {e.url for e in engines}
        doc = r.json()
        assert doc["object"] == "text_completion" and doc["usage"]["completion_tokens"] == 3
        r = c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 2})
        assert r.json()["choices"][0]["message"]["content"] == " t0 t1"
        with c.stream("POST", "/v1/chat/completions", json={
                "model": "m", "stream": True, "max_tokens": 4, "messages": [{"role": "user", "content": "yo"}]}) as s:
            assert s.headers["content-type"].startswith("text/event-stream")
            events = _events(s.read().decode())
        assert events[-1] == "[DONE]" and len(events) == 5
        assert [json.loads(e)["choices"][0]["delta"]["content"] for e in events[:-1]] == [" t0", " t1", " t2", " t3"]
        assert c.get("/v1/models").json()["data"] == [{"id": "m", "object": "model", "owned_by": "accel-router"}]
        health = c.get("/health")
        assert health.status_code == 200 and health.json()["available"] == 2
        wait_for(lambda: all(b.load is not None for b in router.picker.backends))
        page = c.get("/metrics").text
        for name in ("accel_router_requests_total", "accel_router_request_duration_seconds_bucket",
                     "accel_router_backend_healthy", "accel_router_backend_engine_outstanding",
                     "accel_router_backend_kv_usage_ratio", "accel_router_kv_event_batches_total"):
            assert name in page, name


@pytest.mark.parametrize("content, status, needle", [
    (b"{", 400, "not JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"prompt": "x", "model": 5}', 400, "'model'"),
    (b'{"prompt": "x", "stream": "yes"}', 400, "'stream'"),
    (b'{"prompt": {"a": 1}}', 400, "'prompt'"),
    (b"[" * 100 + b"]" * 100, 400, "nest"),
    (b'{"prompt": "' + b"x" * 5000 + b'"}', 413, "limit"),
])
def test_bad_requests_get_4xx_json_and_no_traceback(router: RunningRouter, content: bytes, status: int,
                                                    needle: str) -> None:
    r = httpx.post(router.url + "/v1/completions", content=content)
    assert r.status_code == status
    assert needle in r.json()["error"]["message"] and "Traceback" not in r.text


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(router: RunningRouter) -> None:
    # Content-Length says 50 MB and only a few bytes follow: the 413 must not wait for the body's timeout.
    host, port = router.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 52428800\r\n\r\n{")
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413") and b"limit" in head and b"Traceback" not in head


def test_cache_aware_sends_a_conversation_back_to_its_cache(engines: list[Engine]) -> None:
    with router_over(engines, kv=True, policy="cache-aware") as router, httpx.Client(base_url=router.url) as c:
        homes: dict[str, set[str]] = {}
        for turn in range(4):
            for user in ("alice", "bob"):  # each conversation grows turn by turn: its prompt so far is a prefix
                # each turn adds about 4 blocks of 64 characters (the policy wants more than 1 matched)
                prompt = "".join(f"[{user}] turn {k}: tell me more about {user}'s subject, please. " * 4
                                 for k in range(turn + 1))
                homes.setdefault(user, set()).add(
                    c.post("/v1/completions", json={"model": "m", "prompt": prompt, "max_tokens": 1})
                    .headers["x-accel-backend"])
        assert all(len(h) == 1 for h in homes.values()) and homes["alice"] != homes["bob"], homes
        page = c.get("/metrics").text
    matched = next(float(line.split()[-1]) for line in page.splitlines()
                   if line.startswith("accel_router_matched_blocks_total"))
    assert matched >= 6 * 3  # turns 1..3 of both found at least their first turn's blocks


def test_a_refused_replica_is_retried_elsewhere_and_its_breaker_opens(engines: list[Engine]) -> None:
    dead = _dead_url()
    # health checks too slow to notice first: the breaker has to
    with router_over(engines[:1], extra_urls=(dead,), policy="round-robin",
                     monitor_config=MonitorConfig(health_interval_s=60, unhealthy_after=100),
                     breaker=CircuitBreaker(failure_threshold=2, open_s=60)) as router:
        with httpx.Client(base_url=router.url) as c:
            codes = [c.post("/v1/completions", json={"model": "m", "prompt": f"p{i}", "max_tokens": 1}).status_code
                     for i in range(8)]
            page = c.get("/metrics").text
        assert codes == [200] * 8
        gone = next(b for b in router.picker.backends if b.url == dead)
        assert gone.breaker.state() == "open" and gone.breaker.opened_total == 1
        assert f'accel_router_retries_total{{backend="{dead}"}} 2.0' in page  # then the breaker kept it out


def test_no_replica_left_is_a_clean_5xx() -> None:
    dead = (_dead_url(), _dead_url())
    with router_over([], extra_urls=dead, monitor_config=MonitorConfig(health_interval_s=60, unhealthy_after=100),
                     breaker=CircuitBreaker(failure_threshold=1, open_s=60)) as router:
        r = httpx.post(router.url + "/v1/completions", json={"prompt": "x"})
        assert r.status_code == 502 and "every replica tried failed" in r.json()["error"]["message"]
        r = httpx.post(router.url + "/v1/completions", json={"prompt": "x"})  # both breakers open now
        assert r.status_code == 503 and r.json()["error"]["type"] == "no_replica"
    with router_over([], extra_urls=dead) as router:
        wait_for(lambda: not any(b.healthy for b in router.picker.backends))
        health = httpx.get(router.url + "/health")
        assert health.status_code == 503 and "ConnectError" in health.json()["replicas"][0]["error"]


def test_breaker_half_open_lets_one_trial_through() -> None:
    b = CircuitBreaker(failure_threshold=2, open_s=10)
    b.failure(0.0)
    assert b.state(0.0) == "closed"
    b.failure(1.0)
    assert b.state(5.0) == "open" and not b.available(5.0)
    assert b.state(11.5) == "half-open" and b.available(11.5)
    b.begin(11.5)
    assert not b.available(11.6)  # one trial at a time
    b.failure(12.0)
    assert b.state(13.0) == "open" and b.opened_total == 2
    b.begin(22.5)
    b.success()
    assert b.state(22.6) == "closed" and b.available(22.6)


def test_only_whole_request_replicas_are_picked_and_engine_load_counts() -> None:
    from accel.router import Backend, EngineLoad, make_policy
    from accel.router._policy import Picker

    reps = [Backend(0, "http://a", role="prefill"), Backend(1, "http://b"), Backend(2, "http://c", role="decode"),
            Backend(3, "http://d")]
    picker = Picker(make_policy("least-outstanding", capacity_blocks=None), reps)
    reps[1].load = EngineLoad("vllm", running=5.0, waiting=2.0, kv_usage=0.5)  # busy with others' traffic
    reps[3].in_flight = 3
    assert reps[1].outstanding() == 7 and reps[3].outstanding() == 3
    picked = picker.pick([1, 2, 3])
    assert picked is not None and picked[0].url == "http://d"  # prefill / decode replicas wait for disaggregation
    reps[3].healthy = False
    picked = picker.pick([1, 2, 3])
    assert picked is not None and picked[0].url == "http://b"
    assert picker.pick([1, 2, 3], exclude={1}) is None


def test_a_replicas_answer_is_read_bounded() -> None:
    # the output-token count read from a replica's answer: a hostile answer is 0, never a RecursionError
    from accel.router._app import _usage_tokens

    assert _usage_tokens(b'{"usage": {"completion_tokens": 7}}') == 7
    assert _usage_tokens(b"[" * 100_000) == 0
    assert _usage_tokens(b"not json") == 0
