"""The :class:`ReplayRunner`: answers from recordings instead of running anything."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from accel.errors import ConfigError, ReplayMissingError

from ._checks import _check_argv, _check_limits, _check_search_path, _child_env
from ._recordings import Recording, _load_directory, _match_key, _recording_from_obj
from ._result import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    StrPath,
    ToolResult,
    _display,
    _timeout_error,
    _too_large_error,
    _tool_name,
)
from ._runners import _DEFAULT_HISTORY, _CallLog


class ReplayRunner(_CallLog):
    """A runner that answers from recorded runs instead of running anything.

    ``ReplayRunner(directory)`` loads every ``*.json`` file directly inside ``directory`` (see
    the :mod:`accel.tools` docstring for the format) when it is built, so a malformed recording fails
    at once with a :class:`~accel.errors.ConfigError` naming the file.  Files that
    ``stdout_file`` points at must lie inside ``directory`` (see the :mod:`accel.tools` docstring); keep
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

    @property
    def where(self) -> str:
        """The scenario directory the recordings came from (or the ``name`` given in memory)."""
        return self._where

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

