"""Crash safety: SIGKILL a replay at random points and right after commits of every kind,
restart from the journal each time, and end with the same events, state and bill as an
uninterrupted run.

``QUEUE_CRASH_KILLS`` (default 20) sets the length of the rich chain, ``QUEUE_CRASH_SEED`` its
seed; the test prints one summary line (run pytest with ``-s`` to see it).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from accel.scheduler.queueing import Journal, QueueingScheduler, Simulator

from ._crash_common import WORKLOADS, Workload, make_cluster

CHILD = Path(__file__).resolve().parent / "_crash_child.py"
KILLS = int(os.environ.get("QUEUE_CRASH_KILLS", "20"))
SEED = int(os.environ.get("QUEUE_CRASH_SEED", "19"))


def _row(e: Any) -> tuple[Any, ...]:
    return (e.seq, e.t, e.job, e.kind, e.reason, e.data)


def _reference(w: Workload) -> tuple[dict[str, object], list[tuple[Any, ...]], list[tuple[int, set[str]]]]:
    """The uninterrupted run: its state, its events, and each commit (events after it, kinds in it)."""
    jr = Journal()
    commits: list[tuple[int, set[str]]] = []
    commit = jr.flush

    def recording_flush() -> None:
        kinds = {row[2] for row in jr._pending}
        commit()
        if kinds:
            commits.append((jr.count(), kinds))

    jr.flush = recording_flush  # type: ignore[method-assign]
    eng = QueueingScheduler(make_cluster(), w.policy, tenants=w.tenants, prices=w.prices, journal=jr)
    Simulator(eng, w.jobs(), health_events=w.health).run()
    return eng.snapshot(), [_row(e) for e in jr.events()], commits


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


def _spawn(path: Path, workload: str, *extra: str) -> subprocess.Popen[bytes]:
    """The child, its stderr appended to ``PATH.stderr`` (read when it fails)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with open(f"{path}.stderr", "ab") as err:
        return subprocess.Popen([sys.executable, str(CHILD), str(path), workload, *extra], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)


def _stderr(path: Path) -> str:
    return Path(f"{path}.stderr").read_text(errors="replace")[-4000:]


def _kill_when(proc: subprocess.Popen[bytes], path: Path, target: int, delay_s: float) -> None:
    """SIGKILL ``proc`` from outside once the journal has ``target`` events (or after ``delay_s``)."""
    deadline = time.monotonic() + (delay_s if target <= 0 else 60.0)
    while proc.poll() is None and time.monotonic() < deadline and (target <= 0 or _count(path) < target):
        time.sleep(0.001)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)


def _finish(path: Path, workload: str) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, str(CHILD), str(path), workload], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr


def _check_same(path: Path, w: Workload, ref: dict[str, object], ref_events: list[tuple[Any, ...]]) -> None:
    eng = QueueingScheduler.recover(make_cluster(), path, w.policy, tenants=w.tenants, prices=w.prices)
    try:
        assert [_row(e) for e in eng.journal.events()] == ref_events  # every event, in order
        assert eng.snapshot() == ref  # every job's state, placement, work, loss, and the bill
        eng.check_invariants()
    finally:
        eng.journal.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_at_random_points_then_resume_from_the_journal(tmp_path: Path, seed: int) -> None:
    w = WORKLOADS["simple"]
    ref, ref_events, _commits = _reference(w)
    total = len(ref_events)
    rng = random.Random(seed)
    path = tmp_path / "sched.db"
    killed = 0
    for target in sorted(rng.sample(range(5, total - 5), 2)):
        proc = _spawn(path, "simple")
        _kill_when(proc, path, target, 0.0)
        rc = proc.wait(timeout=60)
        assert rc in (-signal.SIGKILL, 0), _stderr(path)
        killed += rc == -signal.SIGKILL
    _finish(path, "simple")
    assert killed >= 1
    _check_same(path, w, ref, ref_events)


def test_rich_workload_survives_a_chain_of_sigkills(tmp_path: Path) -> None:
    """Three classes, preemption with a grace period, tiers, quotas and health events: a chain
    of SIGKILLs (right after a commit of each kind, after random commits, from outside at random
    moments, some while the child is still starting or rebuilding) ends as the uninterrupted run."""
    w = WORKLOADS["rich"]
    started = time.monotonic()
    ref, ref_events, commits = _reference(w)
    total = len(ref_events)
    kinds = {k for _n, ks in commits for k in ks}
    assert kinds == {"submitted", "admitted", "placed", "resumed", "preempting", "preempted", "demoted", "failed",
                     "finished", "health", "promoted"}
    rng = random.Random(SEED)
    plans: set[tuple[int, str, float]] = set()
    for kind in sorted(kinds):  # right after a commit holding each kind
        plans.add((rng.choice([n for n, ks in commits if kind in ks and n < total]), "after", 0.0))
    while len(plans) < KILLS:
        r = rng.random()
        if r < 0.5:
            plans.add((rng.choice([n for n, _ks in commits if n < total]), "after", 0.0))
        elif r < 0.85:
            plans.add((rng.randrange(1, total), "outside", 0.0))
        else:  # while it imports, opens the journal or rebuilds the engine
            plans.add((0, "early", round(rng.uniform(0.05, 0.6), 3)))
    ordered = sorted(plans, key=lambda p: (p[0], p[1]))
    early = [p for p in ordered if p[1] == "early"]
    rest = [p for p in ordered if p[1] != "early"]
    # spread the early kills through the chain: each then hits a child about to rebuild a journal
    chain = list(rest)
    for k, p in enumerate(early):
        chain.insert(min(len(chain), (k + 1) * len(chain) // (len(early) + 1)), p)
    path = tmp_path / "sched.db"
    killed = 0
    after_kinds: set[str] = set()
    ends = {n: ks for n, ks in commits}
    for target, how, delay in chain:
        if how == "after":
            if _count(path) >= target:
                continue  # an earlier kill from outside went past it
            proc = _spawn(path, "rich", str(target))
        else:
            proc = _spawn(path, "rich")
            _kill_when(proc, path, target if how == "outside" else 0, delay)
        rc = proc.wait(timeout=120)
        assert rc in (-signal.SIGKILL, 0), _stderr(path)
        killed += rc == -signal.SIGKILL
        if how == "after" and rc == -signal.SIGKILL:
            assert _count(path) == target  # it died right after the commit that reached the target
            after_kinds |= ends[target]
    _finish(path, "rich")
    _check_same(path, w, ref, ref_events)
    assert killed >= min(KILLS, len(chain)) * 3 // 4, (killed, len(chain))
    assert after_kinds == kinds  # a kill right after a commit of every kind
    bill = sum(float(str(r["cost"])) for r in ref["bill"])  # type: ignore[attr-defined]
    print(f"\nrich crash chain: {killed} SIGKILLs of {len(chain)} planned; {total} events and bill {bill:.2f} "
          f"interrupted and uninterrupted (identical); {time.monotonic() - started:.1f} s")


def test_resume_in_a_grace_period_rebuilds_its_end(tmp_path: Path) -> None:
    """Stopped while jobs are in their grace period (the state a SIGKILL between two commits
    leaves), a run resumed from its journal preempts them at the grace period's end, as the
    uninterrupted run does, and ends with the same events."""
    w = WORKLOADS["rich"]
    _ref, ref_events, _commits = _reference(w)
    # the steps after which some job is preempting, in the uninterrupted run
    probe = QueueingScheduler(make_cluster(), w.policy, tenants=w.tenants, prices=w.prices)
    sim = Simulator(probe, w.jobs(), health_events=w.health)
    in_grace: list[int] = []
    step = 0
    while sim.step():
        step += 1
        if any(j.state.value == "preempting" for j in probe.jobs.values()):
            in_grace.append(step)
    assert len(in_grace) > 10
    for k, stop in enumerate(in_grace[:: max(1, len(in_grace) // 6)]):
        path = tmp_path / f"j{k}.db"
        eng = QueueingScheduler(make_cluster(), w.policy, tenants=w.tenants, prices=w.prices, journal=path)
        first = Simulator(eng, w.jobs(), health_events=w.health)
        for _ in range(stop):
            first.step()
        eng.journal.close()
        back = QueueingScheduler.recover(make_cluster(), path, w.policy, tenants=w.tenants, prices=w.prices)
        waiting = [j for j in back.jobs.values() if j.state.value == "preempting"]
        assert waiting and all(j.stop_at is not None and j.stop_at > back.now for j in waiting)
        Simulator.resume(back, w.jobs(), health_events=w.health).run()
        assert [_row(e) for e in back.journal.events()] == ref_events, f"stopped after step {stop}"
        back.journal.close()
