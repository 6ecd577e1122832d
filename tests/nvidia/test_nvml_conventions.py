"""Every NVML call the plugin makes matches the real ``pynvml`` (nvidia-ml-py) and the fake.

The calls are collected by walking the plugin's source (no hand-kept list), then checked three
ways against the real binding: the wrapper exists, its signature accepts the arguments the
plugin passes (and the fake's method has the same parameters), and, at run time over every fake
scenario, what the plugin hands to a parameter that the real wrapper forwards to C unchanged is
a pointer (``byref``/array), never a struct by value, and a versioned struct carries a version
the binding defines for its size (``NVML_STRUCT_VERSION``: ``sizeof | N << 24``).
"""

from __future__ import annotations

import ast
import ctypes
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pynvml: ModuleType = pytest.importorskip(
    "pynvml", reason="nvidia-ml-py (module pynvml) is not installed: pip install -e '.[dev]'")
if not hasattr(pynvml, "_nvmlGetFunctionPointer"):
    pytest.skip("the installed pynvml is not NVIDIA's nvidia-ml-py binding", allow_module_level=True)

from accel.plugins.nvidia._nvml import Nvml  # noqa: E402
from accel.plugins.nvidia.testing import SCENARIOS, FakeNVML  # noqa: E402

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "plugins" / "nvidia"


@dataclass(frozen=True)
class Site:
    """One place in the plugin that calls NVML function ``fn``."""

    fn: str
    npos: int | None  # positional arguments after the function name; None: existence only
    keywords: tuple[str, ...]
    where: str


def _is_nvml(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("nvml") \
        and node.value[4:5].isupper() and node.value.isidentifier()


def _loop_values(func: ast.AST, name: str) -> list[str]:
    """Constants a loop variable ``name`` takes in ``for ... in <literal tuple>`` inside ``func``."""
    out: list[str] = []
    for node in ast.walk(func):
        if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Tuple | ast.List):
            continue
        names = [node.target] if isinstance(node.target, ast.Name) else list(getattr(node.target, "elts", []))
        pos = next((i for i, t in enumerate(names) if isinstance(t, ast.Name) and t.id == name), None)
        if pos is None:
            continue
        for item in node.iter.elts:
            value = item if isinstance(node.target, ast.Name) else item.elts[pos]  # type: ignore[attr-defined]
            if _is_nvml(value):
                out.append(value.value)  # type: ignore[attr-defined]
    return out


def _names(node: ast.AST, func: ast.AST) -> list[str]:
    if _is_nvml(node):
        return [node.value]  # type: ignore[attr-defined]
    if isinstance(node, ast.Name):
        return _loop_values(func, node.id)
    return []


def plugin_sites() -> tuple[list[Site], set[str]]:
    """Every NVML call site of the plugin, and every ``nvml*`` name its source mentions."""
    sites: list[Site] = []
    mentioned: set[str] = set()
    for path in sorted(PLUGIN_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        mentioned |= {n.value for n in ast.walk(tree) if _is_nvml(n)}  # type: ignore[attr-defined]
        funcs = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)]
        for func in funcs:
            for call in ast.walk(func):
                if not isinstance(call, ast.Call):
                    continue
                args = call.args
                if isinstance(call.func, ast.Name) and call.func.id == "get" and len(args) >= 2:
                    # _telemetry's local get(field, fn, *args, fallback=...) over _get
                    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
                    for fn in _names(args[1], func) + (_names(kw["fallback"], func) if "fallback" in kw else []):
                        sites.append(Site(fn, len(args) - 2, (), f"{path.name}:{call.lineno}"))
                    continue
                if not isinstance(call.func, ast.Attribute):
                    continue
                attr = call.func.attr
                kws = {k.arg: k.value for k in call.keywords if k.arg is not None}
                where = f"{path.name}:{call.lineno}"
                if attr == "call" and args:  # Nvml.call(fn, *args, device_id=..., **kwargs)
                    for fn in _names(args[0], func):
                        sites.append(Site(fn, len(args) - 1, tuple(k for k in kws if k != "device_id"), where))
                elif attr == "_get" and len(args) >= 3:  # _get(read, field, fn, *args, fallback=..., **kw)
                    rest = tuple(k for k in kws if k != "fallback")
                    for fn in _names(args[2], func) + (_names(kws["fallback"], func) if "fallback" in kws else []):
                        sites.append(Site(fn, len(args) - 3, rest, where))
                elif attr in ("_system", "_system_int"):
                    for a in args:
                        for fn in _names(a, func):
                            sites.append(Site(fn, 0, (), where))
                elif attr == "has" and args:
                    for fn in _names(args[0], func):
                        sites.append(Site(fn, None, (), where))
    return sites, mentioned


SITES, MENTIONED = plugin_sites()
CALLED = sorted({s.fn for s in SITES if s.npos is not None})


def test_the_walk_finds_the_calls() -> None:
    # Sanity: the walk sees the calls a reader sees (so the checks below are not vacuous).
    assert {"nvmlInit", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo",
            "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetCurrentClocksThrottleReasons",
            "nvmlSystemGetCudaDriverVersion"} <= set(CALLED)
    assert len(CALLED) >= 60


def test_every_mentioned_nvml_name_has_a_call_site() -> None:
    """A name the plugin spells but the walk cannot tie to a call would escape the checks."""
    fake_only = {n for n in MENTIONED if not callable(getattr(pynvml, n, None)) and hasattr(FakeNVML, n)}
    assert MENTIONED - {s.fn for s in SITES} - fake_only == set()


@pytest.mark.parametrize("fn", CALLED)
def test_function_exists_in_the_real_binding(fn: str) -> None:
    assert callable(getattr(pynvml, fn, None)), f"pynvml {pynvml.__name__} has no {fn}"


def _bindable(func: Any, site: Site) -> str | None:
    try:
        inspect.signature(func).bind(*([object()] * (site.npos or 0)), **{k: object() for k in site.keywords})
    except TypeError as exc:
        return f"{site.where}: {site.fn}({site.npos} positional, {site.keywords}) -> {exc}"
    return None


def _params(func: Any) -> list[tuple[str, bool]]:
    """(name, has a default) of a function's parameters, without ``self`` and private ``_x`` ones."""
    return [(p.name, p.default is not inspect.Parameter.empty)
            for p in inspect.signature(func).parameters.values() if not p.name.startswith("_")]


@pytest.mark.parametrize("fn", CALLED)
def test_plugin_calls_match_the_real_signature(fn: str) -> None:
    errors = [e for s in SITES if s.fn == fn and s.npos is not None
              if (e := _bindable(getattr(pynvml, fn), s)) is not None]
    assert errors == []


@pytest.mark.parametrize("fn", CALLED)
def test_fake_defines_it_with_the_real_parameters(fn: str) -> None:
    mine = FakeNVML.__dict__.get(fn)
    assert mine is not None, f"the fake does not implement {fn} (it would answer FunctionNotFound)"
    assert _params(mine)[1:] == _params(getattr(pynvml, fn)), fn  # [1:]: self


# -- what the real wrappers forward to C unchanged -----------------------------------------------

def forwarded(fn: str) -> dict[str, int]:
    """Parameters of the real wrapper ``fn`` handed to the C function unchanged, by position.

    Read from the binding's source: the arguments of the call to the function pointer that
    ``_nvmlGetFunctionPointer`` returned.  Such a parameter is what C receives: the caller must
    already pass the C type (a pointer for an out-struct).
    """
    src = textwrap.dedent(inspect.getsource(getattr(pynvml, fn)))
    tree = ast.parse(src)
    func = tree.body[0]
    assert isinstance(func, ast.FunctionDef)
    params = [a.arg for a in func.args.args]
    pointers = {t.id for n in ast.walk(func) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and getattr(n.value.func, "id", "") == "_nvmlGetFunctionPointer" for t in n.targets
                if isinstance(t, ast.Name)}
    out: dict[str, int] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in pointers:
            for a in node.args:
                if isinstance(a, ast.Name) and a.id in params:
                    out[a.id] = params.index(a.id)
    return out


def test_the_fabric_wrapper_forwards_the_struct_and_applies_no_byref() -> None:
    # The fact finding 6 of issue 13 rests on: the caller must pass byref(struct) itself.
    assert forwarded("nvmlDeviceGetGpuFabricInfoV") == {"device": 0, "gpuFabricInfo": 1}
    assert forwarded("nvmlDeviceGetGpuInstancePossiblePlacements") == {
        "device": 0, "profileId": 1, "placementsRef": 2, "countRef": 3}
    assert pynvml.nvmlGpuFabricInfo_v2 == ctypes.sizeof(pynvml.c_nvmlGpuFabricInfo_v2_t) | 2 << 24


def _versions() -> dict[int, int]:
    """Binding version constants ``nvml<Name>_v<N>``: value -> the struct size it names."""
    out = {}
    for name, value in vars(pynvml).items():
        if name.startswith("nvml") and "_v" in name and isinstance(value, int) and value >> 24:
            out[value] = value & 0xFFFFFF
    return out


def _referent(value: Any) -> Any:
    """The ctypes object a pointer-like argument points at (``None`` when it is not one)."""
    if type(value).__name__ == "CArgObject":
        return value._obj
    if isinstance(value, ctypes._Pointer) and not isinstance(value, pynvml.c_nvmlDevice_t):
        return value.contents if ctypes.cast(value, ctypes.c_void_p).value else None
    return None


def convention_errors(fn: str, args: tuple[Any, ...]) -> list[str]:
    errors = []
    versions = _versions()
    for name, pos in forwarded(fn).items():
        if pos >= len(args):
            continue
        value = args[pos]
        if isinstance(value, ctypes.Structure | ctypes.Union):
            errors.append(f"{fn}: {name} is a {type(value).__name__} by value; C expects a pointer (byref)")
            continue
        obj = _referent(value)
        fields = getattr(obj, "_fields_", None) if isinstance(obj, ctypes.Structure) else None
        if fields and fields[0][0] == "version":
            v = int(obj.version)
            if versions.get(v) != ctypes.sizeof(obj):
                errors.append(f"{fn}: {name}.version {v:#x} is no binding version for a "
                              f"{ctypes.sizeof(obj)}-byte {type(obj).__name__}")
    return errors


class RecordingNvml(Nvml):
    """An :class:`Nvml` session that keeps every call's arguments."""

    seen: list[tuple[str, tuple[Any, ...]]]

    def call(self, fn: str, *args: Any, device_id: str | None = None, **kwargs: Any) -> Any:
        self.seen.append((fn, args))
        return super().call(fn, *args, device_id=device_id, **kwargs)


def _exercise(name: str) -> list[tuple[str, tuple[Any, ...]]]:
    fake = FakeNVML(name)
    nv = RecordingNvml(fake)
    nv.seen = []
    from accel.plugin import BackendConfig
    from accel.plugins.nvidia._backend import NvidiaBackend

    try:
        nv.init()
        backend = NvidiaBackend(BackendConfig(options={"scenario": name}), nv, plugin_version="test", scenario=name)
    except Exception:  # noqa: BLE001 -- scenarios without hardware refuse to open: their calls still count
        return nv.seen
    try:
        backend.inventory()
        backend.health()
        backend.telemetry()
        backend.processes()
        backend.partition_profiles()
        backend.poll_events(0.0)
        _actuate(backend)
    finally:
        backend.close()
    return nv.seen


def _actuate(backend: Any) -> None:
    """Destroy and create MIG instances (plain and with a placement) so their calls are recorded;
    refusals are expected (busy instances, MIG mode off, no placement left)."""
    import contextlib

    from accel.errors import PartitionError, PermissionDeniedError

    refused = contextlib.suppress(PartitionError, PermissionDeniedError)
    for part in backend.partitions():
        with refused:
            backend.destroy_partition(part.id)
    for prof in backend.partition_profiles():
        for start in (None, *(p.start for p in prof.placements[-1:])):
            with refused:
                backend.create_partition(prof.parent_id, prof.name, placement_start=start)
    for dev in backend.inventory().devices[:1]:
        with refused:
            backend.create_partition(dev.id, "1g.10gb")  # MIG off / not MIG-capable: refused, typed


RUNTIME: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}


def _runtime() -> dict[str, list[tuple[str, tuple[Any, ...]]]]:
    if not RUNTIME:
        for name in sorted(SCENARIOS):
            RUNTIME[name] = _exercise(name)
    return RUNTIME


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_pointer_and_version_conventions_at_run_time(name: str) -> None:
    errors = sorted({e for fn, args in _runtime()[name] for e in convention_errors(fn, args)})
    assert errors == []


def test_every_call_with_a_forwarded_out_parameter_is_exercised() -> None:
    """The run-time check above saw each call whose wrapper forwards a non-handle argument."""
    seen = {fn for calls in _runtime().values() for fn, _ in calls}
    risky = {fn for fn in CALLED if set(forwarded(fn)) - {"device", "handle", "device1", "device2", "eventSet",
                                                          "gpuInstance", "migDevice"}}
    assert "nvmlDeviceGetGpuFabricInfoV" in risky
    legacy_only = {"nvmlDeviceGetGpuFabricInfo"}  # reached only when the V call is missing
    assert risky - seen - legacy_only == set()


def test_legacy_fabric_fallback_follows_the_convention() -> None:
    """A driver without the V call: the unversioned call gets byref(c_nvmlGpuFabricInfo_t)."""
    fake = FakeNVML("gb200-nvl72-tray")
    fake.scenario.missing.add("nvmlDeviceGetGpuFabricInfoV")
    nv = RecordingNvml(fake)
    nv.seen = []
    nv.init()
    from accel.plugin import BackendConfig
    from accel.plugins.nvidia._backend import NvidiaBackend

    backend = NvidiaBackend(BackendConfig(options={"scenario": fake.scenario.name}), nv, plugin_version="test",
                            scenario=fake.scenario.name)
    try:
        inv = backend.inventory()
    finally:
        backend.close()
    legacy = [args for fn, args in nv.seen if fn == "nvmlDeviceGetGpuFabricInfo"]
    assert len(legacy) == 4
    assert all(isinstance(_referent(a[1]), pynvml.c_nvmlGpuFabricInfo_t) for a in legacy)
    assert [d.id for d in inv.domains if d.kind == "nvlink_clique"] == [
        "nvidia:clique-9c6f5af3-53bf-49b5-a436-b66766c413c3/4026"]
    assert inv.problems == ()


def test_gpu_instance_listing_follows_the_real_convention() -> None:
    """nvmlDeviceGetGpuInstances forwards both pointers to C (nvml.h, NVIDIA/go-nvml gen/nvml/nvml.h at
    2f9e261fe40a7a1c54783d66805e8920564763b4: ``nvmlGpuInstance_t *gpuInstances, unsigned int *count``):
    the plugin passes an array of handles holding the profile's instanceCount and byref(c_uint)."""
    assert forwarded("nvmlDeviceGetGpuInstances") == {
        "device": 0, "profileId": 1, "gpuInstancesRef": 2, "countRef": 3}
    calls = [args for fn, args in _runtime()["a100-mig"] if fn == "nvmlDeviceGetGpuInstances"]
    assert calls
    for args in calls:
        arr, count = args[2], args[3]
        assert isinstance(arr, ctypes.Array) and arr._type_ is pynvml.c_nvmlGpuInstance_t
        assert isinstance(_referent(count), ctypes.c_uint)
    # the fake answers as nvml.h says: NULL pointers are INVALID_ARGUMENT, a short buffer is refused
    fake = FakeNVML("a100-mig")
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    pid = fake.scenario.gpus[0].mig_profiles[0].profile_id
    n = fake.scenario.gpus[0].mig_profiles[0].max_instances
    for arr, count in ((None, ctypes.byref(ctypes.c_uint())), ((pynvml.c_nvmlGpuInstance_t * n)(), None),
                       ((pynvml.c_nvmlGpuInstance_t * max(0, n - 1))(), ctypes.byref(ctypes.c_uint()))):
        with pytest.raises(pynvml.NVMLError) as info:
            fake.nvmlDeviceGetGpuInstances(h, pid, arr, count)
        assert info.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT
    got = ctypes.c_uint(99)
    assert fake.nvmlDeviceGetGpuInstances(h, pid, (pynvml.c_nvmlGpuInstance_t * n)(), ctypes.byref(got)) == 0
    assert got.value == sum(1 for m in fake.scenario.gpus[0].mig_slots.values()
                            if m.profile == fake.scenario.gpus[0].mig_profiles[0].name)
