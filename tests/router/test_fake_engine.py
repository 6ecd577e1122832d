"""The fake vLLM engine: vLLM's metric names (old and new), its prefix cache, OpenAI errors, and
the ``accel router`` command line."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from accel.cli import main
from accel.router import parse_engine_metrics

from ._engines import Engine, start_engine


@pytest.fixture(scope="module")
def both() -> Iterator[Engine]:
    engine = start_engine(metric_names="both")
    yield engine
    engine.close()


def test_metric_names_old_and_new_and_the_prefix_cache_counts_hits(both: Engine) -> None:
    prompt = "a shared document. " * 20  # 380 characters: 5 full blocks of 64
    with httpx.Client(base_url=both.url) as c:
        for _ in range(2):
            r = c.post("/v1/completions", json={"model": "m", "prompt": prompt, "max_tokens": 2})
            assert r.json()["usage"] == {"prompt_tokens": 380, "completion_tokens": 2, "total_tokens": 382}
        page = c.get("/metrics").text
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:gpu_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                 "vllm:gpu_prefix_cache_hits_total", "vllm:time_to_first_token_seconds_bucket"):
        assert f"{name}{{" in page, name
    load = parse_engine_metrics(page)
    assert load.kind == "vllm" and load.running == 0 and load.kv_usage == 0
    assert (load.prefix_queries_tokens, load.prefix_hits_tokens) == (760.0, 320.0)  # the second: 5 blocks hit


@pytest.mark.parametrize("body, status, needle", [
    ({"model": "nope", "prompt": "x"}, 404, "does not exist"),
    ({"model": "m", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"model": "m", "prompt": "x", "max_tokens": 10**6}, 400, "max_tokens"),
    ({"model": "m"}, 400, "'prompt'"),
])
def test_openai_errors(both: Engine, body: dict[str, object], status: int, needle: str) -> None:
    r = httpx.post(both.url + "/v1/completions", json=body)
    assert r.status_code == status and needle in r.json()["message"]


def test_running_and_waiting_follow_max_num_seqs() -> None:
    import threading

    engine = start_engine(time_scale=2.0, max_num_seqs=1)  # 30 tokens: about 0.5 s a request
    try:
        threads = [threading.Thread(target=httpx.post, args=(engine.url + "/v1/completions",),
                                    kwargs={"json": {"model": "m", "prompt": "x", "max_tokens": 30}, "timeout": 30})
                   for _ in range(3)]
        for t in threads:
            t.start()
        from ._engines import wait_for

        wait_for(lambda: (engine.engine.running, engine.engine.waiting) == (1, 2))
        load = parse_engine_metrics(httpx.get(engine.url + "/metrics").text)
        # by the scrape the first may have finished and the second started: one runs, the rest wait
        assert load.running == 1.0 and load.waiting in (1.0, 2.0) and load.kv_usage is not None and load.kv_usage > 0
        for t in threads:
            t.join(30)
    finally:
        engine.close()


def test_the_command_line_refuses_a_router_without_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["router", "--listen", "127.0.0.1:0"]) != 0
    assert "--backend" in capsys.readouterr().err
    assert main(["router", "--backend", "ftp://x", "--listen", "127.0.0.1:0"]) != 0
    assert "http://HOST:PORT" in capsys.readouterr().err
    assert main(["router", "--backend", "http://127.0.0.1:1", "--listen", "nowhere"]) != 0
    assert "HOST:PORT" in capsys.readouterr().err


def test_the_monitor_reads_an_engine_and_bounds_its_metrics_page(both: Engine) -> None:
    import asyncio

    from accel.router import Backend, Monitor, MonitorConfig

    b = Backend(0, both.url)
    asyncio.run(Monitor([b], MonitorConfig()).check_now())
    assert b.healthy and b.models == ("m",) and b.load is not None and b.load.kind == "vllm" and b.scrape_error is None
    small = Backend(1, both.url)
    asyncio.run(Monitor([small], MonitorConfig(max_scrape_bytes=64)).check_now())
    assert small.load is None and small.scrape_error == "ValueError: metrics page over 64 bytes"
    gone = Backend(2, "http://127.0.0.1:9")  # nothing listens on the discard port of loopback
    asyncio.run(Monitor([gone], MonitorConfig(unhealthy_after=1)).check_now())
    assert not gone.healthy and gone.last_health_error is not None and gone.last_health_error.startswith("ConnectError")
    assert gone.load is None and gone.scrape_error is not None and gone.scrape_error.startswith("ConnectError")
