"""The native out-of-tree proof: examples/accel-ppu, a T-Head PPU plugin on libhgml written on the
public toolkit alone, under 250 lines, passes the conformance kit over its fake library in-process."""

from __future__ import annotations

import ast
import ctypes
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accel.conformance import ConformanceSuite
from accel.errors import ConfigError, LibraryNotFoundError
from accel.model import HealthState, Severity
from accel.plugin import BackendConfig
from accel.toolkit import NativeLibrary, signature_problems

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "accel-ppu"
PACKAGE = EXAMPLE / "accel_ppu"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

import accel_ppu  # noqa: E402
from accel_ppu import _backend as _hgml  # noqa: E402
from accel_ppu.conformance import CONFORMANCE_SCENARIOS  # noqa: E402
from accel_ppu.testing import FakeHgml  # noqa: E402

PUBLIC = ("accel.toolkit", "accel.plugin", "accel.model", "accel.errors", "accel.conformance")


def _plugin_files() -> list[Path]:
    """The plugin's source: every module but its fake (``testing``) and its tests."""
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "testing.py")


def test_plugin_is_under_250_lines() -> None:
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in _plugin_files())
    assert 0 < lines < 250, lines


def test_plugin_and_fake_import_only_the_public_api() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("accel", "plugins") and n not in PUBLIC]
    assert not bad, bad


def _state() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((PACKAGE / "scenarios" / "ppu-8" / "native.toml").read_text())


@pytest.fixture
def lib() -> Iterator[tuple[NativeLibrary, FakeHgml]]:
    fake = FakeHgml(_state())
    with NativeLibrary(fake, _hgml.TABLE, _hgml.ERRORS, timeout_s=None) as native:
        yield native, fake


def test_every_call_and_fake_function_matches_the_recorded_signatures(lib: tuple[NativeLibrary, FakeHgml]) -> None:
    native, fake = lib
    read = _hgml.read_hgml(native)
    assert len(read.readings) == 8 and not read.problems
    assert signature_problems(_hgml.TABLE, calls=native.calls, fake=fake) == []
    assert set(native.calls) == set(_hgml.TABLE.functions)


def test_read_gives_units_bytes_watts_and_the_ecc_fault(lib: tuple[NativeLibrary, FakeHgml]) -> None:
    read = _hgml.read_hgml(lib[0])
    r0, r3 = read.readings[0], read.readings[3]
    assert read.driver_version == "1.4.2"
    assert (r0.bus_id, r0.model, r0.uuid) == (
        "0000:1a:00.0",
        "PPU-ZW810E",
        "PPU-5f0c6b2e-0d3a-4c3e-9a51-000000000000",
    )
    assert (r0.memory_total_bytes, r0.memory_used_bytes) == (96 * 2**30, 60 * 2**30)
    assert (r0.power_watts, r0.temperature_celsius, r0.utilization_ratio) == (412.0, 61.0, 0.87)
    assert r0.health_read and r0.ecc_uncorrected_total == 0 and not r0.conditions
    assert r3.ecc_uncorrected_total == 2 and r3.extras["t-head.com/eccCorrectedVolatile"] == 14
    assert [c.vendor_code for c in r3.conditions] == ["t-head.hgml:ecc-uncorrectable"]


def test_a_failing_call_is_a_typed_problem_and_hides_no_other_device(lib: tuple[NativeLibrary, FakeHgml]) -> None:
    native, fake = lib
    fake.inject("hgmlDeviceGetMemoryInfo", 15)  # HGML_ERROR_GPU_IS_LOST
    read = _hgml.read_hgml(native)
    assert len(read.readings) == 8
    assert all(r.memory_total_bytes is None and "*" in r.dropped for r in read.readings)
    assert {p.code for p in read.problems} == {"device.lost"}
    fake.inject("hgmlDeviceGetTotalEccErrors", 3)  # NOT_SUPPORTED: health not earned, "never"
    read = _hgml.read_hgml(native)
    assert not any(r.health_read for r in read.readings)
    assert "ecc_uncorrected_total" in read.never[0]


def test_a_stale_handle_and_calls_before_init_fail_as_hgml_does() -> None:
    fake = FakeHgml(_state())
    count = ctypes.c_uint()
    assert fake.hgmlDeviceGetCount_v2(ctypes.byref(count)) == 1  # UNINITIALIZED
    assert fake.hgmlInitWithFlags(0) == 0
    assert fake.hgmlDeviceGetPowerUsage(ctypes.c_void_p(0x9999), ctypes.byref(count)) == 2
    small = ctypes.create_string_buffer(4)
    handle = ctypes.c_void_p()
    assert fake.hgmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0
    assert fake.hgmlDeviceGetName(handle, small, 4) == 7  # INSUFFICIENT_SIZE


def test_without_the_library_the_override_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_PPU_LIB", str(tmp_path / "libhgml.so"))
    with pytest.raises(LibraryNotFoundError, match=r"libhgml\.so"):
        accel_ppu.PLUGIN.open(BackendConfig())


def test_the_cli_path_is_refused_with_a_typed_error() -> None:
    backend = accel_ppu.PLUGIN.open(BackendConfig(options={"scenario": "ppu-8", "read": "cli"}))
    try:
        with pytest.raises(ConfigError, match="libhgml only"):
            backend.inventory()
    finally:
        backend.close()


def test_inventory_over_the_fake_is_native_with_the_faulty_ppu_unhealthy() -> None:
    backend = accel_ppu.PLUGIN.open(BackendConfig(options={"scenario": "ppu-8"}))
    try:
        inv = backend.inventory()
    finally:
        backend.close()
    assert len(inv.devices) == 8
    source = inv.sources[0]
    assert source.detail.startswith("path=native") and source.tool_invocations == 0
    health = {d.index: d.health for d in inv.devices}
    assert health[3].state != HealthState.HEALTHY and health[3].conditions[0].severity == Severity.CRITICAL
    assert all(health[i].state == HealthState.HEALTHY for i in health if i != 3)


class TestPpuConformanceInProcess(ConformanceSuite):
    """The whole kit over the fake libhgml, the plugin object given directly (no install)."""

    plugin = accel_ppu.PLUGIN
    backend = "ppu"
    options = CONFORMANCE_SCENARIOS["ppu-8"].options
    oracle = CONFORMANCE_SCENARIOS["ppu-8"].oracle


def test_a_library_only_scenario_is_shipped_and_its_state_found(tmp_path: Path) -> None:
    """The toolkit lists a scenario directory holding only ``native.toml`` (no CLI recording),
    and the fake's runner finds that state file; an empty directory is no scenario."""
    from accel.toolkit import scenario_names, scenario_state_file
    from accel.tools import ReplayRunner

    assert scenario_names("accel_ppu") == ("ppu-8",)
    runner = ReplayRunner(PACKAGE / "scenarios" / "ppu-8")
    assert scenario_state_file(runner) == PACKAGE / "scenarios" / "ppu-8" / "native.toml"
    assert scenario_state_file(ReplayRunner(tmp_path)) is None
