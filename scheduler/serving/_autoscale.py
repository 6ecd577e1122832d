"""Autoscaling: one protocol, a reactive (HPA-like) and a predictive autoscaler, capacity and the oracle.

An :class:`Autoscaler` is asked every ``sync_s`` seconds how many replicas the service should
have, from a :class:`ServingSnapshot` (what an operator could observe: arrivals and their
prompt tokens so far, finished requests and their output tokens, the queue, outstanding
requests, ready and starting replicas, KV use) and the current replica count (ready + starting
+ replica jobs waiting for placement).  It never sees the future: output lengths are known only
once generated.

**Work tokens.**  Prefill and decode cost very different times per token, so load is counted
in *work tokens*: prompt tokens plus ``decode_weight`` x output tokens, where
:func:`decode_weight` is the cost profile's own ratio of a decode token's time (a step at batch
64 over 64) to a prefill token's (8192 tokens' prefill over 8192): 7.6 for Llama-2-70B on H100.

- :class:`ReactiveHPA`: Kubernetes' HPA rule (serving.md K1): ``desired = ceil(current x metric
  / target)`` on the average over the current replicas (starting ones count as 0, as HPA
  counts not-ready pods on scale-up), no change within a tolerance of 0.1, scale-up at once,
  scale-down to the highest recommendation of the last 300 s (stabilisation window), sync 15 s.
  Neither autoscaler scales down before it has observed for its window: the replicas it starts
  with were set by the same controller before the observed period began.
- :class:`Predictive`: forecasts the work-token arrival rate at ``now + lead_s`` (lead = model
  start-up + sync period + any preemption grace: when a replica asked for now would serve) from
  a least-squares line over the last ``trend_s`` (600 s) of arrivals, never below the last
  ``short_s`` (60 s) rate; provisions the fewest replicas whose capacity carries
  ``(1 + headroom) x forecast`` plus the queued prefill work within ``drain_s``; scales up at
  once, and down only to the highest need of the last ``down_window_s`` (a replica given up
  costs a full start-up to get back).  Optionally (``error_quantile``) its headroom is a
  quantile of its own recent forecast errors at that lead; (``noise_z``) at least ``z`` times
  the spread of the last minute's rate around the trend (an upper quantile of the load rather
  than its mean); and (``down_band``) a hysteresis band: the need it *keeps* is computed with
  ``down_band`` more headroom than the need it scales up to, so a load sitting just under a
  replica boundary does not give a replica up only to ask for it again a few syncs later (at a
  2 s objective, each such round trip leaves the service a replica short for a start-up).
- :func:`measure_capacity`: a replica's capacity in work tokens per second *at the objective*,
  measured from the simulator: the highest steady rate at which ``replicas`` warm replicas still
  meet the objective for ``target`` of requests on a sample of the trace (its requests given
  seeded Poisson arrivals, the rate found by bisection), divided by ``replicas``;
  :func:`measure_capacities` does it at several replica counts (:class:`Capacity`).
- :func:`oracle_plan`: see its docstring.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ._costmodel import CostProfile
from ._errors import InvalidRequestError
from ._operator import OperatorProfile
from ._routers import Router
from ._sim import Objective, ReplicaChange, ReplicaSpec, ServingRequest, ServingSnapshot, simulate

__all__ = [
    "Autoscaler",
    "Capacity",
    "OraclePlan",
    "Predictive",
    "ReactiveHPA",
    "decode_weight",
    "fit_oracle",
    "measure_capacities",
    "measure_capacity",
    "oracle_plan",
    "prefill_rate",
    "work_tokens",
]


#: Context per request assumed when an operator profile prices a decode token (its decode step
#: depends on the KV tokens read; a whole-iteration table does not).
DECODE_WEIGHT_CONTEXT_TOKENS = 1024


def decode_weight(profile: CostProfile | OperatorProfile) -> float:
    """Time of one decode token (a batch-64 step / 64) over one prefill token (8192 tokens / 8192).

    With an :class:`OperatorProfile` (engine replicas) the step's 64 requests hold
    :data:`DECODE_WEIGHT_CONTEXT_TOKENS` KV tokens each.
    """
    if isinstance(profile, OperatorProfile):
        step = profile.decode_step_seconds(64, 64 * DECODE_WEIGHT_CONTEXT_TOKENS)
    else:
        step = profile.decode_step_seconds(64)
    return (step / 64.0) / (profile.prefill_seconds(8192) / 8192.0)


def prefill_rate(profile: OperatorProfile, token_budget: int) -> float:
    """Prompt tokens per second one replica prefills in chunks of ``token_budget`` (nothing cached)."""
    if token_budget < 1:
        raise InvalidRequestError(f"token_budget must be >= 1, got {token_budget}", field="token_budget")
    return token_budget / profile.prefill_seconds(token_budget)


def work_tokens(prompt_tokens: int, output_tokens: float, weight: float) -> float:
    """Prompt tokens plus ``weight`` x output tokens (see the module doc)."""
    return prompt_tokens + weight * output_tokens


@dataclass(frozen=True)
class Capacity:
    """Work tokens per second one replica carries at the objective, measured at replica counts.

    Per-replica capacity grows with the replica count (more replicas pool the bursts), so it is
    measured at several counts (:func:`measure_capacities`) and read piecewise-linearly between
    them, flat outside.  :meth:`replicas_for` is the fewest replicas whose total carries a rate.
    """

    points: tuple[tuple[int, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise InvalidRequestError("capacity needs at least one (replicas, tokens/s) point", field="points")
        ns = [n for n, _ in self.points]
        if any(n < 1 for n in ns) or ns != sorted(set(ns)):
            raise InvalidRequestError("capacity points need ascending, distinct replica counts >= 1", field="points")
        for _, c in self.points:
            _positive(c, "capacity")

    @classmethod
    def of(cls, capacity: float | Capacity) -> Capacity:
        return capacity if isinstance(capacity, Capacity) else cls(((1, float(capacity)),))

    def per_replica(self, n: int) -> float:
        pts = self.points
        if n <= pts[0][0]:
            return pts[0][1]
        for (n0, c0), (n1, c1) in itertools.pairwise(pts):
            if n <= n1:
                return c0 + (c1 - c0) * (n - n0) / (n1 - n0)
        return pts[-1][1]

    def replicas_for(self, rate: float, *, limit: int = 100_000) -> int:
        """The fewest replicas ``n`` with ``n x per_replica(n) >= rate`` (0 for no load)."""
        n = 0
        while n * self.per_replica(max(n, 1)) < rate - 1e-9:
            n += 1
            if n >= limit:
                return limit
        return n


@runtime_checkable
class Autoscaler(Protocol):
    """Decides a service's replica count every ``sync_s`` seconds from what can be observed."""

    name: str
    sync_s: float

    def decide(self, obs: ServingSnapshot, current: int) -> int:
        """The desired replica count (the caller clamps it to the service's bounds)."""
        ...


def _positive(value: float, name: str) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise InvalidRequestError(f"{name} must be a positive number, got {value!r}", field=name)


class ReactiveHPA:
    """Kubernetes' Horizontal Pod Autoscaler rule on one serving metric (see the module doc).

    ``metric="outstanding"``: outstanding requests per replica, ``target`` requests;
    ``metric="kv"``: KV-cache utilisation of the ready replicas (held / capacity), ``target`` in
    (0, 1].  Defaults are HPA's: tolerance 0.1, scale-down stabilisation 300 s, sync 15 s.
    """

    def __init__(self, target: float, *, metric: Literal["outstanding", "kv"] = "outstanding",
                 tolerance: float = 0.1, stabilization_s: float = 300.0, sync_s: float = 15.0) -> None:
        _positive(target, "target")
        _positive(sync_s, "sync_s")
        if metric not in ("outstanding", "kv"):
            raise InvalidRequestError(f"unknown HPA metric {metric!r}", field="metric")
        if metric == "kv" and target > 1:
            raise InvalidRequestError(f"a KV utilisation target is in (0, 1], got {target}", field="target")
        if not 0 <= tolerance < 1 or stabilization_s < 0:
            raise InvalidRequestError("tolerance must be in [0, 1) and stabilization_s >= 0", field="tolerance")
        self.target = target
        self.metric = metric
        self.tolerance = tolerance
        self.stabilization_s = stabilization_s
        self.sync_s = sync_s
        self.name = f"hpa-{metric}"
        self._recs: deque[tuple[float, int]] = deque()
        self._first: float | None = None

    def recommend(self, obs: ServingSnapshot, current: int) -> int:
        """HPA's raw recommendation, before stabilisation."""
        total = float(obs.outstanding) if self.metric == "outstanding" else obs.kv_utilization * obs.ready
        if current <= 0:
            return math.ceil(total / self.target) if total > 0 else 0
        ratio = total / current / self.target
        if abs(ratio - 1.0) <= self.tolerance:
            return current
        return math.ceil(current * ratio - 1e-9)

    def decide(self, obs: ServingSnapshot, current: int) -> int:
        rec = self.recommend(obs, current)
        self._recs.append((obs.now, rec))
        while self._recs and self._recs[0][0] < obs.now - self.stabilization_s:
            self._recs.popleft()
        if self._first is None:
            self._first = obs.now
        if rec > current:
            return rec  # scale-up: no stabilisation window
        if obs.now - self._first < self.stabilization_s:
            return current  # the window's history predates this controller: it chose ``current``
        return min(current, max(r for _, r in self._recs))


class Predictive:
    """Scales on the forecast work-token rate at the time a new replica would serve (module doc).

    ``capacity``: work tokens per second one replica carries at the objective
    (:func:`measure_capacities`); ``weight``: :func:`decode_weight`; ``lead_s``: start-up + sync
    (+ grace); the output tokens of requests not yet finished are estimated by the mean output
    of those finished so far (``prior_output`` until any has).  The forecast is the fitted rate
    now plus ``trend_weight`` x slope x ``lead_s`` (1: follow the trend the whole lead; lower
    damps an extrapolation that reaches further ahead than the fit looked back), and never
    below the last ``short_s`` rate.  With ``error_quantile`` the autoscaler scores itself: each
    forecast is compared, ``lead_s`` later, with the rate then seen, and the headroom becomes
    that quantile of the relative errors of the last ``error_window_s`` (never below
    ``headroom``): it provisions for the load it has recently failed to foresee.

    ``noise_z``: the headroom is also at least ``noise_z`` x :meth:`noise`, the root mean square
    of the relative gap between the last ``noise_s`` rate and the fitted trend, over the last
    ``noise_window_s`` (so it provisions for an upper quantile of the minute-scale load, not
    for its mean).  ``down_band``: scale-down hysteresis; the scale-down window remembers the
    need at ``down_band`` more headroom, so replicas are given up only when the load has been
    clearly, not marginally, below what they serve for ``down_window_s``.
    """

    def __init__(self, capacity: float | Capacity, weight: float, lead_s: float, *, headroom: float = 0.1,
                 short_s: float = 60.0, trend_s: float = 600.0, drain_s: float = 60.0,
                 down_window_s: float = 120.0, prior_output: float = 256.0, trend_weight: float = 1.0,
                 error_quantile: float | None = None, error_window_s: float = 1800.0,
                 noise_z: float | None = None, noise_s: float = 60.0, noise_window_s: float = 1800.0,
                 down_band: float = 0.0, sync_s: float = 15.0, ttft_s: float | None = None,
                 prefill_tokens_per_s: float | None = None, queue_absorb: float = 0.5) -> None:
        self.capacity = Capacity.of(capacity)
        if (ttft_s is None) != (prefill_tokens_per_s is None):
            raise InvalidRequestError("the queue-aware term needs both ttft_s and prefill_tokens_per_s",
                                      field="ttft_s")
        if ttft_s is not None and prefill_tokens_per_s is not None:
            _positive(ttft_s, "ttft_s")
            _positive(prefill_tokens_per_s, "prefill_tokens_per_s")
        if not 0 <= queue_absorb <= 1:
            raise InvalidRequestError(f"queue_absorb must be in [0, 1], got {queue_absorb!r}", field="queue_absorb")
        self.ttft_s = ttft_s
        self.prefill_tokens_per_s = prefill_tokens_per_s
        self.queue_absorb = queue_absorb
        for value, name in ((weight, "weight"), (short_s, "short_s"),
                            (trend_s, "trend_s"), (drain_s, "drain_s"), (sync_s, "sync_s")):
            _positive(value, name)
        if lead_s < 0 or headroom < 0 or down_window_s < 0 or prior_output < 0 or not 0 <= trend_weight <= 1:
            raise InvalidRequestError("lead_s, headroom, down_window_s and prior_output must be >= 0 and "
                                      "trend_weight in [0, 1]", field="lead_s")
        self.trend_weight = trend_weight
        if error_quantile is not None and not 0 < error_quantile < 1:
            raise InvalidRequestError(f"error_quantile must be in (0, 1), got {error_quantile}",
                                      field="error_quantile")
        _positive(error_window_s, "error_window_s")
        if noise_z is not None and not (noise_z >= 0 and math.isfinite(noise_z)):
            raise InvalidRequestError(f"noise_z must be a finite number >= 0, got {noise_z!r}", field="noise_z")
        _positive(noise_s, "noise_s")
        _positive(noise_window_s, "noise_window_s")
        if not (down_band >= 0 and math.isfinite(down_band)):
            raise InvalidRequestError(f"down_band must be a finite number >= 0, got {down_band!r}", field="down_band")
        self.down_band = down_band
        self.noise_z = noise_z
        self.noise_s = noise_s
        self.noise_window_s = noise_window_s
        self._noise: deque[tuple[float, float]] = deque()  # (time, last noise_s rate / trend there - 1)
        self.error_quantile = error_quantile
        self.error_window_s = error_window_s
        self._forecasts: deque[tuple[float, float]] = deque()  # (time it is for, forecast rate)
        self._errors: deque[tuple[float, float]] = deque()  # (time, realised / forecast - 1)
        self.weight = weight
        self.lead_s = lead_s
        self.headroom = headroom
        self.short_s = short_s
        self.trend_s = trend_s
        self.drain_s = drain_s
        self.down_window_s = down_window_s
        self.prior_output = prior_output
        self.sync_s = sync_s
        self.name = "predictive"
        self._hist: deque[tuple[float, float]] = deque()  # (time, cumulative arrived work tokens)
        self._needs: deque[tuple[float, int]] = deque()
        self._first: float | None = None

    def _rate_since(self, now: float, work: float, span: float) -> float:
        """Work-token arrival rate over the last ``span`` seconds of history."""
        t0, w0 = self._hist[0]
        for t, w in self._hist:
            if t >= now - span:
                break
            t0, w0 = t, w
        return (work - w0) / (now - t0) if now > t0 else 0.0

    def forecast(self, obs: ServingSnapshot) -> float:
        """Forecast work-token rate at ``now + lead_s`` (also records the observation)."""
        mean_out = obs.finished_output_tokens / obs.finished if obs.finished else self.prior_output
        work = obs.arrived_prompt_tokens + self.weight * mean_out * obs.arrived
        now = obs.now
        self._hist.append((now, work))
        while len(self._hist) > 2 and self._hist[1][0] <= now - self.trend_s:
            self._hist.popleft()
        if len(self._hist) < 2:
            return 0.0
        # rates over consecutive sync intervals, fitted by least squares against their midpoints
        pts = [((a[0] + b[0]) / 2, (b[1] - a[1]) / (b[0] - a[0]))
               for a, b in zip(self._hist, list(self._hist)[1:], strict=False) if b[0] > a[0]]
        short = self._rate_since(now, work, self.short_s)
        if now - self._hist[0][0] < self.trend_s - self.sync_s:
            return short  # a trend over less than its window is mostly noise, extrapolated far

        n = len(pts)
        mx = sum(p[0] for p in pts) / n
        my = sum(p[1] for p in pts) / n
        sxx = sum((p[0] - mx) ** 2 for p in pts)
        slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx > 0 else 0.0
        level = my + slope * (now - mx)  # the fitted rate now
        ahead = max(short, level + self.trend_weight * slope * self.lead_s)
        self._score(now, short, ahead)
        self._record_noise(now, work, level - slope * self.noise_s / 2.0)
        return ahead

    def _record_noise(self, now: float, work: float, trend: float) -> None:
        """Remember how far the last ``noise_s`` of arrivals ran from the fitted trend there."""
        if trend <= 0 or now - self._hist[0][0] < self.noise_s:
            return
        self._noise.append((now, self._rate_since(now, work, self.noise_s) / trend - 1.0))
        while self._noise and self._noise[0][0] < now - self.noise_window_s:
            self._noise.popleft()

    def noise(self) -> float:
        """Root mean square of the recent relative deviations of the ``noise_s`` rate from the
        trend (0 until 8 have been seen): the load's spread around what the trend foresees."""
        if len(self._noise) < 8:
            return 0.0
        return math.sqrt(sum(e * e for _, e in self._noise) / len(self._noise))

    def _score(self, now: float, realised: float, ahead: float) -> None:
        """Compare forecasts made ``lead_s`` ago with the rate seen now; remember this one."""
        while self._forecasts and self._forecasts[0][0] <= now:
            _, was = self._forecasts.popleft()
            if was > 0:
                self._errors.append((now, realised / was - 1.0))
        while self._errors and self._errors[0][0] < now - self.error_window_s:
            self._errors.popleft()
        self._forecasts.append((now + self.lead_s, ahead))

    def headroom_now(self) -> float:
        """``headroom``, raised to ``noise_z`` x :meth:`noise` with a noise term, and with
        ``error_quantile`` to that quantile of the forecaster's own recent relative errors at
        this lead (how far the load has run above what it foresaw), once it has scored at least
        10 forecasts."""
        room = self.headroom
        if self.noise_z is not None:
            room = max(room, self.noise_z * self.noise())
        if self.error_quantile is None or len(self._errors) < 10:
            return room
        errs = sorted(e for _, e in self._errors)
        k = min(len(errs) - 1, max(0, math.ceil(self.error_quantile * len(errs)) - 1))
        return max(room, errs[k])

    def queue_wait_s(self, obs: ServingSnapshot) -> float | None:
        """Predicted wait of the queue: its prompt tokens over the ready replicas' prefill rate
        (``None`` without the queue-aware term)."""
        if self.prefill_tokens_per_s is None:
            return None
        return obs.queued_prompt_tokens / (max(obs.ready, 1) * self.prefill_tokens_per_s)

    def queue_rate(self, obs: ServingSnapshot) -> float:
        """Work-token rate that clears the queued prefill work in ``drain_s``.

        Queue-aware (``ttft_s`` and ``prefill_tokens_per_s`` given): only the backlog beyond what
        the objective absorbs counts, i.e. beyond ``queue_absorb`` x ``ttft_s`` seconds of the
        ready replicas' prefill.  A backlog that waits well within the TTFT bound (a few long
        prompts at a 30 s bound) is served in time by the replicas already there; counting it
        as load would buy a replica for a queue that drains in seconds.
        """
        queued = float(obs.queued_prompt_tokens)
        if self.ttft_s is not None and self.prefill_tokens_per_s is not None:
            tolerated = self.queue_absorb * self.ttft_s * max(obs.ready, 1) * self.prefill_tokens_per_s
            queued = max(0.0, queued - tolerated)
        return queued / self.drain_s

    def need(self, obs: ServingSnapshot) -> int:
        """Replicas for the forecast load with headroom, plus those that clear the queue in ``drain_s``."""
        return self._needs_now(obs)[0]

    def _needs_now(self, obs: ServingSnapshot) -> tuple[int, int]:
        """(need to scale up to, need to keep): the second adds ``down_band`` to the headroom."""
        rate = self.forecast(obs)
        room = self.headroom_now()
        queue = self.queue_rate(obs)
        up = self.capacity.replicas_for(rate * (1.0 + room) + queue)
        if self.down_band <= 0:
            return up, up
        return up, self.capacity.replicas_for(rate * (1.0 + room + self.down_band) + queue)

    def decide(self, obs: ServingSnapshot, current: int) -> int:
        need, keep = self._needs_now(obs)
        self._needs.append((obs.now, keep))
        while self._needs and self._needs[0][0] < obs.now - self.down_window_s:
            self._needs.popleft()
        if self._first is None:
            self._first = obs.now
        if need >= current:
            return need
        if obs.now - self._first < max(self.down_window_s, self.short_s):
            return current  # too little history to give replicas up
        return min(current, max(n for _, n in self._needs))


def measure_capacity(requests: Sequence[ServingRequest], spec: ReplicaSpec, router: Callable[[], Router],
                     objective: Objective, weight: float, *, replicas: int = 4, target: float | None = None,
                     iterations: int = 10, arrivals: Literal["trace", "poisson"] = "poisson",
                     seed: int = 0) -> float:
    """Work tokens per second one replica carries while ``target`` of requests meet ``objective``.

    ``replicas`` warm replicas serve ``requests`` with arrival times scaled by a factor found by
    bisection (geometric, ``iterations`` steps): the largest load whose attainment is still at
    least ``target`` (default: the objective's percentile).  Returns that load's mean work-token
    rate over the sample's span, divided by ``replicas``.

    ``arrivals="poisson"`` (default) keeps the sample's requests (sizes, prefixes, order) but
    gives them Poisson arrivals at the sample's mean rate (seeded, so deterministic): a
    *stationary* load, so the result is what a replica carries at a steady rate.  With
    ``"trace"`` the sample's own burstiness is kept, which folds its peak-to-mean ratio into
    the capacity (a per-bin plan built on it would count bursts twice).
    """
    if not requests:
        raise InvalidRequestError("capacity needs a non-empty request sample", field="requests")
    if replicas < 1 or iterations < 1:
        raise InvalidRequestError("replicas and iterations must be >= 1", field="replicas")
    goal = objective.percentile if target is None else target
    t0 = min(r.arrival_s for r in requests)
    span = max(r.arrival_s for r in requests) - t0
    if span <= 0:
        raise InvalidRequestError("the sample's arrivals must span some time", field="requests")
    work = sum(work_tokens(r.prompt_tokens, r.output_tokens, weight) for r in requests)

    ordered = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
    if arrivals == "poisson":
        rng = random.Random(seed)
        mean_gap = span / max(1, len(ordered) - 1)
        times, t = [], 0.0
        for _ in ordered:
            times.append(t)
            t += rng.expovariate(1.0 / mean_gap)
        span = times[-1] if times[-1] > 0 else span
    elif arrivals == "trace":
        times = [r.arrival_s - t0 for r in ordered]
    else:
        raise InvalidRequestError(f"arrivals must be 'trace' or 'poisson', not {arrivals!r}", field="arrivals")

    def ok(scale: float) -> bool:
        reqs = [ServingRequest(r.request_id, at * scale, r.prompt_tokens, r.output_tokens, r.hash_ids)
                for r, at in zip(ordered, times, strict=True)]
        return simulate(reqs, router(), [spec] * replicas).attainment(objective) >= goal

    lo, hi = 1.0, 1.0  # lo: a scale that meets the goal (slower arrivals), hi: one that does not
    while not ok(lo):
        lo *= 2.0
        if lo > 1e6:
            raise InvalidRequestError("the objective is not met even at a trickle of load", field="objective")
    hi = lo
    while ok(hi):
        hi /= 2.0
        if hi < 1e-6:
            break
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return work / (span * lo) / replicas


def measure_capacities(requests: Sequence[ServingRequest], spec: ReplicaSpec, router: Callable[[], Router],
                       objective: Objective, weight: float, *, replicas: Sequence[int] = (2, 4, 8, 16),
                       target: float | None = None, iterations: int = 7,
                       arrivals: Literal["trace", "poisson"] = "poisson") -> Capacity:
    """:func:`measure_capacity` at each replica count: a :class:`Capacity` table."""
    return Capacity(tuple((n, measure_capacity(requests, spec, router, objective, weight, replicas=n,
                                               target=target, iterations=iterations, arrivals=arrivals))
                          for n in sorted(set(replicas))))


@dataclass(frozen=True)
class OraclePlan:
    """The oracle's replica schedule (:func:`oracle_plan`)."""

    bin_s: float
    #: Replicas the load of each bin needs (clamped to the bounds).
    need: tuple[int, ...]
    #: Replicas warm at time 0, and adds/removes (adds ``startup_s`` before the bin needing them).
    initial: int
    changes: tuple[ReplicaChange, ...]
    #: Replica-seconds from placement (start-ups paid) to removal, up to the end of the last bin.
    replica_seconds: float


def oracle_plan(requests: Sequence[ServingRequest], capacity: float | Capacity, weight: float, spec: ReplicaSpec, *,
                bin_s: float = 60.0, min_replicas: int = 1, max_replicas: int | None = None,
                end_s: float | None = None) -> OraclePlan:
    """The fewest replica-seconds that give every bin replicas whose capacity carries its load.

    With the load known in advance: bin ``b`` needs ``n_b = ceil(work_b / (bin_s x capacity))``
    replicas (work tokens of the requests arriving in it, true output lengths; with a
    :class:`Capacity` table, the fewest ``n`` whose ``n x per_replica(n)`` carries it; clamped to
    ``[min_replicas, max_replicas]``).  A schedule is *feasible* when at least ``n_b`` replicas
    are ready throughout every bin; a replica serves ``spec.startup_s`` after it is placed and
    holds its devices from placement.  Replicas are interchangeable, so any feasible schedule
    splits into levels (level ``k`` = the ``k``-th replica, needed in the bins where
    ``n_b >= k``) and its cost is at least the sum over levels of each level's cheapest cover: a
    level's bins as intervals, where a gap of ``g`` seconds between two of them costs
    ``min(g, startup)`` (keep the replica, or stop it and place a new one ``startup`` early) and
    an interval starting after time 0 costs a start-up.  This plan is that sum, so it is the
    minimum over feasible schedules.  A level needed within the first ``startup`` seconds is warm
    at time 0 (every autoscaler in a comparison starts with those replicas warm).

    It is a bound *relative to the capacity model*: whether the plan meets the objective is a
    separate question, answered by simulating :attr:`OraclePlan.changes`.
    """
    cap = Capacity.of(capacity)
    _positive(bin_s, "bin_s")
    if min_replicas < 0 or (max_replicas is not None and max_replicas < max(1, min_replicas)):
        raise InvalidRequestError("bounds need 0 <= min_replicas <= max_replicas, max >= 1", field="max_replicas")
    last = max((r.arrival_s for r in requests), default=0.0)
    end = last if end_s is None else end_s
    bins = max(1, math.ceil(end / bin_s - 1e-9))
    work = [0.0] * bins
    for r in requests:
        b = min(int(r.arrival_s // bin_s), bins - 1)
        work[b] += work_tokens(r.prompt_tokens, r.output_tokens, weight)
    top = max_replicas if max_replicas is not None else 10**9
    need = tuple(min(top, max(min_replicas, cap.replicas_for(w / bin_s))) for w in work)
    startup = spec.startup_s
    changes: list[ReplicaChange] = []
    initial = 0
    cost = 0.0
    next_id = 0
    events: list[tuple[float, int, int, str]] = []  # (time, order, level, action)
    for level in range(1, max(need, default=0) + 1):
        spans: list[list[float]] = []
        for b, n in enumerate(need):
            if n < level:
                continue
            s, e = b * bin_s, (b + 1) * bin_s
            if spans and s - spans[-1][1] <= startup:
                spans[-1][1] = e  # keep the replica over a gap no longer than a start-up
            else:
                spans.append([s, e])
        for s, e in spans:
            if s - startup <= 0:
                initial += 1
                cost += e
                events.append((e, 0, level, "remove"))
            else:
                cost += e - s + startup
                events.append((s - startup, 1, level, "add"))
                events.append((e, 0, level, "remove"))
    # warm replicas get ids 0..initial-1, added ones ids from ``initial`` on, in time order
    warm_ids = list(range(initial))
    live: dict[int, list[int]] = {}
    wi = 0
    next_id = initial
    for level in range(1, max(need, default=0) + 1):
        live[level] = []
    for t, _order, level, action in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        if action == "add":
            changes.append(ReplicaChange(t, "add", next_id, spec))
            live[level].append(next_id)
            next_id += 1
        else:
            if live[level]:
                rid = live[level].pop()
            else:
                rid = warm_ids[wi]
                wi += 1
            if t < bins * bin_s:
                changes.append(ReplicaChange(t, "remove", rid))
    return OraclePlan(bin_s, need, initial, tuple(sorted(changes, key=lambda c: (c.time_s, c.action != "remove"))),
                      cost)


def fit_oracle(requests: Sequence[ServingRequest], capacity: float | Capacity, weight: float, spec: ReplicaSpec,
               router: Callable[[], Router], objective: Objective, *, target: float | None = None,
               window: tuple[float, float] | None = None, bin_s: float = 60.0, min_replicas: int = 1,
               max_replicas: int | None = None, end_s: float | None = None,
               iterations: int = 6) -> tuple[OraclePlan, float]:
    """The cheapest :func:`oracle_plan` whose simulation meets the objective, and its derating.

    Plans are built on ``f x capacity`` for a derating ``f`` in (0, 1]; each is simulated
    (``router()``, the plan's changes) and its attainment over the requests arriving in
    ``window`` (default: all) compared with ``target`` (default: the objective's percentile).
    Returns the plan at the largest ``f`` found by bisection that meets it (``f = 1`` if the
    measured capacity already does).  Raises :class:`InvalidRequestError` when even
    ``max_replicas`` everywhere does not meet it.
    """
    goal = objective.percentile if target is None else target
    cap = Capacity.of(capacity)
    lo_t, hi_t = window if window is not None else (-math.inf, math.inf)

    def attempt(f: float) -> tuple[OraclePlan, bool]:
        scaled = Capacity(tuple((n, c * f) for n, c in cap.points))
        plan = oracle_plan(requests, scaled, weight, spec, bin_s=bin_s, min_replicas=min_replicas,
                           max_replicas=max_replicas, end_s=end_s)
        res = simulate(requests, router(), [spec] * plan.initial, changes=list(plan.changes))
        outs = [o for o in res.outcomes if lo_t <= o.arrival_s < hi_t]
        total = len(outs) + len(res.unserved)  # an unserved request counts as missed
        att = sum(objective.attained(o) for o in outs) / total if total else 1.0
        return plan, att >= goal

    plan, ok = attempt(1.0)
    if ok:
        return plan, 1.0
    good: tuple[OraclePlan, float] | None = None
    lo, hi = 0.0, 1.0  # hi fails; find a passing lo
    f = 0.5
    while good is None:
        plan, ok = attempt(f)
        if ok:
            good, lo = (plan, f), f
        else:
            if (max_replicas is not None and min(plan.need) >= max_replicas) or f < 1e-12:
                raise InvalidRequestError("no oracle plan meets the objective, not even the largest",
                                          field="objective")
            hi = f
            f /= 2.0
    for _ in range(iterations):
        mid = (lo + hi) / 2.0
        plan, ok = attempt(mid)
        if ok:
            good, lo = (plan, mid), mid
        else:
            hi = mid
    return good
