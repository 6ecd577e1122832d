"""accel.router: an OpenAI-compatible router in front of vLLM / SGLang replicas (``accel router``).

- :func:`start_router`: replicas, one of scheduler.serving's four routing policies on the prompt's
  chained block hashes (:class:`PromptHasher`), health checks, retries, circuit breakers, its own
  metrics, an autoscaler over the live load and a KEDA external scaler (:class:`KedaScaler`);
- engine feeds: :func:`parse_engine_metrics` (vLLM's and SGLang's Prometheus names) and vLLM's
  KV events (:func:`decode_batch`, :class:`KVSubscriber`, :class:`BlockMap`);
- :class:`FakeEngine`: a faithful fake vLLM server for tests and demos.

See docs/router.md.
"""

from __future__ import annotations

from ._app import ProxyConfig
from ._backends import Backend, CircuitBreaker
from ._errors import BadRequestError, KVEventError, RouterError
from ._fake import FakeEngine, FakeEngineConfig
from ._keda import DEFAULT_METRIC, KedaScaler
from ._kvevents import (
    AllBlocksCleared,
    BlockMap,
    BlockRemoved,
    BlockStored,
    EventCache,
    KVEventBatch,
    KVSubscriber,
    decode_batch,
    decode_frames,
    encode_batch,
    encode_frames,
)
from ._monitor import LiveLoad, Monitor, MonitorConfig
from ._policy import POLICIES, EngineFedCacheAware, make_policy
from ._prefix import PromptHasher, chain_hash, render_prompt, seed_hash
from ._scrape import EngineLoad, parse_engine_metrics
from ._server import RunningRouter, start_router

__all__ = [
    "DEFAULT_METRIC",
    "POLICIES",
    "AllBlocksCleared",
    "Backend",
    "BadRequestError",
    "BlockMap",
    "BlockRemoved",
    "BlockStored",
    "CircuitBreaker",
    "EngineFedCacheAware",
    "EngineLoad",
    "EventCache",
    "FakeEngine",
    "FakeEngineConfig",
    "KVEventBatch",
    "KVEventError",
    "KVSubscriber",
    "KedaScaler",
    "LiveLoad",
    "Monitor",
    "MonitorConfig",
    "PromptHasher",
    "ProxyConfig",
    "RouterError",
    "RunningRouter",
    "chain_hash",
    "decode_batch",
    "decode_frames",
    "encode_batch",
    "encode_frames",
    "make_policy",
    "parse_engine_metrics",
    "render_prompt",
    "seed_hash",
    "start_router",
]
