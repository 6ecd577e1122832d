"""accel.scheduler: placement of whole, partitioned and shared accelerators.

The scheduler consumes :class:`accel.model.HostInventory` snapshots (or plain
:class:`HostSpec` values) and nothing else.  Pipeline: filter -> score -> reserve -> bind
(:class:`Scheduler`), with pluggable scorers (:func:`make_scorer`; the built-in ones are listed in
:data:`BUILTIN_SCORERS`, third-party ones come from the entry-point group ``accel.scheduler.scorers``)
and topology-aware all-or-nothing gangs (:class:`GangPlacer`).  Slices of carvable devices (MIG-like
profiles with placements) can be placed by a :class:`CarvingPlanner` that chooses between reusing
an idle partition and creating one, keeping whole devices and large profiles placeable.

Words: a *scorer* rates hosts for one request (the score stage); a *policy* is the queueing
engine's rules (:class:`accel.scheduler.queueing.Policy`: classes, backfill, preemption) and
nothing else.
"""

from __future__ import annotations

try:  # the one dependency beyond the core's: the cluster state is numpy arrays
    import numpy as _numpy  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError("accel.scheduler needs numpy: pip install 'accel-sdk[scheduler]'") from _exc

import warnings as _warnings

from ._carve_catalog import SliceCatalog, SliceProfile
from ._carving import CarveAction, CarvePlan, CarveStep, CarvingPlanner, LiveSlice, SliceNeed, plan_device
from ._default import DEFAULT_SCORER
from ._errors import InvalidRequestError, SchedulerStateError, UnknownScorerError
from ._fgd import TypicalPod, TypicalPods
from ._policies import AdmitFGDPlusScorer, DemandFGDPlusScorer, FGDPlusScorer, ForecastCheck
from ._registry import BUILTIN_SCORERS, ENTRY_POINT_GROUP, available_scorers, make_scorer, register_scorer
from ._replay import (
    ReplayResult,
    TracePod,
    binned_allocation,
    load_openb_nodes,
    load_openb_pods,
    openb_order,
    replay,
)
from ._request import MILLI, DeviceSelector, Request, Share, TopologyConstraint, TopologyLevel
from ._scheduler import Decision, Filter, Scheduler
from ._scorers import (
    BalancedFGDScorer,
    BestFitScorer,
    DotProductScorer,
    FGDScorer,
    GpuClusteringScorer,
    GpuPackingScorer,
    RandomScorer,
    Scorer,
    SpreadScorer,
)
from ._state import Allocation, ClusterState, DeviceSpec, HostSpec
from ._topology import (
    GangPlacer,
    Reservation,
    TopologyScorer,
    best_device_set,
    from_inventories,
    host_spec_from_inventory,
)

__all__ = [
    "BUILTIN_SCORERS",
    "DEFAULT_SCORER",
    "ENTRY_POINT_GROUP",
    "MILLI",
    "AdmitFGDPlusScorer",
    "Allocation",
    "BalancedFGDScorer",
    "BestFitScorer",
    "CarveAction",
    "CarvePlan",
    "CarveStep",
    "CarvingPlanner",
    "ClusterState",
    "Decision",
    "DemandFGDPlusScorer",
    "DeviceSelector",
    "DeviceSpec",
    "DotProductScorer",
    "FGDPlusScorer",
    "FGDScorer",
    "Filter",
    "ForecastCheck",
    "GangPlacer",
    "GpuClusteringScorer",
    "GpuPackingScorer",
    "HostSpec",
    "InvalidRequestError",
    "LiveSlice",
    "RandomScorer",
    "ReplayResult",
    "Request",
    "Reservation",
    "Scheduler",
    "SchedulerStateError",
    "Scorer",
    "Share",
    "SliceCatalog",
    "SliceNeed",
    "SliceProfile",
    "SpreadScorer",
    "TopologyConstraint",
    "TopologyLevel",
    "TopologyScorer",
    "TracePod",
    "TypicalPod",
    "TypicalPods",
    "UnknownScorerError",
    "available_scorers",
    "best_device_set",
    "binned_allocation",
    "from_inventories",
    "host_spec_from_inventory",
    "load_openb_nodes",
    "load_openb_pods",
    "make_scorer",
    "openb_order",
    "plan_device",
    "register_scorer",
    "replay",
]

_DEPRECATED = {"UnknownPolicyError": ("UnknownScorerError", UnknownScorerError)}


def __getattr__(name: str) -> object:
    """Old public names, kept working with a :class:`DeprecationWarning`."""
    if name in _DEPRECATED:
        new, obj = _DEPRECATED[name]
        _warnings.warn(f"accel.scheduler.{name} is deprecated; use accel.scheduler.{new}", DeprecationWarning,
                       stacklevel=2)
        return obj
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
