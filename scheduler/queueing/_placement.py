"""Placement of queued work through the pipeline of :class:`accel.scheduler.Scheduler`.

The queueing engine decides *when* a job starts and in which pool (device model); this module
decides *where*: it turns a queued job and a pool into per-host chunks (host, request, device
slots) or a typed :class:`PlacementRefusal`, using the same stages as a direct request:

* **filter**: :meth:`Scheduler.filter` (CPU, memory, pod slots, device fit, selectors, health,
  the scheduler's extra filters), then the job's topology constraint;
* **score**: the scheduler's scorer (``QueueingScheduler(scorer=...)``), incremental as usual;
* **reserve**: the best host (ties by the scheduler's host rank) and its device slots
  (:meth:`Scheduler.reserve_devices`, or :func:`accel.scheduler.best_device_set` when the job
  names an in-host topology level);
* **bind** stays with the engine: the plan is journaled as one ``placed`` event and every chunk is
  bound when the event is applied, so a gang is all or nothing and a replay binds the same slots.

A job goes on one host when one host takes it.  Otherwise a job that is not ``same_host`` becomes a
gang of per-host chunks on as few hosts as possible: each step takes the largest chunk some
unused host can hold (all that is left when a host holds it), and the scorer chooses among the
hosts that can.  A ``rack`` / ``switch_group`` topology keeps the gang inside one group
(``required``) or tries that first (preferred); a required in-host level (``link_domain``,
``pcie_switch``, ``numa``, ``host``) never splits the job.

:class:`FewestFreeScorer` (``fewest-free``, the engine's default) is the engine's historical rule
expressed as a scorer, so that the default placement is unchanged: fewest fully free devices
that still fit (lowest host index on ties), gang chunks biggest free first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from accel.scheduler import (
    ClusterState,
    Request,
    Scheduler,
    Scorer,
    TopologyConstraint,
    TopologyLevel,
    best_device_set,
)

from ._freeindex import FreeIndex

__all__ = ["IN_HOST_LEVELS", "Chunk", "FewestFreeScorer", "PlacementPlan", "PlacementRefusal", "QueuePlacer",
           "RefusalKind"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# levels inside one host: a required one never lets a job split across hosts
_IN_HOST = (TopologyLevel.LINK_DOMAIN, TopologyLevel.PCIE_SWITCH, TopologyLevel.NUMA, TopologyLevel.HOST)
IN_HOST_LEVELS = frozenset(_IN_HOST)
_LEVELS = list(TopologyLevel)


def _rank(level: TopologyLevel) -> int:
    return _LEVELS.index(level)


class RefusalKind(StrEnum):
    """Why the pipeline refused a job that free-device counts said would fit."""

    RESOURCES = "resources"  # no host passes the filters (CPU, memory, pod slots, extra filters)
    TOPOLOGY = "topology"  # hosts fit, but not within the required topology level
    FRAGMENTATION = "fragmentation"  # enough free devices in the pool, but no gang split fits
    SCORER = "scorer"  # the scorer rated every feasible host -inf (e.g. admission control)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One host's part of a placement: the request bound there and its device slots."""

    host: int
    request: Request
    slots: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """Where every chunk of a job goes (nothing is bound yet)."""

    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class PlacementRefusal:
    """No placement now, and why (``kind`` for programs, ``detail`` for people)."""

    kind: RefusalKind
    detail: str
    pool: str = ""  # the pool it was refused in (set by the engine)


MakeRequest = Callable[[int, int, int], Request]
"""``make(i, k, n_chunks)``: the request of chunk ``i`` holding ``k`` devices of ``n_chunks``."""


class FewestFreeScorer(Scorer):
    """``fewest-free``: the queueing engine's historical rule, as a scorer.

    A request goes to the host with the fewest fully free eligible devices that still holds it
    (lowest host index on ties); a gang member (``request.gang`` set) to the host with the most
    (biggest free first, lowest index on ties).  A share or single device takes the lowest-index
    fully free slot, as do ``k`` devices when ``k`` is all the host has free; otherwise the
    lowest-index fully free slots, healthy before degraded.  Hosts without enough fully free
    eligible devices score ``-inf`` (a share never lands on a partly used device).
    """

    name = "fewest-free"
    host_local = False  # the host index breaks ties

    def cache_key(self, req: Request) -> Hashable:
        share = req.share.compute_milli if req.share else None
        return (req.cpu_milli, req.devices, share, req.partition, req.selector, req.gang is not None)

    @staticmethod
    def _free(state: ClusterState, req: Request, hosts: IntArray) -> BoolArray:
        left = state.dev_left[hosts]
        cap = state.dev_cap[hosts]
        return np.asarray(state.eligible_slots(req, hosts) & (left == cap) & (cap > 0), dtype=bool)

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        free = self._free(state, req, hosts)
        count = free.sum(axis=1).astype(np.float64)
        n = float(state.n_hosts)
        idx = hosts.astype(np.float64)
        raw = count * n - idx if req.gang is not None else -(count * n + idx)
        out = np.where(count >= max(1, req.device_count), raw, -np.inf)
        slots = np.where(free.any(axis=1), np.argmax(free, axis=1), -1).astype(np.int64)
        return out.astype(np.float64), slots

    def choose_devices(self, state: ClusterState, req: Request, host: int) -> tuple[int, ...] | None:
        free = np.nonzero(self._free(state, req, np.array([host], dtype=np.int64))[0])[0]
        k = req.devices
        if k == 1 or k == len(free):
            return tuple(int(s) for s in free[:k])
        return None  # the scheduler's default: lowest-index fitting slots, healthy first


class QueuePlacer:
    """Turns a queued job into a :class:`PlacementPlan` on ``scheduler``'s state, or a refusal.

    Nothing here changes the cluster state; the caller binds the plan.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.state = scheduler.state
        self._pool_free: IntArray = np.zeros(0, dtype=np.int64)
        self._exclude: BoolArray | None = None  # hosts kept for other jobs (grace holds): never chosen
        # ``pool_free`` is exactly, per host, the slots a whole-device chunk request can take
        # (the engine's pool selector, usable and fully free): the device fit and the default
        # scorer's count are read from it instead of recounted per request (same decisions)
        self._exact = False
        # ``pool_free`` is the engine's live count column of this pool, indexed (``_freeindex``)
        self._index: tuple[FreeIndex, int] | None = None

    # -- one decision over a set of candidate hosts -----------------------------------------------
    def _candidates(self, req: Request, allowed: BoolArray | None) -> IntArray:
        """The filter stage (:meth:`Scheduler.filter`'s checks, then its extra filters).

        Whole devices must be fully free, so only hosts whose free count of the pool is high
        enough can pass the device fit: the filter runs on those alone (on a full cluster, a
        handful of 5,000), and the result is the same host set."""
        st = self.state
        if self._exclude is not None:
            allowed = ~self._exclude if allowed is None else allowed & ~self._exclude
        if req.devices:
            base = self._pool_free >= req.devices
            hosts = (base if allowed is None else base & allowed).nonzero()[0].astype(np.int64, copy=False)
        else:
            hosts = (np.arange(st.n_hosts, dtype=np.int64) if allowed is None
                     else np.nonzero(allowed)[0].astype(np.int64))
        if len(hosts):
            if self._exact and req.devices and req.share is None and req.partition is None:
                # the device fit is pool_free >= devices, applied above: the rest of feasible()
                ok = (st.cpu_free[hosts] >= req.cpu_milli) & (st.mem_free[hosts] >= req.memory_bytes)
                ok &= st.pods_used[hosts] < st.pods_cap[hosts]
                hosts = hosts[ok]
            else:
                hosts = hosts[st.feasible(req, hosts)]
        for flt in self.scheduler.filters:
            if len(hosts) == 0:
                break
            hosts = hosts[np.asarray(flt(st, req, hosts), dtype=bool)]
        return hosts

    def _topology_ok(self, req: Request, hosts: IntArray, level: TopologyLevel) -> BoolArray:
        """Hosts where ``req``'s devices fit within ``level``."""
        ok = np.zeros(len(hosts), dtype=bool)
        limit = _rank(level)
        for i, h in enumerate(hosts.tolist()):
            got = best_device_set(self.state, req, h) if req.devices > 1 else ((), TopologyLevel.LINK_DOMAIN)
            ok[i] = got is not None and _rank(got[1]) <= limit
        return ok

    def _pick(self, req: Request, hosts: IntArray,
              topo: TopologyConstraint | None) -> tuple[int, tuple[int, ...]] | RefusalKind:
        """Score ``hosts`` (already filtered) and reserve the best one's slots."""
        if len(hosts) == 0:
            return RefusalKind.RESOURCES
        in_host = topo is not None and topo.level in _IN_HOST and req.devices > 1
        if in_host:
            assert topo is not None
            ok = self._topology_ok(req, hosts, topo.level)
            if topo.required:
                if not ok.any():
                    return RefusalKind.TOPOLOGY
                hosts = hosts[ok]
            elif ok.any():
                hosts = hosts[ok]  # preferred: the hosts that reach the level, when there are any
        if (self._exact and type(self.scheduler.scorer) is FewestFreeScorer and req.devices
                and req.share is None and req.partition is None):
            # FewestFreeScorer.score with its count read from pool_free: every candidate holds the
            # request (the filter checked pool_free >= devices) and count x n_hosts -/+ index
            # makes every score distinct, so there are no ties for the host rank to break
            count = self._pool_free[hosts]
            n = self.state.n_hosts
            key = count * n - hosts if req.gang is not None else -(count * n + hosts)
            host = int(hosts[int(key.argmax())])
            if in_host:
                got = best_device_set(self.state, req, host)
                assert got is not None
                return host, got[0]
            return host, self._fewest_free_slots(req, host)
        scores, hints = self.scheduler.score(req, hosts)
        finite = np.isfinite(scores)
        if not finite.any():
            return RefusalKind.SCORER
        best = scores[finite].max()
        tied = np.nonzero(scores == best)[0]
        rank = self.scheduler.host_rank
        pick = int(tied[np.argmin(rank[hosts[tied]])]) if len(tied) > 1 else int(tied[0])
        host = int(hosts[pick])
        if in_host:
            got = best_device_set(self.state, req, host)
            assert got is not None  # the host passed _topology_ok (or the filter's device fit)
            return host, got[0]
        return host, self.scheduler.reserve_devices(req, host, int(hints[pick]))

    def _decide(self, req: Request, allowed: BoolArray | None,
                topo: TopologyConstraint | None) -> tuple[int, tuple[int, ...]] | RefusalKind:
        """:meth:`_pick` over :meth:`_candidates`, with a shortcut for the common queued start.

        With exact counts, the default scorer, a whole-device request, no extra filters and no
        in-host topology, the pipeline's choice is the host with the fewest (a gang chunk: the
        most) free devices of the pool that holds the request and passes the CPU, memory and pod
        checks, lowest index on ties.  The host that wins on the counts alone is found with one
        pass over the hosts; if it passes those checks it is that choice (the checks only remove
        hosts), else the full stages decide."""
        if (self._exact and req.devices and req.share is None and req.partition is None
                and not self.scheduler.filters and type(self.scheduler.scorer) is FewestFreeScorer
                and not (topo is not None and topo.level in _IN_HOST and req.devices > 1)):
            st = self.state
            if self._index is not None and allowed is None and self._exclude is None:
                # the same host from the index of hosts by count (``_freeindex``), without a scan
                index, p = self._index
                got = index.first(p, req.devices, most=req.gang is not None)
                if got is None:
                    return RefusalKind.RESOURCES
                host = got
            else:
                count = self._pool_free
                ok = count >= req.devices
                if allowed is not None:
                    ok &= allowed
                if self._exclude is not None:
                    ok &= ~self._exclude
                cand = ok.nonzero()[0]
                if not len(cand):
                    return RefusalKind.RESOURCES  # no host holds the request (what _candidates finds)
                # argmin / argmax answer the first of equal counts: the lowest host index on ties
                fit = count[cand]
                host = int(cand[int(fit.argmax() if req.gang is not None else fit.argmin())])
            if (st.cpu_free[host] >= req.cpu_milli and st.mem_free[host] >= req.memory_bytes
                    and st.pods_used[host] < st.pods_cap[host]):
                return host, self._fewest_free_slots(req, host)
        return self._pick(req, self._candidates(req, allowed), topo)

    def _fewest_free_slots(self, req: Request, host: int) -> tuple[int, ...]:
        """``scheduler.reserve_devices(req, host)`` for a whole-device request under
        :class:`FewestFreeScorer` (its ``choose_devices``, else the scheduler's default: fitting
        slots by index, healthy before degraded), read from the host's own rows: the same slots,
        without the per-call layers (this runs at every queued start)."""
        st = self.state
        # the host's rows as lists (8 slots: cheaper than numpy's per-call layers)
        elig, left, cap = st.eligible_slots(req)[host].tolist(), st.dev_left[host].tolist(), st.dev_cap[host].tolist()
        idx = [d for d, (e, lf, c) in enumerate(zip(elig, left, cap, strict=True)) if e and lf == c and c > 0]
        k = req.devices
        if k == 1 or k == len(idx):
            return tuple(idx[:k])
        need = req.selector.min_memory_bytes
        if need:  # slot_fit's extra check (the scheduler's default order)
            mem = st.dev_mem_cap[host].tolist()
            idx = [d for d in idx if mem[d] >= need]
        degraded = st.dev_degraded[host].tolist()
        order = [d for d in idx if not degraded[d]] + [d for d in idx if degraded[d]]
        return tuple(order[:k])

    # -- jobs --------------------------------------------------------------------------------------
    def fits_host(self, make: MakeRequest, devices: int, *, topology: TopologyConstraint | None,
                  pool_free: IntArray, host: int, exact_counts: bool = False) -> bool:
        """Would the pipeline put the whole job (one chunk) on ``host``?  Filters (CPU, memory,
        pod slots, extra filters), the required in-host topology level and the scorer decide, on
        the state as it is now (a caller trying victims frees their allocations first)."""
        self._pool_free, self._exclude, self._exact, self._index = pool_free, None, exact_counts, None
        allowed = np.zeros(self.state.n_hosts, dtype=bool)
        allowed[host] = True
        whole = make(0, devices, 1)
        return not isinstance(self._decide(whole, allowed, topology), RefusalKind)

    def plan(self, make: MakeRequest, devices: int, *, split: bool,
             topology: TopologyConstraint | None, pool_free: IntArray,
             exclude: BoolArray | None = None, exact_counts: bool = False,
             index: tuple[FreeIndex, int] | None = None) -> PlacementPlan | PlacementRefusal:
        """Place a job of ``devices`` devices whose chunk requests ``make`` builds.

        ``split``: the job may become a gang of per-host chunks.  ``pool_free``: fully free
        devices of the job's pool per host (what the engine's counts say), used to size chunks
        and to tell fragmentation from a lack of devices.  ``exclude``: hosts that are never
        chosen (kept for another job).  ``exact_counts``: ``pool_free`` counts exactly the slots a
        whole-device chunk request of ``make`` can take on each host (it is then not recounted).
        ``index``: the engine's index of hosts by count and the pool's column, when ``pool_free``
        is that live column (the fewest-free choice then reads the index instead of scanning).
        """
        self._pool_free, self._exclude, self._exact = pool_free, exclude, exact_counts
        self._index = index if exact_counts else None
        whole = make(0, devices, 1)
        got = self._decide(whole, None, topology)
        if not isinstance(got, RefusalKind):
            host, slots = got
            return PlacementPlan((Chunk(host, whole, tuple(slots)),))
        first = got
        fits_one = bool((pool_free >= devices).any())
        in_host_required = topology is not None and topology.required and topology.level in _IN_HOST
        if not split or in_host_required or int(pool_free.sum()) < devices:
            if first == RefusalKind.RESOURCES and not fits_one and int(pool_free.sum()) >= devices:
                first = RefusalKind.TOPOLOGY if in_host_required else RefusalKind.FRAGMENTATION
            return PlacementRefusal(first, self._say(first, devices, one_host=True))
        gang = self._gang(make, devices, topology, pool_free)
        if gang is not None:
            return gang
        # enough free devices in the pool, and a split by counts alone would succeed: what refused it
        # is the required grouping, or the filters (CPU, memory, pod slots, extra filters)
        kind = first if fits_one else (
            RefusalKind.TOPOLOGY if topology is not None and topology.required else RefusalKind.RESOURCES)
        return PlacementRefusal(kind, self._say(kind, devices, one_host=fits_one))

    @staticmethod
    def _say(kind: RefusalKind, devices: int, *, one_host: bool) -> str:
        where = "on one host" if one_host else "split over hosts"
        what = {RefusalKind.RESOURCES: "no host passes the filters (CPU, memory, pod slots or extra filters)",
                RefusalKind.TOPOLOGY: "free devices are not within the required topology level",
                RefusalKind.FRAGMENTATION: "free devices are too fragmented across hosts",
                RefusalKind.SCORER: "the scorer accepts no feasible host"}[kind]
        return f"{devices} device(s) {where}: {what}"

    def _groups(self, topology: TopologyConstraint | None) -> list[list[BoolArray]]:
        """Candidate host sets, tightest level first (one list of groups per level)."""
        st = self.state
        every = np.ones(st.n_hosts, dtype=bool)
        if topology is None or topology.level not in (TopologyLevel.RACK, TopologyLevel.SWITCH_GROUP):
            return [[every]]
        levels: list[list[BoolArray]] = []
        for lvl, labels in ((TopologyLevel.RACK, st.host_rack), (TopologyLevel.SWITCH_GROUP, st.host_group)):
            if _rank(lvl) > _rank(topology.level):
                break
            ids = sorted({int(x) for x in labels if x >= 0})
            levels.append([np.asarray(labels == i, dtype=bool) for i in ids])
        if not topology.required:
            levels.append([every])
        return levels

    def _gang(self, make: MakeRequest, devices: int, topology: TopologyConstraint | None,
              pool_free: IntArray) -> PlacementPlan | None:
        for groups in self._groups(topology):
            best: tuple[tuple[int, int], PlacementPlan] | None = None
            for allowed in groups:
                if int(pool_free[allowed].sum()) < devices:
                    continue
                plan = self._split(make, devices, topology, pool_free, allowed)
                if plan is None:
                    continue
                key = (len(plan.chunks), int(sum(int(pool_free[c.host]) for c in plan.chunks)))
                if best is None or key < best[0]:
                    best = (key, plan)
            if best is not None:
                return best[1]
        return None

    def _split(self, make: MakeRequest, devices: int, topology: TopologyConstraint | None,
               pool_free: IntArray, allowed: BoolArray) -> PlacementPlan | None:
        """Fewest hosts: each step the largest chunk an unused allowed host takes."""
        allowed = allowed.copy()
        chunks: list[Chunk] = []
        left = devices
        # a preferred in-host level still shapes the device sets of each chunk
        topo = topology if topology is not None and topology.level in _IN_HOST else None
        while left > 0:
            top = int(pool_free[allowed].max()) if allowed.any() else 0
            placed = False
            for k in range(min(left, top), 0, -1):
                req = make(len(chunks), k, 2)
                got = self._decide(req, allowed, topo)
                if isinstance(got, RefusalKind):
                    continue
                host, slots = got
                chunks.append(Chunk(host, req, tuple(slots)))
                allowed[host] = False
                left -= k
                placed = True
                break
            if not placed:
                return None
        if len(chunks) < 2:
            return None  # one chunk is the whole-job request, which the single-host pass refused
        return PlacementPlan(tuple(chunks))
