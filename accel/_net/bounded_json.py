"""Bounded JSON decoding for accel's network services (the k8s extender, ``accel serve``).

``json.loads`` recurses once per nesting level, so a body of 100,000 nested arrays costs a
``RecursionError`` (a traceback and a 500) after a lot of work; and Python converts a
100,000-digit integer in quadratic time (or raises ``ValueError`` past
``sys.get_int_max_str_digits()``).  :func:`loads_bounded` checks size, nesting depth and the length
of every number *before* ``json.loads`` sees the text, with linear scans done by ``re`` in C
(no Python loop per byte), and refuses ``NaN`` / ``Infinity`` (not JSON, RFC 8259 section 6;
Go's encoding/json never writes them), and text that is not UTF-8 (RFC 8259 section 8.1: JSON
exchanged between systems is UTF-8; ``json.loads`` would also guess UTF-16 or UTF-32).  Every
refusal is a :class:`JSONLimitError` whose message names the limit and, where the scan can tell,
the field; its ``limit`` says which limit (``"max_bytes"``: a server answers 413, others 400).

The one bounded reader of the project: the Kubernetes extender and ``accel serve`` (its request
bodies: :data:`accel.service._http.BODY_LIMITS`, stricter than :data:`DEFAULT_LIMITS`) both use it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_LIMITS", "JSONLimitError", "JSONLimits", "check_bounds", "loads_bounded"]


class JSONLimitError(ValueError):
    """A JSON text is malformed or over one of :class:`JSONLimits`; ``field`` names where, if known."""

    def __init__(self, message: str, *, field: str | None = None, limit: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.limit = limit  # the JSONLimits field that refused it; None: not JSON at all


@dataclass(frozen=True, slots=True)
class JSONLimits:
    """The bounds :func:`loads_bounded` enforces.

    ``max_depth``: nesting of arrays and objects (a Kubernetes Pod is about 10 deep);
    ``max_number_chars``: digits in one number (an int64 has 19, a uint64 20, Go's shortest float
    17 significant digits plus an exponent); ``allow_constants``: accept ``NaN`` / ``Infinity``
    (off: they are not JSON)."""

    max_bytes: int = 64 * 1024 * 1024
    max_depth: int = 64
    max_number_chars: int = 32
    allow_constants: bool = False


DEFAULT_LIMITS = JSONLimits()

# A JSON string, possessive so that the scan is linear: "...", with escapes.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_KEY_BEFORE = re.compile(rb'"((?:[^"\\]|\\.){1,128})"\s*:\s*(?:\[\s*)?$')  # "key": or "key": [
# bytes.translate tables: every character a number can hold becomes "0", everything else " "; and
# every bracket becomes "{" (opening) or "}" (closing), everything else is deleted.
_NUMBER_CHARS = bytes(ord("0") if chr(b) in "0123456789.eE+-" else ord(" ") for b in range(256))
_BRACKETS = bytes.maketrans(b"[]", b"{}")
_NUMBER_RUN = re.compile(rb"[0-9.eE+-]*")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _field_before(data: bytes, offset: int) -> str | None:
    """The object key just before ``offset`` (the field the value, or an array's first item, is
    in), if there is one."""
    m = _KEY_BEFORE.search(data, max(0, offset - 200), offset)
    return m.group(1).decode("utf-8", "replace") if m else None


def _check_numbers(data: bytes, outside: bytes, limits: JSONLimits, what: str) -> None:
    n = limits.max_number_chars
    if outside.translate(_NUMBER_CHARS).find(b"0" * (n + 1)) < 0:
        return
    # Error path only: blank out strings keeping their length, so offsets are the original's.
    padded = _STRING.sub(lambda s: b'"' + b"x" * (len(s.group(0)) - 2) + b'"', data)
    start = padded.translate(_NUMBER_CHARS).find(b"0" * (n + 1))
    end = _NUMBER_RUN.match(padded, start).end()  # type: ignore[union-attr]  # matches empty too
    field = _field_before(data, start) if start >= 0 else None
    where = f" (field {field!r})" if field else f" at byte {start}"
    raise JSONLimitError(f"{what}: a number{where} is {end - start} characters long; the limit is {n}",
                         field=field, limit="max_number_chars")


def _too_deep(brackets: bytes, max_depth: int) -> bool | None:
    """Whether a string of ``{`` and ``}`` nests deeper than ``max_depth`` (``None``: it does not
    balance).  A run of more than ``max_depth`` openers answers at once; otherwise each pass
    deletes the innermost pairs (``bytes.replace``, C speed) and looks again; a balanced string of
    depth d is empty after d passes, and at most ``max_depth`` passes are made."""
    run = b"{" * (max_depth + 1)
    s = brackets
    for _ in range(max_depth + 1):
        if not s:
            return False
        if run in s:
            return True
        shorter = s.replace(b"{}", b"")
        if len(shorter) == len(s):
            return None
        s = shorter
    return bool(s)


def _constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not a JSON value")


def check_bounds(data: bytes | str, limits: JSONLimits = DEFAULT_LIMITS, *, what: str = "request body") -> bytes:
    """Check size, nesting depth and number lengths of a JSON text without decoding it (for a
    parser of one's own, such as pydantic's ``model_validate_json``); returns the text as bytes.
    Raises :class:`JSONLimitError`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > limits.max_bytes:
        raise JSONLimitError(f"{what} is {len(raw)} bytes; the limit is {limits.max_bytes}", limit="max_bytes")
    # The text outside strings: drop escape pairs (so every remaining quote delimits a string),
    # split on quotes and keep the even pieces; C speed, no per-string Python call.
    unescaped = _ESCAPE.sub(b"", raw) if b"\\" in raw else raw
    outside = b'""'.join(unescaped.split(b'"')[::2])
    _check_numbers(raw, outside, limits, what)
    brackets = outside.translate(_BRACKETS, _NOT_BRACKET)
    if len(brackets) > limits.max_depth:
        deep = _too_deep(brackets, limits.max_depth)
        if deep:
            raise JSONLimitError(f"{what}: arrays and objects nested deeper than {limits.max_depth} levels",
                                 limit="max_depth")
        if deep is None:  # json.loads would recurse into it to find out: say it here
            raise JSONLimitError(f"{what} is not JSON: its brackets do not balance")
    return raw


def loads_bounded(data: bytes | str, limits: JSONLimits = DEFAULT_LIMITS, *, what: str = "request body") -> Any:
    """``json.loads(data)`` after :func:`check_bounds`; raises :class:`JSONLimitError` (a
    ``ValueError``) for anything that is not JSON or is over a limit, never ``RecursionError``."""
    raw = check_bounds(data, limits, what=what)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONLimitError(f"{what} is not UTF-8 (byte {exc.start})") from None
    try:
        if limits.allow_constants:
            return json.loads(raw)
        return json.loads(raw, parse_constant=_constant)
    except JSONLimitError as exc:
        raise JSONLimitError(f"{what}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JSONLimitError(f"{what} is not JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # cannot happen past check_bounds; still a 400, never a 500
        raise JSONLimitError(f"{what} is not JSON: {exc}") from None
