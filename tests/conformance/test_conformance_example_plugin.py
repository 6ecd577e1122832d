"""The out-of-tree path for the kit's example plugin (``example_plugin/``, the fictional
``example-smi`` the kit's own tests replay): the template's ``ci.sh`` (``examples/accel-gaudi/``),
run on it unchanged, installs it into a fresh venv and it passes certification."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parent / "example_plugin"
CI_SH = Path(__file__).resolve().parents[2] / "examples" / "accel-gaudi" / "ci.sh"


@pytest.mark.skipif(shutil.which("bash") is None, reason="ci.sh needs bash")
def test_example_plugin_installs_out_of_tree_and_certifies(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path), "PLUGIN_DIR": str(PLUGIN)}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        ["bash", str(CI_SH), str(tmp_path / "report")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "certification: PASSED" in proc.stdout
    assert "site-packages/accel_backend_example/__init__.py" in proc.stdout
    assert (tmp_path / "report" / "PRODUCT.json").is_file()
    assert "example 0.1.0" in (tmp_path / "report" / "matrix.md").read_text()
    # Certified with every oracle row run (issue 15): none skips for want of an oracle.
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    for run in results["runs"]:
        for rid in ("inventory.oracle-devices", "memory.oracle-1pct"):
            assert run["rows"][rid]["status"] == "pass", (run["label"], rid, run["rows"][rid])
