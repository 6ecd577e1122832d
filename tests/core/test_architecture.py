"""The arrows of DESIGN.md section 1, enforced on the source (an import-linter equivalent)."""

from __future__ import annotations

import ast
import json
import re
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
            if "tests" in rel.parts:
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
    # The plugin author's toolkit (core ring): the plugin contract and what it builds on, never the
    # conformance kit; its `testing` module alone registers a plugin's replays with the kit.
    "accel.toolkit": ("accel.toolkit", "accel.plugin", "accel.model", "accel.errors", "accel.tools", "accel.sysfs"),
    "accel.toolkit.testing": ("accel.toolkit", "accel.conformance"),
    "accel.sysfs": ("accel.sysfs", "accel.model", "accel.errors"),
    "accel.k8s": ("accel.k8s", "accel.integrations.k8s"),  # the old name, kept for imports
    "accel.exporter": ("accel.exporter", "accel.integrations.exporter"),  # the old name, kept for imports
    # The Prometheus exporter (an integration): reads every backend through discovery, the leak
    # analysis over the model, the loopback check, and the kubelet PodResources client.
    "accel.integrations.exporter": (
        "accel.integrations.exporter", "accel.integrations.k8s._podresources", "accel.model", "accel.errors",
        "accel.discovery", "accel.plugin", "accel.leak", "accel._net",
    ),
    # DESIGN.md section 1: integrations -> model, discovery, scheduler (the extender runs accel.scheduler)
    # (accel._net: the loopback check its extender shares with the exporter)
    # (accel.plugin: the partition actuation contract its --dynamic-partitions drives, as a type)
    "accel.integrations.k8s": (
        "accel.integrations", "accel.model", "accel.errors", "accel.scheduler", "accel._net", "accel.plugin",
    ),
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
    # accel router: scheduler.serving's policies and autoscalers behind an HTTP proxy on the shared stack.
    "accel.router": ("accel.router", "accel.scheduler", "accel.errors", "accel._net", "accel.cli.commands"),
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


def _most_specific_rule(name: str) -> str | None:
    matching = [r for r in RULES if name == r or name.startswith(r + ".")]
    return max(matching, key=len) if matching else None


@pytest.mark.parametrize("rule", sorted(RULES))
def test_layer_imports_only_what_the_design_allows(rule: str) -> None:
    allowed = RULES[rule]
    bad = []
    for name, path in MODULES.items():
        if name != rule and not name.startswith(rule + "."):
            continue
        if _most_specific_rule(name) != rule:
            continue  # a narrower rule (accel.toolkit.testing within accel.toolkit) decides
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


#: A dotted module path written as a string (an entry point, ``importlib.import_module``'s argument).
_MODULE_STRING = re.compile(r"accel(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_.]*)?")


def _referenced(name: str, path: Path) -> set[str]:
    """What ``name`` imports, plus the modules it names in a string (``"pkg._mod:Class"``), which
    are imported later (a lazy backend, ``importlib``)."""
    out = _imports(name, path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            out.add(node.value.split(":", 1)[0])
    return out


def _private_of_another(name: str, imported: str) -> str | None:
    """Why importing ``imported`` from ``name`` breaks issue 34's rule, else ``None``: a private
    package under ``accel.plugins`` (``accel.plugins._cli`` was one) is imported by nobody; a
    plugin's ``_``-modules and the toolkit's are imported only from inside that package."""
    parts = imported.split(".")
    if parts[:2] == ["accel", "plugins"] and len(parts) >= 3:
        if parts[2].startswith("_"):
            return "a private package under accel.plugins"
        owner = parts[:3]
    elif parts[:2] == ["accel", "toolkit"]:
        owner = parts[:2]
    else:
        return None
    home = ".".join(owner)
    if len(parts) == len(owner) or name == home or name.startswith(home + "."):
        return None
    if parts[len(owner)].startswith("_"):
        return f"a private module or name of {home}"
    return None


def test_no_private_module_of_a_plugin_or_the_toolkit_is_imported_from_outside_it() -> None:
    """Issue 34: every plugin imports ``accel.toolkit`` (public names only) exactly as an
    out-of-tree plugin would, and nothing outside a plugin reaches into its ``_``-modules."""
    bad = []
    for name, path in MODULES.items():
        for imp in _ours(_referenced(name, path)):
            why = _private_of_another(name, imp)
            if why:
                bad.append(f"{name} imports {imp} ({why})")
    assert not bad, "\n".join(bad)


def test_outside_the_toolkit_only_its_public_names_are_imported() -> None:
    import accel.toolkit

    public = {*accel.toolkit.__all__, "testing"}
    bad = []
    for name, path in MODULES.items():
        if name == "accel.toolkit" or name.startswith("accel.toolkit."):
            continue
        for imp in _imports(name, path):
            if imp.startswith("accel.toolkit.") and imp.split(".")[2] not in public:
                bad.append(f"{name} imports {imp}")
    assert not bad, "\n".join(bad)


def test_the_private_import_rule_catches_what_it_claims() -> None:
    """The control: the rule above flags the imports it forbids and passes the ones it allows."""
    assert _private_of_another("accel.plugins.metax._parse", "accel.plugins._cli._values")
    assert _private_of_another("accel.plugins.metax._parse", "accel.plugins.nvidia._fake")
    assert _private_of_another("accel.cli._commands", "accel.plugins.nvidia._backend")
    assert _private_of_another("accel.plugins.hygon._parse", "accel.toolkit._problems")
    assert _private_of_another("accel.plugins.metax._backend", "accel.plugins.metax._parse") is None
    assert _private_of_another("accel.toolkit", "accel.toolkit._tables") is None
    assert _private_of_another("accel.plugins.metax._parse", "accel.toolkit.parse_kv") is None
    assert _private_of_another("accel.plugins.metax.conformance", "accel.toolkit.testing") is None
    assert _private_of_another("accel.cli._commands", "accel.plugins.nvidia") is None
    metax = _referenced("accel.plugins.metax._plugin", ROOT / "plugins" / "metax" / "_plugin.py")
    assert "accel.plugins.metax._backend" in metax  # the lazy backend's "module:Class" string


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
#: Shipped code outside the accel/ folder: every plugin, the kit, the scheduler.
_SIZE_CHECKED = ("accel.plugins", "accel.conformance", "accel.scheduler")
#: Folders whose every module is checked: the core ring ``accel/`` (integrations, CLI, tools,
#: discovery, toolkit... and modules added later) except what is exempt below.
_SIZE_CHECKED_FOLDERS = (ROOT / "accel",)
#: Nothing under accel/ is exempt any more (the job service was split by job).
_SIZE_EXEMPT: tuple[str, ...] = ()


def _size_checked(name: str, path: Path) -> bool:
    if _allowed(name, _SIZE_EXEMPT):
        return False
    return _allowed(name, _SIZE_CHECKED) or any(path.is_relative_to(folder) for folder in _SIZE_CHECKED_FOLDERS)


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


def test_the_size_rule_covers_the_core_ring() -> None:
    checked = {name for name, path in MODULES.items() if _size_checked(name, path)}
    for name in ("accel", "accel.tools._running", "accel.discovery._session", "accel.integrations.exporter._collector",
                 "accel.cli", "accel.plugins.nvidia._backend", "accel.service._core", "accel.service._app"):
        assert name in checked, name
    # Every module under accel/ is checked unless it is named as exempt (none is today).
    unchecked = [n for n, p in MODULES.items() if p.is_relative_to(ROOT / "accel") and n not in checked]
    assert unchecked == [n for n in unchecked if _allowed(n, _SIZE_EXEMPT)]


def test_no_class_over_500_lines_and_no_function_over_100() -> None:
    bad = [o for name, path in MODULES.items() if _size_checked(name, path) for o in oversized(path)]
    assert not bad, "\n".join(bad)


#: Issue 34: the queueing engine's stages, in the order written in the package docstring (the
#: line of ``_module -> _module``); each imports only stages before it and never reaches into the
#: engine (``eng._x``): they work on the typed state the engine hands them.
_QUEUEING = "accel.scheduler.queueing"


def _stage_order() -> list[str]:
    doc = ast.get_docstring(ast.parse(MODULES[_QUEUEING].read_text(encoding="utf-8"))) or ""
    # the order is the docstring's one arrow chain (it may wrap: a line ending in "->" goes on)
    lines = [ln.strip() for ln in doc.splitlines()]
    start = next((i for i, ln in enumerate(lines) if " -> " in ln), None)
    assert start is not None, f"{_QUEUEING}'s docstring must state the stage order (a -> b -> ...)"
    chain = [lines[start]]
    while chain[-1].endswith("->"):
        chain.append(lines[start + len(chain)])
    assert not [ln for ln in lines[start + len(chain):] if " -> " in ln], "one stage order, not two"
    order = [f"{_QUEUEING}.{m.strip()}" for m in " ".join(chain).split("->")]
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
