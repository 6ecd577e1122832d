"""Topology: building the view from ``HostInventory`` snapshots, device-set selection, gangs.

* :func:`from_inventories` turns ``accel.model.HostInventory`` snapshots into a
  :class:`ClusterState` (link domains from ``Domain``/``Link``, PCIe switch and NUMA placement,
  health, partition profiles, host CPU and memory, rack).
* :func:`best_device_set` picks ``k`` free devices on one host maximising in-set bandwidth:
  one fast-link domain (NVLink/NVSwitch/xGMI/HCCS...) first, then one PCIe switch, then one
  NUMA node, then anywhere on the host (best fit among the candidate groups).
* :class:`TopologyScorer` (``topology-aware``) rates hosts by the tightest level a request's
  devices can share there.
* :class:`GangPlacer` places all-or-nothing gangs: one host, else hosts of one rack (switch
  group), else anywhere; when a gang does not fit it *reserves* the hosts it will use, and a
  filter keeps other requests off them, so a large gang is not starved by a stream of small
  requests and its preference does not decay into scattering.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from accel.leak import LEAK_REASON
from accel.model import Device as ModelDevice
from accel.model import DomainKind, HostInventory, LinkType

from ._errors import InvalidRequestError
from ._request import MILLI, Request, TopologyLevel
from ._scheduler import Scheduler
from ._scorers import Scorer
from ._state import Allocation, ClusterState, DeviceSpec, HostSpec

__all__ = ["GangPlacer", "Reservation", "TopologyScorer", "best_device_set", "from_inventories",
           "host_spec_from_inventory"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_FAST_DOMAINS = {DomainKind.NVLINK_ISLAND, DomainKind.NVLINK_CLIQUE, DomainKind.XGMI_HIVE,
                 DomainKind.HCCS_GROUP, DomainKind.MLULINK_GROUP, DomainKind.MTLINK_GROUP,
                 DomainKind.METAXLINK_GROUP, DomainKind.XPULINK_GROUP}
_FAST_LINKS = {LinkType.NVLINK, LinkType.NVSWITCH, LinkType.XGMI, LinkType.HCCS, LinkType.HCCS_SWITCH,
               LinkType.MLULINK, LinkType.MTLINK, LinkType.METAXLINK, LinkType.XPULINK, LinkType.GCULINK}
_UNUSABLE_OPERATIONAL = {"lost", "offline", "resetting", "maintenance", "draining"}


def _device_spec(dev: ModelDevice, link_domain: str | None, pcie: str | None,
                 profiles: dict[str, int]) -> DeviceSpec:
    state = str(dev.health.state)
    operational = str(dev.health.operational)
    healthy = state != "unhealthy" and operational not in _UNUSABLE_OPERATIONAL
    # A suspected leak (on the device or one of its processes) does not make the device unusable,
    # but it will be full in a while: new work goes to other devices first.
    leaking = any(c.active and c.reason == LEAK_REASON for c in dev.health.conditions)
    mem = max((r.usable_bytes or r.total_bytes or 0 for r in dev.memory), default=0)
    caps = {name for name, val in dev.capabilities.model_dump().items() if val is True}
    caps |= {f"partition:{s}" for s in dev.capabilities.partitioning}
    caps.add(f"sharing:{dev.sharing.mode}")
    return DeviceSpec(id=dev.id, vendor=dev.vendor, kind=str(dev.kind), model=dev.model,
                      architecture=dev.architecture, memory_bytes=int(mem),
                      compute_capability=dev.compute_capability, capabilities=frozenset(caps),
                      healthy=healthy, degraded=state in ("degraded", "unknown") or leaking,
                      link_domain=link_domain, pcie_switch=pcie, numa=dev.numa_node,
                      partition_profiles=profiles)


def host_spec_from_inventory(inv: HostInventory, *, max_pods: int = 110,
                             switch_group: str | None = None) -> HostSpec:
    """One :class:`HostSpec` from a ``HostInventory`` snapshot."""
    ids = {d.id for d in inv.devices}
    domain_of: dict[str, str] = {}
    pcie_of: dict[str, str] = {}
    for dom in sorted(inv.domains, key=lambda d: -len(d.members)):
        for m in dom.members:
            if dom.kind in _FAST_DOMAINS:
                domain_of.setdefault(m, dom.id)
            elif dom.kind == DomainKind.PCIE_SWITCH:
                pcie_of.setdefault(m, dom.id)
    # fast links without a declared domain: connected components become domains
    parent = {d: d for d in ids}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for link in inv.links:
        if link.type in _FAST_LINKS and link.a in parent and link.b in parent and str(link.state) == "up":
            parent[find(link.a)] = find(link.b)
    for d in ids:
        if d not in domain_of:
            root = find(d)
            if any(find(o) == root and o != d for o in ids):
                domain_of[d] = f"links:{root}"
    profiles: dict[str, dict[str, int]] = {}
    for prof in inv.partition_profiles:
        ratio = prof.compute_ratio
        if ratio is None and prof.max_instances:
            ratio = 1.0 / prof.max_instances
        if ratio:
            profiles.setdefault(prof.parent_id, {})[prof.name] = max(1, min(MILLI, round(ratio * MILLI)))
    devices = tuple(_device_spec(d, domain_of.get(d.id), pcie_of.get(d.id) or
                                 (d.pci.bridge_path[-1] if d.pci and d.pci.bridge_path else None),
                                 profiles.get(d.id, {}))
                    for d in inv.devices)
    host = inv.host
    cpu = (host.cpu_count or 0) * MILLI
    return HostSpec(host.hostname, cpu, int(host.memory_bytes or 0), devices, max_pods=max_pods,
                    rack=host.rack, switch_group=switch_group or host.rack)


def from_inventories(inventories: Iterable[HostInventory], *, max_pods: int = 110) -> ClusterState:
    """The scheduler's cluster view from ``HostInventory`` snapshots (one per host)."""
    return ClusterState.from_specs(host_spec_from_inventory(inv, max_pods=max_pods) for inv in inventories)


# ------------------------------------------------------------------------------------------------
# device-set selection

_LEVEL_SCORE = {TopologyLevel.LINK_DOMAIN: 100.0, TopologyLevel.PCIE_SWITCH: 75.0,
                TopologyLevel.NUMA: 50.0, TopologyLevel.HOST: 25.0}


def best_device_set(state: ClusterState, req: Request, host: int) -> tuple[tuple[int, ...], TopologyLevel] | None:
    """``req.devices`` free slots on ``host`` kept as close as possible, and the level reached.

    Within a level the group with the fewest spare free slots wins (best fit), so whole islands
    stay free for later large requests; healthy slots before degraded ones."""
    k = req.devices
    fit = state.slot_fit(req, np.array([host]))[0]
    free = np.nonzero(fit)[0]
    if len(free) < k or k == 0:
        return None
    degraded = state.dev_degraded[host]
    for level, labels in ((TopologyLevel.LINK_DOMAIN, state.dev_domain[host]),
                          (TopologyLevel.PCIE_SWITCH, state.dev_pcie[host]),
                          (TopologyLevel.NUMA, state.dev_numa[host])):
        groups: dict[int, list[int]] = {}
        for s in free.tolist():
            if labels[s] >= 0:
                groups.setdefault(int(labels[s]), []).append(s)
        cands = [g for g in groups.values() if len(g) >= k]
        if cands:
            g = min(cands, key=lambda g: (len(g), sum(bool(degraded[s]) for s in g)))
            g.sort(key=lambda s: (bool(degraded[s]), s))
            return tuple(g[:k]), level
    order = sorted(free.tolist(), key=lambda s: (bool(degraded[s]), s))
    return tuple(order[:k]), TopologyLevel.HOST


class TopologyScorer(Scorer):
    """``topology-aware``: hosts where the request's devices can share the tightest interconnect.

    Score = level (link domain 100, PCIe switch 75, NUMA 50, host 25) plus a best-fit term below
    one point.  Single-device and CPU-only requests fall back to best fit."""

    name = "topology-aware"
    host_local = False

    def score(self, state: ClusterState, req: Request, hosts: IntArray) -> tuple[FloatArray, IntArray]:
        n = len(hosts)
        out = np.zeros(n)
        left = state.dev_left[hosts].sum(axis=1) - req.total_milli
        fill = 1.0 - left / max(1, state.n_slots * MILLI)
        if req.devices > 1:
            for i, h in enumerate(hosts.tolist()):
                got = best_device_set(state, req, h)
                out[i] = _LEVEL_SCORE[got[1]] if got else -np.inf
        return out + 0.99 * fill, np.full(n, -1, dtype=np.int64)

    def choose_devices(self, state: ClusterState, req: Request, host: int) -> tuple[int, ...] | None:
        got = best_device_set(state, req, host)
        return got[0] if got else None


# ------------------------------------------------------------------------------------------------
# gangs


@dataclass(slots=True)
class Reservation:
    """Hosts held for a gang that did not fit yet."""

    gang: str
    hosts: frozenset[int]
    members: tuple[Request, ...]
    created_at: int


@dataclass(slots=True)
class _Plan:
    placements: list[tuple[Request, int, tuple[int, ...]]] = field(default_factory=list)
    level: str = "host"


class GangPlacer:
    """All-or-nothing, topology-aware placement of gangs on a :class:`Scheduler`'s state.

    ``place(members)`` returns the allocations, or ``None`` after reserving hosts for the gang
    (``reserve=True``).  Reserved hosts refuse every request that is not a member of the gang
    holding them (the placer installs that filter on the scheduler); ``retry()`` tries pending
    gangs again, e.g. after releases.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.state = scheduler.state
        self.reservations: dict[str, Reservation] = {}
        self._clock = 0
        scheduler.filters = (*scheduler.filters, self._reservation_filter)

    # the filter installed on the scheduler
    def _reservation_filter(self, state: ClusterState, req: Request, hosts: IntArray) -> BoolArray:
        if not self.reservations:
            return np.ones(len(hosts), dtype=bool)
        blocked = np.zeros(state.n_hosts, dtype=bool)
        for res in self.reservations.values():
            if req.gang != res.gang:
                blocked[list(res.hosts)] = True
        return ~blocked[hosts]

    def reserved_hosts(self) -> set[int]:
        """Every host currently held by a reservation."""
        out: set[int] = set()
        for r in self.reservations.values():
            out |= r.hosts
        return out

    def _validate(self, members: Sequence[Request]) -> str:
        if not members:
            raise InvalidRequestError("a gang needs at least one member", field="gang")
        gangs = {m.gang for m in members}
        if len(gangs) != 1 or None in gangs:
            raise InvalidRequestError("every gang member must carry the same non-empty gang id", field="gang")
        return str(next(iter(gangs)))

    def _plan_on(self, members: Sequence[Request], hosts: Sequence[int], *, ignore_reservations: str | None,
                 capacity_only: bool) -> _Plan | None:
        """Greedy plan: biggest members first, each on the host with the best device set."""
        st = self.state
        cpu = {h: int(st.cpu_cap[h] if capacity_only else st.cpu_free[h]) for h in hosts}
        mem = {h: int(st.mem_cap[h] if capacity_only else st.mem_free[h]) for h in hosts}
        taken: dict[int, set[int]] = {h: set() for h in hosts}
        plan = _Plan()
        for req in sorted(members, key=lambda r: -r.device_count):
            best: tuple[float, int, tuple[int, ...]] | None = None
            for h in hosts:
                if cpu[h] < req.cpu_milli or mem[h] < req.memory_bytes:
                    continue
                fit = st.slot_fit(req, np.array([h]))[0] if not capacity_only else (
                    st.eligible_slots(req, np.array([h]))[0])
                for s in taken[h]:
                    fit[s] = False
                if fit.sum() < req.device_count:
                    continue
                if req.devices > 1:
                    saved = st.dev_left[h].copy()
                    if capacity_only:
                        st.dev_left[h] = np.where(fit, st.dev_cap[h], 0)
                    else:
                        st.dev_left[h] = np.where(fit, st.dev_left[h], 0)
                    got = best_device_set(st, req, h)
                    st.dev_left[h] = saved
                    if got is None:
                        continue
                    devs, level = got
                    quality = _LEVEL_SCORE[level]
                elif req.device_count == 1:
                    devs, quality = (int(np.nonzero(fit)[0][0]),), 50.0
                else:
                    devs, quality = (), 50.0
                # prefer tight sets, then hosts already used by this gang, then fuller hosts
                spare = int(fit.sum()) - req.device_count
                key = quality * 100 + (20 if any(p[1] == h for p in plan.placements) else 0) - spare
                if best is None or key > best[0]:
                    best = (key, h, devs)
            if best is None:
                return None
            _, h, devs = best
            cpu[h] -= req.cpu_milli
            mem[h] -= req.memory_bytes
            taken[h].update(devs)
            plan.placements.append((req, h, devs))
        return plan

    def _candidate_groups(self) -> list[tuple[str, list[int]]]:
        st = self.state
        groups: list[tuple[str, list[int]]] = [("host", [h]) for h in range(st.n_hosts)]
        for label, arr in (("rack", st.host_rack), ("switch_group", st.host_group)):
            ids = sorted({int(x) for x in arr if x >= 0})
            groups += [(label, [int(h) for h in np.nonzero(arr == i)[0]]) for i in ids]
        groups.append(("any", list(range(st.n_hosts))))
        return groups

    def _find(self, members: Sequence[Request], gang: str, *, capacity_only: bool,
              allowed: set[int] | None = None) -> tuple[str, _Plan] | None:
        blocked: set[int] = set()
        for res in self.reservations.values():
            if res.gang != gang:
                blocked |= res.hosts
        limit = None
        for m in members:
            if m.topology is not None and m.topology.required:
                limit = m.topology.rank()
        order = ["host", "rack", "switch_group", "any"]
        for level in order:
            if limit is not None and level != "host" and _LEVEL_RANK[level] > limit:
                break
            best: tuple[tuple[int, int], str, _Plan] | None = None
            for label, hosts in self._candidate_groups():
                if label != level:
                    continue
                hosts = [h for h in hosts if h not in blocked and (allowed is None or h in allowed)]
                if not hosts or (level == "host" and len(members) > 1 and
                                 sum(m.device_count for m in members) > self.state.n_devices[hosts[0]]):
                    continue
                plan = self._plan_on(members, hosts, ignore_reservations=gang, capacity_only=capacity_only)
                if plan is None:
                    continue
                used = {h for _, h, _ in plan.placements}
                key = (len(used), int(sum(self.state.dev_left[list(used)].sum(axis=1))))
                if best is None or key < best[0]:
                    best = (key, label, plan)
            if best is not None:
                return best[1], best[2]
        return None

    def place(self, members: Sequence[Request], *, reserve: bool = True) -> list[Allocation] | None:
        """Place the whole gang now, or reserve hosts for it and return ``None``."""
        gang = self._validate(members)
        res = self.reservations.get(gang)
        found = self._find(members, gang, capacity_only=False,
                           allowed=set(res.hosts) if res is not None else None)
        if found is not None:
            _, plan = found
            allocs = [self.state.allocate(req, h, devs) for req, h, devs in plan.placements]
            self.reservations.pop(gang, None)
            return allocs
        if reserve and gang not in self.reservations:
            cap = self._find(members, gang, capacity_only=True)
            if cap is not None:
                self._clock += 1
                hosts = frozenset(h for _, h, _ in cap[1].placements)
                self.reservations[gang] = Reservation(gang, hosts, tuple(members), self._clock)
        return None

    def retry(self) -> dict[str, list[Allocation]]:
        """Try every reserved gang again (oldest first); returns the ones placed."""
        placed: dict[str, list[Allocation]] = {}
        for gang, res in sorted(self.reservations.items(), key=lambda kv: kv[1].created_at):
            got = self.place(res.members)
            if got is not None:
                placed[gang] = got
        return placed

    def cancel(self, gang: str) -> None:
        """Drop a gang's reservation."""
        self.reservations.pop(gang, None)


_LEVELS = list(TopologyLevel)
_LEVEL_RANK: dict[str, int] = {"host": _LEVELS.index(TopologyLevel.HOST),
                               "rack": _LEVELS.index(TopologyLevel.RACK),
                               "switch_group": _LEVELS.index(TopologyLevel.SWITCH_GROUP),
                               "any": _LEVELS.index(TopologyLevel.ANY)}
