"""The Kunlunxin backend: ``xpu_smi`` (4.x R300 or 5.x P800 layout), ``-L`` and ``topo -m``.

The binary is ``xpu_smi`` when present, else ``xpu-smi``; output without Kunlunxin
landmarks (Intel's tool of the same name) is refused.  ``topo -m`` XL groups become
``xpulink_group`` domains; the SR-IOV column sets the partition mode.

Or XPUML (``libxpuml.so``): ``-o read=native|cli|auto`` picks the path
(:class:`~accel.toolkit.DualPathBackend`); both build units the same way (ids, binding, the
earned-health rule).  XPUML's health reading is the device state (it has no event
subscription: no ``poll_events``).
"""

from __future__ import annotations

from typing import Any

from accel.model import Capabilities, DeviceKind, DomainKind, LinkType, PartitionScheme
from accel.toolkit import (
    Collection,
    DualPathBackend,
    NativeLibrary,
    ProcessesSurface,
    Snapshot,
    UnitReading,
    processes_of,
    topo_links,
)
from accel.tools import Runner

from . import _native
from ._parse import SEARCH_PATH, TOOLS, parse_xpu_smi, sriov_enabled

__all__ = ["KunlunxinBackend"]


#: Fields XPUML can answer NOT_SUPPORTED for: on the device, and in the telemetry sample.
_DEVICE_FIELDS = frozenset({"pci.bus_id", "memory", "power.enforced_watts"})
_TELEMETRY_FIELDS = frozenset({"utilization_ratio", "temperature_celsius", "power_watts"})


class KunlunxinBackend(ProcessesSurface, DualPathBackend):
    """Backend ``kunlunxin``: XPUML or ``xpu_smi`` over a runner (see :mod:`accel.tools`)."""

    backend_name = "kunlunxin"
    tool = TOOLS[0]
    search_path = SEARCH_PATH
    kind = DeviceKind.XPU
    visible_env = "XPU_VISIBLE_DEVICES"
    collective_backend = "bkcl"
    #: vLLM-Kunlun's platform: ``ray_device_key = "GPU"`` (Ray has no Kunlunxin manager).
    ray_resource = "GPU"

    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def tool_name(self) -> str:
        if self.native is not None:
            return self.library
        for name in TOOLS:
            if self.runner.which(name, SEARCH_PATH) is not None:
                return name
        return TOOLS[0]  # not found: running it gives the clear ToolNotFoundError

    def load_native(self) -> object:
        return _native.load_xpuml()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The XPUML read: the same units and ids as ``xpu_smi`` (no topology call in XPUML)."""
        read = _native.read_xpuml(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        never = frozenset().union(*read.never.values()) if read.never else frozenset()
        devices, samples = self.build(
            col,
            read.readings,
            versions={"driver": read.driver_version},
            per_unit=lambda r: {"unsupported": read.never.get(r.index or 0, set()) & _DEVICE_FIELDS},
            # XPUML declares no ECC call: the counter is never read on this path.
            telemetry_unsupported=(never & _TELEMETRY_FIELDS) | {"ecc_uncorrected_total"},
        )
        return col.snapshot(devices, samples)

    def collect_cli(self, col: Collection) -> Snapshot:
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
