"""The suite's base: the class attributes, hooks and fixtures every section mixin relies on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from accel.plugin import CAPABILITY_DOCS, Backend, BackendConfig, BackendPlugin

from .. import _records
from .._hooks import Fault, Oracle
from .._isolation import VENDOR_MODULES
from .._requirements import REQUIREMENTS, ROW_ATTR
from ._harness import _Harness
from ._helpers import NOT_APPLICABLE, _describe

if TYPE_CHECKING:
    from .._scenarios import Scenario

__all__ = ["SuiteBase"]


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

