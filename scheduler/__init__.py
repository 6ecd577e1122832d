"""accel.scheduler: placement of whole, partitioned and shared accelerators.

The scheduler consumes :class:`accel.model.HostInventory` snapshots (or plain
:class:`HostSpec` values) and nothing else.  Pipeline: filter -> score -> reserve -> bind
(:class:`Scheduler`), with pluggable scorers (:func:`make_scorer`, entry-point group
``accel.scheduler.scorers``) and topology-aware all-or-nothing gangs (:class:`GangPlacer`).
"""

from __future__ import annotations

try:  # the one dependency beyond the core's: the cluster state is numpy arrays
    import numpy as _numpy  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError("accel.scheduler needs numpy: pip install 'accel-sdk[scheduler]'") from _exc

from ._errors import InvalidRequestError, SchedulerStateError, UnknownPolicyError
from ._fgd import TypicalPod, TypicalPods
from ._policies import AdmitFGDPlusScorer, DemandFGDPlusScorer, FGDPlusScorer, ForecastCheck
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
    available_scorers,
    make_scorer,
    register_scorer,
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
    "MILLI",
    "AdmitFGDPlusScorer",
    "Allocation",
    "BalancedFGDScorer",
    "BestFitScorer",
    "ClusterState",
    "Decision",
    "DemandFGDPlusScorer",
    "DeviceSelector",
    "DeviceSpec",
    "DotProductScorer",
    "FGDPlusScorer",
    "FGDScorer",
    "ForecastCheck",
    "Filter",
    "GangPlacer",
    "GpuClusteringScorer",
    "GpuPackingScorer",
    "HostSpec",
    "InvalidRequestError",
    "RandomScorer",
    "ReplayResult",
    "Request",
    "Reservation",
    "Scheduler",
    "SchedulerStateError",
    "Scorer",
    "Share",
    "SpreadScorer",
    "TopologyConstraint",
    "TopologyLevel",
    "TopologyScorer",
    "TracePod",
    "TypicalPod",
    "TypicalPods",
    "UnknownPolicyError",
    "available_scorers",
    "best_device_set",
    "binned_allocation",
    "from_inventories",
    "host_spec_from_inventory",
    "load_openb_nodes",
    "load_openb_pods",
    "make_scorer",
    "openb_order",
    "register_scorer",
    "replay",
]
