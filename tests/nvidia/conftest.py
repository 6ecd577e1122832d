from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from accel.plugin import BackendConfig
from accel.plugins.nvidia import PLUGIN
from accel.plugins.nvidia._backend import NvidiaBackend
from accel.plugins.nvidia._nvml import Nvml
from accel.plugins.nvidia.testing import FakeNVML


def open_fake(fake: FakeNVML, **options: Any) -> NvidiaBackend:
    """A backend over an existing fake (so the test can drive faults on it)."""
    nv = Nvml(fake)
    nv.init()
    config = BackendConfig(options={"scenario": fake.scenario.name, **options})
    return NvidiaBackend(config, nv, plugin_version="test", scenario=fake.scenario.name)


@pytest.fixture
def open_scenario() -> Iterator[Any]:
    opened: list[NvidiaBackend] = []

    def _open(name: str, **options: Any) -> tuple[NvidiaBackend, FakeNVML]:
        fake = FakeNVML(name)
        backend = open_fake(fake, **options)
        opened.append(backend)
        return backend, fake

    yield _open
    for b in opened:
        b.close()


__all__ = ["PLUGIN", "open_fake"]
