"""Scorers: the score stage of the pipeline (the built-in scorers' names are in ``_registry``).

A scorer rates every candidate host for one request (higher is better) and may also say which
device slot it would use on each host (single-device requests), so that the reserve stage
places the request exactly where it was scored.  Scores are ``float64`` arrays; a host whose
score is ``-inf`` is never chosen.  Scorers whose score depends only on a host's own state and
the request's shape set ``cacheable = True``; the scheduler then recomputes them only for hosts
that changed since the last request of the same shape.

Third-party scorers are published under the entry-point group ``accel.scheduler.scorers`` (the
entry-point name is the scorer name, the object a :class:`Scorer` subclass); see ``_registry``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from ._fgd import FragMeasure, TypicalPods
from ._request import MILLI, Request
from ._state import ClusterState

__all__ = [
    "BalancedFGDScorer",
    "BestFitScorer",
    "DotProductScorer",
    "FGDScorer",
    "GpuClusteringScorer",
    "GpuPackingScorer",
    "RandomScorer",
    "Scorer",
    "SpreadScorer",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
MAX_SCORE = 100.0
NEG_INF = -math.inf


class Scorer(ABC):
    """Base class of every scorer.  Subclasses set ``name`` and implement :meth:`score`."""

    name: ClassVar[str] = ""
    cacheable: ClassVar[bool] = True
    uses_workload: ClassVar[bool] = False
    host_local: ClassVar[bool] = True
    """Score depends only on the host's capacity/usage rows (not on its identity or topology
    labels), so identical hosts may share one evaluation."""

    #: False when the scheduler runs uncached (``Scheduler(cache=False)``, the speed baseline):
    #: a scorer that keeps its own per-host caches then computes everything afresh too
    incremental: bool = True

    def __init__(self) -> None:
        self.state: ClusterState | None = None
        self.rng = np.random.default_rng(0)

    def attach(self, state: ClusterState, workload: Sequence[Request] | None, seed: int) -> None:
        """Called once by the scheduler; ``workload`` is the target workload (FGD needs it)."""
        self.state = state
        self.rng = np.random.default_rng(seed)

    def cache_key(self, req: Request) -> Hashable:
        """Requests with equal keys score identically on a given host state."""
        share = req.share.compute_milli if req.share else None
        return (req.cpu_milli, req.devices, share, req.partition, req.selector)

    @abstractmethod
    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        """Scores of ``hosts`` and, per host, the device slot to use (-1 = default choice)."""

    def choose_slot(self, state: ClusterState, req: Request, host: int) -> int:
        """Device slot for a single-device request on ``host`` when score gave none (best fit)."""
        return best_fit_slot(state, req, host)

    def choose_devices(self, state: ClusterState, req: Request, host: int) -> tuple[int, ...] | None:
        """Slots for a whole-device request on ``host``; ``None`` = lowest-index fitting slots."""
        return None


# ------------------------------------------------------------------------------------------------
# helpers shared by scorers


def fitting(state: ClusterState, req: Request, hosts: IntArray) -> npt.NDArray[np.bool_]:
    """Slots of ``hosts`` that can serve the request's per-device part."""
    return state.slot_fit(req, hosts)


def best_fit_slot(state: ClusterState, req: Request, host: int) -> int:
    """The fitting slot with the least compute left (lowest index on ties); -1 if none."""
    fit = state.slot_fit(req, np.array([host]))[0]
    if not fit.any():
        return -1
    left = np.where(fit, state.dev_left[host], np.iinfo(np.int64).max)
    # degraded devices last
    left = np.where(state.dev_degraded[host] & fit, left + 10 * MILLI, left)
    return int(np.argmin(left))


def _gpu_left_total(state: ClusterState, hosts: IntArray) -> IntArray:
    return np.asarray(state.dev_left[hosts].sum(axis=1), dtype=np.int64)


def _max_cpu(state: ClusterState) -> float:
    return float(max(int(state.cpu_cap.max()), 1))


def _max_gpu(state: ClusterState) -> float:
    return float(state.n_slots * MILLI)


# ------------------------------------------------------------------------------------------------
# built-in scorers


class RandomScorer(Scorer):
    """Random-fit: a uniformly random feasible host; shares go to a random fitting device."""

    name = "random"
    cacheable = False

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        return self.rng.random(len(hosts)), np.full(len(hosts), -1, dtype=np.int64)

    def choose_slot(self, state: ClusterState, req: Request, host: int) -> int:
        fit = np.nonzero(state.slot_fit(req, np.array([host]))[0])[0]
        return int(self.rng.choice(fit)) if len(fit) else -1


class BestFitScorer(Scorer):
    """Best-fit: the host left with the least free CPU and device compute (equal weights)."""

    name = "best-fit"

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        cpu = (state.cpu_free[hosts] - req.cpu_milli).astype(np.float64) / _max_cpu(state) * 0.5
        gpu = (_gpu_left_total(state, hosts) - req.total_milli).astype(np.float64) / _max_gpu(state) * 0.5
        raw = np.trunc((1.0 - (cpu + gpu)) * MAX_SCORE)
        return raw, np.full(len(hosts), -1, dtype=np.int64)


class DotProductScorer(Scorer):
    """Dot-product (Tetris-like): prefer hosts whose free vector aligns least with the demand.

    Vectors are (CPU, total device compute) normalised by the largest host, as the FGD paper's
    ``-dimext merge -norm max`` baseline."""

    name = "dot-product"

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        mc, mg = _max_cpu(state), _max_gpu(state)
        n0 = state.cpu_free[hosts].astype(np.float64) / mc
        n1 = _gpu_left_total(state, hosts).astype(np.float64) / mg
        p0, p1 = float(req.cpu_milli) / mc, float(req.total_milli) / mg
        ip = n0 * p0 + n1 * p1
        raw = np.trunc(MAX_SCORE * (1.0 - ip / 2.0))
        return raw, np.full(len(hosts), -1, dtype=np.int64)


class GpuPackingScorer(Scorer):
    """GPU packing: used devices first, then free devices on used hosts, then idle hosts."""

    name = "gpu-packing"

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        n = len(hosts)
        out = np.zeros(n, dtype=np.float64)
        slots = np.full(n, -1, dtype=np.int64)
        if not req.wants_devices:
            return out, slots
        left = state.dev_left[hosts]
        cap = state.dev_cap[hosts]
        full = (left == cap) & (cap > 0)
        n_full = full.sum(axis=1)
        ndev = state.n_devices[hosts]
        all_free = n_full == ndev
        per = req.milli_per_device
        need = req.device_count
        fit = left >= per
        # ascending stable order of left: take the `need` smallest fitting slots
        order = np.argsort(np.where(fit, left, np.iinfo(np.int64).max), axis=1, kind="stable")
        take = order[:, :need]
        took_left = np.take_along_axis(left, take, axis=1)
        took_fit = np.take_along_axis(fit, take, axis=1)
        enough = took_fit.all(axis=1)
        free_used = (took_left == MILLI).sum(axis=1)
        ratio = (took_left * 100 // MILLI).sum(axis=1)
        case1 = np.maximum(MAX_SCORE - ratio // 10, MAX_SCORE // 2)
        case2 = np.maximum(MAX_SCORE // 2 - free_used, MAX_SCORE // 3)
        case3 = np.maximum(MAX_SCORE // 3 - n_full, n_full)
        out = np.where(all_free, case3, np.where(free_used > 0, case2, case1)).astype(np.float64)
        out[~enough & ~all_free] = 0.0
        return out, slots


class GpuClusteringScorer(Scorer):
    """GPU clustering: keep requests of the same device shape on the same hosts."""

    name = "gpu-clustering"

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        n = len(hosts)
        slots = np.full(n, -1, dtype=np.int64)
        if not req.wants_devices:
            return np.zeros(n, dtype=np.float64), slots
        col = 0 if (req.share is not None or req.partition is not None) else min(req.devices, state.n_slots)
        aff = state.affinity[hosts]
        kinds = (aff > 0).sum(axis=1)
        same = aff[:, col] > 0
        maxg = state.n_slots * MILLI
        base = 25 * (maxg - _gpu_left_total(state, hosts)) // maxg
        bonus = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return (base + bonus).astype(np.float64), slots


class SpreadScorer(Scorer):
    """Spread (least-allocated): the host left with the most free CPU and device compute."""

    name = "spread"

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        cpu = (state.cpu_free[hosts] - req.cpu_milli) / np.maximum(state.cpu_cap[hosts], 1)
        cap = np.maximum(state.dev_cap[hosts].sum(axis=1), 1)
        gpu = (_gpu_left_total(state, hosts) - req.total_milli) / cap
        return (cpu + gpu) * 50.0, np.full(len(hosts), -1, dtype=np.int64)

    def choose_slot(self, state: ClusterState, req: Request, host: int) -> int:
        fit = state.slot_fit(req, np.array([host]))[0]
        if not fit.any():
            return -1
        return int(np.argmax(np.where(fit, state.dev_left[host], -1)))


def has_constrained_requests(state: ClusterState, requests: Sequence[Request]) -> bool:
    """Does any device request's selector admit some, but not all, of the cluster's device classes?"""
    n_cls = len(state.classes)
    if n_cls == 0:
        return False
    for r in requests:
        if r.wants_devices and not r.selector.is_empty:
            mask = state.class_mask(r.selector)[:n_cls]
            if mask.any() and not mask.all():
                return True
    return False


class FGDScorer(Scorer):
    """Fragmentation Gradient Descent: place where the workload-relative fragmentation grows least.

    Score = ``int(sigmoid((frag_before - frag_after) / 1000) * 100)``, as the paper's simulator;
    a share goes to the device with the best score (lowest index on ties); whole devices are the
    lowest-index free ones.  ``quantize=False`` keeps the raw fragmentation delta instead.
    """

    name = "fgd"
    uses_workload = True

    def __init__(self, *, quantize: bool = True, popularity: float = 95.0) -> None:
        super().__init__()
        self.quantize = quantize
        self.popularity = popularity
        self.measure: FragMeasure | None = None
        self._before = np.zeros(0)
        self._seen = np.zeros(0, dtype=np.int64)

    def attach(self, state: ClusterState, workload: Sequence[Request] | None, seed: int) -> None:
        super().attach(state, workload, seed)
        typical = TypicalPods.from_requests(workload or (), self.popularity)
        models = [c.model for c in state.classes]
        self.measure = FragMeasure(typical, models)
        self._before = np.zeros(state.n_hosts, dtype=np.float64)
        self._seen = np.full(state.n_hosts, -1, dtype=np.int64)

    def cache_key(self, req: Request) -> Hashable:
        share = req.share.compute_milli if req.share else None
        return (req.cpu_milli, req.devices, share, req.partition)

    def frag_before(self, state: ClusterState, hosts: IntArray) -> FloatArray:
        """Current fragmentation of ``hosts`` (cached per host version unless not ``incremental``)."""
        assert self.measure is not None
        if not self.incremental:
            return self.measure(state.cpu_free[hosts], state.dev_left[hosts], state.host_class[hosts])
        stale = hosts[self._seen[hosts] != state.version[hosts]]
        if len(stale):
            self._before[stale] = self.measure(state.cpu_free[stale], state.dev_left[stale],
                                               state.host_class[stale])
            self._seen[stale] = state.version[stale]
        return self._before[hosts]

    def _to_score(self, delta: FloatArray) -> FloatArray:
        if not self.quantize:
            return delta
        with np.errstate(over="ignore"):
            sig = 1.0 / (1.0 + np.exp(-(delta / 1000.0)))
        return np.trunc(sig * MAX_SCORE)

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        assert self.measure is not None
        n = len(hosts)
        slots = np.full(n, -1, dtype=np.int64)
        before = self.frag_before(state, hosts)
        cpu_after = state.cpu_free[hosts] - req.cpu_milli
        left = state.dev_left[hosts]
        cls = state.host_class[hosts]
        if req.share is not None or req.partition is not None:
            fit = state.slot_fit(req, hosts)
            hi, sj = np.nonzero(fit)
            out = np.full(n, NEG_INF)
            if len(hi) == 0:
                return out, slots
            per: IntArray | int = req.milli_per_device
            if req.partition is not None:
                per = np.array([state.partition_milli(req, int(hosts[h]), int(s))
                                for h, s in zip(hi, sj, strict=True)], dtype=np.int64)
            hyp = left[hi].copy()
            hyp[np.arange(len(hi)), sj] -= per
            after = self.measure(cpu_after[hi], hyp, cls[hi])
            sc = self._to_score(before[hi] - after)
            table = np.full((n, state.n_slots), NEG_INF)
            table[hi, sj] = sc
            best = np.argmax(table, axis=1)
            out = table[np.arange(n), best]
            slots = np.where(np.isfinite(out), best, -1).astype(np.int64)
            return out, slots
        hyp = left.copy()
        if req.devices:
            fit = state.slot_fit(req, hosts)
            rank = np.cumsum(fit, axis=1)
            take = fit & (rank <= req.devices)
            hyp = np.where(take, 0, hyp)
        after = self.measure(cpu_after, hyp, cls)
        return self._to_score(before - after), slots


class BalancedFGDScorer(FGDScorer):
    """``fgd-balance`` (this project's policy): FGD plus a CPU-to-device balance term.

    On the openb traces most idle GPU compute left at high load sits on hosts that have run out
    of CPU: the GPUs are free but no pod that needs them can get the CPU that goes with them.
    FGD sees this only through its typical-pod quadrants and, because its score is truncated to
    an integer, treats most candidate hosts as ties.  This policy keeps FGD's score and adds

    * for device requests, ``weight * (0.5 + 0.49 * tanh((|s_before| - |s_after|) / scale))``,
      where a host's *surplus* ``s = cpu_free - c * idle_milli`` and ``c`` is the workload's CPU
      per device-milli (CPU-heavy pods go to CPU-rich hosts, CPU-light pods to CPU-poor ones);
    * for CPU-only requests, a tie-break (< 1 point) towards the host with the largest surplus
      after placement, so CPU-only work does not eat the CPU that idle devices will need.

    The balance term needs no more state than FGD (the same per-host arrays) and is cached the
    same way.

    **Guard** (``selector_guard``, on by default): when the target workload has device requests
    whose selector admits some but not all of the cluster's device models (openb's ``gpu_spec``),
    the balance term is off and the scores are FGD's, decision for decision.  The balance term
    moves pods by CPU ratio whatever model the constrained pods need, and on openb ``gpuspec33``
    it scored below published FGD at 100% arrived (87.00 against 87.84, seeds 42..51).  Without
    such selectors ``fgd-balance`` makes exactly ``fgd-plus``'s decisions, so it never loses where
    ``fgd-plus`` does not; with them it is FGD (``fgd-plus`` is the policy for such workloads).
    """

    name = "fgd-balance"

    def __init__(self, *, weight: float = 10.0, scale: float = 4000.0, popularity: float = 95.0,
                 selector_guard: bool = True) -> None:
        super().__init__(quantize=True, popularity=popularity)
        self.weight = weight
        self.scale = scale
        self.selector_guard = bool(selector_guard)
        self.cpu_per_milli = 0.0
        self.balance_on = True

    def attach(self, state: ClusterState, workload: Sequence[Request] | None, seed: int) -> None:
        super().attach(state, workload, seed)
        dev = [r for r in (workload or ()) if r.wants_devices]
        milli = sum(r.total_milli for r in dev)
        self.cpu_per_milli = sum(r.cpu_milli for r in dev) / milli if milli else 0.0
        self.balance_on = not (self.selector_guard and has_constrained_requests(state, dev))

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        base, slots = super().score(state, req, hosts)
        if not self.balance_on:
            return base, slots
        idle = _gpu_left_total(state, hosts)
        before = state.cpu_free[hosts] - idle * self.cpu_per_milli
        after = before - req.cpu_milli + req.total_milli * self.cpu_per_milli
        if req.wants_devices:
            gain = np.abs(before) - np.abs(after)
            return base + self.weight * (0.5 + 0.49 * np.tanh(gain / self.scale)), slots
        return base + 0.5 + 0.49 * np.tanh(after / 64000.0), slots
