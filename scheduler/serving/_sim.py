"""A deterministic, discrete-event, request-level serving simulator.

Replicas serve with continuous batching, as vLLM does without chunked prefill:

- A replica runs one *iteration* at a time.  If requests wait and the next one fits, the
  iteration is a **prefill**: it admits waiting requests in arrival order (first come, first
  served, stopping at the first that does not fit) while their uncached tokens total at most
  ``max_prefill_tokens`` (at least one request), looks each prompt up in the replica's
  :class:`PrefixCache` (hit = leading cached blocks), and takes
  ``profile.prefill_seconds(sum of uncached tokens)``.  Each admitted request's first token is
  out when the prefill ends (TTFT = that time - arrival).
- Otherwise, with requests running, the iteration is a **decode step**: one token for each of
  the ``b`` running requests, taking ``profile.decode_step_seconds(b)``.  A request finishes
  after ``output_tokens - 1`` steps past its first token; TPOT = (end - first token) /
  (output tokens - 1).
- **KV capacity bounds the batch**: a request is admitted only if the running requests' prompt
  plus output tokens, with its own, fit in ``capacity_blocks x block_tokens`` (the whole output
  is reserved at admission, so nothing is ever preempted) and the batch has fewer than
  ``max_batch`` requests (vLLM's ``max_num_seqs``, default 256).  A request that could not fit
  even in an empty replica is refused up front with :class:`InvalidRequestError`.
  The prefix cache has the same capacity in blocks: in an engine the running requests' blocks
  *are* cache blocks, and they are the most recently used ones.
- A new arrival joins at the next iteration boundary; an idle replica starts at once.

The replica set changes over time through :class:`ReplicaChange`: an ``add`` makes a replica
that becomes ready (routable) ``startup_s`` later (model load; the data file cites published
load times); a ``remove`` drains it: it takes no new requests, its running requests finish
there, and its queued (not yet admitted) requests are handed back to the router at the removal
time and keep their arrival time.  Requests that arrive while no replica is ready wait at the
router until one is; any still waiting when the run ends are reported in
:attr:`ServingResult.unserved` (a partial result, never silently dropped).

Same inputs, same outputs: no randomness, ties broken by replica id.
"""

from __future__ import annotations

import csv
import heapq
import json
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from ._cache import PrefixCache
from ._costmodel import DEFAULT_BLOCK_TOKENS, DEFAULT_MEMORY_UTILIZATION, CostProfile, cache_blocks
from ._engine import ChunkedReplica, EngineConfig, gap_seconds
from ._errors import InvalidRequestError
from ._routers import ReplicaLoad, Router

__all__ = [
    "HitReplay",
    "Objective",
    "ReplicaChange",
    "ReplicaSpec",
    "RequestOutcome",
    "ServingRequest",
    "ServingResult",
    "ServingSim",
    "ServingSnapshot",
    "load_azure",
    "load_mooncake",
    "percentile",
    "replay_hits",
    "simulate",
]


@dataclass(frozen=True)
class ServingRequest:
    """One inference request: arrival, prompt and output lengths, prompt block hashes."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.prompt_tokens < 0:
            raise InvalidRequestError(
                f"request {self.request_id}: prompt tokens < 0 ({self.prompt_tokens})", field="prompt_tokens"
            )
        if self.output_tokens < 1:
            raise InvalidRequestError(
                f"request {self.request_id}: output tokens must be >= 1 ({self.output_tokens})", field="output_tokens"
            )
        if not math.isfinite(self.arrival_s) or self.arrival_s < 0:
            raise InvalidRequestError(
                f"request {self.request_id}: arrival must be >= 0 s ({self.arrival_s})", field="arrival_s"
            )


@dataclass(frozen=True)
class ReplicaSpec:
    """What one replica is: its cost profile and KV capacity (its device slice's)."""

    profile: CostProfile
    capacity_blocks: int
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    #: Model load time before an added replica takes requests (replicas present at time 0 are warm).
    startup_s: float = 0.0
    max_batch: int = 256
    max_prefill_tokens: int = 8192
    #: When set, the replica runs as vLLM's V1 scheduler does (chunked prefill, KV blocks on
    #: demand, preemption; see :mod:`._engine`) with this engine's operator profile for time;
    #: ``None`` keeps the whole-prompt prefill with the output reserved up front (``profile``'s tables).
    engine: EngineConfig | None = None

    def __post_init__(self) -> None:
        if self.capacity_blocks < 1:
            raise InvalidRequestError(
                f"a replica needs >= 1 KV block, got {self.capacity_blocks}", field="capacity_blocks"
            )
        if self.block_tokens < 1 or self.max_batch < 1 or self.max_prefill_tokens < 1:
            raise InvalidRequestError("block_tokens, max_batch and max_prefill_tokens must be >= 1", field="max_batch")
        if self.startup_s < 0 or not math.isfinite(self.startup_s):
            raise InvalidRequestError(f"startup must be >= 0 s, got {self.startup_s}", field="startup_s")

    @property
    def capacity_tokens(self) -> int:
        return self.capacity_blocks * self.block_tokens

    @classmethod
    def from_memory(
        cls,
        profile: CostProfile,
        memory_bytes: int | None = None,
        *,
        startup_s: float | None = None,
        block_tokens: int = DEFAULT_BLOCK_TOKENS,
        memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
        max_batch: int = 256,
        max_prefill_tokens: int = 8192,
        engine: EngineConfig | None = None,
    ) -> ReplicaSpec:
        """A replica whose KV capacity is what ``memory_bytes`` leaves after the weights.

        ``memory_bytes`` defaults to the profile's whole replica (all its devices); a partition
        or a share passes its slice's bytes.  ``startup_s`` defaults to the model's published
        load time; a model without one needs it passed explicitly.
        """
        memory = profile.replica_memory_bytes if memory_bytes is None else memory_bytes
        if startup_s is None:
            if profile.model.startup_seconds is None:
                raise InvalidRequestError(
                    f"no published start-up time for {profile.model.name}; pass startup_s", field="startup_s"
                )
            startup_s = profile.model.startup_seconds
        blocks = cache_blocks(
            profile.model, memory, block_tokens=block_tokens, memory_utilization=memory_utilization
        )
        return cls(profile, blocks, block_tokens, startup_s, max_batch, max_prefill_tokens, engine)


@dataclass(frozen=True)
class ReplicaChange:
    """Add a replica (ready ``spec.startup_s`` later) or remove (drain) one, at ``time_s``."""

    time_s: float
    action: Literal["add", "remove"]
    replica_id: int
    spec: ReplicaSpec | None = None


@dataclass(frozen=True)
class RequestOutcome:
    """What happened to one request."""

    request_id: int
    replica_id: int
    arrival_s: float
    first_token_s: float
    end_s: float
    output_tokens: int
    prompt_blocks: int
    cached_blocks: int
    #: Largest time between two of its tokens (engine replicas only; ``None`` otherwise).
    max_tbt_s: float | None = None

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first (0 for one-token outputs)."""
        return 0.0 if self.output_tokens <= 1 else (self.end_s - self.first_token_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Objective:
    """A latency objective: TTFT and TPOT bounds to be met by ``percentile`` of requests.

    ``tbt_s``, when set, also bounds each request's largest time between tokens (the tail a
    user sees as a stall; a mean per-token time hides it).  A request with no TBT record (a
    replica without an engine) is judged by its TPOT there.
    """

    ttft_s: float
    tpot_s: float
    percentile: float = 0.99
    tbt_s: float | None = None

    def attained(self, outcome: RequestOutcome) -> bool:
        """Whether one request met every bound."""
        if outcome.ttft_s > self.ttft_s or outcome.tpot_s > self.tpot_s:
            return False
        if self.tbt_s is None:
            return True
        tbt = outcome.tpot_s if outcome.max_tbt_s is None else outcome.max_tbt_s
        return tbt <= self.tbt_s


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by linear interpolation between order statistics; NaN if empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class ServingResult:
    """Per-request outcomes of a :func:`simulate` run, plus what could not be served."""

    outcomes: list[RequestOutcome]
    unserved: list[int] = field(default_factory=list)
    #: Most KV tokens any replica held at once (never above its capacity).
    peak_kv_tokens: dict[int, int] = field(default_factory=dict)
    #: Engine replicas: histogram of every time between tokens (``_engine.gap_bin`` -> count).
    token_gaps: dict[int, int] = field(default_factory=dict)
    #: Engine replicas: how many times a running request was preempted for KV blocks.
    preemptions: int = 0

    def tbt(self, q: float) -> float:
        """The ``q``-quantile of every time between tokens (engine replicas; NaN without any).

        Read from a histogram with bins 0.5% wide, at the bin's upper edge.
        """
        total = sum(self.token_gaps.values())
        if not total:
            return math.nan
        rank = q * total
        seen = 0
        for k in sorted(self.token_gaps):
            seen += self.token_gaps[k]
            if seen >= rank:
                return gap_seconds(k)
        return gap_seconds(max(self.token_gaps))

    @property
    def complete(self) -> bool:
        return not self.unserved

    def hit_ratio(self) -> float:
        blocks = sum(o.prompt_blocks for o in self.outcomes)
        return sum(o.cached_blocks for o in self.outcomes) / blocks if blocks else 0.0

    def requests_per_replica(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for o in self.outcomes:
            counts[o.replica_id] = counts.get(o.replica_id, 0) + 1
        return counts

    def imbalance(self) -> float:
        """max / mean requests per replica that served any."""
        counts = list(self.requests_per_replica().values())
        return max(counts) / (sum(counts) / len(counts)) if counts else math.nan

    def ttft(self, q: float) -> float:
        return percentile([o.ttft_s for o in self.outcomes], q)

    def tpot(self, q: float) -> float:
        return percentile([o.tpot_s for o in self.outcomes if o.output_tokens > 1], q)

    def attainment(self, objective: Objective) -> float:
        """Fraction of all requests (unserved ones count as missed) that met the objective."""
        total = len(self.outcomes) + len(self.unserved)
        return sum(objective.attained(o) for o in self.outcomes) / total if total else math.nan

    def meets(self, objective: Objective) -> bool:
        return self.attainment(objective) >= objective.percentile


@dataclass
class _Req:
    req: ServingRequest
    blocks: int
    tokens: int  # KV tokens reserved while running: prompt + output
    replica: int = -1
    cached: int = 0
    first: float = math.nan
    # engine replicas (``_engine.ChunkedReplica``) keep their per-request state here
    computed: int = 0
    generated: int = 0
    last_token: float = math.nan
    max_gap: float = 0.0
    hit_tokens: int = 0
    seen: bool = False


class _Replica:
    """One replica's state; :meth:`advance` runs its iterations up to a time."""

    def __init__(self, rid: int, spec: ReplicaSpec, ready_s: float) -> None:
        self.rid = rid
        self.spec = spec
        self.ready_s = ready_s
        self.clock = ready_s  # end of the current iteration (or when it went idle)
        self.cache = PrefixCache(spec.capacity_blocks)
        self.waiting: deque[_Req] = deque()
        self.running: list[tuple[int, int, _Req]] = []  # heap of (finish step, request id, req)
        self.steps = 0
        self.kv_tokens = 0
        self.peak_kv = 0
        self.outstanding = 0
        self.draining = False

    def _fits(self, r: _Req) -> bool:
        return self.kv_tokens + r.tokens <= self.spec.capacity_tokens and len(self.running) < self.spec.max_batch

    def _prefill(self, done: list[RequestOutcome]) -> None:
        spec = self.spec
        batch: list[_Req] = []
        uncached_total = 0
        while self.waiting and self._fits(self.waiting[0]):
            r = self.waiting[0]
            hit = self.cache.match(r.req.hash_ids)
            uncached = max(0, r.req.prompt_tokens - hit * spec.block_tokens)
            if batch and uncached_total + uncached > spec.max_prefill_tokens:
                break
            self.waiting.popleft()
            r.cached = self.cache.use(r.req.hash_ids)
            uncached_total += uncached
            self.kv_tokens += r.tokens
            batch.append(r)
            heapq.heappush(self.running, (self.steps + r.req.output_tokens - 1, r.req.request_id, r))
        self.peak_kv = max(self.peak_kv, self.kv_tokens)
        self.clock += spec.profile.prefill_seconds(uncached_total)
        for r in batch:
            r.first = self.clock
        self._finish(done)

    def _finish(self, done: list[RequestOutcome]) -> None:
        while self.running and self.running[0][0] <= self.steps:
            _, _, r = heapq.heappop(self.running)
            self.kv_tokens -= r.tokens
            self.outstanding -= 1
            done.append(
                RequestOutcome(
                    request_id=r.req.request_id,
                    replica_id=self.rid,
                    arrival_s=r.req.arrival_s,
                    first_token_s=r.first,
                    end_s=self.clock,
                    output_tokens=r.req.output_tokens,
                    prompt_blocks=r.blocks,
                    cached_blocks=r.cached,
                )
            )

    def advance(self, t: float, done: list[RequestOutcome]) -> None:
        """Run iterations that start before ``t`` (``math.inf``: until idle)."""
        while self.clock < t:
            if self.waiting and self._fits(self.waiting[0]):
                self._prefill(done)
            elif self.running:
                dt = self.spec.profile.decode_step_seconds(len(self.running))
                k = self.running[0][0] - self.steps  # steps to the next finish
                if t != math.inf:
                    k = min(k, max(1, math.ceil((t - self.clock) / dt)))
                self.steps += k
                self.clock += k * dt
                self._finish(done)
            else:
                if self.waiting:  # cannot happen: an empty replica fits any admitted request
                    raise AssertionError("a waiting request does not fit an empty replica")
                self.clock = t  # idle until the next arrival
                return


def _prep(requests: Iterable[ServingRequest], specs: Sequence[ReplicaSpec]) -> list[_Req]:
    reqs = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
    seen: set[int] = set()
    out: list[_Req] = []
    smallest = min((s.capacity_tokens for s in specs), default=0)
    for r in reqs:
        if r.request_id in seen:
            raise InvalidRequestError(f"request id {r.request_id} appears twice", field="request_id")
        seen.add(r.request_id)
        need = r.prompt_tokens + r.output_tokens
        if specs and need > smallest:
            raise InvalidRequestError(
                f"request {r.request_id} needs {need} KV tokens; the smallest replica holds {smallest}",
                field="prompt_tokens",
            )
        out.append(_Req(r, len(r.hash_ids), need))
    return out


@dataclass(frozen=True)
class ServingSnapshot:
    """What an operator could observe of a :class:`ServingSim` at :attr:`now` (never the future)."""

    now: float
    #: Requests that have arrived so far and their prompt tokens (cumulative).  Output lengths
    #: are not known on arrival, only once generated: see ``finished_*``.
    arrived: int
    arrived_prompt_tokens: int
    #: Requests finished so far and the output tokens they generated (cumulative).
    finished: int
    finished_output_tokens: int
    #: Requests arrived and not finished (at the router, queued at a replica, or running).
    outstanding: int
    #: Requests not yet admitted to a batch (at the router or queued at a replica).
    queued: int
    #: Prompt tokens of the queued requests (their prefill work still to do).
    queued_prompt_tokens: int
    #: Replicas taking requests, and replicas added and still loading the model.
    ready: int
    starting: int
    #: KV tokens held over the KV tokens the ready replicas can hold (0..1).
    kv_utilization: float


class ServingSim:
    """A stepping form of :func:`simulate`: the caller drives time and changes the replica set.

    ``advance(t)`` routes and serves everything that happens before ``t``; :meth:`observe`
    reports what an operator could see at that time; :meth:`add_replica` and
    :meth:`remove_replica` change the set at the current time (with the semantics of
    :class:`ReplicaChange`); :meth:`result` runs to the end.  An autoscaler or the queueing
    engine bridge sits in the loop between calls.  :func:`simulate` is this class driven by a
    fixed list of changes, so both give the same outcomes.
    """

    def __init__(
        self,
        requests: Iterable[ServingRequest],
        router: Router,
        replicas: Sequence[ReplicaSpec] = (),
        *,
        min_capacity_tokens: int | None = None,
    ) -> None:
        self._reqs = _prep(requests, replicas)
        self._max_need = max((r.tokens for r in self._reqs), default=0)
        if min_capacity_tokens is not None and self._max_need > min_capacity_tokens:
            worst = max(self._reqs, key=lambda r: r.tokens)
            raise InvalidRequestError(
                f"request {worst.req.request_id} needs {worst.tokens} KV tokens; the smallest replica "
                f"holds {min_capacity_tokens}",
                field="prompt_tokens",
            )
        self.router = router
        self.now = 0.0
        self._state: dict[int, _Replica | ChunkedReplica] = {i: self._make(i, s, 0.0) for i, s in enumerate(replicas)}
        # (time, kind, index): kind 1 = replica ready, 2 = arrival; a ready replica is settled
        # before a request arriving at the same instant is routed.
        self._events: list[tuple[float, int, int]] = [(r.req.arrival_s, 2, i) for i, r in enumerate(self._reqs)]
        heapq.heapify(self._events)
        self._done: list[RequestOutcome] = []
        self._held: deque[_Req] = deque()  # at the router: no replica was ready
        self._arrived = self._arrived_prompt = 0
        self._finished_output = self._counted = 0

    # -- the replica set ---------------------------------------------------------------------------
    @staticmethod
    def _emit(done: list[RequestOutcome], r: _Req, rid: int, end: float, max_gap: float) -> None:
        done.append(
            RequestOutcome(
                request_id=r.req.request_id,
                replica_id=rid,
                arrival_s=r.req.arrival_s,
                first_token_s=r.first,
                end_s=end,
                output_tokens=r.req.output_tokens,
                prompt_blocks=r.blocks,
                cached_blocks=r.cached,
                max_tbt_s=max_gap,
            )
        )

    def _make(self, rid: int, spec: ReplicaSpec, ready_s: float) -> _Replica | ChunkedReplica:
        if spec.engine is None:
            return _Replica(rid, spec, ready_s)
        return ChunkedReplica(rid, spec, spec.engine, ready_s, self._emit)

    def replica_ids(self) -> list[int]:
        """Every replica ever added (draining and drained ones included)."""
        return sorted(self._state)

    def is_ready(self, replica_id: int) -> bool:
        rep = self._state.get(replica_id)
        return rep is not None and not rep.draining and rep.ready_s <= self.now

    def is_draining(self, replica_id: int) -> bool:
        rep = self._state.get(replica_id)
        return rep is not None and rep.draining

    def drained(self, replica_id: int) -> bool:
        """A removed replica that has finished every request it had (its devices can go)."""
        rep = self._state.get(replica_id)
        return rep is not None and rep.draining and rep.outstanding == 0 and not rep.running

    def outstanding_of(self, replica_id: int) -> int:
        """Requests routed to a replica and not finished (0 for an unknown one)."""
        rep = self._state.get(replica_id)
        return 0 if rep is None else rep.outstanding

    def add_replica(self, replica_id: int, spec: ReplicaSpec, *, ready_at: float | None = None) -> None:
        """Add a replica now; it takes requests at ``ready_at`` (default now + ``spec.startup_s``)."""
        if replica_id in self._state:
            raise InvalidRequestError(f"replica {replica_id} already exists", field="replica_id")
        if spec.capacity_tokens < self._max_need:
            raise InvalidRequestError(
                f"replica {replica_id} holds {spec.capacity_tokens} KV tokens; a request needs {self._max_need}",
                field="capacity_blocks",
            )
        at = self.now + spec.startup_s if ready_at is None else ready_at
        if not math.isfinite(at) or at < self.now:
            raise InvalidRequestError(f"ready_at must be >= now ({self.now}), got {at}", field="ready_at")
        self._state[replica_id] = self._make(replica_id, spec, at)
        heapq.heappush(self._events, (at, 1, replica_id))

    def remove_replica(self, replica_id: int) -> None:
        """Drain a replica now: no new requests; its queued ones go back to the router."""
        gone = self._state.get(replica_id)
        if gone is None or gone.draining:
            raise InvalidRequestError(f"cannot remove replica {replica_id}: not serving", field="replica_id")
        gone.draining = True
        self.router.forget(gone.rid)
        back = list(gone.waiting)
        gone.waiting.clear()
        gone.outstanding -= len(back)
        for r in back:
            self._dispatch(r)

    # -- time ----------------------------------------------------------------------------------------
    def _live(self) -> list[_Replica | ChunkedReplica]:
        return [rep for _, rep in sorted(self._state.items()) if not rep.draining and rep.ready_s <= self.now]

    def _dispatch(self, r: _Req) -> None:
        live = self._live()
        if not live:
            self._held.append(r)
            return
        loads = [ReplicaLoad(rep.rid, rep.outstanding, len(rep.waiting)) for rep in live]
        rid = self.router.route(r.req.hash_ids, loads)
        rep = self._state.get(rid)
        if rep is None or rep not in live:
            raise InvalidRequestError(
                f"router {self.router.name!r} chose replica {rid}, not one offered", field="router"
            )
        rep.outstanding += 1
        rep.waiting.append(r)
        r.replica = rid

    def advance(self, t: float) -> None:
        """Process every arrival and replica start-up before ``t`` and serve up to ``t``."""
        if t < self.now:
            raise InvalidRequestError(f"time runs forward: {t} < {self.now}", field="t")
        while self._events and self._events[0][0] < t:
            self.now, kind, idx = heapq.heappop(self._events)
            for rep in self._state.values():
                rep.advance(self.now, self._done)
            if kind == 2:
                r = self._reqs[idx]
                self._arrived += 1
                self._arrived_prompt += r.req.prompt_tokens
                self._dispatch(r)
            else:
                while self._held and self._live():
                    self._dispatch(self._held.popleft())
        if math.isfinite(t):
            for rep in self._state.values():
                rep.advance(t, self._done)
            self.now = t

    def observe(self) -> ServingSnapshot:
        """Counts an operator could read now (see :class:`ServingSnapshot`)."""
        for o in self._done[self._counted:]:
            self._finished_output += o.output_tokens
        self._counted = len(self._done)
        live = self._live()
        waiting = [r for rep in self._state.values() for r in rep.waiting] + list(self._held)
        held_kv = sum(rep.kv_tokens for rep in live)
        cap = sum(rep.spec.capacity_tokens for rep in live)
        return ServingSnapshot(
            now=self.now,
            arrived=self._arrived,
            arrived_prompt_tokens=self._arrived_prompt,
            finished=len(self._done),
            finished_output_tokens=self._finished_output,
            outstanding=sum(rep.outstanding for rep in self._state.values()) + len(self._held),
            queued=len(waiting),
            queued_prompt_tokens=sum(r.req.prompt_tokens for r in waiting),
            ready=len(live),
            starting=sum(1 for rep in self._state.values() if not rep.draining and rep.ready_s > self.now),
            kv_utilization=held_kv / cap if cap else 0.0,
        )

    def result(self) -> ServingResult:
        """Run every remaining event and request to the end; requests never routed are unserved."""
        self.advance(math.inf)
        for rep in self._state.values():
            rep.advance(math.inf, self._done)
        done = sorted(self._done, key=lambda o: o.request_id)
        gaps: dict[int, int] = {}
        preemptions = 0
        for rep in self._state.values():
            if isinstance(rep, ChunkedReplica):
                preemptions += rep.preemptions
                for k, n in rep.gaps.items():
                    gaps[k] = gaps.get(k, 0) + n
        return ServingResult(
            outcomes=done,
            unserved=sorted(r.req.request_id for r in self._held),
            peak_kv_tokens={rid: rep.peak_kv for rid, rep in sorted(self._state.items())},
            token_gaps=gaps,
            preemptions=preemptions,
        )


def simulate(
    requests: Iterable[ServingRequest],
    router: Router,
    replicas: Sequence[ReplicaSpec],
    *,
    changes: Sequence[ReplicaChange] = (),
) -> ServingResult:
    """Replay ``requests`` through ``router`` onto ``replicas`` (ids 0..n-1, warm at time 0).

    ``changes`` adds replicas (new ids; ready after their ``startup_s``) or removes them (drain,
    see the module doc) at given times.  Raises :class:`InvalidRequestError` on an empty replica
    set with no replica ever added, on a change that names an unknown or duplicate replica, and
    on a request that could not fit in a replica's KV capacity.
    """
    adds = [c for c in changes if c.action == "add"]
    if not replicas and not adds:
        raise InvalidRequestError("simulate needs at least one replica", field="replicas")
    specs = list(replicas) + [c.spec for c in adds if c.spec is not None]
    reqs = list(requests)
    _prep(reqs, specs)
    for c in changes:
        if c.action not in ("add", "remove"):
            raise InvalidRequestError(f"unknown replica change {c.action!r}", field="action")
        if c.action == "add" and c.spec is None:
            raise InvalidRequestError(f"adding replica {c.replica_id} needs a spec", field="spec")
        if c.time_s < 0 or not math.isfinite(c.time_s):
            raise InvalidRequestError(f"change time must be >= 0, got {c.time_s}", field="time_s")
    sim = ServingSim(reqs, router, replicas)
    for c in sorted(changes, key=lambda c: c.time_s):  # stable: same-time changes keep their order
        sim.advance(c.time_s)
        if c.action == "add":
            assert c.spec is not None
            sim.add_replica(c.replica_id, c.spec)
        else:
            sim.remove_replica(c.replica_id)
    return sim.result()


@dataclass(frozen=True)
class HitReplay:
    """Prefix hits of a routing replay without timing (:func:`replay_hits`)."""

    hit_blocks: int
    total_blocks: int
    requests_per_replica: tuple[int, ...]

    @property
    def hit_ratio(self) -> float:
        return self.hit_blocks / self.total_blocks if self.total_blocks else 0.0

    @property
    def imbalance(self) -> float:
        c = self.requests_per_replica
        return max(c) / (sum(c) / len(c)) if c and sum(c) else math.nan


def replay_hits(
    requests: Iterable[ServingRequest], router: Router | None, replicas: int, capacity_blocks: int | None
) -> HitReplay:
    """Route in arrival order with no timing: a replica's load is the requests sent to it so far.

    Each replica has a :class:`PrefixCache` of ``capacity_blocks``.  ``router=None`` with
    ``replicas=1`` measures one cache (pass the pooled capacity for the pooled bound).
    """
    if replicas < 1:
        raise InvalidRequestError(f"replay needs >= 1 replica, got {replicas}", field="replicas")
    if router is None and replicas != 1:
        raise InvalidRequestError("without a router, replay one replica", field="router")
    caches = [PrefixCache(capacity_blocks) for _ in range(replicas)]
    counts = [0] * replicas
    hit = total = 0
    for r in sorted(requests, key=lambda r: (r.arrival_s, r.request_id)):
        k = 0 if router is None else router.route(r.hash_ids, [ReplicaLoad(i, c) for i, c in enumerate(counts)])
        counts[k] += 1
        hit += caches[k].use(r.hash_ids)
        total += len(r.hash_ids)
    return HitReplay(hit, total, tuple(counts))


def load_mooncake(path: str | Path, *, time_scale: float = 1.0) -> list[ServingRequest]:
    """Read a Mooncake trace (JSON lines: ``timestamp`` ms, ``input_length``, ``output_length``, ``hash_ids``).

    ``time_scale`` multiplies arrival times (2.0 halves the request rate).  A malformed line
    raises :class:`InvalidRequestError` naming the line.
    """
    if time_scale <= 0 or not math.isfinite(time_scale):
        raise InvalidRequestError(f"time_scale must be > 0, got {time_scale}", field="time_scale")
    out: list[ServingRequest] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out.append(
                    ServingRequest(
                        request_id=len(out),
                        arrival_s=float(d["timestamp"]) / 1000.0 * time_scale,
                        prompt_tokens=int(d["input_length"]),
                        output_tokens=int(d["output_length"]),
                        hash_ids=tuple(int(h) for h in d["hash_ids"]),
                    )
                )
            except InvalidRequestError as exc:
                raise InvalidRequestError(f"{path}:{n}: {exc}", field=exc.field) from exc
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidRequestError(f"{path}:{n}: malformed request line ({exc!r})", field="line") from exc
    return out


def load_azure(path: str | Path, *, time_scale: float = 1.0) -> list[ServingRequest]:
    """Read an Azure LLM inference trace (CSV: ``TIMESTAMP``, ``ContextTokens``, ``GeneratedTokens``).

    Arrival = seconds since the first timestamp, times ``time_scale``.  The file carries no
    prefix hashes, so ``hash_ids`` is empty (no prefix hits).  A malformed row raises
    :class:`InvalidRequestError` naming the line.
    """
    if time_scale <= 0 or not math.isfinite(time_scale):
        raise InvalidRequestError(f"time_scale must be > 0, got {time_scale}", field="time_scale")
    rows: list[tuple[datetime, int, int, int]] = []
    with open(path, encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.DictReader(f), 2):
            try:
                stamp = row["TIMESTAMP"].strip()
                # the file has 7 fractional digits; datetime takes at most 6
                if "." in stamp:
                    head, frac = stamp.split(".", 1)
                    stamp = f"{head}.{frac[:6]}"
                rows.append((datetime.fromisoformat(stamp), int(row["ContextTokens"]), int(row["GeneratedTokens"]), n))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise InvalidRequestError(f"{path}:{n}: malformed row ({exc!r})", field="line") from exc
    if not rows:
        return []
    t0 = min(r[0] for r in rows)
    out: list[ServingRequest] = []
    for stamp, prompt, output, n in rows:
        try:
            out.append(ServingRequest(len(out), (stamp - t0).total_seconds() * time_scale, prompt, output))
        except InvalidRequestError as exc:
            raise InvalidRequestError(f"{path}:{n}: {exc}", field=exc.field) from exc
    return out
