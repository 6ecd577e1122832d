"""The carving planner: which partition serves a slice request, made on demand or reused.

When work asks for a slice (a partition profile, or memory plus a compute share), a device that
can be carved offers two kinds of option:

* **reuse** an idle live partition whose profile fits the slice, or
* **create** a partition of a fitting profile at one of its placements that no busy partition
  overlaps; idle partitions overlapping that placement are destroyed first.

Options are ranked by what stays possible afterwards, lexicographically (smaller is better):

1. ``touches_whole_device``: the device had no busy partition (a whole device would be cut);
2. ``layout_loss``: how much the weighted count of open placements drops, counted over the busy
   partitions only (idle ones can be reused or destroyed, so they do not close anything).  A
   placement of profile ``p`` weighs ``size(p)**2`` slots, so closing one large placement costs
   more than closing several small ones: the largest profiles stay placeable longest;
3. the number of idle partitions destroyed, then whether anything is created (reuse is free);
4. memory wasted (the profile's memory minus the slice's), then the start and the profile.

Across devices (:class:`CarvingPlanner`) the best option of each candidate device is compared by
the same key, ties going to the device listed first.  **When partitions are destroyed:** only
idle ones, and only as part of the chosen option, i.e. when the placement that best keeps the
device's layouts open overlaps them (this includes every case where a request larger than the
idle partitions needs their room).  A released partition stays as an idle partition; nothing is
destroyed on release.

``policy="first-fit"`` is the naive rule kept as a baseline: the first candidate device with any
option, an idle fitting partition on it if any, else the smallest fitting profile at its lowest
free start (destroying idle partitions there only when no free start is left).

Everything here is pure and deterministic over the abstract model (profiles, placements,
compute shares, instance counts); it never calls a vendor.  :meth:`CarvingPlanner.apply` returns
the :class:`CarveStep` list (destroy, then create) an actuator would run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from accel.model import Partition, PartitionProfile

from ._carve_catalog import Layout, SliceCatalog
from ._errors import InvalidRequestError, SchedulerStateError

__all__ = [
    "CarveAction",
    "CarvePlan",
    "CarveStep",
    "CarvingPlanner",
    "LiveSlice",
    "SliceNeed",
    "plan_device",
]

POLICIES = ("layouts", "first-fit")


class CarveAction(StrEnum):
    """What a plan does: take an idle partition as it is, or create one."""

    REUSE = "reuse"
    CREATE = "create"


@dataclass(frozen=True, slots=True)
class LiveSlice:
    """A live partition on a device: its profile, placement start and whether work holds it."""

    id: str
    profile: str
    start: int
    busy: bool = False


@dataclass(frozen=True, slots=True)
class SliceNeed:
    """What a request needs from one partition.

    Either ``profile`` (a profile name: any profile with at least its memory and compute share
    serves it) or ``memory_bytes`` and ``compute_ratio`` (0..1 of the device).
    """

    memory_bytes: int = 0
    compute_ratio: float = 0.0
    profile: str | None = None

    def __post_init__(self) -> None:
        if self.memory_bytes < 0 or not 0.0 <= self.compute_ratio <= 1.0:
            raise InvalidRequestError("a slice needs memory >= 0 and a compute share in [0, 1]",
                                      field="share")
        if self.profile is None and not (self.memory_bytes or self.compute_ratio):
            raise InvalidRequestError("a slice needs a profile, memory or a compute share", field="share")

    def resolve(self, catalog: SliceCatalog) -> tuple[int, float] | None:
        """(memory, compute) this need asks of ``catalog``'s device; ``None`` if it names a
        profile the catalog does not have."""
        if self.profile is None:
            return self.memory_bytes, self.compute_ratio
        if self.profile not in catalog:
            return None
        p = catalog.profiles[catalog.index(self.profile)]
        return max(p.memory_bytes, self.memory_bytes), max(p.compute_ratio, self.compute_ratio)


@dataclass(frozen=True, slots=True)
class CarvePlan:
    """One option on one device, with the numbers it was ranked by (see the module docstring)."""

    device: str
    action: CarveAction
    profile: str
    start: int
    size: int
    partition_id: str | None
    destroy: tuple[str, ...]
    touches_whole_device: bool
    layout_loss: float
    largest_open_after: str | None
    waste_bytes: int
    key: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class CarveStep:
    """One actuation an applied plan asks for: ``destroy`` or ``create`` of ``partition_id``."""

    kind: str
    device: str
    partition_id: str
    profile: str
    start: int


@dataclass(frozen=True, slots=True)
class _Option:
    action: CarveAction
    k: int
    start: int
    reuse: int  # index into the sorted live tuple, -1 for a create
    destroy: tuple[int, ...]
    touches: bool
    loss: float
    largest: int
    waste: int
    key: tuple[float, ...]


def _layout(catalog: SliceCatalog, live: Sequence[LiveSlice], busy_only: bool) -> Layout:
    return tuple(sorted((catalog.index(s.profile), s.start) for s in live if s.busy or not busy_only))


def _options(catalog: SliceCatalog, live: tuple[LiveSlice, ...], mem: int, comp: float,
             create: bool, destroy: bool) -> list[_Option]:
    busy = _layout(catalog, live, True)
    touches = not busy
    before = catalog.value(busy)
    out: list[_Option] = []
    fitting = [k for k, p in enumerate(catalog.profiles) if p.fits(mem, comp)]
    occupied = [(catalog.index(s.profile), s.start) for s in live]

    def add(action: CarveAction, k: int, start: int, reuse: int, gone: tuple[int, ...]) -> None:
        after = tuple(sorted((*busy, (k, start))))
        loss = before - catalog.value(after)
        waste = catalog.profiles[k].memory_bytes - mem
        key = (float(touches), loss, float(len(gone)), float(action is CarveAction.CREATE), float(waste),
               float(start), float(k))
        out.append(_Option(action, k, start, reuse, gone, touches, loss, catalog.largest_open(after), waste, key))

    for i, s in enumerate(live):
        k = catalog.index(s.profile)
        if not s.busy and k in fitting:
            add(CarveAction.REUSE, k, s.start, i, ())
    if not create:
        return out
    for k in fitting:
        prof = catalog.profiles[k]
        for start, size in prof.placements:
            over = tuple(i for i, s in enumerate(live)
                         if start < s.start + catalog.profiles[catalog.index(s.profile)].size
                         and s.start < start + size)
            if any(live[i].busy for i in over):
                continue
            if any(catalog.index(live[i].profile) == k and live[i].start == start for i in over):
                continue  # that is the reuse option
            if over and not destroy:
                continue
            rest = [occupied[i] for i in range(len(live)) if i not in over]
            if catalog.can_add(rest, k, start):
                add(CarveAction.CREATE, k, start, -1, over)
    return out


def _first_fit(catalog: SliceCatalog, live: tuple[LiveSlice, ...], mem: int, comp: float,
               create: bool, destroy: bool) -> _Option | None:
    opts = _options(catalog, live, mem, comp, create, destroy)
    if not opts:
        return None
    reuse = [o for o in opts if o.action is CarveAction.REUSE]
    if reuse:
        return min(reuse, key=lambda o: (o.k, o.start))
    keep = [o for o in opts if not o.destroy] or opts
    return min(keep, key=lambda o: (o.k, o.start, len(o.destroy)))


def _plan(device: str, catalog: SliceCatalog, live: tuple[LiveSlice, ...], opt: _Option, mem: int) -> CarvePlan:
    prof = catalog.profiles[opt.k]
    largest = catalog.profiles[opt.largest].name if opt.largest >= 0 else None
    return CarvePlan(device, opt.action, prof.name, opt.start, prof.size,
                     live[opt.reuse].id if opt.reuse >= 0 else None,
                     tuple(live[i].id for i in opt.destroy), opt.touches, opt.loss, largest,
                     prof.memory_bytes - mem, opt.key)


def plan_device(catalog: SliceCatalog, live: Iterable[LiveSlice], need: SliceNeed, *, device: str = "",
                create: bool = True, destroy: bool = True) -> tuple[CarvePlan, ...]:
    """Every option for ``need`` on one device, best first (see the module docstring).

    ``live`` are the device's partitions; ``create=False`` only reuses idle partitions (a static
    layout), ``destroy=False`` never removes an idle one.  Empty when nothing fits.  A live
    partition that breaks the catalog's rules raises :class:`InvalidRequestError`.
    """
    items = tuple(sorted(live, key=lambda s: (s.start, s.profile, s.id)))
    catalog.check(_layout(catalog, items, False))
    got = need.resolve(catalog)
    if got is None:
        return ()
    mem, comp = got
    opts = sorted(_options(catalog, items, mem, comp, create, destroy), key=lambda o: o.key)
    return tuple(_plan(device, catalog, items, o, mem) for o in opts)


class CarvingPlanner:
    """Live partitions of many devices and the carving decisions over them.

    ``catalogs`` maps a device id to its :class:`SliceCatalog` (devices of one model may share
    one object; its caches then serve them all).  The order of ``catalogs`` is the tie-break
    order.  ``create`` / ``destroy`` switch actuation (``create=False`` is a static layout:
    partitions come from :meth:`add` only); ``policy`` is ``"layouts"`` (the ranking of the module
    docstring) or ``"first-fit"`` (the naive baseline).
    """

    def __init__(self, catalogs: Mapping[str, SliceCatalog], *, create: bool = True, destroy: bool = True,
                 policy: str = "layouts") -> None:
        if policy not in POLICIES:
            raise InvalidRequestError(f"carving policy must be one of {POLICIES}, got {policy!r}",
                                      field="policy")
        self.catalogs = dict(catalogs)
        self.create, self.destroy, self.policy = create, destroy, policy
        self._live: dict[str, dict[str, LiveSlice]] = {d: {} for d in self.catalogs}
        self._where: dict[str, str] = {}
        self._sorted: dict[str, tuple[LiveSlice, ...]] = {d: () for d in self.catalogs}
        self._memo: dict[tuple[int, int, int, float], _Option | None] = {}
        self._sig_ids: dict[tuple[tuple[str, int, bool], ...], int] = {(): 0}
        self._sig: dict[str, int] = dict.fromkeys(self.catalogs, 0)
        self._made = 0
        self.created = 0
        self.destroyed = 0

    @classmethod
    def from_model(cls, profiles: Iterable[PartitionProfile], partitions: Iterable[Partition] = (), *,
                   busy: Iterable[str] = (), **options: object) -> CarvingPlanner:
        """A planner from a backend's ``partition_profiles()`` and ``partitions()``.

        Devices whose profiles all have placements become carvable; ``busy`` names the partition
        ids work holds now.  Devices of equal profile lists share one catalog.  ``options`` are
        the constructor's keywords.
        """
        by_parent: dict[str, list[PartitionProfile]] = {}
        for p in profiles:
            by_parent.setdefault(p.parent_id, []).append(p)
        shared: dict[tuple[object, ...], SliceCatalog] = {}
        catalogs: dict[str, SliceCatalog] = {}
        for parent, profs in by_parent.items():
            if not profs or not all(p.placements for p in profs):
                continue
            sig = tuple((p.name, p.memory_bytes, p.compute_ratio, p.max_instances,
                         tuple((pl.start, pl.size) for pl in p.placements)) for p in profs)
            cat = shared.get(sig)
            if cat is None:
                cat = shared[sig] = SliceCatalog.from_profiles(profs)
            catalogs[parent] = cat
        planner = cls(catalogs, **options)  # type: ignore[arg-type]
        held = set(busy)
        for part in partitions:
            if part.parent_id in catalogs:
                if part.placement is None:
                    raise InvalidRequestError(f"partition {part.id} has no placement", field="placement")
                planner.add(part.parent_id, part.profile, part.placement.start, id=part.id,
                            busy=part.id in held)
        return planner

    # -- the live picture ----------------------------------------------------------------------
    def add(self, device: str, profile: str, start: int, *, id: str | None = None, busy: bool = False) -> str:
        """Record an existing partition (from an inventory or a static layout); returns its id."""
        cat = self._catalog(device)
        pid = id if id is not None else self._new_id(device, profile, start)
        if pid in self._where:
            raise SchedulerStateError(f"partition {pid} is already recorded")
        items = [(cat.index(s.profile), s.start) for s in self._live[device].values()]
        if not cat.can_add(items, cat.index(profile), start):
            raise SchedulerStateError(f"{profile} at {start} does not fit on {device} next to "
                                      f"{sorted((s.profile, s.start) for s in self._live[device].values())}")
        self._put(device, LiveSlice(pid, profile, start, busy))
        return pid

    def live(self, device: str) -> tuple[LiveSlice, ...]:
        """The device's live partitions, by start."""
        self._catalog(device)
        return self._sorted[device]

    def whole_devices(self) -> int:
        """Devices with no busy partition (they can still become one whole partition)."""
        return sum(1 for d in self.catalogs if not any(s.busy for s in self._live[d].values()))

    def carvable(self, device: str) -> bool:
        """Whether the planner knows ``device``."""
        return device in self.catalogs

    # -- decisions -----------------------------------------------------------------------------
    def plan(self, need: SliceNeed, devices: Iterable[str] | None = None) -> CarvePlan | None:
        """The best option for ``need`` over ``devices`` (default: all, in the planner's order);
        ties go to the device listed first."""
        best: tuple[tuple[float, ...], int, str, _Option, int] | None = None
        resolved: dict[int, tuple[int, float] | None] = {}
        seen: set[tuple[int, int]] = set()
        for pos, dev in enumerate(self.catalogs if devices is None else devices):
            cat = self._catalog(dev)
            shape = (id(cat), self._sig[dev])
            if shape in seen:
                continue  # same catalog and live layout as a device listed earlier: same options
            seen.add(shape)
            if shape[0] not in resolved:
                resolved[shape[0]] = need.resolve(cat)
            got = resolved[shape[0]]
            if got is None:
                continue
            opt = self._best(shape, cat, self._sorted[dev], got[0], got[1])
            if opt is None:
                continue
            if self.policy == "first-fit":
                return _plan(dev, cat, self._sorted[dev], opt, got[0])
            if best is None or (opt.key, pos) < best[:2]:
                best = (opt.key, pos, dev, opt, got[0])
        if best is None:
            return None
        dev, opt = best[2], best[3]
        return _plan(dev, self.catalogs[dev], self._sorted[dev], opt, best[4])

    def _best(self, shape: tuple[int, int], cat: SliceCatalog, live: tuple[LiveSlice, ...], mem: int,
              comp: float) -> _Option | None:
        memo_key = (*shape, mem, comp)
        if memo_key in self._memo:
            return self._memo[memo_key]
        if self.policy == "first-fit":
            opt = _first_fit(cat, live, mem, comp, self.create, self.destroy)
        else:
            opts = _options(cat, live, mem, comp, self.create, self.destroy)
            opt = min(opts, key=lambda o: o.key) if opts else None
        if len(self._memo) > 100_000:
            self._memo.clear()
        self._memo[memo_key] = opt
        return opt

    def apply(self, plan: CarvePlan) -> tuple[str, tuple[CarveStep, ...]]:
        """Carry out ``plan`` in the live picture: the partition id work now holds and the steps
        (destroys, then the create) an actuator must run.  A stale plan raises
        :class:`SchedulerStateError` and changes nothing."""
        live = self._live.get(plan.device)
        if live is None:
            raise SchedulerStateError(f"device {plan.device} is not carvable")
        for pid in plan.destroy:
            s = live.get(pid)
            if s is None or s.busy:
                raise SchedulerStateError(f"plan destroys {pid}, which is not an idle partition of {plan.device}")
        if plan.action is CarveAction.REUSE:
            assert plan.partition_id is not None
            s = live.get(plan.partition_id)
            if s is None or s.busy:
                raise SchedulerStateError(f"plan reuses {plan.partition_id}, which is not idle on {plan.device}")
            self._put(plan.device, LiveSlice(s.id, s.profile, s.start, True))
            return s.id, ()
        cat = self.catalogs[plan.device]
        rest = [(cat.index(s.profile), s.start) for pid, s in live.items() if pid not in plan.destroy]
        if not cat.can_add(rest, cat.index(plan.profile), plan.start):
            raise SchedulerStateError(f"{plan.profile} at {plan.start} no longer fits on {plan.device}")
        steps = []
        for pid in plan.destroy:
            s = live[pid]
            steps.append(CarveStep("destroy", plan.device, pid, s.profile, s.start))
            self._drop(plan.device, pid)
            self.destroyed += 1
        pid = self._new_id(plan.device, plan.profile, plan.start)
        self._put(plan.device, LiveSlice(pid, plan.profile, plan.start, True))
        self.created += 1
        steps.append(CarveStep("create", plan.device, pid, plan.profile, plan.start))
        return pid, tuple(steps)

    def release(self, partition_id: str) -> None:
        """Work left ``partition_id``: it stays, idle (reusable, or destroyed when room is needed)."""
        dev = self._where.get(partition_id)
        if dev is None:
            raise SchedulerStateError(f"partition {partition_id} is not known")
        s = self._live[dev][partition_id]
        if not s.busy:
            raise SchedulerStateError(f"partition {partition_id} is not busy")
        self._put(dev, LiveSlice(s.id, s.profile, s.start, False))

    # -- internals -----------------------------------------------------------------------------
    def _catalog(self, device: str) -> SliceCatalog:
        cat = self.catalogs.get(device)
        if cat is None:
            raise InvalidRequestError(f"device {device} has no carving catalog", field="device")
        return cat

    def _new_id(self, device: str, profile: str, start: int) -> str:
        self._made += 1
        return f"{device}/{profile}@{start}#{self._made}"

    def _put(self, device: str, s: LiveSlice) -> None:
        self._live[device][s.id] = s
        self._where[s.id] = device
        self._resort(device)

    def _drop(self, device: str, pid: str) -> None:
        del self._live[device][pid]
        del self._where[pid]
        self._resort(device)

    def _resort(self, device: str) -> None:
        """Keep the device's sorted live tuple and its interned layout signature current."""
        items = tuple(sorted(self._live[device].values(), key=lambda x: (x.start, x.profile, x.id)))
        self._sorted[device] = items
        sig = tuple((x.profile, x.start, x.busy) for x in items)
        self._sig[device] = self._sig_ids.setdefault(sig, len(self._sig_ids))
