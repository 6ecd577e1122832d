"""MetaX's native path (MXSML): the fake rendered from each scenario, the signature table, the
read=native|cli|auto choice, and the differential test against the mx-smi path."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from accel.errors import ConfigError, DriverError, LibraryNotFoundError
from accel.model import HealthState, LinkType
from accel.plugin import BackendConfig
from accel.plugins.metax import PLUGIN
from accel.plugins.metax import _native as n
from accel.plugins.metax._native_fake import fake_of_replay
from accel.toolkit import NativeLibrary, choose_read_path, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner, SubprocessRunner

PKG = "accel.plugins.metax"
SCENARIOS = scenario_names(PKG)

#: What one path sees and the other cannot, by compared field (docs/native-gaps.md, MetaX).
GAPS = {
    "health": "mx-smi 2.1 prints no GPU-State column, so the CLI path earns no health; MXSML answers "
    "mxSmlGetTotalEccErrors and mxSmlGetDeviceUnavailableReason on every card",
}


def _fake(scenario: str):  # type: ignore[no-untyped-def]
    return fake_of_replay(ReplayRunner(scenario_path(PKG, scenario)))


def _inventories(scenario: str):  # type: ignore[no-untyped-def]
    cli = PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": "cli"}))
    native = PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": "native"}))
    try:
        return cli.inventory(), native.inventory(), cli.telemetry(), native.telemetry()
    finally:
        cli.close()
        native.close()


def test_shipped_scenarios() -> None:
    assert set(SCENARIOS) == {"c550-8", "c550-8-faults", "mxc550-8-v2.1"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str) -> None:
    """Both paths agree on devices, ids, memory, topology and health wherever both see the
    value; what one path alone sees is a documented gap."""
    a, b, ta_list, tb_list = _inventories(scenario)
    result = compare_paths(a, b)
    if scenario == "c550-8-faults":  # adds what only MXSML sees: GPU 3's ECC errors
        assert result.differences == [
            "metax:pci-0000:5a:00.0: health is 'healthy' by the CLI path, 'unhealthy' by the native path"
        ]
    else:
        assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [d.id for d in a.devices] == [d.id for d in b.devices]
    assert len(b.devices) == 8
    assert [d.model for d in a.devices] == [d.model for d in b.devices]
    assert [d.versions for d in a.devices] == [d.versions for d in b.devices]
    assert [(d.id, d.kind, d.members) for d in a.domains] == [(d.id, d.kind, d.members) for d in b.domains]
    assert {lk.type for lk in b.links} == {LinkType.METAXLINK, LinkType.SYSTEM}
    ta = {t.device_id: t for t in ta_list}
    for t in tb_list:
        assert (t.temperature_celsius, t.power_watts, t.utilization_ratio) == (
            ta[t.device_id].temperature_celsius,
            ta[t.device_id].power_watts,
            ta[t.device_id].utilization_ratio,
        )
    assert a.sources[0].api == "mx-smi" and a.sources[0].tool_invocations >= 1
    assert b.sources[0].api == "libmxsml.so" and b.sources[0].tool_invocations == 0
    assert "path=native (read=native: a fake libmxsml.so of the replay)" in (b.sources[0].detail or "")
    assert "path=cli (read=cli)" in (a.sources[0].detail or "")


def test_signature_table_after_full_read() -> None:
    fake = _fake("c550-8-faults")
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_mxsml(lib)
    assert len(read.readings) == 8 and read.problems == []
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    assert set(n.TABLE.functions) == set(lib.calls)  # every declared function is exercised
    assert lib.calls["mxSmlGetBoardPowerInfo"] == 16  # the two-call read, per device
    assert all(fn.source == n.SOURCE for fn in n.TABLE.functions.values())


def test_struct_layouts() -> None:
    """Sizes follow from the binding's field lists (LP64: long is 8 bytes)."""
    assert ctypes.sizeof(n.DeviceInfo) == 4 * 2 + 32 + 4 * 2 + 96 + 4 * 2 + 32
    assert ctypes.sizeof(n.MemoryInfo) == 8 * 6
    assert ctypes.sizeof(n.BoardWayElectricInfo) == 12
    assert ctypes.sizeof(n.EccErrorCount) == 20
    assert ctypes.sizeof(n.UnavailableReason) == 4 + 64


def test_units_converted() -> None:
    read = n.read_mxsml(NativeLibrary(_fake("c550-8"), n.TABLE, n.ERRORS, timeout_s=None))
    gpu = read.readings[0]
    assert gpu.memory_total_bytes == 65536 * 2**20 and gpu.memory_used_bytes == 858 * 2**20
    assert (gpu.temperature_celsius, gpu.power_watts, gpu.power_limit_watts) == (29.0, 53.0, 450.0)
    assert read.driver_version == "2.15.9" and read.maca_version == "2.32.0.6" and read.bios_version == "1.25.1.0"


def test_native_only_scenario_sees_ecc() -> None:
    backend = PLUGIN.open(BackendConfig(options={"scenario": "c550-8-faults", "read": "native"}))
    try:
        inv = backend.inventory()
        gpu3 = inv.devices[3]
        assert gpu3.health.state is HealthState.UNHEALTHY
        assert "metax.mxsml:ecc-uncorrectable" in {c.vendor_code for c in gpu3.health.conditions}
        assert gpu3.extras["metax-tech.com/eccDramUncorrected"] == 2
        assert gpu3.extras["metax-tech.com/retiredPages"] == 1
        assert all(d.health.state is HealthState.HEALTHY for i, d in enumerate(inv.devices) if i != 3)
        assert not hasattr(backend, "poll_events")  # MXSML has no event subscription
    finally:
        backend.close()


def test_unavailable_state_is_critical_on_both_paths(tmp_path: Path) -> None:
    """A GPU-State other than Available (mx-smi) is MXSML's unavailable reason (native)."""
    src = scenario_path(PKG, "c550-8")
    for f in src.iterdir():
        text = f.read_text()
        if f.suffix == ".txt" and "GPU-State" in text:
            lines = text.splitlines(keepends=True)
            i = next(k for k, ln in enumerate(lines) if "858/65536 MiB" in ln)
            lines[i] = lines[i].replace("Available  ", "Unavailable")
            text = "".join(lines)
        (tmp_path / f.name).write_text(text)
    fake = fake_of_replay(ReplayRunner(tmp_path))
    read = n.read_mxsml(NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None))
    codes = [c.vendor_code for c in read.readings[0].conditions]
    assert codes == ["metax.mxsml:unavailable-1"]
    assert all(not r.conditions for r in read.readings[1:])


def test_read_option() -> None:
    with pytest.raises(ConfigError, match="read='gpu'"):
        PLUGIN.open(BackendConfig(options={"scenario": "c550-8", "read": "gpu"}))
    auto = PLUGIN.open(BackendConfig(options={"scenario": "c550-8"}))
    try:
        assert auto.read_path == "cli"  # a replay is a recording of the CLI
    finally:
        auto.close()


def test_auto_without_the_library_falls_back_to_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(n.ENV_VAR, str(tmp_path / "libmxsml.so"))
    host = SubprocessRunner()
    choice = choose_read_path(BackendConfig(), host, library=n.LIBRARY, load=n.load_mxsml, fake=fake_of_replay)
    assert choice.path == "cli" and "libmxsml.so not loaded" in choice.why
    with pytest.raises(LibraryNotFoundError, match=n.ENV_VAR):
        choose_read_path(
            BackendConfig(options={"read": "native"}), host, library=n.LIBRARY, load=n.load_mxsml, fake=fake_of_replay
        )


def test_driver_errors_are_typed_and_partial() -> None:
    fake = _fake("c550-8")
    fake.inject("mxSmlGetMemoryInfo", 12)  # IO_CONTROL_FAILURE
    read = n.read_mxsml(NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None))
    assert len(read.readings) == 8
    assert all(r.memory_total_bytes is None and "*" in r.dropped for r in read.readings)
    assert {type(p) for p in read.problems} == {DriverError} and len(read.problems) == 8
    assert read.problems[0].vendor_code == "metax.mxsml:12"


def test_a_device_without_identity_is_left_out_with_a_problem() -> None:
    fake = _fake("c550-8")
    fake.inject("mxSmlGetDeviceInfo", 6)  # INVALID_DEVICE_ID
    read = n.read_mxsml(NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None))
    assert read.readings == [] and len(read.problems) == 8


def test_fake_buffers_follow_the_size_convention() -> None:
    fake = _fake("c550-8")
    fake.mxSmlInit()
    buf = ctypes.create_string_buffer(4)
    size = ctypes.c_uint(4)
    assert fake.mxSmlGetMacaVersion(buf, ctypes.byref(size)) == 10  # INSUFFICIENT_SIZE
    assert size.value == len("2.32.0.6") + 1
    with pytest.raises(ctypes.ArgumentError):
        fake.mxSmlGetDeviceTopology(0, 1, ctypes.byref(ctypes.c_int()))  # uint * declared


def test_hung_library_is_a_typed_timeout() -> None:
    fake = _fake("c550-8")
    fake.hang_on("mxSmlGetTotalEccErrors")
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=0.05)
    try:
        read = n.read_mxsml(lib)
        assert read.problems and all(isinstance(p, DriverError) for p in read.problems)
        assert lib.hung == "mxSmlGetTotalEccErrors"
        assert read.problems[0].code == "driver.timeout"
    finally:
        fake.release()
        lib.close()
