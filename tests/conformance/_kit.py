"""Helpers for the kit's own tests: run a generated suite module in a child pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

INI = """[pytest]
xfail_strict = true
filterwarnings =
    error
addopts = -p no:cacheprovider --import-mode=importlib
"""


def run_suite_module(
    tmp: Path, source: str, *extra: str, name: str = "test_generated.py", pythonpath: Sequence[Path] = ()
) -> tuple[int, str, dict[str, Any] | None]:
    """Write ``source`` as a test module, run pytest on it with --accel-report; return (rc, output, results).

    ``pythonpath`` goes before the repository on the child's ``PYTHONPATH`` (an extra plugin).
    """
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_text(source, encoding="utf-8")
    (tmp / "pytest.ini").write_text(INI, encoding="utf-8")
    report = tmp / "report"
    path = os.pathsep.join([*map(str, pythonpath), str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(tmp / "pytest.ini"), "--rootdir", str(tmp), "-q",
         str(tmp / name), "--accel-report", str(report), *extra],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    results = json.loads((report / "results.json").read_text()) if (report / "results.json").is_file() else None
    return proc.returncode, proc.stdout + proc.stderr, results


def failing_rows(run: dict[str, Any]) -> set[str]:
    return {rid for rid, r in run["rows"].items() if r["status"] in ("fail", "error")}


def example_plugin_path(site: Path) -> list[Path]:
    """``PYTHONPATH`` entries that make the example plugin's ``example`` backend importable and discoverable.

    A ``.dist-info`` in ``site`` with the entry point (what pip would write), and the plugin's
    source folder: no install, so the kit's tests stay offline and fast.
    """
    dist = site / "accel_backend_example_src-0.1.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: accel-backend-example-src\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[accel.backends]\nexample = accel_backend_example:PLUGIN\n")
    return [site, REPO / "tests" / "conformance" / "example_plugin"]
