"""What does not change while the driver is loaded: identity, PCI, limits, NVLink wiring.

Read once per GPU index on the first snapshot and cached (:class:`StaticReader`); a GPU lost
while it is being identified still gets its static device, with what could be read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accel.toolkit import DeviceReading, assemble_device

from ...errors import AccelError, DeviceLostError
from ...model import (
    Binding,
    Capabilities,
    ComputeInfo,
    Device,
    DeviceKind,
    MemoryKind,
    MemoryRegion,
    PartitionProfile,
    PartitionScheme,
    PciInfo,
    PowerLimits,
    ThermalLimits,
    VersionInfo,
    normalize_bus_id,
)
from ._handles import Handles, NvmlPart, Read, now, text
from ._memory import MemoryReader
from ._nvml import C, nvml_code_of

__all__ = ["NvLink", "Static", "StaticReader", "cpulist", "memory_kind"]

_ARCH = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere", 8: "Ada Lovelace",
         9: "Hopper", 10: "Blackwell", 13: "Rubin"}
_BRAND = {1: "Quadro", 2: "Tesla", 3: "NVS", 4: "GRID", 5: "GeForce", 6: "Titan", 7: "NVIDIA vApps",
          8: "NVIDIA vPC", 9: "NVIDIA vCS", 10: "NVIDIA vWS", 11: "NVIDIA Cloud Gaming", 12: "Quadro RTX",
          13: "NVIDIA RTX", 14: "NVIDIA"}
#: NVML's NVML_NVLINK_MAX_LINKS is 36 in 13.x (18, 12, 6 in older bindings): loop, stop on errors.
_MAX_LINKS = 36
#: Products with on-package HBM (by name prefix); everything GeForce/RTX/Quadro/L-series is GDDR.
_HBM = ("NVIDIA H100", "NVIDIA H200", "NVIDIA H800", "NVIDIA H20", "NVIDIA A100", "NVIDIA A800", "NVIDIA A30",
        "NVIDIA B100", "NVIDIA B200", "NVIDIA B300", "NVIDIA GH200", "NVIDIA GB200", "NVIDIA GB300",
        "Tesla V100", "Tesla P100", "NVIDIA PG")
_GDDR = ("NVIDIA GeForce", "GeForce", "NVIDIA RTX", "Quadro", "NVIDIA L4", "NVIDIA L40", "NVIDIA A10",
         "NVIDIA A40", "NVIDIA A16", "NVIDIA A2", "Tesla T4", "NVIDIA T4", "NVIDIA TITAN")


def cpulist(words: Sequence[int]) -> str | None:
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


def memory_kind(name: str) -> MemoryKind:
    if "HBM" in name or name.startswith(_HBM):
        return MemoryKind.HBM
    if name.startswith(_GDDR):
        return MemoryKind.GDDR
    return MemoryKind.UNKNOWN


@dataclass
class NvLink:
    index: int
    remote_bus_id: str | None
    remote_type: int | None
    version: int | None


@dataclass
class Static:
    """What does not change while the driver is loaded, read once per device index."""

    index: int
    device_id: str
    uuid: str
    device: Device
    unsupported: set[str]
    nvlinks: list[NvLink]
    mig_capable: bool
    thresholds: tuple[int | None, int | None]
    profiles: tuple[PartitionProfile, ...] = ()
    profiles_read: bool = False
    #: The memory of the last reading: a GPU lost later keeps its last known memory.
    memory: MemoryRegion | None = None
    #: The board has no fan NVML reports (NOT_SUPPORTED once): a build fact, not asked again.
    fanless: bool = False


class StaticReader(NvmlPart):
    """The driver's versions (read at open) and each GPU's :class:`Static`, cached by index."""

    def __init__(self, handles: Handles, memory: MemoryReader) -> None:
        super().__init__(handles)
        self._memory = memory
        self.statics: dict[int, Static] = {}
        self.driver = self._system("nvmlSystemGetDriverVersion")
        self.nvml_version = self._system("nvmlSystemGetNVMLVersion")
        cuda = self._system_int("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
        self.cuda = f"{cuda // 1000}.{(cuda % 1000) // 10}" if cuda is not None else None

    def _system(self, fn: str) -> str | None:
        try:
            return text(self._nv.call(fn))
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

    def static(self, index: int) -> Static:
        st = self.statics.get(index)
        if st is None:
            st = self._read_static(index)
            self.statics[index] = st
        return st

    def index_of(self, uuid: str, count: int) -> int | None:
        """The index of the GPU with ``uuid`` among the first ``count`` (``None``: not readable)."""
        for i in range(count):
            try:
                if self.static(i).uuid == uuid:
                    return i
            except AccelError:
                continue
        return None

    def _read_static(self, index: int) -> Static:
        h = self._handle(index)
        r = Read(tolerate_lost=True)
        uuid = text(self._nv.call("nvmlDeviceGetUUID", h))
        name = text(self._nv.call("nvmlDeviceGetName", h))
        pci = self._nv.call("nvmlDeviceGetPciInfo", h)
        bus_id = normalize_bus_id(text(pci.busId))
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
        extras = _extras(persistence, bar1, cores, nvlinks, minor)
        firmware = {k: text(v) for k, v in (("vbios", vbios), ("inforom_image", inforom)) if v is not None}
        if ecc is None:
            # NVML: ECC mode is "only applicable to devices with ECC": NOT_SUPPORTED is a fact.
            r.unsupported.discard("memory.ecc_supported")
        kind = memory_kind(name)
        # Read once here as well: a GPU lost later keeps its last known memory in the inventory.
        first_memory = self._memory.read(r, h, kind, ecc)
        # The static device's ``unsupported`` stays empty: each reading settles it (the rule:
        # accel.toolkit.unsupported_of) from these NOT_SUPPORTED answers and its own.
        device = assemble_device(DeviceReading(Device.model_construct(
            id=device_id, vendor="nvidia", kind=DeviceKind.GPU, model=name, index=index,
            uuid=uuid or None, serial_number=text(serial) if serial else None,
            brand=_BRAND.get(int(brand)) if brand is not None else None,
            architecture=_ARCH.get(int(arch)) if arch is not None else None,
            compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
            pci=PciInfo.model_construct(bus_id=bus_id, vendor_id="10de", device_id=f"{pci_dev:04x}",
                           subsystem_vendor_id=f"{sub & 0xFFFF:04x}" if sub else None,
                           subsystem_device_id=f"{sub >> 16 & 0xFFFF:04x}" if sub else None,
                           link_gen_max=gen_max, link_width_max=width_max),
            numa_node=numa, cpu_affinity=cpus,
            versions=VersionInfo.model_construct(driver=self.driver, runtime_name="cuda", runtime=self.cuda,
                                                 firmware=firmware),
            memory=(first_memory,),
            compute=ComputeInfo.model_construct(units=int(cores) if cores is not None else None,
                                   unit_kind="cuda_core" if cores is not None else None,
                                   max_clock_hertz=int(sm_max) * 1_000_000 if sm_max is not None else None,
                                   memory_max_clock_hertz=int(mem_max) * 1_000_000 if mem_max is not None else None),
            power=PowerLimits.model_construct(default_watts=default_mw / 1000 if default_mw is not None else None,
                               min_watts=limits[0] / 1000 if limits else None,
                               max_watts=limits[1] / 1000 if limits else None,
                               enforced_watts=enforced_mw / 1000 if enforced_mw is not None else None),
            thermal=ThermalLimits.model_construct(slowdown_celsius=slowdown, shutdown_celsius=shutdown,
                                   max_operating_celsius=gpu_max),
            capabilities=Capabilities(ecc=ecc is not None,
                                      partitioning=(PartitionScheme.MIG,) if mig_mode is not None else ()),
            binding=Binding(visible_env="CUDA_VISIBLE_DEVICES", visible_id=uuid or bus_id, torch_device_type="cuda",
                            collective_backend="nccl", ray_resource="GPU",
                            device_nodes=(f"/dev/nvidia{int(minor)}",) if minor is not None else ()),
            extras=extras,
        )), tool="nvml")
        if r.lost:
            self._lost.setdefault(index, now())
        return Static(index=index, device_id=device_id, uuid=uuid, device=device, unsupported=r.unsupported,
                      nvlinks=nvlinks, mig_capable=mig_mode is not None, thresholds=(slowdown, shutdown))

    def _affinity(self, r: Read, h: Any) -> tuple[int | None, str | None]:
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
        return numa, cpulist(list(cpu_mask)) if cpu_mask is not None else None

    def _read_nvlinks(self, r: Read, h: Any) -> list[NvLink]:
        links: list[NvLink] = []
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
                    bus = normalize_bus_id(text(remote.busId))
                except AccelError:
                    bus = None
            links.append(NvLink(link, bus, int(rtype) if rtype is not None else None,
                                int(version) if version is not None else None))
        return links


def _extras(persistence: Any, bar1: Any, cores: Any, nvlinks: list[NvLink], minor: Any) -> dict[str, Any]:
    """The ``nvidia.com/*`` extras of a static device, from what its reads answered."""
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
    return extras
