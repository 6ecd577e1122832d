"""Iluvatar's native path (IXML, NVML ABI): the fake rendered from each scenario, the signature
table, the health bitmask, the hung-card sentinels, and the differential test."""

from __future__ import annotations

import ctypes

import pytest

from accel.errors import DriverError
from accel.model import HealthState
from accel.plugin import Backend, BackendConfig
from accel.plugins.iluvatar import PLUGIN
from accel.plugins.iluvatar import _native as n
from accel.plugins.iluvatar._native_fake import fake_of_replay
from accel.toolkit import NativeLibrary, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner

PKG = "accel.plugins.iluvatar"
SCENARIOS = scenario_names(PKG)
#: docs/native-gaps.md
GAPS = {"health": "ixsmi prints no health column; IXML answers ixmlDeviceGetHealth on every GPU"}


def runner(name: str) -> ReplayRunner:
    return ReplayRunner(scenario_path(PKG, name))


def open_backend(scenario: str, read: str) -> Backend:
    return PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": read}))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str) -> None:
    cli, native = open_backend(scenario, "cli"), open_backend(scenario, "native")
    try:
        a, b = cli.inventory(), native.inventory()
    finally:
        cli.close()
        native.close()
    result = compare_paths(a, b)
    assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [(d.id, d.index, d.board_id) for d in a.devices] == [(d.id, d.index, d.board_id) for d in b.devices]
    assert {dm.id for dm in a.domains} == {dm.id for dm in b.domains}
    assert b.sources[0].api == "libixml.so" and b.sources[0].tool_invocations == 0
    assert not b.problems


def test_wedged_gpu_reads_the_same_sentinel_rule() -> None:
    native = open_backend("bi-v100-wedged", "native")
    try:
        inv = native.inventory()
    finally:
        native.close()
    gpu5 = next(d for d in inv.devices if d.index == 5)
    assert "DeviceWedged" in {c.reason for c in gpu5.health.conditions}
    assert gpu5.health.state is not HealthState.HEALTHY


def test_native_only_scenario_sees_the_health_bits() -> None:
    native, cli = open_backend("bi-v150-16-health", "native"), open_backend("bi-v150-16-health", "cli")
    try:
        by_index = {d.index: d for d in native.inventory().devices}
        assert {c.vendor_code for c in by_index[3].health.conditions} == {"iluvatar.ixml:health-0x10"}
        assert {c.vendor_code for c in by_index[9].health.conditions} == {"iluvatar.ixml:health-0x40"}
        assert by_index[0].health.state is HealthState.HEALTHY
        assert by_index[3].health.state is not HealthState.HEALTHY
        assert all(d.health.state is HealthState.UNKNOWN for d in cli.inventory().devices)
    finally:
        native.close()
        cli.close()


def test_signature_table_after_full_read() -> None:
    fake = fake_of_replay(runner("bi-v150-16"))
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_ixml(lib)
    assert len(read.readings) == 16 and read.driver_version
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    assert set(lib.calls) == set(n.TABLE.functions)
    assert all(fn.source == n.SOURCE for fn in n.TABLE.functions.values())
    assert not fake.inited  # nvmlShutdown was called


def test_structs_match_the_nvml_layout() -> None:
    assert ctypes.sizeof(n.PciInfo) == 16 + 5 * 4 + 32
    assert ctypes.sizeof(n.Memory) == 24


def test_driver_errors_are_typed_and_partial() -> None:
    fake = fake_of_replay(runner("bi-v150-16"))
    fake.inject("nvmlDeviceGetMemoryInfo", 15)  # NVML_ERROR_GPU_IS_LOST
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_ixml(lib)
    assert len(read.readings) == 16 and all(r.memory_total_bytes is None for r in read.readings)
    assert len(read.problems) == 16
    assert all(type(p).__name__ == "DeviceLostError" for p in read.problems)
    fake.clear("nvmlDeviceGetMemoryInfo")
    fake.inject("nvmlDeviceGetCount_v2", 9)  # NVML_ERROR_DRIVER_NOT_LOADED
    with pytest.raises(DriverError, match="NVML_ERROR_DRIVER_NOT_LOADED"):
        n.read_ixml(NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None))
