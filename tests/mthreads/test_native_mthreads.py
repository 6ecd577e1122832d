"""Moore Threads' native path (MTML): the fake rendered from each scenario, the signature table
checked against the real ``mthreads-ml-py`` module, and the differential test."""

from __future__ import annotations

import ast
import ctypes
import inspect
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.errors import ConfigError, DriverError
from accel.model import HealthState
from accel.plugin import Backend, BackendConfig
from accel.plugins.mthreads import PLUGIN
from accel.plugins.mthreads import _native as n
from accel.plugins.mthreads._native_fake import fake_of_replay
from accel.toolkit import NativeLibrary, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner

PKG = "accel.plugins.mthreads"
SCENARIOS = scenario_names(PKG)
#: What one path sees and the other cannot, by compared field (docs/native-gaps.md, Moore Threads).
GAPS = {
    "health": "mthreads-gmi prints no health and no ECC counters, so the CLI path earns no health; "
    "MTML's mtmlMemoryGetEccErrorCounter earns it where the counters answer (s5000-8-faults)",
}
FAULTY_GPU = 5  # native.toml of s5000-8-faults: uncorrectable DRAM ECC errors


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
    assert [d.id for d in a.devices] == [d.id for d in b.devices]
    assert b.sources[0].api == "libmtml.so" and b.sources[0].tool_invocations == 0
    assert not b.problems
    # The same memory condition (used above total, S4000 IOMMU sample) on both paths; the ECC
    # condition of the native-only scenario on the native path alone.
    for x, y in zip(a.devices, b.devices, strict=True):
        only_native = {"EccUncorrectable"} if scenario == "s5000-8-faults" and x.index == FAULTY_GPU else set()
        assert {c.reason for c in x.health.conditions} | only_native == {c.reason for c in y.health.conditions}
    if scenario == "s5000-8-faults":
        assert result.one_sided == {"health": {"native"}}
    else:  # no ECC counters in native.toml: MTML answers NOT_SUPPORTED, health stays unknown
        assert result.one_sided.get("health") is None


def test_native_only_scenario_sees_ecc() -> None:
    """What only MTML sees: GPU 5's uncorrectable DRAM ECC errors make it critical; the counters
    that answer earn the other GPUs their health; the CLI path leaves all unknown."""
    native, cli = open_backend("s5000-8-faults", "native"), open_backend("s5000-8-faults", "cli")
    try:
        inv, cli_inv, samples = native.inventory(), cli.inventory(), native.telemetry()
    finally:
        native.close()
        cli.close()
    gpu5 = inv.devices[FAULTY_GPU]
    assert gpu5.health.state is HealthState.UNHEALTHY
    assert [c.vendor_code for c in gpu5.health.conditions] == ["mthreads.mtml:ecc-uncorrectable"]
    assert gpu5.extras["mthreads.com/eccUncorrected"] == 3 and gpu5.extras["mthreads.com/eccCorrected"] == 31
    assert inv.devices[2].extras["mthreads.com/eccCorrected"] == 4  # corrected alone is no condition
    assert all(d.health.state is HealthState.HEALTHY for d in inv.devices if d.index != FAULTY_GPU)
    assert all(d.health.state is HealthState.UNKNOWN for d in cli_inv.devices)
    assert [t.ecc_uncorrected_total for t in samples] == [0, 0, 0, 0, 0, 3, 0, 0]


def test_without_counters_health_stays_unknown() -> None:
    """Not supported is not healthy: s5000-8's fake has no ECC counters."""
    native = open_backend("s5000-8", "native")
    try:
        inv = native.inventory()
    finally:
        native.close()
    assert inv.devices and all(d.health.state is HealthState.UNKNOWN for d in inv.devices)
    assert all("mthreads.com/eccUncorrected" not in d.extras for d in inv.devices)


def test_fake_counter_conventions() -> None:
    """Error and counter types and the location are checked as MTML would; a driver failure of
    the counter is a typed, partial problem and leaves health unknown."""
    fake = fake_of_replay(runner("s5000-8-faults"))
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    dev, mem, count = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64()
    fake.mtmlLibraryInit(ctypes.byref(handle := ctypes.c_void_p()))
    fake.mtmlLibraryInitDeviceByIndex(handle, FAULTY_GPU, ctypes.byref(dev))
    fake.mtmlDeviceInitMemory(dev, ctypes.byref(mem))
    assert fake.mtmlMemoryGetEccErrorCounter(mem, 1, 0, 1, ctypes.byref(count)) == 0 and count.value == 3
    assert fake.mtmlMemoryGetEccErrorCounter(mem, 2, 1, 1, ctypes.byref(count)) == 3  # bad error type
    assert fake.mtmlMemoryGetEccErrorCounter(mem, 1, 2, 1, ctypes.byref(count)) == 3  # bad counter type
    assert fake.mtmlMemoryGetEccErrorCounter(mem, 1, 1, 2, ctypes.byref(count)) == 3  # unknown location
    assert fake.mtmlDeviceFreeMemory(mem) == fake.mtmlLibraryFreeDevice(dev) == fake.mtmlLibraryShutDown(handle) == 0
    fake.inject("mtmlMemoryGetEccErrorCounter", 2)  # MTML_ERROR_DRIVER_FAILURE
    read = n.read_mtml(lib)
    assert all(not r.health_read and not r.conditions for r in read.readings)
    assert {p.vendor_code for p in read.problems} == {"mthreads.mtml:2"}


def test_bad_native_state_is_a_config_error(tmp_path: Path) -> None:
    where = tmp_path / "bad"
    shutil.copytree(scenario_path(PKG, "s5000-8-faults"), where)
    state = where / "native.toml"
    state.write_text("[[device]]\ngpu = 9\necc = { uncorrected = 1 }\n")
    with pytest.raises(ConfigError, match="names no GPU"):
        fake_of_replay(ReplayRunner(where))
    state.write_text("[[device]]\ngpu = 1\necc = { uncorrected = -1 }\n")
    with pytest.raises(ConfigError, match="non-negative"):
        fake_of_replay(ReplayRunner(where))
    state.write_text("[[device]]\ngpu = 1\necc = { uncorected = 1 }\n")  # a misspelt key
    with pytest.raises(ConfigError, match="non-negative"):
        fake_of_replay(ReplayRunner(where))


def test_signature_table_after_full_read_frees_every_handle() -> None:
    fake = fake_of_replay(runner("s5000-8-faults"))
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_mtml(lib)
    assert len(read.readings) == 8 and read.driver_version
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    assert set(lib.calls) == set(n.TABLE.functions)
    assert fake.handles == {}  # library, system, devices, GPUs and memories all freed


pymtml = pytest.importorskip("pymtml")


def _calls_in_pymtml() -> Iterator[tuple[str, int]]:
    """(C function, number of arguments pymtml passes) for every ``fn = _mtmlGetFunctionPointer(
    "name")`` followed by ``fn(...)`` in the real module."""
    tree = ast.parse(inspect.getsource(pymtml))
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef):
            continue
        name = None
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "_mtmlGetFunctionPointer"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                name = node.args[0].value
        if name is None:
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fn":
                yield name, len(node.args)


def test_every_function_matches_the_real_binding() -> None:
    """Each declared function is one pymtml calls, with the same number of arguments."""
    seen: dict[str, set[int]] = {}
    for name, count in _calls_in_pymtml():
        seen.setdefault(name, set()).add(count)
    for name, fn in n.TABLE.functions.items():
        assert name in seen, f"{name} is not called by pymtml"
        assert len(fn.argtypes) in seen[name], (name, len(fn.argtypes), seen[name])


def test_pci_struct_matches_the_real_binding() -> None:
    mine, theirs = n.PciInfo, pymtml.c_mtmlPciInfo_t
    assert ctypes.sizeof(mine) == ctypes.sizeof(theirs)
    for (name, _t), (tname, _tt) in zip(mine._fields_, theirs._fields_, strict=True):
        assert name == tname
        assert getattr(mine, name).offset == getattr(theirs, tname).offset


@pytest.fixture
def pymtml_on_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The real module, its library replaced by the fake (as the NVIDIA fake serves pynvml)."""
    fake = fake_of_replay(runner("s5000-query-json"))  # the -q -j view has UUIDs and serials
    monkeypatch.setattr(pymtml, "mtmlLib", fake)
    monkeypatch.setattr(pymtml, "_mtmlGetFunctionPointer_cache", {})
    monkeypatch.setattr(pymtml, "_mtmlLib_handles", [])
    yield fake


def test_the_real_binding_reads_the_fake(pymtml_on_fake: object) -> None:
    """pymtml's own wrappers, called as a user would, against the fake: every call passes the
    table's argument conversion and reads the scenario's values."""
    pymtml.mtmlLibraryInit()
    try:
        assert pymtml.mtmlLibraryCountDevice() == 2
        dev = pymtml.mtmlLibraryInitDeviceByIndex(0)
        assert pymtml.mtmlDeviceGetIndex(dev) == 0
        assert pymtml.mtmlDeviceGetName(dev)
        assert pymtml.mtmlDeviceGetUUID(dev)
        assert pymtml.mtmlDeviceGetSerialNumber(dev)
        # pymtml's own PciInfo class is not ours (the layouts are compared above): the fake is
        # called with ours, through the same handle pymtml holds.
        pci = n.PciInfo()
        assert pymtml_on_fake.mtmlDeviceGetPciInfo(dev, ctypes.byref(pci)) == 0  # type: ignore[attr-defined]
        assert pci.bus
        mem = pymtml.mtmlDeviceInitMemory(dev)
        assert pymtml.mtmlMemoryGetTotal(mem) > 0
        assert pymtml.mtmlMemoryGetUsed(mem) >= 0
        gpu = pymtml.mtmlDeviceInitGpu(dev)
        assert 0 <= pymtml.mtmlGpuGetUtilization(gpu) <= 100
        assert pymtml.mtmlGpuGetTemperature(gpu) > 0
        pymtml.mtmlDeviceFreeGpu(gpu)
        pymtml.mtmlDeviceFreeMemory(mem)
        pymtml.mtmlLibraryFreeDevice(dev)
    finally:
        pymtml.mtmlLibraryShutDown()


def test_the_real_binding_reads_the_ecc_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    """pymtml's own ``mtmlMemoryGetEccErrorCounter`` against the fake of the native-only scenario."""
    fake = fake_of_replay(runner("s5000-8-faults"))
    monkeypatch.setattr(pymtml, "mtmlLib", fake)
    monkeypatch.setattr(pymtml, "_mtmlGetFunctionPointer_cache", {})
    monkeypatch.setattr(pymtml, "_mtmlLib_handles", [])
    pymtml.mtmlLibraryInit()
    try:
        dev = pymtml.mtmlLibraryInitDeviceByIndex(FAULTY_GPU)
        mem = pymtml.mtmlDeviceInitMemory(dev)
        dram = pymtml.MTML_MEMORY_LOCATION_DRAM
        assert (
            pymtml.MTML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pymtml.MTML_AGGREGATE_ECC,
            dram,
        ) == (n.ERROR_UNCORRECTED, n.AGGREGATE_ECC, n.LOCATION_DRAM)
        assert pymtml.mtmlMemoryGetEccErrorCounter(mem, 1, pymtml.MTML_AGGREGATE_ECC, dram) == 3
        assert pymtml.mtmlMemoryGetEccErrorCounter(mem, 0, pymtml.MTML_VOLATILE_ECC, dram) == 31
        pymtml.mtmlDeviceFreeMemory(mem)
        pymtml.mtmlLibraryFreeDevice(dev)
    finally:
        pymtml.mtmlLibraryShutDown()
    assert fake.handles == {}


def test_driver_errors_are_typed_and_partial() -> None:
    fake = fake_of_replay(runner("s5000-8"))
    fake.inject("mtmlMemoryGetTotal", 2)  # MTML_ERROR_DRIVER_FAILURE
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_mtml(lib)
    assert len(read.readings) == 8 and all(r.memory_total_bytes is None for r in read.readings)
    assert all(isinstance(p, DriverError) and p.vendor_code == "mthreads.mtml:2" for p in read.problems)
    assert fake.handles == {}
