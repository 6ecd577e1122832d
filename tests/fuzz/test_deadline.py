"""The snapshot deadline (issue 14): tools and parsing of one read share ``tool_timeout_s``."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from accel.errors import ToolTimeoutError
from accel.plugin import BackendConfig
from accel.plugins.ascend import PLUGIN as ASCEND
from accel.toolkit import Snapshot, ToolSession
from accel.toolkit._session import check_deadline, snapshot_deadline
from accel.toolkit._snapshot import CliBackend
from accel.tools import ReplayRunner


def test_runs_share_the_deadline_and_none_starts_after_it() -> None:
    runner = ReplayRunner.from_mapping({"tool a": {"delay_s": 0.3}, "tool b": {"delay_s": 0.3}, "tool c": "ok"})
    session = ToolSession(runner, "tool", timeout_s=0.5)
    with snapshot_deadline(0.5):
        session.run("a")  # 0.3 s of the 0.5 s
        with pytest.raises(ToolTimeoutError):
            session.run("b")  # gets the 0.2 s left, needs 0.3 s: a hung tool
        time.sleep(0.05)
        with pytest.raises(ToolTimeoutError, match="deadline"):
            session.run("c")  # not even started
    # Outside a snapshot each run has its own timeout, as before.
    assert session.run("b").stdout == ""


def test_parsing_past_the_deadline_is_a_typed_timeout() -> None:
    def slow_collect() -> Snapshot:
        time.sleep(0.3)  # a parser that took too long, stands in for a quadratic one
        return Snapshot(devices=())

    backend = CliBackend("slow", slow_collect, config=BackendConfig(tool_timeout_s=0.2))
    with pytest.raises(ToolTimeoutError, match=r"longer than its 0.2 s deadline \(parsing its output\)"):
        backend.inventory()


def test_no_deadline_outside_a_snapshot_and_for_inf() -> None:
    check_deadline("tool", "idle")
    with snapshot_deadline(float("inf")):
        check_deadline("tool", "no deadline")


def test_a_real_plugin_whose_tools_together_pass_the_deadline_fails_typed() -> None:
    # Each of the three npu-smi views answers inside the tool timeout; together they do not.
    base = ReplayRunner(ASCEND_SCENARIO)
    slow = ReplayRunner.from_recordings([replace(r, delay_s=0.25) for r in base._table.values()])
    backend = ASCEND.open(BackendConfig(runner=slow, tool_timeout_s=0.4, enrich_from_sysfs=False))
    with pytest.raises(ToolTimeoutError):
        backend.inventory()
    # The same views without the delay read (a generous budget: parsing is not what is tested).
    fast = ASCEND.open(BackendConfig(runner=ReplayRunner(ASCEND_SCENARIO), tool_timeout_s=10, enrich_from_sysfs=False))
    assert len(fast.inventory().devices) == 8


def _scenario() -> str:
    import accel.plugins.ascend as mod

    assert mod.__file__ is not None
    from pathlib import Path

    return str(Path(mod.__file__).parent / "scenarios" / "910b-8")


ASCEND_SCENARIO = _scenario()
