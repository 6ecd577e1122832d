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
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import AccelError, DeviceError, DeviceLostError, DriverError, NotSupportedError
from ...model import Action as Act
from ...model import (
    Binding,
    Capabilities,
    ComputeInfo,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    Health,
    HealthCondition,
    Host,
    HostInventory,
    Link,
    LinkCounters,
    LinkState,
    LinkType,
    MemoryKind,
    MemoryRegion,
    Operational,
    Partition,
    PartitionMode,
    PartitionProfile,
    PartitionScheme,
    PciInfo,
    Placement,
    PowerLimits,
    Problem,
    ProblemKind,
    ProcessUsage,
    Severity,
    SourceInfo,
    Subsystem,
    Telemetry,
    ThermalLimits,
    VersionInfo,
    normalize_bus_id,
)
from ...plugin import Backend, BackendConfig, DeviceEvent, Reading, describe_readings
from ...sysfs import enrich_inventory
from ._health import (
    RECOVERY_ACTIONS,
    Counters,
    counter_conditions,
    lost_condition,
    nvml_error_condition,
    temperature_conditions,
    throttle_conditions,
    throttle_names,
    xid_condition,
    xid_rule,
)
from ._nvml import C, Nvml, field_answers, nvml_code_of

__all__ = ["NvidiaBackend"]

MIB = 1024 * 1024
_ARCH = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere", 8: "Ada Lovelace",
         9: "Hopper", 10: "Blackwell", 13: "Rubin"}
_BRAND = {1: "Quadro", 2: "Tesla", 3: "NVS", 4: "GRID", 5: "GeForce", 6: "Titan", 7: "NVIDIA vApps",
          8: "NVIDIA vPC", 9: "NVIDIA vCS", 10: "NVIDIA vWS", 11: "NVIDIA Cloud Gaming", 12: "Quadro RTX",
          13: "NVIDIA RTX", 14: "NVIDIA"}
#: NVML_NVLINK_VERSION_* enum -> (NVLink generation, nominal bytes/s per link per direction).
_NVLINK = {1: (1, 20_000_000_000), 2: (2, 25_000_000_000), 3: (2, 25_000_000_000), 4: (3, 25_000_000_000),
           5: (3, 25_000_000_000), 6: (4, 25_000_000_000), 7: (5, 50_000_000_000), 8: (6, 100_000_000_000)}
#: NVML's NVML_NVLINK_MAX_LINKS is 36 in 13.x (18, 12, 6 in older bindings): loop, stop on errors.
_MAX_LINKS = 36
#: Products with on-package HBM (by name prefix); everything GeForce/RTX/Quadro/L-series is GDDR.
_HBM = ("NVIDIA H100", "NVIDIA H200", "NVIDIA H800", "NVIDIA H20", "NVIDIA A100", "NVIDIA A800", "NVIDIA A30",
        "NVIDIA B100", "NVIDIA B200", "NVIDIA B300", "NVIDIA GH200", "NVIDIA GB200", "NVIDIA GB300",
        "Tesla V100", "Tesla P100", "NVIDIA PG")
_GDDR = ("NVIDIA GeForce", "GeForce", "NVIDIA RTX", "Quadro", "NVIDIA L4", "NVIDIA L40", "NVIDIA A10",
         "NVIDIA A40", "NVIDIA A16", "NVIDIA A2", "Tesla T4", "NVIDIA T4", "NVIDIA TITAN")
_ANCESTOR = {C.TOPOLOGY_INTERNAL: LinkType.DIE_INTERNAL, C.TOPOLOGY_SINGLE: LinkType.PCIE_PIX,
             C.TOPOLOGY_MULTIPLE: LinkType.PCIE_PXB, C.TOPOLOGY_HOSTBRIDGE: LinkType.PCIE_PHB,
             C.TOPOLOGY_NODE: LinkType.NUMA, C.TOPOLOGY_SYSTEM: LinkType.SYSTEM}
_NOT_ATTRIBUTED = C.EVENT_NONE_ATTRIBUTED

#: How long inventory()'s reading of a GPU may serve the next telemetry() call (once).
_LEND_S = 1.0

#: The per-device field batch read every snapshot (one nvmlDeviceGetFieldValues call).
_FIELDS = (C.FI_ECC_SBE_VOL_TOTAL, C.FI_ECC_DBE_VOL_TOTAL, C.FI_ECC_SBE_AGG_TOTAL, C.FI_ECC_DBE_AGG_TOTAL,
           C.FI_RETIRED_SBE, C.FI_RETIRED_DBE, C.FI_RETIRED_PENDING, C.FI_NVLINK_CRC_FLIT_TOTAL,
           C.FI_NVLINK_REPLAY_TOTAL, C.FI_NVLINK_RECOVERY_TOTAL, C.FI_MEMORY_TEMP, C.FI_TOTAL_ENERGY,
           C.FI_PCIE_REPLAY_COUNTER, C.FI_REMAPPED_COR, C.FI_REMAPPED_UNC, C.FI_REMAPPED_PENDING,
           C.FI_REMAPPED_FAILURE, C.FI_POWER_INSTANT, C.FI_GPU_RECOVERY_ACTION)
_FI_NVLINK_STATE = 165
#: The per-link field ids: error counters (Reading.LINKS) and the link state (down links, for
#: health and topology).
_LINK_COUNTER_FIELDS = (C.FI_NVLINK_ERROR_DL_REPLAY, C.FI_NVLINK_ERROR_DL_RECOVERY, C.FI_NVLINK_ERROR_DL_CRC)
#: Which field ids of the batch each reading group needs when a caller narrows the read
#: (BackendConfig.readings); HEALTH needs them all (counter conditions, recovery action).
_GROUP_FIELDS: dict[Reading, tuple[int, ...]] = {
    Reading.POWER: (C.FI_POWER_INSTANT,),
    Reading.ENERGY: (C.FI_TOTAL_ENERGY,),
    Reading.TEMPERATURE: (C.FI_MEMORY_TEMP,),
    Reading.ERRORS: (C.FI_ECC_SBE_VOL_TOTAL, C.FI_ECC_DBE_VOL_TOTAL, C.FI_RETIRED_SBE, C.FI_RETIRED_DBE,
                     C.FI_PCIE_REPLAY_COUNTER),
}
#: ECC mode not read (a narrowed read without errors or health): the memory's ECC flags stay unknown.
_UNREAD: Any = object()
#: The health of a read that was not asked for health: unknown, not monitored, no checked_at.
#: Models are frozen, so one validated instance serves every such device.
_NO_HEALTH = Health.unknown()
_MODES: dict[tuple[bool, bool | None], PartitionMode] = {}


def _with_reading(base: Device, update: dict[str, Any]) -> Device:
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


def _partition_mode(mig_on: bool, pending: bool | None) -> PartitionMode:
    """The (frozen, validated once) partition mode for MIG on/off and a pending change."""
    mode = _MODES.get((mig_on, pending))
    if mode is None:
        mode = PartitionMode(scheme=PartitionScheme.MIG if mig_on else PartitionScheme.NONE, pending=pending)
        _MODES[(mig_on, pending)] = mode
    return mode


def _now() -> datetime:
    return datetime.now(UTC)


def _text(value: Any) -> str:
    # nvidia-ml-py >= 11.515.48 returns str; older and third-party bindings return bytes.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _cpulist(words: Sequence[int]) -> str | None:
    cpus = [64 * i + b for i, w in enumerate(words) for b in range(64) if int(w) >> b & 1]
    if not cpus:
        return None
    ranges: list[str] = []
    start = prev = cpus[0]
    for c in [*cpus[1:], -2]:
        if c != prev + 1:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = c
        prev = c
    return ",".join(ranges)


def _memory_kind(name: str) -> MemoryKind:
    if "HBM" in name or name.startswith(_HBM):
        return MemoryKind.HBM
    if name.startswith(_GDDR):
        return MemoryKind.GDDR
    return MemoryKind.UNKNOWN


@dataclass
class _Read:
    """Collects what one device's reads learned besides values: unsupported fields, conditions."""

    unsupported: set[str] = field(default_factory=set)
    conditions: list[HealthCondition] = field(default_factory=list)
    #: When set, GpuIsLost is recorded in ``lost`` instead of raised (identity reads of a GPU
    #: that falls off the bus while it is being enumerated).
    tolerate_lost: bool = False
    lost: bool = False
    #: The current MIG mode as _mig() read it (None: not read or no MIG mode).
    mig_enabled: bool | None = None


@dataclass
class _NvLink:
    index: int
    remote_bus_id: str | None
    remote_type: int | None
    version: int | None


@dataclass
class _Static:
    """What does not change while the driver is loaded, read once per device index."""

    index: int
    device_id: str
    uuid: str
    device: Device
    unsupported: set[str]
    nvlinks: list[_NvLink]
    mig_capable: bool
    thresholds: tuple[int | None, int | None]
    profiles: tuple[PartitionProfile, ...] = ()
    profiles_read: bool = False
    #: The memory of the last reading: a GPU lost later keeps its last known memory.
    memory: MemoryRegion | None = None
    #: The board has no fan NVML reports (NOT_SUPPORTED once): a build fact, not asked again.
    fanless: bool = False


@dataclass
class _Pending:
    """One GPU's reading before its single validation: the static device and what changed."""

    base: Device
    update: dict[str, Any]
    #: Capability flags this reading learned (``ecc``); ``p2p`` is added for all GPUs at once.
    capabilities: dict[str, Any]


@dataclass
class _Sample:
    """The moving values of one device in one snapshot."""

    fields: dict[int, int | float | None]
    link_fields: dict[tuple[int, int], int | None]
    read: _Read
    lost: bool = False


class NvidiaBackend(Backend):
    """An open NVML session.  Use :meth:`accel.plugins.nvidia.NvidiaPlugin.open`, not this class."""

    def __init__(self, config: BackendConfig, nv: Nvml, *, plugin_version: str, scenario: str | None) -> None:
        self._config = config
        self._nv = nv
        self._plugin_version = plugin_version
        self._scenario = scenario
        self._lock = threading.RLock()
        self._closed = False
        self._statics: dict[int, _Static] = {}
        self._handles: dict[int, Any] = {}
        #: NVML symbols this driver lacks (FunctionNotFound): not retried on every snapshot.
        self._missing: set[str] = set()
        self._lost: dict[int, datetime] = {}
        self._xids: dict[str, dict[tuple[int, str | None], HealthCondition]] = {}
        self._previous: dict[str, Counters] = {}
        self._ancestors: dict[tuple[int, int], int | None] = {}
        self._p2p: dict[tuple[int, int], bool | None] = {}
        self._p2p_devices: tuple[tuple[tuple[str, ...], frozenset[int]], dict[str, bool | None]] | None = None
        #: Per device id: the static device, the last reading's changes and the device built from them.
        self._last: dict[str, tuple[Device, dict[str, Any], Device]] = {}
        self._link_last: dict[tuple[str, int], tuple[tuple[int | None, ...], LinkCounters]] = {}
        #: The NVLink/NVSwitch/PCIe links and fabric domains, and what they were built from.
        self._wiring: tuple[Any, list[Link], list[Domain]] | None = None
        self._caps: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Capabilities, Capabilities]] = {}
        self._event_set: Any = None
        self._monitored: dict[int, bool] = {}
        self._event_failure: str | None = None
        self._down_links: dict[str, tuple[int, ...]] = {}
        #: The reading inventory() just took per GPU (monotonic time, sample, memory), lent once to
        #: the telemetry() call that follows it within _LEND_S: an exporter's scrape reads both,
        #: and reading every field twice a scrape doubles its NVML calls for nothing.
        self._lent: dict[int, tuple[float, _Sample, MemoryRegion]] = {}
        self._proc_root = Path(str(config.option("proc_root", "/proc")))
        #: What the caller will use (None: everything); inventory() and telemetry() read only that.
        self._readings: frozenset[Reading] | None = config.readings
        #: os.cpu_count() reads sysfs on Linux; the host's Host model is rebuilt only when its
        #: hostname changes.
        self._cpu_count = os.cpu_count()
        self._host: Host | None = None
        self._fields, self._link_fields = self._batch(self._readings)
        nv.init()
        try:
            self._driver = self._system("nvmlSystemGetDriverVersion")
            self._nvml_version = self._system("nvmlSystemGetNVMLVersion")
            cuda = self._system_int("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
            self._cuda = f"{cuda // 1000}.{(cuda % 1000) // 10}" if cuda is not None else None
            self._count = int(nv.call("nvmlDeviceGetCount"))
            for i in range(self._count):
                self._handle(i)
            self._register_events()
        except BaseException:
            nv.shutdown()
            raise

    # -- plumbing -----------------------------------------------------------------------------
    def _wants(self, reading: Reading) -> bool:
        return self._readings is None or reading in self._readings

    @staticmethod
    def _batch(readings: frozenset[Reading] | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The scalar and per-link field ids a sample reads for ``readings`` (``None``: all)."""
        if readings is None or Reading.HEALTH in readings:
            return _FIELDS, (*_LINK_COUNTER_FIELDS, _FI_NVLINK_STATE)
        scalar = {fid for group in readings for fid in _GROUP_FIELDS.get(group, ())}
        per_link = (*(_LINK_COUNTER_FIELDS if Reading.LINKS in readings else ()),
                    *((_FI_NVLINK_STATE,) if Reading.TOPOLOGY in readings else ()))
        return tuple(f for f in _FIELDS if f in scalar), per_link

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
        index = next((i for i, st in self._statics.items() if st.device_id == device_id), None)
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

    def _system(self, fn: str) -> str | None:
        try:
            return _text(self._nv.call(fn))
        except AccelError as err:
            if nvml_code_of(err) in (C.ERROR_NOT_SUPPORTED, C.ERROR_FUNCTION_NOT_FOUND, C.ERROR_NO_PERMISSION):
                return None
            raise

    def _system_int(self, fn: str, fallback: str) -> int | None:
        for name in (fn, fallback):
            try:
                return int(self._nv.call(name))
            except AccelError as err:
                if nvml_code_of(err) != C.ERROR_FUNCTION_NOT_FOUND:
                    return None
        return None

    def _handle(self, index: int) -> Any:
        """The cached handle of GPU ``index`` (handles are unhashable: keyed by index)."""
        h = self._handles.get(index)
        if h is None:
            try:
                h = self._nv.call("nvmlDeviceGetHandleByIndex", index)
            except DeviceLostError:
                self._lost.setdefault(index, _now())
                raise
            self._handles[index] = h
        return h

    def _get(self, read: _Read, field_name: str | None, fn: str, *args: Any,
             fallback: str | None = None, **kwargs: Any) -> Any:
        """One read: the value, or ``None`` with the reason recorded.  GpuIsLost propagates."""
        if fallback is None:
            names: tuple[str, ...] = (fn,)
        else:
            # A symbol the driver lacks stays missing; skip it rather than pay a failed call each time.
            names = tuple(n for n in (fn, fallback) if n not in self._missing) or (fallback,)
        for name in names:
            try:
                return self._nv.call(name, *args, **kwargs)
            except DeviceLostError:
                if not read.tolerate_lost:
                    raise
                read.lost = True
                return None
            except AccelError as err:
                code = nvml_code_of(err)
                if code == C.ERROR_FUNCTION_NOT_FOUND:
                    self._missing.add(name)
                if code == C.ERROR_FUNCTION_NOT_FOUND and name != names[-1]:
                    continue
                if code in (C.ERROR_NOT_SUPPORTED, C.ERROR_FUNCTION_NOT_FOUND):
                    if field_name:
                        read.unsupported.add(field_name)
                    return None
                if code is not None:
                    cond = nvml_error_condition(code, at=_now(), fn=name)
                    if cond is not None and all(c.reason != cond.reason for c in read.conditions):
                        read.conditions.append(cond)
                return None
        return None

    # -- static identity ----------------------------------------------------------------------
    def _static(self, index: int) -> _Static:
        st = self._statics.get(index)
        if st is None:
            st = self._read_static(index)
            self._statics[index] = st
        return st

    def _read_static(self, index: int) -> _Static:
        h = self._handle(index)
        r = _Read(tolerate_lost=True)
        uuid = _text(self._nv.call("nvmlDeviceGetUUID", h))
        name = _text(self._nv.call("nvmlDeviceGetName", h))
        pci = self._nv.call("nvmlDeviceGetPciInfo", h)
        bus_id = normalize_bus_id(_text(pci.busId))
        device_id = f"nvidia:{uuid}" if uuid else f"nvidia:pci-{bus_id}"
        serial = self._get(r, "serial_number", "nvmlDeviceGetSerial", h)
        arch = self._get(r, "architecture", "nvmlDeviceGetArchitecture", h)
        cc = self._get(r, "compute_capability", "nvmlDeviceGetCudaComputeCapability", h)
        brand = self._get(r, "brand", "nvmlDeviceGetBrand", h)
        minor = self._get(r, None, "nvmlDeviceGetMinorNumber", h)
        vbios = self._get(r, None, "nvmlDeviceGetVbiosVersion", h)
        inforom = self._get(r, None, "nvmlDeviceGetInforomImageVersion", h)
        persistence = self._get(r, None, "nvmlDeviceGetPersistenceMode", h)
        default_mw = self._get(r, "power.default_watts", "nvmlDeviceGetPowerManagementDefaultLimit", h)
        limits = self._get(r, "power.max_watts", "nvmlDeviceGetPowerManagementLimitConstraints", h)
        if limits is None:
            r.unsupported.add("power.min_watts")
        enforced_mw = self._get(r, "power.enforced_watts", "nvmlDeviceGetEnforcedPowerLimit", h)
        slowdown = self._get(r, "thermal.slowdown_celsius", "nvmlDeviceGetTemperatureThreshold", h,
                             C.THRESHOLD_SLOWDOWN)
        shutdown = self._get(r, "thermal.shutdown_celsius", "nvmlDeviceGetTemperatureThreshold", h,
                             C.THRESHOLD_SHUTDOWN)
        gpu_max = self._get(r, "thermal.max_operating_celsius", "nvmlDeviceGetTemperatureThreshold", h,
                            C.THRESHOLD_GPU_MAX)
        sm_max = self._get(r, "compute.max_clock_hertz", "nvmlDeviceGetMaxClockInfo", h, C.CLOCK_SM)
        mem_max = self._get(r, "compute.memory_max_clock_hertz", "nvmlDeviceGetMaxClockInfo", h, C.CLOCK_MEM)
        cores = self._get(r, None, "nvmlDeviceGetNumGpuCores", h)
        gen_max = self._get(r, "pci.link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h)
        width_max = self._get(r, "pci.link_width_max", "nvmlDeviceGetMaxPcieLinkWidth", h)
        bar1 = self._get(r, None, "nvmlDeviceGetBAR1MemoryInfo", h)
        numa, cpus = self._affinity(r, h)
        ecc = self._get(r, None, "nvmlDeviceGetEccMode", h)
        mig_mode = self._get(r, None, "nvmlDeviceGetMigMode", h)
        nvlinks = self._read_nvlinks(r, h)
        pci_dev = int(pci.pciDeviceId) >> 16 & 0xFFFF
        sub = int(pci.pciSubSystemId)
        extras: dict[str, Any] = {}
        if persistence is not None:
            extras["nvidia.com/persistenceMode"] = bool(persistence)
        if bar1 is not None:
            extras["nvidia.com/bar1TotalBytes"] = int(bar1.bar1Total)
        if cores is not None:
            extras["nvidia.com/cudaCores"] = int(cores)
        if nvlinks:
            extras["nvidia.com/nvlinkCount"] = len(nvlinks)
        if minor is not None:
            extras["nvidia.com/minorNumber"] = int(minor)
        firmware = {k: _text(v) for k, v in (("vbios", vbios), ("inforom_image", inforom)) if v is not None}
        if ecc is None:
            # NVML: ECC mode is "only applicable to devices with ECC": NOT_SUPPORTED is a fact.
            r.unsupported.discard("memory.ecc_supported")
        kind = _memory_kind(name)
        # Read once here as well: a GPU lost later keeps its last known memory in the inventory.
        first_memory = self._memory(r, h, kind, ecc)
        device = Device(
            id=device_id, vendor="nvidia", kind=DeviceKind.GPU, model=name, index=index,
            uuid=uuid or None, serial_number=_text(serial) if serial else None,
            brand=_BRAND.get(int(brand)) if brand is not None else None,
            architecture=_ARCH.get(int(arch)) if arch is not None else None,
            compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
            pci=PciInfo(bus_id=bus_id, vendor_id="10de", device_id=f"{pci_dev:04x}",
                        subsystem_vendor_id=f"{sub & 0xFFFF:04x}" if sub else None,
                        subsystem_device_id=f"{sub >> 16 & 0xFFFF:04x}" if sub else None,
                        link_gen_max=gen_max, link_width_max=width_max),
            numa_node=numa, cpu_affinity=cpus,
            versions=VersionInfo(driver=self._driver, runtime_name="cuda", runtime=self._cuda, firmware=firmware),
            memory=(first_memory,),
            compute=ComputeInfo(units=int(cores) if cores is not None else None,
                                unit_kind="cuda_core" if cores is not None else None,
                                max_clock_hertz=int(sm_max) * 1_000_000 if sm_max is not None else None,
                                memory_max_clock_hertz=int(mem_max) * 1_000_000 if mem_max is not None else None),
            power=PowerLimits(default_watts=default_mw / 1000 if default_mw is not None else None,
                              min_watts=limits[0] / 1000 if limits else None,
                              max_watts=limits[1] / 1000 if limits else None,
                              enforced_watts=enforced_mw / 1000 if enforced_mw is not None else None),
            thermal=ThermalLimits(slowdown_celsius=slowdown, shutdown_celsius=shutdown,
                                  max_operating_celsius=gpu_max),
            capabilities=Capabilities(ecc=ecc is not None,
                                      partitioning=(PartitionScheme.MIG,) if mig_mode is not None else ()),
            binding=Binding(visible_env="CUDA_VISIBLE_DEVICES", visible_id=uuid or bus_id, torch_device_type="cuda",
                            collective_backend="nccl", ray_resource="GPU",
                            device_nodes=(f"/dev/nvidia{int(minor)}",) if minor is not None else ()),
            extras=extras,
        )
        if r.lost:
            self._lost.setdefault(index, _now())
        return _Static(index=index, device_id=device_id, uuid=uuid, device=device, unsupported=r.unsupported,
                       nvlinks=nvlinks, mig_capable=mig_mode is not None, thresholds=(slowdown, shutdown))

    def _affinity(self, r: _Read, h: Any) -> tuple[int | None, str | None]:
        words = max(1, ((os.cpu_count() or 64) + 63) // 64, 4)
        numa: int | None = None
        node = self._get(r, None, "nvmlDeviceGetNumaNodeId", h)  # coherent (Grace) platforms only
        if node is not None and int(node) >= 0:
            numa = int(node)
        else:
            # The portable way on x86: the memory-affinity node mask (reference section 1.4).
            mask = self._get(r, None, "nvmlDeviceGetMemoryAffinity", h, 1, C.AFFINITY_SCOPE_NODE)
            if mask is not None:
                bits = [64 * i + b for i, w in enumerate(mask) for b in range(64) if int(w) >> b & 1]
                numa = bits[0] if len(bits) == 1 else None
        cpu_mask = self._get(r, None, "nvmlDeviceGetCpuAffinity", h, words)
        return numa, _cpulist(list(cpu_mask)) if cpu_mask is not None else None

    def _read_nvlinks(self, r: _Read, h: Any) -> list[_NvLink]:
        links: list[_NvLink] = []
        for link in range(_MAX_LINKS):
            if r.lost:
                break
            try:
                self._nv.call("nvmlDeviceGetNvLinkState", h, link)
            except DeviceLostError:
                if not r.tolerate_lost:
                    raise
                r.lost = True
                break
            except AccelError:
                # NOT_SUPPORTED at link 0: no NVLink; INVALID_ARGUMENT: past the last link.
                break
            remote = self._get(r, None, "nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            rtype = self._get(r, None, "nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
            version = self._get(r, None, "nvmlDeviceGetNvLinkVersion", h, link)
            bus = None
            if remote is not None:
                try:
                    bus = normalize_bus_id(_text(remote.busId))
                except AccelError:
                    bus = None
            links.append(_NvLink(link, bus, int(rtype) if rtype is not None else None,
                                 int(version) if version is not None else None))
        return links

    # -- moving values ------------------------------------------------------------------------
    def _sample(self, index: int, *, full: bool = False) -> _Sample:
        """The moving counters of GPU ``index`` in one ``nvmlDeviceGetFieldValues`` call.

        Reads the ids the configured readings need (every id with ``full``, as ``health()``
        does); a sample that needs none makes no call.
        """
        st = self._static(index)
        h = self._handle(index)
        r = _Read()
        scalar, per_link = (_FIELDS, (*_LINK_COUNTER_FIELDS, _FI_NVLINK_STATE)) if full else (
            self._fields, self._link_fields)
        link_ids = [(fid, lk.index) for lk in st.nvlinks for fid in per_link]
        fields: dict[int, int | float | None] = {}
        link_fields: dict[tuple[int, int], int | None] = {}
        if not scalar and not link_ids:
            return _Sample(fields=fields, link_fields=link_fields, read=r)
        requested: list[Any] = [*scalar, *link_ids]
        values = self._get(r, None, "nvmlDeviceGetFieldValues", h, requested)
        invalid: set[int] = set()
        if values is not None:
            # The binding fills the array in the order of the request (field and scope ids are
            # inputs), so each answer is matched to its request without reading its ids back:
            # every attribute of a binding struct is a Python-level __getattribute__ call.
            n = len(scalar)
            for pos, (ret, value) in enumerate(field_answers(values)):
                if ret == C.ERROR_INVALID_ARGUMENT:
                    if pos < n:
                        invalid.add(scalar[pos])  # a field id this driver does not know: fall back below
                elif ret == C.ERROR_GPU_IS_LOST:
                    raise DeviceLostError("GPU is lost (field values)", device_id=st.device_id)
                if pos < n:
                    fields[scalar[pos]] = value
                else:
                    link_fields[link_ids[pos - n]] = int(value) if value is not None else None
        else:
            invalid = set(scalar)
        self._fallback_fields(r, h, fields, invalid)
        return _Sample(fields=fields, link_fields=link_fields, read=r)

    def _fallback_fields(self, r: _Read, h: Any, f: dict[int, int | float | None], invalid: set[int]) -> None:
        """Direct calls for counters the field API did not answer (older drivers, no field API)."""
        if invalid & {C.FI_ECC_DBE_VOL_TOTAL, C.FI_ECC_SBE_VOL_TOTAL}:
            f[C.FI_ECC_SBE_VOL_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 0, 0)
            f[C.FI_ECC_DBE_VOL_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 1, 0)
            f[C.FI_ECC_SBE_AGG_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 0, 1)
            f[C.FI_ECC_DBE_AGG_TOTAL] = self._get(r, None, "nvmlDeviceGetTotalEccErrors", h, 1, 1)
        if invalid & {C.FI_RETIRED_SBE, C.FI_RETIRED_DBE, C.FI_RETIRED_PENDING}:
            sbe = self._get(r, None, "nvmlDeviceGetRetiredPages", h, 0)
            dbe = self._get(r, None, "nvmlDeviceGetRetiredPages", h, 1)
            f[C.FI_RETIRED_SBE] = len(sbe) if sbe is not None else None
            f[C.FI_RETIRED_DBE] = len(dbe) if dbe is not None else None
            f[C.FI_RETIRED_PENDING] = self._get(r, None, "nvmlDeviceGetRetiredPagesPendingStatus", h)
        if invalid & {C.FI_REMAPPED_PENDING, C.FI_REMAPPED_FAILURE}:
            rows = self._get(r, None, "nvmlDeviceGetRemappedRows", h)
            for fid, pos in ((C.FI_REMAPPED_COR, 0), (C.FI_REMAPPED_UNC, 1), (C.FI_REMAPPED_PENDING, 2),
                             (C.FI_REMAPPED_FAILURE, 3)):
                f[fid] = rows[pos] if rows is not None else None
        if C.FI_POWER_INSTANT in invalid:
            f[C.FI_POWER_INSTANT] = self._get(r, None, "nvmlDeviceGetPowerUsage", h)
        if C.FI_TOTAL_ENERGY in invalid:
            f[C.FI_TOTAL_ENERGY] = self._get(r, None, "nvmlDeviceGetTotalEnergyConsumption", h)
        if C.FI_PCIE_REPLAY_COUNTER in invalid:
            f[C.FI_PCIE_REPLAY_COUNTER] = self._get(r, None, "nvmlDeviceGetPcieReplayCounter", h)

    def _memory(self, r: _Read, h: Any, kind: MemoryKind, ecc: Any) -> MemoryRegion:
        mem = None
        v2 = False
        try:
            mem = self._nv.call("nvmlDeviceGetMemoryInfo", h, version=C.NVML_MEMORY_V2)
            v2 = True
        except DeviceLostError:
            if not r.tolerate_lost:
                raise
            r.lost = True
        except AccelError as err:
            if nvml_code_of(err) in (C.ERROR_FUNCTION_NOT_FOUND, 25):  # R470: no _v2 symbol
                mem = self._get(r, "memory.total_bytes", "nvmlDeviceGetMemoryInfo", h)
            elif nvml_code_of(err) == C.ERROR_NOT_SUPPORTED:
                r.unsupported.add("memory.total_bytes")
        ecc_kw: dict[str, Any] = {} if ecc is _UNREAD else {"ecc_supported": ecc is not None}
        if ecc is not None and ecc is not _UNREAD:
            ecc_kw.update(ecc_enabled=bool(ecc[0]), ecc_pending=bool(ecc[1]) != bool(ecc[0]))
        if mem is None:
            return MemoryRegion(kind=kind, **ecc_kw)
        total = int(mem.total)
        if v2:
            reserved = int(mem.reserved)
            return MemoryRegion(kind=kind, total_bytes=total, usable_bytes=total - reserved,
                                used_bytes=int(mem.used), reserved_bytes=reserved, **ecc_kw)
        # v1: on R510+ "used" includes the reserved memory, which v1 cannot separate.
        return MemoryRegion(kind=kind, total_bytes=total, used_bytes=int(mem.used), **ecc_kw)

    # -- health -------------------------------------------------------------------------------
    def _counters(self, st: _Static, s: _Sample) -> Counters:
        f = s.fields

        def num(fid: int) -> int | None:
            v = f.get(fid)
            return int(v) if v is not None else None

        def flag(fid: int) -> bool | None:
            v = f.get(fid)
            return bool(v) if v is not None else None

        down = tuple(lk.index for lk in st.nvlinks if s.link_fields.get((_FI_NVLINK_STATE, lk.index)) == 0)
        return Counters(
            dbe_volatile=num(C.FI_ECC_DBE_VOL_TOTAL), sbe_volatile=num(C.FI_ECC_SBE_VOL_TOTAL),
            dbe_aggregate=num(C.FI_ECC_DBE_AGG_TOTAL), retired_sbe=num(C.FI_RETIRED_SBE),
            retired_dbe=num(C.FI_RETIRED_DBE), retired_pending=flag(C.FI_RETIRED_PENDING),
            remap_pending=flag(C.FI_REMAPPED_PENDING), remap_failure=flag(C.FI_REMAPPED_FAILURE),
            nvlink_replay=num(C.FI_NVLINK_REPLAY_TOTAL), nvlink_recovery=num(C.FI_NVLINK_RECOVERY_TOTAL),
            nvlink_crc=num(C.FI_NVLINK_CRC_FLIT_TOTAL), links_down=down,
        )

    def _health(self, index: int, s: _Sample | None, at: datetime) -> Health:
        st = self._statics.get(index)
        device_id = st.device_id if st else f"nvidia:index-{index}"
        xids = list(self._xids.get(device_id, {}).values())
        monitored = self._monitored.get(index, False) and self._event_failure is None
        if index in self._lost or s is None or s.lost:
            since = self._lost.get(index, at)
            return Health(operational=Operational.LOST, monitored=monitored,
                          conditions=(lost_condition(since), *xids), checked_at=at)
        conds: list[HealthCondition] = []
        if st is not None:
            counters = self._counters(st, s)
            conds += counter_conditions(counters, at=at, previous=self._previous.get(device_id))
            self._previous[device_id] = counters
            h = self._handle(index)
            throttle = self._get(s.read, None, "nvmlDeviceGetCurrentClocksEventReasons", h,
                                 fallback="nvmlDeviceGetCurrentClocksThrottleReasons")
            if throttle is not None:
                conds += throttle_conditions(int(throttle), at=at)
            temp = self._get(s.read, None, "nvmlDeviceGetTemperatureV", h, C.TEMPERATURE_GPU,
                             fallback="nvmlDeviceGetTemperature")
            conds += temperature_conditions(temp, *st.thresholds, at=at)
            readable = temp is not None or throttle is not None or any(
                v is not None for k, v in vars(counters).items() if k != "links_down")
            if not readable:
                # Every health query answered NOT_SUPPORTED (or no permission): unknown, never healthy.
                monitored = False
            action = s.fields.get(C.FI_GPU_RECOVERY_ACTION)
            if action:
                act = RECOVERY_ACTIONS.get(int(action), Act.INVESTIGATE)
                conds.append(HealthCondition(subsystem=Subsystem.DEVICE, reason="RecoveryActionRequired",
                                             severity=Severity.CRITICAL, action=act,
                                             vendor_code=f"nvidia.recovery_action:{int(action)}",
                                             message=f"NVML recovery action {int(action)}",
                                             first_seen=at, last_seen=at))
        conds += s.read.conditions
        if self._event_failure is not None:
            conds.append(HealthCondition(subsystem=Subsystem.MONITORING, reason="EventsUnavailable",
                                         severity=Severity.INFO, message=self._event_failure))
        return Health(operational=Operational.ONLINE, monitored=monitored, conditions=(*conds, *xids),
                      checked_at=at)

    # -- events -------------------------------------------------------------------------------
    def _register_events(self) -> None:
        try:
            self._event_set = self._nv.call("nvmlEventSetCreate")
        except AccelError as err:
            self._event_failure = f"cannot create an NVML event set: {err}"
            return
        want = C.EVENT_XID_CRITICAL | C.EVENT_DOUBLE_BIT_ECC | C.EVENT_SINGLE_BIT_ECC
        for i in range(self._count):
            try:
                h = self._handle(i)
                mask = int(self._nv.call("nvmlDeviceGetSupportedEventTypes", h)) & want
                if mask & C.EVENT_XID_CRITICAL:
                    self._nv.call("nvmlDeviceRegisterEvents", h, mask, self._event_set)
                    self._monitored[i] = True
                else:
                    self._monitored[i] = False
            except AccelError:
                # NOT_SUPPORTED / NO_PERMISSION: this GPU's health is unmonitored (state unknown).
                self._monitored[i] = False

    def poll_events(self, timeout_s: float = 0.0) -> tuple[DeviceEvent, ...]:
        """XID and ECC events since the last poll; waits up to ``timeout_s`` for the first."""
        with self._lock:
            self._check_open()
            if self._event_set is None:
                return ()
            out: list[DeviceEvent] = []
            wait_ms = max(0, int(timeout_s * 1000))
            for _ in range(10_000):
                try:
                    data = self._nv.call("nvmlEventSetWait", self._event_set, wait_ms)
                except AccelError as err:
                    if nvml_code_of(err) != C.ERROR_TIMEOUT:
                        self._event_failure = f"nvmlEventSetWait failed: {err}"
                    break
                wait_ms = 0
                event = self._event(data)
                if event is not None:
                    out.append(event)
            return tuple(out)

    def _index_of(self, uuid: str) -> int | None:
        for i in range(self._count):
            try:
                if self._static(i).uuid == uuid:
                    return i
            except AccelError:
                continue
        return None

    def _event(self, data: Any) -> DeviceEvent | None:
        at = _now()
        try:
            uuid = _text(self._nv.call("nvmlDeviceGetUUID", data.device))
        except AccelError:
            return None
        device_id = f"nvidia:{uuid}"
        index = self._index_of(uuid)
        etype, payload = int(data.eventType), int(data.eventData)
        gi, ci = int(data.gpuInstanceId), int(data.computeInstanceId)
        partition = None
        if gi != _NOT_ATTRIBUTED:
            partition = f"GI {gi}" + (f"/CI {ci}" if ci != _NOT_ATTRIBUTED else "")
        if etype & C.EVENT_XID_CRITICAL:
            xid = payload
        elif etype & C.EVENT_DOUBLE_BIT_ECC:
            xid = 48
        else:
            return None  # single-bit ECC events are counted by the ECC counters, not conditions
        store = self._xids.setdefault(device_id, {})
        key = (xid, partition)
        prev = store.get(key)
        cond = xid_condition(xid, at=at, count=(prev.count + 1) if prev else 1,
                             first_seen=prev.first_seen if prev else at, partition=partition)
        store[key] = cond
        if xid_rule(xid).lost and index is not None:
            self._lost.setdefault(index, at)
        return DeviceEvent(device_id=device_id, timestamp=at, condition=cond)

    # -- topology -----------------------------------------------------------------------------
    def _topology(self, devices: list[Device], idx: dict[str, int]) -> tuple[list[Link], list[Domain],
                                                                             list[Problem]]:
        """Links and domains: the NVLink/NVSwitch and PCIe part is rebuilt only when what it is
        made of changes (the devices, the lost ones, the links each GPU's last sample found down;
        wiring, PCI places and common ancestors are static); the NVLink cliques are asked every
        time (the fabric manager's registration can change under a running driver)."""
        key = (tuple((d.id, d.pci.bus_id if d.pci else None, d.numa_node,
                      d.pci.bridge_path if d.pci else None) for d in devices),
               frozenset(self._lost), tuple(self._down_links.get(d.id, ()) for d in devices))
        if self._wiring is None or self._wiring[0] != key:
            self._wiring = (key, *self._wired(devices, idx))
        links, domains = list(self._wiring[1]), list(self._wiring[2])
        cliques, problems = self._cliques(devices, idx)
        return links, domains + cliques, problems

    def _wired(self, devices: list[Device], idx: dict[str, int]) -> tuple[list[Link], list[Domain]]:
        links: list[Link] = []
        domains: list[Domain] = []
        by_bus = {d.pci.bus_id: d.id for d in devices if d.pci is not None}
        switch_links: dict[str, dict[str, int]] = {}
        best_version: dict[str, int] = {}
        seen_pairs: set[frozenset[str]] = set()
        for dev in devices:
            st = self._statics.get(idx[dev.id])
            if st is None:
                continue
            sample_down = set(self._down_links.get(dev.id, ()))
            peers: dict[str, list[_NvLink]] = {}
            for lk in st.nvlinks:
                if lk.index in sample_down:
                    continue
                if lk.version is not None:
                    best_version[dev.id] = max(best_version.get(dev.id, 0), lk.version)
                if lk.remote_type == C.NVLINK_DEVICE_TYPE_SWITCH and lk.remote_bus_id:
                    switch_links.setdefault(dev.id, {}).setdefault(lk.remote_bus_id, 0)
                    switch_links[dev.id][lk.remote_bus_id] += 1
                elif lk.remote_bus_id in by_bus:
                    peers.setdefault(by_bus[lk.remote_bus_id], []).append(lk)
            for peer, lks in peers.items():
                pair = frozenset((dev.id, peer))
                if pair in seen_pairs or peer == dev.id:
                    continue
                seen_pairs.add(pair)
                gen, bw = _NVLINK.get(lks[0].version or 0, (None, None))
                links.append(Link(a=dev.id, b=peer, type=LinkType.NVLINK, count=len(lks), generation=gen,
                                  bandwidth_bytes_per_s=bw * len(lks) if bw else None))
        # NVSwitch: GPUs that reach a common switch chip are one fabric (union over switches).
        fabrics: list[tuple[set[str], set[str]]] = []
        for dev_id, switches in switch_links.items():
            merged = [f for f in fabrics if f[1] & set(switches)]
            members, sw = {dev_id}, set(switches)
            for f in merged:
                members |= f[0]
                sw |= f[1]
                fabrics.remove(f)
            fabrics.append((members, sw))
        for members, chips in fabrics:
            if len(members) < 2:
                continue
            ordered = [d.id for d in devices if d.id in members]
            fabric_id = f"nvidia:nvswitch-{min(chips)}"
            total = {m: sum(switch_links[m].values()) for m in ordered}
            for x in range(len(ordered)):
                for y in range(x + 1, len(ordered)):
                    a, b = ordered[x], ordered[y]
                    count = min(total[a], total[b])
                    gen, bw = _NVLINK.get(min(best_version.get(a, 0), best_version.get(b, 0)), (None, None))
                    full = max(len(self._statics[idx[a]].nvlinks), len(self._statics[idx[b]].nvlinks))
                    links.append(Link(a=a, b=b, type=LinkType.NVSWITCH, count=count, via=fabric_id,
                                      generation=gen, bandwidth_bytes_per_s=bw * count if bw else None,
                                      state=LinkState.UP if count >= full else LinkState.DEGRADED))
            domains.append(Domain(id=fabric_id, kind=DomainKind.NVLINK_ISLAND, members=tuple(ordered)))
        links += self._pcie_links(devices, idx)
        return links, domains

    def _fabric_info(self, h: Any) -> Any:
        """The GPU's fabric registration (``nvmlGpuFabricInfo_v2`` layout), or ``None``: no fabric API.

        NVML's C signature is ``nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t, nvmlGpuFabricInfoV_t *)``
        and the nvidia-ml-py wrapper forwards its second argument to C unchanged: the caller passes
        ``byref(struct)`` with ``struct.version`` set (a struct passed by value reaches C as a
        garbage pointer).  Drivers or bindings without the versioned call fall back to the
        unversioned ``nvmlDeviceGetGpuFabricInfo`` (R530+, deprecated in 13.x) with its own struct.
        """
        lib = self._nv.library
        if (self._nv.has("nvmlDeviceGetGpuFabricInfoV") and "nvmlDeviceGetGpuFabricInfoV" not in self._missing
                and hasattr(lib, "c_nvmlGpuFabricInfo_v2_t")):
            data = self._nv.new("c_nvmlGpuFabricInfo_v2_t")
            data.version = C.GPU_FABRIC_INFO_V2
            try:
                self._nv.call("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(data))
                return data
            except AccelError as err:
                if nvml_code_of(err) != C.ERROR_FUNCTION_NOT_FOUND:
                    raise
                self._missing.add("nvmlDeviceGetGpuFabricInfoV")
        if self._nv.has("nvmlDeviceGetGpuFabricInfo") and hasattr(lib, "c_nvmlGpuFabricInfo_t"):
            legacy = self._nv.new("c_nvmlGpuFabricInfo_t")
            self._nv.call("nvmlDeviceGetGpuFabricInfo", h, ctypes.byref(legacy))
            return legacy
        return None

    def _cliques(self, devices: list[Device], idx: dict[str, int]) -> tuple[list[Domain], list[Problem]]:
        """NVLink cliques (cluster UUID + clique id) from the fabric manager's registration.

        NOT_SUPPORTED (no fabric: PCIe, consumer boards, single-GPU hosts, non-MNNVL H100) and a
        driver without the call are facts and say nothing.  Any other failure, a registration that
        has not completed, or a completed one whose probe failed is a typed :class:`Problem` in the
        inventory: the clique domain is missing and the scheduler must be able to tell.
        """
        groups: dict[str, list[str]] = {}
        problems: list[Problem] = []
        fn = "nvmlDeviceGetGpuFabricInfoV"

        def problem(dev: Device, message: str, code: str) -> None:
            problems.append(Problem(kind=ProblemKind.FIELD, backend="nvidia", message=message, code=code,
                                    command=fn, device_id=dev.id))

        for dev in devices:
            if idx[dev.id] in self._lost:
                continue
            try:
                data = self._fabric_info(self._handle(idx[dev.id]))
            except DeviceLostError:
                continue
            except AccelError as err:
                if nvml_code_of(err) in (C.ERROR_NOT_SUPPORTED, C.ERROR_FUNCTION_NOT_FOUND):
                    continue
                problem(dev, f"fabric (NVLink clique) not read: {err.message}", err.code)
                continue
            if data is None:
                continue
            state, status = int(data.state), int(data.status)
            if state == C.GPU_FABRIC_STATE_NOT_SUPPORTED:
                continue
            if state != C.GPU_FABRIC_STATE_COMPLETED:
                problem(dev, f"fabric registration not complete (state {state}): NVLink clique unknown",
                        "device.fabric-not-ready")
                continue
            if status != C.SUCCESS:
                problem(dev, f"fabric registration failed (NVML error {status}): NVLink clique unknown",
                        "device.fabric-failed")
                continue
            cluster = bytes(data.clusterUuid)
            if not any(cluster):
                continue  # non-MNNVL hosts may report COMPLETED with an all-zero cluster UUID
            hexid = cluster.hex()
            key = f"{hexid[:8]}-{hexid[8:12]}-{hexid[12:16]}-{hexid[16:20]}-{hexid[20:]}/{int(data.cliqueId)}"
            groups.setdefault(key, []).append(dev.id)
        domains = [Domain(id=f"nvidia:clique-{k}", kind=DomainKind.NVLINK_CLIQUE, members=tuple(m))
                   for k, m in groups.items()]
        return domains, problems

    def _pcie_links(self, devices: list[Device], idx: dict[str, int]) -> list[Link]:
        """PCIe levels from NVML when sysfs gave no bridge path (NODE/SYS come from numa_node)."""
        out: list[Link] = []
        for x in range(len(devices)):
            for y in range(x + 1, len(devices)):
                a, b = devices[x], devices[y]
                if a.pci and b.pci and a.pci.bridge_path is not None and b.pci.bridge_path is not None:
                    continue  # the core derives the level from sysfs
                ia, ib = idx[a.id], idx[b.id]
                if ia in self._lost or ib in self._lost:
                    continue
                key = (ia, ib)
                if key not in self._ancestors:
                    try:
                        self._ancestors[key] = int(self._nv.call(
                            "nvmlDeviceGetTopologyCommonAncestor", self._handle(ia), self._handle(ib)))
                    except AccelError:
                        self._ancestors[key] = None
                level = self._ancestors[key]
                ltype = _ANCESTOR.get(level) if level is not None else None
                if ltype is None:
                    continue
                if ltype in (LinkType.NUMA, LinkType.SYSTEM) and a.numa_node is not None and b.numa_node is not None:
                    continue  # the core derives NODE/SYS from the NUMA nodes
                out.append(Link(a=a.id, b=b.id, type=ltype))
        return out

    def _p2p_ok(self, ia: int, ib: int) -> bool | None:
        key = (min(ia, ib), max(ia, ib))
        if key not in self._p2p:
            try:
                status = self._nv.call("nvmlDeviceGetP2PStatus", self._handle(key[0]), self._handle(key[1]),
                                       C.P2P_CAPS_INDEX_READ)
                self._p2p[key] = int(status) == C.P2P_STATUS_OK
            except AccelError:
                self._p2p[key] = None
        return self._p2p[key]

    # -- MIG ----------------------------------------------------------------------------------
    def _mig(self, st: _Static, h: Any, r: _Read) -> tuple[list[Partition], bool | None]:
        """The live MIG instances and whether a mode change is pending (``None``: no MIG mode);
        :attr:`_Read.mig_enabled` records the current mode, so nobody asks NVML twice."""
        mode = self._get(r, None, "nvmlDeviceGetMigMode", h)
        if mode is None:
            return [], None
        current, pending = int(mode[0]), int(mode[1])
        r.mig_enabled = current == C.DEVICE_MIG_ENABLE
        parts: list[Partition] = []
        if current == C.DEVICE_MIG_ENABLE:
            count = self._get(r, None, "nvmlDeviceGetMaxMigDeviceCount", h) or 0
            for slot in range(int(count)):
                try:
                    mh = self._nv.call("nvmlDeviceGetMigDeviceHandleByIndex", h, slot)
                except DeviceLostError:
                    raise
                except AccelError:
                    continue  # NOT_FOUND: an empty slot; slots are sparse, so go on
                part = self._partition(st, h, mh, int(count), r)
                if part is not None:
                    parts.append(part)
        return parts, pending != current

    def _partition(self, st: _Static, parent: Any, mh: Any, slots: int, r: _Read) -> Partition | None:
        uuid = self._get(r, None, "nvmlDeviceGetUUID", mh)
        if uuid is None:
            return None
        uuid = _text(uuid)
        gi = self._get(r, None, "nvmlDeviceGetGpuInstanceId", mh)
        ci = self._get(r, None, "nvmlDeviceGetComputeInstanceId", mh)
        if uuid.startswith("MIG-GPU-") and "/" in uuid and (gi is None or ci is None):
            # Legacy R450/R460 form MIG-GPU-<gpu-uuid>/<gi>/<ci>: the ids are in the UUID.
            _, gi_text, ci_text = uuid.rsplit("/", 2)
            gi, ci = int(gi_text), int(ci_text)
        name = _text(self._get(r, None, "nvmlDeviceGetName", mh) or "")
        attrs = self._get(r, None, "nvmlDeviceGetAttributes", mh)
        profile = name.rsplit("MIG ", 1)[1].strip() if "MIG " in name else None
        if profile is None and attrs is not None:
            profile = f"{int(attrs.gpuInstanceSliceCount)}g.{round(int(attrs.memorySizeMB) / 1024)}gb"
        placement = None
        if gi is not None:
            try:
                ginst = self._nv.call("nvmlDeviceGetGpuInstanceById", parent, int(gi))
                info = self._nv.call("nvmlGpuInstanceGetInfo", ginst)
                placement = Placement(start=int(info.placement.start), size=int(info.placement.size))
            except DeviceLostError:
                raise
            except AccelError:
                placement = None  # needs privileges (NO_PERMISSION in containers)
        memory = int(attrs.memorySizeMB) * MIB if attrs is not None else None
        return Partition(
            id=f"nvidia:{uuid}", parent_id=st.device_id, profile=profile or "unknown", placement=placement,
            uuid=uuid, gi_id=int(gi) if gi is not None else None, ci_id=int(ci) if ci is not None else None,
            memory_bytes=memory,
            compute_units=int(attrs.multiprocessorCount) if attrs is not None else None,
            # GPU-instance slices over the parent's slot count (7 compute slices on A100/H100).
            compute_ratio=min(1.0, int(attrs.gpuInstanceSliceCount) / slots) if attrs is not None and slots else None,
            binding=Binding(visible_env="CUDA_VISIBLE_DEVICES", visible_id=uuid, torch_device_type="cuda",
                            collective_backend="nccl", ray_resource="GPU"),
        )

    def _profiles(self, st: _Static, h: Any) -> tuple[PartitionProfile, ...]:
        if st.profiles_read or not st.mig_capable:
            return st.profiles
        out: list[PartitionProfile] = []
        for pidx in range(C.GPU_INSTANCE_PROFILE_COUNT):
            try:
                info = self._nv.call("nvmlDeviceGetGpuInstanceProfileInfo", h, pidx)
            except DeviceLostError:
                raise
            except AccelError:
                continue  # this GPU has no such profile
            placements: list[Placement] = []
            try:
                arr = self._nv.new_array("c_nvmlGpuInstancePlacement_t", 8)
                count = ctypes.c_uint(len(arr))
                self._nv.call("nvmlDeviceGetGpuInstancePossiblePlacements", h, int(info.id), arr, ctypes.byref(count))
                placements = [Placement(start=int(arr[i].start), size=int(arr[i].size)) for i in range(count.value)]
            except AccelError:
                placements = []
            name = _text(info.name).removeprefix("MIG ").strip() or f"{int(info.sliceCount)}g"
            out.append(PartitionProfile(name=name, parent_id=st.device_id, profile_id=int(info.id),
                                        memory_bytes=int(info.memorySizeMB) * MIB,
                                        compute_units=int(info.multiprocessorCount),
                                        max_instances=int(info.instanceCount), placements=tuple(placements)))
        st.profiles = tuple(out)
        st.profiles_read = True
        return st.profiles

    # -- processes ----------------------------------------------------------------------------
    def _processes(self, st: _Static, h: Any, parts: list[Partition]) -> list[ProcessUsage]:
        out: list[ProcessUsage] = []
        r = _Read()
        by_gi = {(p.gi_id, p.ci_id): p.id for p in parts}
        for fn, legacy in (("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2"),
                           ("nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses_v2")):
            procs = self._get(r, None, fn, h, fallback=legacy)
            for p in procs or ():
                pid = int(p.pid)
                used = getattr(p, "usedGpuMemory", None)
                if used is not None and int(used) >= C.VALUE_NOT_AVAILABLE_ULL:
                    used = None
                gi = getattr(p, "gpuInstanceId", _NOT_ATTRIBUTED)
                ci = getattr(p, "computeInstanceId", _NOT_ATTRIBUTED)
                partition = by_gi.get((gi, ci)) or by_gi.get((gi, 0)) if gi != _NOT_ATTRIBUTED else None
                comm = self._proc_root / str(pid) / "comm"
                # NVML reports host-namespace PIDs even inside containers (the driver is not
                # pid-namespace aware): a pid missing from our /proc is another namespace's.
                present = (self._proc_root / str(pid)).is_dir()
                name = None
                if present:
                    try:
                        name = comm.read_text().strip() or None
                    except OSError:
                        name = None
                out.append(ProcessUsage(pid=pid, device_id=st.device_id, partition_id=partition,
                                        memory_bytes=int(used) if used is not None else None, name=name,
                                        pid_in_namespace=present))
        return out

    # -- public surface -----------------------------------------------------------------------
    def _snapshot(self, index: int, at: datetime) -> tuple[_Pending | None, list[Partition], list[ProcessUsage],
                                                            tuple[PartitionProfile, ...]]:
        """One GPU's reading: what changed since its static device, validated later, once."""
        try:
            st = self._static(index)
        except DeviceLostError:
            self._lost.setdefault(index, at)
            return None, [], [], ()
        except AccelError:
            return None, [], [], ()
        if index in self._lost:
            return self._lost_device(st, at), [], [], st.profiles
        errors_or_health = self._wants(Reading.ERRORS) or self._wants(Reading.HEALTH)
        topology = self._wants(Reading.TOPOLOGY)
        gen = width = None
        procs: list[ProcessUsage] = []
        try:
            h = self._handle(index)
            s = self._sample(index)
            ecc = self._get(s.read, None, "nvmlDeviceGetEccMode", h) if errors_or_health else _UNREAD
            memory = self._memory(s.read, h, st.device.memory[0].kind if st.device.memory else MemoryKind.UNKNOWN,
                                  ecc)
            parts, mig_pending = self._mig(st, h, s.read)
            profiles = self._profiles(st, h)
            if topology:
                gen = self._get(s.read, None, "nvmlDeviceGetCurrPcieLinkGeneration", h)
                width = self._get(s.read, None, "nvmlDeviceGetCurrPcieLinkWidth", h)
            if self._wants(Reading.PROCESSES):
                procs = self._processes(st, h, parts)
            # Health is earned: a read that was not asked for health reads none and claims none.
            health = self._health(index, s, at) if self._wants(Reading.HEALTH) else _NO_HEALTH
            self._lent[index] = (time.monotonic(), s, memory)
            if topology:
                self._down_links[st.device_id] = tuple(
                    lk.index for lk in st.nvlinks if s.link_fields.get((_FI_NVLINK_STATE, lk.index)) == 0)
            mig_on = bool(parts) or bool(s.read.mig_enabled)
        except DeviceLostError:
            self._lost.setdefault(index, at)
            return self._lost_device(st, at), [], [], st.profiles
        st.memory = memory
        dev = st.device
        update: dict[str, Any] = {
            "memory": (memory,), "health": health,
            "unsupported": frozenset(st.unsupported | s.read.unsupported),
            "partition_mode": _partition_mode(mig_on, mig_pending),
        }
        if topology and dev.pci is not None:
            # Validated here (bounds of the two new values), once per reading.
            update["pci"] = PciInfo.model_validate({**dev.pci.__dict__, "link_gen_current": gen,
                                                    "link_width_current": width})
        caps: dict[str, Any] = {"ecc": True} if ecc is not None and ecc is not _UNREAD else {}
        return _Pending(st.device, update, caps), parts, procs, profiles

    def _lost_device(self, st: _Static, at: datetime) -> _Pending:
        update: dict[str, Any] = {"health": self._health(st.index, None, at)}
        if st.memory is not None:
            update["memory"] = (st.memory,)
        return _Pending(st.device, update, {})

    def inventory(self) -> HostInventory:
        with self._lock:
            self._check_open()
            at = _now()
            if self._wants(Reading.HEALTH):
                self.poll_events(0.0)
            pending: list[_Pending] = []
            partitions: list[Partition] = []
            profiles: list[PartitionProfile] = []
            processes: list[ProcessUsage] = []
            skipped: list[int] = []
            for i in range(self._count):
                dev, parts, procs, profs = self._snapshot(i, at)
                if dev is None:
                    skipped.append(i)
                    continue
                pending.append(dev)
                partitions += parts
                processes += procs
                profiles += profs
            idx = {p.base.id: p.base.index if p.base.index is not None else -1 for p in pending}
            p2p = self._p2p_of([p.base.id for p in pending], idx)
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
                built = _with_reading(p.base, update)
                self._last[p.base.id] = (p.base, update, built)
                devices.append(built)
            links: list[Link] = []
            domains: list[Domain] = []
            problems: list[Problem] = []
            if self._wants(Reading.TOPOLOGY):
                links, domains, problems = self._topology(devices, idx)
            detail = []
            if self._scenario:
                detail.append(f"fake NVML scenario {self._scenario!r} (test facility, not hardware)")
            if skipped:
                detail.append(f"GPU indices {skipped} could not be read (lost before identification)")
            if self._readings is not None:
                detail.append(describe_readings(self._readings))
            inv = HostInventory(
                host=self._host_model(),
                devices=tuple(devices), partitions=tuple(partitions), partition_profiles=tuple(profiles),
                links=tuple(links), domains=tuple(domains), processes=tuple(processes), collected_at=at,
                sources=(SourceInfo(backend="nvidia", plugin_version=self._plugin_version, api="nvml",
                                    api_version=self._nvml_version, detail="; ".join(detail) or None),),
                problems=tuple(problems),
            )
            # Its own sysfs pass decides which NVML-derived PCIe links to drop; without topology
            # there are none, and the session fills PCIe place and NUMA when enrich_from_sysfs.
            if self._use_sysfs() and (self._wants(Reading.TOPOLOGY) or not self._config.enrich_from_sysfs):
                inv = enrich_inventory(inv, self._config.sysfs_root)
                if any(d.pci is not None and d.pci.bridge_path is not None for d in inv.devices):
                    # sysfs knows the PCI tree: drop NVML-derived PCIe links, the core derives them.
                    keep = tuple(lk for lk in inv.links if lk.type not in _ANCESTOR.values())
                    inv = HostInventory.model_validate({**inv.__dict__, "links": keep})
            return inv

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

    def _p2p_of(self, ids: list[str], idx: dict[str, int]) -> dict[str, bool | None]:
        """Whether each GPU can reach a peer directly (cached per pair, and per device set and
        lost set: the answer changes only when one of them does); empty for fewer than two."""
        if len(ids) < 2:
            return {}
        key = (tuple(ids), frozenset(self._lost))
        if self._p2p_devices is not None and self._p2p_devices[0] == key:
            return self._p2p_devices[1]
        out: dict[str, bool | None] = {}
        for d in ids:
            results = [self._p2p_ok(idx[d], idx[o]) for o in ids
                       if o != d and idx[d] not in self._lost and idx[o] not in self._lost]
            known = [x for x in results if x is not None]
            out[d] = any(known) if known else None
        self._p2p_devices = (key, out)
        return out

    def _ids(self, ids: Sequence[str] | None) -> list[int]:
        indices = []
        for i in range(self._count):
            try:
                self._static(i)
            except AccelError:
                if i not in self._lost:
                    continue
            indices.append(i)
        if ids is None:
            return [i for i in indices if i in self._statics]
        known = {self._statics[i].device_id: i for i in indices if i in self._statics}
        unknown = [x for x in ids if x not in known]
        if unknown:
            raise DeviceError(f"no NVIDIA device {unknown[0]!r} (known: {', '.join(known)})", device_id=unknown[0])
        return [known[x] for x in ids]

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        with self._lock:
            self._check_open()
            self.poll_events(0.0)
            at = _now()
            out: dict[str, Health] = {}
            for i in self._ids(ids):
                st = self._statics[i]
                sample = None
                if i not in self._lost:
                    try:
                        sample = self._sample(i, full=True)
                        out[st.device_id] = self._health(i, sample, at)
                        continue
                    except DeviceLostError:
                        self._lost.setdefault(i, at)
                out[st.device_id] = self._health(i, sample, at)
            return out

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        with self._lock:
            self._check_open()
            out = []
            for i in self._ids(ids):
                st = self._statics[i]
                at = _now()
                if i in self._lost:
                    out.append(_lost_sample(st.device_id, at))
                    continue
                try:
                    out.append(self._telemetry(st, at))
                except DeviceLostError:
                    self._lost.setdefault(i, at)
                    out.append(_lost_sample(st.device_id, at))
            return tuple(out)

    def _telemetry(self, st: _Static, at: datetime) -> Telemetry:
        h = self._handle(st.index)
        lent = self._lent.pop(st.index, None)
        fresh = lent is not None and time.monotonic() - lent[0] <= _LEND_S
        s = lent[1] if lent is not None and fresh else self._sample(st.index)
        r = s.read
        f = s.fields
        unsupported: set[str] = set()

        def get(name: str, fn: str, *args: Any, fallback: str | None = None) -> Any:
            value = self._get(r, name, fn, *args, fallback=fallback)
            if name in r.unsupported:
                unsupported.add(name)
            return value

        # A group the caller did not ask for (BackendConfig.readings) is not read: its values
        # stay None, and it is not "unsupported" either.
        wants = self._wants
        errors = wants(Reading.ERRORS)
        util = get("utilization_ratio", "nvmlDeviceGetUtilizationRates", h) if wants(Reading.UTILIZATION) else None
        if util is None:
            unsupported.discard("utilization_ratio")
            if "utilization_ratio" in r.unsupported:
                unsupported |= {"utilization_ratio", "memory_utilization_ratio"}
        mem: MemoryRegion | None = None
        if wants(Reading.MEMORY):
            mem = lent[2] if lent is not None and fresh else self._memory(r, h, MemoryKind.UNKNOWN, None)
        temp = get("temperature_celsius", "nvmlDeviceGetTemperatureV", h, C.TEMPERATURE_GPU,
                   fallback="nvmlDeviceGetTemperature") if wants(Reading.TEMPERATURE) else None
        fan = None
        if wants(Reading.FAN) and st.fanless:
            unsupported.add("fan_ratio")
        elif wants(Reading.FAN):
            fan = get("fan_ratio", "nvmlDeviceGetFanSpeed", h)
            st.fanless = "fan_ratio" in unsupported
        clocks: dict[str, int] = {}
        if wants(Reading.CLOCKS):
            for label, ctype in (("graphics", C.CLOCK_GRAPHICS), ("sm", C.CLOCK_SM), ("memory", C.CLOCK_MEM),
                                 ("video", C.CLOCK_VIDEO)):
                mhz = self._get(r, None, "nvmlDeviceGetClockInfo", h, ctype)
                if mhz is not None:
                    clocks[label] = int(mhz) * 1_000_000
        throttle = self._get(r, None, "nvmlDeviceGetCurrentClocksEventReasons", h,
                             fallback="nvmlDeviceGetCurrentClocksThrottleReasons") if wants(Reading.THROTTLE) else None
        tx = rx = None
        if wants(Reading.PCIE):
            # NVML reports PCIe throughput in KB/s; nvitop and nvidia-smi treat it as KiB/s.
            tx = self._get(r, None, "nvmlDeviceGetPcieThroughput", h, C.PCIE_UTIL_TX_BYTES)
            rx = self._get(r, None, "nvmlDeviceGetPcieThroughput", h, C.PCIE_UTIL_RX_BYTES)
        power = f.get(C.FI_POWER_INSTANT)
        energy = f.get(C.FI_TOTAL_ENERGY)
        mem_temp = f.get(C.FI_MEMORY_TEMP)
        temps = {"gpu": float(temp)} if temp is not None else {}
        if mem_temp is not None:
            temps["memory"] = float(mem_temp)

        def total(*fids: int) -> int | None:
            vals = [f.get(x) for x in fids]
            return sum(int(v) for v in vals if v is not None) if any(v is not None for v in vals) else None

        link_counters = tuple(self._link_counters(st, lk.index, s) for lk in st.nvlinks) if wants(Reading.LINKS) \
            else ()
        return Telemetry(
            device_id=st.device_id, timestamp=at,
            utilization_ratio=int(util.gpu) / 100 if util is not None else None,
            memory_utilization_ratio=int(util.memory) / 100 if util is not None else None,
            memory_used_bytes=mem.used_bytes if mem is not None else None,
            memory_total_bytes=mem.total_bytes if mem is not None else None,
            memory_free_bytes=mem.free_bytes if mem is not None else None,
            power_watts=float(power) / 1000 if power is not None else None,
            energy_joules=float(energy) / 1000 if energy is not None else None,
            temperature_celsius=float(temp) if temp is not None else None, temperatures_celsius=temps,
            clocks_hertz=clocks, fan_ratio=int(fan) / 100 if fan is not None else None,
            throttle_reasons=throttle_names(int(throttle)) if throttle is not None else (),
            pcie_tx_bytes_per_s=int(tx) * 1024 if tx is not None else None,
            pcie_rx_bytes_per_s=int(rx) * 1024 if rx is not None else None,
            pcie_replay_total=total(C.FI_PCIE_REPLAY_COUNTER) if errors else None,
            ecc_corrected_total=total(C.FI_ECC_SBE_VOL_TOTAL) if errors else None,
            ecc_uncorrected_total=total(C.FI_ECC_DBE_VOL_TOTAL) if errors else None,
            retired_pages_total=total(C.FI_RETIRED_SBE, C.FI_RETIRED_DBE) if errors else None,
            links=link_counters, unsupported=frozenset(unsupported),
        )

    def _link_counters(self, st: _Static, link: int, s: _Sample) -> LinkCounters:
        """One link's counters; the previous (frozen, validated) object when they did not move,
        which is almost always (error counters of 18 links per GPU, every scrape)."""
        values = (s.link_fields.get((C.FI_NVLINK_ERROR_DL_REPLAY, link)),
                  s.link_fields.get((C.FI_NVLINK_ERROR_DL_RECOVERY, link)),
                  s.link_fields.get((C.FI_NVLINK_ERROR_DL_CRC, link)))
        key = (st.device_id, link)
        last = self._link_last.get(key)
        if last is not None and last[0] == values:
            return last[1]
        counters = LinkCounters(link=f"nvlink{link}", replay_errors_total=values[0],
                                recovery_errors_total=values[1], crc_errors_total=values[2])
        self._link_last[key] = (values, counters)
        return counters

    def processes(self, ids: Sequence[str] | None = None) -> tuple[ProcessUsage, ...]:
        with self._lock:
            self._check_open()
            out: list[ProcessUsage] = []
            for i in self._ids(ids):
                if i in self._lost:
                    continue
                st = self._statics[i]
                try:
                    h = self._handle(i)
                    parts, _ = self._mig(st, h, _Read())
                    out += self._processes(st, h, parts)
                except DeviceLostError:
                    self._lost.setdefault(i, _now())
            return tuple(out)

    def partitions(self) -> tuple[Partition, ...]:
        with self._lock:
            self._check_open()
            out: list[Partition] = []
            for i in self._ids(None):
                if i in self._lost:
                    continue
                try:
                    parts, _ = self._mig(self._statics[i], self._handle(i), _Read())
                    out += parts
                except DeviceLostError:
                    self._lost.setdefault(i, _now())
            return tuple(out)

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        with self._lock:
            self._check_open()
            out: list[PartitionProfile] = []
            for i in self._ids(None):
                if i in self._lost:
                    out += self._statics[i].profiles
                    continue
                try:
                    out += self._profiles(self._statics[i], self._handle(i))
                except DeviceLostError:
                    self._lost.setdefault(i, _now())
            return tuple(out)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._event_set is not None:
                with contextlib.suppress(AccelError):  # nothing to release if the driver refuses
                    self._nv.call("nvmlEventSetFree", self._event_set)
                self._event_set = None
            self._handles.clear()
            self._lent.clear()
            self._nv.shutdown()



def _lost_sample(device_id: str, at: datetime) -> Telemetry:
    """A lost GPU answers nothing until it is reset: every reading is listed as unavailable."""
    empty = {name for name, info in Telemetry.model_fields.items()
             if name not in ("device_id", "timestamp", "unsupported") and not info.is_required()}
    return Telemetry(device_id=device_id, timestamp=at, unsupported=frozenset(empty))
