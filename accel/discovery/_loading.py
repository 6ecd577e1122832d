"""Entry-point loading: read the ``accel.backends`` group's metadata, settle name clashes, import
nothing (the loaders import, under a deadline, when a backend is considered)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import PluginLoadError
from ..plugin import ENTRY_POINT_GROUP
from ._report import (
    CODE_DUPLICATE,
    ENV_SELECTION,
    OWN_DISTRIBUTION,
    BackendEntry,
    DiscoveryReport,
    EntryStatus,
    Selection,
    Stage,
)


def refresh() -> None:
    """Forget cached entry points so a plugin installed while the process runs is seen."""
    import importlib
    import sys

    importlib.invalidate_caches()  # importlib.metadata's path cache included
    stevedore = sys.modules.get("stevedore")
    cache = getattr(getattr(stevedore, "ExtensionManager", None), "ENTRY_POINT_CACHE", None)
    if isinstance(cache, dict):
        cache.clear()


def _dist_label(ep: Any) -> str:
    """``name version`` of the distribution that declares ``ep`` (``?`` when unknown)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "an unknown distribution"
    try:
        name = dist.metadata["Name"] or "?"
        return f"{name} {dist.version}"
    except Exception:  # noqa: BLE001 - broken metadata is still a distribution we can name
        return "a distribution with unreadable metadata"


def _is_own(ep: Any) -> bool:
    dist = getattr(ep, "dist", None)
    try:
        name = str(dist.metadata["Name"] or "") if dist is not None else ""
    except Exception:  # noqa: BLE001
        return False
    return name.replace("_", "-").lower() == OWN_DISTRIBUTION


def _entry_points_by_name() -> dict[str, list[Any]]:
    """Every ``accel.backends`` entry point, grouped by name (same name and value: once)."""
    from importlib.metadata import entry_points

    out: dict[str, list[Any]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        same = out.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same):
            same.append(ep)
    return out


def _load_entry_points(report: DiscoveryReport, selection: Selection) -> dict[str, Callable[[], object]]:
    """Read the group's metadata; nothing is imported here (the loaders import, under a deadline).

    A denied name is a ``disabled`` entry and is never imported.  A name declared by several
    distributions: the one of accel's own distribution wins and each other becomes a
    ``rejected`` entry ``NAME@DIST``; without one of accel's, none is loaded and the name is a
    ``failed`` entry naming every distribution.
    """
    refresh()
    loaders: dict[str, Callable[[], object]] = {}
    for name, eps in sorted(_entry_points_by_name().items()):
        if not selection.permits(name):
            report._set(BackendEntry(name, EntryStatus.DISABLED, f"excluded by {ENV_SELECTION}"))
            continue
        chosen = eps[0]
        if len(eps) > 1:
            listed = "; ".join(f"{_dist_label(ep)} ({ep.value})" for ep in eps)
            own = [ep for ep in eps if _is_own(ep)]
            if len(own) != 1:
                dup = PluginLoadError(
                    f"backend {name!r} is registered by {len(eps)} distributions: {listed}; none of them is "
                    "loaded: uninstall all but one",
                    plugin=name,
                    code=CODE_DUPLICATE,
                )
                report._set(BackendEntry(name, EntryStatus.FAILED, dup.message, Stage.LOAD, error=dup))
                continue
            chosen = own[0]
            for ep in eps:
                if ep is chosen:
                    continue
                label = _dist_label(ep)
                shadow = PluginLoadError(
                    f"backend {name!r} is also registered by {label} ({ep.value}); accel's own "
                    f"{_dist_label(chosen)} ({chosen.value}) is used and this one is ignored",
                    plugin=name,
                    code=CODE_DUPLICATE,
                )
                key = f"{name}@{label.split(' ')[0]}"
                report._set(BackendEntry(key, EntryStatus.REJECTED, shadow.message, Stage.LOAD, error=shadow))
        loaders[name] = chosen.load
    return loaders
