"""What one device can be carved into, as the carving planner reads it.

A :class:`SliceCatalog` is built from the :class:`accel.model.PartitionProfile` values a backend
reports for one parent device (``Backend.partition_profiles()``): each profile's memory, compute
share, instance limit and *placements* (``start``, ``size`` in the parent's slots).  The rules it
enforces are the abstract model's, for every vendor alike:

* an instance takes exactly one of its profile's placements;
* no two instances' placements overlap;
* the compute shares of all instances add up to at most 1;
* at most ``max_instances`` instances of a profile.

Catalogs whose profiles have no placements (templates sized by resources only, or device-wide
modes) are refused with :class:`~accel.scheduler.InvalidRequestError`: placement-aware carving
needs placements.  Layout values are cached per catalog (a catalog is immutable).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from accel.model import PartitionProfile

from ._errors import InvalidRequestError

__all__ = ["Layout", "SliceCatalog", "SliceProfile"]

#: a layout: instances as (profile index in the catalog, placement start), sorted
Layout = tuple[tuple[int, int], ...]

_EPS = 1e-6


@dataclass(frozen=True, slots=True)
class SliceProfile:
    """One profile of a catalog: ``placements`` are ``(start, size)`` pairs in the parent's slots."""

    name: str
    memory_bytes: int
    compute_ratio: float
    placements: tuple[tuple[int, int], ...]
    max_instances: int | None = None

    @property
    def size(self) -> int:
        """Slots one instance takes (the largest placement size; MIG sizes are uniform per profile)."""
        return max((s for _, s in self.placements), default=0)

    def fits(self, memory_bytes: int, compute_ratio: float) -> bool:
        """Whether an instance of this profile can serve a slice of that memory and compute."""
        return self.memory_bytes >= memory_bytes and self.compute_ratio + _EPS >= compute_ratio


@dataclass(eq=False)
class SliceCatalog:
    """The profiles of one device model, smallest first, with the layout rules above.

    Build it with :meth:`from_profiles`.  ``weight(p)`` (the square of a profile's size in slots)
    is how much the planner values keeping one placement of ``p`` open: larger profiles count
    more than the small ones they could be cut into.
    """

    profiles: tuple[SliceProfile, ...]
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _values: dict[Layout, float] = field(default_factory=dict, repr=False)
    _largest: dict[Layout, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.profiles:
            raise InvalidRequestError("a slice catalog needs at least one profile", field="profiles")
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise InvalidRequestError(f"slice catalog has duplicate profile names: {names}", field="profiles")
        for p in self.profiles:
            if not p.placements:
                raise InvalidRequestError(
                    f"profile {p.name!r} has no placements; placement-aware carving needs them",
                    field="placements")
            if p.memory_bytes < 0 or not 0 < p.compute_ratio <= 1 + _EPS:
                raise InvalidRequestError(f"profile {p.name!r}: memory must be >= 0 and compute "
                                          "share in (0, 1]", field="profiles")
        self._index = {p.name: i for i, p in enumerate(self.profiles)}

    @classmethod
    def from_profiles(cls, profiles: Iterable[PartitionProfile]) -> SliceCatalog:
        """The catalog of one parent device from its model profiles (all must share ``parent_id``).

        Each profile needs ``memory_bytes``, ``placements`` and ``compute_ratio`` (when that is
        missing, ``compute_units`` over the largest profile's, the whole device, stands in); a
        missing one raises :class:`InvalidRequestError` naming the profile and the field.
        """
        items = list(profiles)
        parents = {p.parent_id for p in items}
        if len(parents) > 1:
            raise InvalidRequestError(f"profiles of several parents given: {sorted(parents)}",
                                      field="parent_id")
        units = [p.compute_units for p in items]
        most = max((u for u in units if u), default=0)
        out = []
        for p in items:
            if p.memory_bytes is None:
                raise InvalidRequestError(f"profile {p.name!r} has no memory_bytes", field="memory_bytes")
            ratio = p.compute_ratio
            if ratio is None and p.compute_units and most:
                ratio = p.compute_units / most  # the catalog's largest profile is the whole device
            if ratio is None:
                raise InvalidRequestError(f"profile {p.name!r} has no compute_ratio (nor compute_units)",
                                          field="compute_ratio")
            out.append(SliceProfile(p.name, int(p.memory_bytes), float(ratio),
                                    tuple((pl.start, pl.size) for pl in p.placements), p.max_instances))
        out.sort(key=lambda s: (s.memory_bytes, s.compute_ratio, s.size, s.name))
        return cls(tuple(out))

    # -- lookups ---------------------------------------------------------------------------------
    def index(self, name: str) -> int:
        """Position of profile ``name``; unknown names raise :class:`InvalidRequestError`."""
        try:
            return self._index[name]
        except KeyError:
            raise InvalidRequestError(f"profile {name!r} is not in this device's catalog "
                                      f"({', '.join(self._index)})", field="partition") from None

    def __contains__(self, name: object) -> bool:
        return name in self._index

    @property
    def slots(self) -> int:
        """Slots of the parent (the end of the furthest placement)."""
        return max(s + z for p in self.profiles for s, z in p.placements)

    def weight(self, k: int) -> float:
        """Value of one open placement of profile ``k`` (its size in slots, squared)."""
        return float(self.profiles[k].size ** 2)

    # -- rules -----------------------------------------------------------------------------------
    def can_add(self, layout: Sequence[tuple[int, int]], k: int, start: int) -> bool:
        """Whether profile ``k`` may start at ``start`` next to the instances of ``layout``."""
        prof = self.profiles[k]
        size = next((z for s, z in prof.placements if s == start), None)
        if size is None:
            return False
        compute = prof.compute_ratio
        same = 0
        for j, s in layout:
            other = self.profiles[j]
            z = next(zz for ss, zz in other.placements if ss == s)
            if start < s + z and s < start + size:
                return False
            compute += other.compute_ratio
            same += j == k
        if compute > 1 + _EPS:
            return False
        return prof.max_instances is None or same < prof.max_instances

    def check(self, layout: Sequence[tuple[int, int]]) -> None:
        """Raise :class:`InvalidRequestError` unless ``layout`` obeys every rule."""
        built: list[tuple[int, int]] = []
        for k, s in layout:
            if not 0 <= k < len(self.profiles):
                raise InvalidRequestError(f"no profile at index {k}", field="layout")
            if not self.can_add(built, k, s):
                raise InvalidRequestError(
                    f"{self.profiles[k].name} at {s} does not fit next to "
                    f"{[(self.profiles[j].name, t) for j, t in built]}", field="layout")
            built.append((k, s))

    def value(self, layout: Layout) -> float:
        """Weighted count of the placements still open next to ``layout`` (cached)."""
        got = self._values.get(layout)
        if got is None:
            got = sum(self.weight(k) for k, p in enumerate(self.profiles) for s, _ in p.placements
                      if self.can_add(layout, k, s))
            self._values[layout] = got
        return got

    def largest_open(self, layout: Layout) -> int:
        """Index of the largest profile (by slots, then compute) still placeable; -1 if none."""
        got = self._largest.get(layout)
        if got is None:
            got = -1
            best: tuple[int, float] = (-1, -1.0)
            for k, p in enumerate(self.profiles):
                key = (p.size, p.compute_ratio)
                if key > best and any(self.can_add(layout, k, s) for s, _ in p.placements):
                    best, got = key, k
            self._largest[layout] = got
        return got

    def full_layouts(self) -> tuple[Layout, ...]:
        """Every maximal layout (no further instance fits), each once, in a fixed order.

        These are the static layouts an administrator could carve in advance."""
        seen: set[Layout] = set()
        out: list[Layout] = []
        options = [(k, s) for k, p in enumerate(self.profiles) for s, _ in p.placements]

        def grow(layout: list[tuple[int, int]], first: int) -> None:
            extended = False
            for i in range(len(options)):
                k, s = options[i]
                if self.can_add(layout, k, s):
                    extended = True
                    if i >= first:
                        grow([*layout, (k, s)], i + 1)
            if not extended:
                key = tuple(sorted(layout, key=lambda x: (x[1], x[0])))
                if key not in seen:
                    seen.add(key)
                    out.append(key)

        grow([], 0)
        return tuple(out)

