"""Fixtures: a clean plugin registry; helpers to scrape a collector."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from accel.plugin import registered, unregister


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    before = set(registered())
    yield
    for name in set(registered()) - before:
        unregister(name)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: lets hung fake calls return so their threads end."""
    event = threading.Event()
    yield event
    event.set()
