"""``topo -m`` matrices as typed links and link domains."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from accel.model import (
    FAST_LINKS,
    Device,
    Domain,
    DomainKind,
    Link,
    LinkState,
    LinkType,
)

from ._matrix import Matrix, read_matrix
from ._text import ParseContext
from ._tool import Collection

__all__ = ["PCIE_CODES", "link_domains", "matrix_links", "topo_links"]


def matrix_links(
    matrix: Matrix,
    ids: Mapping[str, str],
    codes: Mapping[str, LinkType],
    *,
    domain_kind: DomainKind | None = None,
    domain_prefix: str = "link",
    count_of: Callable[[str], int] | None = None,
) -> tuple[list[Link], list[Domain]]:
    """Links and domains from a ``topo -m`` matrix read with :func:`~accel.toolkit.read_matrix`.

    ``ids`` maps row/column labels (``GPU0``) to device ids; labels it lacks (``NIC0``, a device
    the inventory dropped) are skipped.  ``codes`` maps cell codes (``MX``, ``XL``, ``SYS``) to
    link types; other codes (``X``, anything unknown) give no link.  Each connected group of
    devices joined by a fast link (:data:`accel.model.FAST_LINKS`) becomes a :class:`Domain` of
    ``domain_kind`` (when given) with at least two members.  ``count_of(code)`` is the number
    of links a cell code stands for (cnmon's ``MLK2``); one when not given.
    """
    links: dict[frozenset[str], Link] = {}
    for (row, col), code in matrix.codes.items():
        a, b = ids.get(row), ids.get(col)
        if a is None or b is None or a == b or code not in codes:
            continue
        pair = frozenset((a, b))
        if pair not in links:
            first, second = sorted(pair)
            links[pair] = Link(a=first, b=second, type=codes[code], count=count_of(code) if count_of else 1)
    ordered = sorted(links.values(), key=lambda lk: (lk.a, lk.b))
    fast = [lk for lk in ordered if lk.type in FAST_LINKS]
    domains = link_domains(fast, domain_kind, prefix=domain_prefix, order=list(ids.values())) if domain_kind else []
    return ordered, domains


def link_domains(
    links: Iterable[Link], kind: DomainKind, *, prefix: str = "link", order: Sequence[str] = ()
) -> list[Domain]:
    """Each connected group (two or more members) of the links that are not down, as a domain.

    Members are listed in ``order`` (the inventory's device order) where given; domain ids are
    ``<prefix>-<n>`` numbered by their first member.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for link in links:
        if link.state is LinkState.DOWN:
            continue
        parent[find(link.a)] = find(link.b)
    groups: dict[str, list[str]] = {}
    for member in list(parent):
        groups.setdefault(find(member), []).append(member)
    rank = {d: i for i, d in enumerate(order)}
    ordered = sorted(
        (sorted(m, key=lambda d: (rank.get(d, len(rank)), d)) for m in groups.values() if len(m) > 1),
        key=lambda m: (rank.get(m[0], len(rank)), m[0]),
    )
    return [Domain(id=f"{prefix}-{n}", kind=kind, members=tuple(m)) for n, m in enumerate(ordered)]


#: nvidia-smi ``topo -m`` PCIe/NUMA codes as explicit links (a replay has no sysfs to derive them).
PCIE_CODES: Mapping[str, LinkType] = {
    "PIX": LinkType.PCIE_PIX,
    "PXB": LinkType.PCIE_PXB,
    "PHB": LinkType.PCIE_PHB,
    "NODE": LinkType.NUMA,
    "SYS": LinkType.SYSTEM,
}


def topo_links(
    col: Collection,
    devices: Iterable[Device],
    *,
    label: str,
    fast: Mapping[str, LinkType],
    domain_kind: DomainKind | None = None,
    prefix: str = "link",
    args: Sequence[str] = ("topo", "-m"),
) -> tuple[list[Link], list[Domain]]:
    """Run ``<tool> topo -m`` (optional) and turn its matrix into links and domains.

    Cells may hold ``X``, the PCIe/NUMA codes of :data:`PCIE_CODES` or a vendor's ``fast``
    codes (``MX``, ``XL``); rows and columns are ``<label><index>``.  An unreadable matrix is
    a problem of the snapshot, not a failure: the devices stand without it.
    """
    codes = {**PCIE_CODES, **fast}
    valid = re.compile("|".join(["X", *(re.escape(c) for c in codes)]))
    header = rf"^\s+{re.escape(label)}0(\s|$)"
    tool = col.session.tool
    matrix = col.extra(
        lambda text, cmd: read_matrix(text, ParseContext(tool, cmd), header=header, valid_code=valid), *args
    )
    if matrix is None:
        return [], []
    ids = {f"{label}{d.index}": d.id for d in devices if d.index is not None}
    return matrix_links(matrix, ids, codes, domain_kind=domain_kind, domain_prefix=prefix)
