"""Two read paths of one host compared: what they both see must agree.

:func:`compare_paths` takes the inventory a plugin's CLI path built and the one its native path
built from the same scenario and returns a :class:`PathComparison`:

* ``differences``: a value both paths see and disagree on (a device one path lists and the
  other does not, a different memory total, a different health state, a link only one path
  has while both read links at all);
* ``one_sided``: per compared field, which path alone saw a value (``{"memory.used_bytes":
  {"native"}}``): a gap of the other path, which a plugin documents.

Compared per device (matched by id): ``index``, ``pci.bus_id``, ``uuid``, ``board_id``,
``memory.total_bytes`` and ``memory.used_bytes`` of the first region, ``health`` (its derived
state, when neither path says ``unknown``); per inventory the set of links ``(a, b, type)``
when both paths report links.  A differential test asserts ``differences == []`` and that every
one-sided field is in the vendor's documented gap table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from accel.model import Device, HealthState, HostInventory

__all__ = ["COMPARED_FIELDS", "PathComparison", "compare_paths"]


def _memory(attr: str) -> Callable[[Device], Any]:
    def get(d: Device) -> Any:
        return getattr(d.memory[0], attr) if d.memory else None

    return get


def _health(d: Device) -> Any:
    state = d.health.state
    return None if state == HealthState.UNKNOWN else str(state)


#: The device fields compared, by the name a report uses.
COMPARED_FIELDS: Final[Mapping[str, Callable[[Device], Any]]] = {
    "index": lambda d: d.index,
    "pci.bus_id": lambda d: d.pci.bus_id if d.pci is not None else None,
    "uuid": lambda d: d.uuid,
    "board_id": lambda d: d.board_id,
    "memory.total_bytes": _memory("total_bytes"),
    "memory.used_bytes": _memory("used_bytes"),
    "health": _health,
}


@dataclass
class PathComparison:
    """See the module docstring."""

    differences: list[str] = field(default_factory=list)
    one_sided: dict[str, set[str]] = field(default_factory=dict)

    def undocumented(self, gaps: Mapping[str, object]) -> dict[str, set[str]]:
        """The one-sided fields ``gaps`` (field -> why) does not name."""
        return {k: v for k, v in self.one_sided.items() if k not in gaps}


def compare_paths(cli: HostInventory, native: HostInventory) -> PathComparison:
    """Compare the CLI path's and the native path's inventories of one host."""
    out = PathComparison()
    a = {d.id: d for d in cli.devices}
    b = {d.id: d for d in native.devices}
    for dev_id in sorted(a.keys() - b.keys()):
        out.differences.append(f"{dev_id}: listed by the CLI path only")
    for dev_id in sorted(b.keys() - a.keys()):
        out.differences.append(f"{dev_id}: listed by the native path only")
    for dev_id in [d.id for d in cli.devices if d.id in b]:
        for name, get in COMPARED_FIELDS.items():
            x, y = get(a[dev_id]), get(b[dev_id])
            if x is not None and y is not None:
                if x != y:
                    out.differences.append(f"{dev_id}: {name} is {x!r} by the CLI path, {y!r} by the native path")
            elif x is not None:
                out.one_sided.setdefault(name, set()).add("cli")
            elif y is not None:
                out.one_sided.setdefault(name, set()).add("native")
    la = {(*sorted((link.a, link.b)), str(link.type)) for link in cli.links}
    lb = {(*sorted((link.a, link.b)), str(link.type)) for link in native.links}
    if la and lb:
        for link in sorted(la - lb):
            out.differences.append(f"link {link}: reported by the CLI path only")
        for link in sorted(lb - la):
            out.differences.append(f"link {link}: reported by the native path only")
    elif la or lb:
        out.one_sided.setdefault("links", set()).add("cli" if la else "native")
    return out
