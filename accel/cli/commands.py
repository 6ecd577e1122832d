"""Sub-commands of ``accel`` from other packages: the ``accel.commands`` entry-point group.

Every command beyond the core ones (``ls``, ``show``, ``topo``, ``health``, ``ps``, ``watch``,
``dmon``, ``plugins``, ``schema``, ``bugreport``, ``sim``) is a :class:`Command` registered under
a name in the ``accel.commands`` entry-point group, accel's own (``sched``, ``conformance``,
``exporter``, ``dra``, ``cdi``, ``k8s``, ``slurm``, ``ray``) exactly like a third party's::

    # pyproject.toml of the package "accel-hello"
    [project.entry-points."accel.commands"]
    hello = "accel_hello.cli:COMMAND"

    # accel_hello/cli.py: keep this module light, it is imported to list the command
    import argparse
    from accel.cli.commands import Command, CommandContext

    def _arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
        parser.add_argument("--loud", action="store_true")
        context.add_selection_arguments(parser)        # --sim, --backend, --option, --json...

    def _run(args: argparse.Namespace) -> int:
        from accel.cli.commands import open_session    # heavy imports go here, in run
        with open_session(args) as session:
            print(len(session.inventory().devices), "devices")
        return 0

    COMMAND = Command(help="say hello to every device", add_arguments=_arguments, run=_run)

How accel uses the group:

* ``accel --help`` (or an unknown command) loads every command object for its one-line help,
  without building its arguments; ``accel NAME ...`` builds only ``NAME``'s parser; a core
  command (``accel ls``) reads no entry point at all.
* A command that cannot be loaded (its import raises, it is not a :class:`Command`, its
  ``add_arguments`` raises) is one ``accel: warning:`` line and is left out; running it is one
  ``accel: error:`` line (exit 1).  It never breaks another command.
* A name registered by several distributions: accel's own (``accel-sdk``) wins and each other
  is a warning; without one of accel's, none is used.  A core command's name cannot be taken.
* ``run`` raising :class:`ModuleNotFoundError` for a module outside ``accel`` while the command
  declares :attr:`Command.requires` is reported as what to install (exit 2), so a command whose
  optional dependencies are missing still prints its ``--help`` and says what it needs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..discovery import Session

__all__ = ["ENTRY_POINT_GROUP", "Command", "CommandContext", "open_session"]

#: The entry-point group of ``accel`` sub-commands (name -> a :class:`Command`).
ENTRY_POINT_GROUP = "accel.commands"


class CommandContext:
    """What ``accel`` gives a command while it builds the command's parser."""

    def __init__(self, selection_arguments: Callable[[argparse.ArgumentParser], None]) -> None:
        self._selection_arguments = selection_arguments

    def add_selection_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the backend selection options every device command takes (``--sim``, ``--backend``,
        ``--option``, ``--replay``, ``--sysfs``, ``--timeout``, ``--json``); :func:`open_session`
        reads them."""
        self._selection_arguments(parser)


@dataclass(frozen=True)
class Command:
    """One ``accel`` sub-command.

    ``add_arguments(parser, context)`` adds the command's options (and sub-commands) to its
    parser; it should use argparse only, so ``--help`` works whatever is installed.
    ``run(args)`` runs it and returns the exit status; import heavy or optional modules there.
    """

    #: One line for ``accel --help``.
    help: str
    add_arguments: Callable[[argparse.ArgumentParser, CommandContext], None]
    run: Callable[[argparse.Namespace], int]
    #: The ``accel NAME --help`` description (default: ``help``).
    description: str | None = None
    #: The pip requirement that installs what ``run`` needs beyond accel, for example
    #: ``"accel-sdk[scheduler]"``; named in ``--help`` and when a module is missing.
    requires: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.help, str) or not self.help.strip():
            raise TypeError("Command.help must be a non-empty string")
        if not callable(self.add_arguments) or not callable(self.run):
            raise TypeError("Command.add_arguments and Command.run must be callables")


def open_session(args: argparse.Namespace) -> Session:
    """Open a :class:`~accel.discovery.Session` from the options of
    :meth:`CommandContext.add_selection_arguments`, as ``accel ls`` does: a bad option or a
    named backend that cannot open raises the typed error ``accel`` reports."""
    from ._commands import _session

    return _session(args)
