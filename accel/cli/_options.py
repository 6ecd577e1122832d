"""Option value types for the ``accel`` parser: every number is checked before a command runs.

:func:`number` builds the ``type=`` of a numeric option: finite, inside its range, with the unit
in the message.  A bad value is a usage error (exit 2, one line), exactly like an unknown
option::

    accel: error: argument --timeout: must be a finite number of seconds > 0 and <= 86400, got 'nan'

Integers are read from at most :data:`MAX_DIGITS` digits, so a 5,000-digit argument is a usage
error and never reaches Python's integer-string limit.  :func:`text` rejects the empty string for
options whose empty value would silently mean something else (``--sim ''``, ``--replay ''``).
:func:`check_numeric_options` replaces a bare ``type=int`` / ``type=float`` left in a parser
(sub-commands contributed by the optional parts) with a finite-number check.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

__all__ = ["MAX_DIGITS", "check_numeric_options", "number", "text"]

#: The most characters a numeric argument may have (sign, digits, point, exponent).
MAX_DIGITS = 40

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _shown(value: str) -> str:
    """``value`` quoted for a one-line message: printable, and short."""
    if len(value) > MAX_DIGITS:
        return f"{value[:MAX_DIGITS]!r}... ({len(value)} characters)"
    return repr(value)


def _bounds(minimum: float | None, maximum: float | None, min_inclusive: bool, fmt: Callable[[float], str]) -> str:
    parts = []
    if minimum is not None:
        parts.append(f"{'>=' if min_inclusive else '>'} {fmt(minimum)}")
    if maximum is not None:
        parts.append(f"<= {fmt(maximum)}")
    return " and ".join(parts)


def number(
    *,
    integer: bool = False,
    unit: str = "",
    minimum: float | None = None,
    maximum: float | None = None,
    min_inclusive: bool = True,
    note: str = "",
) -> Callable[[str], float]:
    """An argparse ``type=`` for a number of ``unit``, inside ``[minimum, maximum]``.

    :param integer: accept whole numbers only (decimal digits: no ``1e3``, no ``0x10``) and
        return an ``int``; otherwise a finite ``float`` (``nan``, ``inf`` and ``1e999`` are
        rejected).
    :param unit: what the number counts, plural, for the message: ``"seconds"``, ``"bytes"``
        (empty: the message says only "a finite number").
    :param minimum: the smallest value (``None``: no lower bound).
    :param maximum: the largest value, inclusive (``None``: no upper bound).
    :param min_inclusive: whether ``minimum`` itself is allowed (``False``: ``> minimum``).
    :param note: said after the range in the message, e.g. ``"0: until interrupted"``.

    The message of a bad value says what is expected and what was given, on one line:
    ``must be a whole number of bytes > 0 and <= 1099511627776, got '1e3'``.
    """
    kind = "a whole number" if integer else "a finite number"

    def fmt(v: float) -> str:
        return str(int(v)) if integer or float(v).is_integer() else f"{v:g}"

    bounds = _bounds(minimum, maximum, min_inclusive, fmt)
    expected = f"must be {kind}" + (f" of {unit}" if unit else "")
    expected += (f" {bounds}" if bounds else "") + (f" ({note})" if note else "")

    def parse(value: str) -> float:
        raw = value.strip()
        pattern = _INT if integer else _FLOAT
        if len(raw) > MAX_DIGITS or not pattern.fullmatch(raw):
            raise argparse.ArgumentTypeError(f"{expected}, got {_shown(value)}")
        parsed: float = int(raw) if integer else float(raw)
        ok = math.isfinite(parsed)
        if ok and minimum is not None:
            ok = parsed >= minimum if min_inclusive else parsed > minimum
        if ok and maximum is not None:
            ok = parsed <= maximum
        if not ok:
            raise argparse.ArgumentTypeError(f"{expected}, got {_shown(value)}")
        return parsed

    parse.__name__ = "integer" if integer else "number"
    return parse


def text(what: str) -> Callable[[str], str]:
    """An argparse ``type=`` for a non-empty string (``what`` names it in the message)."""

    def parse(value: str) -> str:
        if not value.strip():
            raise argparse.ArgumentTypeError(f"needs {what}, got an empty string")
        return value

    parse.__name__ = "text"
    return parse


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                found.extend(_parsers(sub))
    return found


def check_numeric_options(parser: argparse.ArgumentParser) -> list[str]:
    """Give every bare ``type=int``/``type=float`` option of ``parser`` (and its sub-parsers) a
    finite-number check; returns the option strings it changed.

    An option declared with :func:`number` keeps its own range and unit; this is the floor for
    options the optional parts add (a plain ``float`` would take ``nan`` and ``inf``).
    """
    changed = []
    for p in _parsers(parser):
        for action in p._actions:
            if action.type is int or action.type is float:
                action.type = number(integer=action.type is int)
                changed.append("/".join(action.option_strings) or action.dest)
    return changed
