"""Argument checking and tool resolution, shared by every runner (and :func:`which`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

from accel.errors import ConfigError, ToolError, ToolNotExecutableError, ToolNotFoundError

from ._result import _tool_name


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

