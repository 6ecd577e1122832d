"""Kunlunxin's native path (XPUML): the fake rendered from each scenario, the signature table,
the read=native|cli|auto choice, and the differential test against the xpu_smi path."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from accel.errors import ConfigError, DeviceLostError, LibraryNotFoundError
from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.plugins.kunlunxin import PLUGIN
from accel.plugins.kunlunxin import _native as n
from accel.plugins.kunlunxin._native_fake import FakeXpuml, fake_of_replay
from accel.toolkit import NativeLibrary, choose_read_path, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner, SubprocessRunner

PKG = "accel.plugins.kunlunxin"
SCENARIOS = scenario_names(PKG)

#: What one path sees and the other cannot, by compared field (docs/native-gaps.md, Kunlunxin).
GAPS = {
    "health": "xpu_smi 4.x prints no ECC or state column, so the CLI path earns no health; XPUML "
    "answers xpumlDeviceGetState on every device",
}


def _fake(scenario: str) -> FakeXpuml:
    return fake_of_replay(ReplayRunner(scenario_path(PKG, scenario)))


def _lib(fake: FakeXpuml, timeout_s: float | None = None) -> NativeLibrary:
    return NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=timeout_s)


def test_shipped_scenarios() -> None:
    assert set(SCENARIOS) == {"p800-8", "p800-8-faults", "r300-2"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str) -> None:
    """Both paths agree on devices, ids, memory and health wherever both see the value; what
    one path alone sees is a documented gap."""
    cli = PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": "cli"}))
    native = PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": "native"}))
    try:
        a, b, ta, tb = cli.inventory(), native.inventory(), cli.telemetry(), native.telemetry()
    finally:
        cli.close()
        native.close()
    result = compare_paths(a, b)
    if scenario == "p800-8-faults":  # adds what only XPUML sees: XPU 6 in the ERROR state
        assert result.differences == [
            "kunlunxin:pci-0000:a3:00.0: health is 'healthy' by the CLI path, 'unhealthy' by the native path"
        ]
    else:
        assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [d.id for d in a.devices] == [d.id for d in b.devices]
    assert [d.model for d in a.devices] == [d.model for d in b.devices]
    assert [d.power.enforced_watts for d in a.devices] == [d.power.enforced_watts for d in b.devices]
    assert [d.extras["kunlunxin.com/l3TotalBytes"] for d in a.devices] == [
        d.extras["kunlunxin.com/l3TotalBytes"] for d in b.devices
    ]
    pairs = zip(ta, tb, strict=True)
    assert all((x.temperature_celsius, x.power_watts) == (y.temperature_celsius, y.power_watts) for x, y in pairs)
    assert b.sources[0].api == "libxpuml.so" and b.sources[0].tool_invocations == 0
    assert "path=native (read=native: a fake libxpuml.so of the replay)" in (b.sources[0].detail or "")


def test_signature_table_after_full_read() -> None:
    fake = _fake("p800-8-faults")
    lib = _lib(fake)
    read = n.read_xpuml(lib)
    assert len(read.readings) == 8 and read.problems == []
    lib.call("xpumlShutdown")
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    assert set(n.TABLE.functions) == set(lib.calls)
    assert all(fn.source == n.SOURCE for fn in n.TABLE.functions.values())


def test_struct_layouts_match_the_header() -> None:
    """Sizes from xpuml.h's own comments ("sizeof() = 8B * 16") and field lists."""
    assert ctypes.sizeof(n.XpumlDevice) == 8
    assert ctypes.sizeof(n.PciInfo) == 6 * 4 + 32 + 9 * 8
    assert ctypes.sizeof(n.Memory) == 8 * 16
    assert ctypes.sizeof(n.Utilization) == 8 * 16
    assert ctypes.sizeof(n.DeviceAttributes) == 3 * 4 + 7 * 4 + 2 * 8 + 2 * 8 + 7 * 8


def test_handles_are_passed_by_value() -> None:
    fake = _fake("r300-2")
    fake.xpumlInit()
    handle = n.XpumlDevice()
    assert fake.xpumlDeviceGetHandleByIndex(1, ctypes.byref(handle)) == 0
    pci = n.PciInfo()
    assert fake.xpumlDeviceGetPciInfo(handle, ctypes.byref(pci)) == 0
    assert pci.busId == b"00000000:56:00.0"  # XPUML_DEVICE_PCI_BUS_ID_FMT
    with pytest.raises(ctypes.ArgumentError):  # a pointer where the handle goes by value
        fake.xpumlDeviceGetPciInfo(ctypes.pointer(handle), ctypes.byref(pci))


def test_model_falls_back_to_the_attributes_model_id() -> None:
    """A library without xpumlDeviceGetName (the Go binding's header comments it out)."""
    fake = _fake("r300-2")
    fake.inject("xpumlDeviceGetName", 3)  # NOT_SUPPORTED
    read = n.read_xpuml(_lib(fake))
    assert [r.model for r in read.readings] == ["R300", "R300"]


def test_native_only_scenario_state() -> None:
    backend = PLUGIN.open(BackendConfig(options={"scenario": "p800-8-faults", "read": "native"}))
    try:
        inv = backend.inventory()
        xpu6 = inv.devices[6]
        assert xpu6.health.state is HealthState.UNHEALTHY
        assert [c.vendor_code for c in xpu6.health.conditions] == ["kunlunxin.xpuml:state-207"]
        assert all(d.health.state is HealthState.HEALTHY for i, d in enumerate(inv.devices) if i != 6)
        fake = backend.read_choice.library
        assert isinstance(fake, FakeXpuml)
        fake.state.xpus[2].state = 208  # IN_EXCEPTION: seen by the next snapshot
        assert [c.vendor_code for c in backend.inventory().devices[2].health.conditions] == [
            "kunlunxin.xpuml:state-208"
        ]
        assert not hasattr(backend, "poll_events")  # XPUML has no event subscription
    finally:
        backend.close()


def test_read_option_and_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="read='npu'"):
        PLUGIN.open(BackendConfig(options={"scenario": "p800-8", "read": "npu"}))
    monkeypatch.setenv(n.ENV_VAR, str(tmp_path / "libxpuml.so"))
    host = SubprocessRunner()
    choice = choose_read_path(BackendConfig(), host, library=n.LIBRARY, load=n.load_xpuml, fake=fake_of_replay)
    assert choice.path == "cli" and "libxpuml.so not loaded" in choice.why
    with pytest.raises(LibraryNotFoundError, match=n.ENV_VAR):
        n.load_xpuml()


def test_a_lost_xpu_is_typed_and_the_others_stay() -> None:
    fake = _fake("p800-8")
    real = fake.xpumlDeviceGetMemoryInfo

    def lost_on_3(device, memory):  # type: ignore[no-untyped-def]
        return 15 if device.handle == 0x1000 + 3 else real(device, memory)

    fake.xpumlDeviceGetMemoryInfo = lost_on_3  # type: ignore[method-assign]
    read = n.read_xpuml(_lib(fake))
    assert len(read.readings) == 8
    assert read.readings[3].memory_total_bytes is None and "*" in read.readings[3].dropped
    assert [type(p) for p in read.problems] == [DeviceLostError]
    assert read.problems[0].device_id == "3"
