"""The one check of a backend's ``--option KEY=VALUE`` names, for every backend.

A misspelt option (``-o senario=310-4``, ``-o bogus=1``) must not be ignored: the backend would
then read the real machine, or its defaults, and say nothing.  Every backend shipped with accel
(the simulator, NVML, AMD and the eight CLI vendors) calls :func:`check_options` from ``open``
with the names it reads, so all of them refuse the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ConfigError
from ._contract import BackendConfig

__all__ = ["check_options"]


def check_options(backend: str, config: BackendConfig, known: Iterable[str]) -> None:
    """Raise :class:`~accel.errors.ConfigError` naming every option of ``config`` that
    ``backend`` does not read, and the ones it does (``accel`` exits 2 with that line)."""
    names = sorted(set(known))
    unknown = sorted(str(key) for key in config.options if key not in names)
    if unknown:
        raise ConfigError(f"{backend}: unknown option(s) {', '.join(unknown)}; known: {', '.join(names) or 'none'}")
