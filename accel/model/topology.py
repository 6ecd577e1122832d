"""Topology: a typed graph of links and domains; the distance matrix is derived from it.

Links between two devices carry a type (``nvlink``, ``xgmi``, ``hccs``...), a count (bonded
links or lanes) and a nominal per-direction bandwidth.  PCIe and NUMA levels come either from
explicit ``pcie_*`` / ``numa`` / ``system`` links (vendor tools such as ``npu-smi info -t topo``
print them) or, for every vendor alike, from each device's PCI bridge path and NUMA node.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from ._base import BytesPerSecond, Count, Model

if TYPE_CHECKING:
    from .device import Device

__all__ = [
    "DistanceLevel",
    "DistanceMatrix",
    "Domain",
    "DomainKind",
    "Link",
    "LinkState",
    "LinkType",
    "distance_matrix",
    "pcie_level",
]


class LinkType(StrEnum):
    NVLINK = "nvlink"
    NVSWITCH = "nvswitch"
    MNNVL = "mnnvl"
    XGMI = "xgmi"
    HCCS = "hccs"
    HCCS_SWITCH = "hccs_switch"
    SIO = "sio"
    MLULINK = "mlulink"
    MTLINK = "mtlink"
    METAXLINK = "metaxlink"
    XPULINK = "xpulink"
    GCULINK = "gculink"
    DIE_INTERNAL = "die_internal"
    PCIE_PIX = "pcie_pix"
    PCIE_PXB = "pcie_pxb"
    PCIE_PHB = "pcie_phb"
    NUMA = "numa"
    SYSTEM = "system"
    NETWORK = "network"
    OTHER = "other"


#: Link types that are a direct high-speed device-to-device interconnect (the LINK level).
FAST_LINKS = frozenset(
    {
        LinkType.NVLINK,
        LinkType.NVSWITCH,
        LinkType.MNNVL,
        LinkType.XGMI,
        LinkType.HCCS,
        LinkType.HCCS_SWITCH,
        LinkType.MLULINK,
        LinkType.MTLINK,
        LinkType.METAXLINK,
        LinkType.XPULINK,
        LinkType.GCULINK,
    }
)


class LinkState(StrEnum):
    UP = "up"
    DEGRADED = "degraded"
    DOWN = "down"
    UNKNOWN = "unknown"


class DistanceLevel(StrEnum):
    """Pairwise distance levels, compatible with ``nvidia-smi topo -m``; lower is closer."""

    X = "X"
    LINK = "LINK"
    INTERNAL = "INTERNAL"
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"
    NET = "NET"
    UNKNOWN = "UNKNOWN"

    @property
    def rank(self) -> int:
        return _LEVEL_RANK[self]


_LEVEL_RANK = {
    DistanceLevel.X: 0,
    DistanceLevel.LINK: 5,
    DistanceLevel.INTERNAL: 8,
    DistanceLevel.PIX: 10,
    DistanceLevel.PXB: 20,
    DistanceLevel.PHB: 30,
    DistanceLevel.NODE: 40,
    DistanceLevel.SYS: 50,
    DistanceLevel.NET: 60,
    DistanceLevel.UNKNOWN: 100,
}

_LINK_LEVEL = {
    LinkType.DIE_INTERNAL: DistanceLevel.INTERNAL,
    LinkType.SIO: DistanceLevel.LINK,
    LinkType.PCIE_PIX: DistanceLevel.PIX,
    LinkType.PCIE_PXB: DistanceLevel.PXB,
    LinkType.PCIE_PHB: DistanceLevel.PHB,
    LinkType.NUMA: DistanceLevel.NODE,
    LinkType.SYSTEM: DistanceLevel.SYS,
    LinkType.NETWORK: DistanceLevel.NET,
    LinkType.OTHER: DistanceLevel.UNKNOWN,
}


_PCIE_TYPES = frozenset({LinkType.PCIE_PIX, LinkType.PCIE_PXB, LinkType.PCIE_PHB, LinkType.NUMA, LinkType.SYSTEM})


def level_of(link_type: LinkType) -> DistanceLevel:
    """The distance level a direct link of this type gives."""
    if link_type in FAST_LINKS:
        return DistanceLevel.LINK
    return _LINK_LEVEL[link_type]


class Link(Model):
    """An undirected edge between two devices (or partitions) of one inventory.

    ``via`` names a switch both ends go through (an NVSwitch fabric, an HCCS switch).
    ``bandwidth_bytes_per_s`` is nominal, per direction, for all ``count`` links together.
    """

    a: str
    b: str
    type: LinkType
    count: Count = 1
    bandwidth_bytes_per_s: BytesPerSecond | None = None
    state: LinkState = LinkState.UP
    via: str | None = None
    generation: Count | None = None

    @model_validator(mode="after")
    def _distinct(self) -> Link:
        if self.a == self.b:
            raise ValueError(f"a link joins two different devices, got {self.a!r} twice")
        return self

    @property
    def pair(self) -> frozenset[str]:
        return frozenset((self.a, self.b))


class DomainKind(StrEnum):
    NVLINK_ISLAND = "nvlink_island"
    NVLINK_CLIQUE = "nvlink_clique"
    XGMI_HIVE = "xgmi_hive"
    HCCS_GROUP = "hccs_group"
    SUPERPOD = "superpod"
    MLULINK_GROUP = "mlulink_group"
    MTLINK_GROUP = "mtlink_group"
    METAXLINK_GROUP = "metaxlink_group"
    XPULINK_GROUP = "xpulink_group"
    DIE_PAIR = "die_pair"
    PCIE_SWITCH = "pcie_switch"
    NUMA = "numa"
    OTHER = "other"


class Domain(Model):
    """A group of devices that is cheaper to keep together (an NVLink island, an xGMI hive)."""

    id: str = Field(min_length=1)
    kind: DomainKind
    members: tuple[str, ...] = Field(min_length=1)
    bandwidth_bytes_per_s: BytesPerSecond | None = None

    @property
    def size(self) -> int:
        return len(self.members)


def pcie_level(a: Device, b: Device) -> DistanceLevel:
    """The PCIe / NUMA level between two devices from their bridge paths and NUMA nodes.

    Same rules as ``nvidia-smi topo -m``: PIX when they hang off the same switch port parent
    with only one bridge between, PXB through several switches, PHB through the host bridge
    of one root complex, NODE within a NUMA node, SYS across sockets.  ``UNKNOWN`` when the
    data is missing.
    """
    pa, pb = a.pci, b.pci
    if (
        pa is not None
        and pb is not None
        and pa.bridge_path is not None
        and pb.bridge_path is not None
        and pa.pcie_root is not None
        and pa.pcie_root == pb.pcie_root
    ):
        common = 0
        for x, y in zip(pa.bridge_path, pb.bridge_path, strict=False):
            if x != y:
                break
            common += 1
        if common == 0:
            # Different root ports of one root complex: through the host bridge.
            return DistanceLevel.PHB
        # Bridges each side crosses below the deepest shared one: at most one -> a single
        # switch (PIX); more -> several switches without the host bridge (PXB).
        below = max(len(pa.bridge_path), len(pb.bridge_path)) - common
        return DistanceLevel.PIX if below <= 1 else DistanceLevel.PXB
    if a.numa_node is not None and b.numa_node is not None:
        return DistanceLevel.NODE if a.numa_node == b.numa_node else DistanceLevel.SYS
    return DistanceLevel.UNKNOWN


class DistanceMatrix(Model):
    """Pairwise levels, ``levels[i][j]`` between ``device_ids[i]`` and ``device_ids[j]``."""

    device_ids: tuple[str, ...]
    levels: tuple[tuple[DistanceLevel, ...], ...]
    #: For LINK entries, the best link type and count, e.g. ``nvswitch``, ``NV18``.
    link_labels: tuple[tuple[str | None, ...], ...]
    #: The PCIe / NUMA level of each pair ignoring vendor links (PIX ... NODE, SYS).
    pcie_levels: tuple[tuple[DistanceLevel, ...], ...] = ()

    def level(self, a: str, b: str) -> DistanceLevel:
        i, j = self.device_ids.index(a), self.device_ids.index(b)
        return self.levels[i][j]

    def label(self, i: int, j: int) -> str:
        """A ``nvidia-smi topo -m`` style cell: ``X``, ``NV18``, ``HCCS``, ``PIX``, ``SYS``..."""
        lvl = self.levels[i][j]
        if lvl is DistanceLevel.LINK:
            return self.link_labels[i][j] or "LINK"
        return str(lvl.value)


def _link_label(link: Link) -> str:
    if link.type in (LinkType.NVLINK, LinkType.NVSWITCH):
        return f"NV{link.count}"
    return link.type.value.upper() if link.count <= 1 else f"{link.type.value.upper()}{link.count}"


def distance_matrix(
    devices: tuple[Device, ...] | list[Device],
    links: tuple[Link, ...] | list[Link],
) -> DistanceMatrix:
    """Derive the distance matrix: the best of explicit links and the PCIe/NUMA path level."""
    ids = tuple(d.id for d in devices)
    index = {d: i for i, d in enumerate(ids)}
    n = len(ids)
    best: list[list[DistanceLevel]] = [[DistanceLevel.UNKNOWN] * n for _ in range(n)]
    labels: list[list[str | None]] = [[None] * n for _ in range(n)]
    best_bw: list[list[int]] = [[-1] * n for _ in range(n)]
    for i in range(n):
        best[i][i] = DistanceLevel.X
        for j in range(i + 1, n):
            lvl = pcie_level(devices[i], devices[j])
            best[i][j] = best[j][i] = lvl
    pcie = [[best[i][j] for j in range(n)] for i in range(n)]
    for link in links:
        if link.type in _PCIE_TYPES and link.state is not LinkState.DOWN:
            # Vendor tools that print PCIe levels (npu-smi -t topo) refine the path view too.
            ia, ib = index.get(link.a), index.get(link.b)
            if ia is not None and ib is not None and pcie[ia][ib] is DistanceLevel.UNKNOWN:
                pcie[ia][ib] = pcie[ib][ia] = level_of(link.type)
    for link in links:
        if link.state is LinkState.DOWN:
            continue
        ia, ib = index.get(link.a), index.get(link.b)
        if ia is None or ib is None:
            continue
        i, j = ia, ib
        lvl = level_of(link.type)
        bw = link.bandwidth_bytes_per_s or 0
        better = lvl.rank < best[i][j].rank
        wider = lvl is DistanceLevel.LINK and best[i][j] is DistanceLevel.LINK and bw > best_bw[i][j]
        if better or wider:
            best[i][j] = best[j][i] = lvl
            if lvl is DistanceLevel.LINK:
                labels[i][j] = labels[j][i] = _link_label(link)
                best_bw[i][j] = best_bw[j][i] = bw
    return DistanceMatrix(
        device_ids=ids,
        levels=tuple(tuple(r) for r in best),
        link_labels=tuple(tuple(r) for r in labels),
        pcie_levels=tuple(tuple(r) for r in pcie),
    )
