"""Boundary module for ``pyrsmi`` 1.x: the only place that imports it.

pyrsmi does not raise: it answers ``-1``, ``''``, ``[]`` or ``'N/A'`` and logs through the *root*
logger.  This module turns every sentinel into ``None`` (never into a number), keeps pyrsmi's
log records off the root logger's handlers (they are re-logged at DEBUG on
``accel.plugins.amd``), and maps the few things that do raise (``smi_initialize``:
``ROCMLError_LibraryNotFound``, ``RuntimeError`` when the driver is not live, the ``KeyError`` of
a broken ``amdsmi``) to :mod:`accel.errors`.

pyrsmi decides its mode inside ``smi_initialize`` by importing ``amdsmi`` itself.  The caller
says what that import must see (:class:`PyrsmiReader` ``amdsmi`` argument): a module (package
mode), or ``None`` to make the import fail cleanly with ``ImportError`` so pyrsmi takes its
ctypes path instead of re-raising the ``KeyError`` and printing again.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from accel.errors import AccelError, DriverError, LibraryNotFoundError

from ._readings import GpuReading, decode_bdf_int

__all__ = ["PyrsmiReader", "pyrsmi_version"]

_LOG = logging.getLogger("accel.plugins.amd")
_LAYER = "pyrsmi"
_LOCK = threading.RLock()
_KEEP = object()


def _rocml() -> ModuleType:
    from pyrsmi import rocml  # type: ignore[import-untyped]  # the one vendor import of this module

    module: ModuleType = rocml
    return module


def pyrsmi_version() -> str | None:
    try:
        from pyrsmi import __version__
    except ImportError:
        return None
    return str(__version__)


class _Divert(logging.Filter):
    """Drops pyrsmi's root-logger records after re-logging them at DEBUG on our logger."""

    def __init__(self, package_dir: str) -> None:
        super().__init__()
        self._dir = package_dir

    def filter(self, record: logging.LogRecord) -> bool:
        if record.pathname.startswith(self._dir):
            _LOG.debug("pyrsmi: %s", record.getMessage())
            return False
        return True


@contextlib.contextmanager
def _quiet(rocml: ModuleType, amdsmi: object) -> Iterator[None]:
    """Run pyrsmi with its root-logger output diverted and ``import amdsmi`` pinned."""
    with _LOCK:
        root = logging.getLogger()
        divert = _Divert(str(Path(rocml.__file__ or "").parent))
        root.addFilter(divert)
        saved = sys.modules.get("amdsmi", _KEEP)
        if amdsmi is not _KEEP:
            # None in sys.modules makes `import amdsmi` raise ImportError: pyrsmi's ctypes path.
            sys.modules["amdsmi"] = amdsmi  # type: ignore[assignment]
        try:
            yield
        finally:
            if amdsmi is not _KEEP:
                if saved is _KEEP:
                    sys.modules.pop("amdsmi", None)
                else:
                    sys.modules["amdsmi"] = saved  # type: ignore[assignment]
            root.removeFilter(divert)


def _num(value: Any) -> float | None:
    """pyrsmi's sentinels (-1, 'N/A', '', wrong types) -> None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value < 0:
        return None
    return float(value)


def _int(value: Any) -> int | None:
    num = _num(value)
    return int(num) if num is not None else None


class PyrsmiReader:
    """One pyrsmi session: ``open()``, ``count()``, ``read(i)``, ``close()``.

    ``amdsmi`` is what pyrsmi's internal ``import amdsmi`` sees: a module object (the real
    package or a fake) for package mode, ``None`` to force ctypes mode.
    """

    def __init__(self, amdsmi: ModuleType | None) -> None:
        self._amdsmi = amdsmi
        self._open = False
        self._rocml: ModuleType | None = None
        #: pyrsmi calls made so far (cumulative).
        self.calls = 0

    @property
    def mode(self) -> str:
        """``package`` (pyrsmi on the amdsmi package) or ``ctypes`` (pyrsmi on libamd_smi.so)."""
        if self._rocml is not None and getattr(self._rocml, "_using_amdsmi_package", False):
            return "package"
        return "ctypes"

    def open(self) -> None:
        try:
            rocml = _rocml()
        except ImportError as exc:
            raise LibraryNotFoundError(f"pyrsmi is not installed ({exc})") from exc
        self._rocml = rocml
        with _quiet(rocml, self._amdsmi):
            try:
                rocml.smi_initialize()
            except rocml.ROCMLError_LibraryNotFound as exc:
                raise LibraryNotFoundError(f"pyrsmi: {exc}", vendor_code="pyrsmi:LibraryNotFound") from exc
            except RuntimeError as exc:
                text = str(exc)
                code = "driver.not-loaded" if "not initialized" in text or "not loaded" in text else None
                raise DriverError(f"pyrsmi: {text}", vendor_code="pyrsmi:RuntimeError", code=code) from exc
            except KeyError as exc:
                raise LibraryNotFoundError(f"pyrsmi: amdsmi could not load its library ({exc})") from exc
            except Exception as exc:  # the boundary: nothing pyrsmi raises gets out unmapped
                raise DriverError(f"pyrsmi: smi_initialize failed: {type(exc).__name__}: {exc}") from exc
        self._open = True

    def close(self) -> None:
        # smi_shutdown without a matching init drives pyrsmi's refcount negative: only after open.
        if not self._open or self._rocml is None:
            return
        self._open = False
        with _quiet(self._rocml, self._amdsmi), contextlib.suppress(Exception):
            self._rocml.smi_shutdown()

    def _do(self, fn: str, *args: Any) -> Any:
        rocml = self._rocml
        if rocml is None or not self._open:
            raise DriverError("pyrsmi is not open")
        func = getattr(rocml, fn, None)
        self.calls += 1
        if func is None:
            return None
        with _quiet(rocml, self._amdsmi):
            try:
                return func(*args)
            except Exception as exc:  # noqa: BLE001 - rsmi-only calls raise AttributeError in package mode
                _LOG.debug("pyrsmi %s%r raised %s: %s", fn, args, type(exc).__name__, exc)
                return None

    def count(self) -> int:
        return _int(self._do("smi_get_device_count")) or 0

    def read(self, index: int) -> GpuReading:
        """What pyrsmi reports for device ``index``: names, ids, memory, utilisation, power."""
        r = GpuReading(index=index)
        name = self._do("smi_get_device_name", index)
        r.name = name.strip() if isinstance(name, str) and name.strip() else None
        dev_id = _int(self._do("smi_get_device_id", index))
        r.pci_device_id = f"{dev_id:04x}" if dev_id is not None and dev_id <= 0xFFFF else None
        rev = _int(self._do("smi_get_device_revision", index))
        r.pci_revision = f"0x{rev:02x}" if rev is not None and rev <= 0xFF else None
        bdf = _int(self._do("smi_get_device_pci_id", index))
        r.bus_id = decode_bdf_int(bdf) if bdf is not None else None
        uuid = self._do("smi_get_device_uuid", index, "raw")
        if isinstance(uuid, str) and uuid.strip():
            text = uuid.strip()
            # pyrsmi falls back to a BDF-derived pseudo-UUID when amdsmi has none: not an identity.
            synthesized = bdf is not None and text == f"{bdf:032x}"
            r.uuid = None if synthesized else text
        total = _int(self._do("smi_get_device_memory_total", index, "VRAM"))
        used = _int(self._do("smi_get_device_memory_used", index, "VRAM"))
        r.memory_total_bytes = total
        r.memory_used_bytes = used if used is not None and (total is None or used <= total) else None
        util = _num(self._do("smi_get_device_utilization", index))
        r.utilization_ratio = min(util, 100.0) / 100.0 if util is not None else None
        mbusy = _num(self._do("smi_get_device_memory_busy", index))
        r.memory_utilization_ratio = min(mbusy, 100.0) / 100.0 if mbusy is not None else None
        power = _num(self._do("smi_get_device_average_power", index))
        r.power_watts = power if power else None
        pcie = self._do("smi_get_device_pcie_bandwidth", index)
        static = getattr(pcie, "pcie_static", None)
        metric = getattr(pcie, "pcie_metric", None)
        if static is not None:
            r.pcie_width_max = _int(getattr(static, "max_pcie_width", None)) or None
            r.pcie_gen_max = _int(getattr(static, "pcie_interface_version", None)) or None
        if metric is not None:
            r.pcie_width_current = _int(getattr(metric, "pcie_width", None)) or None
        for f in ("name", "pci_device_id", "bus_id", "uuid", "memory_total_bytes", "memory_used_bytes",
                  "utilization_ratio", "power_watts"):
            if getattr(r, f) is not None:
                r.sources[f] = _LAYER
        return r


def read_all(reader: PyrsmiReader) -> list[GpuReading]:
    """Every device pyrsmi enumerates; an AccelError on one device never hides the others."""
    out = []
    for i in range(reader.count()):
        try:
            out.append(reader.read(i))
        except AccelError as exc:
            _LOG.debug("pyrsmi device %d unreadable: %s", i, exc)
    return out
