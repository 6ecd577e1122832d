"""Hygon's management library: the ROCm SMI C interface (``rsmi_*``) of DTK's ``librocm_smi64.so``.

Hygon's DTK ships a fork of AMD's ROCm SMI library under the same name and API (gpustack/runtime
drives Hygon DCUs through it: ``gpustack_runtime/detector/pyrocmsmi/__init__.py`` at commit
88026d62a1c16d644fae0ee83943767c897cf9fb, which also gives the DTK library locations).  The
signatures, enums and units are restated from AMD's header, ROCm/rocm_smi_lib
``include/rocm_smi/rocm_smi.h`` at commit a1295714f2f6eefa5c55bf5779d17d163ed0e3d0.
Conventions: devices by ``uint32_t dv_ind``; ``rsmi_status_t`` (an enum with
``RSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF``, so ``unsigned int``; ``0`` = success); memory in
bytes, temperatures in milli-degrees C, power in microwatts.  The readings are the AMD plugin's
:class:`~accel.plugins.amd.layers.GpuReading` (read only here), so the Hygon backend assembles
them as it does ``hy-smi``'s.  Nothing here loads the library at import time.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass, field
from typing import Any, Final

from accel.errors import AccelError, NotSupportedError
from accel.plugins.amd.layers import EccCount, GpuReading, decode_bdf_int
from accel.toolkit import (
    ErrorTable,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    load_library,
)

__all__ = [
    "ENV_VAR",
    "ERRORS",
    "LIBRARY",
    "SOURCE",
    "TABLE",
    "RsmiRead",
    "close_rsmi",
    "load_rsmi",
    "read_rsmi",
]

LIBRARY: Final = "librocm_smi64.so"
ENV_VAR: Final = "ACCEL_HYGON_LIB"
#: gpustack-runtime's DTK locations ($ROCM_SMI_LIB_PATH first, then the ROCm/DTK homes).
LIBRARY_DIRS: Final = (
    "$ROCM_SMI_LIB_PATH",
    "/opt/hyhal/lib",
    "/opt/dtk/.hyhal/rocm_smi/lib",
    "$ROCM_PATH/lib",
    "$ROCM_PATH/rocm_smi/lib",
    "/opt/dtk/lib",
    "/opt/dtk/rocm_smi/lib",
)

SOURCE: Final = SignatureSource(
    "ROCm/rocm_smi_lib", "include/rocm_smi/rocm_smi.h", "a1295714f2f6eefa5c55bf5779d17d163ed0e3d0"
)

NAME_SIZE: Final = 256  # what gpustack-runtime passes
MEM_TYPE_VRAM: Final = 0  # rsmi_memory_type_t RSMI_MEM_TYPE_VRAM
TEMP_CURRENT: Final = 0  # rsmi_temperature_metric_t RSMI_TEMP_CURRENT
#: rsmi_temperature_type_t sensors, by the label the rocm-smi JSON parser gives them.
TEMP_SENSORS: Final = {"edge": 0, "junction": 1, "memory": 2}
GPU_BLOCK_UMC: Final = 1  # rsmi_gpu_block_t RSMI_GPU_BLOCK_UMC (the first block bit)
IOLINK_XGMI: Final = 2  # RSMI_IO_LINK_TYPE RSMI_IOLINK_TYPE_XGMI


class ErrorCount(ctypes.Structure):
    """``rsmi_error_count_t``."""

    _fields_ = [("correctable_err", ctypes.c_uint64), ("uncorrectable_err", ctypes.c_uint64)]


_U32 = ctypes.c_uint32
_P64 = ctypes.POINTER(ctypes.c_uint64)
_PC = ctypes.POINTER(ctypes.c_char)
_RET = ctypes.c_uint  # rsmi_status_t


def _fn(name: str, argtypes: tuple[Any, ...]) -> NativeFunction:
    return NativeFunction(name, argtypes, _RET, SOURCE)


TABLE: Final = SignatureTable.of(
    LIBRARY,
    _fn("rsmi_init", (ctypes.c_uint64,)),
    _fn("rsmi_shut_down", ()),
    _fn("rsmi_num_monitor_devices", (ctypes.POINTER(_U32),)),
    _fn("rsmi_dev_name_get", (_U32, _PC, ctypes.c_size_t)),
    _fn("rsmi_dev_serial_number_get", (_U32, _PC, _U32)),
    _fn("rsmi_dev_unique_id_get", (_U32, _P64)),
    _fn("rsmi_dev_pci_id_get", (_U32, _P64)),
    _fn("rsmi_dev_memory_total_get", (_U32, ctypes.c_int, _P64)),
    _fn("rsmi_dev_memory_usage_get", (_U32, ctypes.c_int, _P64)),
    _fn("rsmi_dev_busy_percent_get", (_U32, ctypes.POINTER(_U32))),
    _fn("rsmi_dev_temp_metric_get", (_U32, _U32, ctypes.c_int, ctypes.POINTER(ctypes.c_int64))),
    _fn("rsmi_dev_power_ave_get", (_U32, _U32, _P64)),
    _fn("rsmi_dev_power_cap_get", (_U32, _U32, _P64)),
    # rsmi_gpu_block_t holds 0x8000000000000000 (RESERVED): a 64-bit enum.
    _fn("rsmi_dev_ecc_count_get", (_U32, ctypes.c_uint64, ctypes.POINTER(ErrorCount))),
    _fn("rsmi_topo_get_link_type", (_U32, _U32, _P64, ctypes.POINTER(ctypes.c_int))),
)

#: ``rsmi_status_t`` (header lines 87-137).
ERRORS: Final = ErrorTable(
    "hygon.rsmi",
    {
        1: ("invalid-argument", "INVALID_ARGS"),
        2: ("not-supported", "NOT_SUPPORTED"),
        3: ("unknown", "FILE_ERROR"),
        4: ("no-permission", "PERMISSION"),
        5: ("unknown", "OUT_OF_RESOURCES"),
        6: ("unknown", "INTERNAL_EXCEPTION"),
        7: ("invalid-argument", "INPUT_OUT_OF_BOUNDS"),
        8: ("uninitialized", "INIT_ERROR"),
        9: ("not-supported", "NOT_YET_IMPLEMENTED"),
        10: ("not-found", "NOT_FOUND"),
        11: ("invalid-argument", "INSUFFICIENT_SIZE"),
        12: ("unknown", "INTERRUPT"),
        13: ("unknown", "UNEXPECTED_SIZE"),
        14: ("not-supported", "NO_DATA"),
        15: ("unknown", "UNEXPECTED_DATA"),
        16: ("unknown", "BUSY"),
        17: ("unknown", "REFCOUNT_OVERFLOW"),
        18: ("not-supported", "SETTING_UNAVAILABLE"),
        19: ("driver-not-loaded", "AMDGPU_RESTART_ERR"),
        20: ("driver-not-loaded", "DRM_ERROR"),
        21: ("driver-not-loaded", "FAIL_LOAD_MODULE"),
        22: ("version", "FAIL_LOAD_SYMBOL"),
        0xFFFFFFFF: ("unknown", "UNKNOWN_ERROR"),
    },
)


def load_rsmi() -> object:
    """Load DTK's ``librocm_smi64.so`` (``$ACCEL_HYGON_LIB``, the DTK directories, the loader)."""
    return load_library("hygon", [LIBRARY], env_var=ENV_VAR, dirs=LIBRARY_DIRS)


@dataclass
class RsmiRead:
    """One pass over ``rsmi_*``: readings by index, xGMI pairs, the parts never readable (the
    backend's ``unsupported`` names), and the calls that failed."""

    readings: list[GpuReading] = field(default_factory=list)
    xgmi_pairs: list[tuple[int, int]] = field(default_factory=list)
    never: set[str] = field(default_factory=set)
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: bytes) -> str | None:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return text or None


class _Device:
    def __init__(self, lib: NativeLibrary, index: int, out: RsmiRead) -> None:
        self.lib, self.index, self.out = lib, index, out
        self.did = str(index)

    def read(self, name: str, part: str | None, *args: Any) -> bool:
        try:
            self.lib.call(name, self.index, *args, device_id=self.did)
        except NotSupportedError:
            if part is not None:
                self.out.never.add(part)
            return False
        except AccelError as exc:
            self.out.problems.append(exc)
            return False
        return True


def _reading(lib: NativeLibrary, index: int, out: RsmiRead) -> GpuReading:
    dev = _Device(lib, index, out)
    r = GpuReading(index=index)
    buf = ctypes.create_string_buffer(NAME_SIZE)
    if dev.read("rsmi_dev_name_get", None, buf, NAME_SIZE):
        r.name = _text(buf.raw)
    buf = ctypes.create_string_buffer(NAME_SIZE)
    if dev.read("rsmi_dev_serial_number_get", "serial_number", buf, NAME_SIZE):
        r.serial_number = _text(buf.raw)
    value = ctypes.c_uint64()
    if dev.read("rsmi_dev_unique_id_get", "uuid", ctypes.byref(value)):
        r.unique_id = f"0x{value.value:016x}"
    if dev.read("rsmi_dev_pci_id_get", "bus_id", ctypes.byref(value)):
        r.bus_id = decode_bdf_int(value.value)
    if dev.read("rsmi_dev_memory_total_get", "memory_total_bytes", MEM_TYPE_VRAM, ctypes.byref(value)):
        r.memory_total_bytes = value.value
    if dev.read("rsmi_dev_memory_usage_get", "memory_used_bytes", MEM_TYPE_VRAM, ctypes.byref(value)):
        r.memory_used_bytes = value.value
    busy = ctypes.c_uint32()
    if dev.read("rsmi_dev_busy_percent_get", None, ctypes.byref(busy)):
        r.utilization_ratio = busy.value / 100
    temp = ctypes.c_int64()
    for label, sensor in TEMP_SENSORS.items():
        if dev.read("rsmi_dev_temp_metric_get", None, sensor, TEMP_CURRENT, ctypes.byref(temp)):
            r.temperatures_celsius[label] = temp.value / 1000
    if dev.read("rsmi_dev_power_ave_get", None, 0, ctypes.byref(value)):
        r.power_watts = value.value / 1e6
    if dev.read("rsmi_dev_power_cap_get", None, 0, ctypes.byref(value)):
        r.power_cap_watts = value.value / 1e6
    ecc = ErrorCount()
    if dev.read("rsmi_dev_ecc_count_get", None, GPU_BLOCK_UMC, ctypes.byref(ecc)):
        r.ecc_total = EccCount(correctable=int(ecc.correctable_err), uncorrectable=int(ecc.uncorrectable_err))
    return r


def read_rsmi(lib: NativeLibrary) -> RsmiRead:
    """One full read: init, each device, the xGMI pairs."""
    out = RsmiRead()
    lib.call("rsmi_init", 0)
    count = ctypes.c_uint32()
    lib.call("rsmi_num_monitor_devices", ctypes.byref(count))
    out.readings = [_reading(lib, i, out) for i in range(count.value)]
    hops, kind = ctypes.c_uint64(), ctypes.c_int()
    for a in range(count.value):
        for b in range(a + 1, count.value):
            try:
                lib.call("rsmi_topo_get_link_type", a, b, ctypes.byref(hops), ctypes.byref(kind), device_id=str(a))
            except NotSupportedError:
                continue
            except AccelError as exc:
                out.problems.append(exc)
                continue
            if kind.value == IOLINK_XGMI:
                out.xgmi_pairs.append((a, b))
    return out


def close_rsmi(lib: NativeLibrary) -> None:
    """``rsmi_shut_down`` (the library counts inits; a backend calls it once per ``rsmi_init``)."""
    with contextlib.suppress(AccelError):
        lib.call("rsmi_shut_down")
