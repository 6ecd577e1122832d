"""Test facilities for the AMD plugin: faithful fakes of amdsmi, libamd_smi and amdgpu sysfs.

Nothing here is imported by ``import accel.plugins.amd``.  Three fakes, all driven by the same
data profile (:class:`FakeHost`, with named scenarios in :data:`SCENARIOS`):

* :func:`make_fake_amdsmi` - a module object with amdsmi's functions, exception hierarchy and
  enums, written from the reference (the real package does not import without the library);
* :class:`FakeAmdSmiLib` - ``libamd_smi.so`` at the ctypes boundary, for pyrsmi's ctypes mode;
* :func:`build_amdgpu_sysfs` - the amdgpu sysfs tree on top of :class:`accel.testing.FakeSysfs`.

:func:`install` puts a scenario in place for *real* pyrsmi code: the fake amdsmi in
``sys.modules`` (package mode), or an import that fails (``absent``) or prints and raises
``KeyError`` (``broken``), the fake library as ``rocml.rocm_lib`` (ctypes mode), and the
driver's ``initstate``; :meth:`Installation.restore` undoes all of it::

    with install(scenario("mi300x-8")) as inst:
        ...                          # pyrsmi.rocml.smi_initialize() now runs on the fakes

The AMD backend uses the same thing when opened with ``options={"scenario": name}``
(``accel ls --backend amd --option scenario=mi300x-8``): a test facility, not a feature.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Self

from ._fake_amdsmi import HEALTH_FUNCTIONS, STATUS, BrokenAmdSmiFinder, make_fake_amdsmi
from ._fake_lib import FakeAmdSmiLib
from ._fake_sysfs import build_amdgpu_sysfs, remove_gpu, remove_gpu_ras
from ._profiles import MI300X_BUS_IDS, SCENARIOS, FakeGpu, FakeHost, FakeProcess, mi300x_unique_id, scenario

__all__ = [
    "HEALTH_FUNCTIONS",
    "MI300X_BUS_IDS",
    "SCENARIOS",
    "STATUS",
    "FakeAmdSmiLib",
    "FakeGpu",
    "FakeHost",
    "FakeProcess",
    "Installation",
    "build_amdgpu_sysfs",
    "install",
    "make_fake_amdsmi",
    "mi300x_unique_id",
    "scenario",
]

_MISSING = object()
_ROCML_GLOBALS = (
    "rocm_lib",
    "_processor_handles",
    "_handle_initialized",
    "_using_amdsmi_package",
    "_rocm_lib_refcount",
    "_driver_initialized",
    "_find_lib_rocm",
)


def _fast_tmp() -> str | None:
    """A RAM-backed directory for the fake tree when there is one (hundreds of small files)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


class Installation:
    """A scenario put in place; :meth:`restore` (or leaving the ``with``) undoes it.

    ``amdsmi`` is the fake module (``None`` unless the scenario's amdsmi is ``present``),
    ``lib`` the fake library pyrsmi's ctypes mode sees (or ``None``), ``sysfs_root`` the fake
    tree when one was built (``build_sysfs=True``).
    """

    def __init__(self, host: FakeHost, *, build_sysfs: bool = False, sysfs_root: Path | None = None) -> None:
        self.host = host
        self.amdsmi: ModuleType | None = make_fake_amdsmi(host) if host.amdsmi == "present" else None
        self.lib: FakeAmdSmiLib | None = FakeAmdSmiLib(host) if host.ctypes_lib else None
        self._finder: BrokenAmdSmiFinder | None = None
        self._saved_module: Any = _MISSING
        self._saved_rocml: dict[str, Any] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.sysfs_root: Path | None = None
        self._active = False
        if build_sysfs or sysfs_root is not None:
            if sysfs_root is None:
                self._tmp = tempfile.TemporaryDirectory(prefix=f"accel-amd-{host.name}-", dir=_fast_tmp())
                sysfs_root = Path(self._tmp.name)
            build_amdgpu_sysfs(host, sysfs_root)
            self.sysfs_root = sysfs_root

    def apply(self) -> Self:
        if self._active:
            return self
        self._saved_module = sys.modules.get("amdsmi", _MISSING)
        if self.host.amdsmi == "present":
            sys.modules["amdsmi"] = self.amdsmi  # type: ignore[assignment]
        elif self.host.amdsmi == "absent":
            sys.modules["amdsmi"] = None  # type: ignore[assignment]
        else:
            sys.modules.pop("amdsmi", None)
            self._finder = BrokenAmdSmiFinder()
            sys.meta_path.insert(0, self._finder)
        try:
            from pyrsmi import rocml  # type: ignore[import-untyped]
        except ImportError:
            rocml = None
        if rocml is not None:
            self._saved_rocml = {k: getattr(rocml, k, _MISSING) for k in _ROCML_GLOBALS}
            self._saved_cache = dict(rocml._rocml_get_function_ptr_cache)
            rocml._rocml_get_function_ptr_cache.clear()
            rocml.rocm_lib = self.lib
            rocml._processor_handles = []
            rocml._handle_initialized = False
            rocml._using_amdsmi_package = False
            rocml._rocm_lib_refcount = 0
            live = self.host.driver_live
            rocml._driver_initialized = lambda: live
            rocml._find_lib_rocm = lambda: ""  # never the host's real libamd_smi.so
        self._active = True
        return self

    def restore(self) -> None:
        if not self._active:
            return
        self._active = False
        if self._finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self._finder)
            self._finder = None
        if self._saved_module is _MISSING:
            sys.modules.pop("amdsmi", None)
        else:
            sys.modules["amdsmi"] = self._saved_module
        if self._saved_rocml:
            from pyrsmi import rocml

            for k, v in self._saved_rocml.items():
                if v is _MISSING:
                    continue
                setattr(rocml, k, v)
            rocml._rocml_get_function_ptr_cache.clear()
            rocml._rocml_get_function_ptr_cache.update(self._saved_cache)
            self._saved_rocml = {}

    def cleanup(self) -> None:
        """Restore and delete the temporary sysfs tree, if this installation made one."""
        self.restore()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- faults (the conformance kit's FaultInjector goes through these) --------------------
    def gpu_index(self, bus_id: str) -> int:
        """The ``host.gpus`` index of the GPU at ``bus_id`` (IndexError if there is none)."""
        bus = bus_id.lower()
        for i, gpu in enumerate(self.host.gpus):
            if gpu.bus_id.lower() == bus:
                return i
        raise IndexError(f"no fake GPU at {bus_id}")

    def lose_gpu(self, index: int) -> None:
        """GPU ``index`` falls off the bus, in every fake at once.

        amdsmi calls on its handles raise ``AmdSmiLibraryException(AMDSMI_STATUS_NOT_FOUND)``,
        the fake ``libamd_smi`` answers ``NOT_FOUND`` to pyrsmi's ctypes calls (pyrsmi turns
        that into -1), and its DRM card, render node and KFD node leave the sysfs tree.
        """
        if not 0 <= index < len(self.host.gpus):
            raise IndexError(f"no fake GPU {index} (the host has {len(self.host.gpus)})")
        if self.amdsmi is not None:
            self.amdsmi._fake_state.lose_gpu(index)
        if self.lib is not None:
            self.lib.lose_gpu(index)
        if self.sysfs_root is not None:
            remove_gpu(self.host, self.sysfs_root, index)

    def make_health_unsupported(self, index: int) -> None:
        """GPU ``index`` cannot report health: RAS/ECC/bad-page/xGMI/throttle calls answer NOT_SUPPORTED.

        amdsmi raises ``AMDSMI_STATUS_NOT_SUPPORTED`` for :data:`HEALTH_FUNCTIONS` and the
        device's ``ras/`` directory leaves the sysfs tree (the driver creates none without RAS).
        """
        if not 0 <= index < len(self.host.gpus):
            raise IndexError(f"no fake GPU {index} (the host has {len(self.host.gpus)})")
        if self.amdsmi is not None:
            self.amdsmi._fake_state.make_health_unsupported(index)
        if self.sysfs_root is not None:
            remove_gpu_ras(self.host, self.sysfs_root, index)

    def __enter__(self) -> Self:
        return self.apply()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()


def install(host: FakeHost | str, *, build_sysfs: bool = False, sysfs_root: Path | None = None) -> Installation:
    """An :class:`Installation` of ``host`` (a FakeHost or a scenario name), already applied."""
    if isinstance(host, str):
        host = scenario(host)
    return Installation(host, build_sysfs=build_sysfs, sysfs_root=sysfs_root).apply()
