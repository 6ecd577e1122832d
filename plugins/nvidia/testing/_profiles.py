"""Device profiles and scenarios for the fake NVML, as data.

A *SKU* (:data:`SKUS`) is what every board of one product shares: name, architecture, memory,
limits, which NVML functions answer NOT_SUPPORTED on it.  A :class:`Scenario` places GPUs of
SKUs on a host (bus ids, UUIDs, NUMA nodes, NVLinks) and adds driver facts, faults and scripted
events.  The H100 scenario agrees with the simulator profile ``dgx-h100`` (same UUID and serial
formulas, bus ids, memory, NUMA layout).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "GB200_CLIQUE_ID",
    "GB200_CLUSTER_UUID",
    "SCENARIOS",
    "SKUS",
    "EventSpec",
    "GpuSpec",
    "LinkSpec",
    "MigProfileSpec",
    "MigSlot",
    "ProcessSpec",
    "Scenario",
    "dgx_h100_serial",
    "dgx_h100_uuid",
    "get_scenario",
]

MIB = 1024 * 1024

#: NVML functions that answer NOT_SUPPORTED on consumer (GeForce) boards (reference section 1.5).
CONSUMER_NOT_SUPPORTED = frozenset({
    "nvmlDeviceGetSerial", "nvmlDeviceGetInforomImageVersion", "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages", "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetNvLinkRemotePciInfo",
    "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetGpuInstanceProfileInfo",
})
#: Pre-Ampere datacenter boards: no MIG, no row remapping.
VOLTA_NOT_SUPPORTED = frozenset({
    "nvmlDeviceGetRemappedRows", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetGpuInstanceProfileInfo", "nvmlDeviceGetGpuFabricInfoV",
})
#: Ampere and newer replace page retirement by row remapping.
AMPERE_NOT_SUPPORTED = frozenset({"nvmlDeviceGetRetiredPages", "nvmlDeviceGetRetiredPagesPendingStatus"})


@dataclass
class LinkSpec:
    """One NVLink of a GPU: to a peer GPU or an NVSwitch (``remote_type`` 0 GPU, 2 switch)."""

    remote_bus_id: str
    remote_type: int = 2
    version: int = 6
    active: bool = True
    replay: int = 0
    recovery: int = 0
    crc: int = 0


@dataclass
class MigProfileSpec:
    name: str
    profile_index: int
    profile_id: int
    slices: int
    memory_mib: int
    sm_count: int
    max_instances: int
    placements: tuple[tuple[int, int], ...]


@dataclass
class MigSlot:
    """A live MIG device in one slot of ``nvmlDeviceGetMigDeviceHandleByIndex``."""

    profile: str
    gi_id: int
    ci_id: int
    placement: tuple[int, int]
    uuid: str
    memory_used_bytes: int = 0


@dataclass
class ProcessSpec:
    pid: int
    used_bytes: int | None
    kind: str = "compute"
    gi_id: int = 0xFFFFFFFF
    ci_id: int = 0xFFFFFFFF


@dataclass
class EventSpec:
    """A scripted NVML event: an XID on GPU ``gpu`` (optionally on a MIG instance)."""

    gpu: int
    xid: int
    event_type: int = 0x8
    gi_id: int = 0xFFFFFFFF
    ci_id: int = 0xFFFFFFFF


@dataclass
class GpuSpec:
    """Everything the fake answers for one GPU.  ``None`` values answer NOT_SUPPORTED."""

    name: str
    uuid: str
    bus_id: str
    serial: str | None
    pci_device_id: int
    pci_subsystem_id: int
    architecture: int
    cuda_cc: tuple[int, int]
    brand: int
    minor: int
    memory_total: int
    memory_reserved: int
    memory_used: int
    bar1_total: int
    power_default_mw: int
    power_min_mw: int
    power_max_mw: int
    power_usage_mw: int
    energy_mj: int
    temperature_c: int
    memory_temperature_c: int | None
    thresholds_c: dict[int, int]
    clocks_mhz: dict[int, int]
    max_clocks_mhz: dict[int, int]
    cores: int | None
    fan_percent: int | None
    pcie_gen: tuple[int, int]
    pcie_width: tuple[int, int]
    pcie_kbps: tuple[int, int] = (1200, 3400)
    pcie_replay: int = 0
    utilization: tuple[int, int] = (0, 0)
    pstate: int = 0
    vbios: str = "96.00.89.00.01"
    inforom: str | None = "G520.0200.00.05"
    persistence: int = 1
    ecc_mode: tuple[int, int] | None = (1, 1)
    ecc_counts: dict[str, int] = field(default_factory=dict)
    retired_sbe: list[int] = field(default_factory=list)
    retired_dbe: list[int] = field(default_factory=list)
    retired_pending: int = 0
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)
    numa_node: int = 0
    cpus: str = "0-55,112-167"
    nvlinks: list[LinkSpec] = field(default_factory=list)
    mig_mode: tuple[int, int] | None = None
    mig_max: int = 0
    mig_profiles: list[MigProfileSpec] = field(default_factory=list)
    mig_slots: dict[int, MigSlot] = field(default_factory=dict)
    mig_privileged: bool = True
    processes: list[ProcessSpec] = field(default_factory=list)
    throttle: int = 0x1
    #: (state, cluster UUID bytes, clique id) of ``nvmlDeviceGetGpuFabricInfoV``; None: NOT_SUPPORTED.
    fabric: tuple[int, bytes, int] | None = None
    #: The fabric probe's ``status`` (an NVML return code; meaningful when the state is COMPLETED).
    fabric_status: int = 0
    supported_events: int = 0x1 | 0x2 | 0x8
    not_supported: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    lost: bool = False
    #: The GPU answers identity queries, then GpuIsLost for everything else (lost after enumeration).
    lost_after_identity: bool = False


@dataclass
class Scenario:
    name: str
    description: str
    gpus: list[GpuSpec] = field(default_factory=list)
    driver_version: str = "550.54.15"
    cuda_driver_version: int = 12040
    nvml_version: str = "12.550.54.15"
    init_error: int | None = None
    #: Wrapper names that raise NVMLError_FunctionNotFound (symbols the driver lacks).
    missing: set[str] = field(default_factory=set)
    #: Wrapper names that raise NVMLLibraryMismatchError (the unversioned process wrappers).
    library_mismatch: set[str] = field(default_factory=set)
    #: Field ids above this answer INVALID_ARGUMENT (an older driver does not know them).
    max_field_id: int = 10_000
    events: list[EventSpec] = field(default_factory=list)
    #: Explicit common-ancestor levels by GPU index pair; default NODE within a NUMA node, else SYSTEM.
    ancestors: dict[tuple[int, int], int] = field(default_factory=dict)
    #: Whether NVIDIA functions are on the PCI bus (for the probe): false only with no hardware.
    pci_present: bool = True
    #: Whether /dev/nvidia* nodes exist (the kernel module is loaded).
    dev_present: bool = True


# -- SKUs ---------------------------------------------------------------------------------------

SKUS: dict[str, dict[str, Any]] = {
    "h100-sxm5-80gb": {
        "name": "NVIDIA H100 80GB HBM3", "pci_device_id": 0x2330, "pci_subsystem_id": 0x16C110DE,
        "architecture": 9, "cuda_cc": (9, 0), "brand": 2,
        "memory_total": 85520809984, "memory_reserved": 551 * MIB, "memory_used": 0,
        "bar1_total": 131072 * MIB,
        "power_default_mw": 700000, "power_min_mw": 200000, "power_max_mw": 700000,
        "power_usage_mw": 72000, "energy_mj": 9_876_543_210, "temperature_c": 31,
        "memory_temperature_c": 37,
        "thresholds_c": {0: 92, 1: 89, 2: 95, 3: 87},
        "clocks_mhz": {0: 345, 1: 345, 2: 2619, 3: 765},
        "max_clocks_mhz": {0: 1980, 1: 1980, 2: 2619, 3: 1545},
        "cores": 16896, "fan_percent": None, "pcie_gen": (5, 5), "pcie_width": (16, 16),
        "vbios": "96.00.89.00.01", "inforom": "G520.0200.00.05",
        "not_supported": {"nvmlDeviceGetFanSpeed"} | AMPERE_NOT_SUPPORTED,
        "mig_mode": (0, 0), "mig_max": 7,
    },
    "a100-sxm4-80gb": {
        "name": "NVIDIA A100-SXM4-80GB", "pci_device_id": 0x20B2, "pci_subsystem_id": 0x147F10DE,
        "architecture": 7, "cuda_cc": (8, 0), "brand": 2,
        "memory_total": 81920 * MIB, "memory_reserved": 495 * MIB, "memory_used": 0,
        "bar1_total": 131072 * MIB,
        "power_default_mw": 400000, "power_min_mw": 100000, "power_max_mw": 400000,
        "power_usage_mw": 61000, "energy_mj": 1_234_567_890, "temperature_c": 29,
        "memory_temperature_c": 33,
        "thresholds_c": {0: 92, 1: 89, 2: 95, 3: 87},
        "clocks_mhz": {0: 1410, 1: 1410, 2: 1593, 3: 1275},
        "max_clocks_mhz": {0: 1410, 1: 1410, 2: 1593, 3: 1290},
        "cores": 6912, "fan_percent": None, "pcie_gen": (4, 4), "pcie_width": (16, 16),
        "vbios": "92.00.45.00.06", "inforom": "G506.0212.00.02",
        "not_supported": {"nvmlDeviceGetFanSpeed"} | AMPERE_NOT_SUPPORTED,
        "mig_mode": (0, 0), "mig_max": 7,
    },
    "rtx-4090": {
        "name": "NVIDIA GeForce RTX 4090", "pci_device_id": 0x2684, "pci_subsystem_id": 0x16F310DE,
        "architecture": 8, "cuda_cc": (8, 9), "brand": 5,
        "memory_total": 24564 * MIB, "memory_reserved": 329 * MIB, "memory_used": 0,
        "bar1_total": 256 * MIB,
        "power_default_mw": 450000, "power_min_mw": 150000, "power_max_mw": 600000,
        "power_usage_mw": 21000, "energy_mj": 456_789_012, "temperature_c": 38,
        "memory_temperature_c": None,
        "thresholds_c": {0: 97, 1: 94, 3: 90},
        "clocks_mhz": {0: 210, 1: 210, 2: 405, 3: 1185},
        "max_clocks_mhz": {0: 3105, 1: 3105, 2: 10501, 3: 2415},
        "cores": 16384, "fan_percent": 30, "pcie_gen": (4, 1), "pcie_width": (16, 16),
        "vbios": "95.02.18.80.5F", "inforom": None, "ecc_mode": None,
        "not_supported": set(CONSUMER_NOT_SUPPORTED), "mig_mode": None, "mig_max": 0,
        "throttle": 0x1,
    },
    "v100-sxm2-32gb": {
        "name": "Tesla V100-SXM2-32GB", "pci_device_id": 0x1DB5, "pci_subsystem_id": 0x124910DE,
        "architecture": 5, "cuda_cc": (7, 0), "brand": 2,
        "memory_total": 32768 * MIB, "memory_reserved": 0, "memory_used": 0,
        "bar1_total": 32768 * MIB,
        "power_default_mw": 300000, "power_min_mw": 150000, "power_max_mw": 300000,
        "power_usage_mw": 43000, "energy_mj": 765_432_109, "temperature_c": 34,
        "memory_temperature_c": 32,
        "thresholds_c": {0: 90, 1: 87, 2: 95, 3: 83},
        "clocks_mhz": {0: 135, 1: 135, 2: 877, 3: 555},
        "max_clocks_mhz": {0: 1530, 1: 1530, 2: 877, 3: 1372},
        "cores": None, "fan_percent": None, "pcie_gen": (3, 3), "pcie_width": (16, 16),
        "vbios": "88.00.80.00.01", "inforom": "G503.0203.00.05",
        "not_supported": {"nvmlDeviceGetFanSpeed"} | VOLTA_NOT_SUPPORTED, "mig_mode": None,
        "mig_max": 0,
    },
    # Blackwell on a GB200 NVL72 compute tray.  Public values: name, 189471 MiB and the 1200 W cap
    # (nvidia-smi on GB200 trays, driver 580/595), PCI id 0x2941 with subsystem 0x2046 (NVIDIA's
    # supported-GPU table), compute capability 10.0 (sglang#11208).  Thermal and clock figures
    # are placeholders of the fake, not readings.
    "gb200": {
        "name": "NVIDIA GB200", "pci_device_id": 0x2941, "pci_subsystem_id": 0x204610DE,
        "architecture": 10, "cuda_cc": (10, 0), "brand": 14,
        "memory_total": 189471 * MIB, "memory_reserved": 0, "memory_used": 0,
        "bar1_total": 262144 * MIB,
        "power_default_mw": 1200000, "power_min_mw": 200000, "power_max_mw": 1200000,
        "power_usage_mw": 181000, "energy_mj": 3_456_789_012, "temperature_c": 38,
        "memory_temperature_c": 40,
        "thresholds_c": {0: 95, 1: 92, 2: 97, 3: 90},
        "clocks_mhz": {0: 1965, 1: 1965, 2: 3996, 3: 1695},
        "max_clocks_mhz": {0: 2062, 1: 2062, 2: 3996, 3: 1830},
        "cores": 18432, "fan_percent": None, "pcie_gen": (5, 5), "pcie_width": (16, 16),
        "vbios": "97.00.0B.00.01", "inforom": "G548.0201.00.03",
        "not_supported": {"nvmlDeviceGetFanSpeed"} | AMPERE_NOT_SUPPORTED,
        "mig_mode": (0, 0), "mig_max": 7,
    },
}

#: A100 80GB MIG GPU-instance profiles (nvidia-smi mig -lgip).
A100_80GB_MIG_PROFILES = [
    MigProfileSpec("1g.10gb", 0, 19, 1, 9728, 14, 7, tuple((s, 1) for s in range(7))),
    MigProfileSpec("1g.20gb", 7, 15, 1, 19968, 14, 4, ((0, 2), (2, 2), (4, 2), (6, 2))),
    MigProfileSpec("2g.20gb", 1, 14, 2, 19968, 28, 3, ((0, 2), (2, 2), (4, 2))),
    MigProfileSpec("3g.40gb", 2, 9, 3, 40192, 42, 2, ((0, 4), (4, 4))),
    MigProfileSpec("4g.40gb", 3, 5, 4, 40192, 56, 1, ((0, 4),)),
    MigProfileSpec("7g.80gb", 4, 0, 7, 81152, 98, 1, ((0, 8),)),
]


def _gpu(sku: str, **overrides: Any) -> GpuSpec:
    data = copy.deepcopy(SKUS[sku])
    data.update(overrides)
    data["not_supported"] = set(data.get("not_supported", ()))
    return GpuSpec(**data)


# -- DGX H100 -----------------------------------------------------------------------------------

DGX_H100_BUS_IDS = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                    "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0")
DGX_H100_NVSWITCHES = ("0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0")
#: NVLinks from each H100 to each of the four NVSwitch chips (5 + 4 + 4 + 5 = 18).
_LINKS_PER_SWITCH = (5, 4, 4, 5)


def dgx_h100_uuid(i: int) -> str:
    """The UUID of GPU ``i`` in the fake and in the simulator profile ``dgx-h100``."""
    return f"GPU-7b1e0c{i:02d}-1d2a-4c3b-9e4f-00000000{i:04d}"


def dgx_h100_serial(i: int) -> str:
    return f"165022300{i:04d}"


def _dgx_h100_gpus() -> list[GpuSpec]:
    gpus = []
    for i, bus in enumerate(DGX_H100_BUS_IDS):
        links = [LinkSpec(remote_bus_id=sw, remote_type=2, version=6)
                 for sw, n in zip(DGX_H100_NVSWITCHES, _LINKS_PER_SWITCH, strict=True) for _ in range(n)]
        node = 0 if i < 4 else 1
        gpus.append(_gpu(
            "h100-sxm5-80gb", uuid=dgx_h100_uuid(i), serial=dgx_h100_serial(i), bus_id=bus, minor=i,
            numa_node=node, cpus="0-55,112-167" if node == 0 else "56-111,168-223", nvlinks=links,
            fabric=(0, bytes(16), 0),
        ))
    return gpus


def _h100(name: str, description: str, mutate: Callable[[Scenario], None] | None = None) -> Scenario:
    sc = Scenario(name=name, description=description, gpus=_dgx_h100_gpus())
    if mutate is not None:
        mutate(sc)
    return sc


# -- GB200 NVL72 compute tray -------------------------------------------------------------------

#: Bus ids of the four GPUs of one GB200 tray (nvidia-smi on a GB200 node, driver 595.58.03).
GB200_BUS_IDS = ("0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0")
#: The fabric registration of an NVL72 partition as gpud reported it on GB200 (leptonai/gpud#1106):
#: state Completed, status Success, clique 4026 in cluster 9c6f5af3-53bf-49b5-a436-b66766c413c3.
GB200_CLUSTER_UUID = bytes.fromhex("9c6f5af353bf49b5a436b66766c413c3")
GB200_CLIQUE_ID = 4026
#: An NVL72 rack has 18 NVSwitch chips (9 switch trays x 2); each GPU has one NVLink 5 port to
#: each (``nvidia-smi topo -m`` shows NV18 between the tray's GPUs, sglang#11208).  The switch
#: chips are not on this host's PCI bus: these remote bus ids are the fake's placeholders.
GB200_NVSWITCHES = tuple(f"00ff:{i:02x}:00.0" for i in range(18))


def _gb200_tray() -> Scenario:
    gpus = []
    for i, bus in enumerate(GB200_BUS_IDS):
        node = 0 if i < 2 else 1
        gpus.append(_gpu("gb200", uuid=f"GPU-9b200c{i:02d}-7a1b-4c2d-9e3f-00000000{i:04d}",
                         serial=f"165432500{i:04d}", bus_id=bus, minor=i, numa_node=node,
                         cpus="0-71" if node == 0 else "72-143",
                         nvlinks=[LinkSpec(remote_bus_id=sw, remote_type=2, version=7) for sw in GB200_NVSWITCHES],
                         fabric=(3, GB200_CLUSTER_UUID, GB200_CLIQUE_ID)))
    return Scenario(name="gb200-nvl72-tray",
                    description="one GB200 NVL72 compute tray: 4x GB200 registered in NVLink clique 4026 "
                                "(multi-node NVLink: 18 NVLink 5 ports per GPU to the rack's switch chips)",
                    gpus=gpus, driver_version="595.58.03", cuda_driver_version=13020,
                    nvml_version="13.595.58.03")


# -- other hosts --------------------------------------------------------------------------------

def _rtx4090_4() -> Scenario:
    buses = ("0000:01:00.0", "0000:21:00.0", "0000:81:00.0", "0000:c1:00.0")
    gpus = []
    for i, bus in enumerate(buses):
        node = 0 if i < 2 else 1
        gpus.append(_gpu("rtx-4090", uuid=f"GPU-4090c0{i:02d}-5e6f-4a1b-8c2d-00000000{i:04d}", serial=None,
                         bus_id=bus, minor=i, numa_node=node, cpus="0-31,64-95" if node == 0 else "32-63,96-127",
                         processes=[ProcessSpec(pid=2211 + i, used_bytes=1536 * MIB, kind="graphics")]
                         if i == 0 else []))
    return Scenario(name="rtx4090-4", description="4x GeForce RTX 4090 on PCIe, two sockets (consumer SKU)",
                    gpus=gpus)


def _a100_mig() -> Scenario:
    uuid = "GPU-a100c000-6b7c-4d8e-9f01-000000000000"
    slots = {
        0: MigSlot("3g.40gb", gi_id=2, ci_id=0, placement=(4, 4),
                   uuid="MIG-5c3a1f00-0000-5a0b-9c1d-000000000002", memory_used_bytes=1024 * MIB),
        2: MigSlot("2g.20gb", gi_id=3, ci_id=0, placement=(0, 2), uuid="MIG-5c3a1f00-0000-5a0b-9c1d-000000000003"),
        3: MigSlot("1g.10gb", gi_id=9, ci_id=0, placement=(2, 1), uuid="MIG-5c3a1f00-0000-5a0b-9c1d-000000000009"),
        6: MigSlot("1g.10gb", gi_id=10, ci_id=0, placement=(3, 1), uuid="MIG-5c3a1f00-0000-5a0b-9c1d-000000000010"),
    }
    gpu = _gpu("a100-sxm4-80gb", uuid=uuid, serial="1564720004631", bus_id="0000:07:00.0", minor=0,
               numa_node=0, cpus="0-63,128-191", mig_mode=(1, 1), mig_max=7,
               mig_profiles=list(A100_80GB_MIG_PROFILES), mig_slots=slots,
               not_supported={"nvmlDeviceGetFanSpeed", "nvmlDeviceGetUtilizationRates",
                              "nvmlDeviceGetRemappedRows"} | AMPERE_NOT_SUPPORTED,
               processes=[ProcessSpec(pid=7001, used_bytes=1024 * MIB, gi_id=2, ci_id=0)])
    return Scenario(name="a100-mig", description="A100-SXM4-80GB with MIG enabled and sparse MIG slots",
                    gpus=[gpu])


def _v100_pair(**scenario: Any) -> Scenario:
    gpus = []
    buses = ("0000:06:00.0", "0000:07:00.0")
    for i, bus in enumerate(buses):
        peer = buses[1 - i]
        gpus.append(_gpu("v100-sxm2-32gb", uuid=f"GPU-e100c0{i:02d}-2b3c-4d5e-8f60-00000000{i:04d}",
                         serial=f"032301800{i:04d}", bus_id=bus, minor=i, numa_node=0, cpus="0-19,40-59",
                         nvlinks=[LinkSpec(remote_bus_id=peer, remote_type=0, version=2) for _ in range(6)]))
    return Scenario(gpus=gpus, ancestors={(0, 1): 20}, **scenario)


def _old_driver() -> Scenario:
    sc = _v100_pair(name="old-driver-r470",
                    description="R470-era driver: no v2 memory, no TemperatureV/ClocksEventReasons, no _v3 "
                                "process symbols",
                    driver_version="470.199.02", cuda_driver_version=11040, nvml_version="11.470.199.02",
                    missing={"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetTemperatureV",
                             "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetGpuFabricInfoV",
                             "nvmlDeviceGetGpuFabricInfo", "nvmlDeviceGetNumGpuCores",
                             "nvmlSystemGetCudaDriverVersion_v2",
                             "nvmlDeviceGetComputeRunningProcesses_v3",
                             "nvmlDeviceGetGraphicsRunningProcesses_v3"},
                    library_mismatch={"nvmlDeviceGetComputeRunningProcesses",
                                      "nvmlDeviceGetGraphicsRunningProcesses"},
                    max_field_id=150)
    for g in sc.gpus:
        g.memory_reserved = 0
        g.processes = [ProcessSpec(pid=4242, used_bytes=2048 * MIB)]
    return sc


def _retired_pending() -> Scenario:
    sc = _v100_pair(name="retired-pending", description="V100 with double-bit retired pages pending retirement")
    g = sc.gpus[1]
    g.retired_dbe = [0x1A2B3000, 0x1A2B4000, 0x2C3D5000]
    g.retired_pending = 1
    g.ecc_counts = {"dbe_agg": 3}
    return sc


def _set(index: int, **values: Any) -> Callable[[Scenario], None]:
    def mutate(sc: Scenario) -> None:
        for key, value in values.items():
            setattr(sc.gpus[index], key, value)
    return mutate


def _nvlink_replay(sc: Scenario) -> None:
    g2 = sc.gpus[2]
    g2.nvlinks[4].replay = 17
    g2.nvlinks[4].recovery = 2
    g2.nvlinks[5].crc = 3
    sc.gpus[4].nvlinks[9].active = False


def _row_remap(sc: Scenario) -> None:
    sc.gpus[6].remapped = (3, 512, 0, 1)
    sc.gpus[7].remapped = (1, 1, 1, 0)


def _container(sc: Scenario) -> None:
    for i, g in enumerate(sc.gpus):
        g.errors["nvmlDeviceGetGraphicsRunningProcesses"] = 4
        g.errors["nvmlDeviceRegisterEvents"] = 4
        g.errors["field:142"] = g.errors["field:143"] = g.errors["field:144"] = g.errors["field:145"] = 4
        g.processes = [ProcessSpec(pid=3_900_000 + i, used_bytes=40960 * MIB),
                       ProcessSpec(pid=3_900_100 + i, used_bytes=None)]


def _xid(sc: Scenario) -> None:
    sc.events = [EventSpec(gpu=0, xid=13), EventSpec(gpu=0, xid=31), EventSpec(gpu=1, xid=48),
                 EventSpec(gpu=2, xid=79), EventSpec(gpu=3, xid=95), EventSpec(gpu=5, xid=13),
                 EventSpec(gpu=5, xid=13), EventSpec(gpu=6, xid=147)]


def _no_hw(name: str, description: str, code: int | None, *, dev: bool = True) -> Callable[[], Scenario]:
    return lambda: Scenario(name=name, description=description, init_error=code, dev_present=dev)


#: Every scenario by name -> a factory (each call builds fresh, mutable state).
SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "no-library": _no_hw("no-library", "libnvidia-ml.so.1 is not installed", 12, dev=False),
    "driver-not-loaded": _no_hw("driver-not-loaded", "the nvidia kernel module is not loaded", 9, dev=False),
    "version-mismatch": _no_hw("version-mismatch", "driver upgraded without reload (LibRmVersionMismatch)", 18),
    "zero-gpus": lambda: Scenario(name="zero-gpus", description="NVML initialises and reports no GPUs",
                                  pci_present=False),
    "h100-nvswitch-8": lambda: _h100("h100-nvswitch-8", "DGX H100: 8x H100 SXM5 over 4 NVSwitches, two sockets"),
    "rtx4090-4": _rtx4090_4,
    "gb200-nvl72-tray": _gb200_tray,
    "a100-mig": _a100_mig,
    "old-driver-r470": _old_driver,
    "gpu-lost": lambda: _h100("gpu-lost", "DGX H100 whose GPU 3 falls off the bus after enumeration",
                              _set(3, lost_after_identity=True)),
    "xid-stream": lambda: _h100("xid-stream", "DGX H100 with a scripted XID stream (13, 31, 48, 79, 95, 147)",
                                _xid),
    "ecc-dbe": lambda: _h100("ecc-dbe", "DGX H100 whose GPU 5 has volatile double-bit ECC errors",
                             _set(5, ecc_counts={"dbe_vol": 2, "dbe_agg": 2, "sbe_vol": 14, "sbe_agg": 40})),
    "retired-pending": _retired_pending,
    "row-remap-failure": lambda: _h100("row-remap-failure",
                                       "DGX H100: GPU 6 row-remap failure, GPU 7 remap pending", _row_remap),
    "nvlink-replay": lambda: _h100("nvlink-replay", "DGX H100: NVLink replay/recovery errors on GPU 2, "
                                   "one link down on GPU 4", _nvlink_replay),
    "container-no-perm": lambda: _h100("container-no-perm", "DGX H100 seen from an unprivileged container: "
                                       "host PIDs, NoPermission on some queries", _container),
}


def get_scenario(name: str) -> Scenario:
    """A fresh scenario by name; ``KeyError`` lists the known names."""
    try:
        factory = SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown NVML fake scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}") from None
    return factory()
