"""Import the entry-point module in a fresh interpreter and measure what the import cost.

The rows ``discovery.entry-point-light`` and ``discovery.probe-light`` cannot be checked in the
test process: pytest, the suite and earlier tests have imported half the world already.  A
child interpreter (``python -X importtime``) with the parent's ``sys.path`` first imports
``accel.plugin`` (the API every plugin imports, not charged to the plugin), then imports the
plugin module and measures that import alone: its wall time, the threads it started (counted at
``_thread.start_new_thread``, so a thread that already ended counts too) and the modules it
added; then it probes an empty host.  It prints the new entries of ``sys.modules`` after each
step as JSON; ``-X importtime`` names the slowest modules for the failure message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Final

__all__ = ["VENDOR_MODULES", "ImportReport", "import_in_child", "vendor_modules_in"]

_REPORT: Final = "ACCEL-ISOLATION "

#: Top-level modules a plugin must not import before ``open()``: vendor libraries and ML
#: frameworks (each loads drivers or starts threads at import).  Extend per suite.
VENDOR_MODULES: Final = frozenset(
    {
        "pynvml", "nvidia_smi", "cuda", "cupy", "pycuda", "pynvjitlink",
        "amdsmi", "pyrsmi", "rsmiBindings", "rocm_smi", "hip",
        "torch", "torch_npu", "torch_mlu", "torch_musa", "torch_gcu", "tensorflow", "jax", "jaxlib",
        "acl", "dcmi", "pydcmi", "ascend", "cndev", "pycndev", "cnmon", "pyhgml", "hgml",
        "pymtml", "mtml", "pymxsml", "mxsml", "pyixml", "ixml", "pyxpum", "xpum", "kunlun", "xpu_smi",
        "efml", "pyefml", "pyhlml", "hlml", "openvino", "habana_frameworks",
    }
)

_SCRIPT: Final = r"""
import importlib, json, sys, threading, time, _thread
from pathlib import Path
spec = json.loads(sys.argv[1])
sys.path[:0] = [p for p in spec["path"] if p not in sys.path]
before = set(sys.modules)
out = {"import_error": None, "probe_error": None, "probe_status": None, "after_probe": None}
try:
    importlib.import_module("accel.plugin")  # every plugin imports it: not charged to the plugin
except BaseException:
    pass  # the plugin's own import reports the problem
started = []
_real_start = _thread.start_new_thread
def _counting_start(*args, **kwargs):
    started.append(getattr(args[0], "__qualname__", repr(args[0])) if args else "?")
    return _real_start(*args, **kwargs)
_thread.start_new_thread = threading._start_new_thread = _counting_start
base = set(sys.modules)
alive = {t.ident for t in threading.enumerate()}
obj = None
t0 = time.perf_counter()
try:
    __import__(spec["module"])  # not importlib.import_module: -X importtime times only __import__
    obj = sys.modules[spec["module"]]
    for part in filter(None, spec["attr"].split(".")):
        obj = getattr(obj, part)
except BaseException as exc:
    out["import_error"] = f"{type(exc).__name__}: {exc}"
out["import_s"] = time.perf_counter() - t0
out["threads_started"] = list(started)
out["threads_alive"] = sorted(t.name for t in threading.enumerate() if t.ident not in alive)
_thread.start_new_thread = threading._start_new_thread = _real_start
out["own_modules"] = sorted(set(sys.modules) - base)
out["after_import"] = sorted(set(sys.modules) - before)
if out["import_error"] is None and spec["probe"]:
    try:
        from accel.plugin import BackendConfig
        plugin = obj() if isinstance(obj, type) else obj
        empty = Path(spec["empty"])
        result = plugin.probe(BackendConfig(sysfs_root=empty, dev_root=empty))
        out["probe_status"] = str(getattr(result, "status", result))
    except BaseException as exc:
        out["probe_error"] = f"{type(exc).__name__}: {exc}"
    out["after_probe"] = sorted(set(sys.modules) - before)
print("ACCEL-ISOLATION " + json.dumps(out), flush=True)
"""


@dataclass(frozen=True)
class ImportReport:
    """What the child saw.  ``after_probe`` is ``None`` when the probe was not reached."""

    target: str
    import_error: str | None
    after_import: tuple[str, ...]
    probe_error: str | None
    probe_status: str | None
    after_probe: tuple[str, ...] | None
    #: Wall time of the plugin module's import alone (``accel.plugin`` was imported before).
    import_s: float = 0.0
    #: Threads the import started (``_thread.start_new_thread`` calls), and those still alive after it.
    threads_started: tuple[str, ...] = ()
    threads_alive: tuple[str, ...] = ()
    #: Modules the plugin's import added beyond ``accel.plugin`` and what it imports.
    own_modules: tuple[str, ...] = ()
    #: The slowest of ``own_modules`` by cumulative import time (``-X importtime``), slowest first.
    slowest: tuple[tuple[str, float], ...] = ()


def vendor_modules_in(modules: tuple[str, ...], vendor: frozenset[str]) -> list[str]:
    """The modules whose top-level package is a vendor library, sorted."""
    return sorted(m for m in modules if m.split(".", 1)[0] in vendor)


_CACHE: dict[tuple[str, str, bool], ImportReport] = {}


def import_in_child(module: str, attr: str, *, probe: bool = True, timeout_s: float = 60.0) -> ImportReport:
    """Import ``module`` (and resolve ``attr``) in a child interpreter; probe an empty host.

    Raises :class:`RuntimeError` when the child hangs or dies without a report: the caller turns
    that into a failed row with the child's output.  A module's answer is cached for the rest of
    the process (many suite classes share one plugin module).
    """
    key = (module, attr, probe)
    if key not in _CACHE:
        _CACHE[key] = _import_in_child(module, attr, probe=probe, timeout_s=timeout_s)
    return _CACHE[key]


def _slowest(stderr: str, modules: tuple[str, ...], count: int = 3) -> tuple[tuple[str, float], ...]:
    """The ``count`` modules of ``modules`` with the largest cumulative ``-X importtime``, in seconds."""
    wanted = set(modules)
    times: dict[str, float] = {}
    for line in stderr.splitlines():
        # "import time:  self [us] | cumulative | imported package", the name indented by depth.
        if not line.startswith("import time:"):
            continue
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].strip()
        if name in wanted:
            times[name] = max(times.get(name, 0.0), int(parts[1]) / 1e6)
    return tuple(sorted(times.items(), key=lambda kv: (-kv[1], kv[0]))[:count])


def _import_in_child(module: str, attr: str, *, probe: bool, timeout_s: float) -> ImportReport:
    target = f"{module}:{attr}" if attr else module
    with tempfile.TemporaryDirectory(prefix="accel-empty-host-") as empty:
        spec = {"module": module, "attr": attr, "probe": probe, "empty": empty, "path": list(sys.path)}
        try:
            proc = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", _SCRIPT, json.dumps(spec)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"importing {target} in a fresh interpreter took over {timeout_s:g} s") from exc
    for line in proc.stdout.splitlines():
        if line.startswith(_REPORT):
            data = json.loads(line.removeprefix(_REPORT))
            own = tuple(data["own_modules"])
            return ImportReport(
                target=target,
                import_error=data["import_error"],
                after_import=tuple(data["after_import"]),
                probe_error=data["probe_error"],
                probe_status=data["probe_status"],
                after_probe=tuple(data["after_probe"]) if data["after_probe"] is not None else None,
                import_s=float(data["import_s"]),
                threads_started=tuple(data["threads_started"]),
                threads_alive=tuple(data["threads_alive"]),
                own_modules=own,
                slowest=_slowest(proc.stderr, own),
            )
    tail = "\n".join(ln for ln in proc.stderr.splitlines() if not ln.startswith("import time:"))[-2000:]
    raise RuntimeError(f"a fresh interpreter importing {target} exited {proc.returncode} without a report: "
                       f"{tail or proc.stdout[-2000:]}")
