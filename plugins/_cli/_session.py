"""Running one vendor tool for a backend: the runner, its search path, timeout and count."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from accel.errors import ToolError, ToolTimeoutError
from accel.plugin import BackendConfig
from accel.tools import Runner, SubprocessRunner, ToolResult

from ._scenario import shipped_scenario_runner
from ._text import ParseContext

__all__ = ["ToolSession", "runner_for"]


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
        self.invocations += 1
        return self.runner.run(
            [self.tool, *args], timeout_s=self.timeout_s, search_path=tuple(self.search_path), check=check
        )

    def optional(self, *args: str, notes: list[str] | None = None) -> ToolResult | None:
        """Run a secondary command whose absence is expected (an older tool without the
        sub-command, a replay that did not record it): ``None`` plus a note instead of an
        error.  A timeout is a hung tool, not an absent command, and still raises."""
        try:
            return self.run(*args)
        except ToolTimeoutError:
            raise
        except ToolError as exc:
            if notes is not None:
                notes.append(f"{shlex.join([self.tool, *args])}: {exc.code}")
            return None

    def text(self, *args: str) -> tuple[str, ParseContext]:
        """stdout of ``tool *args`` and the :class:`ParseContext` naming that command."""
        return self.run(*args).stdout, self.context(*args)

    def context(self, *args: str) -> ParseContext:
        return ParseContext(self.tool, shlex.join([self.tool, *args]))
