"""Shared helpers for the queueing tests: small uniform clusters and job shortcuts."""

from __future__ import annotations

from accel.scheduler import ClusterState, DeviceSpec, HostSpec
from accel.scheduler.queueing import JobSpec

GIB = 1024**3


def cluster(hosts: int = 2, per_host: int = 8, model: str = "A100", *, pools: dict[str, int] | None = None,
            memory_bytes: int = 80 * GIB) -> ClusterState:
    """``hosts`` identical hosts of ``model``, or ``pools={model: hosts}`` for several pools."""
    layout = pools or {model: hosts}
    specs = []
    for m, n in layout.items():
        for h in range(n):
            name = f"{m.lower()}-{h}"
            devs = tuple(DeviceSpec(id=f"{name}/gpu{d}", vendor="nvidia", model=m, memory_bytes=memory_bytes,
                                    link_domain="nvl") for d in range(per_host))
            specs.append(HostSpec(name=name, cpu_milli=128_000, memory_bytes=1024 * GIB, devices=devs))
    return ClusterState.from_specs(specs)


def job(jid: str, devices: int = 1, est: float = 3600.0, **kw: object) -> JobSpec:
    return JobSpec(id=jid, devices=devices, estimate_s=est, **kw)  # type: ignore[arg-type]
