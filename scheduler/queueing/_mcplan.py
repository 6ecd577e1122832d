"""Monte-Carlo plans: the spread of a start estimate, from scenarios of the durations ahead.

The point plan books every job ahead at one number, its expected hold.  With history durations
each of those holds is uncertain, and the uncertainties compound along the plan: which job ends
first decides where the next one fits.  A Monte-Carlo plan replays the plan the estimate just
made (the kept exact plan, ``_walk.PlanCache``) ``draws`` times; in each scenario every running
job that holds devices against the target ends after a residual-life draw from its key's history
(``HistoryModel.draw``: ``min(D, cap) - done`` given ``D > done``, the tier budget as ``cap``),
every job ahead is given a drawn hold and booked at its earliest fit in the kept plan's order
(past ``depth`` jobs, their drawn device-seconds are fluid work, as the walk does past its
exact depth), and the target's start is read off as the point estimate reads it
(``_estimate.estimate_in``).  p50 / p90 are quantiles of the scenarios' waits
(:class:`MonteCarloPlan` ``p50_level`` / ``p90_level``).

Nothing here changes the engine: the scenarios are planned on copies, the random draws come
from a generator seeded by the job id (the same estimate gives the same interval), and no
scheduling decision reads them.  Where the kept plan does not describe the estimate (a policy
or queue outside its case, or an estimate with an explicit depth), :func:`scenario_waits`
answers ``None`` and the caller falls back (``_intervals``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ._estimate import estimate_in
from ._profile import Profile
from ._records import Job
from ._state import EngineState
from ._tiers import TierFit, budget, releasable, view_end
from ._types import JobState

__all__ = ["MonteCarloPlan", "scenario_waits"]

Waits = dict[str, npt.NDArray[np.float64]]


@dataclass(frozen=True)
class MonteCarloPlan:
    """How an interval is read from Monte-Carlo plans (see the module docstring).

    ``draws`` scenarios, the first ``depth`` jobs ahead planned exactly in each (the rest fluid),
    generator seeded by ``seed`` and the job id; p50 / p90 are the scenario waits' quantiles at
    ``p50_level`` / ``p90_level`` (linear between order statistics).  ``sink``, if given, is
    called with (job id, now, each pool's sorted scenario waits) for every interval made this
    way: a benchmark's record, never read by the engine."""

    draws: int = 32
    depth: int = 64
    seed: int = 0
    p50_level: float = 0.5
    p90_level: float = 0.9
    sink: Callable[[str, float, Mapping[str, npt.NDArray[np.float64]]], None] | None = field(
        default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.draws <= 4096:
            raise ValueError(f"Monte-Carlo plan: draws must be in 1..4096, got {self.draws!r}")
        if self.depth < 0:
            raise ValueError(f"Monte-Carlo plan: depth must be >= 0, got {self.depth!r}")
        if not 0.0 <= self.p50_level <= self.p90_level <= 1.0:
            raise ValueError("Monte-Carlo plan: levels need 0 <= p50_level <= p90_level <= 1, "
                             f"got {self.p50_level!r}, {self.p90_level!r}")

    def interval(self, waits: npt.NDArray[np.float64]) -> tuple[float, float]:
        """(p50, p90) of one pool's scenario waits."""
        if not len(waits):
            raise ValueError("Monte-Carlo plan: no scenario waits")
        if not np.isfinite(waits).all():
            # some scenario never fits: the quantiles that land there are infinite
            s = np.sort(waits)
            return _level(s, self.p50_level), _level(s, self.p90_level)
        q50, q90 = np.quantile(waits, (self.p50_level, self.p90_level))
        return max(0.0, float(q50)), max(0.0, float(q90))


def _level(sorted_waits: npt.NDArray[np.float64], level: float) -> float:
    """The quantile at ``level`` of sorted waits that may hold ``inf`` (inf where it lands there)."""
    pos = level * (len(sorted_waits) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    a, b = float(sorted_waits[lo]), float(sorted_waits[hi])
    if not math.isfinite(b):
        return math.inf if hi == lo or pos > lo else a
    return max(0.0, a + (b - a) * (pos - lo))


def _draws(model: Any, job: Job, done: float, cap: float, booked: float, rng: np.random.Generator,
           k: int) -> npt.NDArray[np.float64]:
    """``k`` drawn run times left for ``job`` (an exponential around ``booked`` without history)."""
    got = model.draw((job.spec.tenant, job.spec.devices), done, cap, rng, k)
    if got is not None:
        return np.asarray(got, dtype=np.float64)
    mean = max(booked, 0.0)
    out = rng.exponential(mean, k) if mean > 0 else np.zeros(k)
    return np.minimum(out, cap - done) if math.isfinite(cap) else out


def scenario_waits(st: EngineState, job: Job, now: float, mc: MonteCarloPlan, pools: Sequence[str]) -> Waits | None:
    """Per pool of ``pools``: the target's wait in each of ``mc.draws`` scenarios, or ``None``
    where the plan kept by the last walk is not this target's exact plan made at ``now`` by that
    walk (``PlanCache.fresh``), or the duration model cannot draw."""
    cache = st.plan_cache
    model = st.durations
    if cache is None or getattr(model, "draw", None) is None:
        return None
    last = getattr(cache, "target", None)
    if last is None or last.job_id != job.id or cache.at != now or not getattr(cache, "fresh", False):
        return None
    kind, level, q = cache.key[0], cache.key[1], cache.key[2]
    tiered = kind == "tiered"
    base: Mapping[str, Profile] = cache.base
    k = mc.draws
    rng = np.random.default_rng([mc.seed, zlib.crc32(job.id.encode())])
    # the running jobs, as the target's view releases them: (pool, devices, booked end, drawn ends)
    fixed: dict[str, list[tuple[float, int]]] = {p: [] for p in base}
    moved: dict[str, list[tuple[int, npt.NDArray[np.float64]]]] = {p: [] for p in base}
    for v in st.active.values():
        p = v.pool
        if p is None or p not in base:
            continue
        if tiered:
            end = view_end(st, v, now, level, q)
            drawn = v.state == JobState.RUNNING and not releasable(st, v, level, q, now)
            cap = v.progress(now) + budget(st, v, now, q) if v.klass.level == level else math.inf
        else:
            end = st.expected_end(v, now)
            drawn = v.state == JobState.RUNNING
            cap = math.inf
        if not drawn or not end > now:
            fixed[p].append((end, v.spec.devices))
            continue
        done = v.progress(now)
        moved[p].append((v.spec.devices, now + _draws(model, v, done, cap, end - now, rng, k)))
    # the jobs ahead, in the kept plan's order: the first ``depth`` exactly, the rest fluid
    exact: list[tuple[str, int, npt.NDArray[np.float64]]] = []
    fluid = {p: np.zeros(k) for p in base}
    for i, b in enumerate(cache.jobs):
        v = st.jobs[b.job_id]
        cap = v.work_s + budget(st, v, now, q) if tiered else math.inf
        holds = _draws(model, v, v.work_s, cap, b.hold, rng, k)
        if i < mc.depth:
            exact.append((b.pool, b.n, holds))
        elif b.pool in fluid:
            fluid[b.pool] += holds * b.n
    hold = last.hold
    free = {p: st.pool_free(p) for p in base}  # as the view's base: free now, then the releases
    fixed_arr = {p: (np.array([e for e, _ in fixed[p]], dtype=np.float64),
                     np.array([n for _, n in fixed[p]], dtype=np.int64)) for p in base}
    moved_n = {p: np.array([n for n, _ in moved[p]], dtype=np.int64) for p in base}
    moved_ends = {p: (np.stack([e for _, e in moved[p]]) if moved[p] else np.zeros((0, k))) for p in base}
    want = [p for p in pools if p in base]
    adm = {p: st.admit_planned(job, p, {}) for p in want}
    full = st.duration(job)
    out: Waits = {p: np.empty(k) for p in want}
    for s in range(k):
        prof = {}
        for p in base:
            ends = np.concatenate((fixed_arr[p][0], moved_ends[p][:, s]))
            ns = np.concatenate((fixed_arr[p][1], moved_n[p]))
            prof[p] = Profile.from_releases(now, free[p], ends, ns)
        for p, n, holds in exact:
            h = float(holds[s])
            pr = prof[p]
            at = now if pr.fits(now, h, n) else pr.earliest(n, h)
            if math.isfinite(at):
                pr.add(at, at + h, n)
        for p in want:
            if tiered:
                fit = TierFit(prof[p], [], hold, full)
                e = estimate_in(st, job, p, prof[p], now, float(fluid[p][s]), adm[p], {}, hold=hold,
                                alone_prof=base[p], fit=fit)
            else:
                e = estimate_in(st, job, p, prof[p], now, float(fluid[p][s]), adm[p], {}, alone_prof=base[p])
            out[p][s] = e.wait_s
    for p in want:
        out[p].sort()
    if mc.sink is not None:
        mc.sink(job.id, now, out)
    return out
