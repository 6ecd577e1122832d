"""``HealthCheckProgram``: drain this node when a device is lost or unhealthy, as NHC does.

Only ``lost`` and ``unhealthy`` (a critical or fatal condition) drain; ``degraded`` and
``unknown`` never do (nothing read says the device is broken).  ``resume`` undrains a node only
when its drain reason starts with :data:`REASON_PREFIX` (accel drained it) and no device is bad.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...errors import ToolError
from ...model import HealthState, HostInventory, Operational


class _Result(Protocol):
    @property
    def stdout(self) -> str: ...


class Runner(Protocol):
    """What runs scontrol: :class:`accel.tools.SubprocessRunner` (the CLI's), or a test's fake.
    It raises :class:`~accel.errors.ToolError` (timeout, exit status, not found)."""

    def run(
        self, argv: Sequence[str], *, timeout_s: float = ..., check: bool = ..., env: Mapping[str, str] | None = ...
    ) -> _Result: ...


__all__ = ["REASON_PREFIX", "Decision", "Runner", "bad_devices", "decide_and_act", "node_state"]

REASON_PREFIX = "accel:"
_TIMEOUT_S = 20.0


def bad_devices(inv: HostInventory, only: set[str] | None = None) -> list[tuple[str, str]]:
    """``(device, condition)`` for every lost or unhealthy device, in inventory order.

    ``only`` limits the check to these device ids (a job prolog checks the job's own devices).
    ``unknown`` and ``degraded`` are never bad: nothing says the device cannot run the job.
    """
    out: list[tuple[str, str]] = []
    for i, d in enumerate(inv.devices):
        if only is not None and d.id not in only:
            continue
        h = d.health
        name = f"{d.vendor}{d.index if d.index is not None else i} {d.id}"
        if h.operational is Operational.LOST:
            out.append((name, "lost"))
        elif h.state is HealthState.UNHEALTHY:
            worst = max(h.conditions, key=lambda c: c.severity.rank, default=None)
            out.append((name, worst.reason if worst is not None else "unhealthy"))
    return out


@dataclass(frozen=True)
class Decision:
    action: str  # drain | resume | none
    reason: str | None
    bad: tuple[tuple[str, str], ...]


def _scontrol(runner: Runner, args: list[str], slurm_conf: str | None) -> str:
    # accel.tools gives a child a clean environment: the configuration Slurm reads is passed on.
    env = {"SLURM_CONF": slurm_conf} if slurm_conf else None
    result = runner.run(["scontrol", *args], timeout_s=_TIMEOUT_S, check=True, env=env)
    return result.stdout


def node_state(runner: Runner, node: str, slurm_conf: str | None = None) -> tuple[str, str | None]:
    """``(State, Reason)`` of ``node`` from ``scontrol show node -o``."""
    out = _scontrol(runner, ["show", "node", "-o", node], slurm_conf)
    state = re.search(r"\bState=(\S+)", out)
    reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?:\s+\w+=|$)", out)
    if state is None:
        raise ToolError(f"scontrol show node {node}: no State= in its output", tool="scontrol")
    return state.group(1), reason.group(1).strip() if reason and reason.group(1).strip() not in ("", "(null)") else None


def decide_and_act(
    inv: HostInventory, node: str, runner: Runner, *, resume: bool = False, slurm_conf: str | None = None
) -> Decision:
    """Drain ``node`` (or, with ``resume``, undrain it) as the inventory says; run scontrol
    (with ``SLURM_CONF=slurm_conf`` when given).  A failed or hung scontrol raises its
    :class:`~accel.errors.ToolError`."""
    bad = bad_devices(inv)
    if bad:
        first, cond = bad[0]
        more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        reason = f"{REASON_PREFIX} {first} {cond}{more}"
        state, current = node_state(runner, node, slurm_conf)
        if "DRAIN" in state and current is not None and not current.startswith(REASON_PREFIX):
            return Decision("none", current, tuple(bad))  # drained by someone else: leave their reason
        if current == reason and "DRAIN" in state:
            return Decision("none", reason, tuple(bad))
        _scontrol(runner, ["update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], slurm_conf)
        return Decision("drain", reason, tuple(bad))
    if resume:
        state, current = node_state(runner, node, slurm_conf)
        if "DRAIN" in state and current is not None and current.startswith(REASON_PREFIX):
            _scontrol(runner, ["update", f"NodeName={node}", "State=RESUME"], slurm_conf)
            return Decision("resume", current, ())
    return Decision("none", None, ())
