"""Import the entry-point module in a fresh interpreter and list what it pulled in.

The rows ``discovery.entry-point-light`` and ``discovery.probe-light`` cannot be checked in the
test process: pytest, the suite and earlier tests have imported half the world already.  A
child interpreter with the parent's ``sys.path`` imports the plugin module, then probes an empty
host, and prints the new entries of ``sys.modules`` after each step as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Final

__all__ = ["VENDOR_MODULES", "ImportReport", "import_in_child", "vendor_modules_in"]

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
import importlib, json, sys
from pathlib import Path
spec = json.loads(sys.argv[1])
sys.path[:0] = [p for p in spec["path"] if p not in sys.path]
before = set(sys.modules)
out = {"import_error": None, "probe_error": None, "probe_status": None, "after_probe": None}
obj = None
try:
    obj = importlib.import_module(spec["module"])
    for part in filter(None, spec["attr"].split(".")):
        obj = getattr(obj, part)
except BaseException as exc:
    out["import_error"] = f"{type(exc).__name__}: {exc}"
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
print("ACCEL-ISOLATION " + json.dumps(out))
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


def _import_in_child(module: str, attr: str, *, probe: bool, timeout_s: float) -> ImportReport:
    target = f"{module}:{attr}" if attr else module
    with tempfile.TemporaryDirectory(prefix="accel-empty-host-") as empty:
        spec = {"module": module, "attr": attr, "probe": probe, "empty": empty, "path": list(sys.path)}
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _SCRIPT, json.dumps(spec)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"importing {target} in a fresh interpreter took over {timeout_s:g} s") from exc
    for line in proc.stdout.splitlines():
        if line.startswith("ACCEL-ISOLATION "):
            data = json.loads(line.removeprefix("ACCEL-ISOLATION "))
            return ImportReport(
                target=target,
                import_error=data["import_error"],
                after_import=tuple(data["after_import"]),
                probe_error=data["probe_error"],
                probe_status=data["probe_status"],
                after_probe=tuple(data["after_probe"]) if data["after_probe"] is not None else None,
            )
    tail = (proc.stderr or proc.stdout)[-2000:]
    raise RuntimeError(f"a fresh interpreter importing {target} exited {proc.returncode} without a report: {tail}")
