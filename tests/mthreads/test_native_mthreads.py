"""Moore Threads' native path (MTML): the fake rendered from each scenario, the signature table
checked against the real ``mthreads-ml-py`` module, and the differential test."""

from __future__ import annotations

import ast
import ctypes
import inspect
from collections.abc import Iterator

import pytest

from accel.errors import DriverError
from accel.plugin import Backend, BackendConfig
from accel.plugins.mthreads import PLUGIN
from accel.plugins.mthreads import _native as n
from accel.plugins.mthreads._native_fake import fake_of_replay
from accel.toolkit import NativeLibrary, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner

PKG = "accel.plugins.mthreads"
SCENARIOS = scenario_names(PKG)
GAPS: dict[str, str] = {}


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
    # The same memory condition (used above total, S4000 IOMMU sample) on both paths.
    for x, y in zip(a.devices, b.devices, strict=True):
        assert {c.reason for c in x.health.conditions} == {c.reason for c in y.health.conditions}


def test_signature_table_after_full_read_frees_every_handle() -> None:
    fake = fake_of_replay(runner("s5000-8"))
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


def test_driver_errors_are_typed_and_partial() -> None:
    fake = fake_of_replay(runner("s5000-8"))
    fake.inject("mtmlMemoryGetTotal", 2)  # MTML_ERROR_DRIVER_FAILURE
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_mtml(lib)
    assert len(read.readings) == 8 and all(r.memory_total_bytes is None for r in read.readings)
    assert all(isinstance(p, DriverError) and p.vendor_code == "mthreads.mtml:2" for p in read.problems)
    assert fake.handles == {}
