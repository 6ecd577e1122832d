"""Runners: the :class:`Runner` protocol plugins are written against, the invocation log every
runner keeps, and the real :class:`SubprocessRunner`."""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from accel.errors import ConfigError

from ._checks import which
from ._result import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TIMEOUT_S, TOOL_RUN_EVENT, StrPath, ToolResult
from ._running import run

_DEFAULT_HISTORY = 10_000


@runtime_checkable
class Runner(Protocol):
    """What a plugin receives to run its vendor tools: the real one, a replayer, or a recorder.

    Write plugins against this protocol, never against a concrete runner::

        class AscendBackend:
            def __init__(self, runner: Runner) -> None:
                self._runner = runner

            def _npu_smi(self, *args: str) -> str:
                return self._runner.run(["npu-smi", *args], search_path=NPU_SMI_DIRS).stdout

    ``run`` has the signature and the guarantees of :func:`accel.tools.run`; ``which`` those of
    :func:`accel.tools.which` (a replayer answers it from its recordings, so ``probe()`` works
    in tests too).  ``call_count`` counts every ``run`` call, including failed ones;
    ``calls`` lists the most recent argv, oldest first.
    """

    @property
    def calls(self) -> list[tuple[str, ...]]:
        """The argv of recent ``run`` calls, oldest first (a copy)."""
        ...

    @property
    def call_count(self) -> int:
        """How many times ``run`` has been called on this runner."""
        ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        env: Mapping[str, str] | None = None,
        search_path: Sequence[str] = (),
        cwd: StrPath | None = None,
        check: bool = True,
    ) -> ToolResult:
        """Run one tool; see :func:`accel.tools.run`."""
        ...

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        """Where ``name`` would be found, or ``None``; see :func:`accel.tools.which`."""
        ...


class _CallLog:
    """Thread-safe invocation counting shared by the concrete runners."""

    def __init__(self, history: int = _DEFAULT_HISTORY) -> None:
        if isinstance(history, bool) or not isinstance(history, int) or history < 0:
            raise ConfigError(f"history must be a non-negative int, got {history!r}")
        self._lock = threading.Lock()
        self._calls: deque[tuple[str, ...]] = deque(maxlen=history)
        self._count = 0

    def _note(self, argv: Sequence[str]) -> None:
        entry = tuple(argv) if not isinstance(argv, str | bytes) else (str(argv),)
        # An audit event (PEP 578), so a watcher can count the tool runs of runners it cannot
        # reach: the conformance kit counts those of probe() (discovery.probe-cheap), including
        # replayed ones, whatever runner the plugin built itself.
        sys.audit(TOOL_RUN_EVENT, entry)
        with self._lock:
            self._count += 1
            self._calls.append(entry)

    @property
    def calls(self) -> list[tuple[str, ...]]:
        """The argv of the most recent ``run`` calls (up to ``history``), oldest first."""
        with self._lock:
            return list(self._calls)

    @property
    def call_count(self) -> int:
        """How many times ``run`` has been called, failures included."""
        with self._lock:
            return self._count


class SubprocessRunner(_CallLog):
    """The real runner: :func:`run` plus invocation counting.

    :param history: how many recent argv ``calls`` keeps (the count is unbounded).
    """

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        env: Mapping[str, str] | None = None,
        search_path: Sequence[str] = (),
        cwd: StrPath | None = None,
        check: bool = True,
    ) -> ToolResult:
        """Run one tool for real; see :func:`accel.tools.run`."""
        self._note(argv)
        return run(
            argv,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            env=env,
            search_path=search_path,
            cwd=cwd,
            check=check,
        )

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        """See :func:`accel.tools.which`."""
        return which(name, search_path)

    def __repr__(self) -> str:
        return f"SubprocessRunner(call_count={self.call_count})"


