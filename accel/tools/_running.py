"""The real thing: one tool run in its own process group, under a deadline and an output cap,
and the kill switch for every tool still running."""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import IO

from accel.errors import ConfigError, ToolError, ToolNotExecutableError, ToolNotFoundError

from ._checks import _check_argv, _check_limits, _check_search_path, _child_env, _resolve
from ._result import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    StrPath,
    ToolResult,
    _decode,
    _display,
    _timeout_error,
    _too_large_error,
    _tool_name,
)

_READ_CHUNK = 64 * 1024
_KILL_GRACE_S = 2.0  # how long to wait for a SIGKILLed child before leaving it to a reaper thread


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

