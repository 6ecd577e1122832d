"""The arrows of DESIGN.md section 1, enforced on the source (an import-linter equivalent)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The folder map, written once: pyproject.toml's [tool.setuptools.package-dir].
_PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]["package-dir"]
FOLDERS = {name: ROOT / folder for name, folder in _PACKAGE_DIR.items()}
VENDOR_MODULES = ("pynvml", "amdsmi", "pyrsmi", "pycndev", "pymtml", "pyixml")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for prefix, folder in FOLDERS.items():
        if not folder.is_dir():
            continue
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder)
            if "_template" in rel.parts or "tests" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def _imports(name: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{alias.name}" for alias in node.names)
    return out


MODULES = _modules()


def _ours(imports: set[str]) -> set[str]:
    return {i for i in imports if i == "accel" or i.startswith("accel.")}


def _allowed(imported: str, prefixes: tuple[str, ...]) -> bool:
    return any(imported == p or imported.startswith(p + ".") for p in prefixes)


RULES = {
    # module prefix: what of ours it may import
    "accel.model": ("accel.model", "accel.errors"),
    # accel.leak: the scheduler reads the leak condition's reason (analysis over the model).
    "accel.scheduler": ("accel.scheduler", "accel.model", "accel.errors", "accel.leak"),
    "accel.leak": ("accel.leak", "accel.model", "accel.errors"),
    "accel.plugin": ("accel.plugin", "accel.model", "accel.errors", "accel.tools"),
    "accel.discovery": ("accel.discovery", "accel.plugin", "accel.model", "accel.errors", "accel.sysfs"),
    "accel.tools": ("accel.tools", "accel.errors"),
    # The public face of the toolkit: re-exports its private home, never the conformance kit.
    "accel.toolkit": ("accel.toolkit", "accel.plugins._cli"),
    "accel.sysfs": ("accel.sysfs", "accel.model", "accel.errors"),
    "accel.k8s": ("accel.k8s", "accel.integrations.k8s"),  # the old name, kept for imports
    # DESIGN.md section 1: integrations -> model, discovery, scheduler (the extender runs accel.scheduler)
    # (accel._net: the loopback check its extender shares with the exporter)
    "accel.integrations.k8s": ("accel.integrations", "accel.model", "accel.errors", "accel.scheduler", "accel._net"),
    "accel._net": ("accel._net",),
    # Reads each backend through discovery; accel.plugin only for the BackendConfig it passes.
    "accel.integrations.frameworks": (
        "accel.integrations", "accel.model", "accel.errors", "accel.discovery", "accel.plugin",
    ),
    "accel.integrations.slurm": ("accel.integrations", "accel.model", "accel.errors"),
    # DESIGN.md section 11: service -> scheduler, discovery, integrations, model (plus the errors, the
    # BackendConfig its sim executor opens a backend with, the loopback check, and the CLI's Command type
    # its command module registers with; the slurm executor runs sbatch / squeue / scancel through
    # accel.tools, the project's one way to run a tool, and the executors' `sim:<profile>` inventory
    # source lists the simulator's profiles).
    "accel.service": (
        "accel.service", "accel.scheduler", "accel.discovery", "accel.integrations", "accel.model", "accel.errors",
        "accel.plugin", "accel._net", "accel.cli.commands", "accel.__version__", "accel.tools", "accel.sim",
    ),
    "accel.conformance": (
        "accel.conformance", "accel.plugin", "accel.model", "accel.errors", "accel.sysfs", "accel.tools",
        "accel.testing", "accel.discovery",
    ),
}


def test_no_layer_below_the_service_imports_it() -> None:
    """DESIGN.md section 11: integrations -/-> service, scheduler -/-> service (nor anything else
    but the CLI's command list, which names its commands by entry point, not by import)."""
    bad = []
    for name, path in MODULES.items():
        if name.startswith("accel.service"):
            continue
        for imp in _ours(_imports(name, path)):
            if _allowed(imp, ("accel.service",)):
                bad.append(f"{name} imports {imp}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_layer_imports_only_what_the_design_allows(rule: str) -> None:
    allowed = RULES[rule]
    bad = []
    for name, path in MODULES.items():
        if name != rule and not name.startswith(rule + "."):
            continue
        for imp in _ours(_imports(name, path)):
            if imp in ("accel", "accel.__version__"):
                continue  # the version string
            if not _allowed(imp, allowed):
                bad.append(f"{name} imports {imp}")
    assert not bad, "\n".join(bad)


def test_plugins_never_import_discovery_cli_scheduler_or_sim() -> None:
    bad = []
    for name, path in MODULES.items():
        if not name.startswith("accel.plugins"):
            continue
        for imp in _ours(_imports(name, path)):
            if _allowed(imp, ("accel.discovery", "accel.cli", "accel.scheduler", "accel.sim")):
                bad.append(f"{name} imports {imp}")
    assert not bad, "\n".join(bad)


def test_vendor_libraries_only_in_boundary_modules() -> None:
    """Only ``_``-prefixed boundary modules (and fakes under ``testing``) import a vendor SDK."""
    bad = []
    for name, path in MODULES.items():
        vendor = {i for i in _imports(name, path) if i.split(".")[0] in VENDOR_MODULES}
        if not vendor:
            continue
        leaf = name.rsplit(".", 1)[-1]
        if not (leaf.startswith("_") or ".testing" in name):
            bad.append(f"{name} imports {sorted(vendor)}")
    assert not bad, "\n".join(bad)


#: Issue 34: a class over this many lines, or a function over _MAX_FUNCTION_LINES, holds more than
#: one job.  Checked where the rule holds so far (shipped code, fakes under ``testing`` included).
_MAX_CLASS_LINES, _MAX_FUNCTION_LINES = 500, 100
_SIZE_CHECKED = ("accel.plugins.nvidia", "accel.scheduler")


def oversized(path: Path) -> list[str]:
    """The classes and functions of ``path`` over the limits, as ``file:line name (N lines)``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            limit = _MAX_CLASS_LINES
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            limit = _MAX_FUNCTION_LINES
        else:
            continue
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if lines > limit:
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_class_over_500_lines_and_no_function_over_100() -> None:
    bad = [o for name, path in MODULES.items() if _allowed(name, _SIZE_CHECKED) for o in oversized(path)]
    assert not bad, "\n".join(bad)


#: Issue 34: the queueing engine's stages, in the order written in the package docstring (the
#: line of ``_module -> _module``); each imports only stages before it and never reaches into the
#: engine (``eng._x``): they work on the typed state the engine hands them.
_QUEUEING = "accel.scheduler.queueing"


def _stage_order() -> list[str]:
    doc = ast.get_docstring(ast.parse(MODULES[_QUEUEING].read_text(encoding="utf-8"))) or ""
    lines = [ln.strip() for ln in doc.splitlines() if " -> " in ln]
    assert len(lines) == 1, f"{_QUEUEING}'s docstring must state the stage order on one line"
    order = [f"{_QUEUEING}.{m.strip()}" for m in lines[0].split("->")]
    assert all(m in MODULES for m in order), f"the stage order names a module that does not exist: {order}"
    return order


def _package_imports(name: str) -> set[str]:
    """The modules of the queueing package that ``name`` imports (``pkg._x``, not ``pkg._x.Name``)."""
    depth = _QUEUEING.count(".") + 2
    return {".".join(i.split(".")[:depth]) for i in _imports(name, MODULES[name])
            if i.startswith(_QUEUEING + "._")} - {name}


def test_queueing_stages_import_one_way() -> None:
    order = _stage_order()
    rank = {m: i for i, m in enumerate(order)}
    inside = [n for n in MODULES if n.startswith(_QUEUEING + ".")]
    # modules that are not stages: "below" (they import no stage) or users of the façade
    below = {n for n in inside if n not in rank and not (_package_imports(n) & rank.keys())}
    bad = []
    for name in inside:
        imported = _package_imports(name)
        if name in rank:
            bad += [f"{name} imports the later stage {m}" for m in imported if m in rank and rank[m] >= rank[name]]
            bad += [f"{name} imports {m}, which imports stages" for m in imported if m not in rank and m not in below]
        elif name not in below:
            bad += [f"{name} (not a stage) imports the stage {m}" for m in imported
                    if m in rank and m != order[-1]]
    assert not bad, "\n".join(bad)


def test_queueing_stages_never_reach_into_the_engine() -> None:
    bad = []
    for name in _stage_order()[:-1]:  # the last is the engine itself
        path = MODULES[name]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in ("eng", "engine")):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
            if isinstance(node, ast.Name) and node.id == "QueueingScheduler":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} names QueueingScheduler")
    assert not bad, "\n".join(bad)


def _fresh_modules(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    result: list[str] = json.loads(out.stdout)
    return result


def test_import_accel_loads_no_vendor_library_and_no_heavy_machinery() -> None:
    loaded = _fresh_modules("import sys, json, accel; print(json.dumps(sorted(sys.modules)))")
    assert not [m for m in loaded if m.split(".")[0] in VENDOR_MODULES]
    for heavy in ("stevedore", "pydantic", "accel.discovery", "accel.model", "accel.plugins"):
        assert heavy not in loaded, heavy


def test_discovery_and_sim_load_no_vendor_library() -> None:
    code = (
        "import sys, json, accel\n"
        "from accel.discovery import discover\n"
        "discover(backends=None)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = _fresh_modules(code)
    assert not [m for m in loaded if m.split(".")[0] in VENDOR_MODULES]


def test_public_api_is_curated() -> None:
    import importlib

    for name in (
        "accel",
        "accel.model",
        "accel.plugin",
        "accel.errors",
        "accel.discovery",
        "accel.sim",
        "accel.tools",
        "accel.toolkit",
        "accel.sysfs",
        "accel.testing",
        "accel.k8s",
        "accel.integrations.k8s",
        "accel.integrations.frameworks",
        "accel.integrations.slurm",
        "accel.leak",
        "accel.scheduler",
        "accel.scheduler.serving",
        "accel.conformance",
        "accel.cli.commands",
    ):
        mod = importlib.import_module(name)
        exported = list(mod.__all__)
        assert exported == sorted(exported, key=lambda s: (not s.isupper(), s)) or exported == sorted(exported), name
        for item in exported:
            assert hasattr(mod, item), f"{name}.__all__ names missing {item}"
