"""Run vendor command-line tools safely: the only way an accel plugin runs a vendor CLI.

Plugins for CLI-based vendors (``npu-smi``, ``cnmon``, ``hy-smi``, ``mx-smi``...) never call
:mod:`subprocess` themselves.  They receive a :class:`Runner` and call ``runner.run(argv)``::

    def inventory(self) -> HostInventory:
        result = self._runner.run(
            ["npu-smi", "info", "-m"],
            search_path=("/usr/local/sbin", "/usr/local/bin"),
            timeout_s=5.0,
        )
        return parse_mapping(result.stdout)

What every run guarantees, for the real :class:`SubprocessRunner` and the :class:`ReplayRunner`
used in tests alike:

* **No shell.** ``argv`` is a list of arguments; a plain string is refused with
  :class:`~accel.errors.ConfigError`.
* **Resolution.** ``argv[0]`` is an absolute path (checked as is) or a bare name looked up in
  ``search_path`` first (vendor tools live in ``/usr/local/sbin``, ``/opt/hyhal/bin``...) and then
  in ``PATH``.  Empty and relative ``PATH`` entries are ignored, so a tool is never picked up from
  the current directory.  The child sees ``argv[0]`` as you wrote it.
* **A clean environment.** The child gets only ``PATH`` and ``HOME`` from this process, plus
  ``LANG=C`` and ``LC_ALL=C`` (vendor tools localise their output), plus whatever you pass in
  ``env`` (which wins).  Stdin is ``/dev/null``.
* **A timeout that holds.** The child starts in its own session (process group).  At the deadline
  the *whole group* is sent ``SIGKILL``, so helpers the tool forked die too, and the child is
  reaped.  :class:`~accel.errors.ToolTimeoutError` follows.  A descendant that keeps the output
  pipes open after the tool itself has exited also counts as a hang.
* **An output cap.** Output is read incrementally; once stdout and stderr together pass
  ``max_output_bytes`` the group is killed and :class:`~accel.errors.ToolOutputTooLargeError` is
  raised, so a runaway tool cannot eat memory.
* **Decoding that never fails.** Output is decoded as UTF-8 with ``errors="replace"``: GBK text
  and garbage bytes become U+FFFD instead of exceptions.
* **Typed errors**, all :class:`~accel.errors.ToolError` subclasses carrying ``tool`` (the basename)
  and ``argv``: :class:`~accel.errors.ToolNotFoundError` (says where it looked),
  :class:`~accel.errors.ToolNotExecutableError`, :class:`~accel.errors.ToolTimeoutError`,
  :class:`~accel.errors.ToolOutputTooLargeError`, :class:`~accel.errors.ToolExitError` (non-zero
  exit, with ``returncode`` and the stderr tail; pass ``check=False`` to get the
  :class:`ToolResult` instead) and :class:`~accel.errors.ReplayMissingError`.  Bad arguments
  (a string argv, a relative search directory, a zero timeout) raise
  :class:`~accel.errors.ConfigError`.

Testing without hardware: record real runs once with :class:`RecordingRunner`, commit the JSON
files, and hand the plugin a :class:`ReplayRunner` over that directory.  A recording is one
JSON object per file::

    {"argv": ["npu-smi", "info", "-m"], "returncode": 0, "stderr": "",
     "stdout_file": "npu-smi-info-m_910b_8npu_with-mcu.txt"}

Keys: ``argv`` (required, a non-empty list of strings), ``stdout`` or ``stdout_file``,
``stderr`` or ``stderr_file`` (files read as bytes and decoded like real output), ``returncode``
(default 0), ``delay_s`` (the replayer sleeps that long; more than the caller's ``timeout_s``
simulates a hung tool), and the informational ``duration_s`` and ``comment``.  Any other key
is an error, so typos do not pass silently.

A recording reads nothing outside its own directory (a bug-report bundle is data from
someone else): ``stdout_file`` and ``stderr_file`` are relative paths without ``..``
(``sample.txt``, ``samples/sample.txt``) whose resolved path, symlinks followed, lies inside
the recording's directory, and name a regular file of at most
:data:`MAX_REPLAY_FILE_BYTES`; a recording file that is a symlink must resolve inside it too.
Anything else (an absolute path, ``../x``, a symlink out) is a
:class:`~accel.errors.ConfigError` naming the recording and the key, raised before the file
is opened, and no message quotes a file's content.  Copy shared samples next to the
recordings (:class:`accel.toolkit.ReplayScenario` does).
Recordings are matched on the whole argv, with ``argv[0]`` compared by basename:
``/usr/local/sbin/npu-smi info`` matches a recording of ``npu-smi info``.

Every runner counts its invocations (``runner.call_count``, and the recent argv in
``runner.calls``), so a plugin can report "tool invocations per snapshot".  All runners are
thread-safe.  POSIX only.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import math
import os
import re
import selectors
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, Protocol, TypeAlias, runtime_checkable

from accel.errors import (
    ConfigError,
    ReplayMissingError,
    ToolError,
    ToolExitError,
    ToolNotExecutableError,
    ToolNotFoundError,
    ToolOutputTooLargeError,
    ToolTimeoutError,
)

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "MAX_REPLAY_FILE_BYTES",
    "TOOL_RUN_EVENT",
    "Recording",
    "RecordingRunner",
    "ReplayRunner",
    "Runner",
    "SubprocessRunner",
    "ToolResult",
    "kill_running_tools",
    "run",
    "which",
]

TOOL_RUN_EVENT: str = "accel.tools.run"
"""The audit event (``sys.audit``) every runner raises per ``run`` call, with the argv tuple."""

DEFAULT_TIMEOUT_S: float = 10.0
"""Default wall-clock limit for one tool run, in seconds."""

DEFAULT_MAX_OUTPUT_BYTES: int = 16 * 1024 * 1024
"""Default cap on stdout and stderr together, in bytes (16 MiB)."""

StrPath: TypeAlias = "str | os.PathLike[str]"

_READ_CHUNK = 64 * 1024
_KILL_GRACE_S = 2.0  # how long to wait for a SIGKILLed child before leaving it to a reaper thread
_STDERR_TAIL_CHARS = 8192  # kept on ToolExitError.stderr
_MESSAGE_TAIL_CHARS = 500  # shown in the error message
_DEFAULT_HISTORY = 10_000


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Argument checking and resolution (shared by every runner)
# --------------------------------------------------------------------------------------------


def _tool_name(argv: Sequence[str]) -> str:
    return os.path.basename(argv[0]) if argv else "<empty>"


def _display(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def _check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, str | bytes):
        raise ConfigError(
            f"argv must be a sequence of arguments, not a single string ({argv!r}); accel.tools never uses a shell"
        )
    args = tuple(argv)
    if not args:
        raise ConfigError("argv is empty: give at least the tool name")
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise ConfigError(f"argv[{i}] is {type(arg).__name__} {arg!r}, not str (argv: {args!r})")
        if "\0" in arg:
            raise ConfigError(f"argv[{i}] contains a NUL byte (argv: {args!r})")
    if not args[0]:
        raise ConfigError("argv[0] is empty: give the tool name")
    if "/" in args[0] and not os.path.isabs(args[0]):
        raise ConfigError(f"argv[0] must be a bare tool name or an absolute path, got {args[0]!r} (argv: {args!r})")
    return args


def _check_limits(timeout_s: float, max_output_bytes: int) -> None:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise ConfigError(f"timeout_s must be a number of seconds, got {timeout_s!r}")
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ConfigError(f"timeout_s must be positive and finite, got {timeout_s!r}")
    if isinstance(max_output_bytes, bool) or not isinstance(max_output_bytes, int) or max_output_bytes <= 0:
        raise ConfigError(f"max_output_bytes must be a positive int, got {max_output_bytes!r}")


def _check_search_path(search_path: Sequence[str]) -> tuple[str, ...]:
    if isinstance(search_path, str | bytes):
        raise ConfigError(f"search_path must be a sequence of directories, not a single string ({search_path!r})")
    dirs = tuple(os.fspath(d) for d in search_path)
    for d in dirs:
        if not os.path.isabs(d):
            raise ConfigError(f"search_path entries must be absolute directories, got {d!r}")
    return dirs


def _path_dirs(path_value: str | None) -> tuple[str, ...]:
    value = os.defpath if path_value is None else path_value
    # Empty and relative entries would mean "the current directory": never run tools from there.
    return tuple(d for d in value.split(os.pathsep) if d and os.path.isabs(d))


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _resolve(args: tuple[str, ...], search_path: tuple[str, ...], path_value: str | None) -> str:
    """Return the executable for ``args[0]`` or raise ToolNotFoundError / ToolNotExecutableError."""
    name = args[0]
    tool = _tool_name(args)
    if os.path.isabs(name):
        if not os.path.lexists(name):
            raise ToolNotFoundError(f"{tool}: no such file {name!r}", tool=tool, argv=args)
        if not _is_executable_file(name):
            what = "is not a regular file" if not os.path.isfile(name) else "is not executable"
            raise ToolNotExecutableError(
                f"{tool}: {name!r} {what} (check its mode and the mount's noexec flag)", tool=tool, argv=args
            )
        return name
    dirs = search_path + tuple(d for d in _path_dirs(path_value) if d not in search_path)
    unusable: list[str] = []
    for d in dirs:
        candidate = os.path.join(d, name)
        if _is_executable_file(candidate):
            return candidate
        if os.path.lexists(candidate):
            unusable.append(candidate)
    if unusable:
        raise ToolNotExecutableError(
            f"{tool}: found {', '.join(map(repr, unusable))} but none is an executable file",
            tool=tool,
            argv=args,
        )
    raise ToolNotFoundError(
        f"{tool}: not found in search_path {list(search_path)!r} or PATH {list(_path_dirs(path_value))!r}",
        tool=tool,
        argv=args,
    )


def which(name: str, search_path: Sequence[str] = ()) -> str | None:
    """Return the path ``run([name, ...])`` would execute, or ``None`` if there is no usable tool.

    The same rules as :func:`run`: an absolute ``name`` is checked as is, a bare one is looked
    up in ``search_path`` first, then in this process's ``PATH``.  Cheap (a few ``stat`` calls),
    runs nothing, and returns ``None`` for a missing or non-executable tool, so it suits
    ``probe()``.  It raises :class:`~accel.errors.ConfigError` only for bad arguments (a
    relative search directory, ``name`` with a ``/`` that is not absolute).
    """
    args = _check_argv([name])
    dirs = _check_search_path(search_path)
    try:
        return _resolve(args, dirs, os.environ.get("PATH"))
    except ToolError:
        return None


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    child: dict[str, str] = {"PATH": os.environ.get("PATH", os.defpath)}
    home = os.environ.get("HOME")
    if home is not None:
        child["HOME"] = home
    child["LANG"] = "C"
    child["LC_ALL"] = "C"
    if env is not None:
        for key, value in env.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigError(f"env entries must be str to str, got {key!r}: {value!r}")
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ConfigError(f"invalid environment variable {key!r}={value!r}")
            child[key] = value
    return child


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


# --------------------------------------------------------------------------------------------
# The real thing
# --------------------------------------------------------------------------------------------


class _Outcome(Enum):
    DONE = "done"
    TIMEOUT = "timeout"
    TOO_LARGE = "too-large"


# Every tool process group still running, so that an interrupted or exiting process can kill
# them: a read may run in a worker thread (discovery's deadlines), where the main thread's
# KeyboardInterrupt never arrives and the ``finally`` below would not run before exit.
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()


def kill_running_tools() -> int:
    """Kill the process group of every vendor tool this process is still running; returns how
    many.  The command line calls it on Ctrl-C and it runs at interpreter exit, so a hung tool
    never outlives accel.  Safe to call from a signal handler and more than once."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _kill_group(proc)
    return len(running)


atexit.register(kill_running_tools)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The child leads its own session, so its pid is the process group id.  The group outlives
    # the leader while any member is alive, so this also reaches orphaned grandchildren.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has exited, without reaping it (WNOWAIT)."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait for a SIGKILLed child; one stuck in the kernel (D state) is left to a daemon thread."""
    try:
        proc.wait(timeout=_KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        threading.Thread(target=proc.wait, name=f"accel-tools-reap-{proc.pid}", daemon=True).start()


def _pump(proc: subprocess.Popen[bytes], deadline: float, max_output_bytes: int) -> tuple[_Outcome, bytes, bytes]:
    """Read both pipes until EOF and the child's exit, the deadline, or the output cap."""
    assert proc.stdout is not None and proc.stderr is not None
    bufs: dict[int, bytearray] = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    total = 0
    with selectors.DefaultSelector() as sel:
        for pipe in (proc.stdout, proc.stderr):
            sel.register(pipe, selectors.EVENT_READ)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _Outcome.TIMEOUT, b"", b""
            for key, _ in sel.select(remaining):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                total += len(chunk)
                if total > max_output_bytes:
                    return _Outcome.TOO_LARGE, b"", b""
                bufs[key.fd].extend(chunk)
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        return _Outcome.TIMEOUT, b"", b""
    return _Outcome.DONE, bytes(bufs[proc.stdout.fileno()]), bytes(bufs[proc.stderr.fileno()])


def _spawn(args: tuple[str, ...], executable: str, env: dict[str, str], cwd: StrPath | None) -> subprocess.Popen[bytes]:
    tool = _tool_name(args)
    try:
        return subprocess.Popen(
            list(args),
            executable=executable,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            shell=False,
            close_fds=True,
            start_new_session=True,
        )
    except PermissionError as exc:
        raise ToolNotExecutableError(
            f"{tool}: permission denied executing {executable!r} ({exc.strerror})", tool=tool, argv=args
        ) from exc
    except FileNotFoundError as exc:
        raise ToolNotFoundError(
            f"{tool}: {executable!r} could not be executed: {exc.strerror} "
            "(removed meanwhile, or a script whose #! interpreter is missing)",
            tool=tool,
            argv=args,
        ) from exc
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:
            raise ToolNotExecutableError(
                f"{tool}: {executable!r} is not a valid executable (exec format error; a script needs a #! line)",
                tool=tool,
                argv=args,
            ) from exc
        raise ToolError(f"{tool}: could not start {executable!r}: {exc}", tool=tool, argv=args) from exc
    except ValueError as exc:
        raise ConfigError(f"{tool}: invalid arguments for {_display(args)}: {exc}") from exc


def run(
    argv: Sequence[str],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    search_path: Sequence[str] = (),
    cwd: StrPath | None = None,
    check: bool = True,
) -> ToolResult:
    """Run a vendor tool once, without a shell, and return its :class:`ToolResult`.

    :param argv: the command, e.g. ``["npu-smi", "info", "-t", "board", "-i", "0"]``; every
        element must be a ``str`` (format numbers yourself).
    :param timeout_s: wall-clock limit; at the deadline the tool's whole process group is killed
        and :class:`~accel.errors.ToolTimeoutError` is raised.
    :param max_output_bytes: cap on stdout plus stderr; past it the group is killed and
        :class:`~accel.errors.ToolOutputTooLargeError` is raised.
    :param env: extra environment variables for the child, on top of ``PATH``, ``HOME``,
        ``LANG=C`` and ``LC_ALL=C`` (and overriding them).  A ``PATH`` given here is also the
        ``PATH`` that ``argv[0]`` is looked up in.
    :param search_path: absolute directories searched for ``argv[0]`` before ``PATH``.
    :param cwd: working directory for the child (tools like ``cnmon info -j`` write files there);
        default: this process's.
    :param check: if true (the default) a non-zero exit raises
        :class:`~accel.errors.ToolExitError`; if false the result is returned as is.
    :raises ToolNotFoundError: no such tool (the message lists where it looked).
    :raises ToolNotExecutableError: found but not executable, or permission denied.
    :raises ToolTimeoutError: it ran past ``timeout_s``.
    :raises ToolOutputTooLargeError: it wrote more than ``max_output_bytes``.
    :raises ToolExitError: it exited non-zero and ``check`` is true.
    :raises ConfigError: bad arguments (a string ``argv``, a relative search directory, a
        non-positive timeout, a missing ``cwd``).

    This is the function :class:`SubprocessRunner` calls; plugins should use a runner they were
    given rather than this function, so their tests can replay recorded runs.
    """
    args = _check_argv(argv)
    _check_limits(timeout_s, max_output_bytes)
    dirs = _check_search_path(search_path)
    child_env = _child_env(env)
    if cwd is not None and not os.path.isdir(cwd):
        raise ConfigError(f"cwd {os.fspath(cwd)!r} is not a directory (running {_display(args)})")
    executable = _resolve(args, dirs, child_env["PATH"])

    start = time.monotonic()
    deadline = start + timeout_s
    proc = _spawn(args, executable, child_env, cwd)
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    outcome = _Outcome.TIMEOUT
    stdout = stderr = b""
    leader_exited = False
    try:
        outcome, stdout, stderr = _pump(proc, deadline, max_output_bytes)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
        # Reached with outcome DONE only when the child has exited and been reaped.  Anything
        # else (timeout, cap, an exception such as KeyboardInterrupt) kills the group first,
        # before the leader is reaped, so its pid (the group id) cannot have been reused.
        if outcome is not _Outcome.DONE:
            leader_exited = _has_exited(proc)
            _kill_group(proc)
            _reap(proc)
        pipes: tuple[IO[bytes] | None, ...] = (proc.stdout, proc.stderr)
        for pipe in pipes:
            if pipe is not None:
                pipe.close()
    duration = time.monotonic() - start

    if outcome is _Outcome.TIMEOUT:
        detail = " (the tool exited but a process it started kept its output open)" if leader_exited else ""
        raise _timeout_error(args, timeout_s, detail)
    if outcome is _Outcome.TOO_LARGE:
        raise _too_large_error(args, max_output_bytes)
    assert proc.returncode is not None
    result = ToolResult(
        argv=args,
        stdout=_decode(stdout),
        stderr=_decode(stderr),
        returncode=proc.returncode,
        duration_s=duration,
    )
    return result.check() if check else result


# --------------------------------------------------------------------------------------------
# Runners
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Recording:
    """One recorded tool run, as a :class:`ReplayRunner` answers it.

    ``source`` names where it came from (a file path, or ``<memory>``), for error messages.
    """

    argv: tuple[str, ...]
    stdout: str = ""
    stderr: str = ""
    returncode: int = 0
    delay_s: float = 0.0
    source: str = field(default="<memory>", compare=False)

    @property
    def key(self) -> tuple[str, ...]:
        """The matching key: ``argv`` with ``argv[0]`` reduced to its basename."""
        return _match_key(self.argv)


def _match_key(argv: Sequence[str]) -> tuple[str, ...]:
    return (os.path.basename(argv[0]), *argv[1:])


_RECORDING_KEYS = frozenset(
    {
        "argv",
        "stdout",
        "stdout_file",
        "stderr",
        "stderr_file",
        "returncode",
        "delay_s",
        "duration_s",
        "comment",
    }
)


#: The largest file a recording may name (``stdout_file``, ``stderr_file``) and the largest
#: recording itself: more than any tool output the runners accept by default.
MAX_REPLAY_FILE_BYTES: int = 4 * DEFAULT_MAX_OUTPUT_BYTES


def _shown_path(rel: str) -> str:
    return repr(rel) if len(rel) <= 200 else f"{rel[:200]!r}... ({len(rel)} characters)"


def _confined(base: Path, rel: object, key: str, source: str) -> Path:
    """The file ``rel`` names, resolved, if it lies inside ``base``; a ConfigError otherwise.

    Checked before anything is opened: ``rel`` is a relative path without ``..`` whose
    resolution (symlinks followed) stays inside ``base`` (resolved too).  Messages name the
    recording and the key, and quote the path as written, never the file's content.
    """
    if not isinstance(rel, str) or not rel:
        raise ConfigError(f"{source}: {key} must be a non-empty path string, got {rel!r}")
    if "\x00" in rel:
        raise ConfigError(f"{source}: {key} must not contain a NUL character")
    shown = _shown_path(rel)
    if os.path.isabs(rel):
        raise ConfigError(
            f"{source}: {key} {shown} is an absolute path; a recording may only name files inside its "
            "own directory, by a relative path"
        )
    if ".." in Path(rel).parts:
        raise ConfigError(
            f"{source}: {key} {shown} contains '..'; a recording may only name files inside its own directory"
        )
    try:
        root = base.resolve()
        path = (base / rel).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ConfigError(f"{source}: cannot resolve {key} {shown}: {exc}") from exc
    if not path.is_relative_to(root):
        raise ConfigError(
            f"{source}: {key} {shown} resolves outside the recording's directory {str(root)!r} (through a "
            "symlink); a recording may only name files inside it"
        )
    return path


def _read_limited(path: Path, what: str) -> bytes:
    """The bytes of the regular file ``path``, at most :data:`MAX_REPLAY_FILE_BYTES` (an OSError
    otherwise: a FIFO or a device would block or never end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{what} is not a regular file")
        if info.st_size > MAX_REPLAY_FILE_BYTES:
            raise OSError(errno.EFBIG, f"{what} is larger than {MAX_REPLAY_FILE_BYTES} bytes")
        data = f.read(MAX_REPLAY_FILE_BYTES + 1)
    if len(data) > MAX_REPLAY_FILE_BYTES:
        raise OSError(errno.EFBIG, f"{what} is larger than {MAX_REPLAY_FILE_BYTES} bytes")
    return data


def _read_text_file(base: Path, rel: object, key: str, source: str) -> str:
    path = _confined(base, rel, key, source)
    try:
        return _decode(_read_limited(path, "it"))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read {key} {_shown_path(str(rel))}: {exc.strerror or exc}") from exc


def _recording_from_obj(obj: object, source: str, base: Path) -> Recording:
    """Validate one recording in the JSON format; every problem is a ConfigError naming ``source``."""
    if not isinstance(obj, dict):
        raise ConfigError(f"{source}: a recording must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _RECORDING_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {unknown}; allowed: {sorted(_RECORDING_KEYS)}")
    argv = obj.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
        raise ConfigError(f"{source}: 'argv' must be a non-empty list of strings, got {argv!r}")
    texts: dict[str, str] = {}
    for stream in ("stdout", "stderr"):
        file_key = f"{stream}_file"
        if stream in obj and file_key in obj:
            raise ConfigError(f"{source}: give {stream!r} or {file_key!r}, not both")
        if file_key in obj:
            texts[stream] = _read_text_file(base, obj[file_key], file_key, source)
        else:
            value = obj.get(stream, "")
            if not isinstance(value, str):
                raise ConfigError(f"{source}: {stream!r} must be a string, got {type(value).__name__}")
            texts[stream] = value
    returncode = obj.get("returncode", 0)
    if isinstance(returncode, bool) or not isinstance(returncode, int):
        raise ConfigError(f"{source}: 'returncode' must be an integer, got {returncode!r}")
    delay = obj.get("delay_s", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay) or delay < 0:
        raise ConfigError(f"{source}: 'delay_s' must be a non-negative number of seconds, got {delay!r}")
    for key, kind in (("duration_s", (int, float)), ("comment", (str,))):
        if key in obj and (isinstance(obj[key], bool) or not isinstance(obj[key], kind)):
            raise ConfigError(f"{source}: {key!r} has the wrong type: {obj[key]!r}")
    return Recording(
        argv=tuple(argv),
        stdout=texts["stdout"],
        stderr=texts["stderr"],
        returncode=returncode,
        delay_s=float(delay),
        source=source,
    )


def _load_directory(directory: Path) -> list[Recording]:
    if not directory.is_dir():
        raise ConfigError(f"replay directory {str(directory)!r} does not exist or is not a directory")
    recordings = []
    for path in sorted(directory.glob("*.json")):
        source = str(path)
        # A recording that is a symlink to a file elsewhere is refused like a stdout_file would be.
        _confined(directory, path.name, "the recording file", source)
        try:
            obj = json.loads(_read_limited(path, "the recording").decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"{source}: not a readable JSON recording: {exc}") from exc
        recordings.append(_recording_from_obj(obj, source, directory))
    return recordings


class ReplayRunner(_CallLog):
    """A runner that answers from recorded runs instead of running anything.

    ``ReplayRunner(directory)`` loads every ``*.json`` file directly inside ``directory`` (see
    the module docstring for the format) when it is built, so a malformed recording fails
    at once with a :class:`~accel.errors.ConfigError` naming the file.  Files that
    ``stdout_file`` points at must lie inside ``directory`` (see the module docstring); keep
    those ending in ``.json`` in a sub-directory of it.

    ``run`` behaves like the real runner: it sleeps ``delay_s`` (raising
    :class:`~accel.errors.ToolTimeoutError` after ``timeout_s`` if ``delay_s`` is longer),
    enforces ``max_output_bytes``, and raises :class:`~accel.errors.ToolExitError` for a
    recorded non-zero exit unless ``check=False``.  ``env``, ``cwd`` and ``search_path`` do not
    take part in matching.  An argv with no recording raises
    :class:`~accel.errors.ReplayMissingError`.  ``which(name)`` returns a path whose basename is
    ``name`` if some recording runs that tool, else ``None``: a scenario without recordings for
    a tool is a host without that tool.

    :param directory: the scenario directory.
    :param history: how many recent argv ``calls`` keeps.
    """

    def __init__(self, directory: StrPath, *, history: int = _DEFAULT_HISTORY) -> None:
        path = Path(directory)
        self._init(_load_directory(path), str(path), history)

    def _init(self, recordings: Iterable[Recording], where: str, history: int) -> None:
        super().__init__(history)
        self._where = where
        self._table: dict[tuple[str, ...], Recording] = {}
        self._tools: dict[str, str] = {}
        for rec in recordings:
            other = self._table.get(rec.key)
            if other is not None:
                raise ConfigError(
                    f"{rec.source}: records {_display(rec.argv)!r} again (also in {other.source}); "
                    "recordings must be unique per argv"
                )
            self._table[rec.key] = rec
            tool = rec.key[0]
            if tool not in self._tools or os.path.isabs(rec.argv[0]):
                self._tools[tool] = rec.argv[0] if os.path.isabs(rec.argv[0]) else os.path.join(where, tool)

    @classmethod
    def from_recordings(
        cls, recordings: Iterable[Recording], *, name: str = "<memory>", history: int = _DEFAULT_HISTORY
    ) -> ReplayRunner:
        """Build a replayer from :class:`Recording` objects (``name`` is used in messages)."""
        self = cls.__new__(cls)
        self._init(list(recordings), name, history)
        return self

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[str | tuple[str, ...], str | Mapping[str, object]],
        *,
        directory: StrPath | None = None,
        history: int = _DEFAULT_HISTORY,
    ) -> ReplayRunner:
        """Build a replayer in memory, for tests.

        Keys are argv, as a tuple or as a string split with :func:`shlex.split`.  Values are the
        stdout text, or a mapping with the keys of the JSON format other than ``argv``::

            runner = ReplayRunner.from_mapping({
                "npu-smi info": NPU_SMI_INFO,
                ("npu-smi", "info", "-t", "board", "-i", "9"): {"returncode": 1, "stderr": "bad id"},
                "hy-smi --showmeminfo vram": {"delay_s": 60},   # a hung tool
            })

        ``stdout_file`` / ``stderr_file`` paths are relative to ``directory`` (default: the
        current directory) and confined to it, as in a recording file.
        """
        base = Path(directory) if directory is not None else Path()
        recordings = []
        for key, value in mapping.items():
            argv = shlex.split(key) if isinstance(key, str) else list(key)
            source = f"<mapping entry {key!r}>"
            if isinstance(value, str):
                obj: dict[str, object] = {"stdout": value}
            elif isinstance(value, Mapping):
                obj = dict(value)
                if "argv" in obj:
                    raise ConfigError(f"{source}: give argv as the mapping key, not as 'argv'")
            else:
                raise ConfigError(f"{source}: the value must be stdout text or a mapping, got {value!r}")
            obj["argv"] = argv
            recordings.append(_recording_from_obj(obj, source, base))
        name = str(base) if directory is not None else "<memory>"
        return cls.from_recordings(recordings, name=name, history=history)

    @property
    def recordings(self) -> list[Recording]:
        """Every loaded recording."""
        return list(self._table.values())

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
        """Answer from the recording for ``argv``; see the class docstring."""
        self._note(argv)
        args = _check_argv(argv)
        _check_limits(timeout_s, max_output_bytes)
        _check_search_path(search_path)
        _child_env(env)
        rec = self._table.get(_match_key(args))
        if rec is None:
            raise self._missing(args)
        start = time.monotonic()
        if rec.delay_s > timeout_s:
            time.sleep(timeout_s)
            raise _timeout_error(args, timeout_s, f" (replayed from {rec.source})")
        if rec.delay_s > 0:
            time.sleep(rec.delay_s)
        size = sum(len(text.encode("utf-8", "surrogatepass")) for text in (rec.stdout, rec.stderr))
        if size > max_output_bytes:
            raise _too_large_error(args, max_output_bytes)
        result = ToolResult(
            argv=args,
            stdout=rec.stdout,
            stderr=rec.stderr,
            returncode=rec.returncode,
            duration_s=time.monotonic() - start,
        )
        return result.check() if check else result

    def _missing(self, args: tuple[str, ...]) -> ReplayMissingError:
        tool = _tool_name(args)
        same_tool = sorted(_display(r.key) for r in self._table.values() if r.key[0] == tool)
        if same_tool:
            shown = "; ".join(same_tool[:8]) + ("; ..." if len(same_tool) > 8 else "")
            hint = f"recorded for {tool}: {shown}"
        else:
            hint = f"no recordings for {tool} at all"
        return ReplayMissingError(
            f"no recording of {_display(args)!r} in {self._where} ({hint}); record it with "
            "RecordingRunner or add a JSON file with its argv",
            tool=tool,
            argv=args,
        )

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        """A path ending in ``name`` if a recording runs that tool, else ``None``."""
        args = _check_argv([name])
        _check_search_path(search_path)
        return self._tools.get(os.path.basename(args[0]))

    def __repr__(self) -> str:
        return f"ReplayRunner({self._where!r}, recordings={len(self._table)}, call_count={self.call_count})"


def _slug(argv: Sequence[str]) -> str:
    words = _match_key(argv)
    text = re.sub(r"[^A-Za-z0-9.-]+", "_", "_".join(words)).strip("._-")[:80] or "run"
    digest = hashlib.sha256("\0".join(words).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{text}-{digest}.json"


class RecordingRunner(_CallLog):
    """A runner that passes every call to ``inner`` and records each completed run as JSON.

    Wrap the real runner on a machine with the hardware, exercise the plugin, and commit the
    directory as a replay scenario::

        runner = RecordingRunner(SubprocessRunner(), "tests/scenarios/atlas800t-a2")
        backend = AscendPlugin().open(config, runner=runner)
        backend.inventory()

    One file per distinct argv, named from the command (``npu-smi_info_-m-<hash>.json``); a
    repeated argv overwrites its file, so the latest run wins.  Runs that exit non-zero are
    recorded too (then ``check`` is applied as usual).  Runs that did not complete (tool not
    found, timeout, output too large) are not recorded; their error propagates.  Writes are
    atomic.  ``which`` is passed through to ``inner``.

    Without ``directory`` nothing is written: every completed run is kept, in order, in
    :attr:`recordings` (what ``accel bugreport`` bundles).

    :param inner: the runner that really runs the tools, usually :class:`SubprocessRunner`.
    :param directory: where recordings go; created if missing.  ``None``: in memory only.
    :param history: how many recent argv ``calls`` keeps.
    """

    def __init__(self, inner: Runner, directory: StrPath | None = None, *, history: int = _DEFAULT_HISTORY) -> None:
        super().__init__(history)
        self._inner = inner
        self._dir = Path(directory) if directory is not None else None
        self._write_lock = threading.Lock()
        #: Every completed run, in order, when recording in memory (no ``directory``).
        self.recordings: list[Recording] = []
        if self._dir is not None:
            try:
                self._dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create recording directory {str(self._dir)!r}: {exc}") from exc

    @property
    def directory(self) -> Path | None:
        """The directory recordings are written to (``None``: in memory)."""
        return self._dir

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
        """Run through ``inner`` and record the result; see :func:`accel.tools.run`."""
        self._note(argv)
        result = self._inner.run(
            argv,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            env=env,
            search_path=search_path,
            cwd=cwd,
            check=False,
        )
        self._write(result)
        return result.check() if check else result

    def _write(self, result: ToolResult) -> None:
        if self._dir is None:
            rec = Recording(argv=tuple(result.argv), stdout=result.stdout, stderr=result.stderr,
                            returncode=result.returncode)
            with self._write_lock:
                self.recordings.append(rec)
            return
        record = {
            "argv": list(result.argv),
            "returncode": result.returncode,
            "duration_s": round(result.duration_s, 6),
            "stderr": result.stderr,
            "stdout": result.stdout,
        }
        try:
            text = json.dumps(record, indent=2, ensure_ascii=False)
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates in argv: fall back to \u escapes
            text = json.dumps(record, indent=2, ensure_ascii=True)
        target = self._dir / _slug(result.argv)
        with self._write_lock:
            try:
                fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=".recording-", suffix=".tmp")
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as fh:
                        fh.write(text + "\n")
                    os.replace(tmp, target)
                except BaseException:
                    os.unlink(tmp)
                    raise
            except OSError as exc:
                raise ConfigError(f"cannot write recording {str(target)!r}: {exc}") from exc

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        """Passed through to ``inner``."""
        return self._inner.which(name, search_path)

    def __repr__(self) -> str:
        where = str(self._dir) if self._dir is not None else None
        return f"RecordingRunner({self._inner!r}, {where!r}, call_count={self.call_count})"
