"""Plugin API versions: integers compared as tuples, negotiated to the highest common one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["PLUGIN_API", "SUPPORTED_API_VERSIONS", "ApiVersion", "negotiate"]


class ApiVersion(NamedTuple):
    """``(major, minor)``.  Within a major, changes are additive only."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str) -> ApiVersion:
        major, _, minor = text.partition(".")
        return cls(int(major), int(minor or 0))


#: The newest plugin API this accel speaks.
PLUGIN_API = ApiVersion(1, 0)
#: Every plugin API version this accel can host.
SUPPORTED_API_VERSIONS: frozenset[ApiVersion] = frozenset({ApiVersion(1, 0)})


def negotiate(
    offered: Iterable[ApiVersion], supported: Iterable[ApiVersion] = SUPPORTED_API_VERSIONS
) -> ApiVersion | None:
    """The highest version both sides support, or ``None``."""
    common = set(offered) & set(supported)
    return max(common) if common else None
