"""Count the NVML calls of gpustat, nvitop and the accel backend on the same fake NVML.

Every tool runs in this process against :class:`accel.plugins.nvidia.testing.FakeNVML` installed
over the ``pynvml`` module (the binding all three use), one fresh fake of the same scenario per
run, so the fake's per-function counters are the measurement.  A count is one call of a
``pynvml``-level NVML function (``nvmlDeviceGetName``...), the unit :attr:`FakeNVML.calls` and the
backend's own counter use; the binding's process-list wrappers issue two C calls each for every
tool alike.

Two tools reach past the module functions, and the harness reproduces what they do:

* gpustat (``gpustat.nvml``) wraps ``pynvml.nvmlDeviceGetMemoryInfo`` (tries ``version=v2``, then
  v1 on FunctionNotFound) and falls back from the ``_v3`` to the ``_v2`` process symbols inside
  ``_nvmlGetFunctionPointer``.  Its memory wrapper is put back in front of the fake, and the
  process wrappers resolve to the newest process function the scenario's driver has.
* nvitop (``nvitop.api.libnvml``) copies the ``pynvml`` functions into its own module at import
  (``from pynvml import *``) and reimplements a few over raw C function pointers (processes,
  memory, temperature, field values, driver model), choosing a versioned symbol once by probing.
  :func:`patched_namespace` replaces every ``nvml*`` function of that module with the fake's,
  resolving those reimplementations to the symbol nvitop's probe would pick on that driver
  (``_v3``/``_v2``/unversioned processes, memory v2 or v1, ``TemperatureV`` or ``Temperature``).

Fields compared (physical GPUs; MIG instances are only in accel's column):

* **common**: name, UUID, memory total and used, GPU utilisation, GPU temperature, power draw,
  power limit, fan speed, processes (pid, used memory) -- the intersection of what gpustat shows,
  what nvitop's ``Device`` API gives and what accel reports.
* **all**: gpustat ``GPUStatCollection.new_query()`` (the common set plus encoder/decoder
  utilisation, index, driver version); nvitop ``take_snapshots(devices, gpu_processes=True)``
  (``Device.SNAPSHOT_KEYS``: clocks, max clocks, PCIe throughput, display, driver model,
  persistence, P-state, volatile uncorrected ECC, compute mode, CUDA capability, MIG mode, plus
  per-process utilisation); accel ``inventory()`` + ``telemetry()`` (everything in README.md).

nvitop's common column is measured directly (its API reads one field at a time, batched by
``Device.oneshot()``); gpustat's API and accel's read everything in one call, so their common
column sums the calls of the functions that serve a common field (:data:`COMMON_FUNCTIONS`, plus
the session calls: init, count, handles, shutdown), and the rest is the difference.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from accel.plugin import BackendConfig
from accel.plugins.nvidia import PLUGIN
from accel.plugins.nvidia.testing import FakeNVML

__all__ = [
    "COMMON_FUNCTIONS",
    "SESSION_FUNCTIONS",
    "available_tools",
    "common_calls",
    "measure_accel",
    "measure_gpustat",
    "measure_nvitop",
    "measure_scenario",
    "patched_namespace",
]

#: Calls that open, enumerate and close an NVML session (every tool needs them for any field).
SESSION_FUNCTIONS = frozenset({
    "nvmlInit", "nvmlInitWithFlags", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
})
#: Function (version suffix stripped) -> the common field it serves.  accel reads power draw
#: through one nvmlDeviceGetFieldValues per GPU (which also carries ECC, NVLink, energy...), so
#: that call counts as common.
COMMON_FUNCTIONS: dict[str, str] = {
    "nvmlDeviceGetName": "name",
    "nvmlDeviceGetUUID": "uuid",
    "nvmlDeviceGetMemoryInfo": "memory total/used",
    "nvmlDeviceGetUtilizationRates": "GPU utilisation",
    "nvmlDeviceGetTemperature": "temperature",
    "nvmlDeviceGetTemperatureV": "temperature",
    "nvmlDeviceGetPowerUsage": "power draw",
    "nvmlDeviceGetFieldValues": "power draw",
    "nvmlDeviceGetEnforcedPowerLimit": "power limit",
    "nvmlDeviceGetPowerManagementLimit": "power limit",
    "nvmlDeviceGetFanSpeed": "fan speed",
    "nvmlDeviceGetComputeRunningProcesses": "processes",
    "nvmlDeviceGetGraphicsRunningProcesses": "processes",
}
_VERSION = re.compile(r"_v\d+$")
_NVML_NAME = re.compile(r"^nvml[A-Z]")
#: ``pynvml`` helpers that are pure Python (no driver call): never replaced in a tool's namespace.
_PURE_HELPERS = frozenset({"nvmlExceptionClass", "nvmlStructToFriendlyObject", "nvmlFriendlyObjectToStruct"})


def common_calls(calls: Counter[str]) -> int:
    """Calls in ``calls`` that serve a common field or the session (see module docstring)."""
    return sum(n for fn, n in calls.items()
               if fn in SESSION_FUNCTIONS or _VERSION.sub("", fn) in COMMON_FUNCTIONS)


def available_tools() -> dict[str, str | None]:
    """``{"gpustat": version or None, "nvitop": version or None}`` (None: not importable)."""
    out: dict[str, str | None] = {}
    for name in ("gpustat", "nvitop"):
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 -- any import failure means "not measurable here"
            out[name] = None
        else:
            out[name] = str(getattr(mod, "__version__", "?"))
    return out


def _has(fake: FakeNVML, fn: str) -> bool:
    """Whether the scenario's driver exports ``fn`` (the fake implements it and it is not missing)."""
    return callable(getattr(type(fake), fn, None)) and fn not in fake.scenario.missing


def _newest(fake: FakeNVML, base: str) -> Callable[..., Any]:
    """The fake's ``base_v3``, ``base_v2`` or ``base``: the newest symbol the driver has."""
    for fn in (f"{base}_v3", f"{base}_v2"):
        if _has(fake, fn):
            return getattr(fake, fn)  # type: ignore[no-any-return]
    return getattr(fake, base)  # type: ignore[no-any-return]


@contextlib.contextmanager
def patched_namespace(module: types.ModuleType, fake: FakeNVML, keep: frozenset[str] = frozenset(),
                      resolve: dict[str, Callable[..., Any]] | None = None) -> Iterator[int]:
    """Point every ``nvml*`` function of ``module`` (a tool's copy of the binding) at ``fake``.

    Names in ``keep`` stay (the tool's own init/shutdown/query helpers, which call ``pynvml``
    itself and so reach the installed fake); ``resolve`` overrides the replacement per name (a
    tool's reimplementation over raw symbols, mapped to the symbol the tool would pick).  Yields
    how many names were replaced and restores them all on exit.
    """
    resolve = resolve or {}
    saved: dict[str, Any] = {}
    for name, value in list(vars(module).items()):
        if not _NVML_NAME.match(name) or name in keep or name in _PURE_HELPERS:
            continue
        if not isinstance(value, types.FunctionType):
            continue
        saved[name] = value
        setattr(module, name, resolve.get(name) or getattr(fake, name))
    try:
        yield len(saved)
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _delta(fake: FakeNVML) -> Counter[str]:
    calls = Counter(fake.calls)
    fake.reset_calls()
    return calls


def _result(cold: Counter[str], warm: Counter[str], common_cold: int, common_warm: int,
            fake: FakeNVML) -> dict[str, Any]:
    undeclared = sorted(fn for fn in cold + warm
                        if not callable(getattr(type(fake), fn, None)) and fn not in fake.scenario.missing)
    return {"all_cold": sum(cold.values()), "all_warm": sum(warm.values()), "common_cold": common_cold,
            "common_warm": common_warm, "calls_cold": dict(cold), "calls_warm": dict(warm),
            "fake_lacks": undeclared}


def measure_accel(scenario: str) -> dict[str, Any]:
    """The accel backend over the real binding path, the fake installed under it.

    cold: ``PLUGIN.open`` + first ``inventory()`` + ``telemetry()``; warm: the next pair (identity,
    wiring and topology are cached by then); ``close`` is not counted.
    """
    fake = FakeNVML(scenario)
    with fake.installed():
        backend = PLUGIN.open(BackendConfig())
        try:
            inv = backend.inventory()
            backend.telemetry()
            cold = _delta(fake)
            backend.inventory()
            backend.telemetry()
            warm = _delta(fake)
            own = backend.vendor_call_count
        finally:
            backend.close()
    row = _result(cold, warm, common_calls(cold), common_calls(warm), fake)
    row["gpus"] = len(inv.devices)
    row["backend_counter"] = own
    return row


def measure_gpustat(scenario: str) -> dict[str, Any]:
    """``GPUStatCollection.new_query()`` twice (it initialises and shuts NVML down every query)."""
    import pynvml
    from gpustat import core, nvml  # type: ignore[import-untyped]

    fake = FakeNVML(scenario)
    patch = nvml.pynvml_monkeypatch
    saved = (nvml._original_nvmlDeviceGetMemoryInfo, patch.has_memoryinfo_v2)
    with fake.installed():
        # gpustat's own wrapper in front of the fake's memory function, as after its import.
        nvml._original_nvmlDeviceGetMemoryInfo = fake.nvmlDeviceGetMemoryInfo
        patch.has_memoryinfo_v2 = _has(fake, "nvmlDeviceGetMemoryInfo_v2")  # its dlsym probe
        pynvml.nvmlDeviceGetMemoryInfo = patch.nvmlDeviceGetMemoryInfo
        # pynvml's unversioned process wrappers call the _v3 symbol; gpustat's patched
        # _nvmlGetFunctionPointer hands out _v2 when _v3 is missing.
        pynvml.nvmlDeviceGetComputeRunningProcesses = _newest(fake, "nvmlDeviceGetComputeRunningProcesses")
        pynvml.nvmlDeviceGetGraphicsRunningProcesses = _newest(fake, "nvmlDeviceGetGraphicsRunningProcesses")
        try:
            stats = core.GPUStatCollection.new_query()
            cold = _delta(fake)
            core.GPUStatCollection.new_query()
            warm = _delta(fake)
        finally:
            nvml._original_nvmlDeviceGetMemoryInfo, patch.has_memoryinfo_v2 = saved
    row = _result(cold, warm, common_calls(cold), common_calls(warm), fake)
    row["gpus"] = len(stats.gpus)
    row["memory_total_mib"] = [g.memory_total for g in stats.gpus]
    return row


def _nvitop_resolve(fake: FakeNVML) -> dict[str, Callable[..., Any]]:
    """nvitop's reimplemented wrappers, mapped to the symbol its one-time probe picks."""
    import pynvml

    def memory(handle: Any) -> Any:
        if _has(fake, "nvmlDeviceGetMemoryInfo_v2"):
            return fake.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        return fake.nvmlDeviceGetMemoryInfo(handle)

    def temperature(handle: Any, sensor: int) -> Any:
        if _has(fake, "nvmlDeviceGetTemperatureV"):
            return fake.nvmlDeviceGetTemperatureV(handle, sensor)
        return fake.nvmlDeviceGetTemperature(handle, sensor)

    return {
        "nvmlDeviceGetComputeRunningProcesses": _newest(fake, "nvmlDeviceGetComputeRunningProcesses"),
        "nvmlDeviceGetGraphicsRunningProcesses": _newest(fake, "nvmlDeviceGetGraphicsRunningProcesses"),
        "nvmlDeviceGetMemoryInfo": memory,
        "nvmlDeviceGetTemperature": temperature,
    }


def _nvitop_common(devices: list[Any]) -> None:
    for dev in devices:
        with dev.oneshot():
            dev.name(), dev.uuid(), dev.memory_total(), dev.memory_used(), dev.gpu_utilization()
            dev.temperature(), dev.power_usage(), dev.power_limit(), dev.fan_speed(), dev.processes()


def measure_nvitop(scenario: str) -> dict[str, Any]:
    """nvitop's ``Device`` API: common fields under ``oneshot()``, and ``take_snapshots``.

    cold: ``Device.all()`` (lazy ``nvmlInit``, count, handles) + the first read; warm: the same
    read again on the same ``Device`` objects (what its monitor does every refresh).  nvitop keeps
    NVML initialised until exit; the harness shuts it down after each run (not counted).
    """
    import nvitop  # type: ignore[import-untyped]
    from nvitop.api import libnvml  # type: ignore[import-untyped]

    log: logging.Logger = libnvml.LOGGER
    keep = frozenset({"nvmlInit", "nvmlInitWithFlags", "nvmlShutdown", "nvmlQuery", "nvmlQueryFieldValues",
                      "nvmlCheckReturn"})
    counts: dict[str, Counter[str]] = {}
    gpus = 0
    for mode in ("common", "all"):
        fake = FakeNVML(scenario)
        previous = log.disabled
        # nvitop logs a traceback for every FunctionNotFound (an old driver); the counts say it all.
        log.disabled = True
        try:
            with fake.installed(), patched_namespace(libnvml, fake, keep, _nvitop_resolve(fake)):
                try:
                    devices = nvitop.Device.all()
                    gpus = len(devices)
                    for phase in ("cold", "warm"):
                        if mode == "common":
                            _nvitop_common(devices)
                        else:
                            nvitop.take_snapshots(devices, gpu_processes=True)
                        counts[f"{mode}_{phase}"] = _delta(fake)
                finally:
                    with contextlib.suppress(Exception):
                        libnvml.nvmlShutdown()
        finally:
            log.disabled = previous
    row = _result(counts["all_cold"], counts["all_warm"], sum(counts["common_cold"].values()),
                  sum(counts["common_warm"].values()), fake)
    row["gpus"] = gpus
    row["common_calls_cold"] = dict(counts["common_cold"])
    return row


def measure_scenario(scenario: str, tools: dict[str, str | None] | None = None) -> dict[str, Any]:
    """One row: accel and every installed tool on fresh fakes of ``scenario``."""
    tools = available_tools() if tools is None else tools
    row: dict[str, Any] = {"scenario": scenario, "accel": measure_accel(scenario)}
    if tools.get("gpustat"):
        row["gpustat"] = measure_gpustat(scenario)
    if tools.get("nvitop"):
        row["nvitop"] = measure_nvitop(scenario)
    return row
