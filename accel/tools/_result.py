"""What a tool run gives back: :class:`ToolResult`, the limits' defaults, and the typed errors
built the same way for real and replayed runs (so a replayed failure reads exactly like a real one)."""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from accel.errors import ToolExitError, ToolOutputTooLargeError, ToolTimeoutError

TOOL_RUN_EVENT: str = "accel.tools.run"
"""The audit event (``sys.audit``) every runner raises per ``run`` call, with the argv tuple."""

DEFAULT_TIMEOUT_S: float = 10.0
"""Default wall-clock limit for one tool run, in seconds."""

DEFAULT_MAX_OUTPUT_BYTES: int = 16 * 1024 * 1024
"""Default cap on stdout and stderr together, in bytes (16 MiB)."""

StrPath: TypeAlias = "str | os.PathLike[str]"

_STDERR_TAIL_CHARS = 8192  # kept on ToolExitError.stderr
_MESSAGE_TAIL_CHARS = 500  # shown in the error message


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one completed tool run.

    ``argv`` is the command as you passed it (``argv[0]`` unresolved), ``stdout`` and ``stderr``
    are decoded text (UTF-8, undecodable bytes replaced by U+FFFD), ``returncode`` is the exit
    status (negative: killed by that signal), ``duration_s`` the wall-clock time it took.
    """

    argv: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    duration_s: float

    @property
    def tool(self) -> str:
        """The tool's name: the basename of ``argv[0]``."""
        return _tool_name(self.argv)

    def check(self) -> ToolResult:
        """Return ``self`` if the exit status is 0, else raise :class:`~accel.errors.ToolExitError`.

        For callers that ran with ``check=False`` to look at the output first.
        """
        if self.returncode != 0:
            raise _exit_error(self)
        return self



def _tool_name(argv: Sequence[str]) -> str:
    return os.path.basename(argv[0]) if argv else "<empty>"


def _display(argv: Sequence[str]) -> str:
    return shlex.join(argv)


# --------------------------------------------------------------------------------------------
# Error construction (shared so that replayed failures look exactly like real ones)
# --------------------------------------------------------------------------------------------


def _tail(text: str, limit: int) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _exit_error(result: ToolResult) -> ToolExitError:
    rc = result.returncode
    if rc < 0:
        try:
            status = f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            status = f"was killed by signal {-rc}"
    else:
        status = f"exited with status {rc}"
    message = f"{result.tool} {status} (argv: {_display(result.argv)})"
    if result.stderr.strip():
        message += f"; stderr: {_tail(result.stderr, _MESSAGE_TAIL_CHARS)}"
    elif result.stdout.strip():  # many vendor tools report their errors on stdout
        message += f"; stdout: {_tail(result.stdout, _MESSAGE_TAIL_CHARS)}"
    return ToolExitError(
        message,
        tool=result.tool,
        argv=result.argv,
        returncode=rc,
        stderr=_tail(result.stderr, _STDERR_TAIL_CHARS),
    )


def _timeout_error(args: tuple[str, ...], timeout_s: float, detail: str = "") -> ToolTimeoutError:
    tool = _tool_name(args)
    return ToolTimeoutError(
        f"{tool} timed out after {timeout_s:g}s{detail} and was killed (argv: {_display(args)})",
        tool=tool,
        argv=args,
    )


def _too_large_error(args: tuple[str, ...], max_output_bytes: int) -> ToolOutputTooLargeError:
    tool = _tool_name(args)
    return ToolOutputTooLargeError(
        f"{tool} wrote more than {max_output_bytes} bytes of output and was killed (argv: {_display(args)})",
        tool=tool,
        argv=args,
    )


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")

