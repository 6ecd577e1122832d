"""How late the router's own event loop runs: a heartbeat that measures its lateness.

Every ``interval_s`` a callback is scheduled on the loop; when it runs, how much later than due it
ran is the loop's lag at that moment (callbacks and I/O queued ahead of it, a blocking call, a
starved process).  A timer of an upstream request (aiohttp's connect timeout) is run by the same
loop: when the loop is seconds late, the timer can fire before the loop has handled the
connection that completed long ago, and the timeout is the router's, not the replica's.
:meth:`LoopLag.during` answers "for how long was the loop behind while this attempt ran", from
the heartbeats that ran in the attempt and the one overdue now.  It is the time summed, not the
worst single lateness: a loop whose every turn is 0.3 s late takes a connect through several turns
(the connect, its completion, the transport made), and a 1 s timer runs out with no turn late by
more than 0.3 s (seen with ``benchmarks/router/overhead.py``'s load).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

__all__ = ["LoopLag"]


class LoopLag:
    """The heartbeat (see the module doc).  :meth:`start` on the loop it measures; all methods are
    called on that loop (:meth:`stop` may be scheduled there from another thread).  ``clock`` is
    the monotonic clock (a fake one in tests)."""

    def __init__(self, interval_s: float = 0.05, window_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if interval_s <= 0 or window_s <= 0:
            raise ValueError("LoopLag: interval_s and window_s must be > 0")
        self.interval_s = interval_s
        self.window_s = window_s
        self.clock = clock
        #: Heartbeats: (when it ran, how late it ran), oldest first, the last ``window_s``.
        self.samples: deque[tuple[float, float]] = deque(maxlen=max(16, int(window_s / interval_s) + 1))
        self.last_s = 0.0
        self._due: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def started(self) -> bool:
        return self._loop is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin beating on ``loop`` (the running loop, from a callback or coroutine on it)."""
        if self._loop is not None:
            return
        self._loop = loop
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._due = None

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self.clock() + self.interval_s
        self._handle = self._loop.call_later(self.interval_s, self.beat)

    def beat(self) -> None:
        """One heartbeat ran: record its lateness and schedule the next."""
        now = self.clock()
        if self._due is not None:
            self.record(now, now - self._due)
        if self._loop is not None and self._handle is not None:
            self._schedule()

    def record(self, at: float, late_s: float) -> None:
        """A heartbeat that ran at ``at``, ``late_s`` after it was due."""
        late_s = max(0.0, late_s)
        self.last_s = late_s
        self.samples.append((at, late_s))
        while self.samples and self.samples[0][0] < at - self.window_s:
            self.samples.popleft()

    def overdue_s(self, now: float | None = None) -> float:
        """How far past due the next heartbeat is and has not run (0 when not yet due)."""
        if self._due is None:
            return 0.0
        now = self.clock() if now is None else now
        return max(0.0, now - self._due)

    def current_s(self) -> float:
        """The loop's lag now: the last heartbeat's lateness, or the overdue one's when more."""
        return max(self.last_s, self.overdue_s())

    def during(self, since: float, now: float | None = None) -> float:
        """For how long the loop was behind between ``since`` and ``now``: the lateness of the
        heartbeats that ran in that time (each counted from ``since`` on) and of the one overdue
        now, summed.  A heartbeat is scheduled when the one before it ran, so their late spans do
        not overlap: the sum is at most ``now - since``."""
        now = self.clock() if now is None else now
        behind = min(self.overdue_s(now), max(0.0, now - since))
        for at, late in reversed(self.samples):
            if at < since:
                break
            behind += min(late, at - since)
        return min(behind, max(0.0, now - since))
