"""A faithful fake of the ``pynvml`` module (nvidia-ml-py), driven by a :class:`Scenario`.

The fake has the same function names and return shapes as the ``pynvml`` wrappers and reuses the
binding's real error classes and ctypes structs, so ``except pynvml.NVMLError_NotSupported`` in
production code catches what the fake raises.  Faithful quirks:

* every call before ``nvmlInit`` (or after the balancing ``nvmlShutdown``) raises
  ``NVMLError_Uninitialized``; init/shutdown are reference-counted and extra shutdowns succeed;
* device handles are real ``c_nvmlDevice_t`` pointers, a new (unhashable, identity-compared)
  object on every lookup;
* ``nvmlDeviceGetMemoryInfo(h)`` (v1) reports ``used`` including the reserved memory, as R510+
  drivers do; ``version=nvmlMemory_v2`` gives ``reserved`` separately;
* NOT_SUPPORTED per device profile, FunctionNotFound for symbols an old driver lacks,
  ``NVMLLibraryMismatchError`` from the unversioned process wrappers, NoPermission, GpuIsLost
  (``lose_gpu``) including from ``GetHandleByUUID`` for *any* GPU while one is lost;
* ``nvmlEventSetWait`` pops scripted events and raises ``NVMLError_Timeout`` without sleeping;
* ``nvmlDeviceGetFieldValues`` reports per-field failures in ``nvmlReturn`` and never raises
  for them; ``nvmlDeviceGetMigDeviceHandleByIndex`` raises NotFound for empty (sparse) slots;
* ``nvmlDeviceIsMigDeviceHandle`` returns a ``c_uint``; ``nvmlDeviceGetP2PStatus`` rejects a
  non-int index as ctypes would (catching the ``NVML_P2P_CAPS_INDEX_READ == (0,)`` bug);
* out-parameters the real wrapper forwards to C unchanged (``nvmlDeviceGetGpuFabricInfoV``,
  ``nvmlDeviceGetGpuFabricInfo``, ``nvmlDeviceGetGpuInstancePossiblePlacements``) are checked
  as the C function sees them: a struct by value or a versioned struct without a known
  ``.version`` is ARGUMENT_VERSION_MISMATCH, NULL or a too-small buffer INVALID_ARGUMENT, an
  object ctypes cannot convert ``ctypes.ArgumentError``; wrapper-level ``version=`` arguments
  (``GetMemoryInfo``, ``GetTemperatureV``, ``GetGpuInstanceProfileInfo``) answer as the wrapper.

:attr:`FakeNVML.calls` counts calls per function: the cost benchmark reads it.

The functions are written in one module per job (``_fake_core``: the calling convention;
``_fake_device``, ``_fake_fields``, ``_fake_topology``, ``_fake_mig``, ``_fake_procs``,
``_fake_events``: the pynvml surface) and gathered here on one class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._fake_device import DeviceCalls
from ._fake_events import EventCalls
from ._fake_fields import CounterCalls
from ._fake_mig import MigCalls, MigState
from ._fake_procs import ProcessCalls
from ._fake_topology import TopologyCalls
from ._profiles import Scenario

__all__ = ["FakeNVML"]

#: Pure-Python helpers of the binding (no driver call): :meth:`FakeNVML.install` leaves them alone.
_PURE_HELPERS = frozenset({"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"})


class FakeNVML(DeviceCalls, CounterCalls, TopologyCalls, MigCalls, ProcessCalls, EventCalls):
    """A module-like fake of ``pynvml`` for one :class:`Scenario` (or scenario name).

    Pass it as the library object (``Nvml(lib=fake)``) or :meth:`install` it over the real
    module's functions.  Names the fake does not define fall through to the real module for
    constants, structs and error classes; an ``nvml*`` function it does not implement raises
    ``NVMLError_FunctionNotFound``, as a driver without the symbol would.
    """

    def __init__(self, scenario: Scenario | str) -> None:
        super().__init__(scenario)
        self._migs = MigState(self.scenario, self._addr)

    # -- module-like behaviour ----------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name.startswith("nvml") and callable(getattr(self.pynvml, name, None)) and name[4:5].isupper():
            def missing(*_args: Any, **_kwargs: Any) -> Any:
                self.calls[name] += 1
                raise self.pynvml.NVMLError_FunctionNotFound()
            return missing
        return getattr(self.pynvml, name)

    def _functions(self) -> dict[str, Callable[..., Any]]:
        return {n: getattr(self, n) for n in dir(type(self)) if n.startswith("nvml") and n[4:5].isupper()}

    def install(self) -> FakeNVML:
        """Replace every ``nvml*`` function of the real ``pynvml`` module; :meth:`uninstall` undoes it."""
        if self._installed:
            return self
        mine = self._functions()
        for name in dir(self.pynvml):
            if not (name.startswith("nvml") and name[4:5].isupper()) or name in _PURE_HELPERS:
                continue
            orig = getattr(self.pynvml, name)
            if not callable(orig) or isinstance(orig, type):
                continue
            self._installed[name] = orig
            setattr(self.pynvml, name, mine.get(name) or self.__getattr__(name))
        return self

    def uninstall(self) -> None:
        for name, orig in self._installed.items():
            setattr(self.pynvml, name, orig)
        self._installed.clear()

    @contextmanager
    def installed(self) -> Iterator[FakeNVML]:
        self.install()
        try:
            yield self
        finally:
            self.uninstall()

    # -- fault controls -----------------------------------------------------------------------
    def lose_gpu(self, index: int) -> None:
        """GPU ``index`` falls off the bus now: GpuIsLost from everything that touches it."""
        self.scenario.gpus[index].lost = True

    def make_health_unsupported(self, index: int) -> None:
        """Health queries of GPU ``index`` answer NOT_SUPPORTED from now on (fields included)."""
        gpu = self.scenario.gpus[index]
        gpu.not_supported |= {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
                              "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature", "nvmlDeviceGetRemappedRows",
                              "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages",
                              "nvmlDeviceGetRetiredPagesPendingStatus"}
        for fid in (3, 4, 5, 6, 29, 30, 31, 38, 52, 59, 142, 143, 144, 145, 161, 162, 163, 165, 230):
            gpu.errors[f"field:{fid}"] = 3

    def fail_all(self, code: int | None = None, exc: Callable[[], BaseException] | None = None) -> None:
        """Make every call raise ``NVMLError(code)`` (or ``exc()``); ``fail_all()`` clears it."""
        if exc is not None:
            self._fail = exc
        elif code is not None:
            self._fail = lambda: self.pynvml.NVMLError(code)
        else:
            self._fail = None

    def push_event(self, gpu: int, xid: int, *, gi_id: int = 0xFFFFFFFF, ci_id: int = 0xFFFFFFFF) -> None:
        from ._profiles import EventSpec

        self._events.append(EventSpec(gpu=gpu, xid=xid, gi_id=gi_id, ci_id=ci_id))

    def reset_calls(self) -> None:
        self.calls.clear()

    @property
    def refcount(self) -> int:
        return self._refcount



# pynvml is a flat module: each nvml* function is one name in one namespace.  The fake keeps that
# shape on its class, so ``vars(FakeNVML)`` is its whole surface as ``vars(pynvml)`` is the
# binding's (the conventions test and :meth:`FakeNVML.install` read it), though the functions are
# written in the ``_fake_*`` module of their job.
for _base in FakeNVML.__mro__[1:]:
    for _name, _fn in vars(_base).items():
        if _name.startswith("nvml") and _name[4:5].isupper() and _name not in vars(FakeNVML):
            setattr(FakeNVML, _name, _fn)
del _base, _name, _fn
