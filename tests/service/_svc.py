"""A service over the sim executor on a fake wall clock, and its app served by uvicorn on a loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from accel.service._app import build_app
from accel.service._auth import TokenBook, ensure_admin_token
from accel.service._core import Service, default_policy
from accel.service.executors import ExecutorContext, build_executor


class FakeWall:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Rig:
    service: Service
    wall: FakeWall
    client: httpx.Client
    admin: str
    alice: str  # tenant team-a
    bob: str  # tenant team-b
    state: Path

    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def run_for(self, wall_seconds: float, step: float = 1.0) -> None:
        """Advance the fake wall clock, ticking the live loop at every step."""
        end = self.wall.t + wall_seconds
        while self.wall.t < end:
            self.wall.advance(min(step, end - self.wall.t))
            self.service.tick()

    def submit(self, token: str, **body: Any) -> dict[str, Any]:
        body.setdefault("command", ["python", "train.py"])
        r = self.client.post("/v1/jobs", json=body, headers=self.headers(token))
        assert r.status_code == 201, r.text
        out: dict[str, Any] = r.json()
        return out

    def show(self, token: str, job_id: str) -> dict[str, Any]:
        r = self.client.get(f"/v1/jobs/{job_id}", headers=self.headers(token))
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out


def open_service(state: Path, wall: FakeWall, profiles: str = "dgx-h100,rtx4090-4", scale: float = 60.0,
                 grace_s: float = 30.0) -> Service:
    holder: dict[str, Service] = {}

    def clock() -> float:
        svc = holder.get("svc")
        return svc.now() if svc is not None else 0.0

    def wall_to_clock(w: float) -> float:
        svc = holder.get("svc")
        return svc.clock.at_wall(w) if svc is not None else float("nan")

    ex = build_executor("sim", ExecutorContext(clock, state / "logs", {"profiles": profiles}, wall_to_clock))
    svc = Service.open(state, [ex], time_scale=scale, policy=default_policy(grace_s), wall=wall, sample_every_s=1.0)
    holder["svc"] = svc
    return svc


@contextmanager
def rig(tmp_path: Path, *, rate: float = 1000.0, burst: int = 1000, **kw: Any) -> Iterator[Rig]:
    wall = FakeWall()
    state = tmp_path / "state"
    svc = open_service(state, wall, **kw)
    tokens = TokenBook(svc.store)
    path = ensure_admin_token(state, tokens, svc.store)
    assert path is not None
    admin = path.read_text().strip()
    alice = tokens.create("team-a")
    bob = tokens.create("team-b")
    app = build_app(svc, tokens, rate=rate, burst=burst)
    try:
        with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            yield Rig(svc, wall, client, admin, alice, bob, state)
    finally:
        svc.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a loopback port, served by uvicorn in a thread; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > end or not thread.is_alive():
            raise AssertionError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_until(pred: Any, limit_s: float = 20.0) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")
