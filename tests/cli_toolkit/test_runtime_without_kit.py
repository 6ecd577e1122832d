"""Runtime code of every plugin runs without the conformance kit.

The kit (``accel.conformance``) is a test facility: only a plugin's ``conformance`` module and its
``testing`` fakes may import it.  A fresh interpreter imports every other module of every shipped
plugin and of the toolkit (``accel.toolkit``), opens each CLI plugin over one of its replay scenarios and reads it; ``accel.conformance``
must still be absent from ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys

_CODE = """
import importlib, json, pkgutil, sys
import accel.plugins as root
import accel.toolkit as toolkit
from accel.plugin import BackendConfig
from accel.toolkit import scenario_names

imported, opened = [], []
for info in pkgutil.walk_packages(toolkit.__path__, "accel.toolkit."):
    if info.name.split(".")[2] != "testing":
        importlib.import_module(info.name)
        imported.append(info.name)
for info in pkgutil.walk_packages(root.__path__, "accel.plugins."):
    inner = info.name.split(".")[2:]
    if any(p in ("conformance", "testing", "_template", "scenarios") for p in inner):
        continue
    module = importlib.import_module(info.name)
    imported.append(info.name)
    names = scenario_names(info.name) if len(inner) == 1 and hasattr(module, "PLUGIN") else ()
    if names:
        backend = module.PLUGIN.open(BackendConfig(options={"scenario": names[0]}))
        backend.inventory(), backend.telemetry(), backend.health()
        backend.close()
        opened.append(info.name)
kit = sorted(m for m in sys.modules if m == "accel.conformance" or m.startswith("accel.conformance."))
print(json.dumps({"imported": imported, "opened": opened, "kit": kit}))
"""


def test_plugin_runtime_never_imports_the_conformance_kit() -> None:
    out = subprocess.run([sys.executable, "-c", _CODE], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout)
    assert result["kit"] == [], f"runtime code loaded the conformance kit: {result['kit']}"
    # The check covers what it claims: every vendor plugin, and the CLI ones opened and read.
    packages = {name.split(".")[2] for name in result["imported"] if name.startswith("accel.plugins.")}
    assert {"amd", "nvidia", "ascend", "cambricon", "hygon", "enflame"} <= packages
    assert {"accel.toolkit._tool", "accel.toolkit._tables", "accel.toolkit._unit"} <= set(result["imported"])
    assert {"ascend", "cambricon", "hygon", "enflame", "iluvatar", "kunlunxin", "metax", "mthreads"} <= {
        name.split(".")[2] for name in result["opened"]
    }


def test_the_testing_module_does_import_the_kit() -> None:
    """The control: the scenarios helper lives in ``accel.toolkit.testing`` and that module loads the kit."""
    code = (
        "import sys, accel.toolkit.testing; "
        "print('accel.conformance' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True"
