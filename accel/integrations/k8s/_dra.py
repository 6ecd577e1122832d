"""Project a :class:`~accel.model.HostInventory` onto Kubernetes DRA ResourceSlices.

The output is plain ``resource.k8s.io/v1`` ``ResourceSlice`` objects (dicts ready for
``kubectl apply`` or a client), one pool per node and driver, within DRA's hard limits: at most
128 devices per slice (64 when devices carry taints or consume counters), at most 32 attributes and capacities per
device, DNS-label device names, C-identifier attribute names of at most 32 characters and
string values of at most 64.  Anything that does not fit is not silently dropped: it is listed
in :attr:`DraProjection.omitted` per device.

Safe publication.  The same silicon must never be allocatable twice.  By default (no feature
gate needed) each device is published as *either* itself *or* its partitions, following its
current partition mode: MIG on, or AMD compute partitioning other than SPX, or any live
partition means only the partitions are published (the parent is listed in
:attr:`DraProjection.withheld`).  With ``partitionable=True`` partitioned devices are published
together with their partitions, and every one of them consumes counters from a per-parent counter
set (``spec.sharedCounters`` in its own slice, ``consumesCounters`` on each device): one
``slot-N`` counter of 1 per placement slot (MIG memory slice, AMD XCP index), plus ``memory``
(bytes) and ``compute-units``.  The parent consumes every slot, a partition its own, so the
allocator can never hand out a parent and one of its partitions at once.  That mode needs the
DRAPartitionableDevices feature gate (beta, on by default, since Kubernetes 1.36): where it is
off the API server drops the counter fields silently and the publication would be unsafe, so it
is never the default.  Taints need DRADeviceTaints and ``allowMultipleAllocations`` needs
DRAConsumableCapacity; where those gates are off the API server drops them (a dropped taint
leaves a faulty device allocatable; a dropped ``allowMultipleAllocations`` only makes a device
exclusive).

Dynamic partitions (``dynamic=True``; what ``accel k8s kubelet-plugin --dynamic-partitions``
publishes, as NVIDIA's DynamicMIG does).  A device in MIG mode whose profiles list placements is
published as every placement of every profile (``gpu-0000-07-00-0-3g40gb-4``: profile ``3g.40gb``
at memory slice 4), each consuming from the device's counter set one ``slot-N`` per memory slice
it covers and its ``compute-slices`` (``N`` of ``Ng``; 7 in all); the allocator can then never
hand out two placements that overlap or that together need more than the device has.  The
partition is made when a claim naming the placement is prepared.  A live partition that
``owned`` does not name (carved by hand, or by another tool) is published as itself at its
placement, with the placements it overlaps left out and its compute slices taken off the
capacity; one ``owned`` names (made for a claim) changes nothing, as its placement is already
the claim's.  The whole device is not published: a MIG-mode GPU runs no work outside its
instances, and the full-size profile (``7g.80gb``) is one placement like the others.  Counter
layout after NVIDIA's ``k8s-dra-driver-gpu`` (``cmd/gpu-kubelet-plugin/partitions.go`` at
1b84773cb7a27cf93af3e219073ded2be84212c5: one counter set per GPU, one counter per memory slice,
the partition consuming the slices of its placement).

Attributes (under ``domain``, default ``accel.dev``): ``id``, ``vendor``, ``kind``, ``type``
(``device`` | ``partition``), ``model``, ``family``, ``architecture``, ``uuid``, ``serial``,
``parentUUID``, ``partitionProfile``, ``computeCapability`` and ``driverVersion`` (semantic
versions when they parse as one), ``health``, ``linkDomain``, ``linkDomainSize``, ``linkType``;
``numaNode``; the standard ``resource.kubernetes.io/pciBusID`` and ``pcieRoot`` (the only two
names upstream standardises, ``k8s.io/dynamic-resource-allocation/deviceattribute``); vendor
extras (``huawei.com/chipName``) under the driver's own name (``huawei.accel.dev/chipName``), a
domain accel owns, never the vendor's.  Capacities: ``memory`` (bytes) and ``computeUnits``.  Health
conditions of severity error and above become ``NoSchedule`` taints keyed
``<domain>/<reason-in-kebab-case>``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError
from ...model import (
    Device,
    Domain,
    HostInventory,
    Partition,
    PartitionProfile,
    PartitionScheme,
    Severity,
    SharingMode,
)

__all__ = ["DEFAULT_DOMAIN", "FEATURE_GATES", "MAX_ATTRIBUTES", "MAX_COUNTERS", "MAX_COUNTER_SETS",
           "MAX_DEVICES", "MAX_DEVICES_WITH_TAINTS", "MIG_COMPUTE_SLICES", "DraProjection", "is_partitioned",
           "placement_name", "resource_slices"]

DEFAULT_DOMAIN = "accel.dev"
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS = 64
MAX_ATTRIBUTES = 32
#: Counters in one counter set (1.37) and, for 1.34's rule, in all sets of one slice.
MAX_COUNTERS = 32
#: Counter sets in one slice (1.37).
MAX_COUNTER_SETS = 8
#: The fields of this projection that Kubernetes only keeps when a feature gate is on.
FEATURE_GATES: dict[str, str] = {
    "sharedCounters": "DRAPartitionableDevices",
    "consumesCounters": "DRAPartitionableDevices",
    "taints": "DRADeviceTaints",
    "allowMultipleAllocations": "DRAConsumableCapacity",
}
_MAX_STRING = 64
_STANDARD = "resource.kubernetes.io"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class DraProjection:
    """The slices, and per device name what could not be carried within DRA's limits."""

    slices: list[dict[str, Any]] = field(default_factory=list)
    omitted: dict[str, list[str]] = field(default_factory=dict)
    #: Devices not published, by accel id, and why (a parent whose partitions are published).
    withheld: dict[str, str] = field(default_factory=dict)
    #: ``dynamic=True``: published placement device name -> (parent id, profile, placement start).
    placements: dict[str, tuple[str, str, int]] = field(default_factory=dict)

    @property
    def devices(self) -> Iterator[dict[str, Any]]:
        for s in self.slices:
            yield from s["spec"].get("devices", [])


def _label(text: str, limit: int = 63) -> str:
    """A DNS label: lower-case alphanumerics and '-', at most ``limit``; long ones keep a hash."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"
    if len(out) > limit:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        out = out[: limit - 9].rstrip("-") + "-" + digest
    return out


def _semver(text: str | None) -> str | None:
    if not text:
        return None
    parts = text.strip().split(".")
    if len(parts) < 3 and all(p.isdigit() for p in parts):
        parts += ["0"] * (3 - len(parts))
    candidate = ".".join(str(int(p)) if p.isdigit() else p for p in parts)
    return candidate if _SEMVER.match(candidate) else None


class _Builder:
    def __init__(self, name: str, domain: str, omitted: dict[str, list[str]]) -> None:
        self.name = name
        self.domain = domain
        self.attributes: dict[str, dict[str, Any]] = {}
        self.capacity: dict[str, dict[str, str]] = {}
        self.omitted = omitted

    def _drop(self, key: str, why: str) -> None:
        self.omitted.setdefault(self.name, []).append(f"{key}: {why}")

    def _room(self, key: str) -> bool:
        if len(self.attributes) + len(self.capacity) >= MAX_ATTRIBUTES:
            self._drop(key, f"over the {MAX_ATTRIBUTES} attributes+capacities of a DRA device")
            return False
        return True

    def attr(
        self, key: str, value: str | int | bool | None, *, version: bool = False, domain: str | None = None
    ) -> None:
        if value is None or value == "":
            return
        qualified = f"{domain or self.domain}/{key}"
        if not _C_IDENT.match(key):
            self._drop(qualified, "attribute name is not a C identifier of at most 32 characters")
            return
        if isinstance(value, str) and len(value) > _MAX_STRING:
            self._drop(qualified, f"value longer than {_MAX_STRING} characters")
            return
        if qualified in self.attributes:
            self._drop(qualified, "published twice (two sources map to this name)")
            return
        if not self._room(qualified):
            return
        if version:
            self.attributes[qualified] = {"version": value}
        elif isinstance(value, bool):
            self.attributes[qualified] = {"bool": value}
        elif isinstance(value, int):
            self.attributes[qualified] = {"int": value}
        else:
            self.attributes[qualified] = {"string": str(value)}

    def cap(self, key: str, value: int | None) -> None:
        if value is None:
            return
        qualified = f"{self.domain}/{key}"
        if self._room(qualified):
            self.capacity[qualified] = {"value": str(value)}


def _best_domain(domains: tuple[Domain, ...]) -> Domain | None:
    return max(domains, key=lambda d: (d.size, d.id)) if domains else None


def _taints(dev: Device | Partition, domain: str) -> list[dict[str, str]]:
    taints = []
    for cond in dev.health.conditions:
        if not cond.active or cond.severity.rank < Severity.ERROR.rank or cond.scope.value == "process":
            continue
        key = f"{domain}/{_label(re.sub(r'(?<!^)(?=[A-Z])', '-', cond.reason), 63)}"
        taint = {"key": key, "effect": "NoSchedule"}
        if cond.vendor_code:
            taint["value"] = _LABEL_VALUE.sub("_", cond.vendor_code)[:63]
        taints.append(taint)
    if dev.health.operational.value == "lost":
        taints.append({"key": f"{domain}/device-lost", "effect": "NoSchedule"})
    seen: set[str] = set()
    unique = []
    for t in taints:
        if t["key"] not in seen:
            seen.add(t["key"])
            unique.append(t)
    return unique[:16]


def _device_name(dev: Device) -> str:
    if dev.pci is not None:
        return _label(f"{dev.kind.value}-{dev.pci.bus_id}")
    return _label(f"{dev.kind.value}-{dev.id.split(':', 1)[1]}")


def _project_device(dev: Device, inv: HostInventory, domain: str, omitted: dict[str, list[str]]) -> dict[str, Any]:
    b = _Builder(_device_name(dev), domain, omitted)
    b.attr("id", dev.id)
    b.attr("vendor", dev.vendor)
    b.attr("kind", dev.kind.value)
    b.attr("type", "device")
    b.attr("model", dev.model)
    b.attr("health", dev.health.state.value)
    if dev.pci is not None:
        b.attr("pciBusID", dev.pci.bus_id, domain=_STANDARD)
        b.attr("pcieRoot", dev.pci.pcie_root, domain=_STANDARD)
    b.attr("numaNode", dev.numa_node)
    b.attr("uuid", dev.uuid)
    b.attr("family", dev.family)
    b.attr("architecture", dev.architecture)
    cc = _semver(dev.compute_capability)
    if cc:
        b.attr("computeCapability", cc, version=True)
    else:
        b.attr("isa", dev.isa or dev.compute_capability)
    drv = _semver(dev.versions.driver)
    if drv:
        b.attr("driverVersion", drv, version=True)
    else:
        b.attr("driverVersionRaw", dev.versions.driver)
    best = _best_domain(inv.domains_of(dev.id))
    if best is not None:
        b.attr("linkDomain", _label(best.id, _MAX_STRING))
        b.attr("linkDomainSize", best.size)
        b.attr("linkType", best.kind.value)
    b.attr("serial", dev.serial_number)
    b.cap("memory", dev.memory_total_bytes)
    b.cap("computeUnits", dev.compute.units)
    for key, value in sorted(dev.extras.items()):
        name = key.rpartition("/")[2]
        b.attr(name, value if not isinstance(value, float) else str(value), domain=f"{dev.vendor}.{domain}")
    out: dict[str, Any] = {"name": b.name, "attributes": b.attributes}
    if b.capacity:
        out["capacity"] = b.capacity
    taints = _taints(dev, domain)
    if taints:
        out["taints"] = taints
    if dev.sharing.mode in (SharingMode.CONSUMABLE, SharingMode.VENDOR_SHARE):
        out["allowMultipleAllocations"] = True
    return out


def _project_partition(
    part: Partition, parent: Device, domain: str, omitted: dict[str, list[str]]
) -> dict[str, Any]:
    # The placement start names a placed partition; an unplaced one its GPU instance id (never a
    # bare number, which could equal a sibling's start) or, lacking that, a digest of its id.
    if part.placement is not None:
        where = str(part.placement.start)
    elif part.gi_id is not None:
        where = f"gi{part.gi_id}"
    else:
        where = "id" + hashlib.sha256(part.id.encode()).hexdigest()[:8]
    b = _Builder(_label(f"{_device_name(parent)}-{part.profile.replace('.', '')}-{where}"), domain, omitted)
    b.attr("id", part.id)
    b.attr("vendor", parent.vendor)
    b.attr("kind", parent.kind.value)
    b.attr("type", "partition")
    b.attr("model", parent.model)
    b.attr("health", part.health.state.value)
    b.attr("partitionProfile", part.profile)
    b.attr("parentUUID", parent.uuid)
    b.attr("uuid", part.uuid)
    if parent.pci is not None:
        b.attr("pciBusID", parent.pci.bus_id, domain=_STANDARD)
        b.attr("pcieRoot", parent.pci.pcie_root, domain=_STANDARD)
    b.attr("numaNode", parent.numa_node)
    b.cap("memory", part.memory_bytes)
    b.cap("computeUnits", part.compute_units)
    out: dict[str, Any] = {"name": b.name, "attributes": b.attributes}
    if b.capacity:
        out["capacity"] = b.capacity
    taints = _taints(part, domain)
    if taints:
        out["taints"] = taints
    return out


def is_partitioned(dev: Device, inv: HostInventory) -> bool:
    """Whether ``dev`` is cut into partitions now: live partitions, MIG on, or AMD compute mode not SPX.

    A partitioned device's full silicon is not usable as one device (a MIG-enabled GPU runs no
    work outside its instances; a CPX MI300X is eight GPUs), so safe publication offers only its
    partitions.
    """
    if any(p.parent_id == dev.id for p in inv.partitions):
        return True
    mode = dev.partition_mode
    if mode.scheme == PartitionScheme.MIG:
        return True
    return mode.scheme == PartitionScheme.AMD_XCP and (mode.compute_mode or "spx").lower() != "spx"


def _counter_set(
    dev: Device, parts: list[Partition], inv: HostInventory, name: str
) -> tuple[dict[str, Any], dict[str, dict[str, str]], list[dict[str, dict[str, str]]]] | str:
    """The counter set of ``dev`` and what ``dev`` and each of ``parts`` consume, or why not.

    Slots come from the partitions' placements and the parent's profiles; a partition without a
    placement gets a slot of its own.  ``memory`` and ``compute-units`` are added only when every
    partition reports them and they sum within the parent's (else the slots alone guard it).
    """
    slots = max([p.placement.end for p in parts if p.placement] + [
        prof.memory_slices or 0 for prof in inv.partition_profiles if prof.parent_id == dev.id
    ] + [0])
    part_slots: list[range] = []
    for p in parts:
        if p.placement is not None:
            part_slots.append(range(p.placement.start, p.placement.end))
        else:
            part_slots.append(range(slots, slots + 1))
            slots += 1
    counters: dict[str, int] = {}
    mem = dev.memory_total_bytes
    if mem is not None and all(p.memory_bytes is not None for p in parts) and sum(
        p.memory_bytes or 0 for p in parts
    ) <= mem:
        counters["memory"] = mem
    cu = dev.compute.units
    if cu is not None and all(p.compute_units is not None for p in parts) and sum(
        p.compute_units or 0 for p in parts
    ) <= cu:
        counters["compute-units"] = cu
    if slots + len(counters) > MAX_COUNTERS:
        return f"{slots} placement slots do not fit the {MAX_COUNTERS} counters of a counter set"
    counters |= {f"slot-{i}": 1 for i in range(slots)}
    capacity = {k: {"value": str(v)} for k, v in counters.items()}
    consumed: list[dict[str, dict[str, str]]] = []
    for p, rng in zip(parts, part_slots, strict=True):
        use: dict[str, dict[str, str]] = {f"slot-{i}": {"value": "1"} for i in rng}
        if "memory" in counters:
            use["memory"] = {"value": str(p.memory_bytes)}
        if "compute-units" in counters:
            use["compute-units"] = {"value": str(p.compute_units)}
        consumed.append(use)
    return {"name": name, "counters": capacity}, capacity, consumed


#: Compute slices of a MIG-capable GPU (A100, H100): NVIDIA's MIG user guide, "Supported MIG Profiles".
MIG_COMPUTE_SLICES = 7


def _compute_slices(prof: PartitionProfile) -> int | None:
    """The ``N`` of a MIG profile ``Ng.Mgb`` (from its name, else its compute ratio of 7)."""
    head = prof.name.split("g.", 1)[0]
    if head.isdigit():
        return int(head)
    if prof.compute_ratio is not None:
        return max(1, round(prof.compute_ratio * MIG_COMPUTE_SLICES))
    return None


def placement_name(dev: Device, profile: str, start: int) -> str:
    """The published name of ``profile`` at memory slice ``start`` of ``dev`` (also the name of a
    live partition there: :func:`_project_partition` names placed partitions alike)."""
    return _label(f"{_device_name(dev)}-{profile.replace('.', '')}-{start}")


def _dynamic_layout(
    dev: Device, parts: list[Partition], profiles: list[PartitionProfile], owned: frozenset[str], domain: str,
    projection: DraProjection,
) -> tuple[dict[str, Any], list[dict[str, Any]]] | str:
    """The counter set and devices of ``dev`` published for dynamic partitions, or why not."""
    slices = {p.name: _compute_slices(p) for p in profiles}
    if any(n is None for n in slices.values()):
        return "a profile's compute slices are unknown"
    unowned = [p for p in parts if p.id not in owned]
    if any(p.placement is None for p in parts):
        return "a live partition has no placement (what it occupies is unknown)"
    by_name = {p.name: p for p in profiles}
    if any(p.profile not in by_name for p in unowned):
        return "a live partition is of a profile the device does not list"
    slots = max([pl.end for prof in profiles for pl in prof.placements] + [p.placement.end for p in parts
                                                                           if p.placement is not None])
    used = sum(slices[p.profile] or 0 for p in unowned)
    counters: dict[str, int] = {f"slot-{i}": 1 for i in range(slots)}
    counters["compute-slices"] = MIG_COMPUTE_SLICES - used
    if counters["compute-slices"] < 0:
        return f"live partitions take {used} compute slices of {MIG_COMPUTE_SLICES}"
    limited: dict[str, str] = {}
    for prof in profiles:  # a profile with more placements than instances gets a counter of its own
        if prof.max_instances is not None and len(prof.placements) > prof.max_instances:
            limited[prof.name] = _label(f"instances-{prof.name}")
            counters[limited[prof.name]] = prof.max_instances - sum(p.profile == prof.name for p in unowned)
    if len(counters) > MAX_COUNTERS:
        return f"{len(counters)} counters do not fit the {MAX_COUNTERS} of a counter set"
    set_name = _label(f"{_device_name(dev)}-counters")
    out: list[dict[str, Any]] = []

    def use(prof_name: str, start: int, size: int, compute: bool) -> list[dict[str, Any]]:
        want = {f"slot-{i}": {"value": "1"} for i in range(start, start + size)}
        if compute:
            want["compute-slices"] = {"value": str(slices[prof_name])}
            if prof_name in limited:
                want[limited[prof_name]] = {"value": "1"}
        return _consumes(set_name, want)

    taken = [p.placement for p in unowned if p.placement is not None]
    for p in unowned:  # live, not ours: offered as it is (its silicon is taken whether or not allocated)
        assert p.placement is not None
        projected = _project_partition(p, dev, domain, projection.omitted)
        projected["consumesCounters"] = use(p.profile, p.placement.start, p.placement.size, compute=False)
        out.append(projected)
    for prof in profiles:
        for pl in prof.placements:
            if any(pl.overlaps(t) for t in taken):
                continue
            name = placement_name(dev, prof.name, pl.start)
            b = _Builder(name, domain, projection.omitted)
            b.attr("vendor", dev.vendor)
            b.attr("kind", dev.kind.value)
            b.attr("type", "partition")
            b.attr("model", dev.model)
            b.attr("health", dev.health.state.value)
            b.attr("partitionProfile", prof.name)
            b.attr("parentUUID", dev.uuid)
            b.attr("placementStart", pl.start)
            b.attr("placementSize", pl.size)
            b.attr("dynamic", True)
            if dev.pci is not None:
                b.attr("pciBusID", dev.pci.bus_id, domain=_STANDARD)
                b.attr("pcieRoot", dev.pci.pcie_root, domain=_STANDARD)
            b.attr("numaNode", dev.numa_node)
            b.cap("memory", prof.memory_bytes)
            b.cap("computeUnits", prof.compute_units)
            device: dict[str, Any] = {"name": name, "attributes": b.attributes}
            if b.capacity:
                device["capacity"] = b.capacity
            taints = _taints(dev, domain)
            if taints:
                device["taints"] = taints
            device["consumesCounters"] = use(prof.name, pl.start, pl.size, compute=True)
            out.append(device)
            projection.placements[name] = (dev.id, prof.name, pl.start)
    cset = {"name": set_name, "counters": {k: {"value": str(v)} for k, v in counters.items()}}
    return cset, out


def _consumes(set_name: str, counters: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [{"counterSet": set_name, "counters": dict(counters)}]


def _slice_specs(devices: list[dict[str, Any]], counter_sets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One pool's slice bodies: its counter sets first, then its devices, each within the limits."""
    guarded = any("taints" in d or "consumesCounters" in d for d in devices)
    per_slice = MAX_DEVICES_WITH_TAINTS if guarded else MAX_DEVICES
    specs: list[dict[str, Any]] = []
    # Counter sets live in slices of their own (1.36+); at most 8 sets and, for 1.34's
    # rule, 32 counters in all sets of one slice.
    pending: list[dict[str, Any]] = []
    for cset in counter_sets:
        total = sum(len(c["counters"]) for c in pending) + len(cset["counters"])
        if pending and (len(pending) >= MAX_COUNTER_SETS or total > MAX_COUNTERS):
            specs.append({"sharedCounters": pending})
            pending = []
        pending.append(cset)
    if pending:
        specs.append({"sharedCounters": pending})
    chunks = [devices[i : i + per_slice] for i in range(0, len(devices), per_slice)]
    specs += [{"devices": chunk} for chunk in chunks]
    if not specs:
        specs = [{"devices": []}]
    return specs


def resource_slices(
    inv: HostInventory,
    *,
    domain: str = DEFAULT_DOMAIN,
    node_name: str | None = None,
    generation: int = 1,
    include_partitions: bool = True,
    partitionable: bool = False,
    dynamic: bool = False,
    owned: frozenset[str] = frozenset(),
) -> DraProjection:
    """ResourceSlices for one host: one pool per vendor driver (``<vendor>.<domain>``).

    By default a partitioned device is published as its partitions only (no feature gate
    needed); ``partitionable=True`` publishes it and its partitions with shared counters
    (needs DRAPartitionableDevices).  ``include_partitions=False`` publishes no partitions, and
    so no partitioned device either (its full silicon is not usable as one device).
    ``dynamic=True`` publishes each MIG-mode device with placements as its possible partitions
    (module docstring, "Dynamic partitions"); ``owned`` are the ids of live partitions made for
    claims (not published on their own).  Other devices follow the other options.
    """
    if not _DNS_SUBDOMAIN.match(domain) or len(domain) > 63:
        raise ConfigError(f"DRA domain must be a DNS subdomain of at most 63 characters, got {domain!r}")
    if generation < 0:
        raise ConfigError(f"pool generation must be >= 0, got {generation}")
    node = node_name or inv.host.hostname
    projection = DraProjection()
    by_vendor: dict[str, list[dict[str, Any]]] = {}
    counter_sets: dict[str, list[dict[str, Any]]] = {}
    for dev in inv.devices:
        devices = by_vendor.setdefault(dev.vendor, [])
        parts = [p for p in inv.partitions if p.parent_id == dev.id] if include_partitions else []
        if dynamic and dev.partition_mode.scheme == PartitionScheme.MIG:
            placed = [p for p in inv.partition_profiles if p.parent_id == dev.id and p.placements]
            if placed:
                layout = _dynamic_layout(dev, [p for p in inv.partitions if p.parent_id == dev.id], placed, owned,
                                         domain, projection)
                if isinstance(layout, str):
                    projection.omitted.setdefault(_device_name(dev), []).append(f"dynamic partitions: {layout}")
                else:
                    counter_sets.setdefault(dev.vendor, []).append(layout[0])
                    devices.extend(layout[1])
                    projection.withheld[dev.id] = ("MIG mode on: offered as its profiles' placements, each made "
                                                   "when a claim is prepared")
                    continue
        if not is_partitioned(dev, inv):
            devices.append(_project_device(dev, inv, domain, projection.omitted))
            continue
        if not include_partitions:
            projection.withheld[dev.id] = "partitioned, and partitions were not asked for"
            continue
        projected = [_project_partition(p, dev, domain, projection.omitted) for p in parts]
        if partitionable:
            parent = _project_device(dev, inv, domain, projection.omitted)
            made = _counter_set(dev, parts, inv, _label(f"{parent['name']}-counters"))
            if isinstance(made, str):
                projection.withheld[dev.id] = f"partitioned; not partitionable: {made}"
            else:
                cset, capacity, consumed = made
                counter_sets.setdefault(dev.vendor, []).append(cset)
                parent.pop("allowMultipleAllocations", None)
                parent["consumesCounters"] = _consumes(cset["name"], capacity)
                for out, use in zip(projected, consumed, strict=True):
                    out["consumesCounters"] = _consumes(cset["name"], use)
                devices.append(parent)
        else:
            projection.withheld[dev.id] = (
                f"partitioned ({len(parts)} partition(s) published instead); "
                "partitionable=True publishes both with shared counters"
            )
        devices.extend(projected)
    for vendor in sorted(by_vendor):
        devices = by_vendor[vendor]
        driver = f"{vendor}.{domain}"
        if len(driver) > 63:
            raise ConfigError(f"DRA driver name {driver!r} is longer than 63 characters")
        names = [d["name"] for d in devices] + [c["name"] for c in counter_sets.get(vendor, [])]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError(f"DRA device names collide in pool {node!r}: {', '.join(dup)}")
        specs = _slice_specs(devices, counter_sets.get(vendor, []))
        for n, body in enumerate(specs):
            projection.slices.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": _label(f"{node}-{driver}-{n}", 253)},
                    "spec": {
                        "driver": driver,
                        "nodeName": node,
                        "pool": {"name": node, "generation": generation, "resourceSliceCount": len(specs)},
                        **body,
                    },
                }
            )
    return projection
