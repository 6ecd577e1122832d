"""A bounded JSON reader for request bodies: size and nesting depth are checked before parsing.

:func:`json.loads` recurses once per nesting level, so a body of a few kilobytes of ``[`` can
exhaust the stack; the depth is therefore counted first with one scan that skips strings, and
``NaN`` / ``Infinity`` (not JSON) are refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_BODY_BYTES", "MAX_DEPTH", "BodyError", "parse_body"]

MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 16
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class BodyError(ValueError):
    """A request body that is not acceptable; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _no_constant(name: str) -> Any:
    raise BodyError(f"{name} is not a JSON number")


def parse_body(raw: bytes, *, max_bytes: int = MAX_BODY_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``raw``; :class:`BodyError` naming what is wrong."""
    if len(raw) > max_bytes:
        raise BodyError(f"request body is {len(raw)} bytes; the limit is {max_bytes}", 413)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("request body is not UTF-8") from None
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                raise BodyError(f"request body nests deeper than {max_depth} levels")
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise BodyError(f"request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
