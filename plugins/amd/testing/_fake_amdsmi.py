"""A faithful fake of the ``amdsmi`` Python package (amdsmi_interface.py 7.0.2 shapes).

The real package cannot be imported without ``libamd_smi.so``, so its exception hierarchy and
enums are written here from the reference (``shared/reference/nvml-amd.md`` section 2.5):

* ``AmdSmiException`` > ``AmdSmiLibraryException(err_code)`` (stores ``abs(code)`` in
  ``err_code``; ``get_error_code()``, ``get_error_info()``; ``str`` is
  ``"Error code:\\n\\t{code} | {info}"``) > ``AmdSmiRetryException`` (9), ``AmdSmiTimeoutException``
  (8); plus ``AmdSmiParameterException(value, expected_type)``, ``AmdSmiKeyException`` and
  ``AmdSmiBdfFormatException``.
* handles are ``amdsmi_processor_handle`` objects (a ``c_void_p``), new objects on every
  enumeration, compared by identity; every function checks the handle type and raises
  ``AmdSmiParameterException`` otherwise;
* results are dicts with the real keys, hex *strings* for ``vendor_id``/``device_id``/``rev_id``,
  ``asic_serial`` as ``'0x%016X'``, ``"N/A"`` strings inside numeric slots where the hardware has
  no value (power on CPX partitions other than the first), a BDF *string* from
  ``amdsmi_get_gpu_device_bdf``, ``"No bad pages found."`` instead of an empty list;
* every call before ``amdsmi_init()`` raises NOT_INIT (32); inits are counted;
* ``AmdSmiEventReader.read`` returns ``[]`` on timeout, never raises;
* the partition-mode setters enforce the amdgpu driver's rules (:mod:`._fake_partition`), and a
  mode change re-enumerates the processors: handles of before answer ``NOT_FOUND``.
"""

from __future__ import annotations

import ctypes
import sys
import types
from dataclasses import replace
from enum import IntEnum, IntFlag
from typing import Any

from ._fake_partition import auto_compute, compatible_memory, compute_valid, xcp_count
from ._profiles import FakeGpu, FakeHost, FakeProcess

__all__ = ["HEALTH_FUNCTIONS", "STATUS", "make_fake_amdsmi"]

#: amdsmi status codes (amdsmi.h).
STATUS = {
    "SUCCESS": 0,
    "INVAL": 1,
    "NOT_SUPPORTED": 2,
    "NOT_YET_IMPLEMENTED": 3,
    "FAIL_LOAD_MODULE": 4,
    "FAIL_LOAD_SYMBOL": 5,
    "DRM_ERROR": 6,
    "API_FAILED": 7,
    "TIMEOUT": 8,
    "RETRY": 9,
    "NO_PERM": 10,
    "INTERRUPT": 11,
    "IO": 12,
    "FILE_ERROR": 14,
    "OUT_OF_RESOURCES": 15,
    "INIT_ERROR": 18,
    "BUSY": 30,
    "NOT_FOUND": 31,
    "NOT_INIT": 32,
    "DRIVER_NOT_LOADED": 34,
    "NO_DATA": 40,
    "INSUFFICIENT_SIZE": 41,
    "AMDGPU_RESTART_ERR": 54,
    "SETTING_UNAVAILABLE": 55,
    "UNKNOWN_ERROR": 0xFFFFFFFF,
}
_INFO = {v: f"AMDSMI_STATUS_{k}" for k, v in STATUS.items()}

#: The amdsmi calls a health check reads (RAS / ECC per block, bad pages, xGMI errors, throttle
#: violations): what :meth:`_State.make_health_unsupported` turns into ``NOT_SUPPORTED``, as on
#: a board or firmware without RAS support.
HEALTH_FUNCTIONS = frozenset(
    {
        "amdsmi_get_gpu_total_ecc_count",
        "amdsmi_get_gpu_ecc_count",
        "amdsmi_get_gpu_ecc_status",
        "amdsmi_get_gpu_ecc_enabled",
        "amdsmi_get_gpu_ras_feature_info",
        "amdsmi_get_gpu_bad_page_info",
        "amdsmi_get_gpu_memory_reserved_pages",
        "amdsmi_get_gpu_bad_page_threshold",
        "amdsmi_gpu_xgmi_error_status",
        "amdsmi_get_violation_status",
    }
)


# -- exceptions (amdsmi_exception.py) -----------------------------------------------------------
class AmdSmiException(Exception):
    """Base of every amdsmi exception."""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int) -> None:
        super().__init__(err_code)
        self.err_code = abs(err_code)
        self.err_info = _INFO.get(self.err_code, "AMDSMI_STATUS_UNKNOWN_ERROR")

    def get_error_code(self) -> int:
        return self.err_code

    def get_error_info(self) -> str:
        return self.err_info

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(STATUS["RETRY"])


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(STATUS["TIMEOUT"])


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, receivedValue: Any, expectedType: Any, msg: str | None = None) -> None:
        super().__init__(msg)
        self.actual_type = type(receivedValue)
        self.expected_type = expectedType
        self.msg = msg or f"Invalid parameter:\nExpected type: {expectedType}\nReceived: {self.actual_type}"

    def __str__(self) -> str:
        return self.msg


class AmdSmiKeyException(AmdSmiException):
    def __init__(self, key: Any) -> None:
        super().__init__(key)
        self.key = key


class AmdSmiBdfFormatException(AmdSmiException):
    def __init__(self, bdf: Any) -> None:
        super().__init__(bdf)
        self.bdf = bdf


# -- enums (amdsmi_interface.py) ----------------------------------------------------------------
class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1
    INIT_NON_AMD_CPUS = 1 << 2
    INIT_NON_AMD_GPUS = 1 << 3
    INIT_AMD_APUS = (1 << 0) | (1 << 1)


class AmdSmiMemoryType(IntEnum):
    VRAM = 0
    VIS_VRAM = 1
    GTT = 2


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2
    HBM_0 = 3
    HBM_1 = 4
    HBM_2 = 5
    HBM_3 = 6
    PLX = 7


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    MAX_HYST = 3
    MIN_HYST = 4
    CRITICAL = 5
    CRITICAL_HYST = 6
    EMERGENCY = 7
    EMERGENCY_HYST = 8
    CRIT_MIN = 9
    CRIT_MIN_HYST = 10
    OFFSET = 11
    LOWEST = 12
    HIGHEST = 13


class AmdSmiGpuBlock(IntFlag):
    INVALID = 0
    UMC = 1 << 0
    SDMA = 1 << 1
    GFX = 1 << 2
    MMHUB = 1 << 3
    ATHUB = 1 << 4
    PCIE_BIF = 1 << 5
    HDP = 1 << 6
    XGMI_WAFL = 1 << 7
    DF = 1 << 8
    SMN = 1 << 9
    SEM = 1 << 10
    MP0 = 1 << 11
    MP1 = 1 << 12
    FUSE = 1 << 13
    MCA = 1 << 14
    VCN = 1 << 15
    JPEG = 1 << 16
    IH = 1 << 17
    MPIO = 1 << 18


class AmdSmiRasErrState(IntEnum):
    NONE = 0
    DISABLED = 1
    PARITY = 2
    SING_C = 3
    MULT_UC = 4
    POISON = 5
    ENABLED = 6
    INVALID = 0xFFFFFFFF


class AmdSmiMemoryPageStatus(IntEnum):
    RESERVED = 0
    PENDING = 1
    UNRESERVABLE = 2


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5
    VCLK0 = 6
    VCLK1 = 7
    DCLK0 = 8
    DCLK1 = 9


class AmdSmiLinkType(IntEnum):
    INTERNAL = 0
    PCIE = 1
    XGMI = 2
    NOT_APPLICABLE = 3
    UNKNOWN = 4


class AmdSmiVramType(IntEnum):
    UNKNOWN = 0
    HBM = 1
    HBM2 = 2
    HBM2E = 3
    HBM3 = 4
    DDR2 = 10
    DDR3 = 11
    DDR4 = 12
    GDDR1 = 17
    GDDR2 = 18
    GDDR3 = 19
    GDDR4 = 20
    GDDR5 = 21
    GDDR6 = 22
    GDDR7 = 23


class AmdSmiCardFormFactor(IntEnum):
    PCIE = 0
    OAM = 1
    CEM = 2
    UNKNOWN = 3


class AmdSmiFwBlock(IntEnum):
    FW_ID_SMU = 1
    FW_ID_PSP_SOSDRV = 28


class AmdSmiEvtNotificationType(IntEnum):
    NONE = 0
    VMFAULT = 1
    THERMAL_THROTTLE = 2
    GPU_PRE_RESET = 3
    GPU_POST_RESET = 4
    RING_HANG = 5


class AmdSmiComputePartitionType(IntEnum):
    """Values as in amdsmi 7.0.2 (``AMDSMI_COMPUTE_PARTITION_*``): INVALID is 0."""

    INVALID = 0
    SPX = 1
    DPX = 2
    TPX = 3
    QPX = 4
    CPX = 5


class AmdSmiMemoryPartitionType(IntEnum):
    """Values as in amdsmi 7.0.2 (``AMDSMI_MEMORY_PARTITION_*``): the value is the NPS count."""

    UNKNOWN = 0
    NPS1 = 1
    NPS2 = 2
    NPS4 = 4
    NPS8 = 8


class amdsmi_processor_handle(ctypes.c_void_p):
    """An opaque processor handle (``amdsmi_wrapper.amdsmi_processor_handle``)."""


_HANDLE_BASE = 0x1000


class _State:
    """Mutable per-module state: init refcount, the GPUs as they are now, the event queue.

    ``live`` holds each GPU with its current compute / memory mode applied (``partitions`` is the
    partition count of the mode); ``flat`` lists the processors of the current enumeration.  A
    mode change re-enumerates: ``generation`` advances and every handle of an older one answers
    ``AMDSMI_STATUS_NOT_FOUND`` (the library no longer has the processor behind it), so callers
    must fetch the handles again.  ``privileged`` False makes the setters answer ``NO_PERM``;
    :meth:`fail_next` makes the next call of a function answer a status (fault injection).
    """

    def __init__(self, host: FakeHost) -> None:
        self.host = host
        self.inits = 0
        self.live: list[FakeGpu] = list(host.gpus)
        self.generation = -1
        self.flat: list[tuple[FakeGpu, int, int]] = []  # (gpu, gpu index, partition index)
        self.enumerate()
        self.events: list[dict[str, Any]] = []
        self.calls: list[str] = []
        #: GPU indices (``host.gpus`` order) that fell off the bus / answer NOT_SUPPORTED to health.
        self.lost: set[int] = set()
        self.health_unsupported: set[int] = set()
        self.privileged = True
        self.faults: dict[str, list[str | None]] = {}

    def enumerate(self) -> None:
        """Build the processors from ``live`` (a new generation: older handles go stale)."""
        self.generation += 1
        self.flat = [(gpu, i, k) for i, gpu in enumerate(self.live) for k in range(max(gpu.partitions, 1))]

    def set_mode(self, index: int, compute: str, memory: str) -> None:
        """GPU ``index`` is now in ``compute`` / ``memory`` (its partitions follow), re-enumerated."""
        gpu = self.live[index]
        count = xcp_count(compute, gpu.num_xcc) if compute else 1
        self.live[index] = replace(gpu, compute_partition=compute, memory_partition=memory, partitions=count)
        self.enumerate()

    def add_process(self, index: int, process: FakeProcess) -> None:
        """A process starts on GPU ``index`` (the partition-mode setters then refuse)."""
        self._check(index)
        gpu = self.live[index]
        self.live[index] = replace(gpu, processes=(*gpu.processes, process))
        self.flat = [(self.live[i], i, k) for _g, i, k in self.flat]

    def clear_processes(self, index: int) -> None:
        self._check(index)
        self.live[index] = replace(self.live[index], processes=())
        self.flat = [(self.live[i], i, k) for _g, i, k in self.flat]

    def fail_next(self, fn: str, status: str, *, skip: int = 0) -> None:
        """A later call of ``fn`` answers ``AmdSmiLibraryException(STATUS[status])``: the next
        one, or the one after ``skip`` more that succeed (faults queue up per function)."""
        if status not in STATUS:
            raise KeyError(f"no amdsmi status {status!r}")
        self.faults.setdefault(fn, []).extend([None] * skip + [status])

    def lose_gpu(self, index: int) -> None:
        """GPU ``index`` falls off the bus: every call on its handles (all partitions) fails.

        The handles stay in ``amdsmi_get_processor_handles`` (amdsmi enumerates them at init)
        but each call on one answers ``AMDSMI_STATUS_NOT_FOUND`` (31): the library no longer
        finds the device behind the handle, its sysfs and KFD nodes being gone.
        """
        self._check(index)
        self.lost.add(index)

    def make_health_unsupported(self, index: int) -> None:
        """GPU ``index`` answers ``AMDSMI_STATUS_NOT_SUPPORTED`` to every :data:`HEALTH_FUNCTIONS` call."""
        self._check(index)
        self.health_unsupported.add(index)

    def _check(self, index: int) -> None:
        if not 0 <= index < len(self.host.gpus):
            raise IndexError(f"no fake GPU {index} (the host has {len(self.host.gpus)})")


class _Ctx:
    """What the fake module's functions share: the state, the module, the checks of every call."""

    def __init__(self, mod: types.ModuleType, st: _State) -> None:
        self.mod = mod
        self.st = st

    def fail(self, code: str) -> AmdSmiLibraryException:
        return AmdSmiLibraryException(STATUS[code])

    def ready(self, fn: str) -> None:
        self.st.calls.append(fn)
        if self.st.inits <= 0:
            raise self.fail("NOT_INIT")
        queued = self.st.faults.get(fn)
        if queued:
            status = queued.pop(0)
            if status is not None:
                raise self.fail(status)

    def dev(self, fn: str, handle: Any) -> tuple[FakeGpu, int, int]:
        st = self.st
        self.ready(fn)
        if not isinstance(handle, amdsmi_processor_handle):
            raise AmdSmiParameterException(handle, amdsmi_processor_handle)
        raw = (handle.value or 0) - _HANDLE_BASE
        if raw < 0:
            raise self.fail("INVAL")
        if raw >> 16 != st.generation:
            raise self.fail("NOT_FOUND")  # a processor of an older enumeration (a mode changed)
        idx = raw & 0xFFFF
        if not 0 <= idx < len(st.flat):
            raise self.fail("INVAL")
        gpu, gi, k = st.flat[idx]
        if gi in st.lost:
            raise self.fail("NOT_FOUND")
        if fn in gpu.not_supported or (gi in st.health_unsupported and fn in HEALTH_FUNCTIONS):
            raise self.fail("NOT_SUPPORTED")
        return gpu, gi, k

    def pair(self, fn: str, a: Any, b: Any) -> tuple[tuple[FakeGpu, int, int], tuple[FakeGpu, int, int]]:
        return self.dev(fn, a), self.dev(fn, b)

    def export(self, fn: Any) -> Any:
        setattr(self.mod, fn.__name__, fn)
        return fn


def _export_part1(ctx: _Ctx) -> None:
    """Part 1 of the fake module's functions (see :func:`make_fake_amdsmi`)."""
    st, export, _dev, _fail, _ready = ctx.st, ctx.export, ctx.dev, ctx.fail, ctx.ready

    @export
    def amdsmi_init(flag: int = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        st.calls.append("amdsmi_init")
        if not isinstance(flag, int):
            raise AmdSmiParameterException(flag, AmdSmiInitFlags)
        if not st.host.driver_live:
            raise _fail("DRIVER_NOT_LOADED")
        st.inits += 1

    @export
    def amdsmi_shut_down() -> None:
        st.calls.append("amdsmi_shut_down")
        if st.inits <= 0:
            raise _fail("NOT_INIT")
        st.inits -= 1

    @export
    def amdsmi_get_processor_handles() -> list[amdsmi_processor_handle]:
        _ready("amdsmi_get_processor_handles")
        return [amdsmi_processor_handle(_HANDLE_BASE + (st.generation << 16) + i) for i in range(len(st.flat))]

    @export
    def amdsmi_get_gpu_asic_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_asic_info", processor_handle)
        return {
            "market_name": gpu.market_name,
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": f"0x{gpu.device_id:04x}",
            "subsystem_id": f"0x{gpu.subsystem_id:04x}",
            "rev_id": f"0x{gpu.rev_id:02x}",
            "asic_serial": f"0x{gpu.unique_id:016X}",
            "oam_id": gpu.xgmi_node_id if gpu.form_factor == "OAM" else "N/A",
            "num_compute_units": gpu.compute_units // max(gpu.partitions, 1),
            "target_graphics_version": gpu.gfx,
        }

    @export
    def amdsmi_get_gpu_device_uuid(processor_handle: Any) -> str:
        gpu, _, k = _dev("amdsmi_get_gpu_device_uuid", processor_handle)
        if not gpu.uuid:
            raise _fail("NOT_SUPPORTED")
        # Each partition has its own UUID: the partition index replaces the first digit.
        return f"{k:x}{gpu.uuid[1:]}" if gpu.partitions > 1 else gpu.uuid

    @export
    def amdsmi_get_gpu_device_bdf(processor_handle: Any) -> str:
        gpu, _, _ = _dev("amdsmi_get_gpu_device_bdf", processor_handle)
        return gpu.bus_id

    @export
    def amdsmi_get_gpu_bdf_id(processor_handle: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_gpu_bdf_id", processor_handle)
        dom, bus, rest = gpu.bus_id.split(":")
        dev, fn = rest.split(".")
        return (int(dom, 16) << 32) | (int(bus, 16) << 8) | (int(dev, 16) << 3) | int(fn)

    @export
    def amdsmi_get_gpu_enumeration_info(processor_handle: Any) -> dict[str, Any]:
        gpu, gi, k = _dev("amdsmi_get_gpu_enumeration_info", processor_handle)
        flat = gi * max(gpu.partitions, 1) + k
        return {"drm_render": 128 + flat, "drm_card": flat, "hsa_id": 2 + flat, "hip_id": flat,
                "hip_uuid": f"GPU-{gpu.unique_id:016x}"}

    @export
    def amdsmi_get_gpu_kfd_info(processor_handle: Any) -> dict[str, Any]:
        gpu, gi, k = _dev("amdsmi_get_gpu_kfd_info", processor_handle)
        return {"kfd_id": 1000 + gi * 16 + k, "node_id": 2 + gi * max(gpu.partitions, 1) + k,
                "current_partition_id": k}

    @export
    def amdsmi_get_gpu_driver_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_driver_info", processor_handle)
        return {"driver_name": "amdgpu", "driver_version": gpu.driver_version, "driver_date": "2015/01/01 00:00"}

    @export
    def amdsmi_get_gpu_vbios_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_vbios_info", processor_handle)
        return {"name": "AMD MI300X", "build_date": "2024/01/08 11:01", "part_number": gpu.vbios,
                "version": gpu.vbios}

    @export
    def amdsmi_get_fw_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_fw_info", processor_handle)
        return {"fw_list": [{"fw_name": AmdSmiFwBlock[f"FW_ID_{n}"], "fw_version": v} for n, v in gpu.firmware]}


def _export_part2(ctx: _Ctx) -> None:
    """Part 2 of the fake module's functions (see :func:`make_fake_amdsmi`)."""
    export, _dev, _fail = ctx.export, ctx.dev, ctx.fail

    @export
    def amdsmi_get_gpu_board_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_board_info", processor_handle)
        return {"model_number": "102-G30211-00", "product_serial": gpu.serial or "N/A",
                "fru_id": "N/A", "product_name": gpu.market_name, "manufacturer_name": "AMD"}

    def _mem_type(memory_type: Any) -> AmdSmiMemoryType:
        if not isinstance(memory_type, AmdSmiMemoryType):
            raise AmdSmiParameterException(memory_type, AmdSmiMemoryType)
        return memory_type

    @export
    def amdsmi_get_gpu_memory_total(processor_handle: Any, mem_type: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_gpu_memory_total", processor_handle)
        t = _mem_type(mem_type)
        per = max(gpu.partitions, 1)
        if t is AmdSmiMemoryType.VRAM:
            return gpu.vram_total // per
        if t is AmdSmiMemoryType.VIS_VRAM:
            return gpu.vram_total // per
        return 512 * 2**30

    @export
    def amdsmi_get_gpu_memory_usage(processor_handle: Any, mem_type: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_gpu_memory_usage", processor_handle)
        t = _mem_type(mem_type)
        per = max(gpu.partitions, 1)
        return gpu.vram_used // per if t is not AmdSmiMemoryType.GTT else 15 * 2**20

    @export
    def amdsmi_get_gpu_vram_usage(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_vram_usage", processor_handle)
        per = max(gpu.partitions, 1)
        return {"vram_total": gpu.vram_total // per // 2**20, "vram_used": gpu.vram_used // per // 2**20}

    @export
    def amdsmi_get_gpu_vram_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_vram_info", processor_handle)
        return {"vram_type": AmdSmiVramType[gpu.vram_type], "vram_vendor": "SAMSUNG",
                "vram_size": gpu.vram_total // max(gpu.partitions, 1) // 2**20,
                "vram_bit_width": gpu.vram_bit_width}

    @export
    def amdsmi_get_temp_metric(processor_handle: Any, sensor_type: Any, metric: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_temp_metric", processor_handle)
        if not isinstance(sensor_type, AmdSmiTemperatureType):
            raise AmdSmiParameterException(sensor_type, AmdSmiTemperatureType)
        if not isinstance(metric, AmdSmiTemperatureMetric):
            raise AmdSmiParameterException(metric, AmdSmiTemperatureMetric)
        if gpu.vram_type.startswith("HBM") and sensor_type is AmdSmiTemperatureType.EDGE:
            raise _fail("NOT_SUPPORTED")  # MI300X has no edge sensor
        current = {
            AmdSmiTemperatureType.EDGE: gpu.temp_edge,
            AmdSmiTemperatureType.HOTSPOT: gpu.temp_hotspot,
            AmdSmiTemperatureType.VRAM: gpu.temp_vram,
        }.get(sensor_type)
        if current is None:
            raise _fail("NOT_SUPPORTED")
        if metric is AmdSmiTemperatureMetric.CURRENT:
            return current
        if metric is AmdSmiTemperatureMetric.CRITICAL:
            return gpu.temp_crit
        if metric is AmdSmiTemperatureMetric.EMERGENCY:
            return gpu.temp_emergency
        raise _fail("NOT_SUPPORTED")

    @export
    def amdsmi_get_power_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, k = _dev("amdsmi_get_power_info", processor_handle)
        if k > 0:
            # Only the first partition of a CPX device reports socket power.
            return {"socket_power": "N/A", "current_socket_power": "N/A", "average_socket_power": "N/A",
                    "gfx_voltage": "N/A", "soc_voltage": "N/A", "mem_voltage": "N/A", "power_limit": "N/A"}
        mi300 = gpu.gfx.startswith("gfx94")
        return {
            "socket_power": gpu.power_w,
            "current_socket_power": gpu.power_w if mi300 else "N/A",
            "average_socket_power": "N/A" if mi300 else gpu.power_w,
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": gpu.power_cap_w,
        }


def _export_part3(ctx: _Ctx) -> None:
    """Part 3 of the fake module's functions (see :func:`make_fake_amdsmi`)."""
    export, _dev, _fail = ctx.export, ctx.dev, ctx.fail

    @export
    def amdsmi_get_power_cap_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_power_cap_info", processor_handle)
        uw = 1_000_000
        return {
            "power_cap": gpu.power_cap_w * uw,
            "default_power_cap": gpu.power_cap_default_w * uw,
            "dpm_cap": 0,
            "min_power_cap": gpu.power_cap_min_w * uw,
            "max_power_cap": gpu.power_cap_max_w * uw,
        }

    @export
    def amdsmi_get_gpu_activity(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_activity", processor_handle)
        return {"gfx_activity": gpu.gfx_activity, "umc_activity": gpu.umc_activity, "mm_activity": "N/A"}

    @export
    def amdsmi_get_violation_status(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_violation_status", processor_handle)
        keys = ("prochot_thrm", "ppt_pwr", "socket_thrm", "vr_thrm", "hbm_thrm")
        out: dict[str, Any] = {"reference_timestamp": 1700000000, "violation_timestamp": 1700000000}
        for key in keys:
            active = f"active_{key}" in gpu.violations
            out[f"acc_{key}"] = 1234 if active else 0
            out[f"per_{key}"] = 100 if active else 0
            out[f"active_{key}"] = active
        return out

    @export
    def amdsmi_get_clock_info(processor_handle: Any, clock_type: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_clock_info", processor_handle)
        if not isinstance(clock_type, AmdSmiClkType):
            raise AmdSmiParameterException(clock_type, AmdSmiClkType)
        if clock_type is AmdSmiClkType.GFX:
            return {"clk": 132, "min_clk": 500, "max_clk": gpu.gfx_max_mhz, "clk_locked": False,
                    "clk_deep_sleep": True}
        if clock_type is AmdSmiClkType.MEM:
            return {"clk": 900, "min_clk": 900, "max_clk": gpu.mem_max_mhz, "clk_locked": "N/A",
                    "clk_deep_sleep": False}
        raise _fail("NOT_SUPPORTED")

    @export
    def amdsmi_get_pcie_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_pcie_info", processor_handle)
        speed = {4: 16000, 5: 32000}.get(gpu.pcie_gen, 8000)
        return {
            "pcie_static": {
                "max_pcie_width": gpu.pcie_width,
                "max_pcie_speed": speed,
                "pcie_interface_version": gpu.pcie_gen,
                "slot_type": AmdSmiCardFormFactor[gpu.form_factor],
            },
            "pcie_metric": {
                "pcie_width": gpu.pcie_width,
                "pcie_speed": speed,
                "pcie_bandwidth": "N/A",
                "pcie_replay_count": 0,
                "pcie_l0_to_recovery_count": 0,
                "pcie_replay_roll_over_count": 0,
                "pcie_nak_sent_count": "N/A",
                "pcie_nak_received_count": "N/A",
            },
        }

    @export
    def amdsmi_get_gpu_pci_replay_counter(processor_handle: Any) -> int:
        _dev("amdsmi_get_gpu_pci_replay_counter", processor_handle)
        return 0

    @export
    def amdsmi_topo_get_link_type(processor_handle_src: Any, processor_handle_dst: Any) -> dict[str, Any]:
        (ga, ia, _), (gb, ib, _) = ctx.pair("amdsmi_topo_get_link_type", processor_handle_src, processor_handle_dst)
        if ia == ib:
            return {"hops": 0, "type": AmdSmiLinkType.INTERNAL}
        if ga.xgmi_hive_id and ga.xgmi_hive_id == gb.xgmi_hive_id:
            return {"hops": 1, "type": AmdSmiLinkType.XGMI}
        return {"hops": 2 if ga.numa_node == gb.numa_node else 3, "type": AmdSmiLinkType.PCIE}

    @export
    def amdsmi_topo_get_link_weight(processor_handle_src: Any, processor_handle_dst: Any) -> int:
        (ga, _, _), (gb, _, _) = ctx.pair("amdsmi_topo_get_link_weight", processor_handle_src, processor_handle_dst)
        return 15 if ga.xgmi_hive_id and ga.xgmi_hive_id == gb.xgmi_hive_id else 40


def _export_part4(ctx: _Ctx) -> None:
    """Part 4 of the fake module's functions (see :func:`make_fake_amdsmi`)."""
    export, _dev, _fail = ctx.export, ctx.dev, ctx.fail

    @export
    def amdsmi_is_P2P_accessible(processor_handle_src: Any, processor_handle_dst: Any) -> bool:
        ctx.pair("amdsmi_is_P2P_accessible", processor_handle_src, processor_handle_dst)
        return True

    @export
    def amdsmi_topo_get_numa_node_number(processor_handle: Any) -> int:
        gpu, _, _ = _dev("amdsmi_topo_get_numa_node_number", processor_handle)
        return gpu.numa_node

    @export
    def amdsmi_get_gpu_topo_numa_affinity(processor_handle: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_gpu_topo_numa_affinity", processor_handle)
        return gpu.numa_node

    @export
    def amdsmi_get_xgmi_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_xgmi_info", processor_handle)
        if not gpu.xgmi_hive_id:
            raise _fail("NOT_SUPPORTED")
        return {"xgmi_lanes": 16, "xgmi_hive_id": gpu.xgmi_hive_id, "xgmi_node_id": gpu.xgmi_node_id,
                "index": gpu.xgmi_node_id}

    @export
    def amdsmi_get_gpu_xgmi_link_status(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_xgmi_link_status", processor_handle)
        if not gpu.xgmi_hive_id:
            raise _fail("NOT_SUPPORTED")
        # The C array has room for 8 links; unused slots read "N/A".
        status = list(gpu.xgmi_link_status) + ["N/A"] * (8 - len(gpu.xgmi_link_status))
        return {"status": status, "total_links": len(gpu.xgmi_link_status)}

    @export
    def amdsmi_gpu_xgmi_error_status(processor_handle: Any) -> int:
        gpu, _, _ = _dev("amdsmi_gpu_xgmi_error_status", processor_handle)
        if not gpu.xgmi_hive_id:
            raise _fail("NOT_SUPPORTED")
        return gpu.xgmi_error

    @export
    def amdsmi_get_gpu_compute_partition(processor_handle: Any) -> str:
        gpu, _, _ = _dev("amdsmi_get_gpu_compute_partition", processor_handle)
        if gpu.compute_partition is None:
            raise _fail("NOT_SUPPORTED")
        return gpu.compute_partition

    @export
    def amdsmi_get_gpu_memory_partition(processor_handle: Any) -> str:
        gpu, _, _ = _dev("amdsmi_get_gpu_memory_partition", processor_handle)
        if gpu.memory_partition is None:
            raise _fail("NOT_SUPPORTED")
        return gpu.memory_partition

    @export
    def amdsmi_get_gpu_ecc_enabled(processor_handle: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_gpu_ecc_enabled", processor_handle)
        if not gpu.ecc:
            return 0
        return int(
            AmdSmiGpuBlock.UMC | AmdSmiGpuBlock.SDMA | AmdSmiGpuBlock.GFX | AmdSmiGpuBlock.MMHUB
            | AmdSmiGpuBlock.PCIE_BIF | AmdSmiGpuBlock.HDP | AmdSmiGpuBlock.XGMI_WAFL
        )

    def _counts(gpu: FakeGpu, block: str | None) -> dict[str, Any]:
        items = gpu.ecc_counts.items() if block is None else [(block, gpu.ecc_counts.get(block, (0, 0, 0)))]
        ce = sum(v[0] for _, v in items)
        ue = sum(v[1] for _, v in items)
        de = sum(v[2] for _, v in items)
        return {"correctable_count": ce, "uncorrectable_count": ue, "deferred_count": de}

    @export
    def amdsmi_get_gpu_total_ecc_count(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_total_ecc_count", processor_handle)
        if not gpu.ecc:
            raise _fail("NOT_SUPPORTED")
        return _counts(gpu, None)

    @export
    def amdsmi_get_gpu_ecc_count(processor_handle: Any, block: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_ecc_count", processor_handle)
        if not isinstance(block, AmdSmiGpuBlock):
            raise AmdSmiParameterException(block, AmdSmiGpuBlock)
        if not gpu.ecc:
            raise _fail("NOT_SUPPORTED")
        return _counts(gpu, block.name)


def _export_part5(ctx: _Ctx) -> None:
    """Part 5 of the fake module's functions (see :func:`make_fake_amdsmi`)."""
    export, _dev, _fail = ctx.export, ctx.dev, ctx.fail

    @export
    def amdsmi_get_gpu_ecc_status(processor_handle: Any, block: Any) -> AmdSmiRasErrState:
        gpu, _, _ = _dev("amdsmi_get_gpu_ecc_status", processor_handle)
        if not isinstance(block, AmdSmiGpuBlock):
            raise AmdSmiParameterException(block, AmdSmiGpuBlock)
        if not gpu.ecc:
            return AmdSmiRasErrState.DISABLED
        name = gpu.ras_states.get(block.name or "")
        return AmdSmiRasErrState[name] if name else AmdSmiRasErrState.NONE

    def _pages(gpu: FakeGpu) -> list[dict[str, Any]] | str:
        if not gpu.bad_pages:
            return "No bad pages found."
        return [
            {"value": i, "page_address": addr, "page_size": size, "status": AmdSmiMemoryPageStatus(status)}
            for i, (addr, size, status) in enumerate(gpu.bad_pages)
        ]

    @export
    def amdsmi_get_gpu_bad_page_info(processor_handle: Any) -> list[dict[str, Any]] | str:
        gpu, _, _ = _dev("amdsmi_get_gpu_bad_page_info", processor_handle)
        return _pages(gpu)

    @export
    def amdsmi_get_gpu_memory_reserved_pages(processor_handle: Any) -> list[dict[str, Any]] | str:
        gpu, _, _ = _dev("amdsmi_get_gpu_memory_reserved_pages", processor_handle)
        return _pages(gpu)

    @export
    def amdsmi_get_gpu_bad_page_threshold(processor_handle: Any) -> int:
        gpu, _, _ = _dev("amdsmi_get_gpu_bad_page_threshold", processor_handle)
        if gpu.bad_page_threshold is None:
            raise _fail("NOT_SUPPORTED")
        return gpu.bad_page_threshold

    @export
    def amdsmi_get_gpu_process_list(processor_handle: Any) -> list[dict[str, Any]]:
        gpu, _, k = _dev("amdsmi_get_gpu_process_list", processor_handle)
        if k > 0:
            return []
        return [
            {
                "name": p.name,
                "pid": p.pid,
                "mem": p.vram_bytes,
                "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": p.vram_bytes},
                "cu_occupancy": "N/A",
            }
            for p in gpu.processes
        ]

    @export
    def amdsmi_get_gpu_metrics_info(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_metrics_info", processor_handle)
        return {
            "temperature_hotspot": gpu.temp_hotspot,
            "temperature_mem": gpu.temp_vram,
            "average_gfx_activity": gpu.gfx_activity,
            "throttle_status": "N/A",
            "indep_throttle_status": 0,
            "current_socket_power": gpu.power_w,
        }


def _export_part6(ctx: _Ctx) -> None:
    """Part 6 of the fake module's functions (see :func:`make_fake_amdsmi`)."""
    st, export, _dev, _fail = ctx.st, ctx.export, ctx.dev, ctx.fail

    class AmdSmiEventReader:
        """``AmdSmiEventReader(handle, event_types)``; ``read(timeout_ms, num_elem=10)``; ``stop()``."""

        def __init__(self, processor_handle: Any, event_types: Any) -> None:
            self._gpu = _dev("AmdSmiEventReader", processor_handle)
            self._types = list(event_types)
            self._open = True

        def read(self, timeout_ms: int, num_elem: int = 10) -> list[dict[str, Any]]:
            if not self._open:
                raise _fail("INVAL")
            out: list[dict[str, Any]] = []
            keep: list[dict[str, Any]] = []
            for ev in st.events:
                if len(out) < num_elem and ev.get("gpu") == self._gpu[1] and ev.get("event") in self._types:
                    out.append({"processor_handle": None, "event": ev["event"], "message": ev.get("message", "")})
                else:
                    keep.append(ev)
            st.events[:] = keep
            return out  # [] on timeout: never raises, never sleeps

        def stop(self) -> None:
            self._open = False

        def __enter__(self) -> AmdSmiEventReader:
            return self

        def __exit__(self, *exc: object) -> None:
            self.stop()

    export(AmdSmiEventReader)


def _export_part7(ctx: _Ctx) -> None:
    """Partition modes: the setters and the capability queries (rules in :mod:`._fake_partition`).

    Signatures and return shapes as amdsmi 7.0.2's ``amdsmi_interface.py`` (PyPI wheel): the
    setters take the handle and an ``AmdSmiComputePartitionType`` / ``AmdSmiMemoryPartitionType``
    member (anything else is ``AmdSmiParameterException``) and return ``None``; the config
    queries return dicts with the real keys, mode names without their ``AMDSMI_*`` prefix.
    """
    st, export, _dev, _fail = ctx.st, ctx.export, ctx.dev, ctx.fail

    def _busy(gi: int) -> bool:
        return bool(st.live[gi].processes)

    @export
    def amdsmi_set_gpu_compute_partition(processor_handle: Any, compute_partition: Any) -> None:
        gpu, gi, _ = _dev("amdsmi_set_gpu_compute_partition", processor_handle)
        if not isinstance(compute_partition, AmdSmiComputePartitionType):
            raise AmdSmiParameterException(compute_partition, AmdSmiComputePartitionType)
        if not st.privileged:
            raise _fail("NO_PERM")
        if not gpu.compute_modes:
            raise _fail("NOT_SUPPORTED")
        if compute_partition is AmdSmiComputePartitionType.INVALID:
            raise _fail("INVAL")
        want = compute_partition.name
        memory = gpu.memory_partition or "NPS1"
        if want not in gpu.compute_modes or not compute_valid(want, memory, gpu.num_xcc):
            raise _fail("SETTING_UNAVAILABLE")  # not in available_compute_partition
        if want == gpu.compute_partition:
            return
        if _busy(gi):
            raise _fail("BUSY")  # KFD cannot be locked while processes run
        st.set_mode(gi, want, memory)

    @export
    def amdsmi_set_gpu_memory_partition(processor_handle: Any, memory_partition: Any) -> None:
        gpu, gi, _ = _dev("amdsmi_set_gpu_memory_partition", processor_handle)
        if not isinstance(memory_partition, AmdSmiMemoryPartitionType):
            raise AmdSmiParameterException(memory_partition, AmdSmiMemoryPartitionType)
        if not st.privileged:
            raise _fail("NO_PERM")
        name = gpu.market_name.lower()
        if not gpu.memory_modes or "mi" not in name or "00x" not in name:
            raise _fail("NOT_SUPPORTED")  # only discrete MI*00X boards set it at run time
        if memory_partition is AmdSmiMemoryPartitionType.UNKNOWN or memory_partition.name not in gpu.memory_modes:
            raise _fail("INVAL")
        want = memory_partition.name
        if want == gpu.memory_partition:
            return
        if _busy(gi):
            raise _fail("AMDGPU_RESTART_ERR")  # the driver cannot reload while processes use it
        compute = gpu.compute_partition or "SPX"
        if not compute_valid(compute, want, gpu.num_xcc):
            compute = auto_compute(want, gpu.num_xcc) or compute
        st.set_mode(gi, compute, want)

    @export
    def amdsmi_set_gpu_memory_partition_mode(processor_handle: Any, memory_partition: Any) -> None:
        # amdsmi 7.0.2 has both names; the second calls the same C function.
        amdsmi_set_gpu_memory_partition(processor_handle, memory_partition)

    @export
    def amdsmi_get_gpu_memory_partition_config(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_memory_partition_config", processor_handle)
        if not gpu.memory_modes:
            raise _fail("NOT_SUPPORTED")
        return {"partition_caps": list(gpu.memory_modes), "mp_mode": gpu.memory_partition or "N/A",
                "num_numa_ranges": "N/A", "numa_range": "N/A"}

    @export
    def amdsmi_get_gpu_accelerator_partition_profile_config(processor_handle: Any) -> dict[str, Any]:
        gpu, _, _ = _dev("amdsmi_get_gpu_accelerator_partition_profile_config", processor_handle)
        if not gpu.compute_modes:
            raise _fail("NOT_SUPPORTED")
        profiles = [
            {"profile_type": mode, "num_partitions": xcp_count(mode, gpu.num_xcc), "profile_index": i,
             "memory_caps": list(compatible_memory(mode, gpu.memory_modes)) or ["N/A"],
             "num_resources": 0, "resources": []}
            for i, mode in enumerate(gpu.compute_modes)
        ]
        return {"num_profiles": len(profiles), "num_resource_profiles": 0, "resource_profiles": [],
                "default_profile_index": 0, "profiles": profiles}


def make_fake_amdsmi(host: FakeHost, name: str = "amdsmi") -> types.ModuleType:
    """A module object that behaves like ``amdsmi`` on ``host``.

    Put it in ``sys.modules["amdsmi"]`` (see :func:`accel.plugins.amd.testing.install`) so that
    pyrsmi's own ``import amdsmi`` finds it.  ``module._fake_state`` exposes the state
    (``.calls`` records every function called, ``.events`` the queue the event reader pops).
    """
    mod = types.ModuleType(name, "fake amdsmi (accel.plugins.amd.testing)")
    st = _State(host)
    mod.__dict__["_fake_state"] = st
    for cls in (
        AmdSmiException,
        AmdSmiLibraryException,
        AmdSmiRetryException,
        AmdSmiTimeoutException,
        AmdSmiParameterException,
        AmdSmiKeyException,
        AmdSmiBdfFormatException,
        AmdSmiInitFlags,
        AmdSmiMemoryType,
        AmdSmiTemperatureType,
        AmdSmiTemperatureMetric,
        AmdSmiGpuBlock,
        AmdSmiRasErrState,
        AmdSmiMemoryPageStatus,
        AmdSmiClkType,
        AmdSmiLinkType,
        AmdSmiVramType,
        AmdSmiCardFormFactor,
        AmdSmiFwBlock,
        AmdSmiEvtNotificationType,
        AmdSmiComputePartitionType,
        AmdSmiMemoryPartitionType,
        amdsmi_processor_handle,
    ):
        setattr(mod, cls.__name__, cls)

    ctx = _Ctx(mod, st)
    _export_part1(ctx)
    _export_part2(ctx)
    _export_part3(ctx)
    _export_part4(ctx)
    _export_part5(ctx)
    _export_part6(ctx)
    _export_part7(ctx)
    return mod


class BrokenAmdSmiFinder:
    """A ``sys.meta_path`` finder whose ``amdsmi`` prints and raises ``KeyError('libamd_smi.so')``.

    That is what PyPI amdsmi 7.0.2 does when the shared library is missing.
    """

    def __init__(self, name: str = "amdsmi") -> None:
        self.name = name

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> Any:
        if fullname != self.name:
            return None
        import importlib.machinery

        return importlib.machinery.ModuleSpec(fullname, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        print("Unable to find libamd_smi.so. Please make sure ROCm is installed")
        sys.stdout.flush()
        raise KeyError("libamd_smi.so")
