"""One replica served as vLLM's V1 scheduler does: chunked prefill, KV blocks on demand, preemption.

Each iteration has a **token budget** (vLLM's ``max_num_batched_tokens``).  The running
requests are scheduled first, in admission order: a decoding request takes one token, a
prefilling one the next chunk of its prompt (at most what is left of the budget).  Waiting
requests are then admitted first come, first served while budget, batch slots
(``max_num_seqs``) and free KV blocks last; a request's prefix-cache hit skips that part of its
prompt (the last prompt token is always computed).

**KV blocks are allocated as tokens are computed**, not for the whole output up front: a request
holds ``ceil(computed tokens / kv_block_tokens)`` blocks.  When a running request needs a block
and none is free, the most recently admitted running request is **preempted**: its blocks are
freed and it goes back to the front of the queue to be recomputed (prompt plus the tokens it
already generated, as vLLM's recompute preemption does); if the request itself is the latest,
it is the one preempted.

The iteration's time comes from an :class:`OperatorProfile` over its prefill chunks, decode
batch and decode context.  A request's first token is out when its prefill completes; every
later token at the end of the iteration that decoded it; the gaps between a request's tokens
(its **time between tokens**, TBT) are recorded, per request (the largest) and for the whole
run (every gap, for the p99).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._cache import PrefixCache
from ._errors import InvalidRequestError
from ._operator import OperatorProfile

if TYPE_CHECKING:
    from ._sim import ReplicaSpec

__all__ = ["EngineConfig", "gap_bin", "gap_seconds"]

#: Time-between-token histogram resolution: bins 0.5% wide on a log scale.
_GAP_BASE = math.log(1.005)


def gap_bin(seconds: float) -> int:
    """The histogram bin of a time between tokens (bins 0.5% wide; 1 microsecond and below share one)."""
    return 0 if seconds <= 1e-6 else 1 + int(math.log(seconds / 1e-6) / _GAP_BASE)


def gap_seconds(k: int) -> float:
    """The upper edge of bin ``k`` (a conservative reading of the gaps in it)."""
    return 1e-6 if k <= 0 else 1e-6 * math.exp(k * _GAP_BASE)


@dataclass(frozen=True)
class EngineConfig:
    """How a replica's engine schedules: its operator profile, token budget and KV block size."""

    operator: OperatorProfile
    #: Tokens scheduled per iteration (vLLM ``max_num_batched_tokens``); prefill is chunked to it.
    token_budget: int = 2048
    #: Tokens per KV block allocated on demand (vLLM's default block size is 16).
    kv_block_tokens: int = 16

    def __post_init__(self) -> None:
        if self.token_budget < 1 or self.kv_block_tokens < 1:
            raise InvalidRequestError("token_budget and kv_block_tokens must be >= 1", field="token_budget")


class _Request(Protocol):
    request_id: int
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]


class _Job(Protocol):
    """What the simulator keeps per request (``_sim._Req``); the engine state lives on it."""

    @property
    def req(self) -> _Request: ...

    cached: int
    first: float
    computed: int  # tokens whose KV is held
    generated: int  # output tokens produced so far
    last_token: float
    max_gap: float
    hit_tokens: int
    seen: bool  # admitted at least once (its cache hit counted)


def _target(s: _Job) -> int:
    """Tokens to compute before the next token can be sampled (prompt, plus generated ones after a preemption)."""
    return s.req.prompt_tokens + max(0, s.generated - 1)


Emit = Callable[[list[Any], Any, int, float, float], None]  # (done, job, replica id, end time, largest gap)


class ChunkedReplica:
    """A replica run iteration by iteration (see the module doc); the simulator drives :meth:`advance`."""

    def __init__(self, rid: int, spec: ReplicaSpec, engine: EngineConfig, ready_s: float, emit: Emit) -> None:
        self.rid = rid
        self.spec = spec
        self.engine = engine
        self.ready_s = ready_s
        self.clock = ready_s
        self.cache = PrefixCache(spec.capacity_blocks)
        #: Requests routed here and not running: preempted ones first, then new ones in order.
        self.waiting: deque[Any] = deque()
        self.running: list[Any] = []
        self._blocks_total = spec.capacity_tokens // engine.kv_block_tokens
        self._blocks_used = 0
        self.kv_tokens = 0
        self.peak_kv = 0
        self.outstanding = 0
        self.draining = False
        self.preemptions = 0
        #: Histogram of every time between tokens: :func:`gap_bin` -> count.
        self.gaps: dict[int, int] = {}
        self._emit = emit

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.engine.kv_block_tokens)

    def _preempt_last(self) -> Any:
        victim = self.running.pop()
        self._blocks_used -= self._blocks(victim.computed)
        self.kv_tokens -= victim.computed
        victim.computed = 0
        self.waiting.appendleft(victim)
        self.preemptions += 1
        return victim

    def _iterate(self, done_out: list[Any]) -> None:
        budget = self.engine.token_budget
        chunks: list[tuple[_Job, int, int]] = []  # (state, chunk tokens, computed before)
        decoding: list[_Job] = []
        i = 0
        preempted = False
        while i < len(self.running) and budget > 0:
            s = self.running[i]
            need = 1 if s.computed >= _target(s) else min(_target(s) - s.computed, budget)
            extra = self._blocks(s.computed + need) - self._blocks(s.computed)
            preempted_self = False
            while extra > self._blocks_total - self._blocks_used:
                preempted = True
                if self._preempt_last() is s:
                    preempted_self = True
                    break
            if preempted_self:
                break
            self._blocks_used += extra
            if s.computed >= _target(s):
                decoding.append(s)
            else:
                chunks.append((s, need, s.computed))
            budget -= need
            i += 1
        if not preempted:  # as vLLM: no new admissions in a step that preempted
            block = self.spec.block_tokens
            while self.waiting and budget > 0 and len(self.running) < self.spec.max_batch:
                s = self.waiting[0]
                if s.computed == 0:
                    hit = self.cache.match(s.req.hash_ids)
                    s.hit_tokens = min(hit * block, max(0, s.req.prompt_tokens - 1))
                start = s.hit_tokens
                need = min(_target(s) - start, budget)
                blocks = self._blocks(start + need)
                if blocks > self._blocks_total - self._blocks_used:
                    break
                self.waiting.popleft()
                if not s.seen:
                    s.cached = self.cache.use(s.req.hash_ids)
                    s.seen = True
                self._blocks_used += blocks
                s.computed = start
                self.kv_tokens += start
                self.running.append(s)
                chunks.append((s, need, start))
                budget -= need
        if not chunks and not decoding:
            if self.running or self.waiting:
                raise AssertionError("a request cannot be scheduled on an otherwise empty replica")
            return
        ctx = sum(s.computed for s in decoding)
        self.clock += self.engine.operator.iteration_seconds([(c, p) for _, c, p in chunks], len(decoding), ctx)
        now = self.clock
        for s, c, _ in chunks:
            s.computed += c
            self.kv_tokens += c
        for s in decoding:
            s.computed += 1
            self.kv_tokens += 1
        self.peak_kv = max(self.peak_kv, self.kv_tokens)
        produced = decoding + [s for s, _, _ in chunks if s.computed >= _target(s)]
        for s in produced:
            if s.generated == 0:
                s.first = now
            else:
                gap = now - s.last_token
                s.max_gap = max(s.max_gap, gap)
                k = gap_bin(gap)
                self.gaps[k] = self.gaps.get(k, 0) + 1
            s.last_token = now
            s.generated += 1
        done = [s for s in produced if s.generated >= s.req.output_tokens]
        if done:
            gone = {id(s) for s in done}
            self.running = [s for s in self.running if id(s) not in gone]
            for s in done:
                self._blocks_used -= self._blocks(s.computed)
                self.kv_tokens -= s.computed
                self.outstanding -= 1
                self._emit(done_out, s, self.rid, now, s.max_gap)

    def advance(self, t: float, done: list[Any]) -> None:
        """Run iterations that start before ``t`` (``math.inf``: until idle); finished outcomes go to ``done``."""
        while self.clock < t:
            if not self.running and not self.waiting:
                self.clock = t
                return
            if not (self.fast_forward and self._decode_run(t)):
                self._iterate(done)

    #: Run stretches of pure decode steps without the per-request scheduling loop (same result).
    fast_forward = True

    def _decode_run(self, t: float) -> bool:
        """Several decode-only steps at once, when nothing else can happen in between.

        Applies when nothing waits, every running request decodes and produced its last token at
        the current clock, the batch fits the budget, and the free blocks cover every request's
        growth.  Stops one step before the first finish (that step runs through
        :meth:`_iterate`) and at the first step starting at or after ``t``.  Each step is timed
        exactly as :meth:`_iterate` would time it.  Returns whether any step ran.
        """
        run = self.running
        b = len(run)
        if self.waiting or not run or b > self.engine.token_budget:
            return False
        clock = self.clock
        left = min(s.req.output_tokens - s.generated for s in run) - 1
        if left < 2:
            return False
        for s in run:
            if s.computed < _target(s) or s.last_token != clock:
                return False
        per = (self._blocks_total - self._blocks_used) // b  # blocks each request may take
        if per < 1:
            return False
        left = min(left, (per - 1) * self.engine.kv_block_tokens + 1)
        if left < 2:
            return False
        op = self.engine.operator
        ctx = sum(s.computed for s in run)
        k = 0
        biggest = 0.0
        gaps = self.gaps
        while k < left and clock < t:
            dt = op.iteration_seconds((), b, ctx)
            clock += dt
            ctx += b
            k += 1
            biggest = max(biggest, dt)
            key = gap_bin(dt)
            gaps[key] = gaps.get(key, 0) + b
        if k == 0:
            return False
        for s in run:
            before = self._blocks(s.computed)
            s.computed += k
            self._blocks_used += self._blocks(s.computed) - before
            s.generated += k
            s.last_token = clock
            s.max_gap = max(s.max_gap, biggest)
        self.kv_tokens += k * b
        self.peak_kv = max(self.peak_kv, self.kv_tokens)
        self.clock = clock
        return True
