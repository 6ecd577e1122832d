"""The one interface every executor of ``accel serve`` implements (DESIGN §11).

An executor is a cluster: it offers hosts (as :class:`accel.model.HostInventory` snapshots, the
same picture every other part of accel reads), and it runs what the queueing engine placed on
them.  The service's live loop owns every decision (admission, placement, preemption with grace,
time limits); an executor only carries them out and reports what happened:

- :meth:`Executor.start` launches one placed job and returns a :class:`Handle`, which the
  service writes to its journal *before* it reports the job as started, so that a restarted
  service can find the job again;
- :meth:`Executor.poll` says whether the job still runs, and how it ended;
- :meth:`Executor.signal` delivers a signal to the whole job (the checkpoint signal, SIGTERM
  after the grace period, SIGKILL after that);
- :meth:`Executor.reattach` finds a job again after a restart of the service from its handle
  alone, or says it is gone (never runs it a second time).

Executors: ``sim`` (simulator hosts, a job "runs" for its declared duration at a time scale),
``local`` (this host's devices, a process group per job), ``slurm`` (``sbatch`` / ``squeue`` /
``sacct`` / ``scancel``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from accel.model import HostInventory

__all__ = [
    "Executor",
    "ExecutorError",
    "ExitReason",
    "Handle",
    "JobLostError",
    "LaunchSpec",
    "PlacedDevice",
    "RunStatus",
]


class ExecutorError(Exception):
    """An executor could not do what it was asked; the message names the job and the cause."""


class JobLostError(ExecutorError):
    """A handle no longer names a job this executor can see (its process or Slurm job is gone
    without a recorded end).  The service records the job as failed with reason ``node_lost``;
    it never starts it again on its own."""


class ExitReason(StrEnum):
    """Why a job ended, as a user reads it on the job's page."""

    COMPLETED = "completed"  # exit code 0
    FAILED = "failed"  # a non-zero exit code
    OOM_KILLED = "oom_killed"  # killed by the kernel's (or the cgroup's) out-of-memory killer
    SIGNALED = "signaled"  # ended by a signal nobody in accel sent
    NODE_LOST = "node_lost"  # the host (or the job's process / Slurm job) vanished
    DEVICE_LOST = "device_lost"  # a device of the job went unhealthy under it
    PREEMPTED = "preempted"  # stopped by the scheduler for a higher class
    TIME_LIMIT = "time_limit"  # ran past its time limit
    CANCELLED = "cancelled"  # a user or admin cancelled it


@dataclass(frozen=True, slots=True)
class PlacedDevice:
    """One device a job was given: where it is, what it is, and how the job sees it."""

    host: str
    device_id: str  # accel's stable id (``nvidia:GPU-...``)
    index: int  # the device's position on its host (what a visibility variable lists)
    vendor: str
    model: str
    #: The vendor's visibility variable(s) for this device, from its ``binding``
    #: (``CUDA_VISIBLE_DEVICES`` = the UUID, ``ASCEND_RT_VISIBLE_DEVICES`` = the index, ...).
    visibility_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything an executor needs to run one placed job.  ``argv`` is never given to a shell."""

    job_id: str
    tenant: str
    argv: tuple[str, ...]
    devices: tuple[PlacedDevice, ...]
    #: The user's environment, names already checked against the service's allowlist.
    env: tuple[tuple[str, str], ...] = ()
    #: Where the executor writes ``stdout.log`` and ``stderr.log`` (created by the service).
    log_dir: Path = field(default_factory=Path)
    #: The job's declared run time: the ``sim`` executor "runs" the job this long (scaled);
    #: real executors ignore it.
    duration_s: float | None = None
    #: Wall-clock limit; enforced by the service, which signals the job when it is reached.
    time_limit_s: float | None = None
    #: The signal that asks the job to checkpoint (``None``: the job cannot checkpoint).
    checkpoint_signal: int | None = None
    #: When the scheduler placed this attempt, on the service's clock (``None``: not said).  The
    #: ``sim`` executor runs the job from then (its devices were the job's from then on), so a
    #: live run keeps the replay's times; real executors start it when ``start`` is called.
    placed_at: float | None = None


@dataclass(frozen=True, slots=True)
class Handle:
    """What the journal keeps of a started job: enough to find it again after a restart.

    ``ref`` is the executor's own key: ``local`` ``"<pid>:<process start time in clock ticks>"``
    (a recycled pid is told apart by its start time), ``slurm`` the Slurm job id, ``sim`` the
    start time on the service's clock.
    """

    executor: str
    job_id: str
    ref: str


@dataclass(frozen=True, slots=True)
class RunStatus:
    """One poll: still running, or ended with an exit code / signal and a reason."""

    running: bool
    exit_code: int | None = None
    signal: int | None = None
    reason: ExitReason | None = None
    detail: str = ""
    #: When it ended, on the service's clock (:attr:`ExecutorContext.clock`); ``None``: the
    #: executor cannot tell (the service then takes the time of the poll that saw the end).
    #: The service records the end (the bill, the devices' release) at this time.
    ended_at: float | None = None


@runtime_checkable
class Executor(Protocol):
    """A cluster the service schedules onto.  Implementations must be safe to call from the
    service's one live-loop thread; they never block longer than a tool's timeout."""

    #: The executor's name as the service and the journal know it (``sim``, ``local``, ``slurm``).
    name: str

    def hosts(self) -> Sequence[HostInventory]:
        """The hosts this executor offers now, as accel reads them (problems included)."""
        ...

    def start(self, spec: LaunchSpec) -> Handle:
        """Launch ``spec``; raise :class:`ExecutorError` (naming the cause) if it cannot start."""
        ...

    def poll(self, handle: Handle) -> RunStatus:
        """Whether the job still runs, or how it ended; :class:`JobLostError` if it is gone."""
        ...

    def signal(self, handle: Handle, signum: int) -> None:
        """Deliver ``signum`` to every process of the job (a no-op for a job that has ended)."""
        ...

    def reattach(self, handle: Handle) -> RunStatus:
        """Find a job again after a restart of the service; :class:`JobLostError` if it is gone."""
        ...

    def log_path(self, handle: Handle, stream: Literal["stdout", "stderr"]) -> Path:
        """The file holding the job's ``stream`` (it may not exist yet)."""
        ...
