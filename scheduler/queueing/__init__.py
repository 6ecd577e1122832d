"""accel.scheduler.queueing: priorities, preemption, backfill, wait estimates, tenants, metering,
health-aware recovery and a durable journal, on top of :mod:`accel.scheduler` placement.

:class:`QueueingScheduler` is the engine (time is passed in, so it runs live or in
:class:`Simulator`); :class:`Journal` is its append-only SQLite (WAL) event log, from which
:meth:`QueueingScheduler.recover` rebuilds the state after a crash.
"""

from __future__ import annotations

from ._audit import JournalAudit, audit, read_journal
from ._engine import CycleResult, Job, QueueingScheduler, WaitEstimate
from ._estimators import DeclaredModel, DurationModel, HistoryModel
from ._journal import SCHEMA_VERSION, Event, Journal, JournalError, JournalLockedError
from ._meter import Bill, BillLine, Meter, PriceTable
from ._profile import Profile
from ._sim import (
    DeclaredEstimator,
    Estimator,
    HistoryEstimator,
    JobOutcome,
    SimResult,
    Simulator,
    TraceJob,
    load_philly,
    uniform_cluster,
)
from ._tenants import Admission, Quota, Tenant, TenantBook, Usage
from ._types import (
    DEFAULT_CLASS,
    BackfillMode,
    InClassOrder,
    JobSpec,
    JobState,
    Policy,
    PreemptMode,
    PriorityClass,
    WaitReason,
)

__all__ = [
    "DEFAULT_CLASS",
    "SCHEMA_VERSION",
    "Admission",
    "BackfillMode",
    "Bill",
    "BillLine",
    "CycleResult",
    "DeclaredEstimator",
    "DeclaredModel",
    "DurationModel",
    "Estimator",
    "Event",
    "HistoryEstimator",
    "HistoryModel",
    "InClassOrder",
    "Job",
    "JobOutcome",
    "JobSpec",
    "JobState",
    "Journal",
    "JournalAudit",
    "JournalError",
    "JournalLockedError",
    "Meter",
    "Policy",
    "PreemptMode",
    "PriceTable",
    "PriorityClass",
    "Profile",
    "QueueingScheduler",
    "Quota",
    "SimResult",
    "Simulator",
    "Tenant",
    "TenantBook",
    "TraceJob",
    "Usage",
    "WaitEstimate",
    "WaitReason",
    "audit",
    "load_philly",
    "read_journal",
    "uniform_cluster",
]
