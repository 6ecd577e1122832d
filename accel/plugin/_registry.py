"""In-process registrations, merged with entry points by discovery (for tests and embedding)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..errors import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "register", "registered", "unregister"]

ENTRY_POINT_GROUP = "accel.backends"

#: name -> zero-argument factory returning the plugin object (or the object itself).
_REGISTRY: dict[str, Callable[[], object]] = {}
_LOCK = threading.Lock()


def register(name: str, factory: Callable[[], object], *, replace: bool = False) -> None:
    """Register a backend plugin under ``name`` without installed metadata.

    ``factory`` is called at discovery time, so a factory that raises is reported like an
    entry point whose import failed.  Registering a taken name raises ``ConfigError`` unless
    ``replace`` is given.
    """
    if not name or not name.replace("_", "").replace("-", "").isalnum() or name != name.lower():
        raise ConfigError(f"backend name must be lower-case letters, digits, '-' or '_': {name!r}")
    with _LOCK:
        if name in _REGISTRY and not replace:
            raise ConfigError(f"a backend named {name!r} is already registered")
        _REGISTRY[name] = factory


def unregister(name: str) -> None:
    with _LOCK:
        _REGISTRY.pop(name, None)


def registered() -> dict[str, Callable[[], object]]:
    with _LOCK:
        return dict(_REGISTRY)
