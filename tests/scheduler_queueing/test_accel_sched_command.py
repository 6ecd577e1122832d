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
