"""The NVIDIA backend over NVML: inventory, topology, health, telemetry, processes, MIG, events.

Cost: NVML is initialised once per backend.  What never changes while the driver is loaded
(identity, PCI, limits, NVLink wiring, MIG profiles, PCIe common ancestors) is read on the first
snapshot and cached per device index; later snapshots read only what moves, and batch the
counters into one ``nvmlDeviceGetFieldValues`` call per device.  Newer symbols are tried first
and fall back on FunctionNotFound (R470-era drivers).

Errors: a NOT_SUPPORTED answer leaves the value ``None`` and names the field in
``Device.unsupported``; NO_PERMISSION leaves it ``None``; GPU_IS_LOST marks that device
``operational=lost`` and the others still answer.  No vendor exception leaves this module: every
NVML call goes through :class:`accel.plugins.nvidia._nvml.Nvml`.

The backend is thin: it holds the lock, the open/closed state and the lending of readings, and
hands each job to a collaborator with one job (as ``plugins/amd`` does):

=====================  ================================================================
``_handles``           the session's device handles, lost GPUs, missing symbols; one read
``_static``            identity, PCI, limits, NVLink wiring: read once per GPU
``_memory``            the framebuffer read (v2, v1 on older drivers)
``_samples``           the moving counters: one field-values call per GPU
``_telemetry``         a :class:`Telemetry` from a sample
``_health_read``       a :class:`Health` from a sample and the events (rules: ``_health``)
``_events``            the NVML event set and the XIDs it delivered
``_topology``          NVLink / NVSwitch / PCIe links and P2P (cliques: ``_fabric``)
``_mig``               MIG mode, instances and profiles
``_carve``             creating and destroying MIG instances (partition actuation)
``_processes``         the processes on a GPU
``_inventory``         the host inventory assembled from the above
=====================  ================================================================
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ...errors import AccelError, DeviceError, DeviceLostError, DriverError, NotSupportedError
from ...model import Health, HostInventory, MemoryRegion, Partition, PartitionProfile, ProcessUsage, Telemetry
from ...plugin import Backend, BackendConfig, DeviceEvent, Reading
from ._carve import MigCarver
from ._events import Events
from ._handles import Handles, Read, now
from ._health_read import HealthReader
from ._inventory import InventoryBuilder, Parts
from ._memory import MemoryReader
from ._mig import Mig
from ._nvml import Nvml
from ._processes import Processes
from ._samples import Sample, Sampler
from ._static import StaticReader
from ._telemetry import TelemetryReader, lost_sample
from ._topology import Topology

__all__ = ["NvidiaBackend"]

#: How long inventory()'s reading of a GPU may serve the next telemetry() call (once).
_LEND_S = 1.0


class NvidiaBackend(Backend):
    """An open NVML session.  Use :meth:`accel.plugins.nvidia.NvidiaPlugin.open`, not this class."""

    def __init__(self, config: BackendConfig, nv: Nvml, *, plugin_version: str, scenario: str | None) -> None:
        self._config = config
        self._nv = nv
        self._lock = threading.RLock()
        self._closed = False
        #: The reading inventory() just took per GPU (monotonic time, sample, memory), lent once to
        #: the telemetry() call that follows it within _LEND_S: an exporter's scrape reads both,
        #: and reading every field twice a scrape doubles its NVML calls for nothing.
        self._lent: dict[int, tuple[float, Sample, MemoryRegion]] = {}
        readings = config.readings
        handles = self._handles = Handles(nv)
        nv.init()
        try:
            memory = MemoryReader(handles)
            self._statics = StaticReader(handles, memory)
            self._count = int(nv.call("nvmlDeviceGetCount"))
            for i in range(self._count):
                handles.handle(i)
            self._events = Events(handles, self._statics, self._count)
            self._events.register()
        except BaseException:
            nv.shutdown()
            raise
        self._sampler = Sampler(handles, self._statics, readings)
        self._mig = Mig(handles)
        self._carver = MigCarver(handles, self._mig)
        self._processes = Processes(handles, Path(str(config.option("proc_root", "/proc"))))
        self._health = HealthReader(handles, self._statics, self._events)
        self._telemetry = TelemetryReader(handles, self._sampler, memory, readings)
        parts = Parts(handles=handles, statics=self._statics, sampler=self._sampler, memory=memory, mig=self._mig,
                      processes=self._processes, health=self._health, topology=Topology(handles, self._statics))
        self._inventory = InventoryBuilder(parts, config, plugin_version=plugin_version, scenario=scenario,
                                           loans=self._lent)

    @property
    def name(self) -> str:
        return "nvidia"

    @property
    def nvml_calls(self) -> int:
        """NVML wrapper calls made by this backend so far (the benchmark's counter)."""
        return self._nv.total_calls()

    @property
    def vendor_call_count(self) -> int:
        """Cumulative NVML calls (the conformance kit's ``ReportsCost``)."""
        return self._nv.total_calls()

    def inject_fault(self, fault: object, device_id: str) -> None:
        """Conformance hook, only over the fake NVML: ``device_lost`` or ``health_not_supported``."""
        lib = self._nv.library
        kind = str(getattr(fault, "value", fault))
        index = next((i for i, st in self._statics.statics.items() if st.device_id == device_id), None)
        if not hasattr(lib, "lose_gpu") or index is None:
            raise NotSupportedError("fault injection needs the fake NVML (option 'scenario')", device_id=device_id)
        if kind == "device_lost":
            lib.lose_gpu(index)
        elif kind == "health_not_supported":
            lib.make_health_unsupported(index)
        else:
            raise NotSupportedError(f"unknown fault {kind!r}", device_id=device_id)

    def _check_open(self) -> None:
        if self._closed:
            raise DriverError("the NVIDIA backend is closed", code="plugin.closed")

    def _ids(self, ids: Sequence[str] | None) -> list[int]:
        statics = self._statics.statics
        indices = []
        for i in range(self._count):
            try:
                self._statics.static(i)
            except AccelError:
                if i not in self._handles.lost:
                    continue
            indices.append(i)
        if ids is None:
            return [i for i in indices if i in statics]
        known = {statics[i].device_id: i for i in indices if i in statics}
        unknown = [x for x in ids if x not in known]
        if unknown:
            raise DeviceError(f"no NVIDIA device {unknown[0]!r} (known: {', '.join(known)})", device_id=unknown[0])
        return [known[x] for x in ids]

    def poll_events(self, timeout_s: float = 0.0) -> tuple[DeviceEvent, ...]:
        """XID and ECC events since the last poll; waits up to ``timeout_s`` for the first."""
        with self._lock:
            self._check_open()
            return self._events.poll(timeout_s)

    def inventory(self) -> HostInventory:
        with self._lock:
            self._check_open()
            at = now()
            readings = self._config.readings
            if readings is None or Reading.HEALTH in readings:
                self.poll_events(0.0)
            return self._inventory.build(self._count, at)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        with self._lock:
            self._check_open()
            self.poll_events(0.0)
            at = now()
            lost = self._handles.lost
            out: dict[str, Health] = {}
            for i in self._ids(ids):
                st = self._statics.statics[i]
                sample = None
                if i not in lost:
                    try:
                        sample = self._sampler.sample(i, full=True)
                        out[st.device_id] = self._health.health(i, sample, at)
                        continue
                    except DeviceLostError:
                        lost.setdefault(i, at)
                out[st.device_id] = self._health.health(i, sample, at)
            return out

    def _borrow(self, index: int) -> tuple[Sample, MemoryRegion] | None:
        """The reading inventory() lent GPU ``index``, once, if it is younger than ``_LEND_S``."""
        lent = self._lent.pop(index, None)
        if lent is None or time.monotonic() - lent[0] > _LEND_S:
            return None
        return lent[1], lent[2]

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        with self._lock:
            self._check_open()
            lost = self._handles.lost
            out = []
            for i in self._ids(ids):
                st = self._statics.statics[i]
                at = now()
                if i in lost:
                    out.append(lost_sample(st.device_id, at))
                    continue
                try:
                    out.append(self._telemetry.read(st, self._borrow(i), at))
                except DeviceLostError:
                    lost.setdefault(i, at)
                    out.append(lost_sample(st.device_id, at))
            return tuple(out)

    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        with self._lock:
            self._check_open()
            out: list[ProcessUsage] = []
            for i in self._ids(ids):
                if i in self._handles.lost:
                    continue
                st = self._statics.statics[i]
                try:
                    h = self._handles.handle(i)
                    parts, _ = self._mig.partitions(st, h, Read())
                    out += self._processes.read(st, h, parts)
                except DeviceLostError:
                    self._handles.lost.setdefault(i, now())
            return tuple(out)

    def partitions(self) -> tuple[Partition, ...]:
        with self._lock:
            self._check_open()
            out: list[Partition] = []
            for i in self._ids(None):
                if i in self._handles.lost:
                    continue
                try:
                    parts, _ = self._mig.partitions(self._statics.statics[i], self._handles.handle(i), Read())
                    out += parts
                except DeviceLostError:
                    self._handles.lost.setdefault(i, now())
            return tuple(out)

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        with self._lock:
            self._check_open()
            out: list[PartitionProfile] = []
            for i in self._ids(None):
                st = self._statics.statics[i]
                if i in self._handles.lost:
                    out += st.profiles
                    continue
                try:
                    out += self._mig.profiles(st, self._handles.handle(i))
                except DeviceLostError:
                    self._handles.lost.setdefault(i, now())
            return tuple(out)

    def _index_of(self, device_id: str) -> int:
        for i in self._ids(None):
            if self._statics.statics[i].device_id == device_id:
                if i in self._handles.lost:
                    raise DeviceLostError(f"device {device_id} is lost", device_id=device_id)
                return i
        raise DeviceError(f"no NVIDIA device {device_id!r}", device_id=device_id)

    def create_partition(self, device_id: str, profile: str, *, placement_start: int | None = None) -> Partition:
        """Create a MIG GPU instance and its full compute instance (see :mod:`._carve`)."""
        with self._lock:
            self._check_open()
            i = self._index_of(device_id)
            return self._carver.create(self._statics.statics[i], self._handles.handle(i), profile, placement_start)

    def destroy_partition(self, partition_id: str) -> None:
        from ...errors import PartitionNotFoundError

        with self._lock:
            self._check_open()
            for i in self._ids(None):
                if i in self._handles.lost:
                    continue
                st, h = self._statics.statics[i], self._handles.handle(i)
                for part in self._mig.partitions(st, h, Read())[0]:
                    if part.id == partition_id:
                        self._carver.destroy(st, h, part)
                        return
            raise PartitionNotFoundError(f"no partition {partition_id!r}", partition_id=partition_id)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._events.close()
            self._handles.handles.clear()
            self._lent.clear()
            self._nv.shutdown()
