"""Zero lost requests when an engine is killed mid-run: answers not yet started are retried on the
other replica, streams already started end with an error event; the engines are real processes
(``accel router fake-engine``), killed by pid."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from ._engines import FAST, wait_for

# Long enough that a stream seen started at the client is still running at the engine when it is killed.
TOKENS = 100


def _spawn_engine() -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "accel", "router", "fake-engine", "--listen", "127.0.0.1:0",
                             "--model", "m", "--time-scale", "10"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _address(proc: subprocess.Popen[str]) -> tuple[subprocess.Popen[str], str]:
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"the fake engine did not start: {line!r}")
    return proc, f"http://127.0.0.1:{found.group(1)}"


@pytest.fixture
def two_engines() -> Iterator[list[tuple[subprocess.Popen[str], str]]]:
    engines = [_address(p) for p in [_spawn_engine(), _spawn_engine()]]  # both start at once
    yield engines
    for proc, _ in engines:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


async def _one(client: httpx.AsyncClient, i: int, stream: bool, victim_url: str,
               streaming_on_victim: asyncio.Event) -> tuple[str, object]:
    body = {"model": "m", "prompt": f"request {i} " * 20, "max_tokens": TOKENS, "stream": stream}
    if not stream:
        r = await client.post("/v1/completions", json=body)
        return ("whole", (r.status_code, r.json()))
    async with client.stream("POST", "/v1/completions", json=body) as r:
        chunks = []
        async for chunk in r.aiter_bytes():
            chunks.append(chunk)
            if r.headers.get("x-accel-backend") == victim_url:
                streaming_on_victim.set()
        text = b"".join(chunks).decode()
    events = [chunk[len("data: "):] for chunk in text.split("\n\n") if chunk.startswith("data: ")]
    return ("stream", (r.status_code, events, r.headers.get("x-accel-backend")))


def test_killing_an_engine_mid_run_loses_no_request(two_engines: list[tuple[subprocess.Popen[str], str]]) -> None:
    from accel.router import start_router

    (victim, victim_url), _ = two_engines
    router = start_router([url for _, url in two_engines], policy="round-robin", monitor_config=FAST)
    try:
        wait_for(lambda: all(b.models for b in router.picker.backends), 10)

        async def run() -> list[tuple[str, object]]:
            on_victim = asyncio.Event()
            async with httpx.AsyncClient(base_url=router.url, timeout=30) as client:
                first = [asyncio.create_task(_one(client, i, i // 2 % 2 == 1, victim_url, on_victim))
                         for i in range(24)]  # round robin: each engine gets whole answers and streams
                await asyncio.wait_for(on_victim.wait(), 20)  # a stream under way there: kill it now
                os.kill(victim.pid, signal.SIGKILL)
                later = [asyncio.create_task(_one(client, 100 + i, False, victim_url, on_victim))
                         for i in range(6)]
                return list(await asyncio.gather(*first, *later))

        started = time.monotonic()
        results = asyncio.run(run())
        assert time.monotonic() - started < 25
        victim.wait(timeout=5)
    finally:
        router.close()
    whole = [r for kind, r in results if kind == "whole"]
    streams = [r for kind, r in results if kind == "stream"]
    assert len(whole) == 18 and len(streams) == 12  # every request answered: none lost
    for status, doc in whole:
        assert status == 200 and doc["usage"]["completion_tokens"] == TOKENS  # type: ignore[index]
    complete = cut = 0
    for status, events, backend in streams:  # type: ignore[misc]
        assert status == 200
        assert isinstance(events, list)
        if events[-1] == "[DONE]":
            assert len(events) == TOKENS + 1
            complete += 1
        else:
            assert backend == victim_url  # only the killed engine's streams are cut
            assert json.loads(events[-1])["error"]["type"] == "upstream_error"  # a clean end, saying why
            assert all("choices" in json.loads(e) for e in events[:-1])
            cut += 1
    assert complete + cut == 12 and cut >= 1
