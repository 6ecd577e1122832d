"""The rules and a real exposition checked by promtool (Debian's prometheus package; CI installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from accel.exporter import rules_yaml
from tests.exporter._procs import exporter, free_port, get

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus; .ci/run installs it)"
)
DATA = Path(__file__).parent / "data"


def _promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_check_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml())
    out = _promtool("check", "rules", str(rules))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 15 rules found" in out.stdout


def test_rule_unit_tests(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(rules_yaml())
    shutil.copy(DATA / "rules_test.yml", tmp_path / "rules_test.yml")
    out = _promtool("test", "rules", str(tmp_path / "rules_test.yml"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_check_metrics_on_a_real_exposition() -> None:
    port = free_port()
    with exporter(["--sim", "dgx-h100", "-o", "faults=ecc_uncorrectable:1,thermal_throttle:2", "--processes"], port):
        text = get(f"http://127.0.0.1:{port}/metrics")
    assert "accel_device_info{" in text and "accel_process_memory_bytes{" in text
    out = _promtool("check", "metrics", stdin=text)
    assert out.returncode == 0, out.stdout + out.stderr
