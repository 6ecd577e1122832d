"""accel.router: an OpenAI-compatible router in front of vLLM / SGLang replicas (``accel router``).

- :func:`start_router`: replicas, one of scheduler.serving's four routing policies on the prompt's
  chained block hashes (:class:`PromptHasher`), health checks, retries, circuit breakers, its own
  metrics, an autoscaler over the live load and a KEDA external scaler (:class:`KedaScaler`);
- engine feeds: :func:`parse_engine_metrics` (vLLM's and SGLang's Prometheus names) and vLLM's
  KV events (:func:`decode_batch`, :class:`KVSubscriber`, :class:`BlockMap`);
- :class:`FakeEngine`: a faithful fake vLLM server for tests and demos.

See docs/router.md.  The names load on first use: ``accel --help`` imports this package to list
``accel router`` (:mod:`._commands`), and must not pull in the scheduler or the HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import ProxyConfig
    from ._backends import Backend, BackendSet, CircuitBreaker
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

_HOME = {
    "AllBlocksCleared": "._kvevents",
    "Backend": "._backends",
    "BackendSet": "._backends",
    "BadRequestError": "._errors",
    "BlockMap": "._kvevents",
    "BlockRemoved": "._kvevents",
    "BlockStored": "._kvevents",
    "CircuitBreaker": "._backends",
    "DEFAULT_METRIC": "._keda",
    "EngineFedCacheAware": "._policy",
    "EngineLoad": "._scrape",
    "EventCache": "._kvevents",
    "FakeEngine": "._fake",
    "FakeEngineConfig": "._fake",
    "KVEventBatch": "._kvevents",
    "KVEventError": "._errors",
    "KVSubscriber": "._kvevents",
    "KedaScaler": "._keda",
    "LiveLoad": "._monitor",
    "Monitor": "._monitor",
    "MonitorConfig": "._monitor",
    "POLICIES": "._policy",
    "PromptHasher": "._prefix",
    "ProxyConfig": "._app",
    "RouterError": "._errors",
    "RunningRouter": "._server",
    "chain_hash": "._prefix",
    "decode_batch": "._kvevents",
    "decode_frames": "._kvevents",
    "encode_batch": "._kvevents",
    "encode_frames": "._kvevents",
    "make_policy": "._policy",
    "parse_engine_metrics": "._scrape",
    "render_prompt": "._prefix",
    "seed_hash": "._prefix",
    "start_router": "._server",
}

__all__ = [
    "DEFAULT_METRIC",
    "POLICIES",
    "AllBlocksCleared",
    "Backend",
    "BackendSet",
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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
