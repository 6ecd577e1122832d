"""Recordings: one recorded tool run (:class:`Recording`) and its JSON file format, read only
from inside the recording's own directory (see the package docstring)."""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from accel.errors import ConfigError

from ._result import DEFAULT_MAX_OUTPUT_BYTES, _decode


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

