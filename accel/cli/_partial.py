"""How every ``accel`` command that reads devices reports what it could not read.

One mechanism for ``ls``, ``show``, ``topo``, ``health``, ``ps``, ``watch``, ``dmon``, ``dra``,
``cdi``, ``ray`` and ``slurm``: each :class:`~accel.model.Problem` is one ``accel: warning:``
line on stderr (printed once, however many refreshes see it again), ``--json`` carries the
problems where the document is accel's own, and the command exits
:data:`~accel.cli.EXIT_PARTIAL` when anything could not be read (a command with a stronger
answer, ``health``'s 4, keeps it).

A one-shot command reads the inventory, whose ``problems`` say what failed (records, commands,
backends).  A sampling command (``watch``, ``dmon``) reads telemetry, which carries no problems
of its own: :meth:`Reads.sample` makes them from the session, a backend that failed (its
:meth:`~accel.discovery.Session.backend_problems`) and a device of the inventory that the
refresh has no sample for, so a device dropped from one refresh is never silent either.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..model import HostInventory, Problem, ProblemKind, Telemetry
from . import EXIT_OK, EXIT_PARTIAL

if TYPE_CHECKING:
    from ..discovery import Session

__all__ = ["Reads", "problem_line"]


def problem_line(problem: Problem) -> str:
    """One warning line for one problem: ``accel: warning: <backend>: <kind>: <what> (<where>) [code]``."""
    where = []
    if problem.command is not None:
        where.append(f"`{problem.command}`" + (f" line {problem.line}" if problem.line is not None else ""))
    if problem.device_id is not None:
        where.append(f"device {problem.device_id}")
    suffix = f" ({', '.join(where)})" if where else ""
    code = f" [{problem.code}]" if problem.code else ""
    # One line: a message may quote the tool's output.
    message = " ".join(problem.message.split())
    return f"accel: warning: {problem.backend}: {problem.kind.value}: {message}{suffix}{code}"


def _key(problem: Problem) -> tuple[object, ...]:
    return (problem.kind, problem.backend, problem.message, problem.command, problem.line, problem.device_id)


class Reads:
    """What one command run could not read, gathered over all of its reads."""

    def __init__(self) -> None:
        self._seen: set[tuple[object, ...]] = set()
        #: Every distinct problem so far, in the order first seen.
        self.problems: list[Problem] = []
        #: Which backend read each device of the inventory (:meth:`inventory`).
        self._owner: dict[str, str] = {}

    def warn(self, problems: Iterable[Problem]) -> tuple[Problem, ...]:
        """Print a warning line for each problem not reported before; return ``problems``."""
        given = tuple(problems)
        for problem in given:
            key = _key(problem)
            if key in self._seen:
                continue
            self._seen.add(key)
            self.problems.append(problem)
            print(problem_line(problem), file=sys.stderr)
        return given

    def inventory(self, session: Session) -> HostInventory:
        """The session's merged inventory (as :meth:`Session.inventory`), remembering which
        backend read which device so a missing sample can name it."""
        from ..discovery import merge_inventories

        per_backend = session.inventories()
        for name, inv in per_backend.items():
            self._owner.update({d.id: name for d in inv.devices})
        merged = merge_inventories(list(per_backend.values()))
        return merge_inventories([merged], problems=session.backend_problems())

    def sample(
        self, session: Session, expected: Sequence[str], ids: Sequence[str] | None = None
    ) -> tuple[tuple[Telemetry, ...], tuple[Problem, ...]]:
        """One telemetry refresh and what it could not read: the failed backends, and each
        device of ``expected`` without a sample.  New problems are warned about at once."""
        samples = session.telemetry(ids)
        got = {s.device_id for s in samples}
        failed = session.backend_problems()
        # A failed backend is one problem, not one more per device it owned.
        down = {p.backend for p in failed}
        missing = [
            Problem(
                kind=ProblemKind.DEVICE,
                backend=owner,
                message="no telemetry sample for this device in this refresh",
                device_id=device_id,
            )
            for device_id in expected
            if device_id not in got
            and (owner := self._owner.get(device_id, device_id.partition(":")[0] or "?")) not in down
        ]
        return samples, self.warn([*failed, *missing])

    @property
    def complete(self) -> bool:
        return not self.problems

    def code(self) -> int:
        """:data:`EXIT_OK` when everything was read, else :data:`EXIT_PARTIAL`."""
        return EXIT_OK if self.complete else EXIT_PARTIAL
