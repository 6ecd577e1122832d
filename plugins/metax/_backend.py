"""The MetaX backend: ``mx-smi``, ``mx-smi -L`` (UUIDs) and ``mx-smi topo -m`` (MetaXLink).

Model names are normalised across tool versions (2.1.6 prints ``MXC550``, 2.2.x ``MetaX
C550``; the raw name stays in ``metax-tech.com/rawName``).  MetaXLink islands of the topology
matrix become ``metaxlink_group`` domains; ``SYS`` cells become explicit system links.
"""

from __future__ import annotations

import re
from typing import Any

from accel.model import Capabilities, DeviceKind, DomainKind, LinkType, PartitionScheme, SharingMode
from accel.toolkit import (
    Collection,
    ProcessesSurface,
    Snapshot,
    ToolBackend,
    UnitReading,
    processes_of,
    topo_links,
)

from ._parse import SEARCH_PATH, TOOL, parse_mx_smi, sgpu_enabled

__all__ = ["MetaxBackend", "normalise_model"]

_SHORT_NAME = re.compile(r"^MX(?P<model>[CN][0-9]{3}\S*)$")


def normalise_model(name: str | None) -> str | None:
    """``MXC550`` (mx-smi 2.1.x) and ``MetaX C550`` (2.2.x) name the same product."""
    if name is None:
        return None
    m = _SHORT_NAME.match(name)
    return f"MetaX {m.group('model')}" if m else name


class MetaxBackend(ProcessesSurface, ToolBackend):
    """Backend ``metax`` over a runner (see :mod:`accel.tools`)."""

    backend_name = "metax"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.GPU
    visible_env = "CUDA_VISIBLE_DEVICES"
    torch_device_type = "cuda"
    #: Ray's MetaxGPUAcceleratorManager and vLLM-metax both schedule MetaX GPUs as ``GPU``.
    ray_resource = "GPU"

    def collect(self, col: Collection) -> Snapshot:
        smi = col.required(lambda text, cmd: parse_mx_smi(text, command=cmd))
        readings, _listed = col.uuids(smi.readings, ("GPU",))
        for r in readings:
            if r.model is not None and normalise_model(r.model) != r.model:
                r.extras["metax-tech.com/rawName"] = r.model
                r.model = normalise_model(r.model)
        versions = {
            "driver": smi.driver_version,
            "runtime_name": "maca",
            "runtime": smi.maca_version,
            "firmware": {"bios": smi.bios_version} if smi.bios_version else {},
        }
        devices, samples = self.build(col, readings, versions=versions, per_unit=_sharing)
        links, domains = topo_links(
            col,
            devices,
            label="GPU",
            fast={"MX": LinkType.METAXLINK},
            domain_kind=DomainKind.METAXLINK_GROUP,
            prefix="metaxlink",
        )
        return col.snapshot(
            devices, samples, links=links, domains=domains, processes=processes_of(smi.processes, devices)
        )


def _sharing(reading: UnitReading) -> dict[str, Any]:
    """sGPU (``sGPU-M`` on) makes memory and compute divisible software shares."""
    if not sgpu_enabled(reading):
        return {}
    return {
        "capabilities": Capabilities(partitioning=(PartitionScheme.SHARED,)),
        "sharing": {"mode": SharingMode.VENDOR_SHARE, "divisible_memory": True, "divisible_compute": True},
    }
