"""Shared pieces of the executor tests: a simulated host, specs, waiting for a job to end."""

from __future__ import annotations

import time
from pathlib import Path

from accel.model import HostInventory
from accel.service import Executor, Handle, LaunchSpec, RunStatus
from accel.service.executors._visibility import placed_devices
from accel.sim.cluster import generate_cluster

__all__ = ["host", "spec", "wait_end", "wait_for"]


def host(profile: str = "mixed-nvidia-ascend", name: str = "h") -> HostInventory:
    """One simulated host (a mixed NVIDIA + Ascend node unless told otherwise)."""
    return generate_cluster(1, profile, hostname_prefix=name)[0]


def spec(
    inv: HostInventory,
    log_dir: Path,
    argv: tuple[str, ...],
    *,
    job_id: str = "job-1",
    devices: int = 0,
    env: tuple[tuple[str, str], ...] = (),
) -> LaunchSpec:
    """A launch of ``argv`` on the first ``devices`` devices of ``inv``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    ids = [d.id for d in inv.devices[:devices]]
    return LaunchSpec(
        job_id=job_id,
        tenant="t1",
        argv=argv,
        devices=placed_devices(inv, ids),
        env=env,
        log_dir=log_dir,
    )


def wait_end(executor: Executor, handle: Handle, limit_s: float = 20.0, every_s: float = 0.02) -> RunStatus:
    """Poll until the job has ended; fail the test if it runs past ``limit_s``."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        status = executor.poll(handle)
        if not status.running:
            return status
        time.sleep(every_s)
    raise AssertionError(f"{handle} still running after {limit_s:g} s")


def wait_for(path: Path, limit_s: float = 20.0) -> str:
    """The content of ``path`` once it exists and is non-empty."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear within {limit_s:g} s")
