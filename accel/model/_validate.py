"""Turn pydantic's validation errors into one-line accel errors that name the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic

from ..errors import ValidationError
from ._base import extra_problem

__all__ = ["OutOfBounds", "validate", "validate_reading"]

M = TypeVar("M", bound=pydantic.BaseModel)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def validate(cls: type[M], data: Any, *, what: str | None = None) -> M:
    """Validate ``data`` as ``cls`` or raise :class:`accel.errors.ValidationError`.

    The message names the first offending field path (``devices[3].memory[0].used_bytes``)
    and says what was wrong, on one line; ``field`` carries the path.
    """
    try:
        return cls.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        path = _loc(tuple(first.get("loc", ())))
        msg = str(first.get("msg", "invalid"))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        label = what or cls.__name__
        where = f"{path}: " if path else ""
        raise ValidationError(f"invalid {label}: {where}{msg}{more}", field=path or None) from exc


#: pydantic error types that mean "a number outside its physical bounds" (or not finite).
_BOUND_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}
)


@dataclass(frozen=True)
class OutOfBounds:
    """A value :func:`validate_reading` left out: ``field`` (a path such as
    ``memory[0].total_bytes``), the value, and pydantic's one-line reason."""

    field: str
    value: Any
    reason: str

    def __str__(self) -> str:
        return f"{self.field} = {self.value!r} is not a reading: {self.reason}"


def _without(data: Any, loc: tuple[int | str, ...]) -> Any:
    """``data`` with the value at ``loc`` removed (copied along the path, never mutated)."""
    if not loc:
        return data
    head, rest = loc[0], loc[1:]
    if isinstance(data, Mapping) and head in data:
        if not rest:
            return {k: v for k, v in data.items() if k != head}
        return {**data, head: _without(data[head], rest)}
    if isinstance(data, (list, tuple)) and isinstance(head, int) and 0 <= head < len(data):
        items = list(data)
        if not rest:
            del items[head]
        else:
            items[head] = _without(items[head], rest)
        return type(data)(items) if isinstance(data, tuple) else items
    if isinstance(data, (set, frozenset)) and not rest:
        return data
    raise KeyError(loc)


def validate_reading(cls: type[M], data: Any, *, what: str | None = None) -> tuple[M, tuple[OutOfBounds, ...]]:
    """Validate a reading, leaving out values no device can have instead of failing.

    A number outside its unit's physical bounds (:data:`accel.model.BOUNDS`: a memory total of
    1e29 bytes, a 4,294,967,295 W power limit, a clock of 1.8e25 Hz, NaN) is removed, so the
    field takes its default (``None``: unknown), and returned as an :class:`OutOfBounds` for
    the caller to report as a ``field`` problem.  Any other error, or a bound on a field that
    has no default, raises :class:`~accel.errors.ValidationError` as :func:`validate` does.
    """
    dropped: list[OutOfBounds] = []
    original = data
    extras = data.get("extras") if isinstance(data, Mapping) else None
    if isinstance(extras, Mapping):
        kept = {}
        for key, value in extras.items():
            why = extra_problem(str(key), value)
            if why is None:
                kept[key] = value
            else:
                dropped.append(OutOfBounds(f"extras[{key!r}]", value, why))
        data = {**data, "extras": kept}
    for _ in range(8):  # each pass removes every offending value pydantic reported
        try:
            return cls.model_validate(data), tuple(dropped)
        except pydantic.ValidationError as exc:
            errors = exc.errors(include_url=False)
            if not all(e.get("type") in _BOUND_ERRORS for e in errors):
                break
            try:
                # Deepest and last first, so removing a list item does not shift the others.
                for err in sorted(errors, key=lambda e: tuple(_order(p) for p in e["loc"]), reverse=True):
                    loc = tuple(err["loc"])
                    data = _without(data, loc)
                    dropped.append(OutOfBounds(_loc(loc), err.get("input"), str(err.get("msg", "invalid"))))
            except KeyError:
                break
    # Not only bounds (or a bound on a required field): the error names the original value.
    return validate(cls, original, what=what), ()


def _order(part: int | str) -> tuple[int, int | str]:
    return (0, part) if isinstance(part, int) else (1, part)
