"""The requirement rows, loaded from ``requirements.json`` (data, not code).

Each row has an id (``inventory.ids-stable``), a section, a level, the capability that gates it
(``None``: every backend) and one sentence saying what a backend owes.  The suite's test methods
point at rows by id (:func:`row`); a test in the kit's own test suite checks that every row has
exactly one test and every test one row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Final, TypeVar

from accel.errors import ConfigError
from accel.plugin import Capability

__all__ = ["REQUIREMENTS", "SECTIONS", "Level", "Requirement", "Section", "requirement", "row"]


class Level(StrEnum):
    """How much a row matters: certify mode fails on any required row that did not pass."""

    REQUIRED = "required"
    RECOMMENDED = "recommended"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    doc: str


@dataclass(frozen=True)
class Requirement:
    """One row of the conformance matrix."""

    id: str
    section: str
    level: Level
    capability: Capability | None
    doc: str

    @property
    def name(self) -> str:
        """The part after the section: ``ids-stable`` for ``inventory.ids-stable``."""
        return self.id.split(".", 1)[1]


def _load() -> tuple[tuple[Section, ...], dict[str, Requirement]]:
    text = resources.files(__package__).joinpath("requirements.json").read_text(encoding="utf-8")
    data = json.loads(text)
    sections = tuple(Section(**s) for s in data["sections"])
    known = {s.id for s in sections}
    rows: dict[str, Requirement] = {}
    for raw in data["requirements"]:
        cap = raw["capability"]
        req = Requirement(
            id=raw["id"],
            section=raw["section"],
            level=Level(raw["level"]),
            capability=Capability(cap) if cap is not None else None,
            doc=raw["doc"],
        )
        # A malformed table is a bug in the kit itself: fail loudly at import.
        if req.section not in known or not req.id.startswith(req.section + "."):
            raise ConfigError(f"requirements.json: {req.id!r} is not in a known section")
        if req.id in rows:
            raise ConfigError(f"requirements.json: duplicate row {req.id!r}")
        rows[req.id] = req
    return sections, rows


SECTIONS: tuple[Section, ...]
REQUIREMENTS: dict[str, Requirement]
SECTIONS, REQUIREMENTS = _load()

#: Attribute a suite test function carries: the id of the row it checks.
ROW_ATTR: Final = "__accel_requirement__"

_F = TypeVar("_F", bound=Callable[..., object])


def requirement(row_id: str) -> Requirement:
    """The row with this id; :class:`~accel.errors.ConfigError` naming it when there is none."""
    try:
        return REQUIREMENTS[row_id]
    except KeyError:
        raise ConfigError(f"no conformance requirement {row_id!r}") from None


def row(row_id: str) -> Callable[[_F], _F]:
    """Mark a suite test as the check of one row; its docstring becomes the row's sentence."""
    req = requirement(row_id)

    def mark(fn: _F) -> _F:
        setattr(fn, ROW_ATTR, req.id)
        fn.__doc__ = req.doc
        return fn

    return mark
