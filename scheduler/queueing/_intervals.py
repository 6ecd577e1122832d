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
from dataclasses import dataclass

__all__ = ["WaitInterval", "WorkSpread", "lognormal_interval"]

Z90 = 1.2815515655446004  # standard normal 90% quantile


@dataclass(frozen=True, slots=True)
class WaitInterval:
    """p50 and p90 of a wait (seconds) and the duration assumption behind them."""

    p50_s: float
    p90_s: float
    basis: str


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
