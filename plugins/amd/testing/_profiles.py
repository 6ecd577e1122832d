"""Data profiles that drive the fake amdsmi, the fake libamd_smi and the fake amdgpu sysfs.

One :class:`FakeGpu` per physical GPU, one :class:`FakeHost` per scenario.  The ``mi300x-8``
host agrees with the simulator profile of the same name: 8x "AMD Instinct MI300X" (gfx942),
192 GiB HBM3 each, one xGMI hive, the bus ids, NUMA nodes, unique ids and 750 W cap below.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = [
    "MI300X_BUS_IDS",
    "SCENARIOS",
    "FakeGpu",
    "FakeHost",
    "FakeProcess",
    "mi300x_unique_id",
    "scenario",
]

GIB = 2**30

MI300X_BUS_IDS = (
    "0000:05:00.0",
    "0000:26:00.0",
    "0000:46:00.0",
    "0000:65:00.0",
    "0000:85:00.0",
    "0000:a6:00.0",
    "0000:c6:00.0",
    "0000:e5:00.0",
)

MI300X_HIVE_ID = 0x8A3B  # the simulator's hive id


def mi300x_unique_id(i: int) -> int:
    """The ASIC unique id of GPU ``i`` (the simulator uses exactly this)."""
    return 0x5A3C8B2E00000000 + i


@dataclass(frozen=True)
class FakeProcess:
    pid: int
    name: str
    vram_bytes: int


@dataclass(frozen=True)
class FakeGpu:
    """One physical GPU as every fake layer shows it.

    ``partitions`` > 1 gives that many processor handles (CPX: 8), each with ``1/partitions`` of
    the compute units and of the VRAM.  ``not_supported`` lists amdsmi function names that raise
    ``AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)`` for this GPU.

    ``compute_modes`` / ``memory_modes`` are the partition modes the product supports (empty: it
    cannot be partitioned, the setters answer NOT_SUPPORTED) and ``num_xcc`` its compute dies;
    the fake amdsmi enforces the driver's rules on them (see ``_fake_partition``).
    """

    bus_id: str
    market_name: str
    device_id: int
    unique_id: int
    uuid: str
    gfx: str
    compute_units: int
    vram_total: int
    vram_used: int
    numa_node: int
    rev_id: int = 0x00
    subsystem_id: int = 0x74A1
    vram_type: str = "HBM3"
    vram_bit_width: int = 8192
    form_factor: str = "OAM"
    power_w: int = 160
    power_cap_w: int = 750
    power_cap_default_w: int = 750
    power_cap_min_w: int = 0
    power_cap_max_w: int = 750
    temp_edge: int = 38
    temp_hotspot: int = 45
    temp_vram: int = 40
    temp_crit: int = 100
    temp_emergency: int = 105
    gfx_activity: int = 0
    umc_activity: int = 0
    gfx_max_mhz: int = 2100
    mem_max_mhz: int = 1300
    serial: str = ""
    vbios: str = "113-M3000100-102"
    driver_version: str = "6.8.5"
    firmware: tuple[tuple[str, str], ...] = (("SMU", "85.101.0"), ("PSP_SOSDRV", "00.36.02.59"))
    ecc: bool = True
    ecc_counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    ras_states: dict[str, str] = field(default_factory=dict)
    bad_pages: tuple[tuple[int, int, int], ...] = ()
    bad_page_threshold: int | None = 128
    xgmi_hive_id: int | None = None
    xgmi_node_id: int = 0
    xgmi_links: int = 0
    xgmi_link_status: tuple[str, ...] = ()
    xgmi_error: int = 0
    compute_partition: str | None = "SPX"
    memory_partition: str | None = "NPS1"
    partitions: int = 1
    pcie_gen: int = 5
    pcie_width: int = 16
    violations: tuple[str, ...] = ()
    processes: tuple[FakeProcess, ...] = ()
    not_supported: frozenset[str] = frozenset()
    pci_class: str = "0x120000"
    compute_modes: tuple[str, ...] = ("SPX", "DPX", "QPX", "CPX")
    memory_modes: tuple[str, ...] = ("NPS1", "NPS4")
    num_xcc: int = 8


@dataclass(frozen=True)
class FakeHost:
    """One scenario.

    ``amdsmi``: ``present`` (the fake module imports), ``absent`` (ImportError) or ``broken``
    (prints and raises KeyError, as PyPI amdsmi does without libamd_smi.so).
    ``ctypes_lib``: whether pyrsmi's ctypes mode finds a (fake) libamd_smi.so.
    ``driver_live``: ``/sys/module/amdgpu/initstate`` says ``live``; when False, amdsmi_init
    fails with DRIVER_NOT_LOADED, pyrsmi raises RuntimeError and sysfs has no DRM cards.
    ``link``: how GPUs connect (``xgmi`` when they share a hive, else ``pcie``).
    """

    name: str
    gpus: tuple[FakeGpu, ...]
    amdsmi: str = "present"
    ctypes_lib: bool = True
    driver_live: bool = True
    numa_cpus: tuple[str, ...] = ("0-95,192-287", "96-191,288-383")
    description: str = ""
    #: PCI vendor id of the GPUs (``1d94`` builds a Hygon DCU host for that plugin's tests).
    pci_vendor: str = "1002"


def _mi300x(i: int, **kw: object) -> FakeGpu:
    uid = mi300x_unique_id(i)
    base = FakeGpu(
        bus_id=MI300X_BUS_IDS[i],
        market_name="AMD Instinct MI300X",
        device_id=0x74A1,
        unique_id=uid,
        uuid=f"{0x5A00 + i:04x}74a1-0000-1000-80e6-{uid & 0xFFFFFFFFFFFF:012x}",
        gfx="gfx942",
        compute_units=304,
        vram_total=192 * GIB,
        vram_used=283_115_520,
        numa_node=0 if i < 4 else 1,
        serial=f"6923120000{i:02d}",
        xgmi_hive_id=MI300X_HIVE_ID,
        xgmi_node_id=i,
        xgmi_links=7,
        xgmi_link_status=("U",) * 7,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def _radeon() -> FakeGpu:
    # Values from vendor-samples/amd/rocm-smi-json_rocm6.2.4_rx7800xt.txt.
    return FakeGpu(
        bus_id="0000:03:00.0",
        market_name="Navi 32 [Radeon RX 7700 XT / 7800 XT]",
        device_id=0x747E,
        rev_id=0xC8,
        subsystem_id=0x7801,
        unique_id=0x5C88007D760374F3,
        uuid="",
        gfx="gfx1101",
        compute_units=60,
        vram_total=17163091968,
        vram_used=11615076352,
        numa_node=0,
        vram_type="GDDR6",
        vram_bit_width=256,
        form_factor="PCIE",
        power_w=53,
        power_cap_w=263,
        power_cap_default_w=263,
        power_cap_min_w=0,
        power_cap_max_w=263,
        temp_edge=45,
        temp_hotspot=51,
        temp_vram=54,
        temp_crit=110,
        temp_emergency=115,
        gfx_activity=100,
        gfx_max_mhz=2565,
        mem_max_mhz=1219,
        serial="",
        vbios="113-APM7489-DS2-100",
        ecc=False,
        bad_page_threshold=None,
        compute_partition=None,
        memory_partition=None,
        compute_modes=(),
        memory_modes=(),
        num_xcc=1,
        pcie_gen=4,
        pci_class="0x030000",
        not_supported=frozenset(
            {
                "amdsmi_get_gpu_total_ecc_count",
                "amdsmi_get_gpu_ecc_count",
                "amdsmi_get_gpu_ecc_status",
                "amdsmi_get_gpu_bad_page_info",
                "amdsmi_get_gpu_bad_page_threshold",
                "amdsmi_get_xgmi_info",
                "amdsmi_get_gpu_xgmi_link_status",
                "amdsmi_gpu_xgmi_error_status",
                "amdsmi_get_gpu_compute_partition",
                "amdsmi_get_gpu_memory_partition",
                "amdsmi_get_violation_status",
                "amdsmi_get_gpu_board_info",
                "amdsmi_get_gpu_device_uuid",
            }
        ),
    )


def _hosts() -> dict[str, FakeHost]:
    mi300x = tuple(_mi300x(i) for i in range(8))
    hosts = [
        FakeHost("mi300x-8", mi300x, description="8x MI300X (SPX/NPS1) in one xGMI hive, amdsmi present"),
        FakeHost(
            "mi300x-8-cpx",
            tuple(
                _mi300x(i, compute_partition="CPX", memory_partition="NPS4", partitions=8) for i in range(8)
            ),
            description="8x MI300X in CPX/NPS4: 8 processor handles per GPU (64 in all)",
        ),
        FakeHost(
            "amdsmi-absent",
            mi300x,
            amdsmi="absent",
            description="8x MI300X, no amdsmi package: pyrsmi in ctypes mode, topology from sysfs",
        ),
        FakeHost(
            "amdsmi-broken",
            mi300x,
            amdsmi="broken",
            description="amdsmi prints and raises KeyError on import; pyrsmi in ctypes mode",
        ),
        FakeHost(
            "ras-uncorrectable",
            tuple(
                _mi300x(
                    i,
                    ecc_counts={"UMC": (12, 3, 0)},
                    ras_states={"UMC": "MULT_UC"},
                )
                if i == 2
                else _mi300x(i)
                for i in range(8)
            ),
            description="GPU 2 has uncorrectable UMC errors (RAS state MULT_UC)",
        ),
        FakeHost(
            "bad-pages",
            tuple(
                _mi300x(
                    i,
                    bad_pages=(*((0x1000 * k, 4096, 0) for k in range(130)), (0xFFF000, 4096, 1)),
                    bad_page_threshold=128,
                )
                if i == 5
                else _mi300x(i)
                for i in range(8)
            ),
            description="GPU 5 has 131 retired pages (one pending) over a threshold of 128",
        ),
        FakeHost(
            "xgmi-errors",
            tuple(
                _mi300x(i, xgmi_error=2, xgmi_link_status=("U", "U", "D", "U", "U", "U", "U"))
                if i == 1
                else _mi300x(i, violations=("active_socket_thrm",))
                if i == 7
                else _mi300x(i)
                for i in range(8)
            ),
            description="GPU 1: xGMI MULTIPLE errors and a link down; GPU 7 thermally throttled",
        ),
        FakeHost("radeon-rx7800xt", (_radeon(),), numa_cpus=("0-15",),
                 description="one consumer Radeon RX 7800 XT: no ECC, no xGMI, no partitions"),
        FakeHost(
            "driver-not-live",
            mi300x,
            driver_live=False,
            description="libraries installed, amdgpu kernel driver not live",
        ),
        FakeHost(
            "no-library",
            mi300x,
            amdsmi="absent",
            ctypes_lib=False,
            description="neither amdsmi nor libamd_smi.so: pyrsmi's ctypes mode fails cleanly",
        ),
    ]
    return {h.name: h for h in hosts}


SCENARIOS: dict[str, FakeHost] = _hosts()


def scenario(name: str) -> FakeHost:
    """The named scenario; ``KeyError`` lists the known names."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown amd scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}") from None
