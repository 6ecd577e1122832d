"""The simulated backend ``sim``: the embedded default that always works.

Select a profile with ``ACCEL_SIM=<profile>`` (or a path to a profile JSON file) or the
``profile`` option (``accel ls --sim dgx-h100``).  Options: ``seed`` (int), ``faults``
(``kind[:device][@tick][=param]``, comma-separated; see :class:`FaultKind`), ``tick_on_read``
(bool), ``load`` (0..1, fixes utilisation), ``clock`` (a file: every process naming it reads
one simulation, a tick of 10 simulated seconds per read; see :mod:`._clock`), ``state`` (a file
keeping the partitions ``accel partition create`` made, shared by every process naming it; see
:mod:`._state`).
:func:`generate_cluster` builds many hosts for the scheduler.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..plugin import (
    PLUGIN_API,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    PluginInfo,
    ProbeResult,
    check_options,
)
from ._faults import Fault, FaultKind, parse_faults

if TYPE_CHECKING:
    from ._backend import SimBackend

__all__ = [
    "ENV_PROFILE",
    "PLUGIN",
    "Fault",
    "FaultKind",
    "SimBackend",
    "SimPlugin",
    "generate_cluster",
    "list_profiles",
    "parse_faults",
]

ENV_PROFILE = "ACCEL_SIM"


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    from ..errors import ConfigError

    raise ConfigError(f"sim option {name}: expected a boolean, got {value!r}")


class SimPlugin(BackendPlugin):
    """The ``sim`` entry point: present when a profile is selected."""

    info = PluginInfo(
        name="sim",
        vendor="accel",
        version="1.0",
        api_versions=frozenset({PLUGIN_API}),
        capabilities=frozenset(Capability) - {Capability.SERIAL},
        description="Simulated accelerators from data profiles, with fault injection",
        api="sim",
    )

    def _profile_name(self, config: BackendConfig) -> str | None:
        name = config.option("profile") or os.environ.get(ENV_PROFILE)
        return str(name) if name else None

    def probe(self, config: BackendConfig) -> ProbeResult:
        name = self._profile_name(config)
        if not name:
            return ProbeResult.absent(f"no profile selected (set {ENV_PROFILE}=<profile> or use --sim <profile>)")
        return ProbeResult.present(f"profile {name}")

    def open(self, config: BackendConfig) -> Backend:
        from ..errors import ConfigError
        from ._backend import SimBackend
        from ._clock import SharedClock
        from ._profile import load_profile
        from ._state import StateFile

        name = self._profile_name(config)
        if not name:
            raise ConfigError(f"sim: no profile selected (set {ENV_PROFILE} or the 'profile' option)")
        built = load_profile(name)
        check_options("sim", config, ("profile", "seed", "faults", "tick_on_read", "load", "clock", "state"))
        try:
            seed = int(config.option("seed", 0))
            load = config.option("load")
            load_value = None if load is None else float(load)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"sim: bad numeric option: {exc}") from exc
        if load_value is not None and not 0.0 <= load_value <= 1.0:
            raise ConfigError(f"sim option load must be within 0..1, got {load_value}")
        faults = config.option("faults")
        return SimBackend(
            built,
            seed=seed,
            faults=parse_faults(faults) if isinstance(faults, str) else list(faults or ()),
            tick_on_read=_bool(config.option("tick_on_read", True), "tick_on_read"),
            tool_timeout_s=config.tool_timeout_s,
            load=load_value,
            clock=None if config.option("clock") is None else SharedClock(str(config.option("clock"))),
            state=None if config.option("state") is None else StateFile(str(config.option("state"))),
        )


PLUGIN = SimPlugin()


def list_profiles() -> list[str]:
    """Names of the built-in simulator profiles."""
    from ._profile import list_profiles as _list

    return _list()


def __getattr__(name: str) -> Any:
    if name == "SimBackend":
        from ._backend import SimBackend

        return SimBackend
    if name == "generate_cluster":
        from .cluster import generate_cluster

        return generate_cluster
    raise AttributeError(name)
