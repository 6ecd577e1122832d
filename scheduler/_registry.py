"""The scorer registry: every scorer name :func:`make_scorer` knows, listed in one place.

Three sources, looked up in this order:

1. **Registered at run time** with :func:`register_scorer` (a program or a test that defines a
   scorer in place; overrides a built-in of the same name).  Nothing in accel calls it: no module
   registers anything by being imported.
2. **Built in**: :data:`BUILTIN_SCORERS`, a table of name -> ``"module:attribute"``.  A module is
   imported only when one of its scorers is made, so the table costs nothing at import and
   creates no import cycle (``fewest-free`` lives in :mod:`accel.scheduler.queueing`, which imports
   :mod:`accel.scheduler`).
3. **Installed packages**: the entry-point group :data:`ENTRY_POINT_GROUP`
   (``accel.scheduler.scorers``); the entry-point name is the scorer name, the object a
   :class:`Scorer` subclass or instance.  A built-in name always wins over an entry point.

So the set of names never depends on which modules happen to be imported: a fresh interpreter
can ``make_scorer("fewest-free")`` as the first thing it does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType

from ._errors import UnknownScorerError
from ._scorers import Scorer

__all__ = ["BUILTIN_SCORERS", "ENTRY_POINT_GROUP", "available_scorers", "make_scorer", "register_scorer"]

#: The entry-point group third-party scorers are published under.
ENTRY_POINT_GROUP = "accel.scheduler.scorers"

#: Every built-in scorer: name -> ``"module:attribute"`` of its :class:`Scorer` subclass.  The name
#: is the class's own ``name`` (a test checks both agree and that every entry loads).
BUILTIN_SCORERS: Mapping[str, str] = MappingProxyType({
    "random": "accel.scheduler._scorers:RandomScorer",
    "best-fit": "accel.scheduler._scorers:BestFitScorer",
    "dot-product": "accel.scheduler._scorers:DotProductScorer",
    "gpu-packing": "accel.scheduler._scorers:GpuPackingScorer",
    "gpu-clustering": "accel.scheduler._scorers:GpuClusteringScorer",
    "spread": "accel.scheduler._scorers:SpreadScorer",
    "fgd": "accel.scheduler._scorers:FGDScorer",
    "fgd-balance": "accel.scheduler._scorers:BalancedFGDScorer",
    "fgd-plus": "accel.scheduler._policies:FGDPlusScorer",
    "fgd-plus-admit": "accel.scheduler._policies:AdmitFGDPlusScorer",
    "fgd-plus-demand": "accel.scheduler._policies:DemandFGDPlusScorer",
    "topology-aware": "accel.scheduler._topology:TopologyScorer",
    # the queueing engine's default (its historical placement rule as a scorer)
    "fewest-free": "accel.scheduler.queueing._placement:FewestFreeScorer",
})

_REGISTERED: dict[str, Callable[[], Scorer]] = {}


def register_scorer(name: str, factory: Callable[[], Scorer]) -> None:
    """Make ``factory()`` the scorer called ``name`` in this process (overrides a built-in).

    For programs and tests that define a scorer in place; a packaged scorer is published under
    the entry-point group :data:`ENTRY_POINT_GROUP` instead, so every process sees it."""
    _REGISTERED[name] = factory


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_scorers() -> list[str]:
    """Names of the registered, built-in and entry-point scorers, sorted."""
    return sorted(set(_REGISTERED) | set(BUILTIN_SCORERS) | set(_entry_points()))


def make_scorer(name: str) -> Scorer:
    """A new scorer by name; raises :class:`UnknownScorerError` for a name no source knows, or an
    entry point that names no :class:`Scorer`."""
    factory = _REGISTERED.get(name)
    if factory is not None:
        return factory()
    target = BUILTIN_SCORERS.get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        obj: object = getattr(import_module(module), attr)
    else:
        ep = _entry_points().get(name)
        if ep is None:
            raise UnknownScorerError(f"unknown scorer {name!r}; known: {', '.join(available_scorers())}")
        obj = ep.load()
    if isinstance(obj, type) and issubclass(obj, Scorer):
        return obj()
    if isinstance(obj, Scorer):
        return obj
    raise UnknownScorerError(f"scorer {name!r} ({target or ENTRY_POINT_GROUP + ' entry point'}) does not name a Scorer")
