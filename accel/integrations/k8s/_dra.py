"""Project a :class:`~accel.model.HostInventory` onto Kubernetes DRA ResourceSlices.

The output is plain ``resource.k8s.io/v1`` ``ResourceSlice`` objects (dicts ready for
``kubectl apply`` or a client), one pool per node and driver, within DRA's hard limits: at most
128 devices per slice (64 when devices carry taints), at most 32 attributes and capacities per
device, DNS-label device names, C-identifier attribute names of at most 32 characters and
string values of at most 64.  Anything that does not fit is not silently dropped: it is listed
in :attr:`DraProjection.omitted` per device.

Attributes (under ``domain``, default ``accel.dev``): ``id``, ``vendor``, ``kind``, ``type``
(``device`` | ``partition``), ``model``, ``family``, ``architecture``, ``uuid``, ``serial``,
``parentUUID``, ``partitionProfile``, ``computeCapability`` and ``driverVersion`` (semantic
versions when they parse as one), ``health``, ``linkDomain``, ``linkDomainSize``, ``linkType``;
the standard ``resource.kubernetes.io/pciBusID``, ``pcieRoot`` and ``numaNode``; vendor extras
under their own qualified names.  Capacities: ``memory`` (bytes) and ``computeUnits``.  Health
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
from ...model import Device, Domain, HostInventory, Partition, Severity, SharingMode

__all__ = ["DEFAULT_DOMAIN", "MAX_ATTRIBUTES", "MAX_DEVICES", "MAX_DEVICES_WITH_TAINTS", "DraProjection",
           "resource_slices"]

DEFAULT_DOMAIN = "accel.dev"
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS = 64
MAX_ATTRIBUTES = 32
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
    if dev.numa_node is not None:
        b.attr("numaNode", dev.numa_node, domain=_STANDARD)
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
        prefix, _, name = key.partition("/")
        b.attr(name, value if not isinstance(value, float) else str(value), domain=prefix)
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
    start = part.placement.start if part.placement else (part.gi_id or 0)
    b = _Builder(_label(f"{_device_name(parent)}-{part.profile.replace('.', '')}-{start}"), domain, omitted)
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
    if parent.numa_node is not None:
        b.attr("numaNode", parent.numa_node, domain=_STANDARD)
    b.cap("memory", part.memory_bytes)
    b.cap("computeUnits", part.compute_units)
    out: dict[str, Any] = {"name": b.name, "attributes": b.attributes}
    if b.capacity:
        out["capacity"] = b.capacity
    taints = _taints(part, domain)
    if taints:
        out["taints"] = taints
    return out


def resource_slices(
    inv: HostInventory,
    *,
    domain: str = DEFAULT_DOMAIN,
    node_name: str | None = None,
    generation: int = 1,
    include_partitions: bool = True,
) -> DraProjection:
    """ResourceSlices for one host: one pool per vendor driver (``<vendor>.<domain>``)."""
    if not _DNS_SUBDOMAIN.match(domain) or len(domain) > 63:
        raise ConfigError(f"DRA domain must be a DNS subdomain of at most 63 characters, got {domain!r}")
    if generation < 0:
        raise ConfigError(f"pool generation must be >= 0, got {generation}")
    node = node_name or inv.host.hostname
    projection = DraProjection()
    by_vendor: dict[str, list[dict[str, Any]]] = {}
    parents = {d.id: d for d in inv.devices}
    for dev in inv.devices:
        by_vendor.setdefault(dev.vendor, []).append(_project_device(dev, inv, domain, projection.omitted))
    if include_partitions:
        for part in inv.partitions:
            parent = parents[part.parent_id]
            by_vendor.setdefault(parent.vendor, []).append(
                _project_partition(part, parent, domain, projection.omitted)
            )
    for vendor, devices in sorted(by_vendor.items()):
        driver = f"{vendor}.{domain}"
        if len(driver) > 63:
            raise ConfigError(f"DRA driver name {driver!r} is longer than 63 characters")
        names = [d["name"] for d in devices]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError(f"DRA device names collide in pool {node!r}: {', '.join(dup)}")
        per_slice = MAX_DEVICES_WITH_TAINTS if any("taints" in d for d in devices) else MAX_DEVICES
        chunks = [devices[i : i + per_slice] for i in range(0, len(devices), per_slice)] or [[]]
        for n, chunk in enumerate(chunks):
            projection.slices.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": _label(f"{node}-{driver}-{n}", 253)},
                    "spec": {
                        "driver": driver,
                        "nodeName": node,
                        "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                        "devices": chunk,
                    },
                }
            )
    return projection
