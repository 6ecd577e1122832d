"""Fixtures: a clean registry, a fake site directory on ``sys.path``, and the gate hung plugins wait on."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accel.plugin import registered, unregister
from tests.discovery_isolation._plugins import GATE

#: Writes one fake distribution: (dist name, version, {entry name: value}, {module: source}).
WriteDist = Callable[[str, str, dict[str, str], dict[str, str]], Path]


@pytest.fixture(autouse=True)
def _isolated() -> Iterator[None]:
    """Registrations are removed and hung plugin threads released after each test."""
    before = set(registered())
    GATE.clear()
    yield
    GATE.set()
    for name in set(registered()) - before:
        unregister(name)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    """A directory on ``sys.path`` for fake distributions (``*.dist-info``) and their modules."""
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield tmp_path
    finally:
        GATE.set()
        sys.path.remove(str(tmp_path))
        importlib.invalidate_caches()
        for name in [m for m in sys.modules if m.startswith("accel_fake")]:
            del sys.modules[name]


@pytest.fixture
def write_dist(site: Path) -> WriteDist:
    def write(dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[accel.backends]\n{lines}")
        for module, source in modules.items():
            (site / f"{module}.py").write_text(source)
        importlib.invalidate_caches()
        return info

    return write
