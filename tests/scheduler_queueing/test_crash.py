"""Crash safety: SIGKILL a replay at random points, restart from the journal, and end with the
same state and bill as an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accel.scheduler.queueing import QueueingScheduler, Simulator

from ._crash_common import HEALTH, POLICY, PRICES, make_cluster, make_jobs

CHILD = Path(__file__).resolve().parent / "_crash_child.py"


def _reference() -> tuple[dict[str, object], int]:
    eng = QueueingScheduler(make_cluster(), POLICY, prices=PRICES)
    Simulator(eng, make_jobs(), health_events=HEALTH).run()
    return eng.snapshot(), eng.journal.count()


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05)
        try:
            return int(db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def _spawn(path: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen([sys.executable, str(CHILD), str(path), *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_at_random_points_then_resume_from_the_journal(tmp_path: Path, seed: int) -> None:
    ref, total = _reference()
    rng = random.Random(seed)
    path = tmp_path / "sched.db"
    kills = sorted(rng.sample(range(5, total - 5), 2))
    args: tuple[str, ...] = ()
    killed = 0
    for target in kills:
        proc = _spawn(path, *args)
        deadline = time.monotonic() + 30
        while proc.poll() is None and _count(path) < target and time.monotonic() < deadline:
            time.sleep(0.001)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=30)
        args = ("resume",)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, str(CHILD), str(path), "resume"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert killed >= 1
    eng = QueueingScheduler.recover(make_cluster(), path, POLICY, prices=PRICES)
    assert eng.snapshot() == ref  # every job's state, placement, work, loss, and the bill
    assert eng.journal.count() == total
    eng.check_invariants()
