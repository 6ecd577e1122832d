"""Serving groups through the API: every refused body names its field, groups are per tenant, their
replicas are jobs, a scale down cancels the replicas not running first, a service without the sim
executor takes each group's engine command, checked as a job's, with the ports it chose filled in.  (The
engines' processes, restarts and clean-up: tests/router/test_from_serve.py; engine commands under real
executors: tests/service_exec/test_serving_local.py and test_serving_slurm.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

pytest.importorskip("starlette")

from accel.service._app import build_app
from accel.service._auth import Principal, TokenBook
from accel.service._jobreq import EnvAllowlist, RequestError
from accel.service._serving import MAX_FAILURES, ServingManager
from tests.service._servesim import auth
from tests.service._svc import FakeWall, open_service, serving


@contextmanager
def _api(tmp_path: Path, *, spawn: bool) -> Iterator[tuple[httpx.Client, str, str, ServingManager]]:
    """The app in this process over a sim service whose loop does not run (no job starts: no engine)."""
    svc = open_service(tmp_path / "state", FakeWall(), profiles="dgx-h100")
    svc.serving = ServingManager(svc, spawn=spawn)
    tokens = TokenBook(svc.store)
    alice, bob = tokens.create("team-a"), tokens.create("team-b")
    try:
        with serving(build_app(svc, tokens, rate=1000, burst=1000)) as url, \
                httpx.Client(base_url=url, timeout=30) as client:
            yield client, alice, bob, svc.serving
    finally:
        svc.close()


def test_bad_bodies_name_their_field(tmp_path: Path) -> None:
    with _api(tmp_path, spawn=True) as (client, alice, _bob, _m):
        ok = {"name": "chat", "replicas": 1, "engine": {"model": "m"}}
        for body, field in (({**ok, "replicas": 65}, "replicas"), ({**ok, "replicas": -1}, "replicas"),
                            ({**ok, "replicas": "2"}, "replicas"), ({**ok, "name": "a/b"}, "name"),
                            ({**ok, "name": "x" * 49}, "name"), ({k: v for k, v in ok.items() if k != "name"}, "name"),
                            ({**ok, "command": ["vllm"]}, "command"), ({**ok, "engine": {"gpu": 1}}, "engine"),
                            ({**ok, "engine": {"time_scale": 0}}, "engine.time_scale"),
                            ({**ok, "engine": {"max_num_seqs": 10**6}}, "engine.max_num_seqs"),
                            ({**ok, "engine": {"cost_model": "no-such-model"}}, "engine.cost_model"),
                            ({**ok, "labels": {"serving": "x"}}, "labels"), ({**ok, "devices": 0}, "devices"),
                            ({**ok, "model": "no-such-device"}, "model"), ([1], "body")):
            r = client.post("/v1/serving", json=body, headers=auth(alice))
            assert r.status_code == 400, (body, r.text)
            assert r.json()["error"].get("field") == field, (body, r.text)
        assert client.get("/v1/serving/a..b", headers=auth(alice)).status_code == 404
        assert client.get("/v1/serving/nothing", headers=auth(alice)).status_code == 404
        assert client.get("/v1/serving", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get("/v1/jobs", headers=auth(alice)).json()["jobs"] == []  # nothing was submitted


def test_groups_are_per_tenant_and_replicas_are_jobs(tmp_path: Path) -> None:
    with _api(tmp_path, spawn=True) as (client, alice, bob, _m):
        body = {"name": "chat", "replicas": 3, "engine": {"model": "m"}, "labels": {"team": "x"}}
        assert client.post("/v1/serving", json=body, headers=auth(alice)).status_code == 201
        assert client.post("/v1/serving", json=body, headers=auth(bob)).status_code == 201  # bob's own "chat"
        a = client.get("/v1/serving/chat", headers=auth(alice)).json()
        b = client.get("/v1/serving/chat", headers=auth(bob)).json()
        assert a["id"] != b["id"] and a["tenant"] == "team-a" and b["tenant"] == "team-b"
        assert [r["index"] for r in a["replicas"]] == [0, 1, 2]
        jobs = {j["id"]: j for j in client.get("/v1/jobs", headers=auth(alice)).json()["jobs"]}
        assert set(jobs) == {r["job"] for r in a["replicas"]}
        job = client.get(f"/v1/jobs/{a['replicas'][2]['job']}", headers=auth(alice)).json()
        assert job["name"] == "chat-r2" and job["request"]["labels"] == {"team": "x", "serving": "chat", "replica": "2"}
        assert job["serving"]["group"] == "chat" and job["serving"]["address"] is None  # not running yet
        # scale down: queued replicas go first, the newest first
        r = client.post("/v1/serving/chat/scale", json={"replicas": 1}, headers=auth(alice))
        assert r.status_code == 200 and [x["index"] for x in r.json()["replicas"]] == [0]
        assert r.json()["replicas_ended"] == 2
        assert len(client.get("/v1/serving/chat", headers=auth(bob)).json()["replicas"]) == 3  # bob's untouched
        assert client.post("/v1/serving/chat/cancel", headers=auth(alice)).json()["state"] == "cancelled"
        assert client.post("/v1/serving/chat/cancel", headers=auth(alice)).status_code == 409
        # a cancelled name may be created again: a new group
        r = client.post("/v1/serving", json={**body, "replicas": 0}, headers=auth(alice))
        assert r.status_code == 201 and r.json()["id"] != a["id"] and r.json()["replicas"] == []


def test_without_the_sim_executor_a_group_gives_its_engine_command(tmp_path: Path) -> None:
    # the refusal comes first: nothing of the service is read (the only part a manager opens is its state)
    manager = ServingManager(SimpleNamespace(state=tmp_path, env_allow=EnvAllowlist()), spawn=False)
    try:
        with pytest.raises(RequestError, match="ACCEL_REPLICA_PORT") as err:
            manager.create(Principal("t", "team-a", False), {"name": "chat"})
        assert err.value.field == "command"
    finally:
        manager.close()


def test_an_engine_command_is_checked_as_a_jobs_and_gets_its_ports(tmp_path: Path) -> None:
    with _api(tmp_path, spawn=False) as (client, alice, bob, manager):
        cmd = ["vllm", "serve", "m", "--port", "{port}"]
        ok = {"name": "chat", "replicas": 2, "command": cmd}
        for body, field in (({"name": "chat"}, "command"), ({**ok, "command": "vllm serve m"}, "command"),
                            ({**ok, "command": []}, "command"), ({**ok, "command": ["vllm", 3]}, "command"),
                            ({**ok, "command": ["vllm", "a\0b"]}, "command[1]"),
                            ({**ok, "command": ["x"] * 300}, "command"),
                            ({**ok, "command": [*cmd, "tcp://*:{kv_port}"]}, "command"),
                            ({**ok, "engine": {"model": "m"}}, "engine"),
                            ({**ok, "engine": {"kv_events": "yes"}}, "engine.kv_events"),
                            ({**ok, "engine": {"ready_timeout_s": 0}}, "engine.ready_timeout_s"),
                            ({**ok, "engine": {"health_path": "health"}}, "engine.health_path"),
                            ({**ok, "engine": {"health_path": "/h?x=1"}}, "engine.health_path"),
                            ({**ok, "env": {"ACCEL_REPLICA_PORT": "80"}}, "env"),
                            ({**ok, "env": {"LD_PRELOAD": "/tmp/x.so"}}, "env"),
                            ({**ok, "checkpoint": {"signal": "USR1"}}, "checkpoint")):
            r = client.post("/v1/serving", json=body, headers=auth(alice))
            assert r.status_code == 400, (body, r.text)
            assert r.json()["error"].get("field") == field, (body, r.text)
        assert client.get("/v1/jobs", headers=auth(alice)).json()["jobs"] == []  # nothing was submitted
        body = {**ok, "command": [*cmd, "--kv-events-config", '{"endpoint": "tcp://*:{kv_port}"}'],
                "engine": {"kv_events": True}}
        r = client.post("/v1/serving", json=body, headers=auth(alice))
        assert r.status_code == 201, r.text
        assert r.json()["engine"] == {"mode": "command", "kv_events": True, "ready_timeout_s": 600.0,
                                      "health_path": "/health"}
        ports = set()
        envs = {j.id: dict(j.request["env"]) for j in manager.service.store.jobs()}  # the record hides env values
        for rep in r.json()["replicas"]:
            job = client.get(f"/v1/jobs/{rep['job']}", headers=auth(alice)).json()
            env = envs[rep["job"]]
            port, kv = int(env["ACCEL_REPLICA_PORT"]), int(env["ACCEL_REPLICA_KV_PORT"])
            # the tokens replaced in the job's own argv, the JSON's braces left alone
            assert job["request"]["command"] == ["vllm", "serve", "m", "--port", str(port), "--kv-events-config",
                                                 f'{{"endpoint": "tcp://*:{kv}"}}']
            assert rep["port"] == port and rep["address"] is None and not rep["ready"]  # not running: not ready
            ports |= {port, kv}
        assert len(ports) == 4  # every replica its own ports
        assert client.get("/v1/serving/chat", headers=auth(bob)).status_code == 404
        # the group keeps the tokens: a replica submitted later gets ports of its own
        assert client.post("/v1/serving/chat/scale", json={"replicas": 3}, headers=auth(alice)).status_code == 200
        view = client.get("/v1/serving/chat", headers=auth(alice)).json()
        assert view["request"]["command"][4] == "{port}"
        assert len({r["port"] for r in view["replicas"]} | ports) == 5


def test_the_routers_autoscaler_sets_the_count_and_the_router_follows(tmp_path: Path) -> None:
    from accel.router import BackendSet
    from accel.router._fromserve import ServeDiscovery, ServeSource

    with _api(tmp_path, spawn=True) as (client, alice, bob, _m):
        assert client.post("/v1/serving", json={"name": "chat", "replicas": 1, "engine": {"model": "m"}},
                           headers=auth(alice)).status_code == 201
        url = str(client.base_url)
        want: list[int | None] = [None]
        backends = BackendSet()
        found = ServeDiscovery(ServeSource(url, alice, "chat", scale=True), backends, desired=lambda: want[0])
        try:
            found.poll_once()
            assert found.wanted == 1 and found.error is None and len(backends) == 0  # queued: no address yet
            want[0] = 3  # the autoscaler wants 3: sent to the service, which queues two more replica jobs
            found.poll_once()
            view = client.get("/v1/serving/chat", headers=auth(alice)).json()
            assert view["replicas_wanted"] == 3 and len(view["replicas"]) == 3 and found.wanted == 3
            want[0] = 3
            found.poll_once()  # no change: no request
            # another tenant's token: the group is not there for it; nothing is scaled
            other = ServeDiscovery(ServeSource(url, bob, "chat", scale=True), BackendSet(), desired=lambda: 0)
            try:
                other.poll_once()
                assert other.error is not None and "no serving group" in other.error
            finally:
                other.close()
            assert client.get("/v1/serving/chat", headers=auth(alice)).json()["replicas_wanted"] == 3
            # a bad count from an autoscaler is refused by the service and reported, nothing changes
            want[0] = 500
            found.poll_once()
            assert found.error is not None and "HTTP 400" in found.error
            assert client.get("/v1/serving/chat", headers=auth(alice)).json()["replicas_wanted"] == 3
        finally:
            found.close()


def test_backend_set_follows_a_source(tmp_path: Path) -> None:
    from accel.router import BackendSet

    forgotten: list[int] = []
    s = BackendSet(on_removed=lambda b: forgotten.append(b.id))
    added, removed = s.sync({"http://127.0.0.1:1": "both", "http://127.0.0.1:2": "both"})
    assert [b.id for b in added] == [0, 1] and removed == [] and s.version == 1
    assert s.sync({"http://127.0.0.1:1": "both", "http://127.0.0.1:2": "both"}) == ([], []) and s.version == 1
    added, removed = s.sync({"http://127.0.0.1:2": "both", "http://127.0.0.1:1": "decode"})
    assert [b.id for b in removed] == [0] and [(b.id, b.role) for b in added] == [(2, "decode")]  # a new replica
    assert forgotten == [0] and s.by_id(0) is None and s.by_id(2) is not None
    s.sync({})
    assert len(s) == 0 and sorted(forgotten) == [0, 1, 2]
    s.sync({"http://127.0.0.1:1": "both"})
    assert [b.id for b in s] == [3]  # ids are never reused


def test_replicas_that_keep_failing_end_the_group(tmp_path: Path) -> None:
    # the live loop is driven by hand; the manager looks only between a replica's start and its end,
    # so no engine is ever started: each replica job fails (exit code 1) before an engine served
    wall = FakeWall()
    svc = open_service(tmp_path / "state", wall, profiles="dgx-h100")
    manager = svc.serving = ServingManager(svc, spawn=True)
    try:
        who = Principal("t", "team-a", False)
        manager.create(who, {"name": "bad", "replicas": 1, "duration_s": 1, "env": {"ACCEL_SIM_EXIT_CODE": "1"},
                             "engine": {"model": "m"}})
        for _ in range(MAX_FAILURES):
            svc.tick()  # placed and started
            wall.advance(2.0)
            svc.tick()  # ended: exit code 1
            manager.step()  # one more failure; a replacement while the group lives
        view = manager.view(who, "bad")
        assert view["state"] == "failed" and f"{MAX_FAILURES} replica jobs in a row" in view["reason"]
        assert view["replicas"] == [] and view["replicas_ended"] == MAX_FAILURES
        assert manager.engines.jobs() == []
    finally:
        svc.close()


def test_another_programs_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    import sqlite3

    from accel.errors import ConfigError
    from accel.service._serving_store import ServingStore

    path = tmp_path / "serving.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE theirs (a)")
    db.commit()
    db.close()
    with pytest.raises(ConfigError, match="not this accel's serving tables"):
        ServingStore(path)
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["theirs"]
    db.close()


def test_the_serving_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from accel.cli import main

    def accel(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    with _api(tmp_path, spawn=True) as (client, alice, _bob, _m):
        monkeypatch.setenv("ACCEL_SERVER", str(client.base_url))
        monkeypatch.setenv("ACCEL_TOKEN", alice)
        code, out, err = accel("job", "serving", "create", "--name", "chat", "--replicas", "2", "--devices", "1",
                               "--model", "H100", "--engine-model", "m", "--engine-time-scale", "20",
                               "--label", "team=x")
        assert code == 0, err
        assert out.splitlines()[0].startswith("serving chat (s") and "tenant team-a: active" in out
        assert "0 ready of 2 wanted" in out and "engine: m (llama-2-70b on h100-80gb, time scale 20, KV events)" in out
        code, out, _ = accel("job", "serving", "scale", "chat", "3")
        assert code == 0 and "of 3 wanted" in out and out.count(" queued ") == 3
        code, out, _ = accel("job", "serving", "show", "chat", "--json")
        view = json.loads(out)
        assert view["replicas_wanted"] == 3 and view["request"]["labels"] == {"team": "x"}
        code, out, _ = accel("job", "show", view["replicas"][0]["job"])
        assert code == 0 and "serving: replica 0 of chat, engine at (not serving yet)" in out
        code, out, _ = accel("job", "serving", "ls")
        assert code == 0 and "serving chat" in out
        code, _, err = accel("job", "serving", "scale", "chat", "65")
        assert code != 0 and "replicas must be an integer from 0 to 64" in err
        code, _, err = accel("job", "serving", "create", "--name", "x", "--", "vllm", "serve")
        assert code != 0 and "a serving group's command is its engine's" in err  # --sim: the fake engine's
        code, out, _ = accel("job", "serving", "cancel", "chat")
        assert code == 0 and ": cancelled" in out
    # a service of real executors: the engine's command, with {port}
    with _api(tmp_path / "real", spawn=False) as (client, alice, _bob, _m):
        monkeypatch.setenv("ACCEL_SERVER", str(client.base_url))
        monkeypatch.setenv("ACCEL_TOKEN", alice)
        code, _, err = accel("job", "serving", "create", "--name", "chat")
        assert code != 0 and "ACCEL_REPLICA_PORT" in err
        code, out, err = accel("job", "serving", "create", "--name", "chat", "--engine-kv-events",
                               "--engine-ready-timeout", "300", "--", "vllm", "serve", "m", "--port", "{port}")
        assert code == 0, err
        assert "engine: vllm serve m --port {port} (health /health, ready within 300 s, KV events on {kv_port})" in out


def test_a_hung_engine_is_killed_and_one_deaf_to_sigterm_gets_sigkill(tmp_path: Path) -> None:
    """EngineProcs over a stand-in for the interpreter: a process that never serves, and ignores SIGTERM."""
    import time

    from accel.service._replicas import EngineProcs
    from accel.service._serving_store import ServingStore
    from accel.service.executors._wrap import read_start_ticks

    hung = tmp_path / "hung"
    hung.write_text("#!/bin/sh\ntrap '' TERM\nexec sleep 60\n")
    hung.chmod(0o755)
    store = ServingStore(tmp_path / "serving.sqlite")
    engine = {"model": "m", "cost_model": "llama-2-70b", "cost_device": "h100-80gb", "time_scale": 1.0,
              "max_num_seqs": 4}
    procs = EngineProcs(store, stop_grace_s=0.3, start_timeout_s=0.5, python=str(hung))
    try:
        a = procs.spawn("j000001-aaaaaa", 1, engine, tmp_path / "a")
        b = procs.spawn("j000002-bbbbbb", 1, engine, tmp_path / "b")
        assert {r.job_id for r in store.engines()} == {a.job_id, b.job_id}
        procs.stop(b.job_id)  # SIGTERM, ignored: SIGKILL after the grace period
        died: list[str] = []
        deadline = time.monotonic() + 10
        while procs.jobs() or procs.alive(b.job_id):
            assert time.monotonic() < deadline, "the engines did not end"
            died += procs.step()
            time.sleep(0.05)
        assert died == [a.job_id]  # never served: killed, and reported as died (b was asked to stop)
        assert read_start_ticks(a.pid) != a.start_ticks and read_start_ticks(b.pid) != b.start_ticks
        assert store.engines() == []
    finally:
        procs.stop_all(timeout_s=1)
        store.close()


def test_a_version_1_state_file_is_brought_up_to_date(tmp_path: Path) -> None:
    import sqlite3

    from accel.service._serving_store import APPLICATION_ID, ServingStore

    path = tmp_path / "serving.sqlite"
    db = sqlite3.connect(path)
    db.executescript(f"""PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;
        CREATE TABLE groups (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, desired INTEGER NOT NULL,
            state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', request TEXT NOT NULL, engine TEXT NOT NULL,
            token_id TEXT NOT NULL, created_t REAL NOT NULL, failures INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE replicas (job_id TEXT PRIMARY KEY, group_id TEXT NOT NULL, idx INTEGER NOT NULL);
        CREATE TABLE engines (job_id TEXT PRIMARY KEY, attempt INTEGER NOT NULL, pid INTEGER NOT NULL,
            start_ticks INTEGER NOT NULL, ready_file TEXT NOT NULL, url TEXT, restarts INTEGER NOT NULL DEFAULT 0);
        INSERT INTO replicas VALUES ('j1', 's1', 0);""")
    db.commit()
    db.close()
    store = ServingStore(path)
    try:
        assert store.replica("j1") == ("s1", 0) and store.ports("j1") == (None, None)  # kept, no port: a sim replica
        store.add_replica("j2", "s1", 1, 8000, 8001)
        assert store.ports("j2") == (8000, 8001)
    finally:
        store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


def test_an_engine_command_replica_is_ready_at_its_health_check_and_not_after_failed_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the live loop and the checks are driven by hand over the sim executor, which runs no process: the test's
    # own HTTP server on the replica's port stands for its engine
    import http.server
    import threading
    import time

    import accel.service._serving as serving_mod

    monkeypatch.setattr(serving_mod, "RECHECK_S", 0.0)
    svc = open_service(tmp_path / "state", FakeWall(), profiles="dgx-h100")
    manager = svc.serving = ServingManager(svc, spawn=False)
    who = Principal("t", "team-a", False)
    group = {"replicas": 1, "duration_s": 10**6, "command": ["engine", "--port", "{port}"]}
    server = None
    try:
        # an executor that does not say where its jobs listen: the replica cannot serve, a failure, replaced
        manager.create(who, {**group, "name": "g"})
        svc.tick()
        manager.step()
        assert manager.store.group_named("team-a", "g").failures == 1  # type: ignore[union-attr]
        manager.step()  # the replacement
        view = manager.view(who, "g")
        assert view["replicas_ended"] == 1 and [r["state"] for r in view["replicas"]] == ["queued"]

        svc.executors[0].node_address = lambda host: "127.0.0.1"  # type: ignore[attr-defined]
        svc.tick()
        manager.step()
        rep = manager.view(who, "g")["replicas"][0]
        assert rep["state"] == "running" and not rep["ready"] and rep["address"] is None
        manager.probe()  # nothing listens: not ready
        assert not manager.view(who, "g")["replicas"][0]["ready"]

        class Health(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200 if self.path == "/health" else 404)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", rep["port"]), Health)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        manager.probe()
        rep = manager.view(who, "g")["replicas"][0]
        assert rep["ready"] and rep["address"] == f"http://127.0.0.1:{rep['port']}"
        server.shutdown()
        server.server_close()
        server = None
        for expected in (True, True, False):  # three failed checks in a row: not ready (the router drops it)
            manager.probe()
            assert manager.view(who, "g")["replicas"][0]["ready"] is expected
        # it served in this attempt: no timeout for it; a group whose replica never answers is cancelled in time
        manager.create(who, {**group, "name": "h", "engine": {"ready_timeout_s": 1}})
        svc.tick()
        manager.step()
        time.sleep(1.1)
        manager.step()
        assert manager.store.group_named("team-a", "h").failures == 1  # type: ignore[union-attr]
        assert manager.view(who, "h")["replicas_ended"] == 1
        assert manager.view(who, "g")["replicas"][0]["state"] == "running"
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        svc.close()
