"""The whole path on loopback: accel serve --sim places a serving group's replicas (fake engines), the
router takes them from the service and subscribes to their KV events, requests go through, the group
scales and is cancelled, no engine process is left; another tenant neither sees nor routes to the replicas."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette")

from accel.router import MonitorConfig, RouterError, start_router
from accel.router._fromserve import ServeSource
from accel.service.executors._wrap import read_start_ticks
from tests.service._servesim import (
    auth,
    engine_alive,
    ready_view,
    requests_by_backend,
    start_serve,
    stop_serve,
    token,
    wait_for,
)

# Replicas from the service are routable at once (it saw them serve): the checks run, rarely (their CPU is the
# test's cost on a loaded machine).
CHECKS = MonitorConfig(health_interval_s=1.0, health_timeout_s=3.0, unhealthy_after=3, scrape_interval_s=10.0)




def test_whole_path_on_loopback(tmp_path: Path) -> None:
    state = tmp_path / "state"
    seen: dict[int, int | None] = {}  # every engine pid seen -> its start time
    routers = []
    served = start_serve(state, "dgx-h100")
    try:
        with httpx.Client(base_url=served.url, timeout=10) as client:
            alice, bob = token(state, "team-a"), token(state, "team-b")
            body = {"name": "chat", "replicas": 2, "devices": 1, "engine": {"model": "m", "time_scale": 500}}
            r = client.post("/v1/serving", json=body, headers=auth(alice))
            assert r.status_code == 201, r.text
            assert r.json()["replicas_wanted"] == 2
            assert client.post("/v1/serving", json=body, headers=auth(alice)).status_code == 409  # the name is taken
            view = ready_view(client, alice, "chat", 2)
            for rep in view["replicas"]:
                seen[rep["engine_pid"]] = read_start_ticks(rep["engine_pid"])
            # each replica is a job of the service: quoted, placed on a device, its address on its record
            job = client.get(f"/v1/jobs/{view['replicas'][0]['job']}", headers=auth(alice)).json()
            assert job["serving"]["group"] == "chat" and job["serving"]["address"] == view["replicas"][0]["address"]
            assert job["quote"]["pool"] and len(job["allocation"]["devices"]) == 1 and job["state"] == "running"

            # each fake engine publishes vLLM's KV events on a port of its own, which the service reports
            assert all(x["kv_events"].startswith("tcp://127.0.0.1:") for x in view["replicas"])
            assert len({x["kv_events"] for x in view["replicas"]}) == 2

            router = start_router([], policy="round-robin", monitor_config=CHECKS, model="m",
                                  from_serve=ServeSource(served.url, alice, "chat", interval_s=0.1))
            routers.append(router)
            assert sorted(router.picker.backends.urls()) == sorted(x["address"] for x in view["replicas"])
            # the router subscribed to each replica's KV events, at the endpoint the service gave
            by_url = {x["address"]: x["kv_events"] for x in view["replicas"]}
            assert {b.url: b.kv_endpoint for b in router.picker.backends} == by_url
            with httpx.Client(base_url=router.url, timeout=10) as rc:
                for i in range(4):
                    r = rc.post("/v1/completions", json={"model": "m", "prompt": f"hello {i} " * 40, "max_tokens": 4})
                    assert r.status_code == 200, r.text
                    assert r.json()["usage"]["completion_tokens"] == 4
                assert set(requests_by_backend(router)) == set(router.picker.backends.urls())  # both replicas served
                # both engines' stored blocks reached the router's view of their caches, through the events
                wait_for(lambda: all(b.block_map is not None and b.block_map.stored > 0 and b.block_map.unplaced == 0
                                     for b in router.picker.backends), what="KV events from both replicas")
                chunks = []
                chat = {"model": "m", "stream": True, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
                with rc.stream("POST", "/v1/chat/completions", json=chat) as s:
                    assert s.status_code == 200
                    for line in s.iter_lines():
                        if line.startswith("data: "):
                            chunks.append(line[6:])
                assert chunks[-1] == "[DONE]"
                assert sum(1 for c in chunks[:-1] if json.loads(c)["choices"][0]["delta"].get("content")) == 3

                # another tenant: the group is not found, and a router with its token gets no replica
                for method, path in (("GET", "/v1/serving/chat"), ("POST", "/v1/serving/chat/cancel"),
                                     ("GET", f"/v1/jobs/{view['replicas'][0]['job']}")):
                    assert client.request(method, path, headers=auth(bob)).status_code == 404
                assert client.post("/v1/serving/chat/scale", json={"replicas": 5}, headers=auth(bob)).status_code == 404
                assert client.get("/v1/serving", headers=auth(bob)).json() == {"serving": []}
                other = start_router([], policy="round-robin", monitor_config=CHECKS,
                                     from_serve=ServeSource(served.url, bob, "chat", interval_s=0.1))
                routers.append(other)
                assert len(other.picker.backends) == 0
                r = httpx.post(other.url + "/v1/completions", json={"model": "m", "prompt": "x"}, timeout=10)
                assert r.status_code == 503
                assert "no serving group" in httpx.get(other.url + "/health", timeout=10).json()["from_serve"]["error"]

                # bad scale values: 4xx, nothing changed
                for bad in ({"replicas": -1}, {"replicas": 65}, {"replicas": "3"}, {"replicas": True},
                            {"replicas": 2.5}, {"replicas": None}, {}, {"replicas": 2, "more": 1}, [3]):
                    r = client.post("/v1/serving/chat/scale", json=bad, headers=auth(alice))
                    assert r.status_code == 400, (bad, r.text)
                r = client.post("/v1/serving/chat/scale", content=b'{"replicas": ' + b" " * 2000 + b"3}",
                                headers={**auth(alice), "Content-Type": "application/json"})
                assert r.status_code == 413
                assert client.post("/v1/serving/chat/scale", content=b"{", headers=auth(alice)).status_code == 400

                # scale to 3: the router follows without restart, and the new replica takes requests
                r = client.post("/v1/serving/chat/scale", json={"replicas": 3}, headers=auth(alice))
                assert r.status_code == 200 and r.json()["replicas_wanted"] == 3
                view = ready_view(client, alice, "chat", 3)
                for rep in view["replicas"]:
                    seen.setdefault(rep["engine_pid"], read_start_ticks(rep["engine_pid"]))
                wait_for(lambda: len(router.picker.backends) == 3, what="the router to follow to 3")
                for i in range(6):
                    assert rc.post("/v1/completions", json={"model": "m", "prompt": f"again {i}",
                                                            "max_tokens": 2}).status_code == 200
                assert set(requests_by_backend(router)) >= set(router.picker.backends.urls())

                # back to 1: two engines stop, by pid; requests still go through
                assert client.post("/v1/serving/chat/scale", json={"replicas": 1},
                                   headers=auth(alice)).status_code == 200
                view = ready_view(client, alice, "chat", 1)
                wait_for(lambda: len(router.picker.backends) == 1, what="the router to follow to 1")
                keep = view["replicas"][0]["engine_pid"]
                wait_for(lambda: not any(engine_alive(p, t) for p, t in seen.items() if p != keep),
                         what="the scaled-down engines to exit")
                assert engine_alive(keep, seen[keep])
                one = {"model": "m", "prompt": "one", "max_tokens": 2}
                assert rc.post("/v1/completions", json=one).status_code == 200

                # the service is killed (no clean-up runs): its engine sees its parent gone and ends; restarted on
                # the same state and port, it finds the replica job again and starts a new engine, which the
                # router follows without restart
                job_id = view["replicas"][0]["job"]
                stop_serve(served, signal.SIGKILL)
                wait_for(lambda: not engine_alive(keep, seen[keep]), timeout_s=10, what="the orphaned engine to exit")
                served = start_serve(state, "dgx-h100", port=int(served.url.rsplit(":", 1)[1]))
                view = ready_view(client, alice, "chat", 1)
                assert view["replicas"][0]["job"] == job_id and view["replicas"][0]["engine_pid"] != keep
                new = view["replicas"][0]
                seen[new["engine_pid"]] = read_start_ticks(new["engine_pid"])
                wait_for(lambda: router.picker.backends.urls() == [new["address"]], what="the router to follow")
                wait_for(lambda: rc.post("/v1/completions", json={"model": "m", "prompt": "back",
                                                                  "max_tokens": 2}).status_code == 200,
                         what="a request through the new engine")

                # the engine dies under its running job: started again (counted on the job's record)
                os.kill(new["engine_pid"], signal.SIGKILL)

                def restarted() -> dict[str, Any] | None:
                    rep: dict[str, Any] = ready_view(client, alice, "chat", 1)["replicas"][0]
                    return rep if rep["engine_pid"] != new["engine_pid"] else None

                third = wait_for(restarted, what="the engine to be started again")
                seen[third["engine_pid"]] = read_start_ticks(third["engine_pid"])
                record = client.get(f"/v1/jobs/{job_id}", headers=auth(alice)).json()
                assert record["serving"]["engine_restarts"] == 1 and record["state"] == "running"

                # cancel the group: every replica job cancelled, no engine left, the router has no replica
                r = client.post("/v1/serving/chat/cancel", headers=auth(alice))
                assert r.status_code == 200 and r.json()["state"] == "cancelled"
                wait_for(lambda: not any(engine_alive(p, t) for p, t in seen.items()), what="every engine to exit")
                wait_for(lambda: len(router.picker.backends) == 0, what="the router to drop the replicas")
                assert rc.post("/v1/completions", json={"model": "m", "prompt": "x"}).status_code == 503
                jobs = client.get("/v1/jobs", headers=auth(alice)).json()["jobs"]
                assert len(jobs) == 3 and all(j["state"] == "cancelled" for j in jobs)
                assert all(sum(x["device_hours"] for x in j["bill"]["lines"]) > 0 for j in
                           (client.get(f"/v1/jobs/{x['id']}", headers=auth(alice)).json() for x in jobs))
                assert client.post("/v1/serving/chat/scale", json={"replicas": 2},
                                   headers=auth(alice)).status_code == 409
                # a group running when the service stops cleanly: its engines stop with it
                assert client.post("/v1/serving", json={**body, "name": "last", "replicas": 1},
                                   headers=auth(alice)).status_code == 201
                last = ready_view(client, alice, "last", 1)["replicas"][0]
                seen[last["engine_pid"]] = read_start_ticks(last["engine_pid"])
        for rt in routers:
            rt.close()
        assert stop_serve(served) == 0  # SIGTERM: the service closes, waiting for its engines
    finally:
        for rt in routers:
            rt.close()
        stop_serve(served)
    assert len(seen) == 6
    assert not any(engine_alive(p, t) for p, t in seen.items())


def test_from_serve_arguments_are_checked() -> None:
    with pytest.raises(RouterError, match="--from-serve"):
        start_router(["http://127.0.0.1:1"], from_serve=ServeSource("http://127.0.0.1:1", "t", "chat"))
    with pytest.raises(RouterError, match="expected http"):
        ServeSource("ftp://x", "t", "chat")
    with pytest.raises(RouterError, match="--service"):
        ServeSource("http://127.0.0.1:1", "t", "a/b")


def test_a_bad_answer_keeps_the_last_set_and_is_reported() -> None:
    """A service answer that is too large, not JSON, an error, or with bad replica entries: the set stays as it
    was (or takes only the well-formed ready replicas), and the error is kept for /health."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from accel.router import BackendSet
    from accel.router._fromserve import ServeDiscovery
    from tests.service._svc import serving

    answer: list[Any] = [None]

    async def group(request: Any) -> Any:
        assert request.headers["authorization"] == "Bearer tok"
        status, body = answer[0]
        if isinstance(body, bytes):
            return Response(body, status_code=status, media_type="application/json")
        return JSONResponse(body, status_code=status)

    app = Starlette(routes=[Route("/v1/serving/chat", group)])
    good = {"state": "active", "replicas_wanted": 2, "replicas": [
        {"ready": True, "address": "http://127.0.0.1:9001", "role": "both"},
        {"ready": False, "address": None},
        {"ready": True, "address": "ftp://127.0.0.1:9002"},
        {"ready": True, "address": "http://127.0.0.1:9003", "role": "boss"},
        {"ready": True, "address": 12},
        "junk",
        {"ready": True, "address": "http://127.0.0.1:9004/"}]}
    with serving(app) as url:
        backends = BackendSet()
        found = ServeDiscovery(ServeSource(url, "tok", "chat", timeout_s=5), backends)
        try:
            answer[0] = (200, good)
            found.poll_once()
            assert sorted(backends.urls()) == ["http://127.0.0.1:9001", "http://127.0.0.1:9004"]
            assert found.error is None and found.wanted == 2
            for bad, why in (((200, b"x" * (1024 * 1024 + 10)), "over"), ((200, b"{not json"), "not JSON"),
                             ((500, {"error": {"message": "boom"}}), "HTTP 500: boom"),
                             ((200, {"state": "active"}), "no replica list")):
                answer[0] = bad
                found.poll_once()
                assert found.error is not None and why in found.error, (bad, found.error)
                assert sorted(backends.urls()) == ["http://127.0.0.1:9001", "http://127.0.0.1:9004"]
            answer[0] = (404, {"error": {"message": "no serving group chat"}})
            found.poll_once()
            assert backends.urls() == [] and "no serving group" in (found.error or "")
        finally:
            found.close()
