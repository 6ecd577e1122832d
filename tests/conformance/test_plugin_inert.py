"""The pytest11 plugin in a project that does not use the kit: inert, and the kit is not loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# pytest in-process, so the modules it loaded can be listed afterwards.
_PROBE = (
    "import json, sys, pytest\n"
    "code = pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]])\n"
    "kit = sorted(m for m in sys.modules if m.startswith('accel.conformance'))\n"
    "print('RESULT', json.dumps({'code': int(code), 'kit': kit}))\n"
)


def _probe(project: Path, *args: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=project, capture_output=True, text=True,
                          timeout=120)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    return result


def _project(tmp_path: Path, test: str) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_one.py").write_text(test, encoding="utf-8")
    return tmp_path


def test_a_project_that_does_not_use_the_kit_loads_only_the_plugin_module(tmp_path: Path) -> None:
    project = _project(tmp_path, "def test_one():\n    assert 1 + 1 == 2\n")
    result = _probe(project, "test_one.py")
    assert result["code"] == 0
    assert result["kit"] == ["accel.conformance", "accel.conformance.pytest_plugin"]
    # The options are there all the same.
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=project, capture_output=True,
                               text=True, timeout=120).stdout
    assert "--accel-backend=NAME" in help_text and "--accel-certify" in help_text


def test_the_kit_loads_when_a_run_uses_it(tmp_path: Path) -> None:
    suite = "from accel.conformance import ConformanceSuite\n\nclass TestSim(ConformanceSuite):\n    backend = 'sim'\n"
    project = _project(tmp_path, suite + "    options = {'profile': 'dgx-h100'}\n")
    report = tmp_path / "out"
    result = _probe(project, "test_one.py", "--accel-report", str(report))
    assert result["code"] == 0
    kit = result["kit"]
    assert isinstance(kit, list) and "accel.conformance._plugin" in kit
    doc = json.loads((report / "matrix.json").read_text(encoding="utf-8"))
    assert doc["rows"] and (report / "junit.xml").is_file()
