"""accel.scheduler.serving: routing and request-level simulation for LLM inference serving.

The foundations the serving scheduler builds on (DESIGN.md section 10):

- **cost data** (:func:`load_catalog`): model shapes (KV bytes per token computed from layers,
  KV heads, head dim and dtype), weight bytes, published start-up times, and per (model,
  device) measured prefill and decode-step tables, every number cited in ``data/models.json``;
  :func:`cache_blocks` turns a device's (or a slice's) memory into KV-cache blocks;
- :class:`PrefixCache`: one replica's bounded LRU cache of chained block hashes;
- routers behind one :class:`Router` protocol: :class:`RoundRobin`, :class:`LeastOutstanding`,
  :class:`ConsistentHash`, the cache-aware :class:`CacheAware` (timed bounds) and
  :class:`AdaptiveCacheAware` (a count cap from the balance goal, no per-trace constant);
- :func:`simulate`: a deterministic discrete-event simulator of replicas with continuous
  batching, KV-bounded batches, start-up delays and a replica set that changes over time,
  giving per-request TTFT, TPOT, replica and cached blocks; :class:`Objective` says whether
  each request met a latency objective.  :func:`replay_hits` is the no-timing routing replay.
- calibrated engine replicas (``ReplicaSpec(engine=EngineConfig(load_operator_profile(...)))``):
  vLLM V1-style scheduling (chunked prefill under a token budget, KV blocks taken as tokens are
  computed, preemption with recompute) timed by an operator-level :class:`OperatorProfile`
  (Vidur's measured per-layer rows, ``data/operators.json``), with the time between tokens
  recorded (``RequestOutcome.max_tbt_s``, ``ServingResult.tbt``, ``Objective(tbt_s=...)``).

See docs/guides/serving.md and benchmarks/serving/.
"""

from __future__ import annotations

from ._adaptive import AdaptiveCacheAware
from ._autoscale import (
    Autoscaler,
    Capacity,
    OraclePlan,
    Predictive,
    ReactiveHPA,
    decode_weight,
    fit_oracle,
    measure_capacities,
    measure_capacity,
    oracle_plan,
    prefill_rate,
    work_tokens,
)
from ._bridge import BridgeResult, ReplicaRecord, ServingBridge
from ._cache import PrefixCache
from ._costmodel import (
    DEFAULT_BLOCK_TOKENS,
    DEFAULT_MEMORY_UTILIZATION,
    CostProfile,
    CostTable,
    ModelCatalog,
    ModelSpec,
    cache_blocks,
    load_catalog,
)
from ._engine import EngineConfig
from ._errors import InvalidRequestError, UnknownModelError
from ._operator import EndToEndRun, OperatorProfile, ValidationPoint, load_operator_profile
from ._routers import CacheAware, ConsistentHash, LeastOutstanding, ReplicaLoad, RoundRobin, Router
from ._service import Service
from ._sim import (
    HitReplay,
    Objective,
    ReplicaChange,
    ReplicaSpec,
    RequestOutcome,
    ServingRequest,
    ServingResult,
    ServingSim,
    ServingSnapshot,
    load_azure,
    load_mooncake,
    percentile,
    replay_hits,
    simulate,
)

__all__ = [
    "DEFAULT_BLOCK_TOKENS",
    "DEFAULT_MEMORY_UTILIZATION",
    "AdaptiveCacheAware",
    "Autoscaler",
    "BridgeResult",
    "CacheAware",
    "Capacity",
    "ConsistentHash",
    "CostProfile",
    "CostTable",
    "EndToEndRun",
    "EngineConfig",
    "HitReplay",
    "InvalidRequestError",
    "LeastOutstanding",
    "ModelCatalog",
    "ModelSpec",
    "Objective",
    "OperatorProfile",
    "OraclePlan",
    "Predictive",
    "PrefixCache",
    "ReactiveHPA",
    "ReplicaChange",
    "ReplicaLoad",
    "ReplicaRecord",
    "ReplicaSpec",
    "RequestOutcome",
    "RoundRobin",
    "Router",
    "Service",
    "ServingBridge",
    "ServingRequest",
    "ServingResult",
    "ServingSim",
    "ServingSnapshot",
    "UnknownModelError",
    "ValidationPoint",
    "cache_blocks",
    "decode_weight",
    "fit_oracle",
    "load_azure",
    "load_catalog",
    "load_mooncake",
    "load_operator_profile",
    "measure_capacities",
    "measure_capacity",
    "oracle_plan",
    "percentile",
    "prefill_rate",
    "replay_hits",
    "simulate",
    "work_tokens",
]
