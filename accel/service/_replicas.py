"""The engine processes of ``accel serve --sim``'s serving replicas: started, found ready, stopped by pid.

One process per running replica job: ``accel router fake-engine --listen 127.0.0.1:0
[--kv-events tcp://127.0.0.1:*] --ready-file F --exit-with-parent PID`` (accel's fake vLLM engine
on a loopback port the kernel picks, publishing vLLM's KV events on a second port the kernel picks
when the group's ``engine.kv_events`` is on, its default; it writes its URL and its KV-event
endpoint to ``F`` once it serves, and ends when the service is gone).  Nothing
here blocks: :meth:`EngineProcs.spawn` starts the process and returns; :meth:`EngineProcs.step`
(each pass of the serving manager) reads the ready files of starting engines, reaps engines that
exited and sends SIGKILL to those still there ``stop_grace_s`` after their SIGTERM.  Every
signal goes to a pid whose start time (clock ticks since boot, ``/proc/<pid>/stat``) is the one
recorded at spawn, so a recycled pid is never hit.  The processes are kept in
:class:`~._serving_store.ServingStore`'s ``engines`` table: a service restarted after a crash
stops what the crashed one left (:meth:`EngineProcs.stop_leftovers`); the engines also end by
themselves when their parent is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal as _signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._serving_store import EngineRow, ServingStore
from .executors._wrap import read_start_ticks

__all__ = ["EngineProcs", "engine_argv"]

#: Ready files larger than this are not an engine's (``{"url", "pid"}`` is well under 200 bytes).
_MAX_READY_BYTES = 4096


def engine_argv(engine: Mapping[str, Any]) -> list[str]:
    """The replica's engine options as ``accel router fake-engine`` spells them (shown as the job's command)."""
    argv = ["accel", "router", "fake-engine", "--listen", "127.0.0.1:0", "--model", str(engine["model"]),
            "--cost-model", str(engine["cost_model"]), "--cost-device", str(engine["cost_device"]),
            "--time-scale", repr(float(engine["time_scale"])), "--max-num-seqs", str(int(engine["max_num_seqs"]))]
    if engine.get("kv_events"):
        argv += ["--kv-events", "tcp://127.0.0.1:*"]  # ZMQ's "any free port"; the bound one is in the ready file
    return argv


@dataclass
class _Proc:
    row: EngineRow
    popen: subprocess.Popen[bytes] | None
    stop_at: float | None = None  # monotonic time of SIGTERM; SIGKILL after the grace period
    started: float = 0.0  # monotonic time of the spawn


class EngineProcs:
    """The running engine processes (see the module docstring); the caller serialises calls."""

    def __init__(self, store: ServingStore, *, stop_grace_s: float = 5.0, start_timeout_s: float = 120.0,
                 python: str = sys.executable) -> None:
        self.store = store
        self.stop_grace_s = stop_grace_s
        #: An engine not serving this long after its start is killed (counted as died: started again).
        self.start_timeout_s = start_timeout_s
        self.python = python
        self._procs: dict[str, _Proc] = {}  # job id -> its engine

    # -- reading --------------------------------------------------------------------------------------
    def get(self, job_id: str) -> EngineRow | None:
        p = self._procs.get(job_id)
        return p.row if p is not None and p.stop_at is None else None

    def jobs(self) -> list[str]:
        """Jobs with an engine that is not being stopped."""
        return [j for j, p in self._procs.items() if p.stop_at is None]

    def alive(self, job_id: str) -> bool:
        p = self._procs.get(job_id)
        return p is not None and _alive(p)

    # -- changing -------------------------------------------------------------------------------------
    def spawn(self, job_id: str, attempt: int, engine: Mapping[str, Any], log_dir: Path, *,
              restarts: int = 0) -> EngineRow:
        """Start the engine of ``job_id``'s attempt; its output goes to ``log_dir/engine.log``."""
        log_dir.mkdir(parents=True, exist_ok=True)
        ready = log_dir / f"engine-ready-{attempt}-{restarts}.json"
        ready.unlink(missing_ok=True)
        # accel router fake-engine (the ``accel`` of this interpreter), started by argv: never a shell
        argv = [self.python, "-m", "accel", *engine_argv(engine)[1:], "--ready-file", str(ready),
                "--exit-with-parent", str(os.getpid())]
        with open(log_dir / "engine.log", "ab") as log:
            # its own session: a Ctrl-C at the service's terminal reaches the service, which stops it
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True, close_fds=True)
        ticks = read_start_ticks(popen.pid)
        row = EngineRow(job_id, attempt, popen.pid, ticks if ticks is not None else -1, str(ready), None, restarts)
        self.store.put_engine(row)
        self._procs[job_id] = _Proc(row, popen, started=time.monotonic())
        return row

    def stop(self, job_id: str) -> None:
        """SIGTERM now, SIGKILL after the grace period (:meth:`step`)."""
        p = self._procs.get(job_id)
        if p is None or p.stop_at is not None:
            return
        p.stop_at = time.monotonic()
        _send(p, _signal.SIGTERM)

    def step(self) -> list[str]:
        """Read ready files, reap the exited, SIGKILL the overdue.  Returns the jobs whose engine
        exited without being asked to (it crashed or was killed from outside)."""
        died: list[str] = []
        now = time.monotonic()
        for job_id, p in list(self._procs.items()):
            if not _alive(p):
                if p.popen is not None:
                    p.popen.poll()
                del self._procs[job_id]
                self.store.drop_engine(job_id)
                if p.stop_at is None:
                    died.append(job_id)
                continue
            if p.stop_at is not None:
                if now - p.stop_at >= self.stop_grace_s:
                    _send(p, _signal.SIGKILL)
                continue
            if p.row.url is None and now - p.started > self.start_timeout_s:
                _send(p, _signal.SIGKILL)  # hung before serving: the next step sees it gone, as died
                continue
            if p.row.url is None:
                ready = _read_ready(Path(p.row.ready_file), p.row.pid)
                if ready is not None:
                    p.row = EngineRow(p.row.job_id, p.row.attempt, p.row.pid, p.row.start_ticks, p.row.ready_file,
                                      ready[0], p.row.restarts, ready[1])
                    self.store.put_engine(p.row)
        return died

    def stop_all(self, timeout_s: float | None = None) -> None:
        """Stop every engine and wait for them (SIGKILL for those still there after the grace period)."""
        for job_id in list(self._procs):
            self.stop(job_id)
        deadline = time.monotonic() + (self.stop_grace_s if timeout_s is None else timeout_s)
        while self._procs and time.monotonic() < deadline:
            self.step()
            time.sleep(0.02)
        for p in list(self._procs.values()):
            _send(p, _signal.SIGKILL)
            if p.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.popen.wait(timeout=2)
        self.step()

    def stop_leftovers(self) -> int:
        """After a restart: stop the engines a previous run of the service left (by pid and start
        time), and forget them.  Returns how many were still running."""
        found = 0
        for row in self.store.engines():
            p = _Proc(row, None)
            if _alive(p):
                found += 1
                self._procs[row.job_id] = p
                self.stop(row.job_id)
            else:
                self.store.drop_engine(row.job_id)
        return found


def _alive(p: _Proc) -> bool:
    if p.popen is not None:
        # our child: its pid is not reused before we reap it
        return p.popen.poll() is None
    return p.row.start_ticks >= 0 and read_start_ticks(p.row.pid) == p.row.start_ticks


def _send(p: _Proc, signum: int) -> None:
    if not _alive(p):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(p.row.pid, signum)


def _read_ready(path: Path, pid: int) -> tuple[str, str | None] | None:
    """The engine's URL and KV-event endpoint once its ready file is there (written whole by the
    engine), else ``None``."""
    try:
        if path.stat().st_size > _MAX_READY_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url.startswith("http://127.0.0.1:") or data.get("pid") != pid:
        return None
    kv = data.get("kv_events")
    return url, kv if isinstance(kv, str) and kv.startswith("tcp://127.0.0.1:") else None
