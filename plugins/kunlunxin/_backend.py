"""The Kunlunxin backend: ``xpu_smi`` (4.x R300 or 5.x P800 layout), ``-L`` and ``topo -m``.

The binary is ``xpu_smi`` when present, else ``xpu-smi``; output without Kunlunxin
landmarks (Intel's tool of the same name) is refused.  ``topo -m`` XL groups become
``xpulink_group`` domains; the SR-IOV column sets the partition mode.
"""

from __future__ import annotations

from typing import Any

from accel.errors import ParseError
from accel.model import (
    Capabilities,
    DeviceKind,
    DomainKind,
    LinkType,
    PartitionScheme,
)
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
from ._parse import SEARCH_PATH, TOOLS, parse_xpu_smi, sriov_enabled

__all__ = ["KunlunxinBackend"]

VERSION = "0.1.0"
_BIND = visible_binding("XPU_VISIBLE_DEVICES", collective="bkcl")


class KunlunxinBackend(CliBackend):
    """Backend ``kunlunxin`` over a runner (see :mod:`accel.tools`)."""

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        self._config = config
        self._runner = runner
        super().__init__("kunlunxin", self._snapshot)

    def _tool(self) -> str:
        for name in TOOLS:
            if self._runner.which(name, SEARCH_PATH) is not None:
                return name
        return TOOLS[0]  # not found: running it gives the clear ToolNotFoundError

    def _snapshot(self) -> Snapshot:
        tool = self._tool()
        col = Collection(
            "kunlunxin",
            VERSION,
            ToolSession(self._runner, tool, search_path=SEARCH_PATH, timeout_s=self._config.tool_timeout_s),
        )
        smi = col.main(lambda text, cmd: parse_xpu_smi(text, command=cmd))
        col.require(smi.readings if smi is not None else [])
        if smi is None:  # require() raised the tool's error; this keeps the types honest
            raise ParseError("xpu_smi printed no device table", tool=tool, command=tool)
        col.problems.extend(smi.problems)
        listed = col.extra(lambda text, cmd: parse_listing(text, words=("XPU",), ctx=ParseContext(tool, cmd)), "-L")
        readings = merge_readings(
            smi.readings, [UnitReading(index=x.index, uuid=x.uuid, bus_id=x.bus_id) for x in listed or []]
        )
        devices, samples = build_units(
            readings,
            vendor="kunlunxin",
            problems=col.problems,
            per_unit=_modes,
            kind=DeviceKind.XPU,
            tool=tool,
            binding=_BIND,
            versions={"driver": smi.driver_version, "runtime_name": "xpu-rt", "runtime": smi.runtime_version},
            timestamp=col.now,
        )
        links, domains = topo_links(
            col, devices, label="XPU", fast={"XL": LinkType.XPULINK}, domain_kind=DomainKind.XPULINK_GROUP, prefix="xl"
        )
        return col.snapshot(
            devices, samples, links=links, domains=domains, processes=processes_of(smi.processes, devices)
        )


def _modes(reading: UnitReading) -> dict[str, Any]:
    """SR-IOV mode from the 5.x column."""
    on = sriov_enabled(reading)
    return {
        "capabilities": Capabilities(sriov=True if on else None, partitioning=(PartitionScheme.SRIOV,) if on else ()),
        "partition_mode": {"scheme": PartitionScheme.SRIOV} if on else None,
    }
