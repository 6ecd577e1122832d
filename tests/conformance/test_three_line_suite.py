"""The README's three-line subclass certifies a plugin as fully as suite_for(): scenario and oracle.

``class TestX(ConformanceSuite): backend = ...; options = {"scenario": ...}`` finds the plugin's
own ``conformance.CONFORMANCE_SCENARIOS`` entry of that name through the entry point, so the
oracle rows, the fault rows and the counting runner are there without ``suite_for``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from accel.conformance import ConformanceSuite, Oracle, suite_for
from accel.plugin import BackendConfig
from tests.conformance._kit import example_plugin_path, run_suite_module

ORACLE_ROWS = ("inventory.oracle-devices", "memory.oracle-1pct")

THREE_LINES = """
from accel.conformance import ConformanceSuite, suite_for


class TestThreeLines(ConformanceSuite):
    backend = "{backend}"
    options = {{"{key}": "{scenario}"}}


TestSuiteFor = suite_for("{backend}", "{scenario}")
"""


def _runs(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["suite"].rsplit(".", 1)[-1]: run for run in results["runs"]}


def _statuses(run: dict[str, Any]) -> dict[str, str]:
    return {rid: r["status"] for rid, r in run["rows"].items()}


@pytest.mark.parametrize(("backend", "key", "scenario"), [("example", "scenario", "two-gpu"),
                                                          ("sim", "profile", "dgx-h100")])
def test_three_line_subclass_runs_the_plugins_oracle_rows(tmp_path: Path, backend: str, key: str,
                                                          scenario: str) -> None:
    source = THREE_LINES.format(backend=backend, key=key, scenario=scenario)
    rc, output, results = run_suite_module(tmp_path, source, pythonpath=example_plugin_path(tmp_path / "site"))
    assert results is not None, output[-3000:]
    assert rc == 0, output[-3000:]
    runs = _runs(results)
    assert len(runs) == 2, sorted(runs)
    three = runs.pop("TestThreeLines")
    (full,) = runs.values()  # suite_for's class, named after the scenario
    for rid in ORACLE_ROWS:
        assert three["rows"][rid]["status"] == "pass", three["rows"][rid]
    # The recorded/simulated faults and the counting runner come along too: nothing skips that
    # suite_for() runs.
    assert three["rows"]["health.lost-device-isolated"]["status"] == "pass"
    assert three["rows"]["discovery.probe-cheap"]["status"] == "pass"
    assert _statuses(three) == _statuses(full)


class _MyOracle(Oracle):
    def device_ids(self) -> frozenset[str] | None:
        return frozenset()


def test_what_the_subclass_sets_wins_over_the_scenario(tmp_path: Path) -> None:
    mine = _MyOracle()

    class TestOwn(ConformanceSuite):
        backend = "sim"
        options: ClassVar[dict[str, Any]] = {"profile": "dgx-h100", "seed": "7"}
        oracle = mine
        xfail: ClassVar[dict[str, str]] = {"cost.reported": "ours"}

        @classmethod
        def backend_config(cls, tmp_path: Path) -> BackendConfig:
            return BackendConfig(options={"profile": "dgx-h100"})

    TestOwn.adopt_plugin_scenario()
    assert TestOwn.oracle is mine
    assert TestOwn.backend_config(tmp_path).runner is None  # its own config, not the scenario's
    assert TestOwn.xfail == {"cost.reported": "ours"}
    assert TestOwn.faulted_config(tmp_path, next(iter(_faults())), 0) is not None  # not set: adopted

    class TestPlain(ConformanceSuite):
        backend = "sim"
        options: ClassVar[dict[str, Any]] = {"profile": "dgx-h100", "seed": "7"}

    TestPlain.adopt_plugin_scenario()
    assert TestPlain.oracle is not None and TestPlain.oracle.pci_bus_ids()
    config = TestPlain.backend_config(tmp_path)
    assert config.runner is not None and config.options == {"profile": "dgx-h100", "seed": "7"}
    assert (config.sysfs_root / "bus" / "pci" / "devices").is_dir()  # the scenario's fake sysfs


def _faults() -> list[Any]:
    from accel.conformance import Fault

    return list(Fault)


def test_no_scenario_of_that_name_leaves_the_class_alone() -> None:
    class TestRealHost(ConformanceSuite):
        backend = "sim"
        options: ClassVar[dict[str, Any]] = {"profile": "not-a-registered-profile"}

    TestRealHost.adopt_plugin_scenario()
    assert TestRealHost.oracle is None
    assert TestRealHost.backend_config(Path("/nonexistent")).options == {"profile": "not-a-registered-profile"}


def test_suite_for_classes_are_not_adopted_twice() -> None:
    cls = suite_for("sim", "dgx-h100")
    oracle = cls.oracle
    cls.adopt_plugin_scenario()
    assert cls.oracle is oracle and cls.__dict__["_accel_adopted"] is True


BROKEN_HOOK = {
    "__init__.py": "from tests.conformance.conformance_fake import PLUGIN\n",
    "conformance.py": "raise ImportError('acme_sdk is not installed')\n",
}


def test_a_broken_conformance_module_fails_every_row(tmp_path: Path) -> None:
    site = tmp_path / "site"
    package = site / "acme_broken_hook"
    package.mkdir(parents=True)
    for name, text in BROKEN_HOOK.items():
        (package / name).write_text(text)
    dist = site / "acme_broken_hook-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-broken-hook\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[accel.backends]\nacmebroken = acme_broken_hook:PLUGIN\n")
    source = THREE_LINES.split("\n\n\nTestSuiteFor")[0].format(backend="acmebroken", key="scenario",
                                                              scenario="four-gpu")
    rc, output, results = run_suite_module(tmp_path, source, pythonpath=[site])
    assert results is not None, output[-3000:]
    assert rc == 1, output[-3000:]
    (run,) = results["runs"]
    # Not a certification without the oracle: the error on every row (at setup, like a plugin
    # that cannot load).
    assert {r["status"] for r in run["rows"].values()} == {"error"}
    message = run["rows"]["inventory.oracle-devices"]["message"]
    assert "cannot read 'acmebroken''s conformance scenarios" in message
    assert "acme_sdk is not installed" in message
