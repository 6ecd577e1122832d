"""Shared fixtures for the scheduler tests (small clusters, openb paths)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accel.scheduler import DeviceSpec, HostSpec

SHARED = Path(os.environ.get("ACCEL_SHARED", Path(__file__).resolve().parents[3] / "shared"))
OPENB = SHARED / "traces" / "openb"


def gpu_host(name: str, n: int = 8, *, cpu: int = 64_000, model: str = "G2", rack: str | None = None,
             domains: bool = False, unhealthy: tuple[int, ...] = (), degraded: tuple[int, ...] = ()) -> HostSpec:
    devs = tuple(DeviceSpec(id=f"{name}/{j}", vendor="nvidia", model=model, memory_bytes=80 << 30,
                            healthy=j not in unhealthy, degraded=j in degraded,
                            link_domain="nvswitch" if domains else None, pcie_switch=f"sw{j // 2}",
                            numa=j // 4) for j in range(n))
    return HostSpec(name, cpu, 512 << 30, devs, rack=rack)


@pytest.fixture
def openb_dir() -> Path:
    if not (OPENB / "openb_node_list_gpu_node.csv").exists():
        pytest.skip("shared openb traces not available")
    return OPENB


@pytest.fixture
def make_host():  # type: ignore[no-untyped-def]
    """Factory for small GPU hosts (see :func:`gpu_host`)."""
    return gpu_host
