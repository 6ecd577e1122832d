"""The Kunlunxin backend: ``xpu_smi`` (4.x R300 or 5.x P800 layout), ``-L`` and ``topo -m``.

The binary is ``xpu_smi`` when present, else ``xpu-smi``; output without Kunlunxin
landmarks (Intel's tool of the same name) is refused.  ``topo -m`` XL groups become
``xpulink_group`` domains; the SR-IOV column sets the partition mode.
"""

from __future__ import annotations

from typing import Any

from accel.model import Capabilities, DeviceKind, DomainKind, LinkType, PartitionScheme
from accel.toolkit import (
    Collection,
    ProcessesSurface,
    Snapshot,
    ToolBackend,
    UnitReading,
    processes_of,
    topo_links,
)

from ._parse import SEARCH_PATH, TOOLS, parse_xpu_smi, sriov_enabled

__all__ = ["KunlunxinBackend"]


class KunlunxinBackend(ProcessesSurface, ToolBackend):
    """Backend ``kunlunxin`` over a runner (see :mod:`accel.tools`)."""

    backend_name = "kunlunxin"
    tool = TOOLS[0]
    search_path = SEARCH_PATH
    kind = DeviceKind.XPU
    visible_env = "XPU_VISIBLE_DEVICES"
    collective_backend = "bkcl"
    #: vLLM-Kunlun's platform: ``ray_device_key = "GPU"`` (Ray has no Kunlunxin manager).
    ray_resource = "GPU"

    def tool_name(self) -> str:
        for name in TOOLS:
            if self.runner.which(name, SEARCH_PATH) is not None:
                return name
        return TOOLS[0]  # not found: running it gives the clear ToolNotFoundError

    def collect(self, col: Collection) -> Snapshot:
        smi = col.required(lambda text, cmd: parse_xpu_smi(text, command=cmd))
        readings, _listed = col.uuids(smi.readings, ("XPU",))
        versions = {"driver": smi.driver_version, "runtime_name": "xpu-rt", "runtime": smi.runtime_version}
        devices, samples = self.build(col, readings, versions=versions, per_unit=_modes)
        links, domains = topo_links(
            col, devices, label="XPU", fast={"XL": LinkType.XPULINK}, domain_kind=DomainKind.XPULINK_GROUP, prefix="xl"
        )
        procs = processes_of(smi.processes, devices)
        return col.snapshot(devices, samples, links=links, domains=domains, processes=procs)


def _modes(reading: UnitReading) -> dict[str, Any]:
    """SR-IOV mode from the 5.x column."""
    on = sriov_enabled(reading)
    return {
        "capabilities": Capabilities(sriov=True if on else None, partitioning=(PartitionScheme.SRIOV,) if on else ()),
        "partition_mode": {"scheme": PartitionScheme.SRIOV} if on else None,
    }
