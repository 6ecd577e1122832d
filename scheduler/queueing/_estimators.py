"""Duration models: how long the scheduler expects a running job to keep its devices.

The scheduler never reads a true duration.  :class:`DeclaredModel` trusts the declared
estimate (a job past it is expected to end ``overrun_margin_s`` later, re-evaluated each
cycle).  :class:`HistoryModel` learns from jobs that finished earlier (per tenant and device
count) and predicts a running job's *residual* time from its elapsed time: the mean of the
past durations longer than what it has already run, minus that.  With heavy-tailed run
times (Philly's) this matters: a job that already ran for a day is not about to end.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable
from typing import Protocol

__all__ = ["DeclaredModel", "DurationModel", "HistoryModel"]


class DurationModel(Protocol):
    """Predicts remaining run time; ``observe`` is called when a job finishes."""

    def remaining(self, key: tuple[str, int], declared_s: float, done_s: float, overrun_margin_s: float) -> float: ...

    def observe(self, key: tuple[str, int], duration_s: float) -> None: ...


class DeclaredModel:
    """Remaining = declared estimate - work done (``overrun_margin_s`` once past it)."""

    def remaining(self, key: tuple[str, int], declared_s: float, done_s: float, overrun_margin_s: float) -> float:
        left = declared_s - done_s
        return left if left > 0 else overrun_margin_s

    def observe(self, key: tuple[str, int], duration_s: float) -> None:
        return None


class HistoryModel:
    """Residual-life prediction from the last ``window`` finished durations of the same key
    (tenant, device count), falling back to the tenant's, then to the declared estimate."""

    def __init__(self, window: int = 64, statistic: str = "median") -> None:
        if statistic not in ("mean", "median"):
            raise ValueError(f"statistic must be mean or median, not {statistic!r}")
        self.window = window
        self.statistic = statistic
        self._by_key: dict[tuple[str, int], deque[float]] = {}
        self._by_tenant: dict[str, deque[float]] = {}

    def history(self, key: tuple[str, int]) -> deque[float] | None:
        return self._by_key.get(key) or self._by_tenant.get(key[0])

    def mean(self, key: tuple[str, int], default_s: float) -> float:
        hist = self.history(key)
        return max(1.0, self._stat(hist)) if hist else default_s

    def _stat(self, values: Iterable[float]) -> float:
        vals = list(values)
        return statistics.fmean(vals) if self.statistic == "mean" else statistics.median(vals)

    def remaining(self, key: tuple[str, int], declared_s: float, done_s: float, overrun_margin_s: float) -> float:
        if done_s <= 0:
            return declared_s  # not started (or restarting from zero): the declaration stands
        hist = self.history(key)
        if not hist:
            # nothing finished yet: trust the declaration, and past it expect as long again
            left = declared_s - done_s
            return left if left > 0 else max(overrun_margin_s, done_s)
        longer = [d for d in hist if d > done_s]
        if not longer:
            # older than everything seen: expect it to run about as long again (heavy tail)
            return max(overrun_margin_s, done_s)
        return max(1.0, self._stat(longer) - done_s)

    def observe(self, key: tuple[str, int], duration_s: float) -> None:
        self._by_key.setdefault(key, deque(maxlen=self.window)).append(duration_s)
        self._by_tenant.setdefault(key[0], deque(maxlen=self.window)).append(duration_s)
