"""Merging the inventories of several backends on one host into one."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from datetime import UTC, datetime

from ..model import Host, HostInventory, NumaNode, Problem, SourceInfo, validate


def merge_inventories(inventories: Sequence[HostInventory], *, problems: Sequence[Problem] = ()) -> HostInventory:
    """Merge per-backend inventories of one host; device ids are vendor-qualified, so they compose.

    Every inventory's ``problems`` are kept, followed by ``problems`` (what failed outside
    any one inventory, such as a backend that could not be read).
    """
    now = datetime.now(UTC)
    if not inventories:
        return HostInventory(host=Host(hostname=socket.gethostname()), collected_at=now, problems=tuple(problems))
    if len(inventories) == 1:
        if not problems:
            return inventories[0]
        return validate(
            HostInventory,
            {**dict(inventories[0]), "problems": (*inventories[0].problems, *problems)},
            what="inventory",
        )
    first = inventories[0]
    numa: dict[int, NumaNode] = {}
    sources: list[SourceInfo] = []
    for inv in inventories:
        for node in inv.host.numa_nodes:
            numa.setdefault(node.id, node)
        sources.extend(inv.sources)
    host = first.host.model_copy(update={"numa_nodes": tuple(numa[k] for k in sorted(numa))})
    data = {
        "host": host,
        "devices": [d for inv in inventories for d in inv.devices],
        "partitions": [p for inv in inventories for p in inv.partitions],
        "partition_profiles": [p for inv in inventories for p in inv.partition_profiles],
        "links": [x for inv in inventories for x in inv.links],
        "domains": [x for inv in inventories for x in inv.domains],
        "processes": [x for inv in inventories for x in inv.processes],
        "collected_at": min(inv.collected_at for inv in inventories),
        "sources": sources,
        "problems": [*(x for inv in inventories for x in inv.problems), *problems],
    }
    return validate(HostInventory, data, what="merged inventory")
