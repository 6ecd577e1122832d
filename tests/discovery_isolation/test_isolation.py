"""Every kind of broken plugin is a report entry, and ``sim`` in the same session still reports in time.

The broken backend gets a deadline of :data:`DEADLINE` seconds (``call_timeout_s``); ``sim``
keeps the default.  "In time" is the deadline plus :data:`SLACK`, a generous allowance for a
loaded CI machine: the assertion is that nothing waits for the hung call, not a benchmark.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from accel.discovery import (
    CODE_DUPLICATE,
    CODE_INVALID_RETURN,
    CODE_TIMEOUT,
    DiscoveryReport,
    EntryStatus,
    Stage,
    call_deadline,
    discover,
    open_session,
)
from accel.errors import BackendUnavailableError, ConfigError, PluginLoadError
from accel.plugin import BackendConfig, register
from tests.discovery_isolation._plugins import GATE, TinyPlugin

from .conftest import WriteDist

DEADLINE = 0.5
SLACK = 5.0
SIM = BackendConfig(options={"profile": "dgx-h100"}, enrich_from_sysfs=False)
FAST = BackendConfig(call_timeout_s=DEADLINE, probe_timeout_s=DEADLINE, enrich_from_sysfs=False)
CONFIGS = {"sim": SIM, "broken": FAST}


@contextmanager
def within(limit: float = DEADLINE + SLACK) -> Iterator[None]:
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    assert elapsed < limit, f"took {elapsed:.2f} s, the deadline is {DEADLINE} s"


def _sim_reports(report: DiscoveryReport | None = None, **kwargs: Any) -> Any:
    """Open a session (over ``report`` or sim + broken); sim's 8 devices must be in its inventory."""
    session = open_session(CONFIGS, report=report, **kwargs) if report else open_session(CONFIGS, **kwargs)
    inv = session.inventory()
    assert sum(1 for d in inv.devices if d.vendor == "nvidia") == 8
    return session, inv


def _failed(report: DiscoveryReport, name: str, stage: Stage) -> Any:
    entry = report.entry(name)
    assert entry.status is EntryStatus.FAILED, entry
    assert entry.stage is stage, entry
    assert entry.error is not None and name in entry.reason
    return entry


# --- open and every read, hanging ----------------------------------------------------------


def test_open_that_hangs_fails_at_open_and_sim_still_reports() -> None:
    plugin = TinyPlugin("broken", "open")
    register("broken", lambda: plugin)
    with within():
        session, inv = _sim_reports(backends=["sim", "broken"])
        entry = _failed(session.report, "broken", Stage.OPEN)
        assert isinstance(entry.error, BackendUnavailableError) and entry.error.code == CODE_TIMEOUT
        assert f"open() did not return within {DEADLINE:g} s" in entry.reason
        assert "broken" not in session.backends
        assert not inv.complete and [p.backend for p in inv.problems] == ["broken"]
        session.close()


@pytest.mark.parametrize("method", ["inventory", "telemetry", "health", "close"])
def test_read_that_hangs_fails_once_and_the_backend_is_never_called_again(method: str) -> None:
    plugin = TinyPlugin("broken", method)
    register("broken", lambda: plugin)
    with within(DEADLINE + SLACK):
        session = open_session(CONFIGS, backends=["sim", "broken"])
        (backend,) = plugin.opened
        inv = session.inventory()
        telemetry = session.telemetry()
        health = session.health()
        session.close()
    assert sum(1 for d in inv.devices if d.vendor == "nvidia") == 8
    assert sum(1 for t in telemetry if t.device_id.startswith("nvidia")) == 8
    assert sum(1 for k in health if k.startswith("nvidia")) == 8
    entry = _failed(session.report, "broken", Stage.READ)
    assert entry.error is not None and entry.error.code == CODE_TIMEOUT
    assert f"{method}() did not return within {DEADLINE:g} s; accel no longer calls it" in entry.reason
    # Called up to the hang, then never again (close() of the session did not call it either).
    assert backend.calls[-1] == method and backend.calls.count(method) == 1
    assert "broken" not in session.backends


def test_a_hung_backend_stays_abandoned_after_its_thread_returns() -> None:
    plugin = TinyPlugin("broken", "inventory")
    register("broken", lambda: plugin)
    with open_session(CONFIGS, backends=["sim", "broken"]) as session:
        session.inventory()
        GATE.set()  # the hung call now returns (late): its value is dropped
        time.sleep(0.05)
        inv = session.inventory()
        assert {d.vendor for d in inv.devices} == {"nvidia"}
        assert plugin.opened[0].calls == ["inventory"]
        assert session.report.entry("broken").error.code == CODE_TIMEOUT  # type: ignore[union-attr]


def test_several_hung_backends_cost_one_deadline_each() -> None:
    plugins = {name: TinyPlugin(name, "inventory") for name in ("b1", "b2", "b3")}
    for name, plugin in plugins.items():
        register(name, lambda p=plugin: p)  # type: ignore[misc]
    configs = {"sim": SIM, **{name: FAST for name in plugins}}
    with within(3 * DEADLINE + SLACK), open_session(configs, backends=["sim", *plugins]) as session:
        inv = session.inventory()
        assert {d.vendor for d in inv.devices} == {"nvidia"}
        assert sorted(p.backend for p in inv.problems) == ["b1", "b2", "b3"]
        session.inventory()  # the second read does not wait for them again
        session.health()


def test_telemetry_of_some_ids_with_a_hung_inventory() -> None:
    register("broken", lambda: TinyPlugin("broken", "inventory"))
    with within(), open_session(CONFIGS, backends=["sim", "broken"]) as session:
        ids = [d.id for d in session.inventories()["sim"].devices][:2]
        assert [t.device_id for t in session.telemetry(ids)] == ids
        assert _failed(session.report, "broken", Stage.READ).error.code == CODE_TIMEOUT


# --- wrong return types --------------------------------------------------------------------


def test_open_returning_a_non_backend_is_a_failed_entry() -> None:
    register("broken", lambda: TinyPlugin("broken", "open", how="junk"))
    with within():
        session, _ = _sim_reports(backends=["sim", "broken"])
        entry = _failed(session.report, "broken", Stage.OPEN)
        assert entry.error is not None and entry.error.code == CODE_INVALID_RETURN
        assert entry.reason == "backend 'broken': open() returned a str, not a Backend"
        session.close()


@pytest.mark.parametrize(
    ("method", "how", "message"),
    [
        ("inventory", "junk", "inventory() returned a str, not a HostInventory"),
        ("inventory", "construct", "inventory() returned an invalid HostInventory: invalid inventory: "),
        ("telemetry", "junk", "telemetry() returned a tuple holding a str, not only Telemetry"),
        ("health", "junk", "health() returned a mapping with a str -> str item, not str -> Health"),
    ],
)
def test_read_returning_the_wrong_type_is_a_failed_entry(method: str, how: str, message: str) -> None:
    register("broken", lambda: TinyPlugin("broken", method, how=how))
    with within():
        session, _ = _sim_reports(backends=["sim", "broken"])
        session.telemetry()
        session.health()
        entry = _failed(session.report, "broken", Stage.READ)
        assert entry.error is not None and entry.error.code == CODE_INVALID_RETURN
        assert f"backend 'broken': {message}" in entry.reason
        session.close()


def test_read_raising_systemexit_is_a_failed_entry() -> None:
    register("broken", lambda: TinyPlugin("broken", "inventory", how="systemexit"))
    with within():
        session, _ = _sim_reports(backends=["sim", "broken"])
        entry = _failed(session.report, "broken", Stage.READ)
        # Backend's outer guard types it first (issue 14), naming the method.
        assert entry.reason == "backend 'broken': inventory() failed: SystemExit: 3"
        assert isinstance(entry.error, BackendUnavailableError) and isinstance(entry.error.__cause__, SystemExit)
        session.close()


def test_open_raising_systemexit_is_a_failed_entry() -> None:
    register("broken", lambda: TinyPlugin("broken", "open", how="systemexit"))
    with within():
        session, _ = _sim_reports(backends=["sim", "broken"])
        assert _failed(session.report, "broken", Stage.OPEN).reason == "opening backend 'broken' failed: SystemExit: 7"
        session.close()


# --- probe and factory -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "shown"),
    [
        ("systemexit", "SystemExit: 4"),
        ("keyboardinterrupt", "KeyboardInterrupt"),
        ("generatorexit", "GeneratorExit: closed"),
        ("custom", "_Custom: plugin-defined base exception"),
    ],
)
def test_probe_raising_a_base_exception_is_a_failed_entry(how: str, shown: str) -> None:
    register("broken", lambda: TinyPlugin("broken", "probe", how=how))
    with within():
        report = discover(CONFIGS, backends=["sim", "broken"])
        entry = report.entry("broken")
        assert entry.status is EntryStatus.FAILED and entry.stage is Stage.PROBE
        assert entry.reason == f"probe raised {shown}"
        _sim_reports(report)[0].close()


def test_factory_that_hangs_is_a_failed_load() -> None:
    def factory() -> object:
        GATE.wait(60)
        return TinyPlugin("broken")

    register("broken", factory)
    with within():
        report = discover(CONFIGS, backends=["sim", "broken"])
        entry = _failed(report, "broken", Stage.LOAD)
        assert isinstance(entry.error, PluginLoadError) and entry.error.code == CODE_TIMEOUT
        assert f"creating backend 'broken' did not finish within {DEADLINE:g} s" in entry.reason
        _sim_reports(report)[0].close()


@pytest.mark.parametrize("exc", [SystemExit(9), KeyboardInterrupt()])
def test_factory_raising_a_base_exception_is_a_failed_load(exc: BaseException) -> None:
    def factory() -> object:
        raise exc

    register("broken", factory)
    report = discover(CONFIGS, backends=["sim", "broken"])
    entry = _failed(report, "broken", Stage.LOAD)
    assert entry.reason.startswith(f"creating backend 'broken' failed: {type(exc).__name__}")
    _sim_reports(report)[0].close()


def test_info_that_is_not_plugin_info_is_rejected() -> None:
    plugin = TinyPlugin("broken")
    plugin.info = {"name": "broken"}  # type: ignore[assignment]
    register("broken", lambda: plugin)
    report = discover(CONFIGS, backends=["sim", "broken"])
    entry = report.entry("broken")
    assert entry.status is EntryStatus.REJECTED and entry.stage is Stage.LOAD
    assert entry.reason == "backend 'broken': info is a dict, not a PluginInfo"


# --- entry points: import that raises BaseException or hangs --------------------------------


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("raise SystemExit(7)\n", "SystemExit: 7"),
        ("import sys\nsys.exit('no vendor library')\n", "SystemExit: no vendor library"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    ],
)
def test_entry_point_whose_import_raises_a_base_exception(write_dist: WriteDist, source: str, shown: str) -> None:
    write_dist("accel-fake-exit", "1.0", {"broken": "accel_fake_exit:PLUGIN"}, {"accel_fake_exit": source})
    with within():
        report = discover(CONFIGS, backends=["sim", "broken"])
        entry = _failed(report, "broken", Stage.LOAD)
        assert entry.reason == f"importing backend 'broken' failed: {shown}"
        assert entry.origin == "entry-point"
        session, _ = _sim_reports(report)
        session.close()


def test_entry_point_whose_import_hangs(write_dist: WriteDist) -> None:
    source = "from tests.discovery_isolation._plugins import hang\nhang()\nPLUGIN = None\n"
    write_dist("accel-fake-hang", "1.0", {"broken": "accel_fake_hang:PLUGIN"}, {"accel_fake_hang": source})
    with within():
        report = discover(CONFIGS, backends=["sim", "broken"])
        entry = _failed(report, "broken", Stage.LOAD)
        assert entry.error is not None and entry.error.code == CODE_TIMEOUT
        assert f"importing backend 'broken' did not finish within {DEADLINE:g} s" in entry.reason
        _sim_reports(report)[0].close()
        # A second discovery in the same process meets the same half-imported module: the same entry.
        again = discover(CONFIGS, backends=["sim", "broken"])
    assert again.entry("broken").error.code == CODE_TIMEOUT  # type: ignore[union-attr]


def test_entry_point_whose_plugin_hangs_on_open_from_metadata(write_dist: WriteDist) -> None:
    source = "from tests.discovery_isolation._plugins import TinyPlugin\nPLUGIN = TinyPlugin('broken', 'open')\n"
    write_dist("accel-fake-open", "1.0", {"broken": "accel_fake_open:PLUGIN"}, {"accel_fake_open": source})
    with within():
        session, _ = _sim_reports(backends=["sim", "broken"])
        assert _failed(session.report, "broken", Stage.OPEN).error.code == CODE_TIMEOUT  # type: ignore[union-attr]
        session.close()


# --- duplicate names -------------------------------------------------------------------------


@pytest.mark.parametrize("env", [None, "sim", "sim,-nvidia"])
def test_a_second_distribution_registering_sim_is_rejected_and_sim_stays(
    write_dist: WriteDist, monkeypatch: pytest.MonkeyPatch, env: str | None
) -> None:
    if env is None:
        monkeypatch.delenv("ACCEL_BACKENDS", raising=False)
    else:
        monkeypatch.setenv("ACCEL_BACKENDS", env)
    evil = "raise RuntimeError('this module must never be imported')\n"
    write_dist("accel-evil", "6.6", {"sim": "accel_fake_evil:PLUGIN"}, {"accel_fake_evil": evil})
    with within():
        report = discover({"sim": SIM})
        shadow = report.entry("sim@accel-evil")
        assert shadow.status is EntryStatus.REJECTED and shadow.stage is Stage.LOAD
        assert shadow.error is not None and shadow.error.code == CODE_DUPLICATE
        assert "backend 'sim' is also registered by accel-evil 6.6 (accel_fake_evil:PLUGIN)" in shadow.reason
        assert "accel-sdk" in shadow.reason and "accel.sim:PLUGIN" in shadow.reason
        assert report.entry("sim").status is EntryStatus.PRESENT
        assert "accel_fake_evil" not in sys.modules
        with open_session({"sim": SIM}, report=report) as session:
            inv = session.inventory()
            assert len(inv.devices) == 8
            assert inv.complete  # the in-tree sim answered; the shadow is rejected, not missing


@pytest.mark.parametrize("env", [None, "sim,acme"])
def test_a_name_of_two_third_party_distributions_loads_neither(
    write_dist: WriteDist, monkeypatch: pytest.MonkeyPatch, env: str | None
) -> None:
    if env is None:
        monkeypatch.delenv("ACCEL_BACKENDS", raising=False)
    else:
        monkeypatch.setenv("ACCEL_BACKENDS", env)
    never = "raise RuntimeError('this module must never be imported')\n"
    write_dist("accel-fake-a", "1.0", {"acme": "accel_fake_a:PLUGIN"}, {"accel_fake_a": never})
    write_dist("accel-fake-b", "2.0", {"acme": "accel_fake_b:PLUGIN"}, {"accel_fake_b": never})
    with within():
        report = discover({"sim": SIM})
        entry = _failed(report, "acme", Stage.LOAD)
        assert entry.error is not None and entry.error.code == CODE_DUPLICATE
        assert "is registered by 2 distributions" in entry.reason
        assert "accel-fake-a 1.0 (accel_fake_a:PLUGIN)" in entry.reason
        assert "accel-fake-b 2.0 (accel_fake_b:PLUGIN)" in entry.reason
        assert "none of them is loaded" in entry.reason
        assert not {"accel_fake_a", "accel_fake_b"} & set(sys.modules)
        with open_session({"sim": SIM}, report=report) as session:
            inv = session.inventory()
            assert len(inv.devices) == 8
            assert not inv.complete and [p.backend for p in inv.problems] == ["acme"]


def test_the_same_entry_point_declared_twice_is_not_a_conflict(write_dist: WriteDist) -> None:
    write_dist("accel-fake-copy", "1.0", {"sim": "accel.sim:PLUGIN"}, {})
    report = discover({"sim": SIM}, backends=["sim"])
    assert [e.name for e in report.entries if e.status is not EntryStatus.DISABLED] == ["sim"]
    assert report.entry("sim").status is EntryStatus.PRESENT


def test_a_duplicate_denied_by_accel_backends_is_only_disabled(
    write_dist: WriteDist, monkeypatch: pytest.MonkeyPatch
) -> None:
    never = "raise RuntimeError('never imported')\n"
    write_dist("accel-fake-a", "1.0", {"acme": "accel_fake_a:PLUGIN"}, {"accel_fake_a": never})
    write_dist("accel-fake-b", "2.0", {"acme": "accel_fake_b:PLUGIN"}, {"accel_fake_b": never})
    monkeypatch.setenv("ACCEL_BACKENDS", "-acme")
    report = discover({"sim": SIM})
    assert report.entry("acme").status is EntryStatus.DISABLED


# --- deadlines and the caller's own Ctrl-C ---------------------------------------------------


def test_call_deadline_derives_from_the_tool_timeout() -> None:
    assert call_deadline(BackendConfig()) == 21.0
    assert call_deadline(BackendConfig(tool_timeout_s=0.5)) == 2.0
    assert call_deadline(BackendConfig(call_timeout_s=3.0)) == 3.0
    assert call_deadline(BackendConfig(call_timeout_s=float("inf"))) == float("inf")
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="call_timeout_s must be a positive number of seconds"):
            call_deadline(BackendConfig(call_timeout_s=bad))


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals go to the main thread")
def test_a_real_ctrl_c_while_waiting_on_a_plugin_still_interrupts() -> None:
    """SIGINT reaches the waiting (main) thread, never the plugin's worker: it stays an interrupt."""
    register("broken", lambda: TinyPlugin("broken", "open"))
    slow = {"sim": SIM, "broken": BackendConfig(call_timeout_s=30.0, enrich_from_sysfs=False)}
    report = discover(slow, backends=["sim", "broken"])
    # As in a foreground process: a run started in the background by a shell without job
    # control inherits SIGINT ignored, and then no Ctrl-C would arrive at all.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            open_session(slow, report=report)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 10.0
