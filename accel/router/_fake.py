"""A faithful fake of a vLLM OpenAI server, for tests, benchmarks and demos (``accel router fake-engine``).

What it does as vLLM does:

- ``POST /v1/completions`` and ``/v1/chat/completions`` in OpenAI's shapes, ``"stream": true``
  as server-sent events (one chunk a token, ``data: [DONE]`` last), ``GET /v1/models``,
  ``GET /health``;
- automatic prefix caching: the prompt's full blocks, chained, in an LRU of ``kv_blocks``; the
  leading blocks found are not prefilled again;
- time from scheduler.serving's cost model (``data/models.json``, a measured profile): a prefill
  of the uncached ids (:meth:`CostProfile.prefill_seconds`), then one token per decode step of
  the batch running now (:meth:`CostProfile.decode_step_seconds`), all divided by ``time_scale``;
  at most ``max_num_seqs`` requests run, the rest wait (vLLM's ``--max-num-seqs``);
- ``GET /metrics`` with vLLM's names (wire-facts.md section 1): ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, the KV-cache use under ``vllm:kv_cache_usage_perc`` (``new``),
  ``vllm:gpu_cache_usage_perc`` (``old``) or both, ``vllm:prefix_cache_{queries,hits}_total``
  (or the older ``vllm:gpu_prefix_cache_*``), ``vllm:time_to_first_token_seconds``; labels
  ``model_name`` and ``engine``;
- KV events on a ZMQ PUB socket in vLLM's wire format (:mod:`._kvevents`): a ``BlockStored``
  for the blocks a prompt added (parent: the engine hash of the block before them, nil at the
  start), ``BlockRemoved`` for those evicted.  The engine's block hash is its own (a 64-bit
  SHA-256 of the parent and the ids, as vLLM's int form), not the router's.

Ids are the prompt's tokens with ``tokenizer`` (a ``tokenizer.json``), else its characters' code
points (a character counts as a token, so the cost model's prefill of N tokens is N characters).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import time
import uuid
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from accel._net.asgi_server import BodyTimeoutError, read_body
from accel._net.bounded_json import JSONLimitError, JSONLimits, loads_bounded
from accel.scheduler.serving import CostProfile, cache_blocks, load_catalog

from ._errors import BadRequestError
from ._kvevents import BlockRemoved, BlockStored, KVEvent, KVEventBatch, encode_batch, encode_frames
from ._prefix import DEFAULT_BLOCK_CHARS, DEFAULT_BLOCK_TOKENS, PromptHasher, render_prompt

__all__ = ["FakeEngine", "FakeEngineConfig"]


@dataclass(frozen=True)
class FakeEngineConfig:
    model: str = "llama-2-70b"
    #: The cost profile's (model, device) in scheduler.serving's data.
    profile_model: str = "llama-2-70b"
    profile_device: str = "h100-80gb"
    time_scale: float = 1.0
    max_num_seqs: int = 256
    default_max_tokens: int = 16
    max_output_tokens: int = 4096
    max_body_bytes: int = 4 * 1024 * 1024
    tokenizer: str | None = None
    block_size: int | None = None
    kv_blocks: int | None = None
    metric_names: Literal["new", "old", "both"] = "new"
    kv_events_endpoint: str | None = None
    kv_events_form: Literal["array", "map"] = "array"
    kv_events_topic: str = ""


def engine_block_hash(parent: int | None, ids: Sequence[int]) -> int:
    """The fake engine's block hash: the first 8 bytes of SHA-256(parent, ids), unsigned."""
    h = hashlib.sha256()
    h.update(b"none" if parent is None else parent.to_bytes(8, "big"))
    h.update(array("I", ids).tobytes())
    return int.from_bytes(h.digest()[:8], "big")


class _EngineCache:
    """The engine's prefix cache: an LRU of chained block hashes that reports what it stored / evicted."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def serve(self, hashes: Sequence[int]) -> tuple[int, list[int], list[int]]:
        """(leading blocks hit, hashes newly stored, hashes evicted)."""
        hit = 0
        for h in hashes:
            if h not in self.blocks:
                break
            hit += 1
        stored = []
        for h in hashes:
            if h in self.blocks:
                self.blocks.move_to_end(h)
            else:
                self.blocks[h] = None
                stored.append(h)
        evicted = []
        while len(self.blocks) > self.capacity:
            old, _ = self.blocks.popitem(last=False)
            evicted.append(old)
        return hit, stored, evicted


class FakeEngine:
    """One fake vLLM server (see the module doc): :meth:`app` is its ASGI app."""

    def __init__(self, config: FakeEngineConfig = FakeEngineConfig()) -> None:
        if not config.time_scale > 0:
            raise BadRequestError(f"time_scale must be > 0, got {config.time_scale}")
        self.config = config
        self.profile: CostProfile = load_catalog().profile(config.profile_model, config.profile_device)
        size = config.block_size or (DEFAULT_BLOCK_TOKENS if config.tokenizer else DEFAULT_BLOCK_CHARS)
        self.hasher = PromptHasher(tokenizer=config.tokenizer, block_chars=size, block_tokens=size,
                                   max_blocks=1 << 30)
        self.block_size = size
        self.kv_blocks = config.kv_blocks or cache_blocks(self.profile.model, self.profile.replica_memory_bytes,
                                                          block_tokens=size)
        self.cache = _EngineCache(self.kv_blocks)
        self.running = 0
        self.waiting = 0
        self.held_blocks = 0
        self._slots: asyncio.Semaphore | None = None
        self._seq = 0
        self._pub: Any = None
        self._limits = JSONLimits(max_bytes=config.max_body_bytes, max_depth=32)
        self._metrics()
        if config.kv_events_endpoint:
            import zmq

            self._pub = zmq.Context.instance().socket(zmq.PUB)
            self._pub.setsockopt(zmq.LINGER, 0)
            self._pub.bind(config.kv_events_endpoint)

    @property
    def kv_endpoint(self) -> str | None:
        """The PUB socket's bound address (the port filled in when bound to port 0 / ``*``)."""
        if self._pub is None:
            return None
        import zmq

        ep = self._pub.getsockopt(zmq.LAST_ENDPOINT)
        return ep.decode() if isinstance(ep, bytes) else str(ep)

    def _metrics(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        lv = (self.config.model, "0")
        names = self.config.metric_names
        self._g_running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                                labels, registry=self.registry).labels(*lv)
        self._g_waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                                labels, registry=self.registry).labels(*lv)
        self._g_kv = []
        self._c_queries = []
        self._c_hits = []
        if names in ("new", "both"):
            self._g_kv.append(Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                                    labels, registry=self.registry).labels(*lv))
            self._c_queries.append(Counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of "
                                           "number of queried tokens.", labels, registry=self.registry).labels(*lv))
            self._c_hits.append(Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of "
                                        "cached tokens.", labels, registry=self.registry).labels(*lv))
        if names in ("old", "both"):
            self._g_kv.append(Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.",
                                    labels, registry=self.registry).labels(*lv))
            self._c_queries.append(Counter("vllm:gpu_prefix_cache_queries", "GPU prefix cache queries, in terms "
                                           "of number of queried tokens.", labels,
                                           registry=self.registry).labels(*lv))
            self._c_hits.append(Counter("vllm:gpu_prefix_cache_hits", "GPU prefix cache hits, in terms of number "
                                        "of cached tokens.", labels, registry=self.registry).labels(*lv))
        self._h_ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                                 labels, registry=self.registry,
                                 buckets=(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                          2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)).labels(*lv)

    def _gauges(self) -> None:
        self._g_running.set(self.running)
        self._g_waiting.set(self.waiting)
        for g in self._g_kv:
            g.set(min(1.0, self.held_blocks / self.kv_blocks))

    def _publish(self, events: list[KVEvent]) -> None:
        if self._pub is None or not events:
            return
        import zmq

        payload = encode_batch(KVEventBatch(time.time(), tuple(events), 0), form=self.config.kv_events_form)
        with contextlib.suppress(zmq.Again):  # past the high-water mark a PUB socket drops, as vLLM's does
            self._pub.send_multipart(encode_frames(self.config.kv_events_topic, self._seq, payload), zmq.NOBLOCK)
        self._seq += 1

    def _admit(self, ids: list[int]) -> tuple[int, int]:
        """Look the prompt up in the prefix cache and publish what changed: (hit blocks, prompt blocks)."""
        size = self.block_size
        hashes: list[int] = []
        parent: int | None = None
        for b in range(len(ids) // size):
            parent = engine_block_hash(parent, ids[b * size:(b + 1) * size])
            hashes.append(parent)
        hit, stored, evicted = self.cache.serve(hashes)
        events: list[KVEvent] = []
        if evicted:
            events.append(BlockRemoved(tuple(evicted), "GPU"))
        if stored:
            first = len(hashes) - len(stored)  # stored blocks are the tail after the hit run
            parent_hash = hashes[first - 1] if first > 0 else None
            events.append(BlockStored(tuple(stored), parent_hash, tuple(ids[first * size:len(hashes) * size]),
                                      size, None, "GPU", None))
        self._publish(events)
        for c in self._c_queries:
            c.inc(len(ids))
        for c in self._c_hits:
            c.inc(hit * size)
        return hit, len(hashes)

    def _parse(self, raw: bytes, chat: bool) -> tuple[dict[str, Any], list[int], int]:
        try:
            body = loads_bounded(raw, self._limits)
        except JSONLimitError as exc:
            raise BadRequestError(str(exc)) from None  # names "request body" already
        if not isinstance(body, dict):
            raise BadRequestError("request body must be a JSON object")
        model = body.get("model", self.config.model)
        if model != self.config.model:
            raise BadRequestError(f"The model `{model}` does not exist.", status=404)
        key = "max_completion_tokens" if chat and "max_completion_tokens" in body else "max_tokens"
        n = body.get(key, self.config.default_max_tokens)
        if n is None:
            n = self.config.default_max_tokens
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= self.config.max_output_tokens:
            raise BadRequestError(f"'{key}' must be an integer in [1, {self.config.max_output_tokens}]")
        if not isinstance(body.get("stream", False), bool):
            raise BadRequestError("'stream' must be true or false")
        return body, self.hasher.ids(render_prompt(body, chat=chat)), n

    async def _generate(self, ids: list[int], n: int) -> AsyncIterator[int]:
        """Wait for a slot, prefill, then yield token indexes at the decode rate."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.max_num_seqs)
        scale = self.config.time_scale
        self.waiting += 1
        self._gauges()
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        held = 0
        self.running += 1
        try:
            hit, _ = self._admit(ids)
            held = math.ceil(len(ids) / self.block_size)
            self.held_blocks += held
            self._gauges()
            await asyncio.sleep(self.profile.prefill_seconds(max(0, len(ids) - hit * self.block_size)) / scale)
            for i in range(n):
                if i:
                    await asyncio.sleep(self.profile.decode_step_seconds(max(1, self.running)) / scale)
                yield i
        finally:
            self.running -= 1
            self.held_blocks -= held
            self._slots.release()
            self._gauges()

    async def handle(self, request: Any, chat: bool) -> Any:
        from starlette.responses import JSONResponse, StreamingResponse

        try:
            raw = await read_body(request.receive, self.config.max_body_bytes, 10.0, request.scope)
            body, ids, n = self._parse(raw, chat)
        except ValueError as exc:
            return _err(413, str(exc))
        except BodyTimeoutError as exc:
            return _err(408, str(exc))
        except BadRequestError as exc:
            return _err(exc.status, str(exc))
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        start = time.perf_counter()
        if body.get("stream"):
            async def events() -> AsyncIterator[bytes]:
                async for i in self._generate(ids, n):
                    if i == 0:
                        self._h_ttft.observe(time.perf_counter() - start)
                    last = i == n - 1
                    yield b"data: " + json.dumps(self._chunk(rid, created, chat, i, last)).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        text = []
        async for i in self._generate(ids, n):
            if i == 0:
                self._h_ttft.observe(time.perf_counter() - start)
            text.append(_token(i))
        usage = {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}
        if chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": "".join(text)},
                                      "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": "".join(text), "logprobs": None, "finish_reason": "length"}
        return JSONResponse({"id": rid, "object": "chat.completion" if chat else "text_completion",
                             "created": created, "model": self.config.model, "choices": [choice], "usage": usage})

    def _chunk(self, rid: str, created: int, chat: bool, i: int, last: bool) -> dict[str, Any]:
        finish = "length" if last else None
        if chat:
            delta: dict[str, Any] = {"content": _token(i)}
            if i == 0:
                delta = {"role": "assistant", **delta}
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": _token(i), "logprobs": None, "finish_reason": finish}
        return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion", "created": created,
                "model": self.config.model, "choices": [choice]}

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def completions(request: Any) -> Any:
            return await self.handle(request, chat=False)

        async def chat(request: Any) -> Any:
            return await self.handle(request, chat=True)

        async def models(request: Any) -> Any:
            return JSONResponse({"object": "list", "data": [
                {"id": self.config.model, "object": "model", "created": 0, "owned_by": "vllm",
                 "root": self.config.model, "max_model_len": None}]})

        async def health(request: Any) -> Any:
            return Response(b"", status_code=200)

        async def metrics(request: Any) -> Any:
            from prometheus_client import generate_latest

            self._gauges()
            return Response(generate_latest(self.registry), media_type="text/plain; version=0.0.4; charset=utf-8")

        return Starlette(routes=[
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ])

    def close(self) -> None:
        if self._pub is not None:
            self._pub.close(0)
            self._pub = None


def _token(i: int) -> str:
    return f" t{i}"


def _err(status: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"object": "error", "message": message, "type": "BadRequestError", "code": status},
                        status_code=status)

