"""Cambricon's native path (CNDev): the fake rendered from each scenario, the signature table,
the read=native|cli|auto choice, and the differential test against the cnmon path."""

from __future__ import annotations

import ctypes
from datetime import UTC, datetime
from pathlib import Path

import pytest

from accel.errors import ConfigError, DriverError, LibraryNotFoundError
from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.plugins.cambricon import PLUGIN
from accel.plugins.cambricon import _native as n
from accel.plugins.cambricon._native_fake import FakeCndev, fake_of_replay
from accel.toolkit import NativeLibrary, choose_read_path, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner, SubprocessRunner

PKG = "accel.plugins.cambricon"
SCENARIOS = scenario_names(PKG)


def shipped_scenario_runner(pkg: str, name: str) -> ReplayRunner:
    return ReplayRunner(scenario_path(pkg, name))


#: What one path sees and the other cannot, by the compared field (docs/native-gaps.md).
GAPS = {
    "health": "cnmon's table has no health column: the CLI path earns health only from a numeric "
    "Ecc-Error; CNDev answers cndevGetCardHealthStateV2 on every card",
}


def open_backend(scenario: str, read: str):  # type: ignore[no-untyped-def]
    return PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": read}))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str) -> None:
    """Native and CLI paths agree on devices, ids, memory, topology and health wherever both
    see the value; what one path alone sees is a documented gap."""
    cli, native = open_backend(scenario, "cli"), open_backend(scenario, "native")
    try:
        a, b = cli.inventory(), native.inventory()
    finally:
        cli.close()
        native.close()
    result = compare_paths(a, b)
    if scenario != "mlu370-x8-faults":  # that one adds what only CNDev sees
        assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [d.id for d in a.devices] == [d.id for d in b.devices]
    assert a.sources[0].api == "cnmon" and a.sources[0].tool_invocations == 2  # cnmon, cnmon topo -m
    assert b.sources[0].api == "libcndev.so" and b.sources[0].tool_invocations == 0
    assert "path=native (read=native: a fake libcndev.so of the replay)" in (b.sources[0].detail or "")
    assert "path=cli (read=cli)" in (a.sources[0].detail or "")


def test_signature_table_after_full_read() -> None:
    runner = shipped_scenario_runner(PKG, "mlu370-x8-faults")
    fake = fake_of_replay(runner)
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_cndev(lib)
    events = n.EventReader(lib).poll(0.0, {0: "a", 1: "b"}, datetime.now(UTC))
    assert len(read.readings) == 2 and len(events) == 1
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    # Every declared function was exercised except the teardown ones.
    assert set(n.TABLE.functions) - set(lib.calls) == {"cndevRelease", "cndevEventHandleDestroy"}
    for fn in n.TABLE.functions.values():
        assert fn.source == n.SOURCE


def test_struct_layouts_match_the_header() -> None:
    """Sizes follow from cndev.h's field lists (LP64: unsigned long is 8 bytes)."""
    assert ctypes.sizeof(n.PCIeInfoV2) == 4 * 2 + 2 * 2 + 4 * 4 + 2 * 2 + 4 * 8
    assert ctypes.sizeof(n.MemoryInfoV2) == 8 * 6 + 8 * 16
    assert ctypes.sizeof(n.DevicePowerInfo) == 4 * 21
    assert ctypes.sizeof(n.CardHealthStateV2) == 4 * 5 + 64 * (8 + 512 + 5 * 4) + 4 * 8


def test_native_only_scenario_sees_ecc_incident_and_event() -> None:
    native = open_backend("mlu370-x8-faults", "native")
    cli = open_backend("mlu370-x8-faults", "cli")
    try:
        inv = native.inventory()
        card1 = inv.devices[1]
        codes = {c.vendor_code for c in card1.health.conditions}
        assert {"cambricon.mlu:ecc-error", "cambricon.cndev:incident-15", "cambricon.cndev:xid-48"} <= codes
        assert card1.health.state is not HealthState.HEALTHY
        assert inv.devices[0].health.state is HealthState.HEALTHY
        assert native.poll_events(0.0) == ()  # delivered once, kept as a condition
        assert "cambricon.cndev:xid-48" in {c.vendor_code for c in native.inventory().devices[1].health.conditions}
        # The CLI path cannot see any of it: cnmon printed N/A.
        assert all(d.health.state is HealthState.UNKNOWN for d in cli.inventory().devices)
        assert cli.poll_events(0.0) == ()
    finally:
        native.close()
        cli.close()


def test_read_option() -> None:
    with pytest.raises(ConfigError, match="read='gpu'"):
        open_backend("mlu370-x8", "gpu")
    auto = open_backend("mlu370-x8", "auto")
    try:
        assert auto.read_path == "cli"  # a replay is a recording of the CLI
    finally:
        auto.close()


def test_auto_without_the_library_falls_back_to_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On a host (no replay) without libcndev.so: auto reads cnmon, native is a typed error."""
    monkeypatch.setenv("ACCEL_CAMBRICON_LIB", str(tmp_path / "libcndev.so"))
    host = SubprocessRunner()
    choice = choose_read_path(BackendConfig(), host, library=n.LIBRARY, load=n.load_cndev, fake=fake_of_replay)
    assert choice.path == "cli" and "libcndev.so not loaded" in choice.why
    with pytest.raises(LibraryNotFoundError, match="ACCEL_CAMBRICON_LIB"):
        choose_read_path(
            BackendConfig(options={"read": "native"}), host, library=n.LIBRARY, load=n.load_cndev, fake=fake_of_replay
        )


def test_driver_errors_are_typed_and_partial() -> None:
    fake = fake_of_replay(shipped_scenario_runner(PKG, "mlu370-x8"))
    fake.inject("cndevGetMemoryUsageV2", 7)  # CNDEV_ERROR_UNKNOWN
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_cndev(lib)
    assert len(read.readings) == 2
    assert all(r.memory_total_bytes is None for r in read.readings)
    assert [type(p) for p in read.problems] == [DriverError, DriverError]
    assert read.problems[0].vendor_code == "cambricon.cndev:7"


def test_versioned_struct_refused_without_version() -> None:
    fake = fake_of_replay(shipped_scenario_runner(PKG, "mlu370-x8"))
    assert isinstance(fake, FakeCndev)
    fake.cndevInit(0)
    info = n.CardInfo()  # version 0: not CNDEV_VERSION_6
    assert fake.cndevGetDeviceCount(ctypes.byref(info)) == 3


def test_a_hung_library_is_reported_not_waited_on_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole native read runs under one deadline in the library's worker thread."""
    from accel.plugins.cambricon._backend import CambriconBackend

    monkeypatch.setattr(CambriconBackend, "native_deadline_s", 0.2)
    backend = open_backend("mlu370-x8", "native")
    fake = backend.native.lib  # type: ignore[attr-defined]
    fake.hang_on("cndevGetMemoryUsageV2")
    try:
        with pytest.raises(DriverError, match=r"did not return within 0\.2 s"):
            backend.inventory()
        calls = dict(fake.calls)
        with pytest.raises(DriverError, match="hung in an earlier read"):
            backend.inventory()
        assert fake.calls == calls  # not called again
    finally:
        fake.release()
        backend.close()
