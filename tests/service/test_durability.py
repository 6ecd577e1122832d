"""SIGKILL a running ``accel serve`` and start it again on the same state: the same queue, the
running jobs found again (not started a second time), nothing lost, every job ends once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service._svc import free_port

pytest.importorskip("starlette")


@contextmanager
def serve(state: Path, scale: float) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    cmd = [sys.executable, "-m", "accel", "serve", "--sim", "dgx-h100", "--state", str(state),
           "--time-scale", str(scale), "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                raise AssertionError(f"accel serve exited ({proc.returncode}):\n{out[-3000:]}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > end:
                raise AssertionError("accel serve did not answer within 60 s")
            time.sleep(0.1)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()


def _jobs(url: str, token: str) -> dict[str, dict[str, Any]]:
    h = {"Authorization": f"Bearer {token}"}
    listed = httpx.get(f"{url}/v1/jobs", headers=h, timeout=10).json()["jobs"]
    return {j["id"]: httpx.get(f"{url}/v1/jobs/{j['id']}", headers=h, timeout=10).json() for j in listed}


def _wait(what: str, probe: Any, limit_s: float) -> Any:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {limit_s} s")


def test_sigkill_and_restart_resumes_the_queue_and_runs_nothing_twice(tmp_path: Path) -> None:
    state = tmp_path / "state"
    scale = 100.0  # a 600 s job takes 6 s of wall time
    with serve(state, scale) as (proc, url):
        token = (state / "admin.token").read_text().strip()
        h = {"Authorization": f"Bearer {token}"}
        ids = []
        for i in range(4):
            resp = httpx.post(f"{url}/v1/jobs", headers=h, timeout=10, json={
                "name": f"job{i}", "command": ["python", "train.py", str(i)], "devices": 4, "duration_s": 600})
            assert resp.status_code == 201, resp.text
            ids.append(resp.json()["id"])
        def two_running() -> dict[str, dict[str, Any]] | None:
            js = _jobs(url, token)
            return js if sum(j["state"] == "running" and bool(j["launches"]) for j in js.values()) == 2 else None

        before = _wait("two jobs running", two_running, 30)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    running = {k: v for k, v in before.items() if v["state"] == "running"}
    queued = {k: v for k, v in before.items() if v["state"] == "queued"}
    assert len(running) == 2 and len(queued) == 2
    with serve(state, scale) as (proc, url):
        after = _jobs(url, token)
        assert set(after) == set(ids)  # none lost
        for jid, rec in running.items():
            again = after[jid]
            # found again, the same launch: not started a second time
            assert [la["ref"] for la in again["launches"]] == [la["ref"] for la in rec["launches"]]
            assert any(e["kind"] == "reattached" for e in again["timeline"]) or again["state"] == "finished"
        def all_finished() -> dict[str, dict[str, Any]] | None:
            js = _jobs(url, token)
            return js if all(j["state"] == "finished" for j in js.values()) else None

        done = _wait("every job ended", all_finished, 60)
    for jid, rec in done.items():
        assert len(rec["launches"]) == 1, (jid, rec["launches"])  # each ran exactly once
        assert rec["exit"]["reason"] == "completed"
        starts = [e for e in rec["timeline"] if e["kind"] == "started"]
        assert len(starts) == 1
