"""Static trace replay with the FGD paper's protocol (openb traces).

Protocol (Weng et al., ATC'23, and its simulator): the pods of a trace are sorted by name and
shuffled with the seed; copies drawn uniformly from the original pods are appended until the
GPU request reaches ``tune`` (1.3) x cluster GPU capacity; pods are then placed one by one,
never leaving.  After every attempt the allocated and arrived GPU compute are recorded; the
metric is the GPU allocation ratio as a function of arrived demand, averaged per integer
percent of arrived demand.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ._request import MILLI, DeviceSelector, Request, Share
from ._scheduler import Scheduler
from ._scorers import Scorer
from ._state import ClusterState, DeviceSpec, HostSpec

__all__ = [
    "ReplayResult",
    "TracePod",
    "binned_allocation",
    "load_openb_nodes",
    "load_openb_pods",
    "openb_order",
    "replay",
]

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of a trace and the request it becomes."""

    name: str
    request: Request

    @property
    def gpu_milli(self) -> int:
        """Total GPU compute the pod asks for (milli)."""
        return self.request.total_milli

    @property
    def per_gpu_milli(self) -> int:
        return self.request.milli_per_device


def load_openb_nodes(path: str | Path, *, max_pods: int = 110) -> list[HostSpec]:
    """Hosts of an openb node list (``sn,cpu_milli,memory_mib,gpu,model``)."""
    hosts: list[HostSpec] = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            n = int(row["gpu"])
            model = row.get("model") or ""
            devs = tuple(DeviceSpec(id=f"{row['sn']}/gpu{j}", vendor="openb", kind="gpu", model=model)
                         for j in range(n))
            hosts.append(HostSpec(row["sn"], int(row["cpu_milli"]), int(row["memory_mib"]) * MIB, devs,
                                  max_pods=max_pods))
    return hosts


def load_openb_pods(path: str | Path) -> list[TracePod]:
    """Pods of an openb pod list as requests (share, whole GPUs or CPU only; ``gpu_spec``)."""
    pods: list[TracePod] = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            num = int(row["num_gpu"])
            milli = int(row.get("gpu_milli") or 0)
            spec = tuple(s for s in (row.get("gpu_spec") or "").split("|") if s)
            sel = DeviceSelector(models=spec)
            kw: dict[str, object] = {}
            if num == 1 and 0 < milli < MILLI:
                kw["share"] = Share(milli)
            elif num > 0 and milli > 0:
                kw["devices"] = num
            req = Request(name=row["name"], cpu_milli=int(row["cpu_milli"]),
                          memory_bytes=int(row["memory_mib"]) * MIB, selector=sel,
                          **kw)  # type: ignore[arg-type]
            pods.append(TracePod(row["name"], req))
    return pods


def openb_order(pods: Sequence[TracePod], capacity_milli: int, seed: int,
                tune: float = 1.3) -> list[TracePod]:
    """The paper's protocol: sort by name, shuffle, then append uniform re-samples until the GPU
    request would exceed ``tune`` x capacity (the simulator's stop test uses the per-GPU milli)."""
    rng = np.random.default_rng(seed)
    base = sorted(pods, key=lambda p: p.name)
    order = [base[i] for i in rng.permutation(len(base))]
    total = sum(p.gpu_milli for p in order)
    target = tune * float(capacity_milli)
    i = 0
    while True:
        src = base[int(rng.integers(len(base)))]
        if float(total + src.per_gpu_milli) > target:
            break
        total += src.gpu_milli
        name = f"{src.name}-tuned-{i}"
        order.append(TracePod(name, _renamed(src.request, name)))
        i += 1
    return order


def _renamed(req: Request, name: str) -> Request:
    return Request(name=name, cpu_milli=req.cpu_milli, memory_bytes=req.memory_bytes, devices=req.devices,
                   share=req.share, partition=req.partition, selector=req.selector, topology=req.topology,
                   gang=req.gang, priority=req.priority, tenant=req.tenant)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Per-attempt record of a replay (row ``k`` = state after attempt ``k``)."""

    used_milli: npt.NDArray[np.int64]
    arrived_milli: npt.NDArray[np.int64]
    used_nodes: npt.NDArray[np.int64]
    used_gpus: npt.NDArray[np.int64]
    placed: npt.NDArray[np.bool_]
    total_milli: int
    rescored_hosts: int

    def curve(self, max_pct: int = 130) -> npt.NDArray[np.float64]:
        """Allocation % per integer arrived % (0..max_pct), NaN where no attempt falls."""
        return binned_allocation(self.used_milli, self.arrived_milli, self.total_milli, max_pct)


def binned_allocation(used: npt.NDArray[np.int64], arrived: npt.NDArray[np.int64], total: int,
                      max_pct: int = 130) -> npt.NDArray[np.float64]:
    """Mean allocation % (each attempt rounded to 0.01) over attempts whose arrived % rounds to k."""
    alloc = np.round(used / total * 100.0, 2)
    arr = np.round(arrived / total * 100.0).astype(np.int64)
    out = np.full(max_pct + 1, np.nan)
    for k in range(max_pct + 1):
        sel = arr == k
        if sel.any():
            out[k] = float(alloc[sel].mean())
    return out


def replay(hosts: Sequence[HostSpec], order: Iterable[TracePod], scorer: str | Scorer, *,
           workload: Sequence[Request] | None = None, seed: int = 0,
           progress: Callable[[int], None] | None = None,
           chooser: Callable[[Scheduler, Request, int], int | None] | None = None,
           cache: bool = True) -> ReplayResult:
    """Place ``order`` one by one on a fresh cluster built from ``hosts``.

    ``chooser`` (for diagnostics) may override the host among the tied best ones: it is called
    with the scheduler, the request and the attempt index and returns a host index or None.
    """
    state = ClusterState.from_specs(hosts)
    sched = Scheduler(state, scorer, workload=workload, seed=seed, cache=cache)
    pods = list(order)
    n = len(pods)
    used = np.zeros(n, dtype=np.int64)
    arrived = np.zeros(n, dtype=np.int64)
    nodes = np.zeros(n, dtype=np.int64)
    gpus = np.zeros(n, dtype=np.int64)
    placed = np.zeros(n, dtype=bool)
    used_now = arr_now = nodes_now = gpus_now = 0
    for k, pod in enumerate(pods):
        req = pod.request
        arr_now += req.total_milli
        host: int | None = None
        if chooser is not None:
            host = chooser(sched, req, k)
        if host is None:
            alloc = sched.place(req)
        else:
            devs = sched.reserve_devices(req, host, _slot_hint(sched, req, host))
            alloc = state.allocate(req, host, devs)
        if alloc is not None:
            placed[k] = True
            used_now += alloc.milli * len(alloc.devices)
            if state.pods_used[alloc.host] == 1:
                nodes_now += 1
                gpus_now += int(state.n_devices[alloc.host])
        used[k], arrived[k], nodes[k], gpus[k] = used_now, arr_now, nodes_now, gpus_now
        if progress is not None:
            progress(k)
    return ReplayResult(used, arrived, nodes, gpus, placed, state.total_milli, sched.stats.rescored_hosts)


def _slot_hint(sched: Scheduler, req: Request, host: int) -> int:
    if req.devices or not req.wants_devices:
        return -1
    _, slots = sched.score(req, np.array([host], dtype=np.int64))
    return int(slots[0])
