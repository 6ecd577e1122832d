"""Conformance rows of section ``discovery`` (Discovery): How accel finds and probes the plugin before opening it."""

from __future__ import annotations

import re
import threading

import pytest

from accel.plugin import (
    SUPPORTED_API_VERSIONS,
    BackendConfig,
    Capability,
    ProbeResult,
    ProbeStatus,
    SupportsEvents,
    SupportsPartitions,
    SupportsProcesses,
    negotiate,
)

from .._isolation import vendor_modules_in
from .._requirements import row
from .._watch import ToolWatch
from ._base import SuiteBase
from ._harness import _Harness
from ._helpers import _VERSION, _check, _describe, _fail

__all__ = ["DiscoveryRows"]


class DiscoveryRows(SuiteBase):
    """The ``discovery.*`` rows of requirements.json."""

    @row("discovery.entry-point-light")
    def test_discovery_entry_point_light(self, accel: _Harness, request: pytest.FixtureRequest) -> None:
        rep = accel.isolation()
        if rep.import_error:
            _fail([f"importing {rep.target} failed: {rep.import_error}"], "the entry point must import cleanly")
        # The wall time is compared with the budget but not recorded: the matrix stays reproducible.
        request.node.user_properties.append(
            ("accel_measured", f"{len(rep.own_modules)} modules, {len(rep.threads_started)} threads at import"))
        problems = []
        # Measured: what the import costs every process that discovers backends.
        slowest = ", ".join(f"{name} {secs:.2f} s" for name, secs in rep.slowest)
        if rep.import_s > self.import_budget_s:
            problems.append(f"importing {rep.target} took {rep.import_s:.2f} s (budget {self.import_budget_s:g} s"
                            + (f"; slowest: {slowest})" if slowest else ")"))
        if len(rep.threads_started) > self.import_thread_budget:
            alive = f", {len(rep.threads_alive)} still running ({', '.join(rep.threads_alive)})" \
                if rep.threads_alive else ""
            problems.append(f"importing {rep.target} started {len(rep.threads_started)} thread(s) "
                            f"({', '.join(rep.threads_started)}){alive} (budget {self.import_thread_budget})")
        if len(rep.own_modules) > self.import_module_budget:
            problems.append(f"importing {rep.target} loaded {len(rep.own_modules)} modules besides accel.plugin "
                            f"(budget {self.import_module_budget}; slowest: {slowest})")
        # The name denylist stays: one vendor module is a failure even when it is fast.
        bad = vendor_modules_in(rep.after_import, self.vendor_modules)
        if bad:
            problems.append(f"importing {rep.target} loaded {', '.join(bad)}")
        _check(problems, "import the vendor library inside open() (or a boundary module it imports), never at module "
                         "level of the entry-point package; start threads and initialise drivers in open(), not at "
                         "import")

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
        # Counted three ways, the largest wins: the config's runner (any Runner), every accel
        # runner's audit event (a replay plugin's own ReplayRunner: a replayed run is a tool run),
        # and processes started by other means.  Reading the config's runner alone skipped every
        # plugin that builds its runner from an option.
        runner = accel.config.runner
        before = runner.call_count if runner is not None else 0
        with ToolWatch() as watch:
            accel.probe()
        by_runner = runner.call_count - before if runner is not None else 0
        spent = max(by_runner, watch.count)
        started = f", {len(watch.processes)} processes started" if watch.processes else ""
        request.node.user_properties.append(("accel_measured", f"{spent} tool runs per probe{started}"))
        if spent > self.probe_budget:
            seen = [" ".join(argv) for argv in watch.tool_runs] or list(watch.processes)
            if not seen and runner is not None:  # a Runner that is not one of accel's raises no event
                seen = [" ".join(argv) for argv in runner.calls[-spent:]]
            _fail([f"probe() ran {spent} vendor tools ({'; '.join(seen[:5])})"],
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
