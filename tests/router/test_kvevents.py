"""vLLM's KV-event wire format (both encodings), the router's block map, and a live ZMQ feed."""

from __future__ import annotations

import msgpack
import pytest

from accel.router import (
    AllBlocksCleared,
    BlockMap,
    BlockRemoved,
    BlockStored,
    EventCache,
    KVEventBatch,
    KVEventError,
    KVSubscriber,
    PromptHasher,
    decode_batch,
    decode_frames,
    encode_batch,
    encode_frames,
)

from ._engines import start_engine, wait_for


def test_array_form_as_vllm_0_23_writes_it_trailing_defaults_cut() -> None:
    # EventBatch [ts, events, dp_rank]; BlockStored's fields in declaration order after its tag,
    # the trailing ones holding their default omitted (omit_defaults=True).
    payload = msgpack.packb([1700000000.5, [
        ["BlockStored", [11, 12], None, [1, 2, 3, 4], 2, None, "GPU"],
        ["BlockRemoved", [9], "GPU"],
        ["AllBlocksCleared"],
        ["SomethingNewer", 1, 2],
    ], 0])
    batch = decode_batch(payload)
    assert batch.ts == 1700000000.5 and batch.data_parallel_rank == 0 and batch.unknown == 1
    stored, removed, cleared = batch.events
    assert stored == BlockStored((11, 12), None, (1, 2, 3, 4), 2, None, "GPU", None)
    assert removed == BlockRemoved((9,), "GPU")
    assert cleared == AllBlocksCleared()


def test_map_form_after_vllm_pr_42892_with_sha256_bytes_hashes() -> None:
    h1, h2 = b"\x01" * 32, b"\x02" * 32
    payload = msgpack.packb({"ts": 5.0, "events": [
        {"type": "BlockStored", "block_hashes": [h2], "parent_block_hash": h1, "token_ids": [7, 8],
         "block_size": 2, "lora_id": None, "medium": "GPU", "lora_name": None, "group_idx": 0},
        {"type": "BlockRemoved", "block_hashes": [h1]},
    ]}, use_bin_type=True)
    batch = decode_batch(payload)
    assert batch.data_parallel_rank is None
    assert batch.events[0] == BlockStored((h2,), h1, (7, 8), 2, None, "GPU", None)
    assert batch.events[1] == BlockRemoved((h1,), None)


@pytest.mark.parametrize("form", ["array", "map"])
def test_encode_decode_round_trip(form: str) -> None:
    batch = KVEventBatch(3.0, (BlockStored((1,), None, (5, 6), 2, None, "GPU", None), BlockRemoved((2, 3), "GPU"),
                               AllBlocksCleared()), 0)
    frames = encode_frames("", 41, encode_batch(batch, form=form))  # type: ignore[arg-type]
    topic, seq, back = decode_frames(frames)
    assert (topic, seq, back) == ("", 41, batch)


@pytest.mark.parametrize("payload, needle", [
    (b"\xc1", "not msgpack"),
    (msgpack.packb([1.0]), "at least ts and events"),
    (msgpack.packb({"events": []}), "'ts'"),
    (msgpack.packb([1.0, [["BlockStored", [1]]]]), "without token_ids"),
    (msgpack.packb([1.0, [["BlockStored", [1.5], None, [1], 1]]]), "block hash"),
    (msgpack.packb([1.0, [["BlockStored", [1], None, [1], 0]]]), "block_size"),
    (msgpack.packb([1.0, [5]]), "type name"),
    (msgpack.packb("x"), "array or a map"),
])
def test_malformed_payloads_are_typed_errors(payload: bytes, needle: str) -> None:
    with pytest.raises(KVEventError, match=needle):
        decode_batch(payload)


def test_frames_must_be_three_with_an_8_byte_seq() -> None:
    with pytest.raises(KVEventError, match="3 frames"):
        decode_frames([b"", b"\0" * 8])
    with pytest.raises(KVEventError, match="8 bytes"):
        decode_frames([b"", b"\0", b""])


def test_block_map_rebuilds_the_routers_hashes_from_token_ids() -> None:
    hasher = PromptHasher(block_chars=2)
    ids = [ord(c) for c in "abcdef"]
    want = hasher.blocks(ids, "m")
    bm = BlockMap(EventCache(None), 2, "m")
    # the engine's hashes are its own (100, 101, 102); the router maps them through token ids
    bm.apply(KVEventBatch(0.0, (BlockStored((100, 101), None, tuple(ids[:4]), 2, None, "GPU", None),)))
    bm.apply(KVEventBatch(0.0, (BlockStored((102,), 101, tuple(ids[4:]), 2, None, None, None),)))
    assert bm.cache.match(want) == 3 and bm.stored == 3
    bm.apply(KVEventBatch(0.0, (BlockRemoved((101,), "GPU"),)))
    assert bm.cache.match(want) == 1 and bm.removed == 1  # a prefix stops at the first missing block
    # a parent never seen, another block size, a CPU tier, an unknown model: counted, not guessed
    bm.apply(KVEventBatch(0.0, (BlockStored((200,), 999, (1, 2), 2, None, None, None),
                                BlockStored((201,), None, (1, 2, 3, 4), 4, None, None, None),
                                BlockStored((202,), None, (1, 2), 2, None, "CPU", None))))
    assert bm.unplaced == 3
    bm.apply(KVEventBatch(0.0, (AllBlocksCleared(),)))
    assert len(bm.cache) == 0 and bm.cleared == 1
    unknown = BlockMap(EventCache(None), 2, None)
    unknown.apply(KVEventBatch(0.0, (BlockStored((1,), None, (1, 2), 2, None, None, None),)))
    assert unknown.unplaced == 1


def test_the_hash_map_stays_bounded_when_removals_are_missed() -> None:
    bm = BlockMap(EventCache(256), 1, "m")
    for n in range(3000):  # 3000 stored blocks, none removed
        bm.apply(KVEventBatch(0.0, (BlockStored((n,), None, (n,), 1, None, None, None),)))
    assert len(bm.cache) == 256 and len(bm.engine_to_router) == 1024
    assert 2999 in bm.engine_to_router and 0 not in bm.engine_to_router  # the oldest went


@pytest.mark.parametrize("form", ["array", "map"])
def test_the_fake_engines_events_over_zmq_match_the_routers_blocks(form: str) -> None:
    import httpx

    engine = start_engine(kv_events_endpoint="tcp://127.0.0.1:*", kv_events_form=form, kv_blocks=4)
    bm = BlockMap(EventCache(None), 64, "m")
    endpoint = engine.engine.kv_endpoint
    assert endpoint is not None
    sub = KVSubscriber(endpoint, bm.apply).start()
    try:
        prompt = "".join(chr(ord("a") + i % 26) for i in range(64 * 3 + 10))
        want = PromptHasher().blocks([ord(c) for c in prompt], "m")
        # a slow joiner misses what a PUB socket sent before it connected: warm up with one-block
        # prompts of their own until a batch arrives
        with httpx.Client(base_url=engine.url) as client:
            warm = iter(range(1000))

            def warmed() -> bool:
                client.post("/v1/completions", json={"model": "m", "prompt": f"{next(warm):064d}", "max_tokens": 1})
                return sub.batches > 0
            wait_for(warmed)
            client.post("/v1/completions", json={"model": "m", "prompt": prompt, "max_tokens": 1})
            wait_for(lambda: bm.cache.match(want) == 3)
            other = "Z" * (64 * 3)  # three new blocks into a cache of four: two of the first evicted
            client.post("/v1/completions", json={"model": "m", "prompt": other, "max_tokens": 1})
            wait_for(lambda: bm.removed >= 2)
        assert bm.cache.match(want) == 0 and sub.errors == 0
    finally:
        sub.close()
        engine.close()
