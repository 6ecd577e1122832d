"""``accel serve --sim`` as a process on a loopback port, tokens for tenants, and engine-pid checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from accel.service._auth import TokenBook
from accel.service._store import ServiceStore
from accel.service.executors._wrap import read_start_ticks
from tests.service._svc import free_port


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    state: Path
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def start_serve(state: Path, profiles: str = "dgx-h100", port: int | None = None) -> Served:
    port = free_port() if port is None else port
    log = state.parent / f"{state.name}-serve.log"
    cmd = [sys.executable, "-m", "accel", "serve", "--sim", profiles, "--state", str(state),
           "--listen", f"127.0.0.1:{port}"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    served = Served(proc, f"http://127.0.0.1:{port}", state, log)
    end = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"accel serve exited ({proc.returncode}):\n{served.output()}")
        try:
            if httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200:
                return served
        except httpx.HTTPError:
            pass
        if time.monotonic() > end:
            stop_serve(served)
            raise AssertionError("accel serve did not answer within 60 s")
        time.sleep(0.05)


def stop_serve(served: Served, signum: int = signal.SIGTERM) -> int:
    if served.proc.poll() is None:
        os.kill(served.proc.pid, signum)
        try:
            served.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            served.proc.kill()
            served.proc.wait(timeout=5)
    return served.proc.returncode


@contextmanager
def serve_sim(state: Path, profiles: str = "dgx-h100") -> Iterator[Served]:
    served = start_serve(state, profiles)
    try:
        yield served
    finally:
        stop_serve(served)


def token(state: Path, tenant: str) -> str:
    """A new token of ``tenant``, written to the running service's store (it reads tokens from there)."""
    store = ServiceStore(state / "service.sqlite")
    try:
        return TokenBook(store).create(tenant)
    finally:
        store.close()


def auth(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


def wait_for(cond: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def engine_alive(pid: int, ticks: int | None) -> bool:
    """Whether the engine process seen as (pid, its start time) still runs (a recycled pid is not it)."""
    return ticks is not None and read_start_ticks(pid) == ticks


def ready_view(client: httpx.Client, tok: str, name: str, n: int) -> dict[str, Any]:
    """Wait until the group has exactly ``n`` replicas, all ready; returns its view."""

    def check() -> dict[str, Any] | None:
        r = client.get(f"/v1/serving/{name}", headers=auth(tok))
        assert r.status_code == 200, r.text
        v: dict[str, Any] = r.json()
        reps = v["replicas"]
        return v if len(reps) == n and all(x["ready"] for x in reps) else None

    out: dict[str, Any] = wait_for(check, what=f"{n} ready replicas of {name}")
    return out


def requests_by_backend(router: Any) -> dict[str, float]:
    """The requests a running router's own metrics count per replica URL."""
    text = router.metrics.render().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("accel_router_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            backend = labels.split('backend="', 1)[1].split('"', 1)[0]
            out[backend] = out.get(backend, 0.0) + float(value)
    return out
