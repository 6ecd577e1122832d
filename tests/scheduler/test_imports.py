"""accel.scheduler imports accel.model, accel.errors and accel.leak only (never plugins, discovery, vendors)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import accel.scheduler

# accel.leak: the placement input reads the memory-leak condition's reason (analysis over the model).
ALLOWED_ACCEL = {"accel.model", "accel.errors", "accel.scheduler", "accel.leak"}
FORBIDDEN_PREFIXES = ("accel.plugins", "accel.discovery", "accel.plugin", "accel.conformance", "accel.sim",
                      "accel.cli", "accel.tools", "pynvml", "pyrsmi", "amdsmi", "stevedore")


def test_import_pulls_in_no_plugin_or_vendor_module() -> None:
    code = ("import sys, json; import accel.scheduler; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('accel', 'pynvml', 'pyrsmi', "
            "'amdsmi', 'stevedore')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    mods = json.loads(out)
    bad = [m for m in mods if m.startswith(FORBIDDEN_PREFIXES)]
    assert bad == [], bad
    assert "accel.scheduler" in mods


def test_static_imports_stay_inside_the_allowed_arrows() -> None:
    root = Path(accel.scheduler.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: inside accel.scheduler, or a parent package
                    assert node.level == 1, f"{path.name}: relative import reaches outside the scheduler"
                    continue
                names = [node.module or ""]
            for name in names:
                if name.startswith("accel"):
                    assert any(name == a or name.startswith(a + ".") for a in ALLOWED_ACCEL), (path.name, name)
                assert not name.startswith(FORBIDDEN_PREFIXES), (path.name, name)


def test_public_api_is_curated() -> None:
    public = set(accel.scheduler.__all__)
    assert {"Scheduler", "Request", "ClusterState", "from_inventories", "GangPlacer", "make_scorer"} <= public
    assert all(not n.startswith("_") for n in public)
    for name in public:
        assert getattr(accel.scheduler, name) is not None
