"""The ``accel`` command.

Exit codes (stable, for scripts):

====  ==========================================================================
0     success
1     an accel error at run time (a backend failed, a device is lost, a tool hung), or the
      output could not be written (``accel ls >/dev/full``: one ``accel: error:`` line)
2     bad usage or configuration: an unknown command or option, a value out of range
      (``--timeout nan``, ``--count -1``), an unknown backend, a malformed profile, an
      unknown simulator profile (``--sim nosuch``, ``--sim ''``, ``ACCEL_SIM=nosuch``), a
      malformed or escaping replay recording
3     no accelerator found (no backend present; try ``--sim <profile>``)
4     ``accel health``: at least one device is not known to be healthy (unhealthy,
      degraded, lost, or ``unknown``: nothing was read that says it is healthy)
5     partial read: every command that reads devices (``ls``, ``show``, ``topo``, ``health``,
      ``ps``, ``watch``, ``dmon``, ``dra``, ``cdi``, ``ray``, ``slurm gres-conf`` and
      ``healthcheck``) printed what could be read, but something could not (a record that
      failed to parse, a failed command, a backend that failed, a device a ``watch``/``dmon``
      refresh has no sample for); one ``accel: warning:`` line per problem is on stderr (once,
      however many refreshes see it), and accel's own ``--json`` documents carry them
      (``HostInventory.problems``; ``{"processes"|"samples": [...], "problems": [...],
      "complete": bool}`` for ``ps`` and each ``watch``/``dmon`` refresh).  Kubernetes and CDI
      documents have no place for them: stderr and the status say it.  ``slurm prolog`` and
      ``task-prolog`` warn but keep their status, which slurmd acts on (see docs/slurm.md)
130   interrupted (SIGINT, Ctrl-C): at any moment once ``accel`` runs, including while it
      loads its modules and builds its parser; nothing is printed, a tool process it waits
      for is killed (see the SIGINT paragraph below)
141   stdout was closed by its reader (``accel ls | head -0``): nothing is printed, as for a
      tool killed by SIGPIPE (a shell shows the same 141)
====  ==========================================================================

``health`` exits 4 before 5: a device that is not known healthy matters more than a partial
read.  Every command takes ``--json`` and then prints the model (``HostInventory``,
``Device``...) instead of a table; ``health --json`` prints ``{"devices": {id: Health},
"problems": [Problem], "complete": bool}``.

Every numeric option is checked before anything runs (finite, in range; the message names the
unit): ``--timeout`` seconds > 0 and <= 86400, ``watch --interval`` seconds 0..86400,
``watch --count`` 0..10^9 (0: until interrupted), ``bugreport --max-bytes`` bytes > 0 and
<= 2^40, ``sched bill --at`` seconds >= 0.  Errors are one line on stderr, never a traceback
(``ACCEL_DEBUG=1`` shows the traceback of an internal error).

SIGINT: from the first line of ``import accel`` on (:mod:`accel._early`), the ``accel`` command
(its console script, ``python -m accel``) is guarded: until :func:`main` runs, a SIGINT exits
130 at once with nothing printed.  The first SIGINT interrupts the command, which then has
:data:`INTERRUPT_GRACE_S` to clean up (a second one does not interrupt the cleanup) before the
process exits 130 regardless.  A SIGINT earlier than that, in the interpreter's own start-up
(``site``, the environment's ``.pth`` files, the console script's own ``import re``), reaches
Python, not accel: the process dies of the signal with nothing printed (a shell shows 130) or
Python prints its own KeyboardInterrupt traceback.  A process started with SIGINT
ignored (``accel exporter &`` from a script: a shell without job control does that) keeps it
ignored, as Python itself does; stop such a process with SIGTERM.  This module is kept light to import
(no ``argparse``, no model) so that window ends as early as it can.
"""

# Keep this module cheap to import: it is what the console script imports before ``main`` can
# guard anything (see the last paragraph above).  argparse, json and the commands load in main.
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NO_DEVICES",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_UNHEALTHY",
    "EXIT_USAGE",
    "build_parser",
    "main",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_DEVICES = 3
EXIT_UNHEALTHY = 4
EXIT_PARTIAL = 5
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _WriteFailed(Exception):
    """Writing the command's output failed (disk full, closed pipe)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class _Guarded:
    """Stands in for ``sys.stdout`` / ``sys.stderr`` while a command runs.

    A failed write to stdout raises :class:`_WriteFailed` (one line, exit 1; a closed pipe:
    silent, exit 141).  A failed write to stderr is dropped: there is nowhere left to say it.
    """

    def __init__(self, inner: TextIO | None, *, fatal: bool) -> None:
        self._inner = inner
        self._fatal = fatal
        self.failed = False

    def _fail(self, exc: OSError) -> None:
        self.failed = True
        if self._fatal:
            raise _WriteFailed(exc) from exc

    def write(self, text: str) -> int:
        if self._inner is None:
            import errno

            self._fail(OSError(errno.EBADF, "the stream is closed"))
            return len(text)
        try:
            try:
                return self._inner.write(text)
            except UnicodeEncodeError:
                # A stdout that cannot carry the text (PYTHONIOENCODING=ascii, LC_ALL=C): write
                # what it cannot as JSON escapes.  Such characters only occur inside JSON strings,
                # where \uXXXX is valid, and a person reads the escape as well as the character.
                return self._inner.write(_escape_for(text, getattr(self._inner, "encoding", None)))
        except OSError as exc:
            self._fail(exc)
            return len(text)

    def isatty(self) -> bool:
        # A closed stream (`accel watch >&-`: sys.stdout is None) is no terminal; the first
        # write then reports it the way every command does.
        return self._inner is not None and self._inner.isatty()

    def flush(self) -> None:
        if self._inner is None:
            return
        try:
            self._inner.flush()
        except OSError as exc:
            self._fail(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _escape_for(text: str, encoding: str | None) -> str:
    """``text`` with every character ``encoding`` cannot encode written as a JSON escape
    (``\\u00e9``; a surrogate pair beyond the BMP): valid JSON, readable text."""
    out: list[str] = []
    for char in text:
        try:
            char.encode(encoding or "ascii")
            out.append(char)
        except (UnicodeEncodeError, LookupError):
            code = ord(char)
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
    return "".join(out)


def _silence(stream: TextIO | None) -> None:
    """Point this process's own stdout/stderr at /dev/null after a write to it failed, so the
    interpreter's last flush at exit does not fail again (an "Exception ignored" and status 120)."""
    if stream is None or not any(stream is own for own in (sys.__stdout__, sys.__stderr__)):
        return  # a stand-in (a test's capture): nothing is flushed at exit
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, stream.fileno())
        finally:
            os.close(fd)
    except (OSError, ValueError):
        pass


def _say(line: str) -> None:
    """One line on stderr: an error message never spans lines, whatever it quotes."""
    print(" ".join(line.splitlines()), file=sys.stderr)


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return EXIT_OK
    if isinstance(exc.code, int):
        return exc.code
    _say(f"accel: error: {exc.code}")
    return EXIT_ERROR


#: Seconds the command has, after a SIGINT, to unwind (kill the tool it waits for, close the
#: backends) before the process exits 130 regardless: some library code turns a
#: KeyboardInterrupt into an ordinary error (pydantic-core building a model, for one), and
#: code that catches that would carry on.
INTERRUPT_GRACE_S = 3.0

_interrupted = False
_redeliver = False


def _kill_tools() -> None:
    # A read may wait for a vendor tool in a worker thread (discovery's deadlines), which the
    # KeyboardInterrupt of the main thread never reaches: kill every tool group directly.
    tools = sys.modules.get("accel.tools")
    if tools is not None:
        tools.kill_running_tools()


def _exit_130(signum: int = 0, frame: object = None) -> None:
    _kill_tools()
    os._exit(EXIT_INTERRUPTED)


def _on_sigint(signum: int, frame: object) -> None:
    """While the command runs: the first SIGINT is a KeyboardInterrupt (``finally`` blocks run: a
    tool process being waited for is killed, a half-written bundle removed) and starts the
    grace timer; a second one does not interrupt that cleanup."""
    global _interrupted, _redeliver
    if _interrupted and not _redeliver:
        return
    if not _interrupted:
        import threading

        timer = threading.Timer(INTERRUPT_GRACE_S, _exit_130)
        timer.daemon = True
        timer.start()
    _interrupted, _redeliver = True, False
    _kill_tools()
    raise KeyboardInterrupt


def _unraisable(hook: Any) -> Any:
    """A ``sys.unraisablehook`` for the command: a KeyboardInterrupt raised inside a finaliser or
    a weakref callback (where a signal handler may run) cannot propagate; instead of Python's
    "Exception ignored in" traceback, the signal is delivered again, to land in ordinary code."""

    def unraisable(info: Any) -> None:
        global _redeliver
        if isinstance(info.exc_value, KeyboardInterrupt) and _interrupted:
            # Not from here (raising here would fail this hook): from a thread, a moment later.
            import _thread
            import threading

            _redeliver = True
            later = threading.Timer(0.01, _thread.interrupt_main, args=(signal.SIGINT,))
            later.daemon = True
            later.start()
            return
        hook(info)

    return unraisable


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: SIGINT was ignored when this process started (Python keeps an inherited SIG_IGN): a shell
#: without job control starts ``accel exporter &`` that way so that a Ctrl-C meant for the
#: shell's foreground job does not reach it.  accel then leaves SIGINT ignored, as Python does.
_SIGINT_INHERITED_IGNORED = signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def _set_sigint(handler: Any) -> None:
    if _SIGINT_INHERITED_IGNORED:
        return
    with contextlib.suppress(ValueError):  # not the main thread: signals are not ours to set
        signal.signal(signal.SIGINT, handler)


def _interrupts_exit() -> None:
    """After the command: a SIGINT exits 130 at once, silently (joining threads at exit included).

    The interpreter resets Python-level handlers to the default (death by the signal, status
    -2) before it tears its modules down, so the first exit handler to run (registered last)
    ignores SIGINT for those last milliseconds: the exit status is then the command's own.
    """
    _set_sigint(_exit_130)
    atexit.register(_ignore_sigint)


def _is_console_script() -> bool:
    """Whether this process is the ``accel`` command (its console script, ``python -m accel``):
    decided once by :mod:`accel._early`, which ``import accel`` runs first.

    The wrapper imports this module and then runs a little code of its own before it calls
    :func:`main`: a SIGINT in between would be a traceback outside main's guard.
    """
    from .. import _early

    return _early.COMMAND


if _is_console_script():
    # Nothing has started yet: an interrupt before main needs no cleanup.  Only for the console
    # script: importing accel.cli from other code leaves the process's signals alone.
    _set_sigint(_exit_130)


def build_parser(argv: list[str] | None = None) -> Any:
    """The ``accel`` :class:`argparse.ArgumentParser` (see :mod:`accel.cli._parser`)."""
    from ._parser import build_parser as build

    return build(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``accel`` console script; returns the exit code.

    Everything (loading the commands, building the parser, the command itself) runs inside
    the guard: a KeyboardInterrupt anywhere is exit 130 with nothing printed, a failed write of
    the output is one line.

    Without ``argv`` (the console script, ``python -m accel``) main is the process's command
    and owns SIGINT: the first one interrupts the command and gives it
    :data:`INTERRUPT_GRACE_S` to clean up, after which the process exits 130 whatever the
    command does; after the command a SIGINT exits 130 at once (and is ignored in the
    interpreter's last milliseconds), so a Ctrl-C while the process exits prints no traceback
    either.  With ``argv`` (tests, embedding) the process's signal handling is left as it was.
    """
    console = argv is None
    try:
        try:
            if console:
                sys.unraisablehook = _unraisable(sys.unraisablehook)
                _set_sigint(_on_sigint)
            code = _main(sys.argv[1:] if argv is None else list(argv))
        finally:
            if console:
                _interrupts_exit()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    return EXIT_INTERRUPTED if _interrupted else code


def _main(arglist: list[str]) -> int:
    saved_out, saved_err = sys.stdout, sys.stderr
    out = _Guarded(saved_out, fatal=True)
    err = _Guarded(saved_err, fatal=False)
    sys.stdout, sys.stderr = out, err
    try:
        try:
            code = _run(arglist)
            out.flush()
            return code
        except _WriteFailed as exc:
            return _write_failed(exc.error, saved_out)
    finally:
        sys.stdout, sys.stderr = saved_out, saved_err
        if err.failed:
            _silence(saved_err)


def _write_failed(error: OSError, stdout: TextIO | None) -> int:
    import errno

    _silence(stdout)
    if error.errno == errno.EPIPE:
        return EXIT_BROKEN_PIPE  # the reader went away (`| head`): nothing to say, and no one to say it to
    reason = error.strerror or str(error)
    _say(f"accel: error: cannot write the output to stdout: {reason}")
    return EXIT_ERROR


def _run(arglist: list[str]) -> int:
    from ..errors import AccelError, ConfigError, ProfileError, ValidationError
    from ._parser import UsageError, parse

    try:
        args = parse(arglist)
        from . import _commands

        code: int = _commands.dispatch(args)
        return code
    except UsageError as exc:
        _say(f"accel: error: {exc}")
        return EXIT_USAGE
    except (KeyboardInterrupt, _WriteFailed):
        raise
    except SystemExit as exc:  # --help, --version, an optional part's own parser
        return _exit_status(exc)
    except Exception as exc:
        if _interrupted:  # a KeyboardInterrupt some library turned into an error: still an interrupt
            return EXIT_INTERRUPTED
        if isinstance(exc, ConfigError | ProfileError | ValidationError):
            _say(f"accel: error: {exc}")
            return EXIT_USAGE
        if isinstance(exc, AccelError):
            _say(f"accel: error: {exc} [{exc.code}]")
            return EXIT_ERROR
        # A bug, not bad input: one line, the traceback on request.
        if os.environ.get("ACCEL_DEBUG"):
            raise
        _say(f"accel: internal error: {type(exc).__name__}: {exc} (ACCEL_DEBUG=1 shows the traceback)")
        return EXIT_ERROR


def dump(obj: Any) -> str:
    """``obj`` as indented JSON (what ``--json`` prints)."""
    import json

    return json.dumps(obj, indent=2, sort_keys=False, default=str)
