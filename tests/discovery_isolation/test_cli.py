"""End to end: ``python -m accel ls`` with a broken plugin installed still lists sim, in time, with exit 5.

The broken backend is a fake distribution on ``PYTHONPATH``.  ``--timeout 0.5`` gives every
backend a call deadline of ``2 * 0.5 + 1 = 2`` s (:func:`accel.discovery.call_deadline`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accel.cli import EXIT_PARTIAL

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 2.0
SLACK = 15.0  # interpreter start and imports in a subprocess, on a loaded machine


def _fake_dist(site: Path, name: str, module_source: str) -> None:
    info = site / f"accel_fake_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: accel-fake-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[accel.backends]\n{name} = accel_fake_{name}:PLUGIN\n")
    (site / f"accel_fake_{name}.py").write_text(module_source)


def _accel(site: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    env.pop("ACCEL_BACKENDS", None)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "accel", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=DEADLINE + SLACK + 30,
    )
    return proc, time.monotonic() - start


@pytest.mark.parametrize("broken", ["inventory", "open"])
def test_ls_with_a_hanging_plugin_lists_sim_and_exits_partial(tmp_path: Path, broken: str) -> None:
    source = f"from tests.discovery_isolation._plugins import TinyPlugin\nPLUGIN = TinyPlugin('hangs', {broken!r})\n"
    _fake_dist(tmp_path, "hangs", source)
    proc, elapsed = _accel(tmp_path, "ls", "--sim", "dgx-h100", "--backend", "hangs", "--timeout", "0.5")
    assert proc.returncode == EXIT_PARTIAL, proc.stderr
    assert elapsed < DEADLINE + SLACK
    rows = [line for line in proc.stdout.splitlines() if "nvidia" in line]
    assert len(rows) == 8, proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "hangs" in line]
    assert warnings == [
        f"accel: warning: hangs: backend: backend 'hangs': {broken}() did not return within 2 s; "
        "accel no longer calls it [plugin.timeout]"
    ], proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_ls_with_a_plugin_raising_systemexit_on_import(tmp_path: Path) -> None:
    _fake_dist(tmp_path, "exits", "raise SystemExit(7)\n")
    proc, _ = _accel(tmp_path, "ls", "--sim", "dgx-h100", "--backend", "exits")
    assert proc.returncode == EXIT_PARTIAL, proc.stderr
    assert len([line for line in proc.stdout.splitlines() if "nvidia" in line]) == 8
    assert "accel: warning: exits: backend: importing backend 'exits' failed: SystemExit: 7 [plugin.load-failed]" in (
        proc.stderr.splitlines()
    ), proc.stderr
