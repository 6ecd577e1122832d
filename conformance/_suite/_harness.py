"""The per-suite-class harness: the plugin, its config, the backends opened, the shared snapshot."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from accel.errors import ConfigError
from accel.model import FAST_LINKS, DistanceLevel, HostInventory, Operational
from accel.plugin import (
    ENTRY_POINT_GROUP,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    ProbeResult,
    SupportsEvents,
    SupportsPartitions,
    SupportsProcesses,
    negotiate,
    registered,
)

from .._hooks import Fault, FaultInjector
from .._isolation import ImportReport, import_in_child
from ._helpers import _T, _TELEMETRY_FIELDS, _describe, _device_ids, _empty

if TYPE_CHECKING:
    from ._base import SuiteBase

__all__ = ["_Harness"]


class _Harness:
    """Per-suite-class state: the plugin, its config, the backends opened and a shared snapshot."""

    def __init__(self, suite: type[SuiteBase], tmp: Path, key: str) -> None:
        self.suite = suite
        self.tmp = tmp
        self.key = key
        self.name = suite.backend or "<unnamed>"
        self._opened: list[Backend] = []
        self._shared: Backend | None = None
        self._inventory: HostInventory | None = None
        self._inventory_error: BaseException | None = None
        self._isolation: ImportReport | RuntimeError | None = None
        self._lock = threading.Lock()
        self.load_error: str | None = None
        self.entry_point: tuple[str, str] | None = None
        self.plugin: BackendPlugin | None = None
        try:
            if suite._accel_adopt_error:
                raise ConfigError(suite._accel_adopt_error)
            self.plugin = self._load_plugin()
            self.config = suite.backend_config(tmp)
        except Exception as exc:  # noqa: BLE001 - reported on every row, not as a collection crash
            self.load_error = f"cannot load backend {self.name!r}: {_describe(exc)}"
            self.config = BackendConfig()

    # -- loading ---------------------------------------------------------------------------
    def _load_plugin(self) -> BackendPlugin:
        if self.suite.plugin is not None:
            return self.suite.plugin
        if not self.suite.backend:
            raise LookupError(f"{self.suite.__name__} sets neither 'backend' nor 'plugin'")
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == self.suite.backend:
                module, _, attr = ep.value.partition(":")
                self.entry_point = (module.strip(), attr.strip())
                return self._as_plugin(ep.load())
        factory = registered().get(self.suite.backend)
        if factory is not None:
            return self._as_plugin(factory())
        names = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)} | set(registered()))
        raise LookupError(f"no {ENTRY_POINT_GROUP!r} entry point named {self.suite.backend!r}; installed: {names}")

    @staticmethod
    def _as_plugin(obj: object) -> BackendPlugin:
        if isinstance(obj, BackendPlugin):
            return obj
        if isinstance(obj, type) or callable(obj):
            made = obj()
            if isinstance(made, BackendPlugin):
                return made
        raise TypeError(f"the entry point names {obj!r}, not an accel.plugin.BackendPlugin")

    def require_plugin(self) -> BackendPlugin:
        if self.plugin is None:
            pytest.fail(self.load_error or "backend not loaded", pytrace=False)
        return self.plugin

    # -- backends --------------------------------------------------------------------------
    def open(self) -> Backend:
        """A fresh backend, closed at the end of the class."""
        plugin = self.require_plugin()
        try:
            backend = plugin.open(self.config)
        except Exception as exc:  # noqa: BLE001 - turned into an actionable failure
            pytest.fail(f"{self.name}.open(config) raised {_describe(exc)}", pytrace=False)
        with self._lock:
            self._opened.append(backend)
        return backend

    @property
    def backend(self) -> Backend:
        """One backend shared by the read-only rows."""
        if self._shared is None:
            self._shared = self.open()
        return self._shared

    @property
    def inventory(self) -> HostInventory:
        """The shared backend's first snapshot (a failure fails every row that needs it)."""
        if self._inventory is None and self._inventory_error is None:
            try:
                self._inventory = self.backend.inventory()
            except Exception as exc:  # noqa: BLE001
                self._inventory_error = exc
        if self._inventory is None:
            pytest.fail(f"inventory() raised {_describe(self._inventory_error or RuntimeError())}",
                        pytrace=False)
        return self._inventory

    def call(self, what: str, fn: Callable[[], _T]) -> _T:
        """Run one backend call; any exception becomes a failure naming the call."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{what} raised {_describe(exc)}", pytrace=False)

    def probe(self, config: BackendConfig | None = None) -> ProbeResult:
        plugin = self.require_plugin()
        result = self.call("probe()", lambda: plugin.probe(config or self.config))
        if not isinstance(result, ProbeResult):
            pytest.fail(f"probe() returned {type(result).__name__}, not accel.plugin.ProbeResult", pytrace=False)
        return result

    def isolation(self) -> ImportReport:
        """The fresh-interpreter import report (computed once per class)."""
        if self._isolation is None:
            module, attr = self._isolation_target()
            try:
                self._isolation = import_in_child(module, attr)
            except RuntimeError as exc:
                self._isolation = exc
        if isinstance(self._isolation, RuntimeError):
            pytest.fail(str(self._isolation), pytrace=False)
        return self._isolation

    def _isolation_target(self) -> tuple[str, str]:
        if self.entry_point is not None:
            return self.entry_point
        plugin = self.require_plugin()
        module = type(plugin).__module__
        if module == "__main__":
            pytest.skip("the plugin object is defined in __main__; a fresh interpreter cannot import it")
        mod = __import__("sys").modules.get(module)
        for name, value in vars(mod).items() if mod is not None else ():
            if value is plugin:
                return module, name
        return module, type(plugin).__qualname__

    def lose_device(self, backend: Backend, device_id: str) -> bool:
        hook = getattr(self.suite, "lose_device", None)
        if hook is None and not isinstance(backend, FaultInjector):
            # Convention of simulators and fakes: a backend method lose_device(device_id).
            method = getattr(backend, "lose_device", None)
            if callable(method):
                method(device_id)
                return True
        return self._inject(hook, Fault.DEVICE_LOST, backend, device_id)

    def make_unreadable(self, backend: Backend, device_id: str) -> bool:
        hook = getattr(self.suite, "make_health_unreadable", None)
        return self._inject(hook, Fault.HEALTH_NOT_SUPPORTED, backend, device_id)

    def faulted(self, fault: Fault) -> tuple[Backend, list[str], str] | None:
        """A backend whose first device is under ``fault``: (backend, ids before, target id).

        Tries the runtime hooks on a fresh backend first (suite function, FaultInjector, a
        backend ``lose_device`` method), then the suite's ``faulted_config`` (a config opened
        with the fault already in place: a simulator option, a recorded faulty scenario).
        ``None`` when the suite has no way to inject it.
        """
        backend = self.open()
        inv = self.call("inventory()", backend.inventory)
        if not inv.devices:
            pytest.skip("no devices to inject a fault into")
        all_ids = _device_ids(inv)
        # Only devices that are clean before the injection (online and monitored) take part: one
        # that a faulty scenario already lost or left unreadable would confound the fault under test.
        clean = [d.id for d in inv.devices if d.health.operational is Operational.ONLINE and d.health.monitored]
        if not clean:
            # Every device is already lost or unreadable (a tool view without health columns):
            # the fault under test could not be told apart from what is already there.
            pytest.skip("no device is online with readable health before the injection; nothing to compare")
        target = clean[0]
        ids = [target, *[i for i in clean if i != target]]
        position = all_ids.index(target) if target in all_ids else 0
        inject = self.lose_device if fault is Fault.DEVICE_LOST else self.make_unreadable
        if inject(backend, target):
            return backend, ids, target
        config = self.suite.faulted_config(self.tmp / f"fault-{fault.value}", fault, position)
        if config is None:
            return None
        plugin = self.require_plugin()
        try:
            faulty = plugin.open(config)
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"open(faulted_config({fault.value!r})) raised {_describe(exc)}", pytrace=False)
        with self._lock:
            self._opened.append(faulty)
        return faulty, ids, target

    @staticmethod
    def _inject(hook: object, fault: Fault, backend: Backend, device_id: str) -> bool:
        if isinstance(hook, staticmethod):
            hook = hook.__func__
        if callable(hook):
            hook(backend, device_id)
            return True
        if isinstance(backend, FaultInjector):
            backend.inject_fault(fault, device_id)
            return True
        return False

    # -- teardown --------------------------------------------------------------------------
    def close_all(self) -> None:
        for backend in self._opened:
            with contextlib.suppress(Exception):
                backend.close()

    def metadata(self) -> dict[str, Any]:
        """What the report says about this run: plugin, versions, declared and observed caps."""
        info = self.plugin.info if self.plugin is not None else None
        meta: dict[str, Any] = {
            "label": self.suite.label(),
            "backend": self.name,
            "scenario": self.suite.scenario_name(),
            "suite": self.suite.__qualname__,
            "load_error": self.load_error,
            "plugin": None,
            "declared": [],
            "observed": None,
            "driver_versions": [],
            "device_count": None,
            "models": [],
        }
        if info is not None:
            api = negotiate(info.api_versions)
            meta["plugin"] = {
                "name": info.name,
                "vendor": info.vendor,
                "version": info.version,
                "api": info.api,
                "api_versions": sorted(str(v) for v in info.api_versions),
                "api_version_negotiated": str(api) if api is not None else None,
                "distribution": _distribution_of(self.entry_point),
            }
            meta["declared"] = sorted(c.value for c in info.capabilities)
        if self._inventory is not None:
            inv = self._inventory
            meta["device_count"] = len(inv.devices)
            meta["models"] = sorted({d.model for d in inv.devices})
            meta["driver_versions"] = sorted({d.versions.driver for d in inv.devices if d.versions.driver})
            meta["observed"] = sorted(c.value for c in _observed(inv, self._shared))
        return meta


def _distribution_of(entry_point: tuple[str, str] | None) -> dict[str, str] | None:
    if entry_point is None:
        return None
    for dist in metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP and ep.value.partition(":")[0].strip() == entry_point[0]:
                return {"name": dist.metadata["Name"], "version": dist.version}
    return None


def _observed(inv: HostInventory, backend: Backend | None) -> set[Capability]:
    """Capabilities the snapshot shows evidence of (compared with the declared ones)."""
    devs = inv.devices
    seen: set[Capability] = set()
    checks: dict[Capability, bool] = {
        Capability.INVENTORY: bool(devs),
        Capability.MEMORY: bool(devs) and all(d.memory_total_bytes is not None for d in devs),
        Capability.MEMORY_USED: bool(devs) and all(d.memory_used_bytes is not None for d in devs),
        Capability.UUID: any(d.uuid and not d.uuid_synthesized for d in devs),
        Capability.SERIAL: any(d.serial_number for d in devs),
        Capability.PCI: bool(devs) and all(d.pci is not None for d in devs),
        Capability.NUMA: any(d.numa_node is not None for d in devs),
        Capability.LINKS: any(link.type in FAST_LINKS for link in inv.links),
        Capability.DOMAINS: bool(inv.domains),
        Capability.HEALTH: any(d.health.monitored for d in devs),
        Capability.ECC: any(r.ecc_enabled is not None for d in devs for r in d.memory),
        Capability.PARTITIONS: isinstance(backend, SupportsPartitions),
        Capability.PROCESSES: isinstance(backend, SupportsProcesses),
        Capability.EVENTS: isinstance(backend, SupportsEvents),
        Capability.SHARING: any(d.sharing.divisible_memory or d.sharing.divisible_compute for d in devs),
        Capability.VERSIONS: any(d.versions.driver for d in devs),
    }
    if len(devs) >= 2:
        matrix = inv.distance_matrix()
        checks[Capability.TOPOLOGY] = all(
            lvl is not DistanceLevel.UNKNOWN for r in matrix.levels for lvl in r
        )
    seen.update(cap for cap, ok in checks.items() if ok)
    if backend is not None:
        with contextlib.suppress(Exception):
            samples = backend.telemetry()
            if samples:
                seen.add(Capability.TELEMETRY)
            for cap, field in _TELEMETRY_FIELDS.items():
                if any(not _empty(getattr(s, field)) for s in samples):
                    seen.add(cap)
    return seen


