"""Readings -> model objects (Device, Partition, Link, Domain, Telemetry), shared with Hygon.

A :class:`Flavor` carries what differs between AMD and the Hygon fork (vendor name, device
kind, PCI vendor id, extras domain); everything else is the same code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from accel.model import (
    Binding,
    Capabilities,
    ComputeInfo,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    FormFactor,
    Health,
    Link,
    LinkType,
    MemoryKind,
    MemoryRegion,
    Partition,
    PartitionMode,
    PartitionProfile,
    PartitionScheme,
    PciInfo,
    Placement,
    PowerLimits,
    ProcessUsage,
    Telemetry,
    ThermalLimits,
    VersionInfo,
    device_id_for,
    is_placeholder_identity,
    validate,
)
from accel.model import (
    Operational as _Operational,
)
from accel.toolkit import DeviceReading, assemble_device, unsupported_of

from ._health import conditions_for, health_monitored
from ._readings import GpuReading

__all__ = [
    "AMD",
    "Flavor",
    "architecture_of",
    "build_devices",
    "device_reading",
    "domains_for",
    "health_for",
    "links_for",
    "never_paths",
    "processes_for",
    "telemetry_for",
]


@dataclass(frozen=True)
class Flavor:
    """What differs between ROCm-family vendors when building the model."""

    vendor: str
    kind: DeviceKind
    pci_vendor_id: str
    extras_domain: str
    visible_env: str = "HIP_VISIBLE_DEVICES"
    torch_device_type: str = "cuda"
    collective_backend: str = "rccl"
    ray_resource: str = "GPU"
    unit_kind: str = "cu"


AMD = Flavor(vendor="amd", kind=DeviceKind.GPU, pci_vendor_id="1002", extras_domain="amd.com")

#: gfx target -> architecture family (CDNA for Instinct, RDNA for Radeon).
_ARCH = (
    ("gfx950", "CDNA4"),
    ("gfx94", "CDNA3"),
    ("gfx90a", "CDNA2"),
    ("gfx908", "CDNA"),
    ("gfx906", "GCN5"),
    ("gfx12", "RDNA4"),
    ("gfx11", "RDNA3"),
    ("gfx103", "RDNA2"),
    ("gfx101", "RDNA"),
)


def brand_family(name: str | None) -> tuple[str | None, str | None]:
    """``("AMD Instinct", "MI300")`` from a market name; ``(None, None)`` when it says neither."""
    if not name:
        return None, None
    brand = "AMD Instinct" if "Instinct" in name else "AMD Radeon" if "Radeon" in name else None
    m = re.search(r"\bMI([0-9]{3})", name)
    return brand, (f"MI{m.group(1)[:2]}0" if m else None)


def architecture_of(isa: str | None) -> str | None:
    """The architecture family of a gfx target (``gfx942`` -> ``CDNA3``); ``None`` if unknown."""
    if not isa:
        return None
    for prefix, arch in _ARCH:
        if isa.startswith(prefix):
            return arch
    return None


_MEMORY_KIND = {"hbm": MemoryKind.HBM, "gddr": MemoryKind.GDDR, "ddr": MemoryKind.DDR}

#: GpuReading part -> Device field path (for ``unsupported``).
PART_FIELDS = {
    "serial_number": "serial_number",
    "uuid": "uuid",
    "isa": "isa",
    "architecture": "architecture",
    "numa_node": "numa_node",
    "compute_units": "compute.units",
    "max_clock_hertz": "compute.max_clock_hertz",
    "memory_max_clock_hertz": "compute.memory_max_clock_hertz",
    "memory_used_bytes": "memory.used_bytes",
    "memory_total_bytes": "memory.total_bytes",
    "memory_generation": "memory.generation",
    "ecc_enabled": "memory.ecc_enabled",
    "ecc_supported": "memory.ecc_supported",
    "power_cap_watts": "power.enforced_watts",
    "power_cap_default_watts": "power.default_watts",
    "power_cap_min_watts": "power.min_watts",
    "power_cap_max_watts": "power.max_watts",
    "temp_slowdown_celsius": "thermal.slowdown_celsius",
    "temp_shutdown_celsius": "thermal.shutdown_celsius",
    "firmware": "versions.firmware",
    "driver_version": "versions.driver",
    "form_factor": "form_factor",
    "bus_id": "pci",
}


def never_paths(parts: Iterable[str]) -> frozenset[str]:
    """The Device field paths of reading parts a layer could never give (``not_supported``)."""
    return frozenset(PART_FIELDS[p] for p in parts if p in PART_FIELDS)


def _identity(vendor: str, r: GpuReading) -> str | None:
    """The device's stable UUID: the ASIC unique id (what the simulator and ROCr use), else
    the library's device UUID when it is real (not pyrsmi's BDF-derived stand-in).

    Placeholders (:func:`accel.model.is_placeholder_identity`: all-zero, all-F, a firmware
    default such as Hygon's ``a000000000000000``, masked values) are never an identity.
    """
    if r.unique_id and not is_placeholder_identity(vendor, r.unique_id):
        return r.unique_id
    if r.uuid and not r.uuid_synthesized and not is_placeholder_identity(vendor, r.uuid):
        return r.uuid
    return None


def _device_id(flavor: Flavor, r: GpuReading) -> str:
    uuid = _identity(flavor.vendor, r)
    if uuid or r.bus_id:
        return device_id_for(flavor.vendor, uuid=uuid, bus_id=r.bus_id)
    # Last resort (a CLI that prints neither): the tool's index, marked as such in the id.
    return f"{flavor.vendor}:index-{r.index if r.index is not None else 0}"


def health_for(r: GpuReading, flavor: Flavor, *, operational: _Operational | None = None) -> Health:
    """The health of one reading: conditions from the mapping table, monitored if anything was read."""
    monitored = health_monitored(r)
    # Health is earned: a reading time only where a health-telling value (RAS, ECC) was read.
    return Health(
        operational=operational or _Operational.ONLINE,
        monitored=monitored,
        conditions=conditions_for(r, flavor.vendor),
        checked_at=datetime.now(UTC) if monitored else None,
    )


def _binding(flavor: Flavor, indices: Sequence[int], r: GpuReading) -> Binding:
    nodes = ["/dev/kfd"]
    for node in (r.card_node, r.render_node):
        if node:
            nodes.append(f"/dev/dri/{node}")
    return Binding(
        visible_env=flavor.visible_env,
        visible_id=",".join(str(i) for i in indices) if indices else None,
        torch_device_type=flavor.torch_device_type,
        collective_backend=flavor.collective_backend,
        ray_resource=flavor.ray_resource,
        device_nodes=tuple(nodes),
    )


def _sum(values: Iterable[int | None]) -> int | None:
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return sum(v for v in vals if v is not None)


def _extras(flavor: Flavor, r: GpuReading) -> dict[str, str | int | float | bool]:
    d = flavor.extras_domain
    out: dict[str, str | int | float | bool] = {}
    if r.xgmi_hive_id:
        out[f"{d}/xgmiHiveId"] = r.xgmi_hive_id
    if r.unique_id and not is_placeholder_identity(flavor.vendor, r.unique_id):
        # ROCr accepts this stable form in ROCR_VISIBLE_DEVICES (rocminfo prints it as Uuid);
        # a placeholder shared by many cards would select the wrong one, so it is left out.
        out[f"{d}/rocrVisibleDevice"] = "GPU-" + r.unique_id.removeprefix("0x")
    if (r.uuid and not r.uuid_synthesized and r.uuid != r.unique_id
            and not is_placeholder_identity(flavor.vendor, r.uuid)):
        out[f"{d}/deviceUuid"] = r.uuid
    if r.pci_revision:
        out[f"{d}/pciRevision"] = r.pci_revision
    if r.vbios_version:
        out[f"{d}/vbios"] = r.vbios_version
    if r.performance_level:
        out[f"{d}/performanceLevel"] = r.performance_level
    if r.mode:
        out[f"{d}/mode"] = r.mode
    if r.bad_pages is not None:
        out[f"{d}/retiredPages"] = len(r.bad_pages)
    if r.bad_page_threshold is not None:
        out[f"{d}/badPageThreshold"] = r.bad_page_threshold
    return out


def _partition_mode(r: GpuReading) -> PartitionMode:
    if r.compute_partition is None and r.memory_partition is None:
        return PartitionMode()
    return PartitionMode(
        scheme=PartitionScheme.AMD_XCP,
        compute_mode=r.compute_partition.lower() if r.compute_partition else None,
        memory_mode=r.memory_partition.lower() if r.memory_partition else None,
    )


def _profile_name(r: GpuReading) -> str:
    parts = [p.lower() for p in (r.compute_partition, r.memory_partition) if p]
    return "_".join(parts) or "partition"


def build_devices(
    groups: Sequence[Sequence[GpuReading]],
    flavor: Flavor,
    *,
    unsupported: Iterable[str] = (),
) -> tuple[list[Device], list[Partition], list[PartitionProfile]]:
    """One Device per physical GPU (a group of handles sharing a bus id), plus its partitions.

    ``groups[i]`` lists the merged readings of one physical device's handles in partition
    order; more than one handle means the device is partitioned (CPX, DPX...), and each handle
    becomes a :class:`Partition`.  ``unsupported`` names reading parts this backend can never
    report; those still empty on a device end up in its ``unsupported`` set (the toolkit's
    assembly owns that rule: :func:`accel.toolkit.assemble_device`).
    """
    devices: list[Device] = []
    partitions: list[Partition] = []
    profiles: list[PartitionProfile] = []
    for group in groups:
        device = assemble_device(device_reading(group, flavor, unsupported), tool=flavor.vendor)
        devices.append(device)
        if len(group) > 1:
            profile, parts = _partitioned(device.id, group, flavor)
            profiles.append(profile)
            partitions.extend(parts)
    return devices, partitions, profiles


def device_reading(group: Sequence[GpuReading], flavor: Flavor, unsupported: Iterable[str] = ()) -> DeviceReading:
    """The typed reading of one physical GPU from its handles' merged readings."""
    head = group[0]
    indices = [r.index for r in group if r.index is not None]
    model = head.name or (f"{flavor.vendor.upper()} device {head.pci_device_id}" if head.pci_device_id else None)
    units = _sum(r.compute_units for r in group)
    uuid = _identity(flavor.vendor, head)
    parts_never = set(unsupported).union(*(r.not_supported for r in group))
    if uuid is None and (head.unique_id or (head.uuid and not head.uuid_synthesized)):
        parts_never.add("uuid")  # the tool printed a placeholder: no identity to report
    brand, family = brand_family(head.name)
    device = Device.model_construct(
        id=_device_id(flavor, head),
        vendor=flavor.vendor,
        kind=flavor.kind,
        model=model or f"{flavor.vendor.upper()} device",
        index=indices[0] if indices else None,
        uuid=uuid,
        serial_number=head.serial_number,
        brand=brand,
        family=family,
        architecture=architecture_of(head.isa),
        isa=head.isa,
        form_factor=FormFactor(head.form_factor) if head.form_factor else None,
        pci=_pci(flavor, head),
        numa_node=head.numa_node,
        versions=VersionInfo.model_construct(driver=head.driver_version, firmware=dict(head.firmware)),
        memory=_memory(group),
        compute=ComputeInfo.model_construct(
            units=units,
            unit_kind=flavor.unit_kind if units is not None else None,
            max_clock_hertz=head.max_clock_hertz,
            memory_max_clock_hertz=head.memory_max_clock_hertz,
        ),
        power=PowerLimits.model_construct(
            default_watts=head.power_cap_default_watts,
            min_watts=head.power_cap_min_watts,
            max_watts=head.power_cap_max_watts,
            enforced_watts=head.power_cap_watts,
        ),
        thermal=ThermalLimits.model_construct(
            slowdown_celsius=head.temp_slowdown_celsius,
            shutdown_celsius=head.temp_shutdown_celsius,
        ),
        capabilities=Capabilities(
            ecc=head.ecc_supported,
            partitioning=(PartitionScheme.AMD_XCP,) if head.compute_partition else (),
            p2p=True if head.xgmi_hive_id else None,
        ),
        partition_mode=_partition_mode(head),
        binding=_binding(flavor, indices, head),
        health=_group_health(group, flavor),
        extras=_extras(flavor, head),
    )
    return DeviceReading(device, never=never_paths(parts_never))


def _memory(group: Sequence[GpuReading]) -> tuple[MemoryRegion, ...]:
    head = group[0]
    mem_total = _sum(r.memory_total_bytes for r in group)
    mem_used = _sum(r.memory_used_bytes for r in group)
    if mem_total is not None and mem_used is not None and mem_used > mem_total:
        mem_used = None  # an inconsistent sample is unknown, not a validation failure
    if mem_total is None and mem_used is None:
        return ()
    pending = None
    if head.bad_pages is not None:
        pending = bool(head.bad_pages and any(p.status == "pending" for p in head.bad_pages))
    return (
        MemoryRegion.model_construct(
            kind=_MEMORY_KIND.get((head.memory_kind or "").lower(), MemoryKind.UNKNOWN),
            total_bytes=mem_total,
            used_bytes=mem_used,
            generation=head.memory_generation,
            bus_width_bits=head.memory_bus_width_bits,
            ecc_supported=head.ecc_supported,
            ecc_enabled=head.ecc_enabled,
            ecc_pending=pending,
        ),
    )


def _pci(flavor: Flavor, head: GpuReading) -> PciInfo | None:
    if not head.bus_id:
        return None
    return PciInfo.model_construct(
        bus_id=head.bus_id,
        vendor_id=head.vendor_id or flavor.pci_vendor_id,
        device_id=head.pci_device_id,
        link_gen_current=head.pcie_gen_current,
        link_width_current=head.pcie_width_current,
        link_gen_max=head.pcie_gen_max,
        link_width_max=head.pcie_width_max,
    )


def _partitioned(dev_id: str, group: Sequence[GpuReading], flavor: Flavor) -> tuple[PartitionProfile, list[Partition]]:
    """The profile and the partitions of a device whose handles are partitions (CPX, DPX...)."""
    head = group[0]
    name = _profile_name(head)
    n = len(group)
    profile = PartitionProfile(
        name=name,
        parent_id=dev_id,
        memory_bytes=head.memory_total_bytes,
        compute_units=head.compute_units,
        compute_ratio=1.0 / n,
        max_instances=n,
        placements=tuple(Placement(start=k, size=1) for k in range(n)),
    )
    partitions = []
    for k, r in enumerate(group):
        pidx = r.partition_index if r.partition_index is not None else k
        partitions.append(
            Partition(
                id=f"{dev_id}/{name.split('_')[0]}{pidx}",
                parent_id=dev_id,
                profile=name,
                placement=Placement(start=pidx, size=1),
                uuid=r.uuid if not r.uuid_synthesized else None,
                memory_bytes=r.memory_total_bytes,
                compute_units=r.compute_units,
                compute_ratio=1.0 / n,
                binding=_binding(flavor, [r.index] if r.index is not None else [], r),
                health=health_for(r, flavor),
            )
        )
    return profile, partitions


def _group_health(group: Sequence[GpuReading], flavor: Flavor) -> Health:
    # The physical device carries every partition's conditions, de-duplicated: RAS and ECC
    # counters are per device, so CPX partitions usually repeat the same numbers.
    seen: dict[tuple[str | None, str, str], object] = {}
    conds = []
    monitored = False
    for r in group:
        h = health_for(r, flavor)
        monitored = monitored or h.monitored
        for c in h.conditions:
            key = (c.vendor_code, c.reason, c.message or "")
            if key not in seen:
                seen[key] = c
                conds.append(c)
    return Health(monitored=monitored, conditions=tuple(conds), checked_at=datetime.now(UTC) if monitored else None)


def links_for(pairs: Iterable[tuple[str, str]], devices: Sequence[Device]) -> list[Link]:
    """One xGMI :class:`Link` per unordered pair of bus ids that both belong to ``devices``."""
    by_bus = {d.pci.bus_id: d.id for d in devices if d.pci is not None}
    seen: set[frozenset[str]] = set()
    out: list[Link] = []
    for a, b in pairs:
        ia, ib = by_bus.get(a), by_bus.get(b)
        if ia is None or ib is None or ia == ib:
            continue
        key = frozenset((ia, ib))
        if key in seen:
            continue
        seen.add(key)
        x, y = sorted((ia, ib))
        out.append(Link(a=x, b=y, type=LinkType.XGMI, count=1))
    return out


def domains_for(devices: Sequence[Device], flavor: Flavor) -> list[Domain]:
    """One xGMI hive domain per hive id shared by two or more devices."""
    key = f"{flavor.extras_domain}/xgmiHiveId"
    hives: dict[str, list[str]] = {}
    for d in devices:
        hive = d.extras.get(key)
        if isinstance(hive, str) and hive:
            hives.setdefault(hive, []).append(d.id)
    prefix = "" if flavor.vendor == "amd" else f"{flavor.vendor}-"
    return [
        Domain(id=f"{prefix}xgmi-hive-{hive}", kind=DomainKind.XGMI_HIVE, members=tuple(members))
        for hive, members in sorted(hives.items())
        if len(members) >= 2
    ]


def processes_for(device_id: str, r: GpuReading, partition_id: str | None = None) -> list[ProcessUsage]:
    return [
        ProcessUsage(
            pid=p.pid,
            device_id=partition_id or device_id,
            partition_id=partition_id,
            name=p.name,
            memory_bytes=p.vram_bytes,
        )
        for p in r.processes or ()
        if p.pid >= 0
    ]


def telemetry_for(
    device: Device, group: Sequence[GpuReading], now: datetime, *, unsupported: Iterable[str] = ()
) -> Telemetry:
    """One telemetry sample of a physical device from its handles' readings."""
    head = group[0]
    total = _sum(r.memory_total_bytes for r in group)
    used = _sum(r.memory_used_bytes for r in group)
    if total is not None and used is not None and used > total:
        used = None
    utils = [r.utilization_ratio for r in group]
    util = sum(u for u in utils if u is not None) / len(utils) if all(u is not None for u in utils) else None
    temps = {k: v for k, v in head.temperatures_celsius.items()}
    temp = temps.get("junction", temps.get("hotspot", temps.get("edge")))
    ecc = head.ecc_total
    data = {
        "device_id": device.id,
        "timestamp": now,
        "utilization_ratio": util,
        "memory_utilization_ratio": head.memory_utilization_ratio,
        "memory_used_bytes": used,
        "memory_total_bytes": total,
        "memory_free_bytes": (total - used) if total is not None and used is not None else None,
        "power_watts": head.power_watts,
        "energy_joules": head.energy_joules,
        "temperature_celsius": temp,
        "temperatures_celsius": temps,
        "clocks_hertz": dict(head.clocks_hertz),
        "fan_ratio": head.fan_ratio,
        "throttle_reasons": tuple(head.throttle_reasons or ()),
        "pcie_replay_total": head.pcie_replay_total,
        "ecc_corrected_total": ecc.correctable if ecc else None,
        "ecc_uncorrected_total": ecc.uncorrectable if ecc else None,
        "retired_pages_total": len(head.bad_pages) if head.bad_pages is not None else None,
    }
    # A declared telemetry field this device gave nothing for is listed too: the conformance
    # contract is "a value, or named in unsupported" (energy is not read at all: never declared).
    candidates = set(unsupported) | {"energy_joules", "power_watts", "temperature_celsius", "utilization_ratio",
                                     "clocks_hertz", "memory_used_bytes", "fan_ratio"}
    data["energy_joules"] = None
    data["unsupported"] = unsupported_of(data, candidates)
    return validate(Telemetry, data, what=f"telemetry of {device.id}")
