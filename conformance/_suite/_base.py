"""The suite's base: the per-class harness, the shared helpers, the attributes and fixtures.

Every requirement section is a mixin of :class:`SuiteBase` in its own module; ``__init__``
assembles them into :class:`~accel.conformance.ConformanceSuite`.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

import pytest

from accel.errors import AccelError, ConfigError
from accel.model import FAST_LINKS, Device, DistanceLevel, DomainKind, HostInventory, Operational
from accel.plugin import (
    CAPABILITY_DOCS,
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

from .. import _records
from .._hooks import Fault, FaultInjector, Oracle
from .._isolation import VENDOR_MODULES, ImportReport, import_in_child
from .._requirements import REQUIREMENTS, ROW_ATTR

if TYPE_CHECKING:
    from .._scenarios import Scenario

__all__ = ["NOT_APPLICABLE", "SuiteBase"]

#: Prefix of the skip reason of a row gated on an undeclared capability (the matrix shows N/A).
NOT_APPLICABLE = "not applicable: "

_T = TypeVar("_T")
_LINK_DOMAINS = frozenset(
    {
        DomainKind.NVLINK_ISLAND,
        DomainKind.NVLINK_CLIQUE,
        DomainKind.XGMI_HIVE,
        DomainKind.HCCS_GROUP,
        DomainKind.MLULINK_GROUP,
        DomainKind.MTLINK_GROUP,
        DomainKind.METAXLINK_GROUP,
        DomainKind.XPULINK_GROUP,
    }
)
_PLACEHOLDER_MODELS = re.compile(r"^(n/?a|unknown|none|null|-+|\[?not supported\]?|[0-9]+|0x[0-9a-f]+)$", re.I)
_VERSION = re.compile(r"^v?[0-9]+(\.[0-9]+)+")
_MIB = 2**20
#: How far a health reading's time may sit outside the read that returned it (clock granularity,
#: a snapshot started just before the read).
_EARNED_SKEW = timedelta(seconds=120)
_TIB = 2**40
#: Telemetry fields owned by a capability: declared -> a value (or listed unsupported per sample);
#: undeclared -> ``None`` and listed unsupported.
_TELEMETRY_FIELDS: dict[Capability, str] = {
    Capability.POWER: "power_watts",
    Capability.ENERGY: "energy_joules",
    Capability.TEMPERATURE: "temperature_celsius",
    Capability.UTILIZATION: "utilization_ratio",
    Capability.CLOCKS: "clocks_hertz",
    Capability.MEMORY_USED: "memory_used_bytes",
}
#: Device fields owned by a capability, for ``inventory.unsupported-declared``.
_DEVICE_FIELDS: dict[str, Capability | None] = {
    "uuid": Capability.UUID,
    "serial_number": Capability.SERIAL,
    "pci": Capability.PCI,
    "numa_node": Capability.NUMA,
    "versions.driver": Capability.VERSIONS,
    "memory": Capability.MEMORY,
    "architecture": None,
}
_MONOTONIC = (
    "energy_joules",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
    "pcie_replay_total",
    "retired_pages_total",
)
_LINK_COUNTERS = ("rx_bytes_total", "tx_bytes_total", "crc_errors_total", "replay_errors_total",
                  "recovery_errors_total")


def _fail(problems: Sequence[str], fix: str) -> NoReturn:
    """Fail a row with one line per problem and what to change; no traceback in the matrix."""
    shown = list(problems[:12])
    if len(problems) > 12:
        shown.append(f"... and {len(problems) - 12} more")
    pytest.fail("; ".join(shown) + f". Fix: {fix}", pytrace=False)


def _check(problems: Sequence[str], fix: str) -> None:
    if problems:
        _fail(problems, fix)


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    kind = type(exc).__name__ + (f"[{code}]" if isinstance(exc, AccelError) else "")
    return f"{kind}: {exc}"


def _is_clean_error(exc: BaseException) -> bool:
    return isinstance(exc, AccelError) and bool(getattr(exc, "code", ""))


def _device_ids(inv: HostInventory) -> list[str]:
    return [d.id for d in inv.devices]


def _get_path(dev: Device, path: str) -> object:
    obj: object = dev
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _empty(value: object) -> bool:
    return value is None or value == () or value == {}


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


def _inherited(cls: type[SuiteBase], name: str) -> bool:
    """``cls`` does not override the classmethod ``name`` of :class:`SuiteBase`."""
    return getattr(getattr(cls, name), "__func__", None) is getattr(SuiteBase, name).__func__


class SuiteBase:
    """The attributes, hooks and fixtures every section mixin relies on (documented on ConformanceSuite)."""

    backend: ClassVar[str] = ""
    options: ClassVar[Mapping[str, Any]] = {}
    scenario: ClassVar[str | None] = None
    plugin: ClassVar[BackendPlugin | None] = None
    oracle: ClassVar[Oracle | None] = None
    lose_device: ClassVar[Callable[[Backend, str], None] | None] = None
    make_health_unreadable: ClassVar[Callable[[Backend, str], None] | None] = None
    xfail: ClassVar[Mapping[str, str]] = {}
    snapshot_budget: ClassVar[int] = 64
    probe_budget: ClassVar[int] = 1
    vendor_modules: ClassVar[frozenset[str]] = VENDOR_MODULES
    #: The entry-point module's own import in a fresh interpreter (``accel.plugin`` already loaded):
    #: at most this many seconds of wall time, threads started and modules added.  Plugins in this
    #: repository take 0.01-0.2 s, 0 threads and 2-30 modules; 1 s leaves room for a loaded machine.
    import_budget_s: ClassVar[float] = 1.0
    import_thread_budget: ClassVar[int] = 0
    import_module_budget: ClassVar[int] = 100
    #: Set by :meth:`adopt_plugin_scenario`: done, the scenario adopted, or why it could not be read.
    _accel_adopted: ClassVar[bool] = False
    _accel_scenario: ClassVar[Scenario | None] = None
    _accel_adopt_error: ClassVar[str | None] = None

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        """The config every backend of this suite is opened with (override for a fake sysfs, a replay runner)."""
        return BackendConfig(options=dict(cls.options))

    @classmethod
    def faulted_config(cls, tmp_path: Path, fault: Fault, position: int) -> BackendConfig | None:
        """A config whose backend opens with ``fault`` on the device at ``position`` (inventory order).

        The alternative to runtime fault hooks for backends configured by data: a simulator
        option (``faults=device_lost:0``) or a recorded scenario of a real failure.  ``None``
        (the default): no such config, and the fault rows skip unless a runtime hook exists.
        """
        return None

    @classmethod
    def scenario_name(cls) -> str | None:
        if cls.scenario:
            return cls.scenario
        for key in ("scenario", "profile"):
            value = cls.options.get(key)
            if value:
                return str(value)
        return None

    @classmethod
    def label(cls) -> str:
        """The matrix column: ``sim[dgx-h100]``."""
        scenario = cls.scenario_name()
        name = cls.backend or (cls.plugin.info.name if cls.plugin is not None else cls.__name__)
        return f"{name}[{scenario}]" if scenario else name

    @classmethod
    def adopt_plugin_scenario(cls) -> None:
        """Fill what this class leaves unset from the plugin's own scenario of the same name.

        The three-line subclass (``backend = "example"``, ``options = {"scenario": "two-gpu"}``)
        gets what :func:`~accel.conformance.suite_for` would give it: the scenario's config
        factory (a fake sysfs, a counting runner), its oracle, fault hooks, known deviations
        (``xfail``, merged under the class's own) and snapshot budget, from the plugin's
        ``conformance.CONFORMANCE_SCENARIOS``, found through the ``accel.backends`` entry point.
        Anything the class sets itself wins.  Nothing happens without a scenario name, or when
        the plugin registers no scenario of that name (e.g. a real host).  Called once per class
        at collection (and by the ``accel`` fixture); a broken ``conformance`` module fails every
        row with the error instead of certifying without its oracle.
        """
        if cls.__dict__.get("_accel_adopted"):
            return
        cls._accel_adopted = True
        name = cls.scenario_name()
        if not cls.backend or name is None:
            return
        from .._scenarios import scenarios_for, with_options

        try:
            scen = scenarios_for(cls.backend).get(name)
        except Exception as exc:  # noqa: BLE001 - reported on every row by the harness
            cls._accel_adopt_error = f"cannot read {cls.backend!r}'s conformance scenarios: {_describe(exc)}"
            return
        if scen is None:
            return
        cls._accel_scenario = scen
        # Descriptors (staticmethod/classmethod) go on the class through setattr: mypy types the
        # hooks as the plain callables they are once bound.
        hooks: dict[str, object] = {}
        if cls.oracle is None:
            cls.oracle = scen.oracle
        if cls.lose_device is None and scen.lose_device is not None:
            hooks["lose_device"] = staticmethod(scen.lose_device)
        if cls.make_health_unreadable is None and scen.make_health_unreadable is not None:
            hooks["make_health_unreadable"] = staticmethod(scen.make_health_unreadable)
        if _inherited(cls, "faulted_config") and scen.faulted_config is not None:
            faulted = scen.faulted_config

            def faulted_config(_: type[SuiteBase], tmp_path: Path, fault: Fault, position: int) -> BackendConfig | None:
                return faulted(tmp_path, fault, position)

            hooks["faulted_config"] = classmethod(faulted_config)
        own_options = dict(cls.options)
        if _inherited(cls, "backend_config"):
            cls.options = {**scen.options, **own_options}
            if scen.config is not None:
                factory = scen.config

                def backend_config(_: type[SuiteBase], tmp_path: Path) -> BackendConfig:
                    return with_options(factory(tmp_path), own_options)

                hooks["backend_config"] = classmethod(backend_config)
        for attr, value in hooks.items():
            setattr(cls, attr, value)
        cls.xfail = {**scen.xfail, **cls.xfail}
        if scen.snapshot_budget is not None and cls.snapshot_budget == SuiteBase.snapshot_budget:
            cls.snapshot_budget = scen.snapshot_budget

    # -- fixtures --------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def accel(cls, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Harness]:
        """The per-class harness: plugin, config, the backends opened, the shared snapshot."""
        cls.adopt_plugin_scenario()
        harness = _Harness(cls, tmp_path_factory.mktemp(cls.__name__), request.node.nodeid)
        try:
            yield harness
        finally:
            harness.close_all()
            _records.note_run(request.config, request.node.nodeid, harness.metadata())

    @pytest.fixture(autouse=True)
    def _accel_gate(self, request: pytest.FixtureRequest, accel: _Harness) -> None:
        """Skip a row whose capability the plugin does not declare, with the capability's meaning."""
        row_id = getattr(request.function, ROW_ATTR, None)
        if row_id is None:
            return
        req = REQUIREMENTS[row_id]
        plugin = accel.require_plugin()
        if req.capability is not None and not plugin.info.declares(req.capability):
            pytest.skip(
                f"{NOT_APPLICABLE}{plugin.info.name} does not declare capability "
                f"'{req.capability.value}' ({CAPABILITY_DOCS[req.capability]})"
            )

