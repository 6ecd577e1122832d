"""Conformance rows of section ``memory`` (Memory): Device memory sizes in bytes."""

from __future__ import annotations

import pytest

from accel.plugin import Capability

from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _MIB, _TIB, _check

__all__ = ["MemoryRows"]


class MemoryRows(SuiteBase):
    """The ``memory.*`` rows of requirements.json."""

    @row("memory.total-bytes")
    def test_memory_total_bytes(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            total = dev.memory_total_bytes
            if total is None:
                problems.append(f"{dev.id}: memory total unknown")
            elif not 64 * _MIB <= total <= 16 * _TIB:
                problems.append(f"{dev.id}: memory total {total} bytes is outside 64 MiB..16 TiB")
        _check(problems, "report MemoryRegion.total_bytes in bytes (MiB * 1048576; check MB vs MiB per vendor)")

    @row("memory.used-le-total")
    def test_memory_used_le_total(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        totals = {d.id: d.memory_total_bytes for d in inv.devices}
        for dev in inv.devices:
            used, total = dev.memory_used_bytes, totals[dev.id]
            if used is None:
                problems.append(f"{dev.id}: memory used unknown although 'memory_used' is declared")
            elif total is not None and used > total:
                problems.append(f"{dev.id}: used {used} > total {total}")
        if accel.require_plugin().info.declares(Capability.TELEMETRY):
            for s in accel.call("telemetry()", accel.backend.telemetry):
                total = totals.get(s.device_id)
                if s.memory_used_bytes is not None and total is not None and s.memory_used_bytes > total:
                    problems.append(f"{s.device_id}: telemetry used {s.memory_used_bytes} > inventory total {total}")
        _check(problems, "read used and total from the same call, in the same unit")

    @row("memory.oracle-1pct")
    def test_memory_oracle_1pct(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        if self.oracle is None:
            pytest.skip("no oracle: set ConformanceSuite.oracle with memory_total_bytes() from an independent source")
        problems = []
        compared = 0
        for dev in accel.inventory.devices:
            truth = self.oracle.memory_total_bytes(dev)
            mine = dev.memory_total_bytes
            if truth is None:
                continue
            compared += 1
            if mine is None or abs(mine - truth) > 0.01 * truth:
                problems.append(f"{dev.id}: {mine} bytes, the oracle reads {truth}")
        if compared == 0:
            pytest.skip("the oracle knows the memory of none of the devices")
        request.node.user_properties.append(("accel_measured", f"{compared} devices compared"))
        _check(problems, "convert the vendor's unit exactly (MiB vs MB) and report the full device memory")

    @row("memory.telemetry-consistent")
    def test_memory_telemetry_consistent(self, accel: _Harness) -> None:
        totals = {d.id: d.memory_total_bytes for d in accel.inventory.devices}
        problems = []
        for s in accel.call("telemetry()", accel.backend.telemetry):
            total = totals.get(s.device_id)
            mine = s.memory_total_bytes
            if mine is not None and total is not None and abs(mine - total) > 0.01 * total:
                problems.append(f"{s.device_id}: telemetry total {s.memory_total_bytes}, inventory {total}")
        _check(problems, "use one source (and one unit) for memory totals")
