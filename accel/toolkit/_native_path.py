"""Two read paths in one plugin: the vendor's management library first, its CLI as fallback.

A vendor plugin with both a CLI backend and a native reader takes ``-o read=native|cli|auto``
(:data:`READ_OPTION`).  :func:`choose_read_path` decides, once per backend, which path it
reads:

* ``cli``: the vendor tool, as before;
* ``native``: the library; on a real host it must load (else :class:`LibraryNotFoundError`),
  over a replay (``-o scenario=NAME`` or ``--replay DIR``) the plugin's faithful fake of that
  replay is read instead;
* ``auto`` (the default): the library when it loads, the CLI otherwise.  A replay is a
  recording of the CLI, so ``auto`` over a replay reads the CLI; ask for the fake with
  ``read=native``.

The choice and why it was made go into the inventory's source (:func:`path_note`), the
library's name into its ``api`` (a native snapshot runs no tool: ``tool_invocations`` 0).

:func:`scenario_state_file` finds the native-only extras a scenario may carry next to its CLI
recordings (``native.toml``: what the library sees that the CLI cannot, such as ECC counters
or a pending fault event); :func:`read_native_state` reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from accel.errors import ConfigError, LibraryNotFoundError
from accel.plugin import BackendConfig
from accel.tools import ReplayRunner, Runner

__all__ = [
    "NATIVE_STATE_FILE",
    "READ_MODES",
    "READ_OPTION",
    "ReadChoice",
    "choose_read_path",
    "path_note",
    "read_mode",
    "read_native_state",
    "scenario_state_file",
]

#: The plugin option that picks the path (``-o read=native``).
READ_OPTION: Final = "read"
#: Its values; ``auto`` is the default.
READ_MODES: Final = ("native", "cli", "auto")
#: The file in a scenario directory that holds what only the library sees (TOML, not ``.json``:
#: a replay directory reads every ``*.json`` file as a recording).
NATIVE_STATE_FILE: Final = "native.toml"

ReadMode = Literal["native", "cli", "auto"]


def read_mode(config: BackendConfig) -> ReadMode:
    """The ``read`` option of ``config`` (``auto`` when not given); any other value is a
    :class:`~accel.errors.ConfigError` naming the valid ones."""
    value = config.option(READ_OPTION)
    if value is None or value == "":
        return "auto"
    text = str(value).strip().lower()
    if text == "native":
        return "native"
    if text == "cli":
        return "cli"
    if text == "auto":
        return "auto"
    raise ConfigError(f"option {READ_OPTION}={value!r} is not one of {', '.join(READ_MODES)}")


@dataclass(frozen=True)
class ReadChoice:
    """The path a backend reads: ``path`` (``native`` or ``cli``), the ``library`` object to read
    (a loaded library or a fake; ``None`` on the CLI path), ``fake`` (True when ``library`` is
    the fake of a replay) and ``why`` (a short phrase for the inventory's source detail)."""

    path: Literal["native", "cli"]
    library: object | None
    why: str
    fake: bool = False


def _is_replay(config: BackendConfig, runner: Runner) -> bool:
    return isinstance(runner, ReplayRunner) or config.runner is not None or bool(config.option("scenario"))


def choose_read_path(
    config: BackendConfig,
    runner: Runner,
    *,
    library: str,
    load: Callable[[], object],
    fake: Callable[[Runner], object],
) -> ReadChoice:
    """Pick the path for a backend opened with ``config`` over ``runner`` (see the module
    docstring).  ``load()`` loads the real library (:func:`~accel.toolkit.load_library`; raises
    :class:`~accel.errors.LibraryNotFoundError`); ``fake(runner)`` builds the faithful fake of
    the replay ``runner`` answers from.  ``library`` names the library in ``why``.  Nothing is
    loaded for ``read=cli``."""
    mode = read_mode(config)
    if mode == "cli":
        return ReadChoice("cli", None, "read=cli")
    if _is_replay(config, runner):
        if mode == "auto":
            return ReadChoice("cli", None, "read=auto: a replay of the CLI")
        return ReadChoice("native", fake(runner), f"read=native: a fake {library} of the replay", fake=True)
    if mode == "native":
        return ReadChoice("native", load(), f"read=native: {library}")
    try:
        lib = load()
    except LibraryNotFoundError as exc:
        return ReadChoice("cli", None, f"read=auto: {library} not loaded ({exc.vendor_code or exc.code})")
    return ReadChoice("native", lib, f"read=auto: {library} loaded")


def path_note(choice: ReadChoice) -> str:
    """The note a snapshot's source carries for ``choice`` (``path=native (read=auto: ...)``)."""
    return f"path={choice.path} ({choice.why})"


def scenario_state_file(runner: Runner) -> Path | None:
    """The :data:`NATIVE_STATE_FILE` of the replay directory ``runner`` answers from, if any."""
    if not isinstance(runner, ReplayRunner):
        return None
    dirs = {Path(rec.source).parent for rec in runner.recordings if rec.source.endswith(".json")}
    if not runner.recordings:  # a library-only scenario: the directory holds the state alone
        where = Path(runner.where)
        dirs = {where} if where.is_dir() else set()
    if len(dirs) != 1:
        return None
    path = dirs.pop() / NATIVE_STATE_FILE
    return path if path.is_file() else None


def read_native_state(runner: Runner) -> Mapping[str, Any]:
    """The native-only state of the replay ``runner`` answers from (empty without one).

    A malformed file is a :class:`~accel.errors.ConfigError` naming it.
    """
    path = scenario_state_file(runner)
    if path is None:
        return {}
    import tomllib  # only a replay with native state reads TOML

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable native state file: {exc}") from exc
