"""ToolWatch counts tool runs of any accel runner and processes started, only while it is open."""

from __future__ import annotations

import subprocess
import sys

from accel.conformance._watch import ToolWatch
from accel.tools import ReplayRunner


def test_counts_replayed_runs_of_a_runner_it_was_never_given() -> None:
    runner = ReplayRunner.from_mapping({"acme-smi -q": "4 devices\n"})
    runner.run(["acme-smi", "-q"])  # before the watch: not counted
    with ToolWatch() as watch:
        runner.run(["acme-smi", "-q"])
        runner.run(["acme-smi", "-q"])
    runner.run(["acme-smi", "-q"])  # after: not counted
    assert watch.tool_runs == [("acme-smi", "-q"), ("acme-smi", "-q")]
    assert watch.processes == [] and watch.count == 2


def test_counts_processes_started_without_a_runner() -> None:
    with ToolWatch() as outer:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        with ToolWatch() as inner:
            pass
    assert outer.count == 1 and outer.processes[0].startswith("subprocess.Popen: ")
    assert inner.count == 0
