"""The host inventory: each GPU's reading over its static device, validated once, then the host.

A GPU's reading is what changed since its static device (:class:`Pending`); a device whose
reading equals the previous one is the previous object (an idle GPU read every scrape rebuilds
nothing).  Topology, when asked for, comes from :class:`._topology.Topology`; the core's sysfs
pass fills PCIe places and NUMA, and then the NVML-derived PCIe links give way to its own.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from accel.toolkit import unsupported_of

from ...errors import AccelError, DeviceLostError
from ...model import (
    Capabilities,
    Device,
    Domain,
    Health,
    Host,
    HostInventory,
    Link,
    MemoryKind,
    MemoryRegion,
    Partition,
    PartitionProfile,
    PciInfo,
    Problem,
    ProcessUsage,
    SourceInfo,
)
from ...plugin import BackendConfig, Reading, describe_readings
from ...sysfs import enrich_inventory
from ._handles import Handles, NvmlPart
from ._health_read import HealthReader
from ._memory import UNREAD, MemoryReader
from ._mig import Mig, partition_mode
from ._processes import Processes
from ._samples import Sample, Sampler
from ._static import Static, StaticReader
from ._topology import ANCESTOR, Topology

__all__ = ["NO_HEALTH", "InventoryBuilder", "Parts", "Pending"]

#: The health of a read that was not asked for health: unknown, not monitored, no checked_at.
#: Models are frozen, so one validated instance serves every such device.
NO_HEALTH = Health.unknown()

_Snapshot = tuple["Pending | None", list[Partition], list[ProcessUsage], tuple[PartitionProfile, ...]]


@dataclass
class Pending:
    """One GPU's reading before its single validation: the static device and what changed."""

    base: Device
    update: dict[str, Any]
    #: Capability flags this reading learned (``ecc``); ``p2p`` is added for all GPUs at once.
    capabilities: dict[str, Any]


def with_reading(base: Device, update: dict[str, Any]) -> Device:
    """The static device with one reading's values, validated once.

    Every value in ``update`` is a model this reading validated (memory, PCI, health, partition
    mode, capabilities: bounds checked there; pydantic does not revalidate instances), and the
    device's own validators (id, vendor, extras) look only at fields a reading never changes,
    except ``unsupported``.  So the device itself is validated again only when ``unsupported``
    differs from the static device's, which was validated when it was built.
    """
    if update.get("unsupported", base.unsupported) != base.unsupported:
        return Device.model_validate({**base.__dict__, **update})
    return base.model_copy(update=update)


@dataclass
class Parts:
    """The collaborators an inventory reads through."""

    handles: Handles
    statics: StaticReader
    sampler: Sampler
    memory: MemoryReader
    mig: Mig
    processes: Processes
    health: HealthReader
    topology: Topology


class InventoryBuilder(NvmlPart):
    """Builds :class:`HostInventory` s; lends each GPU's reading to the next telemetry call."""

    def __init__(self, parts: Parts, config: BackendConfig, *, plugin_version: str, scenario: str | None,
                 loans: dict[int, tuple[float, Sample, MemoryRegion]]) -> None:
        super().__init__(parts.handles)
        self._p = parts
        self._config = config
        self._plugin_version = plugin_version
        self._scenario = scenario
        self._readings = config.readings
        #: The reading inventory() just took per GPU (monotonic time, sample, memory), lent once to
        #: the telemetry() call that follows it (the backend decides how long a loan lasts).
        self._loans = loans
        #: Per device id: the static device, the last reading's changes and the device built from them.
        self._last: dict[str, tuple[Device, dict[str, Any], Device]] = {}
        self._caps: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Capabilities, Capabilities]] = {}
        #: os.cpu_count() reads sysfs on Linux; the host's Host model is rebuilt only when its
        #: hostname changes.
        self._cpu_count = os.cpu_count()
        self._host: Host | None = None

    def _wants(self, reading: Reading) -> bool:
        return self._readings is None or reading in self._readings

    def build(self, count: int, at: datetime) -> HostInventory:
        """The inventory of the first ``count`` GPUs, read at ``at``."""
        pending: list[Pending] = []
        partitions: list[Partition] = []
        profiles: list[PartitionProfile] = []
        processes: list[ProcessUsage] = []
        skipped: list[int] = []
        for i in range(count):
            dev, parts, procs, profs = self.snapshot(i, at)
            if dev is None:
                skipped.append(i)
                continue
            pending.append(dev)
            partitions += parts
            processes += procs
            profiles += profs
        idx = {p.base.id: p.base.index if p.base.index is not None else -1 for p in pending}
        devices = self._devices(pending, idx)
        links: list[Link] = []
        domains: list[Domain] = []
        problems: list[Problem] = []
        if self._wants(Reading.TOPOLOGY):
            links, domains, problems = self._p.topology.links(devices, idx)
        inv = HostInventory(
            host=self._host_model(),
            devices=tuple(devices), partitions=tuple(partitions), partition_profiles=tuple(profiles),
            links=tuple(links), domains=tuple(domains), processes=tuple(processes), collected_at=at,
            sources=(SourceInfo(backend="nvidia", plugin_version=self._plugin_version, api="nvml",
                                api_version=self._p.statics.nvml_version, detail=self._detail(skipped)),),
            problems=tuple(problems),
        )
        # Its own sysfs pass decides which NVML-derived PCIe links to drop; without topology
        # there are none, and the session fills PCIe place and NUMA when enrich_from_sysfs.
        if self._use_sysfs() and (self._wants(Reading.TOPOLOGY) or not self._config.enrich_from_sysfs):
            inv = enrich_inventory(inv, self._config.sysfs_root)
            if any(d.pci is not None and d.pci.bridge_path is not None for d in inv.devices):
                # sysfs knows the PCI tree: drop NVML-derived PCIe links, the core derives them.
                keep = tuple(lk for lk in inv.links if lk.type not in ANCESTOR.values())
                inv = HostInventory.model_validate({**inv.__dict__, "links": keep})
        return inv

    def _detail(self, skipped: list[int]) -> str | None:
        detail = []
        if self._scenario:
            detail.append(f"fake NVML scenario {self._scenario!r} (test facility, not hardware)")
        if skipped:
            detail.append(f"GPU indices {skipped} could not be read (lost before identification)")
        if self._readings is not None:
            detail.append(describe_readings(self._readings))
        return "; ".join(detail) or None

    def _devices(self, pending: list[Pending], idx: dict[str, int]) -> list[Device]:
        p2p = self._p.topology.p2p_of([p.base.id for p in pending], idx)
        devices: list[Device] = []
        for p in pending:
            caps = dict(p.capabilities)
            if p.base.id in p2p:
                caps["p2p"] = p2p[p.base.id]
            update = dict(p.update)
            if caps:
                update["capabilities"] = self._capabilities(p.base, caps)
            # A device whose reading equals the previous one is the previous object: an
            # idle GPU read every scrape rebuilds nothing.  Models compare by value.
            last = self._last.get(p.base.id)
            if last is not None and last[0] is p.base and last[1] == update:
                devices.append(last[2])
                continue
            built = with_reading(p.base, update)
            self._last[p.base.id] = (p.base, update, built)
            devices.append(built)
        return devices

    def snapshot(self, index: int, at: datetime) -> _Snapshot:
        """One GPU's reading: what changed since its static device, validated later, once."""
        p = self._p
        lost = self._lost
        try:
            st = p.statics.static(index)
        except DeviceLostError:
            lost.setdefault(index, at)
            return None, [], [], ()
        except AccelError:
            return None, [], [], ()
        if index in lost:
            return self.lost_device(st, at), [], [], st.profiles
        errors_or_health = self._wants(Reading.ERRORS) or self._wants(Reading.HEALTH)
        topology = self._wants(Reading.TOPOLOGY)
        gen = width = None
        procs: list[ProcessUsage] = []
        try:
            h = self._handle(index)
            s = p.sampler.sample(index)
            ecc = self._get(s.read, None, "nvmlDeviceGetEccMode", h) if errors_or_health else UNREAD
            memory = p.memory.read(s.read, h, st.device.memory[0].kind if st.device.memory else MemoryKind.UNKNOWN,
                                   ecc)
            parts, mig_pending = p.mig.partitions(st, h, s.read)
            profiles = p.mig.profiles(st, h)
            if topology:
                gen = self._get(s.read, None, "nvmlDeviceGetCurrPcieLinkGeneration", h)
                width = self._get(s.read, None, "nvmlDeviceGetCurrPcieLinkWidth", h)
            if self._wants(Reading.PROCESSES):
                procs = p.processes.read(st, h, parts)
            # Health is earned: a read that was not asked for health reads none and claims none.
            health = p.health.health(index, s, at) if self._wants(Reading.HEALTH) else NO_HEALTH
            self._loans[index] = (time.monotonic(), s, memory)
            if topology:
                p.topology.down_links[st.device_id] = s.down_links([lk.index for lk in st.nvlinks])
            mig_on = bool(parts) or bool(s.read.mig_enabled)
        except DeviceLostError:
            lost.setdefault(index, at)
            return self.lost_device(st, at), [], [], st.profiles
        st.memory = memory
        return self._pending(st, s, memory, health, mig_on, mig_pending, ecc, (gen, width) if topology else None), \
            parts, procs, profiles

    def _pending(self, st: Static, s: Sample, memory: MemoryRegion, health: Health, mig_on: bool,
                 mig_pending: bool | None, ecc: Any, link: tuple[Any, Any] | None) -> Pending:
        dev = st.device
        update: dict[str, Any] = {
            "memory": (memory,), "health": health,
            "unsupported": frozenset(),
            "partition_mode": partition_mode(mig_on, mig_pending),
        }
        if link is not None and dev.pci is not None:
            # Validated here (bounds of the two new values), once per reading.
            update["pci"] = PciInfo.model_validate({**dev.pci.__dict__, "link_gen_current": link[0],
                                                    "link_width_current": link[1]})
        # The one rule (accel.toolkit.unsupported_of): what NVML answered NOT_SUPPORTED for and
        # is still empty after this reading.
        update["unsupported"] = unsupported_of({**dev.__dict__, **update}, st.unsupported | s.read.unsupported)
        caps: dict[str, Any] = {"ecc": True} if ecc is not None and ecc is not UNREAD else {}
        return Pending(st.device, update, caps)

    def lost_device(self, st: Static, at: datetime) -> Pending:
        update: dict[str, Any] = {"health": self._p.health.health(st.index, None, at)}
        if st.memory is not None:
            update["memory"] = (st.memory,)
        return Pending(st.device, update, {})

    def _host_model(self) -> Host:
        name = socket.gethostname() or "localhost"
        if self._host is None or self._host.hostname != name:
            self._host = Host(hostname=name, cpu_count=self._cpu_count)
        return self._host

    def _use_sysfs(self) -> bool:
        # A fake host's bus ids say nothing about this machine's /sys.
        return not (self._scenario and self._config.sysfs_root == Path("/sys"))

    def _capabilities(self, base: Device, flags: dict[str, Any]) -> Capabilities:
        """The static device's capabilities with this reading's flags, validated once per
        distinct set (a few per GPU: ecc and p2p each take two or three values)."""
        key = (base.id, tuple(sorted(flags.items())))
        cached = self._caps.get(key)
        if cached is not None and cached[0] is base.capabilities:
            return cached[1]
        caps = Capabilities.model_validate({**base.capabilities.__dict__, **flags})
        self._caps[key] = (base.capabilities, caps)
        return caps
