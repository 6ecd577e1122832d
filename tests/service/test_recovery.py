"""The crash windows between the service's two files, reproduced exactly: the state a SIGKILL
leaves at each point is made, the service is opened again on it, and no job is lost or run twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from accel.service._auth import Principal
from accel.service._jobreq import EnvAllowlist, parse_request
from accel.service._store import StoredJob
from tests.service._svc import FakeWall, open_service

pytest.importorskip("starlette")

ALICE = Principal("t1", "team-a", False)


def _req(**kw: object) -> object:
    body = {"command": ["python", "train.py"], "devices": 2, "model": "H100", "duration_s": 600, **kw}
    return parse_request(body, EnvAllowlist())


def test_a_request_stored_but_never_journaled_is_submitted_on_restart(tmp_path: Path) -> None:
    wall = FakeWall()
    svc = open_service(tmp_path, wall)
    req = _req()
    # the crash fell after the request was committed and before the journal's ``submitted``
    svc.store.add_job(StoredJob("j000001-aaaaaa", 1, "team-a", "job", {**req.as_dict(), "tenant": "team-a",  # type: ignore[attr-defined]
                                                                      "pool": ""}, 0.0, wall(), "tenant:team-a", None))
    svc.close()
    svc = open_service(tmp_path, wall)
    try:
        assert "j000001-aaaaaa" in svc.engine.jobs
        rec = svc.record(ALICE, "j000001-aaaaaa")
        assert [e["kind"] for e in rec["timeline"] if e["actor"] == "service"] == ["resubmitted"]
        for _ in range(15):
            wall.advance(1)
            svc.tick()
        assert svc.record(ALICE, "j000001-aaaaaa")["state"] == "finished"
    finally:
        svc.close()


def test_a_launch_without_a_handle_is_relaunched_once_by_the_sim(tmp_path: Path) -> None:
    wall = FakeWall()
    svc = open_service(tmp_path, wall)
    job_id = svc.submit(ALICE, _req())  # type: ignore[arg-type]
    wall.advance(1)
    svc.tick()
    assert svc.record(ALICE, job_id)["state"] == "running"
    with svc.store.transaction() as db:  # the crash fell inside start(): the row has no handle
        db.execute("UPDATE launches SET ref = NULL WHERE job = ?", (job_id,))
    svc.close()
    svc = open_service(tmp_path, wall)
    try:
        rec = svc.record(ALICE, job_id)
        assert [la["attempt"] for la in rec["launches"]] == [1] and rec["launches"][0]["ref"]
        assert any(e["kind"] == "relaunched" for e in rec["timeline"])
        for _ in range(15):
            wall.advance(1)
            svc.tick()
        rec = svc.record(ALICE, job_id)
        assert rec["state"] == "finished" and len(rec["launches"]) == 1
        kinds = [e["kind"] for e in rec["timeline"]]
        # (the first "started" is this test's stand-in for the crash: a real one is written after the handle)
        assert kinds[kinds.index("relaunched"):].count("started") == 1
    finally:
        svc.close()


def test_an_end_stored_but_never_journaled_finishes_the_job_without_a_second_run(tmp_path: Path) -> None:
    wall = FakeWall()
    svc = open_service(tmp_path, wall)
    job_id = svc.submit(ALICE, _req(env={"ACCEL_SIM_EXIT_CODE": "4"}))  # type: ignore[arg-type]
    wall.advance(1)
    svc.tick()
    # the crash fell after the end was stored and before the engine journaled it
    svc.store.end_launch(job_id, 1, svc.now(), 4, None, "failed", "exit code 4")
    svc.close()
    svc = open_service(tmp_path, wall)
    try:
        for _ in range(3):
            wall.advance(1)
            svc.tick()
        rec = svc.record(ALICE, job_id)
        assert rec["state"] == "failed" and len(rec["launches"]) == 1
        assert rec["exit"]["exit_code"] == 4
    finally:
        svc.close()


def test_the_time_scale_of_a_state_is_kept(tmp_path: Path) -> None:
    from accel.errors import ConfigError

    wall = FakeWall()
    open_service(tmp_path, wall).close()
    with pytest.raises(ConfigError, match="runs at --time-scale 60, not 10"):
        open_service(tmp_path, wall, scale=10.0)
    assert time.time() > 0
