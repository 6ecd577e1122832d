"""Links and domains between the GPUs: NVLink peers, NVSwitch fabrics, PCIe levels, P2P.

The NVLink/NVSwitch and PCIe part is rebuilt only when what it is made of changes (the devices,
the lost ones, the links each GPU's last sample found down; wiring, PCI places and common
ancestors are static); the NVLink cliques (:class:`._fabric.Fabric`) are asked every time (the
fabric manager's registration can change under a running driver).
"""

from __future__ import annotations

from typing import Any

from ...errors import AccelError
from ...model import Device, Domain, DomainKind, Link, LinkState, LinkType, Problem
from ._fabric import Fabric
from ._handles import Handles, NvmlPart
from ._nvml import C
from ._static import NvLink, StaticReader

__all__ = ["ANCESTOR", "Topology"]

#: NVML_NVLINK_VERSION_* enum -> (NVLink generation, nominal bytes/s per link per direction).
_NVLINK = {1: (1, 20_000_000_000), 2: (2, 25_000_000_000), 3: (2, 25_000_000_000), 4: (3, 25_000_000_000),
           5: (3, 25_000_000_000), 6: (4, 25_000_000_000), 7: (5, 50_000_000_000), 8: (6, 100_000_000_000)}
#: nvmlDeviceGetTopologyCommonAncestor's level -> the PCIe link type it means.
ANCESTOR = {C.TOPOLOGY_INTERNAL: LinkType.DIE_INTERNAL, C.TOPOLOGY_SINGLE: LinkType.PCIE_PIX,
            C.TOPOLOGY_MULTIPLE: LinkType.PCIE_PXB, C.TOPOLOGY_HOSTBRIDGE: LinkType.PCIE_PHB,
            C.TOPOLOGY_NODE: LinkType.NUMA, C.TOPOLOGY_SYSTEM: LinkType.SYSTEM}


class Topology(NvmlPart):
    """The links, domains and P2P reachability of a set of GPUs (see the module docstring)."""

    def __init__(self, handles: Handles, statics: StaticReader) -> None:
        super().__init__(handles)
        self._statics = statics
        self._fabric = Fabric(handles)
        self._ancestors: dict[tuple[int, int], int | None] = {}
        self._p2p: dict[tuple[int, int], bool | None] = {}
        self._p2p_devices: tuple[tuple[tuple[str, ...], frozenset[int]], dict[str, bool | None]] | None = None
        #: The NVLink/NVSwitch/PCIe links and fabric domains, and what they were built from.
        self._wiring: tuple[Any, list[Link], list[Domain]] | None = None
        #: Device id -> the NVLinks its last sample found down.
        self.down_links: dict[str, tuple[int, ...]] = {}

    def links(self, devices: list[Device], idx: dict[str, int]) -> tuple[list[Link], list[Domain], list[Problem]]:
        """Links, domains (NVSwitch fabrics and NVLink cliques) and the problems reading them."""
        key = (tuple((d.id, d.pci.bus_id if d.pci else None, d.numa_node,
                      d.pci.bridge_path if d.pci else None) for d in devices),
               frozenset(self._lost), tuple(self.down_links.get(d.id, ()) for d in devices))
        if self._wiring is None or self._wiring[0] != key:
            self._wiring = (key, *self._wired(devices, idx))
        links, domains = list(self._wiring[1]), list(self._wiring[2])
        cliques, problems = self._fabric.cliques(devices, idx)
        return links, domains + cliques, problems

    def _wired(self, devices: list[Device], idx: dict[str, int]) -> tuple[list[Link], list[Domain]]:
        links: list[Link] = []
        by_bus = {d.pci.bus_id: d.id for d in devices if d.pci is not None}
        switch_links: dict[str, dict[str, int]] = {}
        best_version: dict[str, int] = {}
        seen_pairs: set[frozenset[str]] = set()
        for dev in devices:
            st = self._statics.statics.get(idx[dev.id])
            if st is None:
                continue
            sample_down = set(self.down_links.get(dev.id, ()))
            peers: dict[str, list[NvLink]] = {}
            for lk in st.nvlinks:
                if lk.index in sample_down:
                    continue
                if lk.version is not None:
                    best_version[dev.id] = max(best_version.get(dev.id, 0), lk.version)
                if lk.remote_type == C.NVLINK_DEVICE_TYPE_SWITCH and lk.remote_bus_id:
                    switch_links.setdefault(dev.id, {}).setdefault(lk.remote_bus_id, 0)
                    switch_links[dev.id][lk.remote_bus_id] += 1
                elif lk.remote_bus_id in by_bus:
                    peers.setdefault(by_bus[lk.remote_bus_id], []).append(lk)
            for peer, lks in peers.items():
                pair = frozenset((dev.id, peer))
                if pair in seen_pairs or peer == dev.id:
                    continue
                seen_pairs.add(pair)
                gen, bw = _NVLINK.get(lks[0].version or 0, (None, None))
                links.append(Link(a=dev.id, b=peer, type=LinkType.NVLINK, count=len(lks), generation=gen,
                                  bandwidth_bytes_per_s=bw * len(lks) if bw else None))
        switched, domains = self._switched(devices, idx, switch_links, best_version)
        links += switched
        links += self._pcie_links(devices, idx)
        return links, domains

    def _switched(self, devices: list[Device], idx: dict[str, int], switch_links: dict[str, dict[str, int]],
                  best_version: dict[str, int]) -> tuple[list[Link], list[Domain]]:
        """NVSwitch: GPUs that reach a common switch chip are one fabric (union over switches)."""
        links: list[Link] = []
        domains: list[Domain] = []
        fabrics: list[tuple[set[str], set[str]]] = []
        for dev_id, switches in switch_links.items():
            merged = [f for f in fabrics if f[1] & set(switches)]
            members, sw = {dev_id}, set(switches)
            for f in merged:
                members |= f[0]
                sw |= f[1]
                fabrics.remove(f)
            fabrics.append((members, sw))
        statics = self._statics.statics
        for members, chips in fabrics:
            if len(members) < 2:
                continue
            ordered = [d.id for d in devices if d.id in members]
            fabric_id = f"nvidia:nvswitch-{min(chips)}"
            total = {m: sum(switch_links[m].values()) for m in ordered}
            for x in range(len(ordered)):
                for y in range(x + 1, len(ordered)):
                    a, b = ordered[x], ordered[y]
                    count = min(total[a], total[b])
                    gen, bw = _NVLINK.get(min(best_version.get(a, 0), best_version.get(b, 0)), (None, None))
                    full = max(len(statics[idx[a]].nvlinks), len(statics[idx[b]].nvlinks))
                    links.append(Link(a=a, b=b, type=LinkType.NVSWITCH, count=count, via=fabric_id,
                                      generation=gen, bandwidth_bytes_per_s=bw * count if bw else None,
                                      state=LinkState.UP if count >= full else LinkState.DEGRADED))
            domains.append(Domain(id=fabric_id, kind=DomainKind.NVLINK_ISLAND, members=tuple(ordered)))
        return links, domains

    def _pcie_links(self, devices: list[Device], idx: dict[str, int]) -> list[Link]:
        """PCIe levels from NVML when sysfs gave no bridge path (NODE/SYS come from numa_node)."""
        out: list[Link] = []
        for x in range(len(devices)):
            for y in range(x + 1, len(devices)):
                a, b = devices[x], devices[y]
                if a.pci and b.pci and a.pci.bridge_path is not None and b.pci.bridge_path is not None:
                    continue  # the core derives the level from sysfs
                ia, ib = idx[a.id], idx[b.id]
                if ia in self._lost or ib in self._lost:
                    continue
                key = (ia, ib)
                if key not in self._ancestors:
                    try:
                        self._ancestors[key] = int(self._nv.call(
                            "nvmlDeviceGetTopologyCommonAncestor", self._handle(ia), self._handle(ib)))
                    except AccelError:
                        self._ancestors[key] = None
                level = self._ancestors[key]
                ltype = ANCESTOR.get(level) if level is not None else None
                if ltype is None:
                    continue
                if ltype in (LinkType.NUMA, LinkType.SYSTEM) and a.numa_node is not None and b.numa_node is not None:
                    continue  # the core derives NODE/SYS from the NUMA nodes
                out.append(Link(a=a.id, b=b.id, type=ltype))
        return out

    def _p2p_ok(self, ia: int, ib: int) -> bool | None:
        key = (min(ia, ib), max(ia, ib))
        if key not in self._p2p:
            try:
                status = self._nv.call("nvmlDeviceGetP2PStatus", self._handle(key[0]), self._handle(key[1]),
                                       C.P2P_CAPS_INDEX_READ)
                self._p2p[key] = int(status) == C.P2P_STATUS_OK
            except AccelError:
                self._p2p[key] = None
        return self._p2p[key]

    def p2p_of(self, ids: list[str], idx: dict[str, int]) -> dict[str, bool | None]:
        """Whether each GPU can reach a peer directly (cached per pair, and per device set and
        lost set: the answer changes only when one of them does); empty for fewer than two."""
        if len(ids) < 2:
            return {}
        key = (tuple(ids), frozenset(self._lost))
        if self._p2p_devices is not None and self._p2p_devices[0] == key:
            return self._p2p_devices[1]
        out: dict[str, bool | None] = {}
        for d in ids:
            results = [self._p2p_ok(idx[d], idx[o]) for o in ids
                       if o != d and idx[d] not in self._lost and idx[o] not in self._lost]
            known = [x for x in results if x is not None]
            out[d] = any(known) if known else None
        self._p2p_devices = (key, out)
        return out
