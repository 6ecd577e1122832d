"""The workload of the crash test, shared by the test and its child process."""

from __future__ import annotations

from pathlib import Path

from accel.scheduler import ClusterState
from accel.scheduler.queueing import (
    BackfillMode,
    InClassOrder,
    Policy,
    PriceTable,
    PriorityClass,
    TraceJob,
    load_philly,
    uniform_cluster,
)

TRACE = Path(__file__).resolve().parent / "fixtures" / "trace_e13805_head.csv"
POLICY = Policy(classes=(PriorityClass("default", 0, InClassOrder.SHORTEST, band_ratio=4.0),),
                backfill=BackfillMode.CONSERVATIVE)
PRICES = PriceTable(per_device_hour={"P100": 1.5})
HEALTH = [(400_000.0, {"node0001/P100-3": False}), (900_000.0, {"node0001/P100-3": True})]


def make_cluster() -> ClusterState:
    return uniform_cluster(4, 8)


def make_jobs() -> list[TraceJob]:
    return [TraceJob(j.id, j.submit_s, j.devices, j.duration_s, j.tenant, checkpoint_interval_s=3600.0)
            for j in load_philly(TRACE, limit=150, tenant="e13805")]
