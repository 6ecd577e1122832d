"""A request's prompt as chained block hashes, the router's view of a prompt for prefix routing.

The prompt is *rendered* (a completion's ``prompt``; a chat's ``messages`` joined role by role,
:func:`render_prompt`), turned into token ids (:class:`PromptHasher`) and cut into full blocks;
block *i*'s hash covers blocks 0..i (a 64-bit BLAKE2b of the parent hash and the block's ids),
as vLLM's automatic prefix caching chains its block hashes, so a hit is always a run of leading
blocks.  A partial last block is not hashed: vLLM caches only full blocks.

Two ways to get ids, as the anchors do:

- **characters** (the default): each character's code point is an id and a block is
  ``block_chars`` characters, as llm-d's approximate ``prefix-cache-scorer`` (gateway-api-inference-
  extension@00913f92:pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go: 64 characters
  a block, vLLM's 16 tokens at about 4 characters a token; the chain seeded with the model name;
  at most 256 blocks matched);
- **tokens**, when a tokenizer file (Hugging Face ``tokenizer.json``) is given: ids from the
  ``tokenizers`` library, ``block_tokens`` (vLLM's default block size, 16) a block.  With the
  engine's tokenizer and block size these are the engine's blocks, and vLLM's KV events (which
  carry each stored block's token ids) can be mapped onto them exactly (:mod:`._kvevents`).

The chain is seeded with the model name, so two models never share a block.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._errors import BadRequestError, RouterError

__all__ = ["DEFAULT_BLOCK_CHARS", "DEFAULT_BLOCK_TOKENS", "DEFAULT_MAX_BLOCKS", "PromptHasher", "chain_hash",
           "render_prompt", "seed_hash"]

DEFAULT_BLOCK_CHARS = 64
DEFAULT_BLOCK_TOKENS = 16
DEFAULT_MAX_BLOCKS = 256


def _signed64(digest: bytes) -> int:
    return int.from_bytes(digest, "big", signed=True)


def seed_hash(model: str) -> int:
    """The chain's root: a hash of the model name."""
    return _signed64(hashlib.blake2b(model.encode("utf-8"), digest_size=8, person=b"accel-seed").digest())


def chain_hash(parent: int, ids: Sequence[int]) -> int:
    """One block's hash: BLAKE2b-64 of the parent's hash and the block's ids (each 4 bytes, ids in
    ``[0, 2**32)``)."""
    h = hashlib.blake2b(digest_size=8, person=b"accel-block")
    h.update(parent.to_bytes(8, "big", signed=True))
    h.update(array("I", ids).tobytes())
    return _signed64(h.digest())


def _content_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, Mapping):
                raise BadRequestError(f"{where}.content[{i}] must be an object")
            if part.get("type") == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise BadRequestError(f"{where}.content[{i}].text must be a string")
                parts.append(text)
        return "".join(parts)
    raise BadRequestError(f"{where}.content must be a string or a list of parts")


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


def render_prompt(body: Mapping[str, Any], *, chat: bool) -> str | list[int]:
    """The prompt a request carries: text, or token ids where a completion sends ids.

    A chat renders as ``<|role|>\\ncontent\\n`` per message (a fixed stand-in for the model's chat
    template, which the router does not have: the same conversation always renders the same, and a
    conversation that grows keeps its earlier rendering as a prefix).  Raises
    :class:`BadRequestError` naming the field that is wrong.
    """
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequestError("'messages' must be a non-empty list")
        out = []
        for i, msg in enumerate(messages):
            if not isinstance(msg, Mapping):
                raise BadRequestError(f"messages[{i}] must be an object")
            role = msg.get("role")
            if not isinstance(role, str) or not role:
                raise BadRequestError(f"messages[{i}].role must be a non-empty string")
            out.append(f"<|{role}|>\n{_content_text(msg.get('content'), f'messages[{i}]')}\n")
        return "".join(out)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return str(prompt[0])  # a batch of prompts: routed by the first
        if all(_is_id(p) for p in prompt):
            return list(prompt)
        if all(isinstance(p, list) for p in prompt) and prompt[0] and all(_is_id(t) for t in prompt[0]):
            return list(prompt[0])
    raise BadRequestError("'prompt' must be a string, a list of strings or a list of token ids (0 <= id < 2**32)")


class PromptHasher:
    """Turns a rendered prompt into ids and chained block hashes (see the module doc).

    ``tokenizer``: a Hugging Face ``tokenizer.json`` (token blocks of ``block_tokens``); without
    it, character blocks of ``block_chars``.  ``max_blocks`` caps the blocks hashed per prompt.
    """

    def __init__(self, *, tokenizer: str | Path | None = None, block_chars: int = DEFAULT_BLOCK_CHARS,
                 block_tokens: int = DEFAULT_BLOCK_TOKENS, max_blocks: int = DEFAULT_MAX_BLOCKS) -> None:
        for name, value in (("block_chars", block_chars), ("block_tokens", block_tokens),
                            ("max_blocks", max_blocks)):
            if value < 1:
                raise RouterError(f"{name} must be >= 1, got {value}")
        self.max_blocks = max_blocks
        self._tok: Any = None
        if tokenizer is not None:
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise RouterError("token blocks need the 'tokenizers' library: pip install "
                                  "'accel-sdk[router]'") from exc
            try:
                self._tok = Tokenizer.from_file(str(tokenizer))
            except Exception as exc:
                raise RouterError(f"cannot load tokenizer {tokenizer}: {exc}") from exc
            self.block_size = block_tokens
            self.unit = "token"
        else:
            self.block_size = block_chars
            self.unit = "char"

    def ids(self, prompt: str | list[int]) -> list[int]:
        """The prompt's ids: token ids (tokenizer), or code points (characters); ids pass through."""
        if isinstance(prompt, list):
            return prompt
        if self._tok is not None:
            return list(self._tok.encode(prompt, add_special_tokens=False).ids)
        return [ord(c) for c in prompt]

    def blocks(self, ids: Sequence[int], model: str, limit: int | None = None) -> list[int]:
        """Chained hashes of the full blocks of ``ids`` (at most ``max_blocks``, and at most
        ``limit`` when given: the leading blocks are the same whatever the limit)."""
        size = self.block_size
        n = min(len(ids) // size, self.max_blocks if limit is None else min(limit, self.max_blocks))
        parent = seed_hash(model)
        out = []
        for b in range(n):
            parent = chain_hash(parent, ids[b * size:(b + 1) * size])
            out.append(parent)
        return out

    def hash_prompt(self, prompt: str | list[int], model: str, limit: int | None = None) -> tuple[list[int], int]:
        """``(block hashes, prompt length in ids)`` of a rendered prompt; ``limit``: hash at most
        that many leading blocks (what the routing policy reads, :meth:`Picker.blocks_needed`)."""
        if isinstance(prompt, str) and self._tok is None and _FOUR_BYTE_IDS:
            return self._char_blocks(prompt, model, limit), len(prompt)
        ids = self.ids(prompt)
        return self.blocks(ids, model, limit), len(ids)

    def _char_blocks(self, prompt: str, model: str, limit: int | None = None) -> list[int]:
        """:meth:`blocks` of a text's code points without a list of them: UTF-32 in this machine's
        byte order is the same bytes as ``array("I", ids)`` (lone surrogates kept as their code
        points); a few times faster than the list at the router's request rate.  Only the
        characters of the blocks hashed are encoded."""
        size = self.block_size
        n = min(len(prompt) // size, self.max_blocks if limit is None else min(limit, self.max_blocks))
        if n <= 0:
            return []
        data = prompt[:n * size].encode(_UTF32, "surrogatepass")
        parent = seed_hash(model).to_bytes(8, "big", signed=True)
        out: list[int] = []
        step = 4 * size
        blake2b, from_bytes, append = hashlib.blake2b, int.from_bytes, out.append
        for start in range(0, n * step, step):
            # the same bytes as chain_hash's two updates: the parent's 8 bytes, then the block's ids
            parent = blake2b(parent + data[start:start + step], digest_size=8, person=b"accel-block").digest()
            append(from_bytes(parent, "big", signed=True))
        return out


_UTF32 = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"
_FOUR_BYTE_IDS = array("I").itemsize == 4  # chain_hash packs ids as array("I")
