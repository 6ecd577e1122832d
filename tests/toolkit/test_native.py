"""accel.toolkit's native-library pieces: loading, signature and error tables, versioned structs,
deadlines, and the fake-library framework, exercised by a tiny backend written as a vendor would."""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from accel.errors import (
    ConfigError,
    DeviceError,
    DriverError,
    DriverVersionError,
    LibraryNotFoundError,
    NotSupportedError,
    PermissionDeniedError,
)
from accel.toolkit import (
    ErrorTable,
    FakeLibrary,
    NativeCalls,
    NativeFunction,
    NativeLibrary,
    SignatureSource,
    SignatureTable,
    deref,
    fake_functions,
    library_candidates,
    load_library,
    set_out,
    signature_problems,
    struct_version,
    versioned,
)

# A made-up vendor ("demo") modelled on CNDev's conventions: out-struct first, a version field.
SRC = SignatureSource("example/demo-ml", "include/demo.h", "0123456789abcdef0123456789abcdef01234567")


class MemoryInfo(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int32), ("total_mib", ctypes.c_uint64), ("used_mib", ctypes.c_uint64)]


class PlainInfo(ctypes.Structure):
    _fields_ = [("total", ctypes.c_uint64)]


TABLE = SignatureTable.of(
    "libdemo.so",
    NativeFunction("demoInit", (ctypes.c_int,), ctypes.c_int, SRC),
    NativeFunction("demoGetDeviceCount", (ctypes.POINTER(ctypes.c_uint),), ctypes.c_int, SRC),
    NativeFunction("demoGetMemory", (ctypes.POINTER(MemoryInfo), ctypes.c_int), ctypes.c_int, SRC),
    NativeFunction("demoGetName", (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint), ctypes.c_int, SRC),
    NativeFunction("demoGetEcc", (ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)), ctypes.c_int, SRC),
)
ERRORS = ErrorTable(
    "demo.dml",
    {
        1: ("driver-not-loaded", "NO_DRIVER"),
        2: ("version", "LOW_DRIVER_VERSION"),
        3: ("not-supported", "NOT_SUPPORTED"),
        4: ("no-permission", "NO_PERMISSION"),
        5: ("not-found", "NO_DEVICES"),
        6: ("timeout", "TIMEOUT"),
    },
)


class FakeDemo(FakeLibrary):
    """Two devices; device 1 has no ECC counters."""

    TABLE = TABLE

    def demoInit(self, reserved: int) -> int:
        return 0

    def demoGetDeviceCount(self, count: Any) -> int:
        set_out(count, 2)
        return 0

    def demoGetMemory(self, info: Any, dev: int) -> int:
        out = deref(info)
        if out.version != 3:
            return 2
        out.total_mib, out.used_mib = 32768, 1024 * (dev + 1)
        return 0

    def demoGetName(self, dev: int, buf: Any, size: int) -> int:
        name = f"Demo-{dev}".encode()[: size - 1]
        ctypes.memmove(buf, name + b"\0", len(name) + 1)
        return 0

    def demoGetEcc(self, dev: int, count: Any) -> int:
        if dev == 1:
            return 3
        set_out(count, 7)
        return 0


def read_devices(lib: NativeLibrary) -> list[dict[str, Any]]:
    """The 'backend': the same code would run on the real ctypes library."""
    lib.call("demoInit", 0)
    count = ctypes.c_uint()
    lib.call("demoGetDeviceCount", ctypes.byref(count))
    out = []
    for dev in range(count.value):
        mem = versioned(MemoryInfo, 3)
        lib.call("demoGetMemory", ctypes.byref(mem), dev, device_id=str(dev))
        buf = ctypes.create_string_buffer(32)
        lib.call("demoGetName", dev, buf, len(buf))
        ecc = ctypes.c_uint64()
        has_ecc = lib.supported("demoGetEcc", dev, ctypes.byref(ecc))
        out.append(
            {
                "name": buf.value.decode(),
                "total_bytes": mem.total_mib << 20,
                "used_bytes": mem.used_mib << 20,
                "ecc": ecc.value if has_ecc else None,
            }
        )
    return out


def test_backend_runs_unchanged_on_the_fake() -> None:
    fake = FakeDemo()
    lib = NativeLibrary(fake, TABLE, ERRORS, timeout_s=None)
    assert read_devices(lib) == [
        {"name": "Demo-0", "total_bytes": 32768 << 20, "used_bytes": 1024 << 20, "ecc": 7},
        {"name": "Demo-1", "total_bytes": 32768 << 20, "used_bytes": 2048 << 20, "ecc": None},
    ]
    assert lib.calls == fake.calls
    # every call the backend made and every function the fake has is in the table
    assert signature_problems(TABLE, calls=lib.calls, fake=fake) == []


def test_signature_problems_names_undeclared_calls_and_fake_functions() -> None:
    class Drifted(FakeDemo):
        def demoGetPower(self, dev: int, mw: Any) -> int:
            return 0

        def demoGetEcc(self, dev: int) -> int:
            return 0

    problems = signature_problems(TABLE, calls=["demoInit", "demoGetClock"], fake=Drifted())
    assert problems == [
        "demoGetClock is called but not in the libdemo.so table",
        "the fake's demoGetEcc takes 1 arguments, the table declares 2",
        "the fake exposes demoGetPower, which is not in the libdemo.so table",
    ]
    assert fake_functions(FakeDemo())["demoGetName"] == 3

    class NoTable(FakeLibrary):
        pass

    with pytest.raises(TypeError, match="NoTable must set TABLE"):
        NoTable()


def test_fake_converts_arguments_as_ctypes_does() -> None:
    lib = NativeLibrary(FakeDemo(), TABLE, ERRORS, timeout_s=None)
    with pytest.raises(DriverError, match="demoGetDeviceCount rejected its arguments") as info:
        lib.call("demoGetDeviceCount", ctypes.byref(ctypes.c_int64()))  # wrong pointee type
    assert info.value.code == "driver.binding"
    with pytest.raises(DriverError, match="takes 2 arguments"):
        lib.call("demoGetMemory", ctypes.byref(MemoryInfo()))
    with pytest.raises(ConfigError, match="demoReset is not in the signature table"):
        lib.call("demoReset")


BY_VALUE = SignatureTable.of("libdemo.so", NativeFunction("demoSetLimit", (ctypes.c_int, PlainInfo), ctypes.c_int, SRC))


class FakeByValue(FakeLibrary):
    TABLE = BY_VALUE

    def demoSetLimit(self, dev: int, info: Any) -> int:
        return 0


def test_a_reference_where_a_struct_goes_by_value_is_refused_not_a_crash() -> None:
    # ctypes' Structure.from_param(byref(x)) crashes CPython; the fake and the library refuse it first.
    fake = FakeByValue()
    for ref in (ctypes.byref(PlainInfo()), ctypes.pointer(PlainInfo())):
        with pytest.raises(ctypes.ArgumentError, match="argument 2: PlainInfo is passed by value"):
            fake.demoSetLimit(0, ref)
        lib = NativeLibrary(fake, BY_VALUE, ERRORS, timeout_s=None)
        with pytest.raises(DriverError, match="demoSetLimit rejected its arguments") as info:
            lib.call("demoSetLimit", 0, ref)
        assert info.value.code == "driver.binding"
    assert fake.demoSetLimit(0, PlainInfo()) == 0
    assert NativeLibrary(fake, BY_VALUE, ERRORS, timeout_s=None).call("demoSetLimit", 0, PlainInfo()) == 0


def test_return_codes_map_to_typed_errors() -> None:
    fake = FakeDemo()
    lib = NativeLibrary(fake, TABLE, ERRORS, timeout_s=None)
    expected: dict[int, tuple[type[Exception], str]] = {
        1: (DriverError, "driver.not-loaded"),
        2: (DriverVersionError, "driver.version-mismatch"),
        3: (NotSupportedError, "device.not-supported"),
        4: (PermissionDeniedError, "permission.denied"),
        5: (DeviceError, "device.not-found"),
        6: (DriverError, "driver.timeout"),
        77: (DriverError, "driver.unknown"),
    }
    for rc, (cls, code) in expected.items():
        fake.inject("demoGetMemory", rc)
        with pytest.raises(cls) as info:
            lib.call("demoGetMemory", ctypes.byref(versioned(MemoryInfo, 3)), 0, device_id="0")
        assert type(info.value) is cls and info.value.code == code
        assert f"demo.dml error {rc}" in str(info.value) and "in demoGetMemory" in str(info.value)
        if isinstance(info.value, DriverError):
            assert info.value.vendor_code == f"demo.dml:{rc}"
        if isinstance(info.value, DeviceError):
            assert info.value.device_id == "0"
    fake.clear("demoGetMemory")
    assert lib.call("demoGetMemory", ctypes.byref(versioned(MemoryInfo, 3)), 0) == 0
    # an unversioned struct is refused by the library, as a real versioned API does
    with pytest.raises(DriverVersionError):
        lib.call("demoGetMemory", ctypes.byref(MemoryInfo()), 0)
    with pytest.raises(ValueError, match="unknown error kinds"):
        ErrorTable("x", {1: ("gone", "X")})  # type: ignore[dict-item]


def test_missing_symbol_is_unsupported() -> None:
    class Older(FakeLibrary):
        TABLE = TABLE

        def demoInit(self, reserved: int) -> int:
            return 0

    lib = NativeLibrary(Older(), TABLE, ERRORS, timeout_s=None)
    assert lib.has("demoInit") and not lib.has("demoGetEcc")
    assert not lib.supported("demoGetEcc", 0, ctypes.byref(ctypes.c_uint64()))
    with pytest.raises(NotSupportedError) as info:
        lib.call("demoGetEcc", 0, ctypes.byref(ctypes.c_uint64()))
    assert info.value.code == "driver.function-not-found"


def test_a_hung_call_times_out_and_the_library_is_not_called_again() -> None:
    fake = FakeDemo()
    fake.hang_on("demoGetDeviceCount")
    lib = NativeLibrary(fake, TABLE, ERRORS, timeout_s=0.05)
    assert lib.call("demoInit", 0) == 0  # calls run in the worker thread under the deadline
    try:
        started = time.monotonic()
        with pytest.raises(DriverError, match=r"did not return within 0\.05 s") as info:
            lib.call("demoGetDeviceCount", ctypes.byref(ctypes.c_uint()))
        assert time.monotonic() - started < 2
        assert info.value.code == "driver.timeout" and lib.hung == "demoGetDeviceCount"
        with pytest.raises(DriverError, match="hung in demoGetDeviceCount; not called again") as again:
            lib.call("demoInit", 0)
        assert again.value.code == "driver.timeout"
        assert fake.calls == {"demoInit": 1, "demoGetDeviceCount": 1}
    finally:
        fake.release()
    with pytest.raises(ValueError):
        NativeLibrary(fake, TABLE, ERRORS, timeout_s=0)


def test_worker_thread_passes_results_and_errors_back() -> None:
    lib = NativeLibrary(FakeDemo(), TABLE, ERRORS, timeout_s=5)
    assert [d["ecc"] for d in read_devices(lib)] == [7, None]
    with pytest.raises(DriverError, match="rejected its arguments"):
        lib.call("demoGetName", 0, 42, 8)


def test_versioned_structs() -> None:
    assert versioned(MemoryInfo, 6).version == 6
    v2 = versioned(MemoryInfo, 2, sized=True)
    assert v2.version == ctypes.sizeof(MemoryInfo) | 2 << 24 == struct_version(MemoryInfo, 2)
    with pytest.raises(TypeError, match="PlainInfo has no version field"):
        versioned(PlainInfo, 1)
    with pytest.raises(ValueError):
        struct_version(MemoryInfo, 0)


def test_deref_and_set_out() -> None:
    value = ctypes.c_int()
    set_out(ctypes.pointer(value), 5)
    assert value.value == 5
    set_out(ctypes.byref(value), 6)
    assert deref(value) is value and value.value == 6
    with pytest.raises(TypeError):
        deref(3)


def test_candidates_env_override_and_standard_locations(tmp_path: Path) -> None:
    names = ["libdemo.so.1", "libdemo.so"]
    env = {"DEMO_HOME": "/opt/demo"}
    assert library_candidates(names, dirs=["$DEMO_HOME/lib64", "${UNSET_HOME}/lib", "/usr/lib/demo"], environ=env) == [
        "/opt/demo/lib64/libdemo.so.1",
        "/opt/demo/lib64/libdemo.so",
        "/usr/lib/demo/libdemo.so.1",
        "/usr/lib/demo/libdemo.so",
        "libdemo.so.1",
        "libdemo.so",
    ]
    assert library_candidates(names, env_var="ACCEL_DEMO_LIB", dirs=["/x"], environ={"ACCEL_DEMO_LIB": "/y/l.so"}) == [
        "/y/l.so"
    ]
    override = {"ACCEL_DEMO_LIB": str(tmp_path)}
    assert library_candidates(names, env_var="ACCEL_DEMO_LIB", environ=override) == [
        str(tmp_path / "libdemo.so.1"),
        str(tmp_path / "libdemo.so"),
    ]


def test_load_library_names_every_path_tried() -> None:
    with pytest.raises(LibraryNotFoundError) as info:
        load_library("demo", ["libdemo-accel-test.so"], env_var="ACCEL_DEMO_LIB", dirs=["/nonexistent/lib"], environ={})
    err = info.value
    assert err.code == "driver.library-not-found" and err.vendor_code == "demo:library-not-found"
    assert "/nonexistent/lib/libdemo-accel-test.so (" in err.message
    assert "libdemo-accel-test.so (" in err.message and "set ACCEL_DEMO_LIB" in err.message
    fake = FakeDemo()
    tried: list[str] = []

    def loader(path: str) -> object:
        tried.append(path)
        if path != "/b/libdemo.so":
            raise OSError(f"{path}: cannot open shared object file")
        return fake

    assert load_library("demo", ["libdemo.so"], dirs=["/a", "/b"], environ={}, loader=loader) is fake
    assert tried == ["/a/libdemo.so", "/b/libdemo.so"]


@pytest.mark.skipif(ctypes.util.find_library("c") is None, reason="no libc to load")
def test_real_library_is_bound_from_the_table() -> None:
    libc_table = SignatureTable.of(
        "libc",
        NativeFunction(
            "strlen",
            (ctypes.c_char_p,),
            ctypes.c_size_t,
            SignatureSource("bminor/glibc", "string/string.h", "0" * 40),
        ),
    )
    name = ctypes.util.find_library("c")
    assert name is not None
    lib = NativeLibrary(load_library("libc", [name], environ={}), libc_table, timeout_s=1)
    assert lib.call("strlen", b"accel") == 5
    with pytest.raises(DriverError, match="rejected its arguments"):
        lib.call("strlen", 5)


def test_signature_source_is_checked() -> None:
    assert str(SRC) == "example/demo-ml@0123456789abcdef0123456789abcdef01234567:include/demo.h"
    for repo, path, commit in [("demo", "a.h", "0" * 40), ("a/b", "/abs.h", "0" * 40), ("a/b", "a.h", "abc")]:
        with pytest.raises(ValueError):
            SignatureSource(repo, path, commit)
    with pytest.raises(ValueError, match="declared twice"):
        SignatureTable.of("x", TABLE["demoInit"], TABLE["demoInit"])


def test_importing_the_toolkit_loads_no_library() -> None:
    code = (
        "import ctypes, sys\n"
        "calls = []\n"
        "orig = ctypes.CDLL.__init__\n"
        "ctypes.CDLL.__init__ = lambda self, *a, **k: (calls.append(a), orig(self, *a, **k))[1]\n"
        "import accel.toolkit\n"
        "print(len(calls))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "0"


def test_the_guide_example_runs_as_written() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "native-plugins.md"
    blocks = re.findall(r"```python\n(.*?)```", guide.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {"__name__": "native_guide_example"}
    exec(compile(blocks[0], str(guide), "exec"), namespace)
    with pytest.raises(LibraryNotFoundError, match="ACCEL_DEMO_LIB"):
        namespace["open_library"]()


def test_calls_are_serialized_and_a_waiting_caller_sees_the_hang() -> None:
    fake = FakeDemo()
    fake.hang_on("demoGetDeviceCount")
    lib = NativeLibrary(fake, TABLE, ERRORS, timeout_s=0.2)
    errors: list[BaseException] = []

    def first() -> None:
        try:
            lib.call("demoGetDeviceCount", ctypes.byref(ctypes.c_uint()))
        except DriverError as exc:
            errors.append(exc)

    try:
        t = threading.Thread(target=first)
        t.start()
        while not fake.calls.get("demoGetDeviceCount"):
            time.sleep(0.005)
        with pytest.raises(DriverError, match="hung in demoGetDeviceCount; not called again for demoInit"):
            lib.call("demoInit", 0)  # waits for the hung call's deadline, then is refused
        t.join(5)
        assert [str(e) for e in errors] == ["libdemo.so: demoGetDeviceCount did not return within 0.2 s"]
        assert "demoInit" not in fake.calls
    finally:
        fake.release()


def test_per_call_deadline_and_close() -> None:
    fake = FakeDemo()
    fake.hang_on("demoGetEcc")
    with NativeLibrary(fake, TABLE, ERRORS, timeout_s=30) as lib:
        assert lib.call("demoInit", 0) == 0
        worker = lib._worker
        assert worker is not None and worker.alive
        try:
            with pytest.raises(DriverError, match=r"within 0\.05 s"):
                lib.call("demoGetEcc", 0, ctypes.byref(ctypes.c_uint64()), deadline_s=0.05)
        finally:
            fake.release()
        with pytest.raises(ValueError):
            lib.call("demoInit", 0, deadline_s=0)
    with pytest.raises(ConfigError, match="closed"):
        lib.call("demoInit", 0)
    lib2 = NativeLibrary(FakeDemo(), TABLE, ERRORS, timeout_s=1)
    lib2.call("demoInit", 0)
    worker2 = lib2._worker
    assert worker2 is not None
    lib2.close()
    worker2._thread.join(2)
    assert not worker2.alive


def test_native_calls_keep_unsupported_fields_apart_from_failures() -> None:
    fake = FakeDemo()
    lib = NativeLibrary(fake, TABLE, ERRORS, timeout_s=None)
    problems: list[Any] = []
    calls = NativeCalls(lib, problems, "demo 1")
    ecc = ctypes.c_uint64()
    assert calls("demoGetEcc", 0, ctypes.byref(ecc)) and ecc.value == 7
    assert not calls("demoGetEcc", 1, ctypes.byref(ecc)) and problems == []  # not supported: no problem
    fake.inject("demoGetEcc", 4)  # no permission: a failure the read reports as partial
    assert not calls("demoGetEcc", 0, ctypes.byref(ecc))
    assert [p.code for p in problems] == ["permission.denied"]
    fake.inject("demoGetEcc", 6)  # the library's own timeout code is a driver.timeout: it ends the read
    with pytest.raises(DriverError) as info:
        calls("demoGetEcc", 0, ctypes.byref(ecc))
    assert info.value.code == "driver.timeout" and len(problems) == 1
