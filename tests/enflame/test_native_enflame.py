"""Enflame's native path (EFML): the fake rendered from each scenario, the signature table, the
read=native|cli|auto choice, events, and the differential test against the efsmi path."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from accel.errors import ConfigError, DriverError, LibraryNotFoundError
from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.plugins.enflame import PLUGIN
from accel.plugins.enflame import _native as n
from accel.plugins.enflame._native_fake import FakeEfml, fake_of_replay
from accel.toolkit import NativeLibrary, choose_read_path, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner, SubprocessRunner

PKG = "accel.plugins.enflame"
SCENARIOS = scenario_names(PKG)

#: What one path sees and the other cannot, by compared field (docs/native-gaps.md, Enflame).
GAPS = {
    "health": "efsmi's table has no health column (only -q prints Health); EFML answers EfmlGetDevHealth",
    "memory.total_bytes": "a table-only replay records no used memory, and EfmlGetDevMem returns total and used "
    "together: the fake answers NOT_SUPPORTED rather than invent a used size",
}


def _fake(scenario: str) -> FakeEfml:
    return fake_of_replay(ReplayRunner(scenario_path(PKG, scenario)))


def _lib(fake: FakeEfml) -> NativeLibrary:
    return NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)


def test_shipped_scenarios() -> None:
    assert set(SCENARIOS) == {"s60-2dev", "s60-2dev-faults", "s60-query", "s60g-sriov"}


@pytest.mark.parametrize("view", ["vf", "card"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str, view: str) -> None:
    """Both paths (and both SR-IOV views) agree wherever both see the value."""
    options = {"scenario": scenario, "sriov": view}
    cli = PLUGIN.open(BackendConfig(options={**options, "read": "cli"}))
    native = PLUGIN.open(BackendConfig(options={**options, "read": "native"}))
    try:
        a, b = cli.inventory(), native.inventory()
    finally:
        cli.close()
        native.close()
    result = compare_paths(a, b)
    assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [d.id for d in a.devices] == [d.id for d in b.devices]
    assert [(d.model, d.serial_number, d.board_id) for d in a.devices] == [
        (d.model, d.serial_number, d.board_id) for d in b.devices
    ]
    assert [(p.id, p.parent_id) for p in a.partitions] == [(p.id, p.parent_id) for p in b.partitions]
    assert [(d.id, d.members) for d in a.domains] == [(d.id, d.members) for d in b.domains]
    assert b.sources[0].api == "libefml.so" and b.sources[0].tool_invocations == 0


def test_signature_table_after_full_read() -> None:
    fake = _fake("s60-2dev-faults")
    lib = _lib(fake)
    read = n.read_efml(lib)
    assert len(read.readings) == 2 and read.problems == []
    assert n.read_event(lib, 1) is not None
    lib.call("EfmlShutdown")
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    assert set(n.TABLE.functions) == set(lib.calls)
    assert all(fn.source == n.SOURCE for fn in n.TABLE.functions.values())


def test_struct_layouts_match_the_header() -> None:
    assert ctypes.sizeof(n.DeviceInfo) == 128 + 7 * 4
    assert ctypes.sizeof(n.MemInfo) == 16  # uint64 then uint32, padded to 8
    assert ctypes.sizeof(n.EccStatus) == 3 + 1 + 2 * 4
    assert ctypes.sizeof(n.Event) == 4 + 4 + 128


def test_units_and_query_scenario() -> None:
    read = n.read_efml(_lib(_fake("s60-query")))
    (gcu,) = read.readings
    assert gcu.uuid == "TR6Y46010302" and gcu.serial_number == "A0A1650510676"
    assert gcu.memory_total_bytes == 42976 * 2**20 and gcu.memory_used_bytes == 0
    assert (gcu.power_watts, gcu.power_limit_watts, gcu.temperature_celsius) == (96.0, 300.0, 35.0)
    assert gcu.bus_id == "0000:17:00.0" and (gcu.pci_vendor_id, gcu.pci_device_id) == ("1e36", "c035")
    assert read.driver_version == "1.4.3.4"


def test_native_only_scenario_health_ecc_and_events() -> None:
    backend = PLUGIN.open(BackendConfig(options={"scenario": "s60-2dev-faults", "read": "native"}))
    cli = PLUGIN.open(BackendConfig(options={"scenario": "s60-2dev-faults", "read": "cli"}))
    try:
        inv = backend.inventory()
        gcu1 = inv.devices[1]
        codes = [c.vendor_code for c in gcu1.health.conditions]
        assert codes == [
            "enflame.efml:unhealthy",
            "enflame.efml:ecc-double-bit",
            "enflame.efml:event-20",
            "enflame.efml:event-10",
        ]
        assert gcu1.health.state is HealthState.UNHEALTHY
        assert inv.devices[0].health.state is HealthState.HEALTHY
        assert backend.poll_events(0.0) == ()  # delivered once, kept as conditions
        assert codes == [c.vendor_code for c in backend.inventory().devices[1].health.conditions]
        fake = backend.read_choice.library
        assert isinstance(fake, FakeEfml)
        fake.state.gcus[0].events.append((3, "suspended"))
        events = backend.poll_events(0.0)
        assert [(e.device_id, e.condition.vendor_code) for e in events] == [(inv.devices[0].id, "enflame.efml:event-3")]
        assert all(d.health.state is HealthState.UNKNOWN for d in cli.inventory().devices)
        assert cli.poll_events(0.0) == ()
    finally:
        backend.close()
        cli.close()


def test_read_option_and_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="read='x'"):
        PLUGIN.open(BackendConfig(options={"scenario": "s60-2dev", "read": "x"}))
    monkeypatch.setenv(n.ENV_VAR, str(tmp_path))
    choice = choose_read_path(
        BackendConfig(), SubprocessRunner(), library=n.LIBRARY, load=n.load_efml, fake=fake_of_replay
    )
    assert choice.path == "cli" and "libefml.so not loaded" in choice.why
    with pytest.raises(LibraryNotFoundError, match=n.ENV_VAR):
        n.load_efml()


def test_driver_errors_are_typed_and_partial() -> None:
    fake = _fake("s60-query")
    fake.inject("EfmlGetDevTempV2", 254)  # EFML_ERROR_FAIL
    read = n.read_efml(_lib(fake))
    assert read.readings[0].temperature_celsius is None and "*" in read.readings[0].dropped
    assert [type(p) for p in read.problems] == [DriverError]
    assert read.problems[0].vendor_code == "enflame.efml:254"
