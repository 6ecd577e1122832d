"""Backend ``ppu``: T-Head PPUs through their management library HGML (``libhgml.so``) only, so
``-o read=native`` is the default; ``-o scenario=NAME`` reads the fake of :mod:`accel_ppu.testing`.

Signatures, structs, enums and units restated from gpustack/runtime's ctypes binding
(``gpustack_runtime/detector/pyhgml/__init__.py`` at 1d1e894253c6a0410b3c6403130ada521bf2e6b6) and
its user ``gpustack_runtime/detector/thead.py`` (518db70b88f305f0a9b3d9441ec470fafdecaa23: power in
mW, temperature sensor 0): NVML's conventions, opaque handles, ``hgmlReturn_t`` 0 = success."""

from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final

import accel.toolkit as tk
from accel.errors import AccelError, ConfigError, NotSupportedError
from accel.model import Action, DeviceKind, Severity, Subsystem
from accel.plugin import BackendConfig

__all__ = ["ENV_VAR", "ERRORS", "LIBRARY", "TABLE", "HgmlRead", "PpuBackend", "read_hgml"]

LIBRARY: Final = "libhgml.so"
ENV_VAR: Final = "ACCEL_PPU_LIB"
SOURCE: Final = tk.SignatureSource(
    "gpustack/runtime", "gpustack_runtime/detector/pyhgml/__init__.py", "1d1e894253c6a0410b3c6403130ada521bf2e6b6"
)
NAME_SIZE, UUID_SIZE, VERSION_SIZE = 96, 96, 80  # HGML_DEVICE_NAME_V2/UUID_V2/SYSTEM_DRIVER_VERSION sizes
TEMPERATURE_GPU, MEMORY_ERROR_CORRECTED, MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC = 0, 0, 1, 0


class PciInfo(ctypes.Structure):  # hgmlPciInfo_t (_v3)
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), *((f, ctypes.c_uint) for f in ("domain", "bus", "device"))]
    _fields_ += [("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint), ("busId", ctypes.c_char * 32)]


class Memory(ctypes.Structure):  # hgmlMemory_t, bytes
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Utilization(ctypes.Structure):  # hgmlUtilization_t, percent
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


_U, _PU, _H, _S = ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p, ctypes.c_char_p


#: Every function called, its argtypes; each returns ``hgmlReturn_t`` (``unsigned int``).
_ARGTYPES: Final[dict[str, tuple[Any, ...]]] = {
    "hgmlInitWithFlags": (_U,),
    "hgmlSystemGetDriverVersion": (_S, _U),
    "hgmlDeviceGetCount_v2": (_PU,),
    "hgmlDeviceGetHandleByIndex_v2": (_U, ctypes.POINTER(_H)),  # hgmlDevice_t: an opaque pointer
    "hgmlDeviceGetName": (_H, _S, _U),
    "hgmlDeviceGetUUID": (_H, _S, _U),
    "hgmlDeviceGetPciInfo_v3": (_H, ctypes.POINTER(PciInfo)),
    "hgmlDeviceGetMemoryInfo": (_H, ctypes.POINTER(Memory)),
    "hgmlDeviceGetUtilizationRates": (_H, ctypes.POINTER(Utilization)),
    "hgmlDeviceGetTemperature": (_H, _U, _PU),
    "hgmlDeviceGetPowerUsage": (_H, _PU),
    "hgmlDeviceGetTotalEccErrors": (_H, _U, _U, ctypes.POINTER(ctypes.c_ulonglong)),
}
TABLE: Final = tk.SignatureTable.of(LIBRARY, *(tk.NativeFunction(n, a, _U, SOURCE) for n, a in _ARGTYPES.items()))

ERRORS: Final = tk.ErrorTable("t-head.hgml", {  # hgmlReturn_t's HGML_ERROR_*; any other code: "unknown"
    1: ("uninitialized", "UNINITIALIZED"), 2: ("invalid-argument", "INVALID_ARGUMENT"), 10: ("timeout", "TIMEOUT"),
    3: ("not-supported", "NOT_SUPPORTED"), 13: ("not-supported", "FUNCTION_NOT_FOUND"), 15: ("lost", "GPU_IS_LOST"),
    4: ("no-permission", "NO_PERMISSION"), 6: ("not-found", "NOT_FOUND"), 28: ("not-found", "GPU_NOT_FOUND"),
    7: ("invalid-argument", "INSUFFICIENT_SIZE"), 9: ("driver-not-loaded", "DRIVER_NOT_LOADED"),
    12: ("driver-not-loaded", "LIBRARY_NOT_FOUND"), 18: ("version", "LIB_RM_VERSION_MISMATCH"),
    25: ("version", "ARGUMENT_VERSION_MISMATCH"),
})  # fmt: skip


@dataclass
class HgmlRead:  # one pass: the units, the driver version, the fields never answered, the failed calls
    readings: list[tk.UnitReading] = field(default_factory=list)
    driver_version: str | None = None
    never: dict[int, set[str]] = field(default_factory=dict)
    problems: list[AccelError] = field(default_factory=list)


def _text(raw: bytes) -> str | None:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip() or None


def read_hgml(lib: tk.NativeLibrary) -> HgmlRead:
    """Init, the driver version, then each device; a failed call leaves its field empty."""
    out = HgmlRead()
    lib.call("hgmlInitWithFlags", 0)
    version = ctypes.create_string_buffer(VERSION_SIZE)
    if lib.supported("hgmlSystemGetDriverVersion", version, VERSION_SIZE):
        out.driver_version = _text(version.value)
    count = ctypes.c_uint()
    lib.call("hgmlDeviceGetCount_v2", ctypes.byref(count))
    for index in range(count.value):
        try:
            out.readings.append(_unit(lib, index, out))
        except AccelError as exc:  # no handle or no identity: the problem names the device
            out.problems.append(exc)
    return out


def _unit(lib: tk.NativeLibrary, index: int, out: HgmlRead) -> tk.UnitReading:
    did, never = str(index), out.never.setdefault(index, set())
    handle = ctypes.c_void_p()
    lib.call("hgmlDeviceGetHandleByIndex_v2", index, ctypes.byref(handle), device_id=did)
    pci = PciInfo()
    lib.call("hgmlDeviceGetPciInfo_v3", handle, ctypes.byref(pci), device_id=did)
    r = tk.UnitReading(index=index, bus_id=tk.parse_bus_id(_text(pci.busId)), pci_vendor_id="1ded")

    def read(fn: str, field_path: str | None, *args: Any) -> bool:
        try:
            lib.call(fn, handle, *args, device_id=did)
            return True
        except NotSupportedError:
            never.update([field_path] if field_path else [])
        except AccelError as exc:
            out.problems.append(exc)
            r.dropped.add("*")
        return False

    name, uuid = ctypes.create_string_buffer(NAME_SIZE), ctypes.create_string_buffer(UUID_SIZE)
    if read("hgmlDeviceGetName", None, name, NAME_SIZE):
        r.model = _text(name.value)
    if read("hgmlDeviceGetUUID", None, uuid, UUID_SIZE):
        r.uuid = _text(uuid.value)
    mem, util, value = Memory(), Utilization(), ctypes.c_uint()
    if read("hgmlDeviceGetMemoryInfo", "memory", ctypes.byref(mem)):
        r.memory_total_bytes, r.memory_used_bytes = mem.total, mem.used
    if read("hgmlDeviceGetUtilizationRates", "utilization_ratio", ctypes.byref(util)):
        r.utilization_ratio, r.memory_utilization_ratio = util.gpu / 100, util.memory / 100
    if read("hgmlDeviceGetTemperature", "temperature_celsius", TEMPERATURE_GPU, ctypes.byref(value)):
        r.temperature_celsius = float(value.value)
    if read("hgmlDeviceGetPowerUsage", "power_watts", ctypes.byref(value)):
        r.power_watts = value.value / 1000  # mW
    counts = {}  # health is earned: the volatile ECC counters must answer
    for kind, label in ((MEMORY_ERROR_CORRECTED, "Corrected"), (MEMORY_ERROR_UNCORRECTED, "Uncorrected")):
        n = ctypes.c_ulonglong()
        if read("hgmlDeviceGetTotalEccErrors", "ecc_uncorrected_total", kind, VOLATILE_ECC, ctypes.byref(n)):
            counts[label] = r.extras[f"t-head.com/ecc{label}Volatile"] = n.value
    if "Uncorrected" in counts:
        r.health_read, r.ecc_enabled, r.ecc_uncorrected_total = True, True, counts["Uncorrected"]
    if counts.get("Uncorrected"):
        msg = f"HGML counts {counts['Uncorrected']} uncorrectable ECC errors since the driver loaded"
        why = Subsystem.MEMORY, "EccUncorrectable", Severity.CRITICAL, Action.DRAIN_AND_RESET
        r.conditions.append(tk.condition(*why, msg, code="t-head.hgml:ecc-uncorrectable"))
    return r


class PpuBackend(tk.DualPathBackend):
    """T-Head PPUs through ``libhgml.so`` (``$ACCEL_PPU_LIB`` alone when set, else the loader's search)."""

    backend_name, vendor, tool, kind = "ppu", "t-head", "ppu-smi", DeviceKind.GPU
    library, native_table, native_errors = LIBRARY, TABLE, ERRORS
    visible_env = "CUDA_VISIBLE_DEVICES"  # alibabacloud.com/devices in gpustack-runtime's envs.py @88026d62

    def __init__(self, config: BackendConfig, runner: Any) -> None:
        if config.option("read") is None:
            config = dataclasses.replace(config, options={**config.options, "read": "native"})
        super().__init__(config, runner)

    def load_native(self) -> object:
        return tk.load_library("ppu", [LIBRARY], env_var=ENV_VAR)  # on open, never on import

    def fake_native(self, runner: Any) -> object:
        from .testing import fake_of_replay  # only a scenario imports the fake

        return fake_of_replay(runner)

    def collect_cli(self, col: tk.Collection) -> tk.Snapshot:
        raise ConfigError("the ppu backend reads libhgml only (-o read=native); it has no ppu-smi parser")

    def collect_native(self, col: tk.Collection, lib: tk.NativeLibrary) -> tk.Snapshot:
        read = read_hgml(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        devices, samples = self.build(
            col,
            read.readings,
            versions={"driver": read.driver_version},
            per_unit=lambda r: {"unsupported": read.never.get(r.index or 0, set()) & {"memory"}},
            telemetry_unsupported=frozenset().union(*read.never.values()) - {"memory"},
        )
        return col.snapshot(devices, samples)
