"""The conformance suite: subclass it, name the backend, run pytest.

A vendor's whole test module::

    from accel.conformance import ConformanceSuite

    class TestAscend910B(ConformanceSuite):
        backend = "ascend"
        options = {"scenario": "910b-8"}

Every ``test_*`` method checks one requirement row (see ``requirements.json``).  A row gated on
a capability the plugin does not declare is skipped as *not applicable*; a row that needs an
oracle or a fault hook the suite does not have is skipped with that reason.  Known deviations go
in ``xfail = {"row.id": "why"}`` and are strict: a row that starts passing fails the run until
the entry is removed.  Overriding a ``test_*`` method is allowed but is reported as
*overridden*, never as passed.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, NoReturn, TypeVar

import pytest

from accel.errors import AccelError, DeviceError, DeviceLostError
from accel.model import (
    FAST_LINKS,
    Device,
    DistanceLevel,
    DomainKind,
    Health,
    HealthState,
    HostInventory,
    Operational,
    Telemetry,
    derive_state,
    device_id_for,
    pcie_level,
)
from accel.plugin import (
    CAPABILITY_DOCS,
    ENTRY_POINT_GROUP,
    SUPPORTED_API_VERSIONS,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    ProbeResult,
    ProbeStatus,
    SupportsEvents,
    SupportsPartitions,
    SupportsProcesses,
    negotiate,
    registered,
)
from accel.sysfs import enrich_inventory, pci_function

from . import _records
from ._hooks import Fault, FaultInjector, Oracle, ReportsCost
from ._isolation import VENDOR_MODULES, ImportReport, import_in_child, vendor_modules_in
from ._requirements import REQUIREMENTS, ROW_ATTR, row

__all__ = ["NOT_APPLICABLE", "ConformanceSuite"]

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

    def __init__(self, suite: type[ConformanceSuite], tmp: Path, key: str) -> None:
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


class ConformanceSuite:
    """Base class of a backend's conformance tests.  Set :attr:`backend`; the rest is optional.

    Class attributes:

    ``backend``
        The ``accel.backends`` entry-point name.
    ``options``
        Passed as :attr:`accel.plugin.BackendConfig.options` by the default :meth:`backend_config`.
    ``scenario``
        A short name for the matrix column (default: ``options['scenario']`` or ``['profile']``).
    ``plugin``
        A :class:`~accel.plugin.BackendPlugin` object to use instead of the entry point.
    ``oracle``
        An :class:`~accel.conformance.Oracle`: independent truth for the ``*oracle*`` rows.
    ``lose_device`` / ``make_health_unreadable``
        ``Callable[[Backend, str], None]`` fault hooks (plain functions); without them the suite
        uses the backend's :class:`~accel.conformance.FaultInjector` (or a backend method
        ``lose_device(device_id)``), then :meth:`faulted_config`, or skips the row.
    ``xfail``
        ``{"row.id": "reason"}``: known deviations, strict.
    ``snapshot_budget`` / ``probe_budget``
        The most tool runs or vendor calls one ``inventory()`` / ``probe()`` may cost.
    ``vendor_modules``
        Top-level modules the entry-point module and ``probe()`` must not import.
    """

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

    # -- fixtures --------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def accel(cls, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Harness]:
        """The per-class harness: plugin, config, the backends opened, the shared snapshot."""
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

    # == discovery ==========================================================================
    @row("discovery.entry-point-light")
    def test_discovery_entry_point_light(self, accel: _Harness) -> None:
        rep = accel.isolation()
        if rep.import_error:
            _fail([f"importing {rep.target} failed: {rep.import_error}"], "the entry point must import cleanly")
        bad = vendor_modules_in(rep.after_import, self.vendor_modules)
        if bad:
            _fail([f"importing {rep.target} loaded {', '.join(bad)}"],
                  "import the vendor library inside open() (or a boundary module it imports), never at module "
                  "level of the entry-point package")

    @row("discovery.probe-light")
    def test_discovery_probe_light(self, accel: _Harness) -> None:
        rep = accel.isolation()
        if rep.import_error:
            _fail([f"importing {rep.target} failed: {rep.import_error}"], "the entry point must import cleanly")
        if rep.probe_error:
            _fail([f"probe() on an empty host raised {rep.probe_error}"], "probe() must return ProbeResult.absent()")
        bad = vendor_modules_in(rep.after_probe or (), self.vendor_modules)
        if bad:
            _fail([f"probe() on an empty host loaded {', '.join(bad)}"],
                  "probe from sysfs PCI ids, /dev nodes or PATH; load the vendor library only in open()")

    @row("discovery.probe-never-raises")
    def test_discovery_probe_never_raises(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        empty = accel.tmp / "empty-host"
        (empty / "sys").mkdir(parents=True, exist_ok=True)
        (empty / "dev").mkdir(parents=True, exist_ok=True)
        configs = {
            "the configured host": accel.config,
            "an empty sysfs and /dev": BackendConfig(options=dict(accel.config.options),
                                                     sysfs_root=empty / "sys", dev_root=empty / "dev",
                                                     runner=accel.config.runner),
            "a missing sysfs root": BackendConfig(options=dict(accel.config.options),
                                                  sysfs_root=empty / "missing", dev_root=empty / "missing",
                                                  runner=accel.config.runner),
        }
        problems = []
        for where, config in configs.items():
            try:
                result = plugin.probe(config)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"probe() on {where} raised {_describe(exc)}")
                continue
            if not isinstance(result, ProbeResult):
                problems.append(f"probe() on {where} returned {type(result).__name__}")
            elif result.status is not ProbeStatus.PRESENT and not result.reason:
                problems.append(f"probe() on {where} said {result.status.value} without a reason")
        _check(problems, "catch everything in probe() and return ProbeResult.absent()/error() with a reason")

    @row("discovery.probe-cheap")
    def test_discovery_probe_cheap(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        runner = accel.config.runner
        if runner is None:
            pytest.skip("the config has no runner, so tool runs during probe() cannot be counted")
        before = runner.call_count
        accel.probe()
        spent = runner.call_count - before
        request.node.user_properties.append(("accel_measured", f"{spent} tool runs per probe"))
        if spent > self.probe_budget:
            _fail([f"probe() ran {spent} vendor tools ({runner.calls[-spent:]})"],
                  f"probe with sysfs ids, /dev nodes and runner.which(); at most {self.probe_budget} run(s)")

    @row("discovery.probe-reentrant")
    def test_discovery_probe_reentrant(self, accel: _Harness) -> None:
        first = accel.probe()
        second = accel.probe()
        _ = accel.backend  # a backend is open from here on
        third = accel.probe()
        statuses = [first.status, second.status, third.status]
        if len(set(statuses)) != 1:
            _fail([f"probe() answered {', '.join(s.value for s in statuses)} (twice, then with a backend open)"],
                  "probe() must not depend on earlier probes or open backends; keep no state in the plugin")

    @row("discovery.probe-threadsafe")
    def test_discovery_probe_threadsafe(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        threads = 8
        barrier = threading.Barrier(threads)
        results: list[ProbeResult | BaseException] = []
        lock = threading.Lock()

        def work() -> None:
            try:
                barrier.wait(timeout=30)
                res: ProbeResult | BaseException = plugin.probe(accel.config)
            except Exception as exc:  # noqa: BLE001
                res = exc
            with lock:
                results.append(res)

        pool = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=60)
        problems = [f"a thread's probe() raised {_describe(r)}" for r in results if isinstance(r, BaseException)]
        statuses = {r.status.value for r in results if isinstance(r, ProbeResult)}
        if len(results) < threads:
            problems.append(f"{threads - len(results)} of {threads} concurrent probe() calls never returned")
        if len(statuses) > 1:
            problems.append(f"concurrent probe() calls disagreed: {sorted(statuses)}")
        _check(problems, "make probe() free of shared mutable state (or guard it with a lock)")

    @row("discovery.plugin-info")
    def test_discovery_plugin_info(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        info = plugin.info
        problems = []
        if not info.name:
            problems.append("PluginInfo.name is empty")
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", info.vendor or ""):
            problems.append(f"PluginInfo.vendor {info.vendor!r} is not a lower-case id")
        if not info.version or not _VERSION.match(info.version):
            problems.append(f"PluginInfo.version {info.version!r} does not start with a dotted number")
        if negotiate(info.api_versions) is None:
            offered = sorted(str(v) for v in info.api_versions)
            problems.append(f"no common plugin API version: plugin offers {offered}, accel speaks "
                            f"{sorted(str(v) for v in SUPPORTED_API_VERSIONS)}")
        backend = accel.backend
        if self.backend and backend.name != self.backend:
            problems.append(f"Backend.name is {backend.name!r} but the entry point is {self.backend!r}")
        _check(problems, "fill PluginInfo in the plugin's __init__ and offer ApiVersion(1, 0)")

    @row("discovery.capabilities-honest")
    def test_discovery_capabilities_honest(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        backend = accel.backend
        problems = []
        for cap, proto in ((Capability.PARTITIONS, SupportsPartitions), (Capability.PROCESSES, SupportsProcesses),
                           (Capability.EVENTS, SupportsEvents)):
            has = isinstance(backend, proto)
            if info.declares(cap) and not has:
                problems.append(f"declares {cap.value} but the backend does not implement {proto.__name__}")
            if has and not info.declares(cap):
                problems.append(f"implements {proto.__name__} but does not declare {cap.value}")
        _check(problems, "declare exactly the optional surfaces the backend implements (PluginInfo.capabilities)")

    # == inventory ==========================================================================
    @row("inventory.schema-valid")
    def test_inventory_schema_valid(self, accel: _Harness) -> None:
        inv = accel.inventory
        if not isinstance(inv, HostInventory):
            _fail([f"inventory() returned {type(inv).__name__}"], "return accel.model.HostInventory")
        try:
            again = HostInventory.model_validate_json(inv.model_dump_json())
        except Exception as exc:  # noqa: BLE001
            _fail([f"the inventory does not validate after a JSON round trip: {exc}"],
                  "build models through their constructors (model_copy(update=...) skips validation)")
        if again != inv:
            _fail(["the inventory changes in a JSON round trip"], "use only JSON-representable values")

    @row("inventory.devices-present")
    def test_inventory_devices_present(self, accel: _Harness) -> None:
        probe = accel.probe()
        inv = accel.inventory
        problems = []
        if probe.status is not ProbeStatus.PRESENT:
            problems.append(f"probe() on the configured host says {probe.status.value}: {probe.reason!r}")
        if not inv.devices:
            problems.append("inventory() lists no devices")
        if probe.device_count is not None and probe.device_count != len(inv.devices):
            problems.append(f"probe() counted {probe.device_count} devices, inventory() lists {len(inv.devices)}")
        _check(problems, "run the suite on the hardware or a recorded scenario, and count the same devices")

    @row("inventory.ids-stable")
    def test_inventory_ids_stable(self, accel: _Harness) -> None:
        first = _device_ids(accel.inventory)
        other = accel.open()
        second = _device_ids(accel.call("inventory() on a second backend", other.inventory))
        accel.call("close()", other.close)
        third_backend = accel.open()
        third = _device_ids(accel.call("inventory() after reopening", third_backend.inventory))
        problems = []
        for label, ids in (("a second open", second), ("a reopen", third)):
            if sorted(ids) != sorted(first):
                gone = sorted(set(first) - set(ids))
                new = sorted(set(ids) - set(first))
                problems.append(f"{label} changed the ids (gone {gone}, new {new})")
        _check(problems, "derive ids from the UUID or PCI bus id (accel.model.device_id_for), never from "
                         "enumeration order, time or randomness")

    @row("inventory.ids-unique")
    def test_inventory_ids_unique(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        seen: dict[str, str] = {}
        for dev in inv.devices:
            if dev.id in seen:
                problems.append(f"device id {dev.id!r} appears twice")
            seen[dev.id] = "device"
            if dev.pci is not None:
                key = "pci:" + dev.pci.bus_id
                if key in seen:
                    problems.append(f"bus id {dev.pci.bus_id} is reported by two devices")
                seen[key] = dev.id
        for part in inv.partitions:
            if part.id in seen:
                problems.append(f"partition id {part.id!r} collides with another id")
            seen[part.id] = "partition"
        _check(problems, "one id per device and partition; one PCI function per device")

    @row("inventory.ids-canonical")
    def test_inventory_ids_canonical(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            if dev.uuid and not dev.uuid_synthesized:
                expected = device_id_for(dev.vendor, uuid=dev.uuid)
            elif dev.pci is not None:
                expected = device_id_for(dev.vendor, bus_id=dev.pci.bus_id)
            else:
                problems.append(f"{dev.id} has neither a real UUID nor a PCI bus id to derive a stable id from")
                continue
            if dev.id != expected and not dev.id.startswith(expected + "/"):
                problems.append(f"{dev.id!r} should be {expected!r}")
        _check(problems, "build ids with accel.model.device_id_for(vendor, uuid=..., bus_id=...)")

    @row("inventory.ids-match-pci")
    def test_inventory_ids_match_pci(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        for dev in inv.devices:
            if dev.pci is None:
                problems.append(f"{dev.id} has no PCI info although the plugin declares 'pci'")
                continue
            fn = pci_function(dev.pci.bus_id, accel.config.sysfs_root)
            if fn is None:
                continue
            for name in ("vendor_id", "device_id"):
                mine, theirs = getattr(dev.pci, name), getattr(fn, name)
                if mine is not None and theirs is not None and mine != theirs:
                    problems.append(f"{dev.id}: pci.{name} is {mine} but sysfs says {theirs}")
        truth = self.oracle.pci_bus_ids() if self.oracle is not None else None
        if truth is not None:
            mine_ids = {d.pci.bus_id for d in inv.devices if d.pci is not None}
            if mine_ids != set(truth):
                problems.append(f"bus ids differ from the oracle: missing {sorted(set(truth) - mine_ids)}, "
                                f"extra {sorted(mine_ids - set(truth))}")
        _check(problems, "normalise bus ids with accel.model.normalize_bus_id and report every device")

    @row("inventory.oracle-devices")
    def test_inventory_oracle_devices(self, accel: _Harness) -> None:
        if self.oracle is None:
            pytest.skip("no oracle: set ConformanceSuite.oracle to an independent reading of the devices")
        inv = accel.inventory
        ids, bus = self.oracle.device_ids(), self.oracle.pci_bus_ids()
        if ids is None and bus is None:
            pytest.skip("the oracle reads neither device ids nor PCI bus ids")
        problems = []
        if ids is not None and set(ids) != set(_device_ids(inv)):
            problems.append(f"device ids differ from the oracle: missing {sorted(set(ids) - set(_device_ids(inv)))},"
                            f" extra {sorted(set(_device_ids(inv)) - set(ids))}")
        if bus is not None:
            mine = {d.pci.bus_id for d in inv.devices if d.pci is not None}
            if mine != set(bus):
                problems.append(f"{len(mine)} bus ids reported, the oracle sees {len(bus)}: missing "
                                f"{sorted(set(bus) - mine)}, extra {sorted(mine - set(bus))}")
        _check(problems, "report every device the host has, and only those")

    @row("inventory.model-vendor-filled")
    def test_inventory_model_vendor_filled(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            if not dev.model.strip() or _PLACEHOLDER_MODELS.match(dev.model.strip()):
                problems.append(f"{dev.id}: model {dev.model!r} is a placeholder")
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", dev.vendor):
                problems.append(f"{dev.id}: vendor {dev.vendor!r} is not a lower-case id")
        _check(problems, "map the vendor's product name (or PCI device id) to the marketing model name")

    @row("inventory.versions-parse")
    def test_inventory_versions_parse(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            v = dev.versions
            if v.driver is None:
                problems.append(f"{dev.id}: no driver version")
            elif not _VERSION.match(v.driver):
                problems.append(f"{dev.id}: driver version {v.driver!r} does not start with a dotted number")
            if v.runtime is not None and not _VERSION.match(v.runtime):
                problems.append(f"{dev.id}: runtime version {v.runtime!r} does not start with a dotted number")
            for name, value in v.firmware.items():
                if not value.strip():
                    problems.append(f"{dev.id}: firmware {name!r} has an empty version")
        _check(problems, "report the version strings as the vendor prints them, trimmed (e.g. '550.54.15')")

    @row("inventory.binding-filled")
    def test_inventory_binding_filled(self, accel: _Harness) -> None:
        problems = []
        seen: dict[tuple[str, str], str] = {}
        for dev in accel.inventory.devices:
            b = dev.binding
            if not b.visible_env or b.visible_id is None:
                problems.append(f"{dev.id}: binding.visible_env/visible_id not set")
                continue
            key = (b.visible_env, b.visible_id)
            if key in seen:
                problems.append(f"{dev.id} and {seen[key]} are both {b.visible_env}={b.visible_id}")
            seen[key] = dev.id
        _check(problems, "set Binding(visible_env='CUDA_VISIBLE_DEVICES', visible_id=<uuid or index>)")

    @row("inventory.unsupported-declared")
    def test_inventory_unsupported_declared(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        devs = accel.inventory.devices
        problems = []
        for path, cap in _DEVICE_FIELDS.items():
            if cap is not None and not info.declares(cap):
                continue
            silent = [d for d in devs if _empty(_get_path(d, path)) and path not in d.unsupported]
            if devs and len(silent) == len(devs):
                owner = f"capability '{cap.value}' is declared" if cap else "it is a core field"
                problems.append(f"{path} is empty on every device although {owner}")
        _check(problems, "report the field, or name it in Device.unsupported (or drop the capability)")

    @row("inventory.sources")
    def test_inventory_sources(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        inv = accel.inventory
        name = accel.backend.name
        mine = [s for s in inv.sources if s.backend == name]
        if not mine:
            _fail([f"no SourceInfo with backend={name!r} (sources: {[s.backend for s in inv.sources]})"],
                  "add SourceInfo(backend=<name>, plugin_version=PluginInfo.version, api=...) to sources")
        if not any(s.plugin_version == info.version for s in mine):
            _fail([f"SourceInfo.plugin_version is {[s.plugin_version for s in mine]}, PluginInfo says "
                   f"{info.version!r}"], "report the plugin version in SourceInfo.plugin_version")

    # == memory =============================================================================
    @row("memory.total-bytes")
    def test_memory_total_bytes(self, accel: _Harness) -> None:
        problems = []
        for dev in accel.inventory.devices:
            total = dev.memory_total_bytes
            if total is None:
                problems.append(f"{dev.id}: memory total unknown")
            elif not 64 * _MIB <= total <= 16 * _TIB:
                problems.append(f"{dev.id}: memory total {total} bytes is outside 64 MiB..16 TiB")
        _check(problems, "report MemoryRegion.total_bytes in bytes (MiB * 1048576; check MB vs MiB per vendor)")

    @row("memory.used-le-total")
    def test_memory_used_le_total(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        totals = {d.id: d.memory_total_bytes for d in inv.devices}
        for dev in inv.devices:
            used, total = dev.memory_used_bytes, totals[dev.id]
            if used is None:
                problems.append(f"{dev.id}: memory used unknown although 'memory_used' is declared")
            elif total is not None and used > total:
                problems.append(f"{dev.id}: used {used} > total {total}")
        if accel.require_plugin().info.declares(Capability.TELEMETRY):
            for s in accel.call("telemetry()", accel.backend.telemetry):
                total = totals.get(s.device_id)
                if s.memory_used_bytes is not None and total is not None and s.memory_used_bytes > total:
                    problems.append(f"{s.device_id}: telemetry used {s.memory_used_bytes} > inventory total {total}")
        _check(problems, "read used and total from the same call, in the same unit")

    @row("memory.oracle-1pct")
    def test_memory_oracle_1pct(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        if self.oracle is None:
            pytest.skip("no oracle: set ConformanceSuite.oracle with memory_total_bytes() from an independent source")
        problems = []
        compared = 0
        for dev in accel.inventory.devices:
            truth = self.oracle.memory_total_bytes(dev)
            mine = dev.memory_total_bytes
            if truth is None:
                continue
            compared += 1
            if mine is None or abs(mine - truth) > 0.01 * truth:
                problems.append(f"{dev.id}: {mine} bytes, the oracle reads {truth}")
        if compared == 0:
            pytest.skip("the oracle knows the memory of none of the devices")
        request.node.user_properties.append(("accel_measured", f"{compared} devices compared"))
        _check(problems, "convert the vendor's unit exactly (MiB vs MB) and report the full device memory")

    @row("memory.telemetry-consistent")
    def test_memory_telemetry_consistent(self, accel: _Harness) -> None:
        totals = {d.id: d.memory_total_bytes for d in accel.inventory.devices}
        problems = []
        for s in accel.call("telemetry()", accel.backend.telemetry):
            total = totals.get(s.device_id)
            mine = s.memory_total_bytes
            if mine is not None and total is not None and abs(mine - total) > 0.01 * total:
                problems.append(f"{s.device_id}: telemetry total {s.memory_total_bytes}, inventory {total}")
        _check(problems, "use one source (and one unit) for memory totals")

    # == topology ===========================================================================
    @row("topology.matrix-symmetric")
    def test_topology_matrix_symmetric(self, accel: _Harness) -> None:
        m = accel.call("distance_matrix()", accel.inventory.distance_matrix)
        ids = m.device_ids
        problems = [
            f"{ids[i]}->{ids[j]} is {m.levels[i][j].value} but {ids[j]}->{ids[i]} is {m.levels[j][i].value}"
            for i in range(len(ids)) for j in range(i + 1, len(ids)) if m.levels[i][j] != m.levels[j][i]
        ]
        _check(problems, "report links once per pair; never build DistanceMatrix by hand")

    @row("topology.self-is-x")
    def test_topology_self_is_x(self, accel: _Harness) -> None:
        m = accel.call("distance_matrix()", accel.inventory.distance_matrix)
        ids = m.device_ids
        problems = []
        for i in range(len(ids)):
            for j in range(len(ids)):
                if (m.levels[i][j] is DistanceLevel.X) != (i == j):
                    problems.append(f"cell {ids[i]}/{ids[j]} is {m.levels[i][j].value}")
        _check(problems, "only a device with itself is X")

    @row("topology.links-reference-devices")
    def test_topology_links_reference_devices(self, accel: _Harness) -> None:
        inv = accel.inventory
        endpoints = set(_device_ids(inv)) | {p.id for p in inv.partitions}
        problems = []
        seen: set[tuple[frozenset[str], str]] = set()
        for link in inv.links:
            for end in (link.a, link.b):
                if end not in endpoints:
                    problems.append(f"link {link.a}-{link.b} names unknown {end!r}")
            if link.a == link.b:
                problems.append(f"link {link.a}-{link.b} joins a device to itself")
            key = (link.pair, link.type.value)
            if key in seen:
                problems.append(f"{link.type.value} link {link.a}-{link.b} is reported twice (once per direction?)")
            seen.add(key)
        _check(problems, "report each undirected link once, between ids of this inventory (use count for bonds)")

    @row("topology.link-bandwidth-units")
    def test_topology_link_bandwidth_units(self, accel: _Harness) -> None:
        problems = []
        for link in accel.inventory.links:
            bw = link.bandwidth_bytes_per_s
            if bw is not None and not 10**8 <= bw <= 10**13:
                problems.append(f"{link.type.value} {link.a}-{link.b}: {bw} B/s")
        _check(problems, "bandwidth_bytes_per_s is bytes per second per direction (GB/s * 1e9; Gbit/s / 8 * 1e9)")

    @row("topology.domains-consistent")
    def test_topology_domains_consistent(self, accel: _Harness) -> None:
        inv = accel.inventory
        adj: dict[str, set[str]] = {}
        for link in inv.links:
            if link.type in FAST_LINKS:
                adj.setdefault(link.a, set()).add(link.b)
                adj.setdefault(link.b, set()).add(link.a)
        problems = []
        by_kind: dict[DomainKind, dict[str, str]] = {}
        devices = {d.id: d for d in inv.devices}
        for dom in inv.domains:
            members = set(dom.members)
            if dom.kind in _LINK_DOMAINS and len(members) > 1:
                start = next(iter(sorted(members)))
                reached, todo = {start}, [start]
                while todo:
                    for nxt in adj.get(todo.pop(), set()) & members:
                        if nxt not in reached:
                            reached.add(nxt)
                            todo.append(nxt)
                if reached != members:
                    problems.append(f"domain {dom.id} ({dom.kind.value}): {sorted(members - reached)} have no fast "
                                    f"link path to {start}")
                owner = by_kind.setdefault(dom.kind, {})
                for m in members:
                    if m in owner:
                        problems.append(f"{m} is in two {dom.kind.value} domains ({owner[m]}, {dom.id})")
                    owner[m] = dom.id
            if dom.kind is DomainKind.NUMA:
                nodes = {devices[m].numa_node for m in members if m in devices}
                if len(nodes) > 1:
                    problems.append(f"NUMA domain {dom.id} spans NUMA nodes {sorted(map(str, nodes))}")
        link_kind = {
            DomainKind.NVLINK_ISLAND, DomainKind.XGMI_HIVE, DomainKind.HCCS_GROUP, DomainKind.MLULINK_GROUP,
        }
        for link in inv.links:
            if link.type not in FAST_LINKS:
                continue
            for kind in link_kind & set(by_kind):
                da, db = by_kind[kind].get(link.a), by_kind[kind].get(link.b)
                if da is not None and db is not None and da != db:
                    problems.append(f"{link.type.value} link {link.a}-{link.b} crosses {kind.value} domains "
                                    f"{da} and {db}")
        _check(problems, "build link domains as the connected components of the fast-link graph")

    @row("topology.pcie-levels-match-sysfs")
    def test_topology_pcie_levels_match_sysfs(self, accel: _Harness) -> None:
        inv = accel.inventory
        placed = [d for d in inv.devices if d.pci is not None and d.pci.bridge_path is not None]
        if len(placed) < 2:
            pytest.skip("fewer than two devices carry PCI bridge paths; the core derives PCIe levels from sysfs")
        stripped = []
        for dev in placed:
            assert dev.pci is not None
            pci = dev.pci.model_copy(update={"bridge_path": None, "pcie_root": None})
            stripped.append(dev.model_copy(update={"pci": pci, "numa_node": None, "cpu_affinity": None}))
        root = accel.config.sysfs_root
        core = enrich_inventory(inv.model_copy(update={"devices": tuple(stripped)}), root)
        known = {d.id: d for d in core.devices if d.pci is not None and d.pci.bridge_path is not None}
        if len(known) < 2:
            pytest.skip(f"sysfs at {root} knows fewer than two of the backend's bus ids; nothing to compare")
        problems = []
        for i, a in enumerate(placed):
            for b in placed[i + 1:]:
                if a.id in known and b.id in known:
                    mine, core_level = pcie_level(a, b), pcie_level(known[a.id], known[b.id])
                    if mine != core_level:
                        problems.append(f"{a.id}/{b.id}: backend {mine.value}, sysfs {core_level.value}")
        _check(problems, "leave pcie_root/bridge_path to accel.sysfs.enrich_inventory, or read them from sysfs")

    # == partitions =========================================================================
    @row("partitions.protocol")
    def test_partitions_protocol(self, accel: _Harness) -> None:
        backend = accel.backend
        if not isinstance(backend, SupportsPartitions):
            _fail(["the backend does not implement SupportsPartitions"],
                  "add partitions() and partition_profiles(), or drop the 'partitions' capability")
        live = accel.call("partitions()", backend.partitions)
        accel.call("partition_profiles()", backend.partition_profiles)
        mine, theirs = sorted(p.id for p in live), sorted(p.id for p in accel.inventory.partitions)
        if mine != theirs:
            _fail([f"partitions() lists {mine}, inventory().partitions {theirs}"],
                  "build both from the same read of the vendor library")

    @row("partitions.no-overlap")
    def test_partitions_no_overlap(self, accel: _Harness) -> None:
        inv = accel.inventory
        problems = []
        by_parent: dict[str, list[Any]] = {}
        for part in inv.partitions:
            if part.placement is not None:
                by_parent.setdefault(part.parent_id, []).append(part)
        for parent, parts in by_parent.items():
            for i, x in enumerate(parts):
                for y in parts[i + 1:]:
                    if x.placement.overlaps(y.placement):
                        problems.append(f"{x.id} and {y.id} overlap on {parent}")
        for prof in inv.partition_profiles:
            for place in prof.placements:
                if prof.memory_slices is not None and place.size != prof.memory_slices:
                    problems.append(f"profile {prof.name} on {prof.parent_id}: placement at {place.start} has size "
                                    f"{place.size}, the profile takes {prof.memory_slices} slices")
        _check(problems, "report placements in the parent's memory-slice units, as the vendor library gives them")

    @row("partitions.memory-within-parent")
    def test_partitions_memory_within_parent(self, accel: _Harness) -> None:
        inv = accel.inventory
        totals = {d.id: d.memory_total_bytes for d in inv.devices}
        used: dict[str, int] = {}
        for part in inv.partitions:
            used[part.parent_id] = used.get(part.parent_id, 0) + (part.memory_bytes or 0)
        problems = [f"partitions on {pid} add up to {n} bytes, the device has {totals[pid]}"
                    for pid, n in used.items() if totals.get(pid) is not None and n > (totals[pid] or 0)]
        _check(problems, "report each partition's own memory, in bytes")

    @row("partitions.profiles-known")
    def test_partitions_profiles_known(self, accel: _Harness) -> None:
        inv = accel.inventory
        offered: dict[tuple[str, str], Any] = {(p.parent_id, p.name): p for p in inv.partition_profiles}
        problems = []
        for part in inv.partitions:
            prof = offered.get((part.parent_id, part.profile))
            if prof is None:
                problems.append(f"{part.id} uses profile {part.profile!r}, which {part.parent_id} does not offer")
            elif prof.placements and part.placement is not None and part.placement not in prof.placements:
                problems.append(f"{part.id} sits at {part.placement.start}+{part.placement.size}, not a placement "
                                f"of {part.profile}")
        _check(problems, "list every profile a parent supports in partition_profiles")

    # == health =============================================================================
    @row("health.covers-devices")
    def test_health_covers_devices(self, accel: _Harness) -> None:
        inv = accel.inventory
        ids = set(_device_ids(inv))
        got = accel.call("health()", accel.backend.health)
        problems = []
        missing = sorted(ids - set(got))
        extra = sorted(set(got) - ids - {p.id for p in inv.partitions})
        if missing:
            problems.append(f"health() has no entry for {missing}")
        if extra:
            problems.append(f"health() answers for unknown ids {extra}")
        bad = [k for k, v in got.items() if not isinstance(v, Health)]
        if bad:
            problems.append(f"health() values for {bad} are not accel.model.Health")
        if inv.devices:
            one = inv.devices[0].id
            only = accel.call(f"health(ids=[{one!r}])", lambda: accel.backend.health([one]))
            if set(only) != {one}:
                problems.append(f"health(ids=[{one!r}]) answered for {sorted(only)}")
        _check(problems, "return {device_id: Health} for every device (Health.unknown() when unreadable)")

    @row("health.state-derived")
    def test_health_state_derived(self, accel: _Harness) -> None:
        inv = accel.inventory
        got = accel.call("health()", accel.backend.health)
        problems = []
        for dev_id, h in got.items():
            rule = derive_state(h.conditions, h.operational, h.monitored)
            if h.state is not rule:
                problems.append(f"{dev_id}: state {h.state.value}, the core's rule gives {rule.value}")
        for dev in inv.devices:
            now = got.get(dev.id)
            if now is not None and (now.operational, now.state) != (dev.health.operational, dev.health.state):
                problems.append(f"{dev.id}: inventory says {dev.health.operational.value}/{dev.health.state.value}, "
                                f"health() says {now.operational.value}/{now.state.value}")
        _check(problems, "report conditions and operational status only; never set a state")

    @row("health.not-supported-unknown")
    def test_health_not_supported_unknown(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        if not info.declares(Capability.HEALTH):
            got = accel.call("health()", accel.backend.health)
            wrong = [f"{k}: {v.state.value}" for k, v in got.items()
                     if v.state is not HealthState.UNKNOWN and v.operational is Operational.ONLINE]
            _check([f"without the 'health' capability these are not unknown: {wrong}"] if wrong else [],
                   "return Health.unknown() for devices whose health the backend cannot read")
            return
        faulted = accel.faulted(Fault.HEALTH_NOT_SUPPORTED)
        if faulted is None:
            pytest.skip("no fault hook: set make_health_unreadable or faulted_config, or implement FaultInjector "
                        "(health_not_supported)")
        backend, ids, target = faulted
        got = accel.call("health() with one device's health unreadable", backend.health)
        h = got.get(target)
        problems = []
        if h is None:
            problems.append(f"health() dropped {target} when its health became unreadable")
        elif h.monitored or h.state is not HealthState.UNKNOWN:
            problems.append(f"{target} with NOT_SUPPORTED health is {h.state.value} (monitored={h.monitored})")
        for other in [i for i in ids if i != target]:
            if other in got and got[other].state is HealthState.UNKNOWN and got[other].monitored is False:
                problems.append(f"{other} also became unknown")
        _check(problems, "map the vendor's NOT_SUPPORTED to Health(monitored=False), not to a failure condition")

    @row("health.earned")
    def test_health_earned(self, accel: _Harness) -> None:
        # A scheduler places work on "healthy": that word must come from a reading taken now.
        inv = accel.inventory
        start = datetime.now(UTC)
        got = accel.call("health()", accel.backend.health)
        end = datetime.now(UTC)
        problems: list[str] = []

        def judge(where: str, h: Health, low: datetime, high: datetime) -> None:
            if h.state is not HealthState.HEALTHY:
                return
            if not h.monitored:
                problems.append(f"{where}: healthy with monitored=False")
            elif h.checked_at is None:
                problems.append(f"{where}: healthy without checked_at (nothing says when health was read)")
            elif h.checked_at.tzinfo is None:
                problems.append(f"{where}: checked_at {h.checked_at.isoformat()} has no timezone")
            elif not low - _EARNED_SKEW <= h.checked_at <= high + _EARNED_SKEW:
                problems.append(f"{where}: healthy from a reading at {h.checked_at.isoformat()}, not taken at this "
                                f"read ({low.isoformat()} .. {high.isoformat()})")

        collected = inv.collected_at if inv.collected_at.tzinfo is not None else inv.collected_at.replace(tzinfo=UTC)
        for dev in inv.devices:
            judge(f"inventory {dev.id}", dev.health, collected, end)
        for part in inv.partitions:
            judge(f"inventory partition {part.id}", part.health, collected, end)
        for dev_id, h in got.items():
            judge(f"health() {dev_id}", h, start, end)
        _check(problems, "set checked_at (the read time) where the tool or library printed health (a health or "
               "status column, ECC counters, a status call); otherwise leave it unset: the state is then unknown")

    @row("health.lost-device-isolated")
    def test_health_lost_device_isolated(self, accel: _Harness) -> None:
        faulted = accel.faulted(Fault.DEVICE_LOST)
        if faulted is None:
            pytest.skip("no fault hook: set ConformanceSuite.lose_device or faulted_config, or implement "
                        "FaultInjector on the backend")
        backend, ids, lost = faulted
        others = [i for i in ids if i != lost]
        problems = []
        try:
            after = backend.inventory()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"inventory() raised {_describe(exc)} after {lost} was lost")
        else:
            missing = sorted(set(others) - set(_device_ids(after)))
            if missing:
                problems.append(f"inventory() after losing {lost} also dropped {missing}")
        try:
            health = backend.health()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"health() raised {_describe(exc)} after {lost} was lost")
        else:
            h = health.get(lost)
            if h is None or h.operational is not Operational.LOST or h.state is not HealthState.UNHEALTHY:
                shown = f"{h.operational.value}/{h.state.value}" if h else "absent"
                problems.append(f"the lost device reads {shown}, not lost/unhealthy")
            for o in others:
                if o not in health or health[o].operational is Operational.LOST:
                    problems.append(f"{o} reads lost or absent in health() although only {lost} was lost")
        if others and accel.require_plugin().info.declares(Capability.TELEMETRY):
            try:
                samples = backend.telemetry(others)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"telemetry({others[:2]}...) raised {_describe(exc)} after {lost} was lost")
            else:
                got_ids = sorted(s.device_id for s in samples)
                if got_ids != sorted(others):
                    problems.append(f"telemetry of the other devices answered for {got_ids}")
            try:
                everything = backend.telemetry()
            except DeviceLostError:
                pass  # allowed: asking for the lost device explicitly or implicitly may raise it
            except Exception as exc:  # noqa: BLE001
                problems.append(f"telemetry() raised {_describe(exc)} after {lost} was lost")
            else:
                missing = sorted(set(others) - {s.device_id for s in everything})
                if missing:
                    problems.append(f"telemetry() after losing {lost} has no samples for {missing}")
        _check(problems, "catch the vendor's GPU_IS_LOST per device, report Operational.LOST for it and keep "
                         "answering for the others")

    @row("health.vendor-codes")
    def test_health_vendor_codes(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        inv = accel.inventory
        vendors = {d.id: d.vendor for d in inv.devices}
        health = accel.call("health()", accel.backend.health)
        problems = []
        codes = 0
        for dev_id, h in [*((d.id, d.health) for d in inv.devices), *health.items()]:
            for cond in h.conditions:
                if cond.vendor_code is None:
                    continue
                codes += 1
                prefix = cond.vendor_code.split(".", 1)[0]
                if dev_id in vendors and prefix != vendors[dev_id]:
                    problems.append(f"{dev_id}: vendor code {cond.vendor_code!r} does not start with "
                                    f"{vendors[dev_id]!r}")
        request.node.user_properties.append(("accel_measured", f"{codes} vendor codes checked"))
        _check(problems, "write codes as '<vendor>.<kind>:<code>', e.g. 'nvidia.xid:79', 'huawei.npu:0x80E18401'")

    # == telemetry ==========================================================================
    def _samples(self, accel: _Harness, backend: Backend | None = None) -> tuple[Telemetry, ...]:
        b = backend or accel.backend
        samples = accel.call("telemetry()", b.telemetry)
        bad = [type(s).__name__ for s in samples if not isinstance(s, Telemetry)]
        if bad:
            _fail([f"telemetry() returned {bad[0]} objects"], "return accel.model.Telemetry samples")
        return samples

    @row("telemetry.one-per-device")
    def test_telemetry_one_per_device(self, accel: _Harness) -> None:
        ids = _device_ids(accel.inventory)
        samples = self._samples(accel)
        got = [s.device_id for s in samples]
        problems = []
        if sorted(got) != sorted(ids):
            problems.append(f"telemetry() answered for {sorted(got)}, the inventory has {sorted(ids)}")
        if ids:
            one = accel.call(f"telemetry(ids=[{ids[-1]!r}])", lambda: accel.backend.telemetry([ids[-1]]))
            if [s.device_id for s in one] != [ids[-1]]:
                problems.append(f"telemetry(ids=[{ids[-1]!r}]) answered for {[s.device_id for s in one]}")
        _check(problems, "return exactly one Telemetry per requested device id")

    @row("telemetry.units-sane")
    def test_telemetry_units_sane(self, accel: _Harness) -> None:
        totals = {d.id: d.memory_total_bytes for d in accel.inventory.devices}
        problems = []
        for s in self._samples(accel):
            if s.power_watts is not None and s.power_watts > 3000:
                problems.append(f"{s.device_id}: power {s.power_watts} W (milliwatts?)")
            temps = dict(s.temperatures_celsius)
            if s.temperature_celsius is not None:
                temps["main"] = s.temperature_celsius
            for name, t in temps.items():
                if not -40 <= t <= 150:
                    problems.append(f"{s.device_id}: temperature {name} {t} C")
            for name, hz in s.clocks_hertz.items():
                if not 10**6 <= hz <= 10**11:
                    problems.append(f"{s.device_id}: clock {name} {hz} Hz (MHz?)")
            total = totals.get(s.device_id)
            for name in ("memory_used_bytes", "memory_free_bytes"):
                value = getattr(s, name)
                if value is not None and total is not None and value > total:
                    problems.append(f"{s.device_id}: {name} {value} > device total {total} (MiB vs bytes?)")
        _check(problems, "convert to SI base units: watts, degrees Celsius, hertz, bytes")

    @row("telemetry.counters-monotonic")
    def test_telemetry_counters_monotonic(self, accel: _Harness) -> None:
        first = {s.device_id: s for s in self._samples(accel)}
        second = {s.device_id: s for s in self._samples(accel)}
        problems = []
        for dev_id, a in first.items():
            b = second.get(dev_id)
            if b is None:
                continue
            if b.timestamp < a.timestamp:
                problems.append(f"{dev_id}: timestamp went back from {a.timestamp} to {b.timestamp}")
            for name in _MONOTONIC:
                va, vb = getattr(a, name), getattr(b, name)
                if va is not None and vb is not None and vb < va:
                    problems.append(f"{dev_id}: {name} went from {va} to {vb}")
            links_a = {c.link: c for c in a.links}
            for cb in b.links:
                ca = links_a.get(cb.link)
                for name in _LINK_COUNTERS if ca is not None else ():
                    va, vb = getattr(ca, name), getattr(cb, name)
                    if va is not None and vb is not None and vb < va:
                        problems.append(f"{dev_id} link {cb.link}: {name} went from {va} to {vb}")
        _check(problems, "report the vendor's cumulative counters (never deltas, never reset on read)")

    @row("telemetry.unsupported-listed")
    def test_telemetry_unsupported_listed(self, accel: _Harness) -> None:
        info = accel.require_plugin().info
        problems = []
        for s in self._samples(accel):
            for cap, name in _TELEMETRY_FIELDS.items():
                value = getattr(s, name)
                if info.declares(cap):
                    if _empty(value) and name not in s.unsupported:
                        problems.append(f"{s.device_id}: '{cap.value}' is declared but {name} is empty and not "
                                        "listed unsupported")
                elif not _empty(value):
                    problems.append(f"{s.device_id}: {name}={value!r} but '{cap.value}' is not declared")
                elif name not in s.unsupported:
                    problems.append(f"{s.device_id}: {name} is None but not in Telemetry.unsupported")
        _check(problems, "declare the capability and report the value, or list the field in Telemetry.unsupported")

    # == errors =============================================================================
    @row("errors.unknown-id")
    def test_errors_unknown_id(self, accel: _Harness) -> None:
        bogus = "accel-conformance:no-such-device"
        problems = []
        for name, fn in (("telemetry", accel.backend.telemetry), ("health", accel.backend.health)):
            try:
                fn([bogus])
            except DeviceError as exc:
                if not exc.code:
                    problems.append(f"{name}([{bogus!r}]) raised {type(exc).__name__} without a code")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{name}([{bogus!r}]) raised {_describe(exc)}, not accel.errors.DeviceError")
            else:
                problems.append(f"{name}([{bogus!r}]) returned instead of raising DeviceError")
        _check(problems, "check requested ids against the inventory and raise DeviceError(device_id=...)")

    @row("errors.no-vendor-exception")
    def test_errors_no_vendor_exception(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        backend = accel.open()
        problems: list[str] = []

        def attempt(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001
                if not _is_clean_error(exc):
                    problems.append(f"{what} raised {_describe(exc)}")

        bad_ids: list[list[str]] = [[""], ["accel-conformance:no-such-device"], ["0"], ["x" * 300]]
        for ids in bad_ids:
            attempt(f"telemetry({ids!r:.40})", lambda ids=ids: backend.telemetry(ids))  # type: ignore[misc]
            attempt(f"health({ids!r:.40})", lambda ids=ids: backend.health(ids))  # type: ignore[misc]
            if isinstance(backend, SupportsProcesses):
                attempt(f"processes({ids!r:.40})", lambda ids=ids: backend.processes(ids))  # type: ignore[misc]
        if isinstance(backend, SupportsEvents):
            attempt("poll_events(timeout_s=0)", lambda: backend.poll_events(0.0))
        if isinstance(backend, SupportsPartitions):
            attempt("partitions()", backend.partitions)
            attempt("partition_profiles()", backend.partition_profiles)
        odd = BackendConfig(options={**accel.config.options, "accel-conformance-unknown-option": object()},
                            sysfs_root=accel.config.sysfs_root, dev_root=accel.config.dev_root,
                            runner=accel.config.runner)
        attempt("probe(config with an unknown option)", lambda: plugin.probe(odd))

        def open_odd() -> None:
            plugin.open(odd).close()

        attempt("open(config with an unknown option)", open_odd)
        attempt("close()", backend.close)
        attempt("inventory() after close()", backend.inventory)
        attempt("telemetry() after close()", backend.telemetry)
        attempt("health() after close()", backend.health)
        _check(problems, "map every vendor exception to accel.errors at the plugin's boundary module "
                         "(raise AccelError subclasses, keep the cause with 'from exc')")

    # == lifecycle ==========================================================================
    @row("lifecycle.close-idempotent")
    def test_lifecycle_close_idempotent(self, accel: _Harness) -> None:
        backend = accel.open()
        accel.call("inventory()", backend.inventory)
        accel.call("close()", backend.close)
        accel.call("a second close()", backend.close)
        again = accel.open()
        accel.call("inventory() after reopening", again.inventory)
        accel.call("close() of the reopened backend", again.close)

    @row("lifecycle.context-manager")
    def test_lifecycle_context_manager(self, accel: _Harness) -> None:
        plugin = accel.require_plugin()
        problems = []
        closes: list[int] = []

        class Boom(Exception):
            pass

        try:
            with plugin.open(accel.config) as backend:
                original = backend.close

                def counted() -> None:
                    closes.append(1)
                    original()

                backend.close = counted  # type: ignore[method-assign]
                accel.call("inventory() inside 'with'", backend.inventory)
                raise Boom
        except Boom:
            pass
        except Exception as exc:  # noqa: BLE001
            problems.append(f"leaving 'with' after an error raised {_describe(exc)} instead of the original error")
        else:
            problems.append("__exit__ swallowed the exception raised inside 'with'")
        if not closes:
            problems.append("__exit__ did not call close()")
        with plugin.open(accel.config) as b2:
            entered = b2
        if not isinstance(entered, Backend):
            problems.append(f"__enter__ returned {type(entered).__name__}, not the backend")
        _check(problems, "inherit Backend.__enter__/__exit__ (return self, call close(), return None)")

    @row("lifecycle.close-after-failure")
    def test_lifecycle_close_after_failure(self, accel: _Harness) -> None:
        problems = []
        backend = accel.open()
        with contextlib.suppress(Exception):
            backend.telemetry(["accel-conformance:no-such-device"])
        try:
            backend.close()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"close() after a failed call raised {_describe(exc)}")
        faulted = accel.faulted(Fault.DEVICE_LOST)
        if faulted is not None:
            other = faulted[0]
            with contextlib.suppress(Exception):
                other.health()  # let the backend notice the loss first
            try:
                other.close()
            except Exception as exc:  # noqa: BLE001
                problems.append(f"close() after a device was lost raised {_describe(exc)}")
        _check(problems, "make close() release what was acquired and ignore what already failed")

    @row("lifecycle.concurrent-reads")
    def test_lifecycle_concurrent_reads(self, accel: _Harness) -> None:
        backend = accel.backend
        info = accel.require_plugin().info
        calls: list[tuple[str, Callable[[], object]]] = [("inventory()", backend.inventory),
                                                         ("health()", backend.health)]
        if info.declares(Capability.TELEMETRY):
            calls.append(("telemetry()", backend.telemetry))
        errors: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(len(calls) * 2)

        def work(name: str, fn: Callable[[], object]) -> None:
            try:
                barrier.wait(timeout=30)
                for _ in range(3):
                    fn()
            except Exception as exc:  # noqa: BLE001
                with lock:
                    errors.append(f"{name} in a thread raised {_describe(exc)}")

        pool = [threading.Thread(target=work, args=c, daemon=True) for c in calls * 2]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=120)
        _check(sorted(set(errors)), "guard the vendor handle with a lock (NVML and most SMI libraries are not "
                                    "thread-safe per handle)")

    # == cost ===============================================================================
    def _snapshot_cost(self, accel: _Harness) -> tuple[int | None, str]:
        backend = accel.open()
        runner = accel.config.runner
        before_runner = runner.call_count if runner is not None else None
        before_calls = backend.vendor_call_count if isinstance(backend, ReportsCost) else None
        inv = accel.call("inventory()", backend.inventory)
        measured: list[tuple[int, str]] = []
        if runner is not None and before_runner is not None:
            measured.append((runner.call_count - before_runner, "tool runs counted by the runner"))
        if isinstance(backend, ReportsCost) and before_calls is not None:
            measured.append((backend.vendor_call_count - before_calls, "vendor calls (vendor_call_count)"))
        reported = [s.tool_invocations for s in inv.sources if s.tool_invocations is not None]
        if reported:
            measured.append((sum(reported), "tool invocations in SourceInfo"))
        if not measured:
            return None, "not reported"
        n, how = max(measured)
        return n, how

    @row("cost.reported")
    def test_cost_reported(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        n, how = self._snapshot_cost(accel)
        if n is None:
            _fail(["a snapshot's cost is not visible: no runner in the config, no vendor_call_count, no "
                   "SourceInfo.tool_invocations"], "count vendor calls and report them in SourceInfo.tool_invocations")
        request.node.user_properties.append(("accel_measured", f"{n} {how}"))

    @row("cost.snapshot-budget")
    def test_cost_snapshot_budget(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        n, how = self._snapshot_cost(accel)
        if n is None:
            pytest.skip("the backend does not report its cost (see cost.reported)")
        request.node.user_properties.append(("accel_measured", f"{n} {how} (budget {self.snapshot_budget})"))
        if n > self.snapshot_budget:
            _fail([f"one inventory() cost {n} {how}"],
                  f"batch vendor queries (one 'smi -q' per snapshot, not per field); budget {self.snapshot_budget}")
