"""accel.scheduler.queueing: priorities, preemption, backfill, wait estimates, tenants, metering,
health-aware recovery and a durable journal, on top of :mod:`accel.scheduler` placement.

:class:`QueueingScheduler` is the engine (time is passed in, so it runs live or in
:class:`Simulator`); :class:`Journal` is its append-only SQLite (WAL) event log, from which
:meth:`QueueingScheduler.recover` rebuilds the state after a crash.

Inside, the engine owns one typed :class:`._state.EngineState` and hands it to its stages, one
module each; a stage reads and changes that state (changes only through events, ``_events.emit``)
and never the engine.  The stages import one another one way only, each only stages before it
in this order (``tests/core/test_architecture.py`` enforces it, and that no stage reaches into
the engine's ``_`` attributes):

    _state -> _events -> _order -> _starts -> _tiers -> _preempt -> _estimate -> _mcplan ->
    _intervals -> _walk -> _invariants -> _engine

``_state``: the state and the questions every stage asks of it (free devices, usage, duration,
expected end, tier); ``_events``: the only code that applies changes (live and on replay);
``_order``: the queue order, kept between calls; ``_starts``: placing queued work through the
pipeline (:mod:`._placement`) and dry placements; ``_tiers``: attained-service tiers, their
views and the starvation guard; ``_preempt``: victim choice and signalling; ``_estimate``: a
target's wait estimate; ``_mcplan``: Monte-Carlo plans (scenarios of the durations ahead,
replanned); ``_intervals``: its p50 / p90 from the predicted spread of the
durations ahead; ``_walk``: the planning walk (a cycle commits, an estimate plans);
``_invariants``: bookkeeping checks; ``_engine``: the public façade.  The other ``_`` modules
(``_types``, ``_records``, ``_profile``, ``_tenants``, ``_meter``, ``_journal``, ``_estimators``,
``_placement``, ``_freeindex``: hosts by free count per pool, ``_gcpause``: the collector
paused for a cycle, ``_audit``) import no stage; ``_sim`` and ``cli`` use the façade.
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
