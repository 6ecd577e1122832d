"""discovery.entry-point-light measures the import in a fresh interpreter, not only module names."""

from __future__ import annotations

from accel.conformance._isolation import import_in_child
from tests.conformance import conformance_slow_import


def test_a_slow_threaded_import_is_measured() -> None:
    rep = import_in_child("tests.conformance.conformance_slow_import", "PLUGIN")
    assert rep.import_error is None
    assert rep.import_s >= conformance_slow_import.IMPORT_SLEEP_S
    assert len(rep.threads_started) == 1
    assert rep.threads_alive == ("acme-watchdog",)
    # -X importtime names the culprit first, and no vendor module is involved.
    assert rep.slowest[0][0] == "tests.conformance.conformance_slow_import"
    assert rep.slowest[0][1] >= conformance_slow_import.IMPORT_SLEEP_S
    assert "accel.plugin" not in rep.own_modules  # loaded before the measurement: not charged


def test_a_light_plugin_is_within_the_default_budget() -> None:
    rep = import_in_child("accel.sim", "PLUGIN")
    assert rep.import_error is None
    assert rep.threads_started == () and rep.threads_alive == ()
    assert set(rep.own_modules) <= {"accel.sim", "accel.sim._faults"}
    assert rep.probe_status is not None and rep.probe_error is None
