"""Conformance rows of section ``cost`` (Cost).

How many vendor calls or tool runs a snapshot costs (reported, never timed).
"""

from __future__ import annotations

import pytest

from .._hooks import ReportsCost
from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _fail

__all__ = ["CostRows"]


class CostRows(SuiteBase):
    """The ``cost.*`` rows of requirements.json."""

    def _snapshot_cost(self, accel: _Harness) -> tuple[int | None, str]:
        backend = accel.open()
        runner = accel.config.runner
        before_runner = runner.call_count if runner is not None else None
        before_calls = backend.vendor_call_count if isinstance(backend, ReportsCost) else None
        inv = accel.call("inventory()", backend.inventory)
        measured: list[tuple[int, str]] = []
        if runner is not None and before_runner is not None:
            measured.append((runner.call_count - before_runner, "tool runs counted by the runner"))
        if isinstance(backend, ReportsCost) and before_calls is not None:
            measured.append((backend.vendor_call_count - before_calls, "vendor calls (vendor_call_count)"))
        reported = [s.tool_invocations for s in inv.sources if s.tool_invocations is not None]
        if reported:
            measured.append((sum(reported), "tool invocations in SourceInfo"))
        if not measured:
            return None, "not reported"
        n, how = max(measured)
        return n, how

    @row("cost.reported")
    def test_cost_reported(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        n, how = self._snapshot_cost(accel)
        if n is None:
            _fail(["a snapshot's cost is not visible: no runner in the config, no vendor_call_count, no "
                   "SourceInfo.tool_invocations"], "count vendor calls and report them in SourceInfo.tool_invocations")
        request.node.user_properties.append(("accel_measured", f"{n} {how}"))

    @row("cost.snapshot-budget")
    def test_cost_snapshot_budget(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        n, how = self._snapshot_cost(accel)
        if n is None:
            pytest.skip("the backend does not report its cost (see cost.reported)")
        request.node.user_properties.append(("accel_measured", f"{n} {how} (budget {self.snapshot_budget})"))
        if n > self.snapshot_budget:
            _fail([f"one inventory() cost {n} {how}"],
                  f"batch vendor queries (one 'smi -q' per snapshot, not per field); budget {self.snapshot_budget}")
