"""The AMD backend: pyrsmi, amdsmi and amdgpu sysfs merged into one inventory.

Layers, in priority order per part (``sources`` in the inventory says which gave what):

1. ``pyrsmi`` for what it reports (names, PCI ids, memory, utilisation, power), its sentinels
   turned into ``None``;
2. ``amdsmi`` where it imports: RAS / ECC per block, bad pages, temperatures, power caps,
   clocks, firmware, serial, xGMI hive and links, NUMA, CPX/NPS partitions, processes;
3. amdgpu sysfs as the fallback (and the topology source when amdsmi is absent: the xGMI hive
   file and the KFD io-links), then the core's PCIe / NUMA enrichment.

Handles that share a PCI bus id are partitions of one physical device (CPX: 8 per MI300X).
No pyrsmi or amdsmi exception leaves this module: the boundary modules map them, and one
unreadable device is skipped (and logged) without hiding the others.

A GPU that falls off the bus (amdsmi answers ``AMDSMI_STATUS_NOT_FOUND`` on its handle, or it
vanishes from every layer after having been seen) stays in the inventory with its last known
identity and ``Health(operational=LOST)`` plus a ``DeviceLost`` condition; ``telemetry()``
omits it and ``telemetry([lost])`` raises :class:`~accel.errors.DeviceLostError`.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accel.errors import (
    AccelError,
    BackendUnavailableError,
    ConfigError,
    DeviceError,
    DeviceLostError,
    DriverError,
    LibraryNotFoundError,
    NotSupportedError,
    PartitionCreateFailedError,
    PartitionNoPlacementError,
    PartitionNotFoundError,
)
from accel.model import (
    Action,
    Device,
    Health,
    HealthCondition,
    Host,
    HostInventory,
    Operational,
    Partition,
    PartitionProfile,
    ProcessUsage,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
)
from accel.plugin import Backend, BackendConfig
from accel.sysfs import enrich_inventory

from ._amdgpu_sysfs import driver_live, kfd_xgmi_pairs, read_cards
from ._amdsmi import AmdSmiReader, load_amdsmi
from ._build import AMD, build_devices, domains_for, links_for, processes_for, telemetry_for
from ._carve import XcpCarver
from ._plugin import VERSION
from ._pyrsmi import PyrsmiReader, pyrsmi_version, read_all
from ._readings import GpuReading, merge

__all__ = ["AmdBackend"]

_LOG = logging.getLogger("accel.plugins.amd")

#: Parts only amdsmi can give (pyrsmi has none of them); without amdsmi, those still empty
#: after the sysfs fallback are reported as ``unsupported``.
_AMDSMI_ONLY = (
    "serial_number",
    "isa",
    "architecture",
    "compute_units",
    "max_clock_hertz",
    "memory_max_clock_hertz",
    "memory_generation",
    "power_cap_watts",
    "power_cap_default_watts",
    "power_cap_min_watts",
    "power_cap_max_watts",
    "temp_slowdown_celsius",
    "temp_shutdown_celsius",
    "firmware",
    "form_factor",
    "ecc_enabled",
    "ecc_supported",
)
_TELEMETRY_AMDSMI_ONLY = ("clocks_hertz", "throttle_reasons", "fan_ratio", "energy_joules")

#: Parts that describe a whole physical device, safe to copy from sysfs into every partition.
#: The vendor code of a GPU amdsmi no longer finds behind its handle (amdsmi status 31).
_LOST_AMDSMI = "amd.smi:AMDSMI_STATUS_NOT_FOUND"
#: A GPU that was seen and now answers no layer at all (pyrsmi gives -1, its DRM card is gone).
_LOST_VANISHED = "amd.sysfs:drm-card-removed"

_DEVICE_LEVEL_SKIP = ("memory_total_bytes", "memory_used_bytes", "utilization_ratio",
                      "memory_utilization_ratio", "compute_units", "render_node", "card_node")


@dataclass
class _Snapshot:
    devices: list[Device]
    groups: list[list[GpuReading]]
    partitions: list[Partition]
    profiles: list[PartitionProfile]
    processes: list[ProcessUsage]
    pairs: list[tuple[str, str]]
    layer_parts: dict[str, set[str]]
    #: Ids of the devices in ``devices`` that are lost (their ``groups`` entry is empty).
    lost: frozenset[str] = frozenset()


class AmdBackend(Backend):
    """An open AMD backend (see the module docstring for the layers)."""

    def __init__(self, config: BackendConfig) -> None:
        self._config = config
        self._install: Any = None
        self._root: Path = config.sysfs_root
        self._amdsmi: AmdSmiReader | None = None
        self._pyrsmi: PyrsmiReader | None = None
        self._notes: list[str] = []
        self._closed = False
        self._closed_calls = 0
        # Memory for lost-device reporting: the last good Device per bus id (enriched when an
        # inventory() made it), its first-seen order, the bus id behind each amdsmi handle index,
        # and when each lost device was first seen lost.
        self._known: dict[str, Device] = {}
        self._lost_since: dict[str, datetime] = {}
        self._handle_bus: dict[int, str] = {}
        self._carver: XcpCarver | None = None
        #: Held by a mode change and by every read: a read never sees the layers half re-opened.
        self._carve_lock = threading.RLock()
        name = config.option("scenario")
        if name:
            from .testing import SCENARIOS, Installation

            host = SCENARIOS.get(str(name))
            if host is None:
                raise ConfigError(f"unknown amd scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
            self._install = Installation(host, build_sysfs=True).apply()
            self._root = self._install.sysfs_root
        try:
            self._open_layers()
        except BaseException:
            self.close()
            raise
        if self._amdsmi is not None:
            self._carver = XcpCarver(self._amdsmi, self._reenumerate)

    # -- lifecycle ----------------------------------------------------------------------------
    def _open_layers(self) -> None:
        errors: list[AccelError] = []
        module, why = load_amdsmi()
        if module is None:
            self._notes.append(why)
        else:
            reader = AmdSmiReader(module)
            try:
                reader.open()
                self._amdsmi = reader
            except AccelError as exc:
                errors.append(exc)
                self._notes.append(f"amdsmi: {exc}")
        py = PyrsmiReader(module)
        try:
            py.open()
            self._pyrsmi = py
        except AccelError as exc:
            errors.append(exc)
            self._notes.append(f"pyrsmi: {exc}")
        cards = read_cards(self._root, (AMD.pci_vendor_id,))
        if self._amdsmi is None and self._pyrsmi is None and not cards:
            # Like every backend, open() fails with BackendUnavailableError; the cause says why
            # and ``code`` tells a driver that is not live from a library that is missing.
            detail = "; ".join(self._notes) or "no layer answered"
            cause: AccelError
            if any(e.code == "driver.not-loaded" for e in errors) or driver_live(self._root) is False:
                cause = DriverError(f"the amdgpu driver is not live ({detail})", code="driver.not-loaded")
            elif any(isinstance(e, LibraryNotFoundError) for e in errors) or module is None:
                cause = LibraryNotFoundError(f"no usable AMD library and no amdgpu sysfs cards ({detail})")
            else:
                cause = AccelError(f"nothing to read ({detail})")
            raise BackendUnavailableError(f"AMD backend unavailable: {cause}", plugin="amd",
                                          code=cause.code) from cause

    def _reenumerate(self) -> AmdSmiReader:
        """Re-open every layer after a partition-mode change: the processors re-enumerate (CPX
        shows 8 per GPU) and each library's handles of before are stale."""
        self._closed_calls += sum(r.calls for r in (self._amdsmi, self._pyrsmi) if r is not None)
        for reader in (self._pyrsmi, self._amdsmi):
            if reader is not None:
                try:
                    reader.close()
                except AccelError as exc:
                    _LOG.debug("amd re-open: %s", exc)
        self._pyrsmi = self._amdsmi = None
        self._notes = []
        self._handle_bus.clear()
        self._open_layers()
        if self._amdsmi is None:
            raise DriverError("amdsmi did not open again after a partition-mode change: "
                              + ("; ".join(self._notes) or "no reason given"))
        return self._amdsmi

    @property
    def name(self) -> str:
        return "amd"

    @property
    def vendor_call_count(self) -> int:
        """Cumulative pyrsmi and amdsmi calls (the conformance kit's ``ReportsCost``)."""
        return sum(r.calls for r in (self._amdsmi, self._pyrsmi) if r is not None) + self._closed_calls

    def inject_fault(self, fault: object, device_id: str) -> None:
        """Conformance hook, only over a fake scenario: ``device_lost`` or ``health_not_supported``.

        ``device_lost`` makes the GPU fall off the bus in every fake layer (amdsmi answers
        ``NOT_FOUND``, pyrsmi -1, its DRM card leaves sysfs); ``health_not_supported`` makes its
        RAS / ECC / bad-page / xGMI / throttle queries answer ``NOT_SUPPORTED``.  Raises
        NotSupportedError when the backend reads real libraries or the fault is unknown.
        """
        self._check_open()
        kind = str(getattr(fault, "value", fault))
        if self._install is None:
            raise NotSupportedError("fault injection needs a fake amd scenario (option 'scenario')",
                                    device_id=device_id)
        dev = next((d for d in self._known.values() if d.id == device_id), None)
        if dev is None:
            self._snapshot()
            dev = next((d for d in self._known.values() if d.id == device_id), None)
        if dev is None or dev.pci is None:
            raise DeviceError(f"no amd device {device_id!r}", device_id=device_id)
        index = self._install.gpu_index(dev.pci.bus_id)
        if kind == "device_lost":
            self._install.lose_gpu(index)
        elif kind == "health_not_supported":
            self._install.make_health_unsupported(index)
        else:
            raise NotSupportedError(f"unknown fault {kind!r}", device_id=device_id)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closed_calls = self.vendor_call_count
        for reader in (self._pyrsmi, self._amdsmi):
            if reader is not None:
                try:
                    reader.close()
                except AccelError as exc:  # closing must not fail
                    _LOG.debug("amd close: %s", exc)
        self._pyrsmi = self._amdsmi = None
        if self._install is not None:
            self._install.cleanup()
            self._install = None

    def _check_open(self) -> None:
        if self._closed:
            raise BackendUnavailableError("the amd backend is closed", plugin="amd")

    # -- reading ------------------------------------------------------------------------------
    def _snapshot(self) -> _Snapshot:
        with self._carve_lock:
            return self._read_snapshot()

    def _read_snapshot(self) -> _Snapshot:
        self._check_open()
        amd, handles, lost_codes = self._read_amdsmi()
        py: dict[str, list[GpuReading]] = {}
        if self._pyrsmi is not None:
            for r in read_all(self._pyrsmi):
                if r.bus_id:
                    py.setdefault(r.bus_id, []).append(r)
        sysfs = {r.bus_id: r for r in read_cards(self._root, (AMD.pci_vendor_id,)) if r.bus_id}
        # A device amdsmi reports lost is lost even where another layer still shows a trace of
        # it; one seen before that no layer shows any more has fallen off the bus as well.
        for bus in self._known:
            if bus not in lost_codes and bus not in amd and bus not in py and bus not in sysfs:
                lost_codes[bus] = _LOST_VANISHED
        for bus in lost_codes:
            amd.pop(bus, None)
            py.pop(bus, None)
            sysfs.pop(bus, None)
            handles.pop(bus, None)
        groups, layer_parts = _merged_groups(amd, py, sysfs)
        never = _AMDSMI_ONLY if self._amdsmi is None else ()
        devices, partitions, profiles = build_devices(groups, AMD, unsupported=never)
        for dev in devices:
            if dev.pci is not None and dev.pci.bus_id:
                self._lost_since.pop(dev.pci.bus_id, None)
                if dev.pci.bus_id not in self._known or self._known[dev.pci.bus_id].id != dev.id:
                    self._known[dev.pci.bus_id] = dev
        lost_ids = set()
        for bus, code in lost_codes.items():
            known = self._known.get(bus)
            if known is None:
                continue  # never seen: nothing to keep an identity of
            devices.append(self._lost_device(known, code))
            groups.append([])
            lost_ids.add(known.id)
        # First-seen order, so a lost device keeps its place (and the survivors theirs).
        seen = {bus: k for k, bus in enumerate(self._known)}
        ranked = sorted(zip(devices, groups, strict=True),
                        key=lambda dg: seen.get(dg[0].pci.bus_id if dg[0].pci else "", len(seen)))
        devices = [d for d, _ in ranked]
        groups = [g for _, g in ranked]
        pairs = self._pairs(handles, devices)
        procs = _processes(devices, groups, partitions)
        profiles = self._profiles(devices, handles, profiles, lost_ids)
        return _Snapshot(devices, groups, partitions, profiles, procs, pairs, layer_parts, frozenset(lost_ids))

    def _profiles(self, devices: Sequence[Device], handles: dict[str, Any], live: list[PartitionProfile],
                  lost: set[str]) -> list[PartitionProfile]:
        """Each device's profiles: a whole device (SPX + NPS1) offers every mode the library lists
        (:mod:`._carve`); a partitioned one its live mode's profile (destroy it to choose another)."""
        carver = self._carver
        if carver is None:
            return live
        out: list[PartitionProfile] = []
        for dev in devices:
            mode = dev.partition_mode
            mine = [p for p in live if p.parent_id == dev.id]
            whole = (mode.compute_mode in (None, "spx") and mode.memory_mode in (None, "nps1")) and not mine
            bus = dev.pci.bus_id if dev.pci else None
            if whole and dev.id not in lost and bus in handles:
                out.extend(carver.catalog(dev, handles[bus]))
            else:
                out.extend(mine)
        return out

    def _read_amdsmi(self) -> tuple[dict[str, list[GpuReading]], dict[str, Any], dict[str, str]]:
        """amdsmi's readings and handles by bus id, and the bus ids of GPUs it reports lost."""
        amd: dict[str, list[GpuReading]] = {}
        handles: dict[str, Any] = {}
        lost_codes: dict[str, str] = {}
        if self._amdsmi is None:
            return amd, handles, lost_codes
        try:
            hs = self._amdsmi.handles()
        except AccelError as exc:
            _LOG.debug("amdsmi handles: %s", exc)
            hs = []
        for i, h in enumerate(hs):
            try:
                r = self._amdsmi.read(h, i)
            except DeviceLostError as exc:
                bus = self._handle_bus.get(i)
                _LOG.debug("amdsmi handle %d (%s) lost: %s", i, bus, exc)
                if bus is not None:
                    lost_codes[bus] = _LOST_AMDSMI
                continue
            except AccelError as exc:
                _LOG.debug("amdsmi handle %d unreadable: %s", i, exc)
                continue
            if r.bus_id:
                self._handle_bus[i] = r.bus_id
                amd.setdefault(r.bus_id, []).append(r)
                handles.setdefault(r.bus_id, h)
        return amd, handles, lost_codes

    def _lost_device(self, known: Device, code: str) -> Device:
        """``known`` (its last good reading) with lost health: Operational.LOST and DeviceLost."""
        bus = known.pci.bus_id if known.pci else known.id
        since = self._lost_since.setdefault(bus, datetime.now(UTC))
        why = ("amdsmi no longer finds it behind its handle (AMDSMI_STATUS_NOT_FOUND)" if code == _LOST_AMDSMI
               else "it no longer answers pyrsmi or amdsmi and its DRM card left sysfs")
        condition = HealthCondition(
            subsystem=Subsystem.PCIE,
            reason="DeviceLost",
            severity=Severity.FATAL,
            action=Action.REBOOT_NODE,
            vendor_code=code,
            message=f"GPU {bus} fell off the bus: {why}",
            first_seen=since,
            last_seen=datetime.now(UTC),
        )
        health = Health(
            operational=Operational.LOST, monitored=True, conditions=(condition,), checked_at=datetime.now(UTC)
        )
        return Device.model_validate({**dict(known), "health": health})

    def _pairs(self, handles: dict[str, Any], devices: Sequence[Device]) -> list[tuple[str, str]]:
        """xGMI-linked bus-id pairs: amdsmi link type 2 at one hop, else the KFD io-links."""
        pairs: list[tuple[str, str]] = []
        if self._amdsmi is not None and len(handles) > 1:
            buses = sorted(handles)
            for i, a in enumerate(buses):
                for b in buses[i + 1 :]:
                    link = self._amdsmi.link(handles[a], handles[b])
                    if link is not None and link[1] == 2 and link[0] == 1:
                        pairs.append((a, b))
            if pairs:
                return pairs
        return [(a, b) for a, b, _ in kfd_xgmi_pairs(self._root)]

    def _sources(self, snap: _Snapshot, pairs_from: str) -> tuple[SourceInfo, ...]:
        out = []
        versions = {"pyrsmi": pyrsmi_version(), "amdsmi": None, "sysfs": None}
        apis = {"pyrsmi": f"pyrsmi ({self._pyrsmi.mode} mode)" if self._pyrsmi else "pyrsmi",
                "amdsmi": "amdsmi", "sysfs": "amdgpu-sysfs"}
        for layer in ("pyrsmi", "amdsmi", "sysfs"):
            parts = snap.layer_parts.get(layer)
            if not parts:
                continue
            shown = sorted(parts - {"*"})
            detail = ", ".join(shown[:40]) + (" ..." if len(shown) > 40 else "")
            out.append(SourceInfo(backend="amd", plugin_version=VERSION, api=apis[layer],
                                  api_version=versions[layer], detail=f"gave: {detail}"))
        if snap.pairs:
            out.append(SourceInfo(backend="amd", plugin_version=VERSION, api=pairs_from,
                                  detail="xGMI links and hive"))
        if self._notes:
            out.append(SourceInfo(backend="amd", plugin_version=VERSION, api="notes",
                                  detail="; ".join(self._notes)[:500]))
        return tuple(out)

    # -- Backend API --------------------------------------------------------------------------
    def inventory(self) -> HostInventory:
        snap = self._snapshot()
        links = links_for(snap.pairs, snap.devices)
        domains = domains_for(snap.devices, AMD)
        pairs_from = "amdsmi" if self._amdsmi is not None else "kfd-sysfs"
        inv = HostInventory(
            host=Host(hostname=socket.gethostname() or "localhost"),
            devices=tuple(snap.devices),
            partitions=tuple(snap.partitions),
            partition_profiles=tuple(snap.profiles),
            links=tuple(links),
            domains=tuple(domains),
            processes=tuple(snap.processes),
            collected_at=datetime.now(UTC),
            sources=self._sources(snap, pairs_from),
        )
        out = enrich_inventory(inv, self._root)
        for dev in out.devices:
            # The enriched reading (PCIe root, NUMA, CPU affinity) is the identity a lost device
            # keeps: its sysfs nodes may be gone by the time it is lost.
            if dev.id not in snap.lost and dev.pci is not None and dev.pci.bus_id in self._known:
                self._known[dev.pci.bus_id] = dev
        return out

    def _select(self, devices: Sequence[Device], ids: Sequence[str] | None) -> list[int]:
        if ids is None:
            return list(range(len(devices)))
        index = {d.id: i for i, d in enumerate(devices)}
        out = []
        for i in ids:
            if i not in index:
                raise DeviceError(f"no amd device {i!r}", device_id=i)
            out.append(index[i])
        return out

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        snap = self._snapshot()
        now = datetime.now(UTC)
        never = _TELEMETRY_AMDSMI_ONLY if self._amdsmi is None else ()
        chosen = self._select(snap.devices, ids)
        if ids is not None:
            for i in chosen:
                if snap.devices[i].id in snap.lost:
                    raise DeviceLostError(f"amd device {snap.devices[i].id} is lost (fell off the bus)",
                                          device_id=snap.devices[i].id)
        return tuple(
            telemetry_for(snap.devices[i], snap.groups[i], now, unsupported=never)
            for i in chosen
            if snap.devices[i].id not in snap.lost
        )

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        snap = self._snapshot()
        now = datetime.now(UTC)
        return {
            snap.devices[i].id: replace_checked(snap.devices[i].health, now)
            for i in self._select(snap.devices, ids)
        }

    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        snap = self._snapshot()
        wanted = {snap.devices[i].id for i in self._select(snap.devices, ids)}
        parents = {p.id: p.parent_id for p in snap.partitions}
        return tuple(p for p in snap.processes if parents.get(p.device_id, p.device_id) in wanted)

    def partitions(self) -> tuple[Partition, ...]:
        return tuple(self._snapshot().partitions)

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        return tuple(self._snapshot().profiles)

    # -- actuation (see ._carve) --------------------------------------------------------------
    def _carving(self) -> XcpCarver:
        self._check_open()
        if self._carver is None:
            raise NotSupportedError("AMD partition modes are set through amdsmi, which is not loaded ("
                                    + ("; ".join(self._notes) or "no reason given") + ")")
        why = self._carver.missing()
        if why is not None:
            raise NotSupportedError(f"AMD partition modes cannot be set: {why}")
        return self._carver

    def create_partition(self, device_id: str, profile: str, *, placement_start: int | None = None) -> Partition:
        """Put the device in the compute / memory mode ``profile`` names (``cpx_nps4``): all its
        partitions are made at once; the first is returned as the next inventory shows it."""
        with self._carve_lock:
            carver = self._carving()
            dev = self._known_device(device_id)
            if placement_start not in (None, 0):
                raise PartitionNoPlacementError(
                    f"{profile} takes the whole of {device_id}: it has no slot {placement_start} to start at",
                    device_id=device_id, profile=profile)
            mode = carver.create(dev, profile)
            after = self._snapshot()
            made = sorted((p for p in after.partitions if p.parent_id == dev.id and p.profile == mode.name),
                          key=lambda p: p.placement.start if p.placement else 0)
            if len(made) != mode.count:
                now = next((d.partition_mode for d in after.devices if d.id == dev.id), None)
                raise PartitionCreateFailedError(
                    f"{dev.id} took {mode.name} but amdsmi now shows {len(made)} of its {mode.count} partitions "
                    f"(mode {now.compute_mode if now else None} + {now.memory_mode if now else None})",
                    left_behind=tuple(p.id for p in after.partitions if p.parent_id == dev.id),
                    device_id=dev.id, profile=profile)
            return made[0]

    def destroy_partition(self, partition_id: str) -> None:
        """Return the partition's device to SPX + NPS1: every partition of its mode goes."""
        with self._carve_lock:
            carver = self._carving()
            snap = self._snapshot()
            part = next((p for p in snap.partitions if p.id == partition_id), None)
            if part is None:
                raise PartitionNotFoundError(f"no partition {partition_id!r}", partition_id=partition_id)
            carver.destroy(self._device(snap, part.parent_id), part)

    def _known_device(self, device_id: str) -> Device:
        """The device as last read (its identity, memory and units do not change with a mode),
        without a full read when one was made before; a lost one is refused."""
        dev = next((d for d in self._known.values() if d.id == device_id), None)
        if dev is None:
            return self._device(self._snapshot(), device_id)
        if dev.pci is not None and dev.pci.bus_id in self._lost_since:
            raise DeviceLostError(f"amd device {device_id} is lost (fell off the bus)", device_id=device_id)
        return dev

    def _device(self, snap: _Snapshot, device_id: str) -> Device:
        for dev in snap.devices:
            if dev.id == device_id:
                if dev.id in snap.lost:
                    raise DeviceLostError(f"amd device {device_id} is lost (fell off the bus)", device_id=device_id)
                return dev
        raise DeviceError(f"no amd device {device_id!r}", device_id=device_id)


def _merged_groups(
    amd: dict[str, list[GpuReading]], py: dict[str, list[GpuReading]], sysfs: dict[str, GpuReading]
) -> tuple[list[list[GpuReading]], dict[str, set[str]]]:
    """One group of merged readings per physical GPU (one per handle: CPX partitions), in the
    order of their first handle index, and the parts each layer gave."""

    def first_index(bus: str) -> tuple[int, str]:
        indices = [r.index for r in amd.get(bus, []) + py.get(bus, []) if r.index is not None]
        return (min(indices) if indices else 1 << 30, bus)

    order = sorted(set(amd) | set(py) | set(sysfs), key=first_index)
    groups: list[list[GpuReading]] = []
    layer_parts: dict[str, set[str]] = {}
    for bus in order:
        a, p, s = amd.get(bus, []), py.get(bus, []), sysfs.get(bus)
        n = max(len(a), len(p), 1)
        for lst in (a, p):
            lst.sort(key=lambda r: (r.partition_index if r.partition_index is not None else 0, r.index or 0))
        group = []
        for k in range(n):
            layers: list[tuple[str, GpuReading]] = []
            if k < len(p):
                layers.append(("pyrsmi", p[k]))
            if k < len(a):
                layers.append(("amdsmi", a[k]))
            if s is not None:
                layers.append(("sysfs", s if n == 1 else _device_level(s)))
            merged = merge(layers)
            if merged.partition_index is None:
                merged.partition_index = k
            for part, layer in merged.sources.items():
                layer_parts.setdefault(layer, set()).add(part)
            group.append(merged)
        groups.append(group)
    return groups, layer_parts


def _processes(
    devices: Sequence[Device], groups: Sequence[Sequence[GpuReading]], partitions: Sequence[Partition]
) -> list[ProcessUsage]:
    """The processes of every device, each on its partition where the device is partitioned."""
    procs: list[ProcessUsage] = []
    by_parent: dict[str, list[Partition]] = {}
    for partition in partitions:
        by_parent.setdefault(partition.parent_id, []).append(partition)
    for dev, group in zip(devices, groups, strict=True):
        parts = by_parent.get(dev.id, [])
        for k, r in enumerate(group):
            pid = parts[k].id if k < len(parts) else None
            procs.extend(processes_for(dev.id, r, pid))
    return procs


def replace_checked(health: Health, now: datetime) -> Health:
    """``health`` with ``checked_at`` set where health was read (built through the constructor,
    so it validates).  Health is earned: a device with nothing health-telling read
    (``monitored`` False) keeps ``checked_at`` unset."""
    return Health(operational=health.operational, monitored=health.monitored,
                  conditions=health.conditions, checked_at=now if health.monitored else health.checked_at)


def _device_level(r: GpuReading) -> GpuReading:
    """A copy of a whole-device sysfs reading without per-partition parts (memory, load)."""
    cleared: dict[str, Any] = {name: None for name in _DEVICE_LEVEL_SKIP}
    return replace(r, **cleared,
                   temperatures_celsius=dict(r.temperatures_celsius), clocks_hertz=dict(r.clocks_hertz),
                   ecc_blocks=dict(r.ecc_blocks), ras_states=dict(r.ras_states), firmware=dict(r.firmware),
                   not_supported=set(r.not_supported), sources=dict(r.sources), errors=dict(r.errors))
