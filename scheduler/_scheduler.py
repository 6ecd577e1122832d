"""The placement pipeline: filter -> score -> reserve -> bind.

:class:`Scheduler` owns a :class:`ClusterState` and one :class:`Scorer`.  For each request it

1. **filters** hosts (CPU, memory, pod slots, device fit, selectors, health, then any extra
   :class:`Filter` objects),
2. **scores** the feasible hosts (cached per request shape; only hosts whose version changed are
   rescored),
3. **reserves** the best host (ties broken by a fixed host rank, seeded) and the device slots
   on it (the scorer's choice for single-device requests; otherwise the lowest-index fitting,
   healthy-before-degraded slots),
4. **binds** by updating the state and returns the :class:`Allocation`.

Unhealthy or lost devices never pass the filter; degraded devices are chosen last.

With a :class:`~accel.scheduler.CarvingPlanner` (``carving=``), slice requests (``partition`` or
``share``) whose fitting devices include carvable ones are placed by the planner instead of the
scorer: it chooses the device and whether to reuse an idle partition or create one (see
:mod:`accel.scheduler._carving`); ties go to the host rank.  The decision carries the plan
(:attr:`Decision.carve`), binding applies it, :meth:`Scheduler.carved` gives the partition and
the actuation steps, and releasing leaves the partition idle.  Without ``carving`` nothing changes.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ._carving import CarvePlan, CarveStep, CarvingPlanner, SliceNeed
from ._default import DEFAULT_SCORER
from ._errors import InvalidRequestError
from ._registry import make_scorer
from ._request import MILLI, Request
from ._scorers import Scorer
from ._state import Allocation, ClusterState

__all__ = ["Decision", "Filter", "Scheduler"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@runtime_checkable
class Filter(Protocol):
    """An extra filter stage: return which of ``hosts`` may take ``req``."""

    def __call__(self, state: ClusterState, req: Request, hosts: IntArray) -> BoolArray: ...


@dataclass(frozen=True, slots=True)
class Decision:
    """Where a request would go (or ``host is None`` with a reason when nothing fits)."""

    request: Request
    host: int | None
    devices: tuple[int, ...] = ()
    score: float = float("nan")
    feasible_hosts: int = 0
    reason: str = ""
    carve: CarvePlan | None = None
    """The carving plan binding applies (only with a :class:`CarvingPlanner`)."""


@dataclass(slots=True)
class _CacheEntry:
    seen: IntArray
    scores: FloatArray
    slots: IntArray
    hits: int = 0


@dataclass(slots=True)
class _Stats:
    decisions: int = 0
    placed: int = 0
    failed: int = 0
    rescored_hosts: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class Scheduler:
    """Places requests on a :class:`ClusterState` with one :class:`Scorer`.

    ``workload`` is the target workload (the pod mix fragmentation-aware scorers optimise for);
    ``seed`` fixes the host rank used to break score ties and any randomness in the scorer.
    ``cache=False`` rescores every feasible host on every decision, scorer-side caches included
    (the baseline the speed benchmark compares against; results are identical).
    ``carving`` places slice requests on carvable devices by a :class:`CarvingPlanner` (see the
    module docstring); its device ids are the states' device ids.
    """

    def __init__(self, state: ClusterState, scorer: str | Scorer = DEFAULT_SCORER, *,
                 workload: Sequence[Request] | None = None, seed: int = 0,
                 filters: Sequence[Filter] = (), host_rank: IntArray | None = None,
                 cache: bool = True, carving: CarvingPlanner | None = None) -> None:
        self.state = state
        self.carving = carving
        self._carved: dict[int, tuple[str, tuple[CarveStep, ...]]] = {}
        self.scorer = make_scorer(scorer) if isinstance(scorer, str) else scorer
        if not isinstance(self.scorer, Scorer):
            raise InvalidRequestError("scorer must be a Scorer or a registered name", field="scorer")
        if self.scorer.uses_workload and not workload:
            raise InvalidRequestError(f"scorer {self.scorer.name!r} needs a target workload",
                                      field="workload")
        self.scorer.incremental = cache  # the uncached baseline keeps no scorer-side cache either
        self.scorer.attach(state, workload, seed)
        self.filters = tuple(filters)
        rng = np.random.default_rng(seed)
        if host_rank is None:
            host_rank = rng.permutation(state.n_hosts).astype(np.int64)
        if len(host_rank) != state.n_hosts:
            raise InvalidRequestError("host_rank must have one entry per host", field="host_rank")
        self.host_rank = np.asarray(host_rank, dtype=np.int64)
        self._cache: dict[Hashable, _CacheEntry] = {}
        self.use_cache = cache
        self.stats = _Stats()
        self._all = np.arange(state.n_hosts, dtype=np.int64)

    # -- stages --------------------------------------------------------------------------------------
    def filter(self, req: Request) -> IntArray:
        """Indices of hosts that pass every filter."""
        ok = self.state.feasible(req)
        hosts = self._all[ok]
        for flt in self.filters:
            if len(hosts) == 0:
                break
            hosts = hosts[np.asarray(flt(self.state, req, hosts), dtype=bool)]
        return hosts

    def score(self, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        """Scores and preferred slots of ``hosts`` (incremental when the scorer is cacheable)."""
        sc = self.scorer
        if not sc.cacheable or not self.use_cache:
            self.stats.rescored_hosts += len(hosts)
            return sc.score(self.state, req, hosts)
        key = sc.cache_key(req)
        entry = self._cache.get(key)
        n = self.state.n_hosts
        if entry is None:
            entry = _CacheEntry(np.full(n, -1, dtype=np.int64), np.zeros(n), np.full(n, -1, dtype=np.int64))
            self._cache[key] = entry
        stale = hosts[entry.seen[hosts] != self.state.version[hosts]]
        if len(stale):
            s, slot = self._score_dedup(req, stale)
            entry.scores[stale] = s
            entry.slots[stale] = slot
            entry.seen[stale] = self.state.version[stale]
            self.stats.rescored_hosts += len(stale)
        entry.hits += 1
        return entry.scores[hosts], entry.slots[hosts]

    def _score_dedup(self, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        """Score many hosts by scoring one representative of each distinct host state.

        Hosts whose rows are identical in every array a host-local scorer can read get identical
        scores; on a fresh or lightly loaded cluster most hosts share a handful of states."""
        sc = self.scorer
        if len(hosts) <= 64 or not sc.host_local:
            return sc.score(self.state, req, hosts)
        st = self.state
        key = np.concatenate([
            np.stack([st.cpu_free[hosts], st.cpu_cap[hosts], st.mem_free[hosts], st.pods_used[hosts],
                      st.pods_cap[hosts], st.host_class[hosts], st.n_devices[hosts]], axis=1),
            st.dev_left[hosts], st.dev_cap[hosts], st.dev_usable[hosts].astype(np.int64),
            st.dev_degraded[hosts].astype(np.int64), st.dev_class[hosts], st.dev_mem_left[hosts],
            st.affinity[hosts]], axis=1)
        weights = np.random.default_rng(12345).integers(1, 2**62, size=key.shape[1], dtype=np.int64)
        with np.errstate(over="ignore"):
            digest = key @ weights
        _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if len(first) * 2 > len(hosts) or not np.array_equal(key, key[first][inverse]):
            return sc.score(st, req, hosts)  # few duplicates, or a digest collision: score all
        s, slot = sc.score(st, req, hosts[first])
        return s[inverse], slot[inverse]

    def decide(self, req: Request) -> Decision:
        """Filter, score and pick a host and devices without changing the state."""
        self.stats.decisions += 1
        hosts = self.filter(req)
        if len(hosts) == 0:
            return Decision(req, None, reason="no host passes the filters")
        if self.carving is not None and (req.partition is not None or req.share is not None):
            carved = self._decide_carved(req, hosts, self.carving)
            if carved is not None:
                return carved
        scores, slots = self.score(req, hosts)
        best = scores.max()
        if not np.isfinite(best):
            return Decision(req, None, feasible_hosts=len(hosts), reason="no host scored")
        tied = np.nonzero(scores == best)[0]
        pick = int(tied[np.argmin(self.host_rank[hosts[tied]])]) if len(tied) > 1 else int(tied[0])
        host = int(hosts[pick])
        devices = self.reserve_devices(req, host, int(slots[pick]))
        return Decision(req, host, devices, float(best), len(hosts))

    def _decide_carved(self, req: Request, hosts: IntArray, carving: CarvingPlanner) -> Decision | None:
        """The planner's decision, or ``None`` when no fitting device is carvable."""
        fit = self.state.slot_fit(req, hosts)
        order = np.argsort(self.host_rank[hosts], kind="stable")
        where: dict[str, tuple[int, int]] = {}
        for i in order.tolist():
            host = int(hosts[i])
            for slot in np.nonzero(fit[i])[0].tolist():
                dev = self.state.dev_ids[host][slot]
                if carving.carvable(dev):
                    where[dev] = (host, int(slot))
        if not where:
            return None
        if req.partition is not None:
            need = SliceNeed(profile=req.partition)
        else:
            assert req.share is not None
            need = SliceNeed(req.share.memory_bytes, req.share.compute_milli / MILLI)
        plan = carving.plan(need, where)
        if plan is None:
            return Decision(req, None, feasible_hosts=len(hosts),
                            reason="no partition of a carvable device can serve the slice")
        host, slot = where[plan.device]
        return Decision(req, host, (slot,), -plan.layout_loss, len(hosts), carve=plan)

    def carved(self, alloc: Allocation) -> tuple[str, tuple[CarveStep, ...]] | None:
        """The partition a carved allocation holds and the steps (destroy / create) binding took."""
        return self._carved.get(alloc.seq)

    def reserve_devices(self, req: Request, host: int, hint: int = -1) -> tuple[int, ...]:
        """Device slots on ``host`` for ``req`` (scorer's hint for single-device requests)."""
        if not req.wants_devices:
            return ()
        if req.devices == 0:
            slot = hint if hint >= 0 else self.scorer.choose_slot(self.state, req, host)
            return (slot,)
        chosen = self.scorer.choose_devices(self.state, req, host)
        if chosen is not None:
            return chosen
        fit = self.state.slot_fit(req, np.array([host]))[0]
        order = np.nonzero(fit & ~self.state.dev_degraded[host])[0].tolist()
        order += np.nonzero(fit & self.state.dev_degraded[host])[0].tolist()
        return tuple(order[: req.devices])

    def bind(self, decision: Decision) -> Allocation:
        """Apply a decision to the state."""
        if decision.host is None:
            raise InvalidRequestError(f"{decision.request.name}: cannot bind an empty decision")
        if decision.carve is None:
            return self.state.allocate(decision.request, decision.host, decision.devices)
        if self.carving is None:
            raise InvalidRequestError(f"{decision.request.name}: a carved decision needs a carving planner")
        alloc = self.state.allocate(decision.request, decision.host, decision.devices)
        try:
            self._carved[alloc.seq] = self.carving.apply(decision.carve)
        except Exception:
            self.state.release(alloc)
            raise
        return alloc

    def place(self, req: Request) -> Allocation | None:
        """The whole pipeline; ``None`` when the request does not fit anywhere."""
        decision = self.decide(req)
        if decision.host is None:
            self.stats.failed += 1
            return None
        self.stats.placed += 1
        return self.bind(decision)

    def release(self, alloc: Allocation) -> None:
        """Return an allocation's resources (a carved partition stays, idle)."""
        self.state.release(alloc)
        held = self._carved.pop(alloc.seq, None)
        if held is not None and self.carving is not None:
            self.carving.release(held[0])
