"""The MetaX backend: ``mx-smi``, ``mx-smi -L`` (UUIDs) and ``mx-smi topo -m`` (MetaXLink).

Model names are normalised across tool versions (2.1.6 prints ``MXC550``, 2.2.x ``MetaX
C550``; the raw name stays in ``metax-tech.com/rawName``).  MetaXLink islands of the topology
matrix become ``metaxlink_group`` domains; ``SYS`` cells become explicit system links.
"""

from __future__ import annotations

import re
from typing import Any

from accel.errors import ParseError
from accel.model import Capabilities, DeviceKind, DomainKind, LinkType, PartitionScheme, SharingMode
from accel.plugin import BackendConfig
from accel.tools import Runner

from .._cli import ParseContext, ToolSession
from .._cli.extra import (
    CliBackend,
    Collection,
    Snapshot,
    UnitReading,
    build_units,
    merge_readings,
    parse_listing,
    processes_of,
    topo_links,
    visible_binding,
)
from ._parse import SEARCH_PATH, TOOL, parse_mx_smi, sgpu_enabled

__all__ = ["MetaxBackend", "normalise_model"]

VERSION = "0.1.0"
_BIND = visible_binding("CUDA_VISIBLE_DEVICES", torch="cuda")
_SHORT_NAME = re.compile(r"^MX(?P<model>[CN][0-9]{3}\S*)$")


def normalise_model(name: str | None) -> str | None:
    """``MXC550`` (mx-smi 2.1.x) and ``MetaX C550`` (2.2.x) name the same product."""
    if name is None:
        return None
    m = _SHORT_NAME.match(name)
    return f"MetaX {m.group('model')}" if m else name


class MetaxBackend(CliBackend):
    """Backend ``metax`` over a runner (see :mod:`accel.tools`)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self._config = config
        self._runner = runner
        super().__init__("metax", self._snapshot)

    def _snapshot(self) -> Snapshot:
        col = Collection(
            "metax",
            VERSION,
            ToolSession(self._runner, TOOL, search_path=SEARCH_PATH, timeout_s=self._config.tool_timeout_s),
        )
        smi = col.main(lambda text, cmd: parse_mx_smi(text, command=cmd))
        col.require(smi.readings if smi is not None else [])
        if smi is None:  # require() raised the tool's error; this keeps the types honest
            raise ParseError("mx-smi printed no device table", tool=TOOL, command=TOOL)
        col.problems.extend(smi.problems)
        listed = col.extra(lambda text, cmd: parse_listing(text, words=("GPU",), ctx=ParseContext(TOOL, cmd)), "-L")
        readings = merge_readings(
            smi.readings,
            [UnitReading(index=x.index, uuid=x.uuid, bus_id=x.bus_id) for x in listed or []],
        )
        versions = {
            "driver": smi.kmd_version,
            "runtime_name": "maca",
            "runtime": smi.maca_version,
            "firmware": {"bios": smi.bios_version} if smi.bios_version else {},
        }
        for r in readings:
            if r.model is not None and normalise_model(r.model) != r.model:
                r.extras["metax-tech.com/rawName"] = r.model
                r.model = normalise_model(r.model)
        devices, samples = build_units(
            readings,
            vendor="metax",
            problems=col.problems,
            per_unit=_sharing,
            kind=DeviceKind.GPU,
            tool=TOOL,
            binding=_BIND,
            versions=versions,
            timestamp=col.now,
        )
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
