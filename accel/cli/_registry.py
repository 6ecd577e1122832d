"""The ``accel.commands`` entry-point group, read for the parser (see :mod:`accel.cli.commands`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection
from typing import Any

from ..errors import ConfigError, PluginLoadError
from .commands import ENTRY_POINT_GROUP, Command, CommandContext

__all__ = ["add_commands", "command_word", "missing_module", "run"]

#: accel's own distribution: its registration of a name wins over another's.
OWN_DISTRIBUTION = "accel-sdk"
#: The namespace attribute that carries the chosen command to :func:`run`.
_CHOSEN = "accel_command"


def command_word(argv: list[str]) -> str | None:
    """The sub-command named on a command line (the first word that is not an option), or
    ``None`` when there is none or the top-level help comes first (``accel -h sched`` prints
    the list of commands).  The top-level options (``--help``, ``--version``) take no value."""
    for token in argv:
        if token in ("--", "-h", "--help"):
            return None
        if not token.startswith("-"):
            return token
    return None


def _warn(line: str) -> None:
    print(" ".join(f"accel: warning: {line}".splitlines()), file=sys.stderr)


def _dist(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    try:
        name = str(dist.metadata["Name"] or "") if dist is not None else ""
        version = str(dist.version or "") if dist is not None else ""
    except Exception:  # noqa: BLE001 - a broken METADATA names no distribution; the entry point still does
        return "an unknown distribution"
    return f"{name} {version}".strip() or "an unknown distribution"


def _is_own(ep: Any) -> bool:
    return _dist(ep).split(" ")[0].replace("_", "-").lower() == OWN_DISTRIBUTION


def _entry_points(core: Collection[str]) -> dict[str, Any]:
    """Name -> the entry point to use; every registration that is not used is one warning."""
    from importlib.metadata import entry_points

    found: dict[str, list[Any]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        same = found.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same):  # one distribution seen twice on sys.path
            same.append(ep)
    chosen: dict[str, Any] = {}
    for name, eps in sorted(found.items()):
        if name in core:
            for ep in eps:
                _warn(f"command {name!r} of {_dist(ep)} ({ep.value}) is ignored: {name!r} is a core accel command")
            continue
        if len(eps) > 1:
            own = [ep for ep in eps if _is_own(ep)]
            listed = "; ".join(f"{_dist(ep)} ({ep.value})" for ep in eps)
            if len(own) != 1:
                _warn(f"command {name!r} is registered by {len(eps)} distributions: {listed}; none is used: "
                      "uninstall all but one")
                continue
            for ep in eps:
                if ep is not own[0]:
                    _warn(f"command {name!r} is also registered by {_dist(ep)} ({ep.value}); accel's own is used")
            eps = own
        chosen[name] = eps[0]
    return chosen


def _load(name: str, ep: Any) -> Command:
    """The entry point's :class:`Command`; a failure is a :class:`PluginLoadError` naming it."""
    where = f"{_dist(ep)} ({ep.value})"
    try:
        obj = ep.load()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a third party's import may raise anything, SystemExit too
        raise PluginLoadError(f"command {name!r} of {where} cannot be loaded: {type(exc).__name__}: {exc}",
                              plugin=name) from exc
    if not isinstance(obj, Command):
        raise PluginLoadError(f"command {name!r} of {where} is a {type(obj).__name__}, not an "
                              "accel.cli.commands.Command", plugin=name)
    return obj


def _remove(sub: Any, name: str) -> None:
    """Take a half-built sub-parser out again (argparse has no public way to)."""
    sub.choices.pop(name, None)
    sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest != name]


def _epilog(command: Command) -> str | None:
    if command.requires is None:
        return None
    return f"Needs {command.requires} (pip install '{command.requires}')."


def add_commands(
    sub: Any,
    selection_arguments: Callable[[argparse.ArgumentParser], None],
    argv: list[str] | None,
    core: Collection[str],
) -> None:
    """Add the group's commands to ``sub`` (the top-level sub-parsers).

    ``argv`` is the command line about to be parsed (``None``: build every command fully, for
    the CLI reference and tests).  Only what that command line needs is loaded: nothing for a
    core command, one command's parser for ``accel NAME ...``, every command's help line for
    ``accel --help`` or an unknown name.
    """
    word = None if argv is None else command_word(argv)
    if word is not None and word in core:
        return
    entries = _entry_points(core)
    context = CommandContext(selection_arguments)
    for name, ep in entries.items():
        if word is not None and word in entries and name != word:
            sub.add_parser(name)  # a known name for argparse's messages; its code is not loaded
            continue
        try:
            command = _load(name, ep)
        except PluginLoadError as exc:
            if name == word:
                raise
            _warn(str(exc))
            continue
        parser = sub.add_parser(name, help=command.help, description=command.description or command.help,
                                epilog=_epilog(command))
        parser.set_defaults(**{_CHOSEN: (name, command)})
        if argv is not None and name != word:
            continue  # accel --help: the one-line help is all that is shown
        try:
            command.add_arguments(parser, context)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a third party's code: reported, never fatal to accel
            error = PluginLoadError(f"command {name!r} of {_dist(ep)} ({ep.value}) failed to build its "
                                    f"arguments: {type(exc).__name__}: {exc}", plugin=name)
            if name == word:
                raise error from exc
            _warn(str(error))
            _remove(sub, name)


def missing_module(exc: ImportError) -> str | None:
    """The module outside accel whose absence caused ``exc`` (directly, or as the cause of an
    ImportError that accel raised to explain it), or ``None``: then it is a bug, not a missing
    optional dependency."""
    seen: BaseException | None = exc
    while seen is not None:
        name = getattr(seen, "name", None) if isinstance(seen, ImportError) else None
        if isinstance(seen, ModuleNotFoundError) and name and name.split(".")[0] != "accel":
            return str(name)
        seen = seen.__cause__ or seen.__context__
    return None


def run(args: argparse.Namespace) -> int:
    """Run the group command the parser chose."""
    name, command = getattr(args, _CHOSEN)
    try:
        code = command.run(args)
    except ImportError as exc:
        missing = missing_module(exc)
        if command.requires is None or missing is None:
            raise  # not a missing optional dependency: a bug, reported as one
        raise ConfigError(f"accel {name} needs {missing!r}, which is not installed: "
                          f"pip install '{command.requires}'") from exc
    if not isinstance(code, int):
        raise TypeError(f"command {name!r} returned {code!r}, not an exit status")
    return code
