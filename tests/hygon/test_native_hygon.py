"""Hygon's native path (DTK librocm_smi64.so, rsmi_*): the fake rendered from each scenario, the
signature table, ECC health, and the differential test against the hy-smi / rocm-smi path."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from accel.errors import ConfigError, DriverError, LibraryNotFoundError
from accel.model import HealthState, LinkType
from accel.plugin import BackendConfig
from accel.plugins.hygon import PLUGIN, SCENARIOS
from accel.plugins.hygon import _native as n
from accel.plugins.hygon._native_fake import FakeRsmi, fake_of_replay
from accel.toolkit import NativeLibrary, choose_read_path, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner, SubprocessRunner

PKG = "accel.plugins.hygon"

#: What one path sees and the other cannot, by compared field (docs/native-gaps.md, Hygon).
GAPS = {
    "health": "no recorded hy-smi / rocm-smi view prints ECC or RAS: the CLI path earns no health; the library "
    "answers rsmi_dev_ecc_count_get",
    "links": "only the native-only scenario has an xGMI pair (rsmi_topo_get_link_type); no replay recorded --showtopo",
}


def _fake(scenario: str) -> FakeRsmi:
    return fake_of_replay(ReplayRunner(scenario_path(PKG, scenario)))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str) -> None:
    cli = PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": "cli"}))
    native = PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": "native"}))
    try:
        a, b, ta, tb = cli.inventory(), native.inventory(), cli.telemetry(), native.telemetry()
    finally:
        cli.close()
        native.close()
    result = compare_paths(a, b)
    assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [(d.id, d.model, d.serial_number) for d in a.devices] == [
        (d.id, d.model, d.serial_number) for d in b.devices
    ]
    assert [d.power.enforced_watts for d in a.devices] == [d.power.enforced_watts for d in b.devices]
    for x, y in zip(ta, tb, strict=True):
        assert (x.power_watts, x.utilization_ratio, x.temperatures_celsius) == (
            y.power_watts,
            y.utilization_ratio,
            y.temperatures_celsius,
        )
    assert b.sources[0].api == "librocm_smi64.so" and b.sources[0].tool_invocations == 0
    assert "path=native (read=native: a fake librocm_smi64.so of the replay)" in (b.sources[0].detail or "")


def test_signature_table_after_full_read() -> None:
    fake = _fake("k100-8dcu-faults")
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_rsmi(lib)
    assert len(read.readings) == 8 and read.problems == [] and read.xgmi_pairs == [(0, 1)]
    n.close_rsmi(lib)
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    assert set(n.TABLE.functions) == set(lib.calls)
    assert ctypes.sizeof(n.ErrorCount) == 16


def test_units_from_the_json_replay() -> None:
    read = n.read_rsmi(NativeLibrary(_fake("k100ai-1dcu"), n.TABLE, n.ERRORS, timeout_s=None))
    (r,) = read.readings
    assert r.unique_id == "0x7100fa8866904061" and r.name == "K1xx_AI"
    assert r.memory_total_bytes == 65520 * 2**20 and r.memory_used_bytes == 2 * 2**20
    assert r.temperatures_celsius == {"edge": 41.0, "junction": 39.0, "memory": 44.0}
    assert r.power_watts == 80.0


def test_native_only_scenario_ecc_and_links() -> None:
    backend = PLUGIN.open(BackendConfig(options={"scenario": "k100-8dcu-faults", "read": "native"}))
    try:
        inv = backend.inventory()
        assert inv.devices[2].health.state is not HealthState.HEALTHY
        assert all(d.health.state is HealthState.HEALTHY for i, d in enumerate(inv.devices) if i != 2)
        assert [(lk.a, lk.b, lk.type) for lk in inv.links] == [(inv.devices[0].id, inv.devices[1].id, LinkType.XGMI)]
        assert [d.members for d in inv.domains] == [(inv.devices[0].id, inv.devices[1].id)]
        assert not hasattr(backend, "poll_events")  # rsmi's event notification API is not bound
    finally:
        backend.close()


def test_read_option_and_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="read='gpu'"):
        PLUGIN.open(BackendConfig(options={"scenario": "k100-8dcu", "read": "gpu"}))
    monkeypatch.setenv(n.ENV_VAR, str(tmp_path))
    choice = choose_read_path(
        BackendConfig(), SubprocessRunner(), library=n.LIBRARY, load=n.load_rsmi, fake=fake_of_replay
    )
    assert choice.path == "cli" and "librocm_smi64.so not loaded" in choice.why
    with pytest.raises(LibraryNotFoundError, match=n.ENV_VAR):
        n.load_rsmi()


def test_unknown_status_is_typed() -> None:
    fake = _fake("k100ai-1dcu")
    fake.inject("rsmi_dev_busy_percent_get", 0xFFFFFFFF)  # RSMI_STATUS_UNKNOWN_ERROR
    read = n.read_rsmi(NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None))
    assert read.readings[0].utilization_ratio is None
    assert [type(p) for p in read.problems] == [DriverError]
    assert read.problems[0].vendor_code == "hygon.rsmi:4294967295"
