"""The NVML boundary: the only module of accel that imports ``pynvml``.

``pynvml`` here is the module shipped by the ``nvidia-ml-py`` distribution (NVIDIA's official
binding), not the deprecated ``pynvml`` distribution, which is an empty shim that warns on import.

Everything the backend asks of NVML goes through :meth:`Nvml.call`, which

* looks the wrapper up on the library object at call time (so a fake installed over the module
  functions, or a module-like fake passed in, is honoured),
* counts calls per function name (the cost benchmark reads :attr:`Nvml.calls`),
* maps every exception raised inside the binding to :mod:`accel.errors`, keeping the vendor
  exception as ``__cause__`` (:func:`map_error`; :func:`nvml_code_of` recovers the NVML code).

The numeric constants the backend needs are NVML ABI values from ``nvml.h``; they are copied in
:class:`C` so that no other module needs ``pynvml`` (a test pins them against the binding).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import struct
import threading
import warnings
from collections import Counter
from types import ModuleType
from typing import Any, Final

from ...errors import (
    AccelError,
    DeviceError,
    DeviceLostError,
    DriverError,
    DriverVersionError,
    LibraryNotFoundError,
    NotSupportedError,
    PermissionDeniedError,
)

__all__ = ["ERROR_CLASSES", "C", "Nvml", "field_answers", "load_pynvml", "map_error", "nvml_code_of"]

_PYNVML: ModuleType | None = None
_LOAD_LOCK = threading.Lock()


def load_pynvml() -> ModuleType:
    """Import and return the ``pynvml`` module of ``nvidia-ml-py``.

    Raises :class:`accel.errors.LibraryNotFoundError` when the binding is not installed.  Importing
    the binding never loads ``libnvidia-ml.so.1``; that happens at ``nvmlInit``.
    """
    global _PYNVML
    with _LOAD_LOCK:
        if _PYNVML is None:
            try:
                with warnings.catch_warnings():
                    # The deprecated ``pynvml`` distribution, when installed next to nvidia-ml-py,
                    # puts a finder on sys.meta_path that warns (FutureWarning) on the first import
                    # of any ``pynvml*`` module; under ``-W error`` that would turn into a failure.
                    warnings.simplefilter("ignore", FutureWarning)
                    import pynvml  # type: ignore[import-untyped]
            except ImportError as exc:
                raise LibraryNotFoundError(
                    "the NVML Python binding is not installed (pip install 'accel-sdk[nvidia]', "
                    "which installs nvidia-ml-py)",
                    vendor_code="nvidia.nvml:binding-missing",
                ) from exc
            _PYNVML = pynvml
        return _PYNVML


class C:
    """NVML ABI constants used by the backend (values from ``nvml.h``)."""

    SUCCESS: Final = 0
    ERROR_UNINITIALIZED: Final = 1
    ERROR_INVALID_ARGUMENT: Final = 2
    ERROR_NOT_SUPPORTED: Final = 3
    ERROR_NO_PERMISSION: Final = 4
    ERROR_NOT_FOUND: Final = 6
    ERROR_INSUFFICIENT_POWER: Final = 8
    ERROR_DRIVER_NOT_LOADED: Final = 9
    ERROR_TIMEOUT: Final = 10
    ERROR_IRQ_ISSUE: Final = 11
    ERROR_LIBRARY_NOT_FOUND: Final = 12
    ERROR_FUNCTION_NOT_FOUND: Final = 13
    ERROR_CORRUPTED_INFOROM: Final = 14
    ERROR_GPU_IS_LOST: Final = 15
    ERROR_RESET_REQUIRED: Final = 16
    ERROR_LIB_RM_VERSION_MISMATCH: Final = 18
    ERROR_ARGUMENT_VERSION_MISMATCH: Final = 25
    ERROR_UNKNOWN: Final = 999

    NVML_MEMORY_V2: Final = 0x02000028
    TEMPERATURE_GPU: Final = 0
    THRESHOLD_SHUTDOWN: Final = 0
    THRESHOLD_SLOWDOWN: Final = 1
    THRESHOLD_MEM_MAX: Final = 2
    THRESHOLD_GPU_MAX: Final = 3
    CLOCK_GRAPHICS: Final = 0
    CLOCK_SM: Final = 1
    CLOCK_MEM: Final = 2
    CLOCK_VIDEO: Final = 3
    PCIE_UTIL_TX_BYTES: Final = 0
    PCIE_UTIL_RX_BYTES: Final = 1
    AFFINITY_SCOPE_NODE: Final = 0
    NVLINK_DEVICE_TYPE_GPU: Final = 0
    NVLINK_DEVICE_TYPE_IBMNPU: Final = 1
    NVLINK_DEVICE_TYPE_SWITCH: Final = 2
    NVLINK_ERROR_DL_REPLAY: Final = 0
    NVLINK_ERROR_DL_RECOVERY: Final = 1
    NVLINK_ERROR_DL_CRC_FLIT: Final = 2
    #: NVML_P2P_CAPS_INDEX_READ is the tuple ``(0,)`` in the bindings (a trailing comma): use 0.
    P2P_CAPS_INDEX_READ: Final = 0
    P2P_STATUS_OK: Final = 0
    TOPOLOGY_INTERNAL: Final = 0
    TOPOLOGY_SINGLE: Final = 10
    TOPOLOGY_MULTIPLE: Final = 20
    TOPOLOGY_HOSTBRIDGE: Final = 30
    TOPOLOGY_NODE: Final = 40
    TOPOLOGY_SYSTEM: Final = 50
    DEVICE_MIG_ENABLE: Final = 1
    GPU_INSTANCE_PROFILE_COUNT: Final = 0x12
    EVENT_SINGLE_BIT_ECC: Final = 0x1
    EVENT_DOUBLE_BIT_ECC: Final = 0x2
    EVENT_XID_CRITICAL: Final = 0x8
    EVENT_NONE_ATTRIBUTED: Final = 0xFFFFFFFF
    GPU_FABRIC_STATE_NOT_SUPPORTED: Final = 0
    GPU_FABRIC_STATE_COMPLETED: Final = 3
    #: ``nvmlGpuFabricInfo_v2``: NVML_STRUCT_VERSION(GpuFabricInfo, 2) = sizeof(v2 struct) | 2 << 24.
    GPU_FABRIC_INFO_V2: Final = 0x02000024
    VALUE_NOT_AVAILABLE_ULL: Final = 0xFFFFFFFFFFFFFFFF

    # Field ids (nvmlDeviceGetFieldValues).
    FI_ECC_SBE_VOL_TOTAL: Final = 3
    FI_ECC_DBE_VOL_TOTAL: Final = 4
    FI_ECC_SBE_AGG_TOTAL: Final = 5
    FI_ECC_DBE_AGG_TOTAL: Final = 6
    FI_RETIRED_SBE: Final = 29
    FI_RETIRED_DBE: Final = 30
    FI_RETIRED_PENDING: Final = 31
    FI_NVLINK_CRC_FLIT_TOTAL: Final = 38
    FI_NVLINK_CRC_DATA_TOTAL: Final = 45
    FI_NVLINK_REPLAY_TOTAL: Final = 52
    FI_NVLINK_RECOVERY_TOTAL: Final = 59
    FI_MEMORY_TEMP: Final = 82
    FI_TOTAL_ENERGY: Final = 83
    FI_NVLINK_LINK_COUNT: Final = 91
    FI_PCIE_REPLAY_COUNTER: Final = 94
    FI_REMAPPED_COR: Final = 142
    FI_REMAPPED_UNC: Final = 143
    FI_REMAPPED_PENDING: Final = 144
    FI_REMAPPED_FAILURE: Final = 145
    FI_NVLINK_ERROR_DL_REPLAY: Final = 161
    FI_NVLINK_ERROR_DL_RECOVERY: Final = 162
    FI_NVLINK_ERROR_DL_CRC: Final = 163
    FI_POWER_INSTANT: Final = 186
    FI_GPU_RECOVERY_ACTION: Final = 230

    # Clock-event (throttle) reason bits.
    CLOCKS_EVENT_GPU_IDLE: Final = 0x1
    CLOCKS_EVENT_APPLICATIONS_CLOCKS: Final = 0x2
    CLOCKS_EVENT_SW_POWER_CAP: Final = 0x4
    CLOCKS_EVENT_HW_SLOWDOWN: Final = 0x8
    CLOCKS_EVENT_SYNC_BOOST: Final = 0x10
    CLOCKS_EVENT_SW_THERMAL: Final = 0x20
    CLOCKS_EVENT_HW_THERMAL: Final = 0x40
    CLOCKS_EVENT_HW_POWER_BRAKE: Final = 0x80
    CLOCKS_EVENT_DISPLAY_CLOCK: Final = 0x100


# NVML error code -> (accel error class, stable accel code).  Every NVMLError subclass that
# nvidia-ml-py generates has a row; an unknown code falls back to DriverError.
ERROR_CLASSES: Final[dict[int, tuple[type[AccelError], str]]] = {
    1: (DriverError, "driver.uninitialized"),
    2: (DriverError, "driver.invalid-argument"),
    3: (NotSupportedError, "device.not-supported"),
    4: (PermissionDeniedError, "permission.denied"),
    5: (DriverError, "driver.already-initialized"),
    6: (DeviceError, "device.not-found"),
    7: (DriverError, "driver.insufficient-size"),
    8: (DeviceError, "device.insufficient-power"),
    9: (DriverError, "driver.not-loaded"),
    10: (DriverError, "driver.timeout"),
    11: (DeviceError, "device.irq-issue"),
    12: (LibraryNotFoundError, "driver.library-not-found"),
    13: (DriverVersionError, "driver.function-not-found"),
    14: (DeviceError, "device.corrupted-inforom"),
    15: (DeviceLostError, "device.lost"),
    16: (DeviceError, "device.reset-required"),
    17: (PermissionDeniedError, "permission.os-blocked"),
    18: (DriverVersionError, "driver.version-mismatch"),
    19: (DriverError, "driver.in-use"),
    20: (DriverError, "driver.out-of-memory"),
    21: (DriverError, "driver.no-data"),
    22: (NotSupportedError, "device.vgpu-ecc-not-supported"),
    23: (DriverError, "driver.insufficient-resources"),
    24: (NotSupportedError, "device.frequency-not-supported"),
    25: (DriverVersionError, "driver.argument-version-mismatch"),
    26: (DriverVersionError, "driver.deprecated"),
    27: (DriverError, "driver.not-ready"),
    28: (DeviceError, "device.gpu-not-found"),
    29: (DriverError, "driver.invalid-state"),
    30: (NotSupportedError, "device.reset-type-not-supported"),
    999: (DriverError, "driver.unknown"),
}

_DEVICE_ERRORS = (DeviceError,)


def _describe(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 -- str(NVMLError) calls into the C library and can fail itself
        return type(exc).__name__


def map_error(exc: BaseException, *, fn: str = "", device_id: str | None = None) -> AccelError:
    """Map an exception raised inside the NVML binding to an :mod:`accel.errors` instance.

    ``NVMLError`` subclasses map by their ``value`` (:data:`ERROR_CLASSES`);
    ``NVMLLibraryMismatchError`` (not an NVMLError: raised by the process wrappers when the driver
    lacks the ``_v3`` symbol) maps to :class:`DriverVersionError`; a ``UnicodeDecodeError`` (a
    corrupt string from the driver, which nvitop maps to Unknown) and ctypes argument errors map
    to :class:`DriverError`.  The caller raises the result ``from exc`` to keep the cause.
    """
    where = f" in {fn}" if fn else ""
    code = getattr(exc, "value", None)
    if isinstance(code, int) and type(exc).__name__.startswith("NVMLError"):
        cls, accel_code = ERROR_CLASSES.get(code, (DriverError, "driver.error"))
        message = f"NVML error {code} ({_describe(exc)}){where}"
        vendor = f"nvidia.nvml:{code}"
        if issubclass(cls, DeviceError):
            return cls(message, device_id=device_id, code=accel_code)
        if issubclass(cls, DriverError):
            return cls(message, vendor_code=vendor, code=accel_code)
        return cls(message, code=accel_code)
    if type(exc).__name__ == "NVMLLibraryMismatchError":
        return DriverVersionError(
            f"NVML library lacks the versioned symbol{where}: {_describe(exc)}",
            vendor_code="nvidia.nvml:library-mismatch",
            code="driver.function-not-found",
        )
    if isinstance(exc, UnicodeDecodeError):
        return DriverError(f"NVML returned undecodable text{where}", vendor_code="nvidia.nvml:999")
    if isinstance(exc, ctypes.ArgumentError | TypeError | ValueError):
        return DriverError(f"NVML binding rejected the call{where}: {_describe(exc)}", code="driver.binding")
    return DriverError(f"NVML binding failed{where}: {type(exc).__name__}: {_describe(exc)}")


def nvml_code_of(err: BaseException) -> int | None:
    """The NVML error code behind a mapped error (``None`` when it did not come from NVML)."""
    cause = err.__cause__
    if cause is not None and type(cause).__name__ == "NVMLLibraryMismatchError":
        return C.ERROR_FUNCTION_NOT_FOUND
    if isinstance(err, DriverVersionError) and err.code == "driver.function-not-found":
        return C.ERROR_FUNCTION_NOT_FOUND
    value = getattr(cause, "value", None)
    return value if isinstance(value, int) else None


class Nvml:
    """One NVML session: initialised once, every call counted and error-mapped.

    ``lib`` is the ``pynvml`` module (default) or any object with the same function names, such
    as :class:`accel.plugins.nvidia.testing.FakeNVML`.  ``init``/``shutdown`` are balanced: NVML
    reference-counts them in C, and this session holds exactly one reference while open.
    """

    def __init__(self, lib: Any | None = None) -> None:
        self._lib: Any = lib if lib is not None else load_pynvml()
        self.calls: Counter[str] = Counter()
        self._initialised = False
        self._lock = threading.Lock()

    @property
    def library(self) -> Any:
        """The library object (the ``pynvml`` module or a fake)."""
        return self._lib

    @property
    def initialised(self) -> bool:
        return self._initialised

    def init(self) -> None:
        """``nvmlInit`` once; raises the mapped error (LibraryNotFound, DriverNotLoaded...)."""
        with self._lock:
            if not self._initialised:
                self.call("nvmlInit")
                self._initialised = True

    def shutdown(self) -> None:
        """Drop this session's reference; idempotent and silent (used from ``close``)."""
        with self._lock:
            if self._initialised:
                self._initialised = False
                # A driver that fails its shutdown leaves nothing for us to release.
                with contextlib.suppress(AccelError):
                    self.call("nvmlShutdown")

    def has(self, fn: str) -> bool:
        """Whether the binding defines the wrapper ``fn`` at all (an older binding may not)."""
        return callable(getattr(self._lib, fn, None))

    def call(self, fn: str, *args: Any, device_id: str | None = None, **kwargs: Any) -> Any:
        """Call the wrapper ``fn``; every failure comes out as an ``AccelError``."""
        self.calls[fn] += 1
        func = getattr(self._lib, fn, None)
        if not callable(func):
            raise DriverVersionError(
                f"the NVML binding has no {fn} (nvidia-ml-py too old)",
                vendor_code="nvidia.nvml:13",
                code="driver.function-not-found",
            )
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            raise map_error(exc, fn=fn, device_id=device_id) from exc

    def new(self, struct: str) -> Any:
        """A fresh instance of the binding's ctypes struct ``struct`` (for out-parameters)."""
        try:
            return getattr(self._lib, struct)()
        except AttributeError as exc:
            raise DriverVersionError(f"the NVML binding has no {struct}", code="driver.function-not-found") from exc

    def new_array(self, struct: str, n: int) -> Any:
        """A ctypes array of ``n`` binding structs ``struct``."""
        try:
            return (getattr(self._lib, struct) * n)()
        except AttributeError as exc:
            raise DriverVersionError(f"the NVML binding has no {struct}", code="driver.function-not-found") from exc

    def total_calls(self) -> int:
        return sum(self.calls.values())


#: nvmlValueType_t (NVML_VALUE_TYPE_DOUBLE ... UNSIGNED_SHORT) -> the union member that holds it.
VALUE_MEMBERS: Final = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
#: The same members as native struct formats (c_double, c_uint, c_ulong, c_ulonglong, c_longlong,
#: c_int, c_ushort: native sizes, as ctypes lays them out).
_VALUE_FORMATS: Final = tuple(struct.Struct(f) for f in ("d", "I", "L", "Q", "q", "i", "H"))
_U32: Final = struct.Struct("I")
_VALUE_CTYPES: Final[tuple[type[ctypes._SimpleCData[Any]], ...]] = (
    ctypes.c_double, ctypes.c_uint, ctypes.c_ulong, ctypes.c_ulonglong, ctypes.c_longlong, ctypes.c_int,
    ctypes.c_ushort)


def field_answers(values: Any) -> list[tuple[int, int | float | None]]:
    """``(nvmlReturn, value)`` of each ``nvmlFieldValue_t`` of a ``nvmlDeviceGetFieldValues``
    answer, in order; ``value`` is ``None`` unless the return is SUCCESS and the type is known.

    A ctypes array of the binding's struct (what nvidia-ml-py returns) is read from its bytes at
    the struct's own field offsets: one C-level unpack per field, where each attribute of the
    binding's struct is a Python-level ``__getattribute__`` call (about 0.5 us, four per value, 91
    values per GPU per snapshot).  Anything else is read attribute by attribute.
    """
    cls = getattr(values, "_type_", None)
    if isinstance(values, ctypes.Array) and cls is not None and _flat_layout(cls):
        size = ctypes.sizeof(cls)
        raw = bytes(values)
        ret_at, type_at, value_at = cls.nvmlReturn.offset, cls.valueType.offset, cls.value.offset
        out: list[tuple[int, int | float | None]] = []
        for base in range(0, size * len(values), size):
            ret = _U32.unpack_from(raw, base + ret_at)[0]
            if ret != C.SUCCESS:
                out.append((ret, None))
                continue
            vt = _U32.unpack_from(raw, base + type_at)[0]
            fmt = _VALUE_FORMATS[vt] if vt < len(_VALUE_FORMATS) else None
            out.append((ret, fmt.unpack_from(raw, base + value_at)[0] if fmt is not None else None))
        return out
    slow: list[tuple[int, int | float | None]] = []
    for v in values:
        ret = int(v.nvmlReturn)
        value: int | float | None = None
        if ret == C.SUCCESS:
            vt = int(v.valueType)
            value = getattr(v.value, VALUE_MEMBERS[vt]) if 0 <= vt < len(VALUE_MEMBERS) else None
        slow.append((ret, value))
    return slow


@functools.lru_cache(maxsize=8)
def _flat_layout(cls: Any) -> bool:
    """Whether ``cls`` is laid out as nvml.h's ``nvmlFieldValue_t`` (4-byte return and value type,
    an 8-byte value union), so that :func:`field_answers` can read its bytes."""
    try:
        return (cls.nvmlReturn.size == 4 and cls.valueType.size == 4 and cls.value.size == 8
                and all(ctypes.sizeof(t) == f.size for t, f in zip(_VALUE_CTYPES, _VALUE_FORMATS, strict=True)))
    except AttributeError:
        return False
