"""Value types of the queueing layer: jobs, priority classes, policies, job states.

Everything here is a frozen value or an enum; the mutable bookkeeping lives in
:mod:`._engine`.  Times are seconds on the caller's clock (``now`` is always passed in, the
scheduler never reads a wall clock), so the same engine runs live or inside the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from accel.scheduler import InvalidRequestError, Share, TopologyConstraint, TopologyLevel

__all__ = [
    "DEFAULT_CLASS",
    "BackfillMode",
    "InClassOrder",
    "JobSpec",
    "JobState",
    "Policy",
    "PreemptMode",
    "PriorityClass",
    "WaitReason",
]


class JobState(StrEnum):
    """Where a job is.  ``PREEMPTING`` = signalled, still holding devices for its grace period."""

    QUEUED = "queued"
    RUNNING = "running"
    PREEMPTING = "preempting"
    SUSPENDED = "suspended"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """True for states a job never leaves."""
        return self in (JobState.FINISHED, JobState.FAILED, JobState.CANCELLED)


class InClassOrder(StrEnum):
    """Order of jobs inside one priority class."""

    FIFO = "fifo"
    SHORTEST = "shortest"  # shortest estimated device-time first (ties: submit order)
    FAIR = "fair"  # least decayed tenant usage (per weight) first, then submit order


class PreemptMode(StrEnum):
    """What happens to a victim of preemption."""

    REQUEUE = "requeue"  # killed, restarts from zero: all its work is lost
    SUSPEND = "suspend"  # suspended, resumes with all its work (state kept off-device)
    CHECKPOINT = "checkpoint"  # restarts from its last checkpoint: work since then is lost


class BackfillMode(StrEnum):
    """How later jobs may run ahead of a blocked one."""

    NONE = "none"  # strict order: nothing runs ahead of a blocked job of its pool
    EASY = "easy"  # the first blocked job per pool holds a reservation; others may not delay it
    CONSERVATIVE = "conservative"  # every blocked job (up to ``Policy.plan_depth``) holds one


class WaitReason(StrEnum):
    """Why a queued job does not run now."""

    NONE = "none"  # it would start now
    QUOTA = "quota"  # its tenant's quota (or running-job limit) is used up
    CAPACITY = "capacity"  # not enough free devices; nothing ahead of it
    RESERVATION = "reservation"  # devices are free but held for an earlier job's reservation
    PRIORITY = "priority"  # jobs ahead of it (higher class or earlier in order) go first
    # enough free devices by count, but the placement pipeline refused it (required topology,
    # CPU/memory/pod slots, extra filters, fragmentation): it is tried again every cycle
    PLACEMENT = "placement"


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """One priority level.  Higher ``level`` runs first; ``order`` sorts jobs inside it.

    ``preempts``: jobs of this class may preempt running jobs of lower levels.
    ``preemptible``: running jobs of this class may be preempted by higher levels.
    ``band_ratio`` (shortest-first only): estimates within a factor of this ratio are one band
    and keep submit order inside it, so a slightly shorter late job does not jump an earlier one
    (this keeps start-time estimates stable; ``None`` = exact shortest-first).
    """

    name: str
    level: int = 0
    order: InClassOrder = InClassOrder.FIFO
    preempts: bool = False
    preemptible: bool = True
    band_ratio: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidRequestError("priority class needs a name", field="class.name")
        if self.band_ratio is not None and not self.band_ratio > 1.0:
            raise InvalidRequestError("band_ratio must be > 1", field="class.band_ratio")

    def band(self, device_seconds: float) -> float:
        """The sort key of a job's estimated device-seconds under this class's banding."""
        if self.band_ratio is None:
            return device_seconds
        return float(math.floor(math.log(max(device_seconds, 1.0), self.band_ratio)))


DEFAULT_CLASS = PriorityClass("default", 0, InClassOrder.FIFO)


@dataclass(frozen=True, slots=True)
class Policy:
    """Queueing policy: classes, backfill, preemption.

    ``plan_depth`` bounds how many blocked jobs per cycle get a reservation in conservative mode
    (Slurm's ``bf_max_job_test`` plays the same role); ``max_tests`` bounds how many queued jobs
    one cycle examines (``None`` = all).  ``grace_s`` is the time a preemption victim keeps its
    devices to wind down.  ``overrun_margin_s``: a job running past its estimate is expected to
    end this much later (re-evaluated every cycle).  ``calibrate_window`` > 0 scales each new
    start estimate's wait by the median ratio actual/estimated wait of the last that many jobs
    that started (online calibration from the scheduler's own past errors; 0 = off).

    ``demote_after_device_s`` (ascending, device-seconds): attained-service *tiers* inside every
    class, a multi-level feedback queue like Tiresias' discretised 2D-LAS.  A job whose attained
    service (work it has kept x devices, compute share for a fractional job) passed ``k`` of the
    thresholds is in tier ``k``; lower tiers go first (then the class's own order), and a job may
    preempt running jobs of its class in a later tier, so a new job never waits behind a job that
    has already had its share.  The order needs no duration estimate.  Reservations and wait
    estimates book each job only until it would leave the tier of the job being planned
    (``E[min(D, budget)]``), so a new job's start depends on capped durations, which are far
    easier to predict than heavy-tailed full ones.  Empty = no tiers.
    ``preempt_overhead_s``: run time a preempted job loses each time it is stopped (saving and
    restoring its state), accounted as lost work.

    Starvation guard (both ``None`` = off): a queued job is *promoted* once it has waited, since
    it last entered the queue, ``promote_after_wait_s`` seconds, or ``promote_after_wait_ratio``
    times the length of its last run (Tiresias' STARVELIMIT; only for a job that has run),
    whichever comes first.  A promoted job goes first in its class (ahead of the class's in-class
    order; with tiers, ahead of its tier, and its attained service counts afresh from the
    promotion, so it is in tier 0 again).  The promotion is journaled (``promoted``) and follows
    from journaled times only, so a rebuilt engine promotes the same jobs at the same times.
    """

    classes: tuple[PriorityClass, ...] = (DEFAULT_CLASS,)
    backfill: BackfillMode = BackfillMode.EASY
    preempt_mode: PreemptMode = PreemptMode.CHECKPOINT
    grace_s: float = 0.0
    plan_depth: int = 64
    max_tests: int | None = None
    fair_half_life_s: float = 7 * 86400.0
    overrun_margin_s: float = 600.0
    default_class: str = ""
    calibrate_window: int = 0
    demote_after_device_s: tuple[float, ...] = ()
    preempt_overhead_s: float = 0.0
    promote_after_wait_s: float | None = None
    promote_after_wait_ratio: float | None = None

    def __post_init__(self) -> None:
        th = self.demote_after_device_s
        if any(not (t > 0 and math.isfinite(t)) for t in th) or any(th[i + 1] <= th[i] for i in range(len(th) - 1)):
            raise InvalidRequestError("demote_after_device_s must be positive, finite and strictly ascending",
                                      field="demote_after_device_s")
        for name in ("promote_after_wait_s", "promote_after_wait_ratio"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise InvalidRequestError(f"{name} must be a positive finite number (or None: off), not {v!r}",
                                          field=name)
        if not (self.preempt_overhead_s >= 0 and math.isfinite(self.preempt_overhead_s)):
            raise InvalidRequestError("preempt_overhead_s must be >= 0", field="preempt_overhead_s")
        names = [c.name for c in self.classes]
        if not names or len(set(names)) != len(names):
            raise InvalidRequestError("policy needs uniquely named classes", field="classes")
        if self.default_class and self.default_class not in names:
            raise InvalidRequestError(f"default_class {self.default_class!r} is not a class", field="default_class")
        if self.grace_s < 0 or self.plan_depth < 0:
            raise InvalidRequestError("grace_s and plan_depth must be >= 0", field="grace_s")

    def klass(self, name: str | None) -> PriorityClass:
        """The class called ``name`` (the default class for ``None``/empty)."""
        key = name or self.default_class or self.classes[0].name
        for c in self.classes:
            if c.name == key:
                return c
        raise InvalidRequestError(f"unknown priority class {key!r}; known: {[c.name for c in self.classes]}",
                                  field="priority_class")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a user submits.  The scheduler never sees a true duration, only ``estimate_s``.

    ``devices`` whole devices of ``pool`` (a device model such as ``"A100"``; empty = any pool),
    or one fractional ``share`` of a device.  ``same_host`` requires every device on one host;
    otherwise the job is a gang split into per-host chunks, placed all-or-nothing.
    ``checkpoint_interval_s``: the job checkpoints every so many seconds of run time (``None`` =
    never; a failure or requeue then loses all its work).
    ``topology``: keep the job's devices within a level (:class:`accel.scheduler.TopologyConstraint`):
    ``link_domain``/``pcie_switch``/``numa``/``host`` inside one host, ``rack``/``switch_group``
    for the hosts of a split job; ``required`` refuses a looser placement (the job waits with
    reason ``placement``), otherwise the tighter placement is preferred.
    """

    id: str
    tenant: str = "default"
    devices: int = 1
    pool: str = ""
    share: Share | None = None
    estimate_s: float = 3600.0
    priority_class: str = ""
    same_host: bool = False
    checkpoint_interval_s: float | None = None
    cpu_milli: int = 0
    memory_bytes: int = 0
    preemptible: bool = True
    labels: tuple[tuple[str, str], ...] = field(default=())
    topology: TopologyConstraint | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise InvalidRequestError("job id must be non-empty", field="id")
        if self.share is not None and self.devices != 1:
            raise InvalidRequestError("a share job asks for devices=1", field="devices")
        if self.devices < 1:
            raise InvalidRequestError(f"job {self.id}: devices must be >= 1", field="devices")
        if not (self.estimate_s > 0 and math.isfinite(self.estimate_s)):
            raise InvalidRequestError(f"job {self.id}: estimate_s must be a positive number", field="estimate_s")
        if self.checkpoint_interval_s is not None and not self.checkpoint_interval_s > 0:
            raise InvalidRequestError("checkpoint_interval_s must be > 0", field="checkpoint_interval_s")
        if self.topology is not None and not isinstance(self.topology, TopologyConstraint):
            raise InvalidRequestError(f"job {self.id}: topology must be a TopologyConstraint, "
                                      f"not {type(self.topology).__name__}", field="topology")

    @property
    def compute_milli(self) -> int:
        """Compute held, in milli-devices (1000 per whole device)."""
        return self.share.compute_milli if self.share is not None else 1000 * self.devices


def topology_to_dict(topology: TopologyConstraint | None) -> dict[str, Any] | None:
    """The journal form of a job's topology constraint (``None`` stays ``None``)."""
    if topology is None:
        return None
    return {"level": topology.level.value, "required": topology.required}


def topology_from_dict(data: Any) -> TopologyConstraint | None:
    """Read :func:`topology_to_dict`'s form back; a journal written before it has none."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) - {"level", "required"} or "level" not in data:
        raise InvalidRequestError(f"topology must be {{'level': ..., 'required': bool}}, got {data!r}",
                                  field="topology")
    try:
        level = TopologyLevel(data["level"])
    except ValueError:
        raise InvalidRequestError(f"unknown topology level {data['level']!r}; known: "
                                  f"{[lvl.value for lvl in TopologyLevel]}", field="topology.level") from None
    required = data.get("required", False)
    if not isinstance(required, bool):
        raise InvalidRequestError(f"topology.required must be a bool, got {required!r}", field="topology.required")
    return TopologyConstraint(level, required)
