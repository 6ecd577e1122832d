"""Turn pydantic's validation errors into one-line accel errors that name the field."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic

from ..errors import ValidationError

__all__ = ["validate"]

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
