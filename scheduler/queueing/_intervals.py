"""Wait intervals: p50 and p90 of a start estimate, calibrated on the history's duration spread.

The planning walk books every job ahead of the target at one number, its expected hold (the
declared duration, or the history model's statistic), and gives the planned wait ``P``.  With
declared durations taken as exact, p50 = p90 = ``P``.

With history estimates each job ahead has the distribution of durations its key's history
predicts (``HistoryModel.spread``: same tenant and size, its window; a running job's residual
given the time it ran, capped at the tier budget).  Their independent sum gives the mean and
variance of the device-seconds held ahead, ``W = sum(n_i x H_i)``: ``E[W] = sum n_i mu_i``,
``Var[W] = sum n_i^2 sigma_i^2``, summarised as the log-spread ``s = sqrt(log(1 + Var/E^2))``
(:class:`WorkSpread`).  ``s`` says how uncertain the plan is; how that uncertainty turns into
the spread of the *start* (correlated durations, later arrivals that overtake under tiers,
backfill) is measured, not assumed: an :class:`IntervalCalibration` holds, per stratum of ``s``
(and optionally of the job's size), the empirical 50% and 90% quantiles of the log ratio
``log((actual wait + tau) / (P + tau))`` on training replays, and

    p50 = (P + tau) x exp(L50[stratum]) - tau        p90 = (P + tau) x exp(L90[stratum]) - tau

(floored at 0; ``tau`` = 60 s keeps a short plan's ratio finite).  The default table is the one
chosen and fitted by ``benchmarks/philly/protocol-intervals-v2.md`` on the training VCs.
Nothing here reads a true duration, and no scheduling decision reads p50 or p90.

Where the estimate's kept exact plan serves it, a calibration's ``monte_carlo`` part (opt-in,
:data:`DEFAULT_MONTE_CARLO`; off in :data:`DEFAULT_CALIBRATION`) answers instead: the plan is
replayed with the durations ahead drawn from the history (:mod:`._mcplan`) and p50 / p90 are
quantiles of the scenario waits (``benchmarks/philly/protocol-intervals-v5.md``); the table
above answers elsewhere.

The earlier log-normal moment match (:func:`lognormal_interval`, p50 = P exp(-s^2/2)) is kept
for comparison: its p90 stops growing once ``s`` passes z90, so it could not reach 90% coverage
on the Philly preview (``benchmarks/philly/README.md``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ._estimate import WaitEstimate
from ._mcplan import MonteCarloPlan, scenario_waits
from ._order import queue
from ._records import Job
from ._state import EngineState
from ._tiers import budget

__all__ = ["DEFAULT_CALIBRATION", "DEFAULT_MONTE_CARLO", "DEFAULT_SPREAD", "IntervalCalibration", "WorkSpread",
           "add_intervals", "basis_of", "lognormal_interval", "work_spread"]

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


@dataclass(frozen=True)
class IntervalCalibration:
    """Empirical quantiles of ``log((wait + tau) / (plan + tau))`` per stratum.

    Strata: the bin of the log-spread ``s`` among ``s_edges`` (bin ``i`` holds
    ``s_edges[i-1] < s <= s_edges[i]``) crossed with the bin of the job's device count among
    ``size_edges`` (bin ``j`` holds ``size_edges[j-1] <= devices < size_edges[j]``; empty: one
    size stratum).  ``log_q50`` / ``log_q90`` map ``(s_bin, size_bin)``
    to the log quantiles; a stratum absent from the table falls back to ``fallback``.

    ``monte_carlo`` (None: off): where the estimate's kept exact plan serves it, p50 / p90 come
    from Monte-Carlo plans instead (:mod:`._mcplan`); the table answers elsewhere."""

    s_edges: tuple[float, ...]
    size_edges: tuple[int, ...]
    log_q50: Mapping[tuple[int, int], float]
    log_q90: Mapping[tuple[int, int], float]
    fallback: tuple[float, float]
    tau_s: float = 60.0
    label: str = field(default="")
    monte_carlo: MonteCarloPlan | None = None

    def __post_init__(self) -> None:
        if not (self.tau_s > 0 and math.isfinite(self.tau_s)):
            raise ValueError(f"interval calibration: tau_s must be a finite number > 0, got {self.tau_s!r}")
        if list(self.s_edges) != sorted(self.s_edges) or list(self.size_edges) != sorted(self.size_edges):
            raise ValueError("interval calibration: bin edges must be sorted")
        for k, a in self.log_q50.items():
            b = self.log_q90.get(k)
            if b is None or not (math.isfinite(a) and math.isfinite(b)) or b < a:
                raise ValueError(f"interval calibration: stratum {k} needs finite log quantiles with q50 <= q90")
        if not (math.isfinite(self.fallback[0]) and math.isfinite(self.fallback[1])
                and self.fallback[0] <= self.fallback[1]):
            raise ValueError("interval calibration: fallback needs finite log quantiles with q50 <= q90")

    def stratum(self, s: float, devices: int) -> tuple[int, int]:
        return bisect.bisect_left(self.s_edges, s), bisect.bisect_right(self.size_edges, devices)

    def interval(self, plan_wait_s: float, s: float, devices: int) -> tuple[float, float]:
        """(p50, p90) of a wait planned at ``plan_wait_s`` with log-spread ``s``."""
        if not math.isfinite(plan_wait_s):
            return plan_wait_s, plan_wait_s
        plan = max(plan_wait_s, 0.0)
        k = self.stratum(s, devices)
        a, b = (self.log_q50[k], self.log_q90[k]) if k in self.log_q50 else self.fallback
        base = plan + self.tau_s
        return max(0.0, base * math.exp(a) - self.tau_s), max(0.0, base * math.exp(b) - self.tau_s)

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "tau_s": self.tau_s, "s_edges": list(self.s_edges),
                "size_edges": list(self.size_edges), "fallback": list(self.fallback),
                "strata": [[k[0], k[1], self.log_q50[k], self.log_q90[k]] for k in sorted(self.log_q50)]}


def add_intervals(st: EngineState, job: Job, now: float, ests: dict[str, WaitEstimate],
                  calibration: IntervalCalibration | None = None) -> dict[str, WaitEstimate]:
    """``ests`` with p50, p90, the log-spread and the duration basis filled in: a point interval
    at the plan with declared durations; with history durations, quantiles of Monte-Carlo plans
    where ``calibration.monte_carlo`` is set and the estimate's kept exact plan serves them
    (:mod:`._mcplan`), else ``calibration`` (default :data:`DEFAULT_CALIBRATION`) applied to the
    plan and the log-spread."""
    cal = DEFAULT_CALIBRATION if calibration is None else calibration
    basis = basis_of(st.durations)
    ws = work_spread(st, job, now, list(ests))
    history = getattr(st.durations, "spread", None) is not None
    mc = cal.monte_carlo
    waits = scenario_waits(st, job, now, mc, list(ests)) if history and mc is not None else None
    out = {}
    for p, e in ests.items():
        s = ws[p].log_spread() if p in ws else 0.0
        if history and mc is not None and waits is not None and p in waits and math.isfinite(e.wait_s):
            p50, p90 = mc.interval(waits[p])
            basis_p = (f"{basis}; p{round(mc.p50_level * 100)} / p{round(mc.p90_level * 100)} of {mc.draws} "
                       "Monte-Carlo plans, each job ahead and each running job's residual drawn from that history")
        elif history:
            p50, p90 = cal.interval(e.wait_s, s, job.spec.devices)
            basis_p = f"{basis}; quantiles of actual / planned wait calibrated on Philly training VCs ({cal.label})"
        else:
            p50 = p90 = e.wait_s if not math.isfinite(e.wait_s) else max(e.wait_s, 0.0)
            basis_p = basis
        out[p] = replace(e, p50_s=p50, p90_s=p90, log_spread=s, basis=basis_p)
    return out


def _wquantile(pairs: Sequence[tuple[float, float]], q: float) -> float:
    """Weighted ``q``-quantile of (value, weight) pairs: the smallest value whose cumulative
    weight reaches ``q`` of the total."""
    items = sorted(pairs)
    total = sum(w for _, w in items)
    acc = 0.0
    for v, w in items:
        acc += w
        if acc >= q * total - 1e-12:
            return v
    return items[-1][0]


def fit_calibration(samples: Sequence[tuple[float, float, int, float, float]], s_bins: int,
                    size_edges: Sequence[int] = (), *, tau_s: float = 60.0, min_stratum: int = 20,
                    label: str = "") -> IntervalCalibration:
    """Fit an :class:`IntervalCalibration` on ``(plan wait, log-spread, devices, actual wait,
    weight)`` samples: ``s_bins`` bins of equal weight over the samples' log-spreads (ties merge
    bins), crossed with ``size_edges``; each stratum with at least ``min_stratum`` samples gets
    its own weighted 50% / 90% quantiles of ``log((wait + tau) / (plan + tau))``, the others the
    pooled quantiles (``fallback``)."""
    if s_bins < 1:
        raise ValueError(f"fit_calibration: s_bins must be >= 1, got {s_bins}")
    rows = [(p, s, d, w, wt) for p, s, d, w, wt in samples
            if math.isfinite(p) and p >= 0 and math.isfinite(w) and w >= 0 and wt > 0]
    if not rows:
        raise ValueError("fit_calibration: no usable samples (finite plan and wait >= 0, weight > 0)")
    spreads = [(s, wt) for _, s, _, _, wt in rows]
    edges = sorted({_wquantile(spreads, i / s_bins) for i in range(1, s_bins)})
    edges = [e for e in edges if e < max(s for s, _ in spreads)]  # an edge at the maximum: an empty top bin
    logs = [(math.log((w + tau_s) / (p + tau_s)), wt) for p, _, _, w, wt in rows]
    fallback = (_wquantile(logs, 0.5), _wquantile(logs, 0.9))
    size_t = tuple(sorted(size_edges))
    proto = IntervalCalibration(tuple(edges), size_t, {}, {}, fallback, tau_s, label)
    groups: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for (_p, s, d, _w, _wt), lw in zip(rows, logs, strict=True):
        groups.setdefault(proto.stratum(s, d), []).append(lw)
    q50 = {k: _wquantile(v, 0.5) for k, v in groups.items() if len(v) >= min_stratum}
    q90 = {k: _wquantile(v, 0.9) for k, v in groups.items() if len(v) >= min_stratum}
    return IntervalCalibration(tuple(edges), size_t, q50, q90, fallback, tau_s, label)


def calibration_from_json(body: Mapping[str, object], *,
                          monte_carlo: MonteCarloPlan | None = None) -> IntervalCalibration:
    """The inverse of :meth:`IntervalCalibration.to_json` (``monte_carlo``: how intervals are
    read from Monte-Carlo plans where they apply; not part of the fitted table)."""
    strata = body["strata"]
    if not isinstance(strata, list):
        raise ValueError("interval calibration: 'strata' must be a list")
    q50 = {(int(r[0]), int(r[1])): float(r[2]) for r in strata}
    q90 = {(int(r[0]), int(r[1])): float(r[3]) for r in strata}
    fb = body["fallback"]
    se, ze = body["s_edges"], body["size_edges"]
    if not (isinstance(fb, list) and isinstance(se, list) and isinstance(ze, list)):
        raise ValueError("interval calibration: 'fallback', 's_edges', 'size_edges' must be lists")
    tau = body.get("tau_s", 60.0)
    return IntervalCalibration(tuple(float(x) for x in se), tuple(int(x) for x in ze), q50, q90,
                               (float(fb[0]), float(fb[1])), float(tau) if isinstance(tau, (int, float)) else 60.0,
                               str(body.get("label", "")), monte_carlo)


#: How :meth:`QueueingScheduler.estimate` reads history intervals from Monte-Carlo plans
#: (``benchmarks/philly/protocol-intervals-v5.md``: 32 scenarios, the first 64 jobs ahead
#: exactly; the levels are the protocol's choice on the eight training VCs,
#: ``benchmarks/philly/results/intervals-mc-n2000/levels.json``: p50 = the scenarios' 70%
#: quantile, p90 = their maximum, the top of the grid).  It missed the protocol's goals: even
#: the latest of the 32 scenarios covered only 40% of the training VCs' starts (README "Wait
#: intervals", v5).  Opt-in (``replace(DEFAULT_CALIBRATION, monte_carlo=DEFAULT_MONTE_CARLO)``),
#: not the default: on the same replays the calibrated plan covered more (p90 coverage 0.55
#: against 0.42 pooled, p50 error 0.83 against 0.81) at a fifth of the cost (the scenarios cost
#: 4.4x the rest of an estimate).
DEFAULT_MONTE_CARLO = MonteCarloPlan(draws=32, depth=64, seed=0, p50_level=0.7, p90_level=1.0)

#: The calibration :meth:`QueueingScheduler.estimate` applies to history estimates: the
#: configuration chosen by ``protocol-intervals-v2.md``'s rule on the eight training VCs and
#: fitted on them (first 2,000 jobs per VC; ``benchmarks/philly/results/intervals-n2000/
#: calibration.json``, copied here).  Strata ``(s bin, size bin)``: ``s <= 0.068`` or above;
#: 1 / 2-8 / >8 devices.  It missed the protocol's goals out of sample (README "Wait intervals").
DEFAULT_CALIBRATION = calibration_from_json({
    "label": "s in 2 bins, size 1/2-8/>8, each waiter weighted 1",
    "tau_s": 60.0, "s_edges": [0.06829327587062212], "size_edges": [2, 9],
    "fallback": [0.19448735085091629, 1.3406192914020822],
    "strata": [
        [0, 0, 0.6642493405475125, 1.3057882960277376],
        [0, 1, 0.19426290080330144, 0.2199057117307337],
        [1, 0, 0.012114103951999721, 2.962370690482404],
        [1, 1, 0.12321315483799104, 0.4205626759207543],
        [1, 2, -0.24013986608228904, 0.8803834455190446],
    ],
})
