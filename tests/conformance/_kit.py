"""Helpers for the kit's own tests: run a generated suite module in a child pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    tmp: Path, source: str, *extra: str, name: str = "test_generated.py"
) -> tuple[int, str, dict[str, Any] | None]:
    """Write ``source`` as a test module, run pytest on it with --accel-report; return (rc, output, results)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / name).write_text(source, encoding="utf-8")
    (tmp / "pytest.ini").write_text(INI, encoding="utf-8")
    report = tmp / "report"
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
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
