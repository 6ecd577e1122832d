"""The engine's records: jobs, a cycle's result, and the named state the stages share.

:class:`Job` is the mutable record of one job (the engine owns it).  The rest is small named
state that used to travel as anonymous tuples: a queued job's :class:`Reservation`, a
preemptor's :class:`GraceHold` while its victims wind down, and a cycle's
:class:`PreemptCheck` (the cheap pre-check before a victim search).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, MutableMapping, ValuesView
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from accel.scheduler import Allocation

from ._tenants import Usage
from ._types import JobSpec, JobState, PriorityClass, WaitReason

__all__ = ["CycleResult", "GraceHold", "Job", "PreemptCheck", "Reservation", "WaitingJobs"]

_MISSING: Any = object()  # no default given to WaitingJobs.pop
_HOLDING = frozenset((JobState.RUNNING, JobState.PREEMPTING))  # the states of a job holding devices


@dataclass(slots=True, eq=False)  # a mutable record: equal only to itself
class Job:
    """Mutable record of one job (the engine owns it; read it, do not change it)."""

    spec: JobSpec
    klass: PriorityClass
    seq: int
    submitted_at: float
    state: JobState = JobState.QUEUED
    pool: str | None = None
    allocs: list[Allocation] = field(default_factory=list)
    started_at: float | None = None
    first_started_at: float | None = None
    ended_at: float | None = None
    work_s: float = 0.0
    lost_s: float = 0.0
    attempts: int = 0
    borrowing: bool = False
    stop_at: float | None = None
    reason: str = ""
    wait: WaitReason = WaitReason.NONE
    estimate_at_submit: float | None = None
    # p50 / p90 start and log-spread of that estimate (``_intervals``; kept, not journaled)
    interval_at_submit: tuple[float, float, float] | None = None
    tier_seen: int = 0  # the attained-service tier last journaled (``demoted`` events)
    preempted_for: str | None = None  # while in its grace period: the job it was preempted for
    # and the hosts it frees for that job, kept for it (a one-host preemptor, or a gang whose victims
    # were chosen with the placement pipeline); empty: counted per pool
    preempted_hosts: tuple[str, ...] = ()
    target_hosts: tuple[str, ...] = ()  # such a preemptor: the hosts its victims freed, tried first when placed
    # starvation guard (Policy.promote_after_wait_*): when it last entered the queue, how long
    # its last run lasted, whether it waits promoted, and the attained service its tiers count from
    queued_at: float = 0.0
    last_run_s: float = 0.0
    promoted: bool = False
    service_base: float = 0.0
    # the engine's memo of this job's tier while it holds no devices: (work_s, lost_s,
    # service_base, tier); valid only while those three are unchanged (see ``QueueingScheduler.tier``)
    tier_memo: tuple[float, float, float, int] | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def active(self) -> bool:
        """Holding devices (running, or winding down after preemption)."""
        return self.state in _HOLDING

    def progress(self, now: float) -> float:
        """Work done so far (seconds at full speed), counting the current run segment."""
        if self.state in _HOLDING and self.started_at is not None:  # ``active``, read inline (hot)
            return self.work_s + max(0.0, now - self.started_at)
        return self.work_s

    def remaining_estimate(self) -> float:
        """Declared estimate minus the work already kept (never below one second)."""
        return max(1.0, self.spec.estimate_s - self.work_s)

    def checkpoint_at(self, now: float) -> float:
        """Work saved by the last periodic checkpoint."""
        ci = self.spec.checkpoint_interval_s
        done = self.progress(now)
        if ci is None:
            return 0.0
        return math.floor(done / ci + 1e-9) * ci


@dataclass(slots=True)
class CycleResult:
    started: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    reservations: dict[str, float] = field(default_factory=dict)


class Reservation(NamedTuple):
    """Where and when a queued job is to start (``QueueingScheduler.reservations``); a tuple, so
    ``pool, at, devices = eng.reservations[job_id]`` keeps working."""

    pool: str
    at: float
    devices: int


@dataclass(frozen=True, slots=True)
class GraceHold:
    """A queued preemptor whose victims are still in their grace period: the pool they free,
    when the last of them stops, and the quota of the preemptor's own tenant they give back."""

    pool: str
    end: float
    freed: Usage
    # the hosts its victims free, kept for it (other jobs are not placed there) until they stop: a
    # one-host preemptor's host (same_host, a share, an in-host topology), or the hosts where the
    # pipeline places a gang whose victims were chosen with it; empty: counted per pool
    hosts: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PreemptCheck:
    """A cycle's preemption pre-check: the lowest preemptible class level running (``None``:
    none), whether any borrower runs, and the (level, tenant, devices) shapes whose victim search
    already failed this cycle.  Dropped whenever the running set changes."""

    lowest: int | None
    borrowers: bool
    failed: set[Hashable] = field(default_factory=set)  # see _preempt.attempt_key


class WaitingJobs(MutableMapping[str, Job]):
    """The engine's waiting (queued and suspended) jobs by id, remembering which ids were set or
    removed since :meth:`take_changed` was last called.

    Every change to the waiting set goes through ``__setitem__`` / ``__delitem__`` (``pop``
    included), so the engine can keep its queue order incrementally (``QueueingScheduler.queue``)
    without being able to miss one; setting an id that is already waiting says "its order key
    may have changed" (a promotion)."""

    __slots__ = ("_changed", "_jobs")

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._changed: set[str] = set()

    def __getitem__(self, key: str) -> Job:
        return self._jobs[key]

    def __setitem__(self, key: str, job: Job) -> None:
        self._jobs[key] = job
        self._changed.add(key)

    def __delitem__(self, key: str) -> None:
        del self._jobs[key]
        self._changed.add(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._jobs)

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, key: object) -> bool:
        return key in self._jobs

    # the dict's own views and lookups: a deep queue is read at every walk
    def values(self) -> ValuesView[Job]:
        return self._jobs.values()

    def get(self, key: str, default: Job | None = None) -> Job | None:  # type: ignore[override]
        return self._jobs.get(key, default)

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        """``MutableMapping.pop`` (a removal is a change) without its generic layers: every
        queued start pops its job."""
        jobs = self._jobs
        if key in jobs:
            self._changed.add(key)
            return jobs.pop(key)
        if default is _MISSING:
            raise KeyError(key)
        return default

    def take_changed(self) -> set[str]:
        """The ids set or removed since the last call (and forget them)."""
        out, self._changed = self._changed, set()
        return out
