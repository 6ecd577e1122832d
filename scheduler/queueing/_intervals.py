"""Wait intervals: p50 and p90 of a start estimate from the spread of the durations ahead.

The planning walk books every job ahead of the target at one number, its expected hold (the
declared duration, or the history model's statistic).  The target's start is then driven by the
device-seconds those jobs hold, ``W = sum(n_i x H_i)`` over the running jobs' residual holds and
the queued jobs ahead.  When the holds are uncertain (history estimates), each ``H_i`` has the
distribution the history predicts for its key; assuming independence, ``E[W] = sum n_i mu_i`` and
``Var[W] = sum n_i^2 sigma_i^2``.  ``W`` is positive and right-skewed, so it is matched to a
log-normal of the same two moments (Fenton-Wilkinson), with log-spread ``s``.  The planned wait
is read as the wait at ``E[W]`` and scaled by the log-normal's quantile-to-mean ratios:

    p50 = plan x exp(-s^2 / 2)          p90 = plan x exp(z90 x s - s^2 / 2)

With declared durations trusted as exact (``sigma_i = 0``) both are the plan.  ``spread``
multiplies ``s`` (1 = the independent-sum value); it absorbs correlation between the durations
of jobs submitted together (sweeps), and is the one parameter a calibration chooses (see
``benchmarks/philly/protocol-intervals.md``).  Nothing here reads a true duration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ._estimate import WaitEstimate
from ._order import queue
from ._records import Job
from ._state import EngineState
from ._tiers import budget

__all__ = ["DEFAULT_SPREAD", "WorkSpread", "add_intervals", "basis_of", "lognormal_interval",
           "work_spread"]

Z90 = 1.2815515655446004  # standard normal 90% quantile


class WorkSpread:
    """Running sums of the mean and variance of the device-seconds held ahead of a target."""

    __slots__ = ("mean_s", "n_jobs", "var_s2")

    def __init__(self) -> None:
        self.mean_s = 0.0
        self.var_s2 = 0.0
        self.n_jobs = 0

    def add(self, devices: float, mean_s: float, var_s2: float) -> None:
        if devices <= 0 or not math.isfinite(mean_s) or mean_s <= 0:
            return
        self.mean_s += devices * mean_s
        if math.isfinite(var_s2) and var_s2 > 0:
            self.var_s2 += devices * devices * var_s2
        self.n_jobs += 1

    def log_spread(self) -> float:
        """``s`` of the log-normal with this mean and variance (0 when there is no spread)."""
        if self.mean_s <= 0 or self.var_s2 <= 0:
            return 0.0
        return math.sqrt(math.log1p(self.var_s2 / (self.mean_s * self.mean_s)))


def lognormal_interval(plan_wait_s: float, s: float, spread: float = 1.0) -> tuple[float, float]:
    """(p50, p90) of a wait planned at the mean work ahead, log-spread ``s`` scaled by ``spread``."""
    if not math.isfinite(plan_wait_s):
        return plan_wait_s, plan_wait_s
    if plan_wait_s <= 0 or s <= 0 or spread <= 0:
        return max(plan_wait_s, 0.0), max(plan_wait_s, 0.0)
    k = s * spread
    return plan_wait_s * math.exp(-k * k / 2), plan_wait_s * math.exp(Z90 * k - k * k / 2)


#: ``spread`` of the intervals :meth:`QueueingScheduler.estimate` reports (see the module
#: docstring); chosen by ``benchmarks/philly/protocol-intervals.md``.
DEFAULT_SPREAD = 1.0


def basis_of(model: object) -> str:
    """The duration assumption behind an interval, in words."""
    spread_fn = getattr(model, "spread", None)
    if spread_fn is None:
        return "declared durations, taken as exact"
    window = getattr(model, "window", None)
    stat = getattr(model, "plan_statistic", "mean")
    last = "all" if window is None else f"the last {window}"
    return f"history: {stat} and spread of {last} finished jobs per (tenant, size)"


def work_spread(st: EngineState, job: Job, now: float, pools: Sequence[str]) -> dict[str, WorkSpread]:
    """Per pool: mean and variance of the device-seconds held ahead of ``job`` (running jobs'
    residual holds and the queued jobs before it), each from the distribution its key's history
    predicts (``HistoryModel.spread``); a job whose key has no history counts with the variance of
    an exponential of its booked hold (coefficient of variation 1)."""
    model = st.durations
    spread_fn = getattr(model, "spread", None)
    out = {p: WorkSpread() for p in pools}
    if spread_fn is None:
        return out
    tiered = bool(st.policy.demote_after_device_s)
    q = st.tier(job, now) if tiered else 0
    memo: dict[tuple[tuple[str, int], float, float], tuple[float, float] | None] = {}

    def moments(v: Job, done: float, cap: float, booked: float) -> tuple[float, float]:
        key = (v.spec.tenant, v.spec.devices)
        mk = (key, done, cap)
        got = memo[mk] if mk in memo else memo.setdefault(mk, spread_fn(key, done, cap))
        if got is None or got[0] <= 0:
            return booked, booked * booked
        return got

    for v in st.active.values():
        if v.pool is None or v.pool not in out:
            continue
        done = v.progress(now)
        if tiered and v.klass.level == job.klass.level and st.tier(v, now) > q:
            continue  # preemptible by the target's tier: frees its devices
        cap = done + budget(st, v, now, q) if tiered else math.inf
        booked = max(0.0, st.expected_end(v, now) - now)
        m, var = moments(v, done, cap, booked)
        out[v.pool].add(v.spec.devices, m, var)
    for v in queue(st, now, upto=job.id):
        if v is job:
            break
        cap = v.work_s + budget(st, v, now, q) if tiered else math.inf
        m, var = moments(v, v.work_s, cap, st.duration(v))
        for p in ((v.spec.pool,) if v.spec.pool else tuple(st.pools_for(v.spec))):
            if p in out:
                out[p].add(v.spec.devices, m, var)
    return out


def add_intervals(st: EngineState, job: Job, now: float, ests: dict[str, WaitEstimate],
                  spread: float = DEFAULT_SPREAD) -> dict[str, WaitEstimate]:
    """``ests`` with p50, p90, the log-spread and the duration basis filled in."""
    basis = basis_of(st.durations)
    ws = work_spread(st, job, now, list(ests))
    out = {}
    for p, e in ests.items():
        s = ws[p].log_spread() if p in ws else 0.0
        p50, p90 = lognormal_interval(e.wait_s, s, spread)
        out[p] = replace(e, p50_s=p50, p90_s=p90, log_spread=s, basis=basis)
    return out
