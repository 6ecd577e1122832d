"""Running one vendor tool for a backend: the runner, its search path, timeout and count."""

from __future__ import annotations

import contextlib
import contextvars
import math
import shlex
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from accel.errors import AccelError, ToolError, ToolTimeoutError
from accel.plugin import BackendConfig
from accel.tools import Runner, SubprocessRunner, ToolResult

from ._scenario import shipped_scenario_runner
from ._text import ParseContext

__all__ = ["ToolSession", "check_deadline", "runner_for", "snapshot_deadline"]

# (monotonic deadline, budget in seconds) of the snapshot being read in this context.
_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "accel_snapshot_deadline", default=None
)


@contextlib.contextmanager
def snapshot_deadline(budget_s: float) -> Iterator[None]:
    """Every tool run and parse of one snapshot shares one deadline, ``budget_s`` from now.

    The tool timeout alone bounds each tool, not the parsing between runs nor the number of
    runs; inside this block :meth:`ToolSession.run` gives each run at most the time left,
    refuses to start one after the deadline, and :func:`check_deadline` (called when the
    snapshot is built) turns time spent parsing past it into a typed
    :class:`~accel.errors.ToolTimeoutError`.  ``inf`` (or NaN) means no deadline.
    """
    if not math.isfinite(budget_s) or budget_s <= 0:
        yield
        return
    token = _DEADLINE.set((time.monotonic() + budget_s, budget_s))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left() -> tuple[float, float] | None:
    current = _DEADLINE.get()
    if current is None:
        return None
    return current[0] - time.monotonic(), current[1]


def check_deadline(tool: str, doing: str) -> None:
    """Raise :class:`ToolTimeoutError` when the snapshot's deadline has passed (``doing`` says
    what was going on: ``"parsing its output"``, ``"before running 'npu-smi info'"``)."""
    left = _time_left()
    if left is not None and left[0] <= 0:
        raise ToolTimeoutError(
            f"{tool}: the snapshot took longer than its {left[1]:g} s deadline ({doing}); "
            "the tool timeout bounds the whole read",
            tool=tool,
        )


def runner_for(config: BackendConfig, package: str) -> Runner:
    """The runner a CLI backend uses: ``config.runner`` when given (``accel --replay DIR``),
    else a shipped replay scenario when ``options["scenario"]`` names one (a test facility:
    ``--option scenario=910b-8``), else the real :class:`~accel.tools.SubprocessRunner`."""
    if config.runner is not None:
        return config.runner
    name = config.option("scenario")
    if name:
        return shipped_scenario_runner(package, str(name))
    return SubprocessRunner()


@dataclass
class ToolSession:
    """Runs ``tool`` through ``runner`` with the backend's search path and timeout, and counts
    invocations so a backend can report how many runs one snapshot took::

        session = ToolSession(runner, "npu-smi", search_path=NPU_SMI_PATHS, timeout_s=10)
        text, ctx = session.text("info", "-m")      # stdout and a ParseContext for it
    """

    runner: Runner
    tool: str
    search_path: Sequence[str] = ()
    timeout_s: float = 10.0
    invocations: int = field(default=0, init=False)

    def run(self, *args: str, check: bool = True) -> ToolResult:
        """Run ``tool *args``; raises the :mod:`accel.tools` errors (timeout, exit status...)."""
        timeout = self.timeout_s
        left = _time_left()
        if left is not None:
            check_deadline(self.tool, f"before running {shlex.join([self.tool, *args])!r}")
            timeout = min(timeout, left[0])
        self.invocations += 1
        return self.runner.run(
            [self.tool, *args], timeout_s=timeout, search_path=tuple(self.search_path), check=check
        )

    def optional(
        self, *args: str, notes: list[str] | None = None, failures: list[AccelError] | None = None
    ) -> ToolResult | None:
        """Run a secondary command whose absence is expected (an older tool without the
        sub-command, a replay that did not record it): ``None`` plus a note instead of an
        error, and the error appended to ``failures`` when given (for a backend whose views
        are each optional but not all at once).  A timeout is a hung tool, not an absent
        command, and still raises."""
        try:
            return self.run(*args)
        except ToolTimeoutError:
            raise
        except ToolError as exc:
            if notes is not None:
                notes.append(f"{shlex.join([self.tool, *args])}: {exc.code}")
            if failures is not None:
                failures.append(exc)
            return None

    def text(self, *args: str) -> tuple[str, ParseContext]:
        """stdout of ``tool *args`` and the :class:`ParseContext` naming that command."""
        return self.run(*args).stdout, self.context(*args)

    def context(self, *args: str) -> ParseContext:
        return ParseContext(self.tool, shlex.join([self.tool, *args]))
