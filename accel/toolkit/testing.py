"""Test facilities of CLI plugins: their shipped replays as conformance scenarios.

This module imports :mod:`accel.conformance`; only a plugin's ``conformance`` module (which
the matrix runner and the tests load) imports it, so runtime code never loads the kit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accel.conformance import Scenario

from ._differential import COMPARED_FIELDS, PathComparison, compare_paths
from ._scenario import scenario_names

__all__ = ["COMPARED_FIELDS", "PathComparison", "compare_paths", "conformance_scenarios", "native_scenarios"]


def conformance_scenarios(
    package: str,
    notes: Mapping[str, tuple[str, Mapping[str, str]]],
) -> dict[str, Any]:
    """``CONFORMANCE_SCENARIOS`` for a plugin's ``conformance`` module: every shipped replay
    scenario of ``package``, with ``notes[name] = (description, {row id: why it is xfail})``.
    """
    out: dict[str, Any] = {}
    for name in scenario_names(package):
        description, xfail = notes.get(name, ("", {}))
        out[name] = Scenario(name=name, options={"scenario": name}, xfail=dict(xfail), description=description)
    return out


def native_scenarios(
    package: str,
    notes: Mapping[str, tuple[str, Mapping[str, str]]],
    *,
    suffix: str = "@native",
) -> dict[str, Any]:
    """The native path's scenarios: every shipped replay of ``package`` read through the
    plugin's fake library (``read=native``), named ``<scenario><suffix>``; ``notes`` as in
    :func:`conformance_scenarios`, keyed by the replay's name."""
    out: dict[str, Any] = {}
    for name in scenario_names(package):
        description, xfail = notes.get(name, ("", {}))
        out[name + suffix] = Scenario(
            name=name + suffix,
            options={"scenario": name, "read": "native"},
            xfail=dict(xfail),
            description=f"native path: {description}" if description else "native path",
        )
    return out
