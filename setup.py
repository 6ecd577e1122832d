"""Package discovery for the accel layout.

The import names live under ``accel`` while the folders stay as the design gives them
(``plugins/`` -> ``accel.plugins``, ``conformance/`` -> ``accel.conformance``,
``scheduler/`` -> ``accel.scheduler``).  The map is written once, in pyproject.toml's
``[tool.setuptools.package-dir]`` (which setuptools also reads); this file, scripts/typecheck.py
and tests/core/test_architecture.py read it from there.  setuptools cannot discover mapped
sub-packages by itself, so they are listed here by walking the folders; a test builds the wheel
and imports every module from it, so a package that is missed fails CI rather than a user.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
with open(HERE / "pyproject.toml", "rb") as _f:
    ROOTS: dict[str, str] = tomllib.load(_f)["tool"]["setuptools"]["package-dir"]
SKIP = {"__pycache__", "build", "tests"}


def _packages() -> list[str]:
    found: list[str] = []
    for name, folder in ROOTS.items():
        root = Path(folder)
        for init in sorted(root.rglob("__init__.py")):
            rel = init.parent.relative_to(root)
            if any(part in SKIP or part.endswith(".egg-info") for part in rel.parts):
                continue
            found.append(".".join([name, *rel.parts]) if rel.parts else name)
    return found


setup(packages=_packages())
