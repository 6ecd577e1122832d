"""The wheel carries every module, and each imports from the installed wheel alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tracked_data_files() -> list[str]:
    """The non-Python files git tracks in the package folders, as their paths in the wheel."""
    import tomllib

    folders = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    out = []
    for path in tracked:
        for name, folder in sorted(folders.items(), key=lambda kv: -len(kv[1])):
            if path.startswith(folder + "/"):
                rel = path[len(folder) + 1:]
                skip = rel.endswith(".py") or any(p in ("_template", "tests", "__pycache__") for p in rel.split("/"))
                if not skip:
                    out.append(f"{name.replace('.', '/')}/{rel}")
                break
    return out


def test_wheel_contains_and_imports_every_module(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    # built from a copy of the tracked files: setuptools would also ship whatever a stale build/lib holds
    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in tracked:
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("accel_sdk-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(
        n[:-3].replace("/", ".").removesuffix(".__init__")
        for n in names
        if n.endswith(".py") and n.startswith("accel/") and "/testing/" not in n and not n.endswith("__main__.py")
    )
    for required in ("accel.model", "accel.plugin", "accel.sim", "accel.cli", "accel.plugins", "accel.scheduler"):
        assert required in modules, required
    for data in ("accel/py.typed", "accel/sim/profiles/dgx-h100.json"):
        assert data in names, data
    # every data file git tracks in a package folder ships: a file pattern that misses a folder
    # (accel serve's templates/ and static/ did) breaks an installed service, not an editable one
    assert not [f for f in _tracked_data_files() if f not in names]
    assert not [n for n in names if n.startswith(("tests/", "plugins/", "scheduler/", "conformance/"))]
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import importlib, json, sys\n"
        f"mods = {modules!r}\n"
        "bad = {}\n"
        "for m in mods:\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except Exception as e:\n"
        "        bad[m] = repr(e)\n"
        "import accel\n"
        "print(json.dumps({'bad': bad, 'file': accel.__file__}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["file"].startswith(str(target)), result["file"]
    assert result["bad"] == {}
    entry_points = [n for n in names if n.endswith("entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points[0]).decode()
    assert "sim = accel.sim:PLUGIN" in text and "accel = accel.cli:main" in text
    assert "[accel.commands]" in text and "sched = accel.cli._builtin:SCHED" in text
    # PEP 639 metadata: an SPDX expression and the license text itself.
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Classifier: Typing :: Typed" in metadata
    # The commands of the group, from the wheel: every level's --help.
    for argv in (["--help"], ["sched", "--help"], ["conformance", "run", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "accel", *argv], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0 and proc.stderr == "", (argv, proc.stderr)
        assert proc.stdout.startswith(f"usage: accel {' '.join(argv[:-1])}".rstrip()), proc.stdout[:200]
