"""Prompts as chained block hashes: characters by default, tokens with a tokenizer file."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.router import BadRequestError, PromptHasher, RouterError, chain_hash, render_prompt, seed_hash


def test_character_blocks_chain_and_skip_the_partial_tail() -> None:
    h = PromptHasher(block_chars=4)
    blocks, n = h.hash_prompt("abcdefghij", "m")
    assert n == 10 and len(blocks) == 2  # "ij" is a partial block: not cached, not hashed
    assert blocks[0] == chain_hash(seed_hash("m"), [ord(c) for c in "abcd"])
    assert blocks[1] == chain_hash(blocks[0], [ord(c) for c in "efgh"])
    longer, _ = h.hash_prompt("abcdefghijklmnop", "m")
    assert longer[:2] == blocks  # a longer prompt keeps its prefix's blocks
    other, _ = h.hash_prompt("abcdefghij", "other-model")
    assert not set(other) & set(blocks)  # the model seeds the chain
    changed, _ = h.hash_prompt("Xbcdefghij", "m")
    assert not set(changed) & set(blocks)  # a change early changes every later block


def test_blocks_are_capped_and_fit_a_signed_64_bit_key() -> None:
    h = PromptHasher(block_chars=2, max_blocks=3)
    blocks, n = h.hash_prompt("a" * 100, "m")
    assert n == 100 and len(blocks) == 3
    assert all(-(2**63) <= b < 2**63 for b in blocks)


def test_chat_renders_role_by_role_and_a_grown_conversation_keeps_its_prefix() -> None:
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    grown = [*first, {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
             {"role": "user", "content": "more"}]
    a = render_prompt({"messages": first}, chat=True)
    b = render_prompt({"messages": grown}, chat=True)
    assert a == "<|system|>\nbe brief\n<|user|>\nhi\n"
    assert isinstance(b, str) and b.startswith(a) and "hello" in b


@pytest.mark.parametrize("body, chat, needle", [
    ({"messages": []}, True, "'messages'"),
    ({"messages": [{"content": "x"}]}, True, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, True, "messages[0].content"),
    ({"prompt": 5}, False, "'prompt'"),
    ({"prompt": [1, -2]}, False, "'prompt'"),
    ({"prompt": [True]}, False, "'prompt'"),
    ({}, False, "'prompt'"),
])
def test_bad_prompts_are_refused_naming_the_field(body: dict[str, object], chat: bool, needle: str) -> None:
    with pytest.raises(BadRequestError) as err:
        render_prompt(body, chat=chat)
    assert needle in str(err.value) and err.value.status == 400


def test_token_ids_pass_through_and_batches_route_by_their_first_prompt() -> None:
    assert render_prompt({"prompt": [1, 2, 3]}, chat=False) == [1, 2, 3]
    assert render_prompt({"prompt": [[4, 5], [6]]}, chat=False) == [4, 5]
    assert render_prompt({"prompt": ["a", "b"]}, chat=False) == "a"


def test_token_blocks_from_a_tokenizer_file(tmp_path: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "the": 1, "cat": 2, "sat": 3, "on": 4, "mat": 5}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    h = PromptHasher(tokenizer=path, block_tokens=2)
    assert h.unit == "token" and h.block_size == 2
    blocks, n = h.hash_prompt("the cat sat on the mat", "m")
    assert n == 6 and len(blocks) == 3
    assert blocks[0] == chain_hash(seed_hash("m"), [1, 2])
    assert blocks[2] == chain_hash(blocks[1], [1, 5])


def test_a_bad_tokenizer_file_and_bad_sizes_are_typed_errors(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(RouterError, match="cannot load tokenizer"):
        PromptHasher(tokenizer=bad)
    with pytest.raises(RouterError, match="block_chars"):
        PromptHasher(block_chars=0)


def test_character_blocks_of_text_match_the_blocks_of_its_code_points() -> None:
    # the router hashes text straight from its UTF-32 bytes; the engine side hashes the id list
    h = PromptHasher(block_chars=4)
    for text in ("", "abc", "abcdefghij" * 7, "h\u00e9llo w\u00f6rld \U0001f600\U0001f601 \ud800 \udfff ok" * 3):
        assert h.hash_prompt(text, "m") == (h.blocks([ord(c) for c in text], "m"), len(text))
    capped = PromptHasher(block_chars=2, max_blocks=3)
    assert capped.hash_prompt("abcdefghij", "m") == (capped.blocks([ord(c) for c in "abcdefghij"], "m"), 10)



def test_a_limit_hashes_the_same_leading_blocks_and_no_more() -> None:
    h = PromptHasher(block_chars=4, max_blocks=5)
    text = "abcdefghijklmnopqrstuvwxyz"  # 6 full blocks, 5 hashed
    full, n = h.hash_prompt(text, "m")
    assert n == 26 and len(full) == 5
    for limit in (0, 1, 2, 5, 9):
        assert h.hash_prompt(text, "m", limit) == (full[:limit], 26)
        assert h.hash_prompt([ord(c) for c in text], "m", limit) == (full[:limit], 26)
