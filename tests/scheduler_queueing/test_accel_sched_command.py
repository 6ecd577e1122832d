"""`accel sched ...` reaches the journal through the main command line, with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, EXIT_USAGE, main
from accel.scheduler.queueing import Policy, QueueingScheduler
from tests.scheduler_queueing.conftest import cluster
from tests.scheduler_queueing.test_recovery import _run


def test_history_through_the_accel_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.db"
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=path)
    _run(eng)
    eng.journal.close()
    assert main(["sched", "history", "a", "--journal", str(path), "--json"]) == EXIT_OK
    rows = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in rows] == ["submitted", "admitted", "placed", "finished"]
    assert main(["sched", "history", "nope", "--journal", str(path)]) != EXIT_OK
    err = capsys.readouterr().err
    assert err.startswith("accel: error:") and "nope" in err and len(err.strip().splitlines()) == 1
    assert main(["sched", "jobs", "--journal", str(tmp_path / "missing.db")]) == EXIT_USAGE
    assert "no scheduler journal" in capsys.readouterr().err


def test_history_shows_a_tier_demotion_and_the_preemption_it_caused(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from accel.scheduler.queueing import BackfillMode, InClassOrder, JobSpec, PreemptMode, PriorityClass

    path = tmp_path / "t.db"
    pol = Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),), backfill=BackfillMode.CONSERVATIVE,
                 preempt_mode=PreemptMode.SUSPEND, demote_after_device_s=(1000.0,), preempt_overhead_s=60.0)
    eng = QueueingScheduler(cluster(hosts=1, per_host=2), pol, journal=path)
    eng.submit(JobSpec(id="long", devices=2, estimate_s=50_000.0), 0.0)
    eng.cycle(0.0)
    eng.submit(JobSpec(id="new", devices=1, estimate_s=100.0), 100.0)
    eng.cycle(100.0)
    eng.cycle(500.0)
    eng.journal.close()
    assert main(["sched", "history", "long", "--journal", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert [line.split()[2] for line in out.splitlines()[1:]] == [
        "submitted", "admitted", "placed", "demoted", "preempting", "preempted"]
    assert "tier=1 attained_device_s=1000" in out and "tier 0 goes before tier 1" in out
