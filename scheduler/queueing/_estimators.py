"""Duration models: how long the scheduler expects a running job to keep its devices.

The scheduler never reads a true duration.  :class:`DeclaredModel` trusts the declared
estimate (a job past it is expected to end ``overrun_margin_s`` later, re-evaluated each
cycle).  :class:`HistoryModel` learns only from jobs that already finished (``observe`` is
called at their end) and predicts from the durations of the same key (tenant, device count),
backing off to the tenant's and then to every job's history when a key has too few samples.
For a running job it predicts the *residual* time from its elapsed time, ``E[D - t | D > t]``
over the matching history: with heavy-tailed run times (Philly's) a job that already ran for a
day is not about to end.

``statistic="km-mean"`` corrects the survivorship bias of a finished-only history: at any time
the jobs that have finished are disproportionately the short ones, while the long ones are
still running.  Attached to an engine (:meth:`HistoryModel.attach_engine`), the model also
reads the *elapsed* time of every running job (observable; its end is not) and treats it as a
right-censored observation in a Kaplan-Meier (product-limit) estimate of the duration
distribution per key; the mean is the area under that survival curve, with a tail past the
largest observation (``km_tail``).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["DeclaredModel", "DurationModel", "HistoryModel", "capped_remaining"]


class DurationModel(Protocol):
    """Predicts remaining run time; ``observe`` is called when a job finishes."""

    def remaining(self, key: tuple[str, int], declared_s: float, done_s: float, overrun_margin_s: float) -> float: ...

    def observe(self, key: tuple[str, int], duration_s: float) -> None: ...


def capped_remaining(model: DurationModel, key: tuple[str, int], declared_s: float, done_s: float,
                     cap_s: float, overrun_margin_s: float) -> float:
    """Expected run time left counting only up to ``cap_s`` of total work, ``E[min(D, cap) - t | D > t]``.

    The tiered planner asks this: a job holds its devices against jobs of an earlier tier only
    until it leaves that tier.  A model with a ``remaining_capped`` method answers it from its
    distribution; for any other model it is ``min(remaining, cap - done)``.
    """
    budget = cap_s - done_s
    if budget <= 0:
        return 0.0
    if not math.isfinite(cap_s):
        return model.remaining(key, declared_s, done_s, overrun_margin_s)
    f = getattr(model, "remaining_capped", None)
    if f is not None:
        return float(min(budget, max(0.0, f(key, declared_s, done_s, cap_s, overrun_margin_s))))
    return min(budget, model.remaining(key, declared_s, done_s, overrun_margin_s))


class DeclaredModel:
    """Remaining = declared estimate - work done (``overrun_margin_s`` once past it)."""

    def remaining(self, key: tuple[str, int], declared_s: float, done_s: float, overrun_margin_s: float) -> float:
        left = declared_s - done_s
        return left if left > 0 else overrun_margin_s

    def observe(self, key: tuple[str, int], duration_s: float) -> None:
        return None


KM_STATISTIC = "km-mean"
KM_TAILS = ("restricted", "exp")


def _statistic(name: str) -> None:
    if name in ("mean", "median", "gmean", KM_STATISTIC):
        return
    if name.startswith("p"):
        try:
            q = float(name[1:])
        except ValueError:
            q = -1.0
        if 0.0 < q < 100.0:
            return
    raise ValueError(f"statistic must be mean, median, gmean, km-mean or pNN (a percentile), not {name!r}")


class _KaplanMeier:
    """Product-limit survival curve of finished (event) and running (censored) durations.

    ``xs[k]`` is the k-th breakpoint (``xs[0] = 0``, then the distinct event times) and ``ss[k]``
    the survival on ``[xs[k], xs[k+1])``; the last step runs to ``t_max`` (the largest
    observation, event or censored), past which ``tail_mean_s`` is the expected residual
    (0 for the restricted mean).  ``area[k]`` = integral of S from ``xs[k]`` to infinity.
    """

    __slots__ = ("area", "cum", "n_events", "ss", "t_max", "tail_mean_s", "xs")

    def __init__(self, events: Sequence[float], censored: Sequence[float], tail: str = "restricted",
                 tail_quantile: float = 0.5) -> None:
        ev = sorted(events)
        ce = sorted(c for c in censored if c > 0)
        self.n_events = len(ev)
        self.t_max = max(ev[-1] if ev else 0.0, ce[-1] if ce else 0.0)
        xs, ss = [0.0], [1.0]
        n_at_risk = len(ev) + len(ce)
        s_cur, i, j = 1.0, 0, 0
        while i < len(ev):
            t = ev[i]
            # censored strictly before t leave the risk set first (ties: events first, the usual convention)
            while j < len(ce) and ce[j] < t:
                n_at_risk -= 1
                j += 1
            d = 0
            while i < len(ev) and ev[i] == t:
                d += 1
                i += 1
            if n_at_risk > 0:
                s_cur *= 1.0 - d / n_at_risk
            n_at_risk -= d
            xs.append(t)
            ss.append(s_cur)
        self.xs, self.ss = xs, ss
        s_last = ss[-1]
        self.tail_mean_s = 0.0
        if tail == "exp" and s_last > 0:
            # censored-exponential MLE above the threshold u: exposure past u / events past u
            u = next((x for x, s in zip(xs, ss, strict=True) if s <= 1.0 - tail_quantile), 0.0)
            exposure = sum(x - u for x in ev if x > u) + sum(x - u for x in ce if x > u)
            n_ev = sum(1 for x in ev if x > u)
            self.tail_mean_s = exposure / max(n_ev, 1) if exposure > 0 else 0.0
        # area from each breakpoint to infinity, right to left
        area = [0.0] * len(xs)
        acc = s_last * (self.t_max - xs[-1]) + s_last * self.tail_mean_s
        area[-1] = acc
        for k in range(len(xs) - 2, -1, -1):
            acc += ss[k] * (xs[k + 1] - xs[k])
            area[k] = acc
        self.area = area
        cum = [0.0] * len(xs)  # integral of S from 0 to xs[k]
        for k in range(1, len(xs)):
            cum[k] = cum[k - 1] + ss[k - 1] * (xs[k] - xs[k - 1])
        self.cum = cum

    def integral_to(self, x: float) -> float:
        """Integral of S from 0 to ``x`` (S held at its last value past the last event)."""
        k = bisect.bisect_right(self.xs, x) - 1
        return self.cum[k] + self.ss[k] * (x - self.xs[k])

    def capped_residual(self, t: float, cap: float) -> float | None:
        """E[min(D, cap) - t | D > t] = integral of S from t to cap / S(t) (the restricted mean
        residual: well defined without any tail model while cap is inside the data); None when
        no observation outlived ``t``."""
        s_t = self.survival(t)
        if s_t <= 0 or cap <= t:
            return None if s_t <= 0 else 0.0
        return (self.integral_to(cap) - self.integral_to(t)) / s_t

    def survival(self, t: float) -> float:
        return self.ss[bisect.bisect_right(self.xs, t) - 1]

    def mean(self) -> float:
        return self.area[0]

    def residual(self, t: float) -> float | None:
        """E[D - t | D > t]; None when nothing is known past ``t``."""
        if t >= self.t_max:
            return self.tail_mean_s if self.tail_mean_s > 0 else None
        k = bisect.bisect_right(self.xs, t) - 1
        s_t = self.ss[k]
        if s_t <= 0:
            return None
        nxt = self.xs[k + 1] if k + 1 < len(self.xs) else self.t_max
        rest = self.area[k + 1] if k + 1 < len(self.xs) else s_t * self.tail_mean_s
        return (rest + s_t * (nxt - t)) / s_t


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

    ``km-mean`` (as ``statistic`` or ``plan_statistic``): the Kaplan-Meier mean of the key, with
    the elapsed times of the jobs running now (see :meth:`attach_engine`) as right-censored
    observations, for both the declared estimate and a running job's residual
    ``E[D - t | D > t]``.  ``km_tail`` says what lies past the largest observation:
    ``restricted`` (nothing: the restricted mean; a job older than everything seen is
    expected to run as long again) or ``exp`` (an exponential tail whose mean is the censored
    MLE over the observations above the curve's ``km_tail_quantile``).  Not attached, it is the
    plain finished-only mean.
    """

    def __init__(self, window: int | None = 64, statistic: str = "median", *, plan_statistic: str | None = None,
                 min_samples: int = 1, shrink: float = 0.0, replan: bool = False, use_global: bool = False,
                 km_tail: str = "restricted", km_tail_quantile: float = 0.5) -> None:
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
        if km_tail not in KM_TAILS:
            raise ValueError(f"km_tail must be one of {KM_TAILS}, not {km_tail!r}")
        if not 0.0 <= km_tail_quantile < 1.0:
            raise ValueError("km_tail_quantile must be in [0, 1)")
        self.km_tail = km_tail
        self.km_tail_quantile = km_tail_quantile
        self._hist: dict[tuple[object, ...], deque[float]] = {}
        self._n_observed = 0
        self._clock: Callable[[], float] | None = None
        self._census: Callable[[], Iterable[tuple[tuple[str, int], float]]] | None = None
        self._km_token: tuple[float, int] | None = None
        self._km_cache: dict[tuple[object, ...], _KaplanMeier] = {}
        self._censored: dict[tuple[object, ...], list[float]] = {}
        # per key: (observations when built, sorted durations, prefix sums) for O(log n) means
        self._sorted: dict[tuple[object, ...], tuple[int, list[float], list[float]]] = {}
        self._version: dict[tuple[object, ...], int] = {}
        # the same with prefix sums of squares, for the variance a wait interval reads
        self._sorted2: dict[tuple[object, ...], tuple[int, list[float], list[float], list[float]]] = {}
        # the same durations as a sorted array, for the draws of a Monte-Carlo plan
        self._arrays: dict[tuple[object, ...], tuple[int, npt.NDArray[np.float64]]] = {}

    # -- censored observations (running jobs) --------------------------------------------------------------
    def attach(self, clock: Callable[[], float],
               census: Callable[[], Iterable[tuple[tuple[str, int], float]]]) -> None:
        """Give ``km-mean`` the running jobs: ``census()`` yields (key, elapsed seconds) of every
        job holding devices now, ``clock()`` the time they are taken at (the cache key).  Only
        elapsed times are read: a running job's end is not observable and never asked for."""
        self._clock, self._census = clock, census
        self._km_token = None

    def attach_engine(self, engine: Any) -> None:
        """:meth:`attach` to a :class:`QueueingScheduler`: its clock and its running jobs'
        progress (work done, the observable part of their duration)."""
        def census() -> Iterable[tuple[tuple[str, int], float]]:
            now = engine.now
            return [((j.spec.tenant, j.spec.devices), j.progress(now)) for j in engine.running()]
        self.attach(lambda: float(engine.now), census)

    def _km(self, level: tuple[object, ...]) -> _KaplanMeier | None:
        token = (self._clock() if self._clock is not None else 0.0, self._n_observed)
        if token != self._km_token:
            self._km_token = token
            self._km_cache = {}
            self._censored = {}
            if self._census is not None:
                for key, elapsed in self._census():
                    for k in self.levels(key):
                        self._censored.setdefault(k, []).append(elapsed)
        km = self._km_cache.get(level)
        if km is None:
            h = self._hist.get(level)
            if not h:
                return None
            km = self._km_cache[level] = _KaplanMeier(h, self._censored.get(level, ()), self.km_tail,
                                                      self.km_tail_quantile)
        return km

    # -- history ------------------------------------------------------------------------------------------
    @staticmethod
    def levels(key: tuple[str, int]) -> tuple[tuple[object, ...], ...]:
        """Back-off chain, finest first: (tenant, size), (tenant,), ()."""
        return ((key[0], key[1]), (key[0],), ())

    def _chain(self, key: tuple[str, int]) -> list[deque[float]]:
        lv = self.levels(key) if self.use_global else self.levels(key)[:2]
        return [h for h in (self._hist.get(k) for k in lv) if h]

    def _chain_levels(self, key: tuple[str, int]) -> list[tuple[object, ...]]:
        lv = self.levels(key) if self.use_global else self.levels(key)[:2]
        return [k for k in lv if self._hist.get(k)]

    def _capped_mean(self, level: tuple[object, ...], done_s: float, cap_s: float) -> tuple[int, float]:
        """(n, mean of min(D, cap) - done over the n durations D > done) of one level, from a
        sorted copy with prefix sums (rebuilt only after that level changed)."""
        ver = self._version.get(level, 0)
        got = self._sorted.get(level)
        if got is None or got[0] != ver:
            xs = sorted(self._hist[level])
            pre = [0.0]
            for x in xs:
                pre.append(pre[-1] + x)
            got = self._sorted[level] = (ver, xs, pre)
        _, xs, pre = got
        lo = bisect.bisect_right(xs, done_s) if done_s > 0 else 0
        n = len(xs) - lo
        if n == 0:
            return 0, 0.0
        hi = bisect.bisect_right(xs, cap_s, lo=lo) if math.isfinite(cap_s) else len(xs)
        total = pre[hi] - pre[lo] + cap_s * (len(xs) - hi) if hi < len(xs) else pre[hi] - pre[lo]
        return n, total / n - (done_s if done_s > 0 else 0.0)

    def _capped_moments(self, level: tuple[object, ...], done_s: float, cap_s: float) -> tuple[int, float, float]:
        """(n, mean, variance) of ``min(D, cap) - done`` over the n durations D > done of one
        level, from sorted prefix sums of D and D^2 (rebuilt only after that level changed)."""
        ver = self._version.get(level, 0)
        got = self._sorted2.get(level)
        if got is None or got[0] != ver:
            xs = sorted(self._hist[level])
            pre, pre2 = [0.0], [0.0]
            for x in xs:
                pre.append(pre[-1] + x)
                pre2.append(pre2[-1] + x * x)
            got = self._sorted2[level] = (ver, xs, pre, pre2)
        _, xs, pre, pre2 = got
        d = done_s if done_s > 0 else 0.0
        lo = bisect.bisect_right(xs, d) if d > 0 else 0
        n = len(xs) - lo
        if n == 0:
            return 0, 0.0, 0.0
        hi = bisect.bisect_right(xs, cap_s, lo=lo) if math.isfinite(cap_s) else len(xs)
        k, above = hi - lo, len(xs) - hi
        s1 = pre[hi] - pre[lo] - d * k
        s2 = (pre2[hi] - pre2[lo]) - 2 * d * (pre[hi] - pre[lo]) + d * d * k
        if above:
            c = cap_s - d
            s1 += c * above
            s2 += c * c * above
        mean = s1 / n
        return n, mean, max(0.0, s2 / n - mean * mean)

    def spread(self, key: tuple[str, int], done_s: float = 0.0, cap_s: float = math.inf) -> tuple[float, float] | None:
        """(mean, variance) of the run time left, ``min(D, cap) - done`` given ``D > done``, over the
        finest matching history with ``min_samples`` jobs longer than ``done`` (backing off as the
        predictions do); None when no level has one.  What a wait interval reads: the
        distribution of durations the history predicts for this job, not a fixed factor."""
        levels = self._chain_levels(key)
        best: tuple[int, float, float] | None = None
        for lv in levels:  # fine to coarse
            got = self._capped_moments(lv, done_s, cap_s)
            if got[0] >= self.min_samples:
                return got[1], got[2]
            if got[0] and best is None:
                best = got
        return None if best is None else (best[1], best[2])

    def draw(self, key: tuple[str, int], done_s: float, cap_s: float, rng: np.random.Generator,
             k: int) -> npt.NDArray[np.float64] | None:
        """``k`` draws of the run time left, ``min(D, cap) - done`` given ``D > done``: ``D``
        uniform over the durations longer than ``done`` of the finest level with ``min_samples``
        of them (backing off as :meth:`spread` does; the coarsest level with any otherwise), None
        when no level has one.  The residual-life draws of a Monte-Carlo plan (``_mcplan``)."""
        fallback: tuple[npt.NDArray[np.float64], int] | None = None
        d = done_s if done_s > 0 else 0.0
        for lv in self._chain_levels(key):  # fine to coarse
            ver = self._version.get(lv, 0)
            got = self._arrays.get(lv)
            if got is None or got[0] != ver:
                got = self._arrays[lv] = (ver, np.sort(np.fromiter(self._hist[lv], dtype=np.float64)))
            xs = got[1]
            lo = int(np.searchsorted(xs, d, side="right")) if d > 0 else 0
            if len(xs) - lo >= self.min_samples:
                fallback = (xs, lo)
                break
            if len(xs) > lo and fallback is None:
                fallback = (xs, lo)
        if fallback is None:
            return None
        xs, lo = fallback
        picks = xs[rng.integers(lo, len(xs), size=k)]
        return np.maximum(np.minimum(picks, cap_s) - d, 0.0)

    def history(self, key: tuple[str, int]) -> deque[float] | None:
        """Finest history with at least ``min_samples`` jobs (else the coarsest non-empty one)."""
        chain = self._chain(key)
        for h in chain:
            if len(h) >= self.min_samples:
                return h
        return chain[-1] if chain else None

    def _predict(self, key: tuple[str, int], name: str, done_s: float = 0.0,
                 cap_s: float = math.inf) -> float | None:
        """Statistic of (min(D, cap) - done) over the matching history with D > done, backing off
        and shrinking as configured; None when no level has a longer job."""
        chain = self._chain(key)
        est: float | None = None
        km_levels = ([lv for lv in (self.levels(key) if self.use_global else self.levels(key)[:2])
                      if self._hist.get(lv)] if name == KM_STATISTIC else [])
        fast = self._chain_levels(key) if name == "mean" else []
        for i, h in enumerate(reversed(chain)):  # coarse to fine: each finer level refines the coarser answer
            if fast:
                n, m = self._capped_mean(fast[len(chain) - 1 - i], done_s, cap_s)
                if n == 0:
                    continue
                val = max(1.0, m)
            elif name == KM_STATISTIC:
                km = self._km(km_levels[len(chain) - 1 - i])
                r = km.residual(done_s) if km is not None else None
                if r is None:
                    continue
                n = len(h)
                val = max(1.0, r)
            else:
                longer = ([min(d, cap_s) - done_s for d in h if d > done_s] if done_s > 0
                          else [min(d, cap_s) for d in h])
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

    def remaining_capped(self, key: tuple[str, int], declared_s: float, done_s: float, cap_s: float,
                         overrun_margin_s: float) -> float:
        """``E[min(D, cap) - t | D > t]`` over the matching finished history (``plan_statistic``),
        also for a job that has not started: the capped mean of what finished is a better
        booking than the uncapped declaration.  ``km-mean`` and an empty history fall back to
        ``min(remaining, cap - done)``."""
        budget = cap_s - done_s
        if budget <= 0:
            return 0.0  # already at the cap: nothing left to count
        if not self._chain(key):
            return min(budget, self.remaining(key, declared_s, done_s, overrun_margin_s))
        if self.plan_statistic == KM_STATISTIC:
            # restricted Kaplan-Meier mean: running jobs that already passed the cap are complete
            # observations of min(D, cap), the others censored; finest level with min_samples events
            levels = self._chain_levels(key)
            r: float | None = None
            for lv in levels:
                km = self._km(lv)
                if km is not None:
                    r = km.capped_residual(done_s, cap_s)
                    if r is not None and km.n_events >= self.min_samples:
                        break
            if r is None:
                return min(budget, max(overrun_margin_s, done_s))
            return min(budget, max(1.0, r))
        est = self._predict(key, self.plan_statistic, done_s, cap_s)
        if est is None:
            return min(budget, max(overrun_margin_s, done_s))  # older than everything seen
        return min(budget, est)

    def observe(self, key: tuple[str, int], duration_s: float) -> None:
        self._n_observed += 1
        for k in self.levels(key):
            self._version[k] = self._version.get(k, 0) + 1
            self._hist.setdefault(k, deque(maxlen=self.window)).append(duration_s)
