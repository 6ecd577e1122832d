"""The executors of ``accel serve``, by name: ``sim`` here, ``local`` and ``slurm`` beside it.

An executor is built from an :class:`ExecutorContext` (the service's clock, where job logs go,
the executor's own options) by the factory registered under its name.  The registry is the one
place that knows which modules hold which executor, so a new executor drops in with one line;
a factory's module is imported only when that executor is asked for (``local`` and ``slurm``
load nothing for a ``--sim`` demo).

Besides the :class:`accel.service.Executor` contract, an executor may offer
:class:`DeviceSampler` (device readings while a job runs, for the job's charts) and set
``relaunch_safe = True`` when starting a job whose launch was cut short by a crash cannot run it
twice (the ``sim`` executor keeps no outside state); see ``docs/service.md``.  An executor whose
jobs can serve (a serving group's replicas run the group's engine command) offers
:class:`NodeAddresses`: the address a job placed on one of its hosts is reached at.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from accel.errors import ConfigError

from .._executor import Executor, PlacedDevice

__all__ = ["EXECUTORS", "DeviceSample", "DeviceSampler", "ExecutorContext", "NodeAddresses", "build_executor",
           "executor_names"]


@dataclass(frozen=True, slots=True)
class ExecutorContext:
    """What the service gives an executor it builds."""

    #: The service's clock: seconds on the engine's time line (scaled wall time).
    clock: Callable[[], float]
    #: Where job logs live: ``log_root / <job id> / stdout.log`` (and ``stderr.log``).
    log_root: Path
    #: The executor's options from the command line (``--sim`` profiles, ``--time-scale``...).
    options: Mapping[str, object] = field(default_factory=dict)
    #: A Unix time (what a process's exit record or ``sacct`` says) on the service's clock
    #: (``None``: the executor reports no end times, :attr:`RunStatus.ended_at` stays ``None``).
    wall_to_clock: Callable[[float], float] | None = None


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One reading of one device of a running job (SI units; ``None``: not reported)."""

    device_id: str
    memory_used_bytes: int | None
    utilization_ratio: float | None
    power_watts: float | None


@runtime_checkable
class DeviceSampler(Protocol):
    """An executor that can read the devices of a running job."""

    def sample(self, devices: Sequence[PlacedDevice]) -> list[DeviceSample]:
        """One reading per device it could read (a device it cannot read is left out)."""
        ...


@runtime_checkable
class NodeAddresses(Protocol):
    """An executor that says where a job placed on one of its hosts listens (serving replicas)."""

    def node_address(self, host: str) -> str | None:
        """The IP address or DNS name a process of a job on ``host`` (a host name of
        :meth:`~accel.service.Executor.hosts`) is reached at from the service; ``None``: unknown now."""
        ...


#: name -> "module:factory"; the factory takes an :class:`ExecutorContext` and returns an Executor.
EXECUTORS: dict[str, str] = {
    "sim": "accel.service.executors._sim:build",
    "local": "accel.service.executors._local:build",
    "slurm": "accel.service.executors._slurm:build",
}


def executor_names() -> list[str]:
    """The executor names ``--executor`` accepts."""
    return sorted(EXECUTORS)


def build_executor(name: str, context: ExecutorContext) -> Executor:
    """Build the executor called ``name``; :class:`ConfigError` for an unknown or missing one."""
    target = EXECUTORS.get(name)
    if target is None:
        raise ConfigError(f"unknown executor {name!r}; known: {', '.join(executor_names())}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise ConfigError(f"executor {name!r} is not available in this build of accel ({module_name} "
                              "is missing)") from exc
        raise
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"executor {name!r}: {target} is not a factory")
    built = factory(context)
    if not isinstance(built, Executor):
        raise ConfigError(f"executor {name!r}: {target} did not return an Executor")
    return built
