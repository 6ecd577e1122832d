"""accel serve's readers: show and list never wait for the live loop, see the engine's state as
published, page newest first; the token cache never takes a wrong token."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tests.service._svc import rig

pytest.importorskip("starlette")

from accel.service._auth import TokenBook
from accel.service._store import ServiceStore


def test_show_and_list_answer_while_a_cycle_holds_the_service_lock(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        job = r.submit(r.alice, devices=1, duration_s=600)
        holding, release = threading.Event(), threading.Event()

        def cycle_in_progress() -> None:
            with r.service.lock:  # what a tick holds for its whole scheduling cycle
                holding.set()
                release.wait(30)

        t = threading.Thread(target=cycle_in_progress)
        t.start()
        try:
            assert holding.wait(10)
            shown = r.client.get(f"/v1/jobs/{job['id']}", headers=r.headers(r.alice), timeout=5)
            listed = r.client.get("/v1/jobs", headers=r.headers(r.alice), timeout=5)
            other = r.client.get(f"/v1/jobs/{job['id']}", headers=r.headers(r.bob), timeout=5)
            assert release.is_set() is False  # answered while the lock was still held
        finally:
            release.set()
            t.join()
        assert shown.status_code == 200 and shown.json()["id"] == job["id"]
        assert listed.status_code == 200 and [j["id"] for j in listed.json()["jobs"]] == [job["id"]]
        assert other.status_code == 404  # another tenant's job, read lock-free: still a 404


def test_readers_see_the_engine_state_after_each_change(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        job = r.submit(r.alice, devices=1, model="4090", duration_s=120)
        seen = []
        for _ in range(6):
            engine_state = r.service.engine.jobs[job["id"]].state.value
            rec = r.show(r.alice, job["id"])
            listed = r.client.get("/v1/jobs", headers=r.headers(r.alice)).json()["jobs"]
            assert rec["state"] == engine_state == listed[0]["state"]
            assert rec["attempts"] == r.service.engine.jobs[job["id"]].attempts
            seen.append(engine_state)
            r.run_for(1.0)
        assert seen[0] in ("queued", "running") and seen[-1] == "finished"
        assert rec["pool"] and rec["wait"]["actual_s"] is not None


def test_list_pages_newest_first_with_a_limit(tmp_path: Path) -> None:
    with rig(tmp_path) as r:
        ids = [r.submit(r.alice, duration_s=60)["id"] for _ in range(5)]
        r.submit(r.bob, duration_s=60)
        got = r.client.get("/v1/jobs", params={"limit": 3}, headers=r.headers(r.alice)).json()["jobs"]
        assert [j["id"] for j in got] == ids[::-1][:3]
        bad = r.client.get("/v1/jobs", params={"limit": 0}, headers=r.headers(r.alice))
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "limit"


def test_the_token_cache_never_accepts_a_wrong_token(tmp_path: Path) -> None:
    store = ServiceStore(tmp_path / "service.sqlite")
    try:
        book = TokenBook(store)
        token = book.create("team-a")
        who = book.check(token)
        assert who is not None and book.cached(token) == who  # checked once, then remembered
        prefix, secret = token.rsplit("_", 1)
        wrong_secret = f"{prefix}_{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}"  # same id, one char off
        for wrong in (wrong_secret, token + "x", token[:-1], token.upper(), f" {token}"):
            assert book.cached(wrong) is None
            assert book.check(wrong) is None
            assert book.cached(wrong) is None  # a failed check is never remembered
        assert book.check(token) == who
    finally:
        store.close()


def test_the_read_only_store_refuses_writes(tmp_path: Path) -> None:
    ServiceStore(tmp_path / "service.sqlite").close()
    reader = ServiceStore(tmp_path / "service.sqlite", readonly=True)
    try:
        assert reader.meta("anything") is None
        with pytest.raises(sqlite3.OperationalError):
            reader.set_meta("k", "v")
    finally:
        reader.close()
