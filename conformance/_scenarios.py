"""The scenario registry: which recorded or simulated hosts each backend is certified on.

A plugin package ``P`` (the module its ``accel.backends`` entry point names, e.g.
``accel.plugins.nvidia``) may ship a module ``P.conformance`` with::

    CONFORMANCE_SCENARIOS = {
        "h100-8": Scenario(config=lambda tmp: BackendConfig(runner=ReplayRunner(HERE / "h100-8"))),
        "a100-mig": {"scenario": "a100-mig"},        # a mapping: BackendConfig.options
        "replay": make_config,                         # a callable(tmp_path) -> BackendConfig
    }

Importing ``P.conformance`` must be as light as ``P`` itself (no vendor library).  The matrix
command (``python -m accel.conformance.matrix --all``) runs the kit for every scenario of every
installed backend.  The simulator's profiles are found the same way (``accel.sim.conformance``).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from accel.errors import ConfigError
from accel.plugin import ENTRY_POINT_GROUP, Backend, BackendConfig

from ._hooks import Fault, Oracle
from ._suite import ConformanceSuite

__all__ = ["SCENARIOS_ATTR", "Scenario", "all_scenarios", "scenarios_for", "suite_for"]

#: The attribute a plugin's ``conformance`` module defines.
SCENARIOS_ATTR = "CONFORMANCE_SCENARIOS"

ConfigFactory = Callable[[Path], BackendConfig]


@dataclass(frozen=True)
class Scenario:
    """One host a backend is certified on: how to configure it, and the suite's optional extras."""

    name: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    config: ConfigFactory | None = None
    oracle: Oracle | None = None
    lose_device: Callable[[Backend, str], None] | None = None
    make_health_unreadable: Callable[[Backend, str], None] | None = None
    #: ``(tmp_path, fault, position) -> BackendConfig | None``: see ConformanceSuite.faulted_config.
    faulted_config: Callable[[Path, Fault, int], BackendConfig | None] | None = None
    xfail: Mapping[str, str] = field(default_factory=dict)
    snapshot_budget: int | None = None
    description: str = ""


def _as_scenario(name: str, value: object, where: str) -> Scenario:
    if isinstance(value, Scenario):
        return value if value.name else Scenario(**{**value.__dict__, "name": name})
    if isinstance(value, Mapping):
        return Scenario(name=name, options=dict(value))
    if callable(value):
        return Scenario(name=name, config=value)
    raise ConfigError(f"{where}[{name!r}] must be a Scenario, an options mapping or a config factory, got {value!r}")


def _entry_module(backend: str) -> str | None:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == backend:
            return ep.value.partition(":")[0].strip()
    return None


def with_options(config: BackendConfig, options: Mapping[str, Any]) -> BackendConfig:
    """``config`` with ``options`` merged over its own (the same config when there are none)."""
    if not options:
        return config
    # replace(): every other field stays (call_timeout_s and enrich_from_sysfs were once dropped here).
    return dataclasses.replace(config, options={**config.options, **options})


def scenarios_for(backend: str) -> dict[str, Scenario]:
    """The scenarios ``backend``'s package registers (empty when it has none or is not installed)."""
    module = _entry_module(backend)
    if module is None:
        return {}
    name = f"{module}.conformance"
    try:
        spec = importlib.util.find_spec(name)
    except (ModuleNotFoundError, ValueError):
        spec = None
    if spec is None:
        return {}
    mod = importlib.import_module(name)
    raw = getattr(mod, SCENARIOS_ATTR, None)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{name}.{SCENARIOS_ATTR} must be a dict of scenario name -> Scenario")
    return {str(k): _as_scenario(str(k), v, f"{name}.{SCENARIOS_ATTR}") for k, v in raw.items()}


def all_scenarios(backends: list[str] | None = None) -> dict[str, dict[str, Scenario]]:
    """Every installed backend that ships scenarios, with them (sorted by name)."""
    names = backends or sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})
    found = {}
    for name in names:
        scen = scenarios_for(name)
        if scen:
            found[name] = dict(sorted(scen.items()))
    return found


def _class_name(backend: str, scenario: str) -> str:
    words = re.split(r"[^A-Za-z0-9]+", f"{backend} {scenario}")
    return "Test" + "".join(w[:1].upper() + w[1:] for w in words if w)


def suite_for(
    backend: str, scenario: str | Scenario, *, options: Mapping[str, Any] | None = None
) -> type[ConformanceSuite]:
    """A ready :class:`ConformanceSuite` subclass for one registered scenario of ``backend``.

    ``options`` are merged over the scenario's own (``--accel-option`` on the command line).
    """
    if isinstance(scenario, str):
        known = scenarios_for(backend)
        if scenario not in known:
            raise ConfigError(f"backend {backend!r} has no conformance scenario {scenario!r}; known: {sorted(known)}")
        scen = known[scenario]
    else:
        scen = scenario
    merged = {**scen.options, **(options or {})}
    factory = scen.config

    def backend_config(cls: type[ConformanceSuite], tmp_path: Path) -> BackendConfig:
        if factory is None:
            return BackendConfig(options=dict(merged))
        return with_options(factory(tmp_path), options or {})

    attrs: dict[str, Any] = {
        "backend": backend,
        "scenario": scen.name,
        "options": merged,
        "oracle": scen.oracle,
        "xfail": dict(scen.xfail),
        "backend_config": classmethod(backend_config),
        # Everything above comes from the scenario: nothing left for adopt_plugin_scenario to fill.
        "_accel_adopted": True,
        "_accel_scenario": scen,
        "__doc__": scen.description or f"Conformance of {backend} on scenario {scen.name}.",
    }
    if scen.lose_device is not None:
        attrs["lose_device"] = staticmethod(scen.lose_device)
    if scen.make_health_unreadable is not None:
        attrs["make_health_unreadable"] = staticmethod(scen.make_health_unreadable)
    if scen.faulted_config is not None:
        faulted = scen.faulted_config

        def faulted_config(cls: type[ConformanceSuite], tmp_path: Path, fault: Fault,
                           position: int) -> BackendConfig | None:
            return faulted(tmp_path, fault, position)

        attrs["faulted_config"] = classmethod(faulted_config)
    if scen.snapshot_budget is not None:
        attrs["snapshot_budget"] = scen.snapshot_budget
    return type(_class_name(backend, scen.name), (ConformanceSuite,), attrs)
