"""A model of the Kubernetes DRA allocator's rules over published ResourceSlices, for tests.

No API server or scheduler runs in accel's tests; this model is what they check a publication
against (``tests/core/test_dra_safety.py``, ``tests/k8s_kubelet/test_dynamic_allocator.py``,
``benchmarks/partitions/kubelet_chain.py``).  The rules, from resource.k8s.io/v1 (kubernetes/api
``resource/v1/types.go``): within one pool a device is allocated at most once, and the devices
allocated together never consume more of a shared counter than its counter set holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DraPoolModel"]


class DraPoolModel:
    """One driver's pool as the allocator sees it (its slices' counter sets and devices).

    A pool that defines a counter or a device twice, or a device that consumes a counter no set
    defines, is malformed: :class:`ValueError` naming it (the API server would refuse it).
    """

    def __init__(self, slices: Iterable[Mapping[str, Any]]) -> None:
        self.capacity: dict[tuple[str, str], int] = {}
        self.devices: dict[str, Mapping[str, Any]] = {}
        for s in slices:
            spec = s["spec"]
            for cset in spec.get("sharedCounters", []):
                for counter, q in cset["counters"].items():
                    key = (cset["name"], counter)
                    if key in self.capacity:
                        raise ValueError(f"counter {key} defined twice in the pool")
                    self.capacity[key] = int(q["value"])
            for dev in spec.get("devices", []):
                if dev["name"] in self.devices:
                    raise ValueError(f"device {dev['name']!r} published twice in the pool")
                self.devices[dev["name"]] = dev
        for name in self.devices:
            self.demand(name)  # every consumed counter is defined

    def demand(self, name: str) -> dict[tuple[str, str], int]:
        """What allocating device ``name`` consumes, per (counter set, counter)."""
        out: dict[tuple[str, str], int] = {}
        for use in self.devices[name].get("consumesCounters", []):
            for counter, q in use["counters"].items():
                key = (use["counterSet"], counter)
                if key not in self.capacity:
                    raise ValueError(f"{name} consumes {key}, which no counter set defines")
                out[key] = out.get(key, 0) + int(q["value"])
        return out

    def fits(self, chosen: Iterable[str]) -> bool:
        """Whether the allocator may hand out ``chosen`` together: each device once, published,
        and no counter overdrawn."""
        names = list(chosen)
        if len(set(names)) != len(names) or any(n not in self.devices for n in names):
            return False
        used: dict[tuple[str, str], int] = {}
        for name in names:
            for key, n in self.demand(name).items():
                used[key] = used.get(key, 0) + n
        return all(n <= self.capacity[key] for key, n in used.items())

    def groups(self) -> list[list[str]]:
        """Devices linked by a shared counter set (one list per set), then the others one by one."""
        by_set: dict[str, list[str]] = {}
        alone: list[list[str]] = []
        for name, dev in self.devices.items():
            sets = {u["counterSet"] for u in dev.get("consumesCounters", [])}
            if len(sets) > 1:
                raise ValueError(f"{name} consumes counters of {len(sets)} sets; accel publishes one per device")
            if sets:
                by_set.setdefault(sets.pop(), []).append(name)
            else:
                alone.append([name])
        return list(by_set.values()) + alone
