"""A simulated clock kept in a file, so that successive processes read one simulation.

Without it each process starts the simulator at tick 0: ``accel health --sim ... --leak-history``
run from cron would read the same first tick every time, and a ``memory_leak`` fault would
never grow.  With the ``clock=FILE`` option every read takes the next tick from ``FILE`` (under
an exclusive ``flock``, so two processes never read the same tick) and the reading is dated at
the simulated time ``start + tick * TICK_S``: one read, one tick, ten simulated seconds, however
far apart the runs are in wall time.  ``start`` is the wall time the file was first used.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from pathlib import Path

from ..errors import ConfigError

__all__ = ["TICK_S", "SharedClock"]

#: simulated seconds per tick (one read), as ``benchmarks/leak`` and docs/leaks.md count them
TICK_S = 10.0


class SharedClock:
    """The tick counter in ``path`` (JSON ``{"start": wall seconds, "tick": next tick}``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"sim option clock: {str(self.path)!r} is a directory, not a clock file")
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip() if self.path.exists() else ""
        except OSError as exc:
            raise ConfigError(f"sim option clock: cannot read {str(self.path)!r}: {exc.strerror}") from exc
        if text:
            self._parse(text)  # a bad file is refused when the backend opens, not at its first read

    def take(self) -> tuple[int, float]:
        """The next tick and its simulated time (seconds since the epoch); the file moves on by one."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ConfigError(f"sim option clock: cannot open {str(self.path)!r}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            if text:
                start, tick = self._parse(text)
            else:
                start, tick = time.time(), 0
            data = json.dumps({"start": start, "tick": tick + 1}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)  # and the lock with it
        return tick, start + tick * TICK_S

    def _parse(self, text: str) -> tuple[float, int]:
        try:
            doc = json.loads(text)
            start, tick = doc["start"], doc["tick"]
        except (ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"sim option clock: {str(self.path)!r} is not a sim clock file "
                              f'(expected {{"start": seconds, "tick": n}}): {exc}') from exc
        if (isinstance(start, bool) or not isinstance(start, int | float) or not math.isfinite(start)
                or isinstance(tick, bool) or not isinstance(tick, int) or tick < 0):
            raise ConfigError(f"sim option clock: {str(self.path)!r} has a bad start {start!r} or tick {tick!r}")
        return float(start), tick
