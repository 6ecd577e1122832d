"""One serving group of real engine processes behind ``accel router --from-serve``, end to end on
loopback, for any executor that runs the replica jobs (``local``, ``slurm``): the engine is
``accel router fake-engine`` started by the executor as the user's command, with the port and the
KV-event port the service chose; the router follows the group, routes requests, consumes the
replicas' KV events; the group scales and is cancelled; no engine process is left (by pid)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from accel.router import MonitorConfig, start_router
from accel.router._fromserve import ServeSource
from accel.router._prefix import PromptHasher
from accel.service.executors._wrap import read_start_ticks
from tests.service._servesim import auth, engine_alive, ready_view, requests_by_backend, token, wait_for

from ._common import Serve

CHECKS = MonitorConfig(health_interval_s=1.0, health_timeout_s=3.0, unhealthy_after=3, scrape_interval_s=10.0)


def engine_command(ready_dir: Path) -> list[str]:
    """The user's engine command: accel's fake vLLM engine on the ports the service chose; its ready
    file (written once it serves) gives the test its pid."""
    return [sys.executable, "-m", "accel", "router", "fake-engine", "--listen", "127.0.0.1:{port}", "--model", "m",
            "--time-scale", "1000", "--kv-events", "tcp://127.0.0.1:{kv_port}",
            "--ready-file", str(ready_dir / "engine-{port}.json")]


def _pids(ready_dir: Path, view: dict[str, Any]) -> dict[int, int | None]:
    out = {}
    for rep in view["replicas"]:
        data = json.loads(wait_for(lambda r=rep: _read(ready_dir / f"engine-{r['port']}.json"), 30, "a ready file"))
        assert data["url"] == rep["address"] and data["kv_events"] == rep["kv_events"]
        out[int(data["pid"])] = read_start_ticks(int(data["pid"]))
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def run_group(served: Serve, state: Path, ready_dir: Path, *, replicas: int = 2, scale_to: int = 1) -> None:
    """The path (see the module doc) for a group of ``replicas``, scaled down to ``scale_to`` before its cancel."""
    alice, bob = token(state, "team-a"), token(state, "team-b")
    seen: dict[int, int | None] = {}
    router = None
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            body = {"name": "chat", "replicas": replicas, "devices": 1, "command": engine_command(ready_dir),
                    "engine": {"kv_events": True, "ready_timeout_s": 60}}
            r = client.post("/v1/serving", json=body, headers=auth(alice))
            assert r.status_code == 201, r.text
            view = ready_view(client, alice, "chat", replicas)
            seen.update(_pids(ready_dir, view))
            for rep in view["replicas"]:
                assert rep["address"] == f"http://127.0.0.1:{rep['port']}" and rep["kv_events"].startswith("tcp://")
                job = client.get(f"/v1/jobs/{rep['job']}", headers=auth(alice)).json()
                assert job["state"] == "running" and job["serving"]["address"] == rep["address"]
                assert "127.0.0.1:{port}" not in job["request"]["command"]  # the port filled in
            assert client.get("/v1/serving/chat", headers=auth(bob)).status_code == 404  # tenants: as jobs

            router = start_router([], policy="cache-aware", monitor_config=CHECKS, model="m",
                                  from_serve=ServeSource(served.url, alice, "chat", interval_s=0.1))
            backends = {b.url: b for b in router.picker.backends}
            assert set(backends) == {x["address"] for x in view["replicas"]}
            assert {b.kv_endpoint for b in backends.values()} == {x["kv_events"] for x in view["replicas"]}
            prompt = "the same long system prompt, " * 12
            with httpx.Client(base_url=router.url, timeout=30) as rc:
                r = rc.post("/v1/completions", json={"model": "m", "prompt": prompt + "first", "max_tokens": 2})
                assert r.status_code == 200, r.text
                # the replica that served it published the blocks it stored: the router's view of its cache holds
                # them, from the events (the proxy itself writes nothing into an engine-fed view)
                fed = wait_for(lambda: [b for b in router.picker.backends
                                        if b.block_map is not None and b.block_map.stored > 0], 20,
                               "the KV events to reach the router")
                assert len(fed) == 1 and fed[0].kv is not None and fed[0].kv.batches >= 1
                m = fed[0].block_map
                assert m is not None and m.unplaced == 0 and m.stored == len(m.engine_to_router)
                assert all(h in m.cache for h in m.engine_to_router.values())  # the events' blocks, in our hashes
                # the router's view of each replica's cache, as the cache-aware policy matches a prompt against it:
                # the served prompt's blocks on the replica that stored them, none on the other
                hasher = PromptHasher()
                blocks = hasher.blocks(hasher.ids(prompt + "first"), "m")
                assert len(blocks) >= 5
                matched = {b.url: b.block_map.cache.match(blocks) for b in router.picker.backends if b.block_map}
                assert matched == {b.url: (len(blocks) if b is fed[0] else 0) for b in router.picker.backends}
                for i in range(3):
                    r = rc.post("/v1/completions", json={"model": "m", "prompt": prompt + f"again {i}",
                                                         "max_tokens": 2})
                    assert r.status_code == 200, r.text
                assert set(requests_by_backend(router)) <= set(backends)

                # scale down: the extra replica job is cancelled, its engine stops (the executor's doing)
                r = client.post("/v1/serving/chat/scale", json={"replicas": scale_to}, headers=auth(alice))
                assert r.status_code == 200, r.text
                view = ready_view(client, alice, "chat", scale_to)
                wait_for(lambda: len(router.picker.backends) == scale_to, 20, "the router to follow")
                keep = {rep["address"] for rep in view["replicas"]}
                wait_for(lambda: sum(engine_alive(p, t) for p, t in seen.items()) == scale_to, 30,
                         "the scaled-down engine to exit")
                if scale_to:
                    assert rc.post("/v1/completions", json={"model": "m", "prompt": "x",
                                                            "max_tokens": 2}).status_code == 200
                assert {b.url for b in router.picker.backends} == keep

                # cancel: every replica job cancelled, no engine left, the router has no replica
                assert client.post("/v1/serving/chat/cancel", headers=auth(alice)).json()["state"] == "cancelled"
                wait_for(lambda: not any(engine_alive(p, t) for p, t in seen.items()), 30, "every engine to exit")
                wait_for(lambda: len(router.picker.backends) == 0, 20, "the router to drop the replicas")
                jobs = client.get("/v1/jobs", headers=auth(alice)).json()["jobs"]
                assert len(jobs) == replicas and all(j["state"] == "cancelled" for j in jobs)
    finally:
        if router is not None:
            router.close()
        _clean_up(served, alice, ready_dir, seen)
    assert len(seen) == replicas and not any(engine_alive(p, t) for p, t in seen.items())


def _clean_up(served: Serve, tok: str, ready_dir: Path, seen: dict[int, int | None]) -> None:
    """After a failure part-way: the engines are the executor's jobs, which outlive the service by design;
    cancel the group, then SIGKILL by pid (and start time) any engine a ready file names that is still there."""
    for path in ready_dir.glob("engine-*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            pid = int(json.loads(path.read_text())["pid"])
            seen.setdefault(pid, read_start_ticks(pid))
    if not any(engine_alive(p, t) for p, t in seen.items()):
        return
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{served.url}/v1/serving/chat/cancel", headers=auth(tok), timeout=10)
    end = time.monotonic() + 20
    while any(engine_alive(p, t) for p, t in seen.items()) and time.monotonic() < end:
        time.sleep(0.1)
    for p, t in seen.items():
        if engine_alive(p, t):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


