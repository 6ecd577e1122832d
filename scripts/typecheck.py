"""mypy --strict over the whole ``accel`` namespace as it is installed.

The import names map folders (``plugins/`` -> ``accel.plugins``, ``conformance/`` ->
``accel.conformance``, ``scheduler/`` -> ``accel.scheduler``; the map is pyproject.toml's
``[tool.setuptools.package-dir]``), which mypy cannot follow through
setuptools' editable-install hook.  So this lays out a tree of symbolic links shaped like the
installed package in a temporary directory and checks that, with the project's mypy settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
with open(ROOT / "pyproject.toml", "rb") as _f:
    # The folder map, written once in pyproject.toml: import name -> folder.
    _PACKAGE_DIR: dict[str, str] = tomllib.load(_f)["tool"]["setuptools"]["package-dir"]
# accel.<name> -> folder, for the packages that live outside accel/.
MAPPED = {name.removeprefix("accel."): folder for name, folder in _PACKAGE_DIR.items() if name != "accel"}
SKIP = {"__pycache__", "build"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="accel-mypy-") as tmp:
        pkg = Path(tmp) / "accel"
        pkg.mkdir()
        for entry in (ROOT / "accel").iterdir():
            if entry.name not in SKIP:
                os.symlink(entry, pkg / entry.name)
        for name, folder in MAPPED.items():
            target = pkg / name
            target.mkdir()
            for entry in (ROOT / folder).iterdir():
                if entry.name not in SKIP and not entry.name.endswith(".egg-info"):
                    os.symlink(entry, target / entry.name)
        config = str(ROOT / "pyproject.toml")
        cmd = [sys.executable, "-m", "mypy", "--config-file", config, "-p", "accel", *sys.argv[1:]]
        proc = subprocess.run(cmd, cwd=tmp, env={**os.environ, "MYPYPATH": tmp})
        return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
