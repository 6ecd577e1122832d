"""The first thing ``import accel`` runs: SIGINT for the ``accel`` command, before anything loads.

A Ctrl-C while the ``accel`` console script (or ``python -m accel``) is still importing used to
reach Python's default handler, which printed a KeyboardInterrupt traceback from the import
machinery.  When this process is that command, SIGINT now exits 130 at once, silently, from
here on: the window left to Python is its own start-up (``site``, the ``.pth`` files) only.
:mod:`accel.cli` installs the command's own handler next, and ``main`` the one that lets a
command clean up.  Any other process that imports accel keeps its signals untouched.

Only ``itertools``, ``os``, ``signal`` and ``sys`` are used: built in or loaded before ``site`` runs, so this
module costs next to nothing.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys

__all__ = ["COMMAND", "EXIT_INTERRUPTED"]

EXIT_INTERRUPTED = 130


def _is_command() -> bool:
    """Whether this process is ``accel``: its console script (``__main__`` is a file named
    ``accel`` run as ``argv[0]``), or ``python -m accel`` / ``python -m accel.cli`` (while the
    package imports, Python has ``argv[0] == "-m"`` and the module in ``orig_argv``)."""
    argv = sys.argv
    if not argv:
        return False
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if script is not None and script == argv[0] and os.path.basename(script) == "accel":
        return True
    if argv[0] == "-m":
        orig = list(getattr(sys, "orig_argv", ()))
        return any(a == "-m" and b in ("accel", "accel.cli") for a, b in itertools.pairwise(orig))
    return False


def _exit_130(signum: int, frame: object) -> None:
    os._exit(EXIT_INTERRUPTED)  # nothing has started: no tool to kill, nothing to flush


#: This process is the ``accel`` command (see :func:`_is_command`).
COMMAND = _is_command()

# A process started with SIGINT ignored (`accel exporter &` from a script) keeps it ignored.
if COMMAND and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
    try:  # noqa: SIM105 - contextlib is an import this module does without
        signal.signal(signal.SIGINT, _exit_130)
    except ValueError:  # not the main thread: not ours to set
        pass
