from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.plugin import registered, unregister


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Registrations made by a test are removed afterwards."""
    before = set(registered())
    yield
    for name in set(registered()) - before:
        unregister(name)


@pytest.fixture
def fake_entry_points(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path holding a fake distribution with entry points (zarr pattern)."""
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("accel_fake")]:
            del sys.modules[name]
