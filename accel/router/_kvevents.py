"""vLLM's KV-cache events: the wire format (decode and encode) and a replica's exact block set.

Wire format (vllm-project/vllm@0181ea3173e53eea8cf04a86891488e3dc89bb34:vllm/distributed/kv_events.py,
and /work/shared/reference/wire-facts.md section 2 for the releases):

- ZMQ PUB socket, one message per batch of three frames: ``topic`` (UTF-8, default empty),
  ``seq`` (8-byte big-endian unsigned, from 0, +1 per batch), ``payload`` (msgpack);
- the payload is an ``EventBatch`` ``ts`` (float, epoch seconds), ``events`` (list),
  ``data_parallel_rank`` (int or nil, may be absent): a msgpack array in that order (releases up
  to v0.23.0, and the v0.26.0 wire dumps) or a map with those keys (the msgspec struct of the commit
  above, which declares it without ``array_like``); both are accepted;
- each event is tagged with its class name: an array whose first item is the tag
  (``["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
  lora_name, extra_keys, group_idx, ...]``; trailing fields holding their default may be cut) or a
  map with a ``"type"`` key and the field names (vLLM PR #42892);
- ``BlockRemoved``: ``block_hashes``, ``medium``, ``group_idx``; ``AllBlocksCleared``: no field;
- a block hash is an int (64-bit) or bytes (sha256), depending on the engine's hash setting.

:class:`BlockMap` keeps a replica's blocks *in the router's hashes*: a stored block's hash is
recomputed from its parent's router hash and its ``token_ids`` (:func:`~._prefix.chain_hash`), so
the router need not know the engine's hash function or seed; it needs the same ids and block size
(token blocks from the engine's tokenizer, or the fake engine's character ids).  A block whose
parent was never seen (events missed) or whose size differs from the router's is counted, not
guessed.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from accel.scheduler.serving import PrefixCache

from ._errors import KVEventError
from ._prefix import chain_hash, seed_hash

__all__ = ["AllBlocksCleared", "BlockMap", "BlockRemoved", "BlockStored", "EventCache", "KVEventBatch",
           "KVSubscriber", "decode_batch", "decode_frames", "encode_batch", "encode_frames"]

BlockHash = int | bytes
#: The engine-to-router hash map holds at most this many times the cache view's capacity.
MAP_FACTOR = 4


@dataclass(frozen=True)
class BlockStored:
    block_hashes: tuple[BlockHash, ...]
    parent_block_hash: BlockHash | None
    token_ids: tuple[int, ...]
    block_size: int
    lora_id: int | None = None
    medium: str | None = None
    lora_name: str | None = None


@dataclass(frozen=True)
class BlockRemoved:
    block_hashes: tuple[BlockHash, ...]
    medium: str | None = None


@dataclass(frozen=True)
class AllBlocksCleared:
    pass


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared


@dataclass(frozen=True)
class KVEventBatch:
    ts: float
    events: tuple[KVEvent, ...]
    data_parallel_rank: int | None = None
    #: Events of a type this decoder does not know (a newer engine's), skipped.
    unknown: int = 0


_STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name")
_REMOVED_FIELDS = ("block_hashes", "medium")


def _hash(value: Any, where: str) -> BlockHash:
    if isinstance(value, bytes | int) and not isinstance(value, bool):
        return value
    raise KVEventError(f"{where}: a block hash must be an int or bytes, got {type(value).__name__}")


def _hashes(value: Any, where: str) -> tuple[BlockHash, ...]:
    if not isinstance(value, list | tuple):
        raise KVEventError(f"{where}: block_hashes must be a list")
    return tuple(_hash(v, where) for v in value)


def _fields(raw: Any, names: Sequence[str], where: str) -> tuple[str, dict[str, Any]]:
    """(tag, {field: value}) of an event in array or map form."""
    if isinstance(raw, list | tuple):
        if not raw or not isinstance(raw[0], str):
            raise KVEventError(f"{where}: an array event starts with its type name")
        return raw[0], dict(zip(names, raw[1:], strict=False))
    if isinstance(raw, Mapping):
        tag = raw.get("type")
        if not isinstance(tag, str):
            raise KVEventError(f"{where}: a map event needs a string 'type'")
        return tag, {k: raw[k] for k in names if k in raw}
    raise KVEventError(f"{where}: an event is an array or a map, got {type(raw).__name__}")


def _opt_str(value: Any, name: str, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise KVEventError(f"{where}: {name} must be a string or nil")


def _event(raw: Any, where: str) -> KVEvent | None:
    tag = raw[0] if isinstance(raw, list | tuple) and raw else raw.get("type") if isinstance(raw, Mapping) else None
    if tag == "BlockStored":
        _, f = _fields(raw, _STORED_FIELDS, where)
        for need in ("block_hashes", "token_ids", "block_size"):
            if need not in f:
                raise KVEventError(f"{where}: BlockStored without {need}")
        ids, size = f["token_ids"], f["block_size"]
        if not isinstance(ids, list | tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise KVEventError(f"{where}: token_ids must be a list of ints")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise KVEventError(f"{where}: block_size must be a positive int")
        parent = f.get("parent_block_hash")
        lora_id = f.get("lora_id")
        if lora_id is not None and not isinstance(lora_id, int):
            raise KVEventError(f"{where}: lora_id must be an int or nil")
        return BlockStored(_hashes(f["block_hashes"], where), None if parent is None else _hash(parent, where),
                           tuple(ids), size, lora_id, _opt_str(f.get("medium"), "medium", where),
                           _opt_str(f.get("lora_name"), "lora_name", where))
    if tag == "BlockRemoved":
        _, f = _fields(raw, _REMOVED_FIELDS, where)
        if "block_hashes" not in f:
            raise KVEventError(f"{where}: BlockRemoved without block_hashes")
        return BlockRemoved(_hashes(f["block_hashes"], where), _opt_str(f.get("medium"), "medium", where))
    if tag == "AllBlocksCleared":
        return AllBlocksCleared()
    if isinstance(tag, str):
        return None  # a newer engine's event type
    raise KVEventError(f"{where}: an event is an array starting with its type name or a map with 'type'")


def decode_batch(payload: bytes) -> KVEventBatch:
    """One msgpack ``EventBatch`` payload; :class:`KVEventError` naming what is wrong."""
    import msgpack

    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise KVEventError(f"KV-event payload is not msgpack: {exc}") from None
    if isinstance(raw, list | tuple):
        if len(raw) < 2:
            raise KVEventError("an array EventBatch holds at least ts and events")
        ts, events = raw[0], raw[1]
        rank = raw[2] if len(raw) > 2 else None
    elif isinstance(raw, Mapping):
        if "ts" not in raw or "events" not in raw:
            raise KVEventError("a map EventBatch needs 'ts' and 'events'")
        ts, events, rank = raw["ts"], raw["events"], raw.get("data_parallel_rank")
    else:
        raise KVEventError(f"an EventBatch is an array or a map, got {type(raw).__name__}")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise KVEventError("EventBatch ts must be a number")
    if not isinstance(events, list | tuple):
        raise KVEventError("EventBatch events must be a list")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
        raise KVEventError("EventBatch data_parallel_rank must be an int or nil")
    out: list[KVEvent] = []
    unknown = 0
    for i, ev in enumerate(events):
        decoded = _event(ev, f"events[{i}]")
        if decoded is None:
            unknown += 1
        else:
            out.append(decoded)
    return KVEventBatch(float(ts), tuple(out), rank, unknown)


def decode_frames(frames: Sequence[bytes]) -> tuple[str, int, KVEventBatch]:
    """``(topic, seq, batch)`` of one PUB message (three frames)."""
    if len(frames) != 3:
        raise KVEventError(f"a KV-event message has 3 frames (topic, seq, payload), got {len(frames)}")
    topic, seq, payload = frames
    if len(seq) != 8:
        raise KVEventError(f"the seq frame is 8 bytes, got {len(seq)}")
    try:
        name = topic.decode("utf-8")
    except UnicodeDecodeError:
        raise KVEventError("the topic frame is not UTF-8") from None
    return name, int.from_bytes(seq, "big"), decode_batch(payload)


def _event_wire(ev: KVEvent, form: Literal["array", "map"]) -> Any:
    if isinstance(ev, BlockStored):
        values: list[Any] = [list(ev.block_hashes), ev.parent_block_hash, list(ev.token_ids), ev.block_size,
                             ev.lora_id, ev.medium, ev.lora_name]
        names: Sequence[str] = _STORED_FIELDS
        tag = "BlockStored"
    elif isinstance(ev, BlockRemoved):
        values, names, tag = [list(ev.block_hashes), ev.medium], _REMOVED_FIELDS, "BlockRemoved"
    else:
        values, names, tag = [], (), "AllBlocksCleared"
    if form == "map":
        return {"type": tag, **dict(zip(names, values, strict=True))}
    return [tag, *values]


def encode_batch(batch: KVEventBatch, *, form: Literal["array", "map"] = "array") -> bytes:
    """A msgpack ``EventBatch`` in vLLM's array form (<= v0.23) or map form (after PR #42892)."""
    import msgpack

    events = [_event_wire(ev, form) for ev in batch.events]
    if form == "map":
        doc: Any = {"ts": batch.ts, "events": events}
        if batch.data_parallel_rank is not None:
            doc["data_parallel_rank"] = batch.data_parallel_rank
    else:
        doc = [batch.ts, events, batch.data_parallel_rank]
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    return packed


def encode_frames(topic: str, seq: int, payload: bytes) -> tuple[bytes, bytes, bytes]:
    return topic.encode("utf-8"), seq.to_bytes(8, "big"), payload


class EventCache(PrefixCache):
    """A :class:`PrefixCache` the engine's events also write: blocks added and discarded one by one."""

    def add(self, block: int) -> None:
        blocks = self._blocks
        if block in blocks:
            blocks.move_to_end(block)
            return
        blocks[block] = None
        if self.capacity_blocks is not None:
            while len(blocks) > self.capacity_blocks:
                blocks.popitem(last=False)

    def discard(self, block: int) -> None:
        self._blocks.pop(block, None)


@dataclass
class BlockMap:
    """One replica's blocks from its KV events, in the router's hashes (see the module doc).

    ``cache`` is the router's view of the replica (what the cache-aware policy matches against);
    ``block_size`` the router's block size; ``model`` seeds the chain of a block with no parent
    (``None`` until the replica's model is known: such blocks are counted unplaced).
    """

    cache: EventCache
    block_size: int
    model: str | None
    engine_to_router: dict[BlockHash, int] = field(default_factory=dict)
    stored: int = 0
    removed: int = 0
    cleared: int = 0
    #: Blocks not placed: parent unknown, or a block size other than the router's, or not on GPU.
    unplaced: int = 0

    def apply(self, batch: KVEventBatch) -> None:
        for ev in batch.events:
            if isinstance(ev, BlockStored):
                self._stored(ev)
            elif isinstance(ev, BlockRemoved):
                if ev.medium not in (None, "GPU"):
                    continue
                for h in ev.block_hashes:
                    ours = self.engine_to_router.pop(h, None)
                    if ours is not None:
                        self.cache.discard(ours)
                        self.removed += 1
            else:
                self.engine_to_router.clear()
                self.cache.clear()
                self.cleared += 1

    def _stored(self, ev: BlockStored) -> None:
        n = len(ev.block_hashes)
        if ev.medium not in (None, "GPU") or ev.block_size != self.block_size or len(ev.token_ids) < n * ev.block_size:
            self.unplaced += n
            return
        if ev.parent_block_hash is None:
            parent: int | None = None if self.model is None else seed_hash(self.model)
        else:
            parent = self.engine_to_router.get(ev.parent_block_hash)
        if parent is None:
            self.unplaced += n
            return
        size = ev.block_size
        for i, h in enumerate(ev.block_hashes):
            parent = chain_hash(parent, ev.token_ids[i * size:(i + 1) * size])
            self.engine_to_router[h] = parent
            self.cache.add(parent)
            self.stored += 1
        self._bound()

    def _bound(self) -> None:
        """Keep the engine-hash map bounded when removals were missed: past ``MAP_FACTOR`` x the
        cache's capacity, the oldest mappings go (a later child of theirs is then unplaced)."""
        cap = self.cache.capacity_blocks
        if cap is None:
            return
        limit = max(1024, MAP_FACTOR * cap)
        mapping = self.engine_to_router
        if len(mapping) > limit:
            for h in list(itertools.islice(mapping, len(mapping) - limit)):
                del mapping[h]


class KVSubscriber:
    """A ZMQ SUB socket on one engine's KV-event endpoint, on a daemon thread.

    Each decoded batch goes to ``on_batch`` (called on the subscriber's thread); a malformed
    message is counted in :attr:`errors` and skipped; a jump in ``seq`` is counted in :attr:`gaps`
    (missed batches: the view may be short of blocks until they are used again).
    """

    def __init__(self, endpoint: str, on_batch: Callable[[KVEventBatch], None], *, topic: str = "") -> None:
        import zmq

        self.endpoint = endpoint
        self._on_batch = on_batch
        self._sock: Any = zmq.Context.instance().socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.SUBSCRIBE, topic.encode("utf-8"))
        self._sock.connect(endpoint)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kv-events {endpoint}", daemon=True)
        self.batches = 0
        self.errors = 0
        self.gaps = 0
        self.last_seq: int | None = None
        self.last_error: str | None = None
        self.last_batch_at: float | None = None

    def start(self) -> KVSubscriber:
        self._thread.start()
        return self

    def _run(self) -> None:
        import zmq

        try:
            while not self._stop.is_set():
                if not self._sock.poll(100):
                    continue
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
                try:
                    _, seq, batch = decode_frames(frames)
                except KVEventError as exc:
                    self.errors += 1
                    self.last_error = str(exc)
                    continue
                if self.last_seq is not None and seq != self.last_seq + 1:
                    self.gaps += 1
                self.last_seq = seq
                self.batches += 1
                self.last_batch_at = time.monotonic()
                self._on_batch(batch)
        finally:
            self._sock.close(0)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

