"""Conformance rows of section ``topology`` (Topology): Links, domains and the derived distance matrix."""

from __future__ import annotations

import pytest

from accel.model import FAST_LINKS, DistanceLevel, DomainKind, pcie_level
from accel.sysfs import enrich_inventory

from .._requirements import row
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _LINK_DOMAINS, _check, _device_ids

__all__ = ["TopologyRows"]


class TopologyRows(SuiteBase):
    """The ``topology.*`` rows of requirements.json."""

    @row("topology.matrix-symmetric")
    def test_topology_matrix_symmetric(self, accel: _Harness) -> None:
        m = accel.call("distance_matrix()", accel.inventory.distance_matrix)
        ids = m.device_ids
        problems = [
            f"{ids[i]}->{ids[j]} is {m.levels[i][j].value} but {ids[j]}->{ids[i]} is {m.levels[j][i].value}"
            for i in range(len(ids)) for j in range(i + 1, len(ids)) if m.levels[i][j] != m.levels[j][i]
        ]
        _check(problems, "report links once per pair; never build DistanceMatrix by hand")

    @row("topology.self-is-x")
    def test_topology_self_is_x(self, accel: _Harness) -> None:
        m = accel.call("distance_matrix()", accel.inventory.distance_matrix)
        ids = m.device_ids
        problems = []
        for i in range(len(ids)):
            for j in range(len(ids)):
                if (m.levels[i][j] is DistanceLevel.X) != (i == j):
                    problems.append(f"cell {ids[i]}/{ids[j]} is {m.levels[i][j].value}")
        _check(problems, "only a device with itself is X")

    @row("topology.links-reference-devices")
    def test_topology_links_reference_devices(self, accel: _Harness) -> None:
        inv = accel.inventory
        endpoints = set(_device_ids(inv)) | {p.id for p in inv.partitions}
        problems = []
        seen: set[tuple[frozenset[str], str]] = set()
        for link in inv.links:
            for end in (link.a, link.b):
                if end not in endpoints:
                    problems.append(f"link {link.a}-{link.b} names unknown {end!r}")
            if link.a == link.b:
                problems.append(f"link {link.a}-{link.b} joins a device to itself")
            key = (link.pair, link.type.value)
            if key in seen:
                problems.append(f"{link.type.value} link {link.a}-{link.b} is reported twice (once per direction?)")
            seen.add(key)
        _check(problems, "report each undirected link once, between ids of this inventory (use count for bonds)")

    @row("topology.link-bandwidth-units")
    def test_topology_link_bandwidth_units(self, accel: _Harness) -> None:
        problems = []
        for link in accel.inventory.links:
            bw = link.bandwidth_bytes_per_s
            if bw is not None and not 10**8 <= bw <= 10**13:
                problems.append(f"{link.type.value} {link.a}-{link.b}: {bw} B/s")
        _check(problems, "bandwidth_bytes_per_s is bytes per second per direction (GB/s * 1e9; Gbit/s / 8 * 1e9)")

    @row("topology.domains-consistent")
    def test_topology_domains_consistent(self, accel: _Harness) -> None:
        inv = accel.inventory
        adj: dict[str, set[str]] = {}
        for link in inv.links:
            if link.type in FAST_LINKS:
                adj.setdefault(link.a, set()).add(link.b)
                adj.setdefault(link.b, set()).add(link.a)
        problems = []
        by_kind: dict[DomainKind, dict[str, str]] = {}
        devices = {d.id: d for d in inv.devices}
        for dom in inv.domains:
            members = set(dom.members)
            if dom.kind in _LINK_DOMAINS and len(members) > 1:
                start = next(iter(sorted(members)))
                reached, todo = {start}, [start]
                while todo:
                    for nxt in adj.get(todo.pop(), set()) & members:
                        if nxt not in reached:
                            reached.add(nxt)
                            todo.append(nxt)
                if reached != members:
                    problems.append(f"domain {dom.id} ({dom.kind.value}): {sorted(members - reached)} have no fast "
                                    f"link path to {start}")
                owner = by_kind.setdefault(dom.kind, {})
                for m in members:
                    if m in owner:
                        problems.append(f"{m} is in two {dom.kind.value} domains ({owner[m]}, {dom.id})")
                    owner[m] = dom.id
            if dom.kind is DomainKind.NUMA:
                nodes = {devices[m].numa_node for m in members if m in devices}
                if len(nodes) > 1:
                    problems.append(f"NUMA domain {dom.id} spans NUMA nodes {sorted(map(str, nodes))}")
        link_kind = {
            DomainKind.NVLINK_ISLAND, DomainKind.XGMI_HIVE, DomainKind.HCCS_GROUP, DomainKind.MLULINK_GROUP,
        }
        for link in inv.links:
            if link.type not in FAST_LINKS:
                continue
            for kind in link_kind & set(by_kind):
                da, db = by_kind[kind].get(link.a), by_kind[kind].get(link.b)
                if da is not None and db is not None and da != db:
                    problems.append(f"{link.type.value} link {link.a}-{link.b} crosses {kind.value} domains "
                                    f"{da} and {db}")
        _check(problems, "build link domains as the connected components of the fast-link graph")

    @row("topology.pcie-levels-match-sysfs")
    def test_topology_pcie_levels_match_sysfs(self, accel: _Harness) -> None:
        inv = accel.inventory
        placed = [d for d in inv.devices if d.pci is not None and d.pci.bridge_path is not None]
        if len(placed) < 2:
            pytest.skip("fewer than two devices carry PCI bridge paths; the core derives PCIe levels from sysfs")
        stripped = []
        for dev in placed:
            assert dev.pci is not None
            pci = dev.pci.model_copy(update={"bridge_path": None, "pcie_root": None})
            stripped.append(dev.model_copy(update={"pci": pci, "numa_node": None, "cpu_affinity": None}))
        root = accel.config.sysfs_root
        core = enrich_inventory(inv.model_copy(update={"devices": tuple(stripped)}), root)
        known = {d.id: d for d in core.devices if d.pci is not None and d.pci.bridge_path is not None}
        if len(known) < 2:
            pytest.skip(f"sysfs at {root} knows fewer than two of the backend's bus ids; nothing to compare")
        problems = []
        for i, a in enumerate(placed):
            for b in placed[i + 1:]:
                if a.id in known and b.id in known:
                    mine, core_level = pcie_level(a, b), pcie_level(known[a.id], known[b.id])
                    if mine != core_level:
                        problems.append(f"{a.id}/{b.id}: backend {mine.value}, sysfs {core_level.value}")
        _check(problems, "leave pcie_root/bridge_path to accel.sysfs.enrich_inventory, or read them from sysfs")
