"""accel.scheduler.queueing uses part 1 through its public API only, pulls in nothing heavy,
and keeps a curated public surface."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import accel.scheduler
import accel.scheduler.queueing as q

ROOT = Path(q.__file__).parent
STDLIB_OK = {"__future__", "argparse", "bisect", "collections", "contextlib", "csv", "dataclasses", "enum", "fcntl",
             "heapq", "functools", "gc", "json", "math", "os", "pathlib", "sqlite3", "statistics", "sys", "threading",
             "typing", "zlib"}


def test_only_public_part1_names_and_allowed_modules() -> None:
    public = set(accel.scheduler.__all__)
    for path in ROOT.glob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.level == 1 and (node.module or "").startswith("_"), (path.name, node.module)
                    continue
                mod = node.module or ""
                if mod == "accel.scheduler":
                    bad = {a.name for a in node.names} - public
                    assert not bad, (path.name, bad)
                    continue
                assert mod in ("accel.model", "accel.errors") or mod.split(".")[0] in STDLIB_OK | {"numpy"}, (
                    path.name, mod)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    assert a.name.split(".")[0] in STDLIB_OK | {"numpy"}, (path.name, a.name)


def test_import_is_quiet_and_light() -> None:
    code = ("import sys, json; import accel.scheduler.queueing; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'tqdm', 'hypothesis', 'pynvml', 'stevedore') or m.startswith('accel.plugins'))))")
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == [] and proc.stderr == ""


def test_public_api_is_curated() -> None:
    assert all(not n.startswith("_") for n in q.__all__)
    for name in q.__all__:
        assert getattr(q, name) is not None
    assert {"QueueingScheduler", "Policy", "JobSpec", "Journal", "Tenant", "Quota", "PriceTable",
            "Simulator"} <= set(q.__all__)
