"""Where the simulator keeps the partitions it made: in memory, or in a file shared by processes.

With the ``state=FILE`` option, ``accel partition create --sim a100-mig -o state=F`` and a later
``accel ls --sim a100-mig -o state=F`` see one simulated machine.  Every change is one
transaction: read ``FILE`` under an exclusive ``flock`` of ``FILE.lock``, change it, write a
temporary file, ``fsync`` it and ``rename`` it over ``FILE``.  A process killed at any instant
(SIGKILL included) leaves the old state or the new one, never a half-written file: the
simulated device has no partition that the state does not list.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["MemoryState", "StateFile", "empty_state"]

#: the largest state file read back (a simulated host's partitions fit in far less)
MAX_STATE_BYTES = 4 * 1024 * 1024


def empty_state() -> dict[str, Any]:
    """``made``: partitions created (model dumps); ``removed``: ids of the profile's own
    partitions destroyed; ``modes``: AMD mode per device id; ``seq``: creations so far;
    ``intents``: creates and destroys under way (``op``, ``pid``, ``ids``, ``mode``), so that
    what a killed process left half-way is undone (create) or completed (destroy)."""
    return {"version": 1, "made": [], "removed": [], "modes": {}, "seq": 0, "intents": []}


class MemoryState:
    """The state of one backend object (no ``state`` option)."""

    def __init__(self) -> None:
        self._state = empty_state()

    def read(self) -> dict[str, Any]:
        """The state (read-only: a transaction replaces it with a changed copy)."""
        return self._state

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, Any]]:
        state: dict[str, Any] = json.loads(json.dumps(self._state))  # readers never see a change half-made
        yield state
        self._state = state


class StateFile:
    """The state in ``path`` (JSON), changed under a lock and replaced atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"sim option state: {str(self.path)!r} is a directory, not a state file")
        self.read()  # a malformed file is refused when the backend opens

    def read(self) -> dict[str, Any]:
        try:
            with self.path.open("rb") as fh:
                raw = fh.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return empty_state()
        except OSError as exc:
            raise ConfigError(f"sim option state: cannot read {str(self.path)!r}: {exc.strerror}") from exc
        if len(raw) > MAX_STATE_BYTES:
            raise ConfigError(f"sim option state: {str(self.path)!r} is larger than {MAX_STATE_BYTES} bytes")
        if not raw.strip():
            return empty_state()
        try:
            state = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"sim option state: {str(self.path)!r} is not a state file: {exc}") from exc
        if not isinstance(state, dict) or state.get("version") != 1:
            raise ConfigError(f"sim option state: {str(self.path)!r} is not a version-1 state file")
        base = empty_state()
        for key, value in base.items():
            if not isinstance(state.get(key), type(value)):
                raise ConfigError(f"sim option state: {str(self.path)!r}: {key!r} must be a {type(value).__name__}")
        return state

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, Any]]:
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"sim option state: cannot lock {str(lock)!r}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = self.read()
            yield state
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            with tmp.open("w", encoding="utf-8") as fh:
                json.dump(state, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            os.close(fd)  # closing the descriptor releases the lock
