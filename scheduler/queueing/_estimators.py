"""Duration models: how long the scheduler expects a running job to keep its devices.

The scheduler never reads a true duration.  :class:`DeclaredModel` trusts the declared
estimate (a job past it is expected to end ``overrun_margin_s`` later, re-evaluated each
cycle).  :class:`HistoryModel` learns only from jobs that already finished (``observe`` is
called at their end) and predicts from the durations of the same key (tenant, device count),
backing off to the tenant's and then to every job's history when a key has too few samples.
For a running job it predicts the *residual* time from its elapsed time, ``E[D - t | D > t]``
over the matching history: with heavy-tailed run times (Philly's) a job that already ran for a
day is not about to end.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
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


def _statistic(name: str) -> None:
    if name in ("mean", "median", "gmean"):
        return
    if name.startswith("p"):
        try:
            q = float(name[1:])
        except ValueError:
            q = -1.0
        if 0.0 < q < 100.0:
            return
    raise ValueError(f"statistic must be mean, median, gmean or pNN (a percentile), not {name!r}")


def _stat(vals: Sequence[float], name: str) -> float:
    if name == "mean":
        return statistics.fmean(vals)
    if name == "median":
        return statistics.median(vals)
    if name == "gmean":
        return math.exp(statistics.fmean(math.log(max(v, 1e-9)) for v in vals))
    s = sorted(vals)
    q = float(name[1:]) / 100.0
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


class HistoryModel:
    """Duration prediction from the last ``window`` finished jobs of the same key.

    ``statistic`` (``mean``, ``median``, ``gmean`` or a percentile ``pNN``) turns the matching
    history into the *declared* estimate a job gets at submission (:meth:`mean`), the number the
    queue is ordered by.  ``plan_statistic`` (default: the same) is what the planner books for a
    queued job and the residual statistic for a running one; with ``replan`` the planner
    re-predicts a queued job from the history as it is now rather than keeping the number
    declared at its submission.  A key needs ``min_samples`` finished jobs before it is used;
    below that the next coarser level (tenant, then all jobs) answers; ``shrink`` > 0 blends a
    key's estimate with the coarser one by weight n / (n + shrink) (in log space).
    """

    def __init__(self, window: int | None = 64, statistic: str = "median", *, plan_statistic: str | None = None,
                 min_samples: int = 1, shrink: float = 0.0, replan: bool = False, use_global: bool = False) -> None:
        _statistic(statistic)
        if plan_statistic is not None:
            _statistic(plan_statistic)
        if window is not None and window < 1:
            raise ValueError("window must be at least 1 (or None for the whole history)")
        if min_samples < 1 or shrink < 0:
            raise ValueError("min_samples must be >= 1 and shrink >= 0")
        self.window = window
        self.statistic = statistic
        self.plan_statistic = plan_statistic or statistic
        self.min_samples = min_samples
        self.shrink = shrink
        self.replan = replan
        self.use_global = use_global
        self._hist: dict[tuple[object, ...], deque[float]] = {}

    # -- history ------------------------------------------------------------------------------------------
    @staticmethod
    def levels(key: tuple[str, int]) -> tuple[tuple[object, ...], ...]:
        """Back-off chain, finest first: (tenant, size), (tenant,), ()."""
        return ((key[0], key[1]), (key[0],), ())

    def _chain(self, key: tuple[str, int]) -> list[deque[float]]:
        lv = self.levels(key) if self.use_global else self.levels(key)[:2]
        return [h for h in (self._hist.get(k) for k in lv) if h]

    def history(self, key: tuple[str, int]) -> deque[float] | None:
        """Finest history with at least ``min_samples`` jobs (else the coarsest non-empty one)."""
        chain = self._chain(key)
        for h in chain:
            if len(h) >= self.min_samples:
                return h
        return chain[-1] if chain else None

    def _predict(self, key: tuple[str, int], name: str, done_s: float = 0.0) -> float | None:
        """Statistic of (D - done) over the matching history with D > done, backing off and
        shrinking as configured; None when no level has a longer job."""
        chain = self._chain(key)
        est: float | None = None
        for h in reversed(chain):  # coarse to fine: each finer level refines the coarser answer
            longer = [d - done_s for d in h if d > done_s] if done_s > 0 else list(h)
            n = len(longer)
            if n == 0:
                continue
            val = max(1.0, _stat(longer, name))
            if est is None:
                est = val
            elif self.shrink > 0:
                w = n / (n + self.shrink)
                est = math.exp(w * math.log(val) + (1 - w) * math.log(est))
            elif n >= self.min_samples:
                est = val
        return est

    def mean(self, key: tuple[str, int], default_s: float) -> float:
        """The estimate declared at submission (``statistic`` of the matching history)."""
        est = self._predict(key, self.statistic)
        return default_s if est is None else est

    def remaining(self, key: tuple[str, int], declared_s: float, done_s: float, overrun_margin_s: float) -> float:
        if done_s <= 0:
            if self.replan:
                est = self._predict(key, self.plan_statistic)
                if est is not None:
                    return est
            return declared_s  # not started (or restarting from zero): the declaration stands
        if not self._chain(key):
            # nothing finished yet: trust the declaration, and past it expect as long again
            left = declared_s - done_s
            return left if left > 0 else max(overrun_margin_s, done_s)
        est = self._predict(key, self.plan_statistic, done_s)
        if est is None:
            # older than everything seen: expect it to run about as long again (heavy tail)
            return max(overrun_margin_s, done_s)
        return est

    def observe(self, key: tuple[str, int], duration_s: float) -> None:
        for k in self.levels(key):
            self._hist.setdefault(k, deque(maxlen=self.window)).append(duration_s)
