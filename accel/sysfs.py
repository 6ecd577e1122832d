"""PCIe and NUMA facts from sysfs, the same for every vendor.

Plugins report bus ids; this module turns them into a place in the PCI tree (root complex and
bridge path), a NUMA node and a CPU affinity, from which :func:`accel.model.pcie_level` derives
PIX / PXB / PHB / NODE / SYS.  Every function takes ``root`` (``/sys`` by default) so tests run
on a fake tree in a temporary directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .model import Device, HostInventory, NumaNode, PciInfo
from .model._pci import BUS_ID

__all__ = ["PciFunction", "enrich_inventory", "numa_nodes", "pci_function", "scan_pci"]

_CPULIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
_ROOT = re.compile(r"^pci([0-9a-f]{4}):([0-9a-f]{2})$")


@dataclass(frozen=True)
class PciFunction:
    """One PCI function as sysfs shows it."""

    bus_id: str
    vendor_id: str | None
    device_id: str | None
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    class_code: str | None
    numa_node: int | None
    cpu_affinity: str | None
    pcie_root: str | None
    bridge_path: tuple[str, ...] | None
    is_virtual_function: bool
    parent_bus_id: str | None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _hex4(text: str | None) -> str | None:
    if not text:
        return None
    value = text.lower().removeprefix("0x")
    return value[-4:].rjust(4, "0") if re.fullmatch(r"[0-9a-f]{1,8}", value) else None


def _class(text: str | None) -> str | None:
    if not text:
        return None
    value = text.lower().removeprefix("0x")
    return value.rjust(6, "0") if re.fullmatch(r"[0-9a-f]{1,6}", value) else None


def pci_function(bus_id: str, root: Path = Path("/sys")) -> PciFunction | None:
    """Read one function by canonical bus id; ``None`` when sysfs has no such device."""
    # Checked on a plain string first: the Session asks this for every device on every read,
    # and a bus id sysfs does not know (a fake or replayed host) should cost one stat, not paths.
    if not os.path.exists(os.path.join(root, "bus", "pci", "devices", bus_id)):
        return None
    link = root / "bus" / "pci" / "devices" / bus_id
    try:
        real = Path(os.path.realpath(link))
    except OSError:
        real = link
    pcie_root: str | None = None
    bridges: list[str] = []
    for part in real.parts:
        if _ROOT.match(part):
            pcie_root = part
            bridges = []
        elif pcie_root is not None and BUS_ID.match(part):
            bridges.append(part)
    if bridges and bridges[-1] == bus_id:
        bridges.pop()
    numa_text = _read(link / "numa_node")
    numa: int | None = None
    if numa_text is not None and re.fullmatch(r"-?[0-9]+", numa_text):
        numa = int(numa_text) if int(numa_text) >= 0 else None
    cpus = _read(link / "local_cpulist")
    physfn = link / "physfn"
    parent = None
    if physfn.exists():
        parent = Path(os.path.realpath(physfn)).name
        parent = parent if BUS_ID.match(parent) else None
    return PciFunction(
        bus_id=bus_id,
        vendor_id=_hex4(_read(link / "vendor")),
        device_id=_hex4(_read(link / "device")),
        subsystem_vendor_id=_hex4(_read(link / "subsystem_vendor")),
        subsystem_device_id=_hex4(_read(link / "subsystem_device")),
        class_code=_class(_read(link / "class")),
        numa_node=numa,
        cpu_affinity=cpus if cpus and _CPULIST.match(cpus) else None,
        pcie_root=pcie_root,
        bridge_path=tuple(bridges) if pcie_root is not None else None,
        is_virtual_function=parent is not None,
        parent_bus_id=parent,
    )


def scan_pci(
    root: Path = Path("/sys"),
    *,
    vendor_ids: Iterable[str] = (),
    class_prefixes: Iterable[str] = (),
) -> list[PciFunction]:
    """Every PCI function whose vendor id is in ``vendor_ids`` and class starts with a prefix.

    Cheap enough for a probe: reads a few small files per device, loads no library.  An
    unreadable or missing ``/sys/bus/pci/devices`` gives an empty list.
    """
    vendors = {v.lower().removeprefix("0x") for v in vendor_ids}
    prefixes = tuple(p.lower().removeprefix("0x") for p in class_prefixes)
    base = root / "bus" / "pci" / "devices"
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    found: list[PciFunction] = []
    for name in names:
        if not BUS_ID.match(name):
            continue
        if vendors and _hex4(_read(base / name / "vendor")) not in vendors:
            continue
        fn = pci_function(name, root)
        if fn is None:
            continue
        if prefixes and not (fn.class_code or "").startswith(prefixes):
            continue
        found.append(fn)
    return found


def numa_nodes(root: Path = Path("/sys")) -> tuple[NumaNode, ...]:
    """NUMA nodes with their cpusets and memory, from ``devices/system/node``."""
    base = root / "devices" / "system" / "node"
    try:
        names = sorted(n for n in os.listdir(base) if re.fullmatch(r"node[0-9]+", n))
    except OSError:
        return ()
    nodes = []
    for name in sorted(names, key=lambda n: int(n[4:])):
        cpus = _read(base / name / "cpulist")
        mem = None
        meminfo = _read(base / name / "meminfo") or ""
        m = re.search(r"MemTotal:\s+([0-9]+)\s*kB", meminfo)
        if m:
            mem = int(m.group(1)) * 1024
        cpuset = cpus if cpus and _CPULIST.match(cpus) else None
        nodes.append(NumaNode(id=int(name[4:]), cpuset=cpuset, memory_bytes=mem))
    return tuple(nodes)


def _enrich_device(dev: Device, fn: PciFunction) -> Device:
    pci = dev.pci or PciInfo(bus_id=fn.bus_id)
    pci_update: dict[str, object] = {
        k: v
        for k, v in {
            "vendor_id": fn.vendor_id,
            "device_id": fn.device_id,
            "subsystem_vendor_id": fn.subsystem_vendor_id,
            "subsystem_device_id": fn.subsystem_device_id,
            "class_code": fn.class_code,
            "pcie_root": fn.pcie_root,
            "bridge_path": fn.bridge_path,
        }.items()
        if v is not None and getattr(pci, k) is None
    }
    if fn.is_virtual_function and pci.is_virtual_function is None:
        pci_update["is_virtual_function"] = True
        pci_update["parent_bus_id"] = fn.parent_bus_id
    update: dict[str, object] = {}
    if pci_update:
        update["pci"] = pci.model_copy(update=pci_update)
    if dev.numa_node is None and fn.numa_node is not None:
        update["numa_node"] = fn.numa_node
    if dev.cpu_affinity is None and fn.cpu_affinity is not None:
        update["cpu_affinity"] = fn.cpu_affinity
    return dev.model_copy(update=update) if update else dev


def enrich_inventory(
    inv: HostInventory, root: Path = Path("/sys"), *, nodes: tuple[NumaNode, ...] | None = None
) -> HostInventory:
    """Fill PCI place, NUMA node and CPU affinity from sysfs where the backend left them empty.

    Values the backend reported win; a device sysfs does not know is left as it is.  ``nodes``:
    the host's NUMA nodes as the caller already read them (:func:`numa_nodes`); ``None`` reads
    them here.
    """
    devices = []
    changed = False
    for dev in inv.devices:
        fn = pci_function(dev.pci.bus_id, root) if dev.pci is not None else None
        new = _enrich_device(dev, fn) if fn is not None else dev
        changed = changed or new is not dev
        devices.append(new)
    host = inv.host
    if not host.numa_nodes:
        if nodes is None:
            nodes = numa_nodes(root)
        if nodes:
            host = host.model_copy(update={"numa_nodes": nodes})
            changed = True
    if not changed:
        return inv
    return inv.model_copy(update={"devices": tuple(devices), "host": host})
