"""The cluster view: every host and device the scheduler may place on, as flat arrays.

The state is a set of numpy arrays indexed by host (``H``) and device slot (``H x D``, where ``D``
is the largest device count of any host; empty slots have zero capacity).  Allocation and release
touch one host row and bump that host's version number, so caches keyed on (host, version)
— the scheduler's score cache — stay valid for every other host.  Build it with
:meth:`ClusterState.from_specs` (plain specs) or :func:`accel.scheduler.from_inventories`
(``HostInventory`` snapshots).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ._errors import InvalidRequestError, SchedulerStateError
from ._request import MILLI, DeviceSelector, Request

__all__ = ["Allocation", "ClusterState", "DeviceSpec", "HostSpec"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """One accelerator as the scheduler sees it (derived from ``accel.model.Device``)."""

    id: str
    vendor: str = "unknown"
    kind: str = "gpu"
    model: str = ""
    architecture: str | None = None
    memory_bytes: int = 0
    compute_capability: str | None = None
    capabilities: frozenset[str] = frozenset()
    healthy: bool = True
    degraded: bool = False
    link_domain: str | None = None
    pcie_switch: str | None = None
    numa: int | None = None
    partition_profiles: Mapping[str, int] = field(default_factory=dict)
    """Partition profile name -> compute milli it takes (e.g. ``{"1g.10gb": 142}``)."""
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def attrs(self) -> dict[str, Any]:
        """The attribute map selectors are evaluated against."""
        return {"vendor": self.vendor, "kind": self.kind, "model": self.model,
                "architecture": self.architecture, "memory_bytes": self.memory_bytes,
                "compute_capability": self.compute_capability, "capabilities": set(self.capabilities),
                "attributes": dict(self.attributes)}

    def class_key(self) -> tuple[Any, ...]:
        return (self.vendor, self.kind, self.model, self.architecture, self.memory_bytes,
                self.compute_capability, tuple(sorted(self.capabilities)),
                tuple(sorted((k, str(v)) for k, v in self.attributes.items())),
                tuple(sorted(self.partition_profiles.items())))


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One host: CPU, memory, devices and where it sits (rack, switch group)."""

    name: str
    cpu_milli: int
    memory_bytes: int
    devices: tuple[DeviceSpec, ...] = ()
    max_pods: int = 110
    rack: str | None = None
    switch_group: str | None = None


@dataclass(frozen=True, slots=True)
class Allocation:
    """What one bound request holds; pass it back to :meth:`ClusterState.release`."""

    request: Request
    host: int
    host_name: str
    devices: tuple[int, ...]
    device_ids: tuple[str, ...]
    milli: int
    device_memory_bytes: int
    seq: int


class ClusterState:
    """Mutable, incremental cluster view.  See the module docstring for the layout."""

    def __init__(self, hosts: Sequence[HostSpec]) -> None:
        if not hosts:
            raise InvalidRequestError("a cluster needs at least one host", field="hosts")
        names = [h.name for h in hosts]
        if len(set(names)) != len(names):
            raise InvalidRequestError("host names must be unique", field="hosts")
        self.specs: tuple[HostSpec, ...] = tuple(hosts)
        self.host_names: tuple[str, ...] = tuple(names)
        self.host_index: dict[str, int] = {n: i for i, n in enumerate(names)}
        n_hosts = len(hosts)
        n_dev = max(1, max(len(h.devices) for h in hosts))
        self.n_hosts, self.n_slots = n_hosts, n_dev
        self.cpu_cap = np.array([h.cpu_milli for h in hosts], dtype=np.int64)
        self.mem_cap = np.array([h.memory_bytes for h in hosts], dtype=np.int64)
        self.pods_cap = np.array([h.max_pods for h in hosts], dtype=np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        self.pods_used = np.zeros(n_hosts, dtype=np.int64)
        self.n_devices = np.array([len(h.devices) for h in hosts], dtype=np.int64)
        self.dev_cap = np.zeros((n_hosts, n_dev), dtype=np.int64)
        self.dev_mem_cap = np.zeros((n_hosts, n_dev), dtype=np.int64)
        self.dev_usable = np.zeros((n_hosts, n_dev), dtype=bool)
        self.dev_degraded = np.zeros((n_hosts, n_dev), dtype=bool)
        self.dev_class = np.full((n_hosts, n_dev), -1, dtype=np.int64)
        self.dev_domain = np.full((n_hosts, n_dev), -1, dtype=np.int64)
        self.dev_pcie = np.full((n_hosts, n_dev), -1, dtype=np.int64)
        self.dev_numa = np.full((n_hosts, n_dev), -1, dtype=np.int64)
        self.dev_ids: list[tuple[str, ...]] = []
        self.classes: list[DeviceSpec] = []
        self._class_of: dict[tuple[Any, ...], int] = {}
        self._sel_cache: dict[DeviceSelector, BoolArray] = {}
        self._elig_cache: dict[DeviceSelector, tuple[int, BoolArray]] = {}
        self._health_clock = 0
        self._prof_cache: dict[str, IntArray] = {}
        domains: dict[tuple[int, str], int] = {}
        racks: dict[str, int] = {}
        groups: dict[str, int] = {}
        self.host_rack = np.full(n_hosts, -1, dtype=np.int64)
        self.host_group = np.full(n_hosts, -1, dtype=np.int64)
        for h, spec in enumerate(hosts):
            if spec.cpu_milli < 0 or spec.memory_bytes < 0:
                raise InvalidRequestError(f"host {spec.name}: negative capacity", field="hosts")
            if spec.rack is not None:
                self.host_rack[h] = racks.setdefault(spec.rack, len(racks))
            if spec.switch_group is not None:
                self.host_group[h] = groups.setdefault(spec.switch_group, len(groups))
            self.dev_ids.append(tuple(d.id for d in spec.devices))
            for j, dev in enumerate(spec.devices):
                key = dev.class_key()
                cls = self._class_of.get(key)
                if cls is None:
                    cls = self._class_of[key] = len(self.classes)
                    self.classes.append(dev)
                self.dev_class[h, j] = cls
                self.dev_cap[h, j] = MILLI
                self.dev_mem_cap[h, j] = dev.memory_bytes
                self.dev_usable[h, j] = dev.healthy
                self.dev_degraded[h, j] = dev.degraded
                if dev.link_domain is not None:
                    self.dev_domain[h, j] = domains.setdefault((h, dev.link_domain), len(domains))
                if dev.pcie_switch is not None:
                    self.dev_pcie[h, j] = domains.setdefault((h, "pcie:" + dev.pcie_switch), len(domains))
                if dev.numa is not None:
                    self.dev_numa[h, j] = dev.numa
        self.dev_left = np.where(self.dev_usable, self.dev_cap, 0).astype(np.int64)
        self.dev_mem_left = np.where(self.dev_usable, self.dev_mem_cap, 0).astype(np.int64)
        # host "type" for policies that reason per node type (FGD, openb gpu_spec): class of slot 0
        self.host_class = self.dev_class[:, 0].copy()
        # GPU-clustering affinity: column 0 = shares, column k = k-device requests on the host
        self.affinity = np.zeros((n_hosts, n_dev + 1), dtype=np.int64)
        self.version = np.zeros(n_hosts, dtype=np.int64)
        self._clock = 0
        self._seq = 0
        self.live: dict[int, Allocation] = {}
        self.total_milli = int(self.dev_cap.sum())

    @classmethod
    def from_specs(cls, hosts: Iterable[HostSpec]) -> ClusterState:
        """Build a state from plain :class:`HostSpec` values."""
        return cls(list(hosts))

    # -- queries ---------------------------------------------------------------------------------
    def _touch(self, host: int) -> None:
        self._clock += 1
        self.version[host] = self._clock

    @property
    def clock(self) -> int:
        """Monotonic change counter (the largest host version)."""
        return self._clock

    def class_mask(self, selector: DeviceSelector) -> BoolArray:
        """Per device class: does the selector accept it."""
        mask = self._sel_cache.get(selector)
        if mask is None or len(mask) != len(self.classes):
            mask = np.array([selector.matches(c.attrs()) for c in self.classes] or [False], dtype=bool)
            self._sel_cache[selector] = mask
        return mask

    def eligible_slots(self, req: Request, hosts: IntArray | None = None) -> BoolArray:
        """Device slots (``len(hosts) x D``) a request's selector accepts, usable ones only."""
        cached = self._elig_cache.get(req.selector)
        if cached is None or cached[0] != self._health_clock:
            cls = self.dev_class
            base = self.dev_usable & (cls >= 0)
            if not req.selector.is_empty:
                base = base & self.class_mask(req.selector)[np.maximum(cls, 0)]
            cached = (self._health_clock, base)
            self._elig_cache[req.selector] = cached
        return cached[1] if hosts is None else cached[1][hosts]

    def profile_milli(self, profile: str) -> IntArray:
        """Per device class: compute milli a partition profile takes (0 = not offered)."""
        arr = self._prof_cache.get(profile)
        if arr is None:
            arr = np.array([int(c.partition_profiles.get(profile, 0)) for c in self.classes] or [0],
                           dtype=np.int64)
            self._prof_cache[profile] = arr
        return arr

    def slot_fit(self, req: Request, hosts: IntArray) -> BoolArray:
        """Per (host, slot): can this slot serve the request's per-device part."""
        elig = self.eligible_slots(req, hosts)
        left = self.dev_left[hosts]
        if req.devices:
            fit = elig & (left == self.dev_cap[hosts]) & (left > 0)
            if req.selector.min_memory_bytes:
                fit &= self.dev_mem_cap[hosts] >= req.selector.min_memory_bytes
            return np.asarray(fit, dtype=bool)
        if req.share is not None:
            fit = elig & (left >= req.share.compute_milli)
            if req.share.memory_bytes:
                fit &= self.dev_mem_left[hosts] >= req.share.memory_bytes
            return fit
        if req.partition is not None:
            need = self.profile_milli(req.partition)[np.maximum(self.dev_class[hosts], 0)]
            return elig & (need > 0) & (left >= need)
        return np.zeros(left.shape, dtype=bool)

    def feasible(self, req: Request, hosts: IntArray | None = None) -> BoolArray:
        """The filter stage: which hosts can take the request (host resources and devices)."""
        idx = np.arange(self.n_hosts) if hosts is None else hosts
        ok = (self.cpu_free[idx] >= req.cpu_milli) & (self.mem_free[idx] >= req.memory_bytes)
        ok &= self.pods_used[idx] < self.pods_cap[idx]
        if req.wants_devices:
            fit = self.slot_fit(req, idx)
            ok &= fit.sum(axis=1) >= req.device_count
        return ok

    def partition_milli(self, req: Request, host: int, slot: int) -> int:
        """Compute milli a request takes from one slot."""
        if req.partition is not None:
            return int(self.profile_milli(req.partition)[max(int(self.dev_class[host, slot]), 0)])
        return req.milli_per_device

    # -- mutation ----------------------------------------------------------------------------------
    def allocate(self, req: Request, host: int, devices: Sequence[int]) -> Allocation:
        """Bind ``req`` to ``host`` on device slots ``devices``; raises if it does not fit."""
        devs = tuple(int(d) for d in devices)
        if len(devs) != req.device_count or len(set(devs)) != len(devs):
            raise SchedulerStateError(
                f"{req.name}: needs {req.device_count} distinct devices, got {devs}")
        if not (self.cpu_free[host] >= req.cpu_milli and self.mem_free[host] >= req.memory_bytes
                and self.pods_used[host] < self.pods_cap[host]):
            raise SchedulerStateError(f"{req.name}: host {self.host_names[host]} lacks CPU/memory/pods")
        if devs and not self._slots_fit(req, host, devs):
            raise SchedulerStateError(f"{req.name}: devices {devs} on {self.host_names[host]} "
                                      "cannot serve it")
        milli = self.partition_milli(req, host, devs[0]) if devs else 0
        dmem = req.share.memory_bytes if req.share is not None else 0
        self.cpu_free[host] -= req.cpu_milli
        self.mem_free[host] -= req.memory_bytes
        self.pods_used[host] += 1
        for d in devs:
            self.dev_left[host, d] -= milli
            self.dev_mem_left[host, d] -= dmem
        col = self._affinity_col(req)
        if col is not None:
            self.affinity[host, col] += 1
        self._touch(host)
        self._seq += 1
        alloc = Allocation(req, host, self.host_names[host], devs,
                           tuple(self.dev_ids[host][d] for d in devs), milli, dmem, self._seq)
        self.live[alloc.seq] = alloc
        return alloc

    def _slots_fit(self, req: Request, host: int, devs: Sequence[int]) -> bool:
        """``slot_fit(req, [host])`` at each of ``devs``.  A whole-device request (every queued
        start binds one) reads the host's rows as lists, the same tests slot by slot, instead
        of building the host's whole fit array."""
        if not req.devices:
            fit = self.slot_fit(req, np.array([host]))[0]
            return all(fit[d] for d in devs)
        elig = self.eligible_slots(req)[host].tolist()
        left, cap = self.dev_left[host].tolist(), self.dev_cap[host].tolist()
        need_mem = req.selector.min_memory_bytes
        mem = self.dev_mem_cap[host].tolist() if need_mem else []
        return all(elig[d] and left[d] == cap[d] and left[d] > 0 and (not need_mem or mem[d] >= need_mem)
                   for d in devs)

    def release(self, alloc: Allocation) -> None:
        """Return what ``alloc`` holds.  Releasing twice raises :class:`SchedulerStateError`."""
        if self.live.pop(alloc.seq, None) is None:
            raise SchedulerStateError(f"allocation {alloc.seq} ({alloc.request.name}) is not live")
        h = alloc.host
        self.cpu_free[h] += alloc.request.cpu_milli
        self.mem_free[h] += alloc.request.memory_bytes
        self.pods_used[h] -= 1
        for d in alloc.devices:
            if self.dev_usable[h, d]:
                self.dev_left[h, d] += alloc.milli
                self.dev_mem_left[h, d] += alloc.device_memory_bytes
        col = self._affinity_col(alloc.request)
        if col is not None:
            self.affinity[h, col] -= 1
        self._touch(h)

    def set_device_health(self, host: int, slot: int, *, usable: bool, degraded: bool = False) -> None:
        """Mark a device (un)usable or degraded; unusable devices are never chosen."""
        if usable and not self.dev_usable[host, slot]:
            used = sum(a.milli for a in self.live.values() if a.host == host and slot in a.devices)
            self.dev_left[host, slot] = self.dev_cap[host, slot] - used
            self.dev_mem_left[host, slot] = self.dev_mem_cap[host, slot]
        elif not usable:
            self.dev_left[host, slot] = 0
            self.dev_mem_left[host, slot] = 0
        self.dev_usable[host, slot] = usable
        self.dev_degraded[host, slot] = degraded
        self._health_clock += 1
        self._touch(host)

    def _affinity_col(self, req: Request) -> int | None:
        if req.share is not None or req.partition is not None:
            return 0
        if req.devices:
            return min(req.devices, self.n_slots)
        return None

    # -- metrics -----------------------------------------------------------------------------------
    def used_milli(self) -> int:
        """Allocated compute over usable devices, in milli-device units."""
        return int((self.dev_cap - self.dev_left)[self.dev_usable].sum())

    def allocation_ratio(self) -> float:
        """Allocated compute / total compute (the openb "GPU allocation ratio")."""
        return self.used_milli() / self.total_milli if self.total_milli else 0.0
