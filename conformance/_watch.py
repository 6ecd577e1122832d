"""Count the tools a piece of plugin code runs, whatever runner it uses (for ``discovery.probe-cheap``).

A replay plugin builds its own :class:`accel.tools.ReplayRunner` from an option, so the config's
runner never sees its calls.  Every accel runner raises the audit event
:data:`accel.tools.TOOL_RUN_EVENT` per run (replayed runs included), and the interpreter raises
``subprocess.Popen`` / ``os.system`` / ``os.posix_spawn`` / ``os.exec`` / ``os.spawn`` for any
process started by other means.  One audit hook, installed on first use (audit hooks cannot be
removed), counts those events while a :class:`ToolWatch` is open; outside a watch it returns at
once.
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Final

from accel.tools import TOOL_RUN_EVENT

__all__ = ["ToolWatch"]

_PROCESS_EVENTS: Final = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn",
                                    "os.startfile"})
_lock = threading.Lock()
_active: list[ToolWatch] = []
_installed = False


def _hook(event: str, args: tuple[object, ...]) -> None:
    if not _active:
        return
    if event == TOOL_RUN_EVENT:
        argv = args[0] if args and isinstance(args[0], tuple) else args
        with _lock:
            for watch in _active:
                watch.tool_runs.append(tuple(str(a) for a in argv))
    elif event in _PROCESS_EVENTS:
        what = str(args[1] if event == "subprocess.Popen" and len(args) > 1 else args[0] if args else event)
        with _lock:
            for watch in _active:
                watch.processes.append(f"{event}: {what}"[:200])


class ToolWatch:
    """``with ToolWatch() as w: ...`` then ``w.tool_runs`` (argv tuples) and ``w.processes``.

    Counts events from every thread while open: the code under watch may use worker threads.
    """

    def __init__(self) -> None:
        self.tool_runs: list[tuple[str, ...]] = []
        self.processes: list[str] = []

    @property
    def count(self) -> int:
        """Tools run: runner calls, or processes started where more (a tool run may also start one)."""
        return max(len(self.tool_runs), len(self.processes))

    def __enter__(self) -> ToolWatch:
        global _installed
        with _lock:
            if not _installed:
                sys.addaudithook(_hook)
                _installed = True
            _active.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with _lock:
            _active.remove(self)
