"""The MetaX backend: MXSML (``libmxsml.so``) or ``mx-smi``, ``mx-smi -L`` (UUIDs) and
``mx-smi topo -m`` (MetaXLink); ``-o read=native|cli|auto`` picks the path
(:class:`~accel.toolkit.DualPathBackend`).  Both paths build units the same way: same ids,
binding, model names, MetaXLink domains and earned-health rule.

Model names are normalised across tool versions (2.1.6 prints ``MXC550``, 2.2.x ``MetaX
C550``; the raw name stays in ``metax-tech.com/rawName``).  MetaXLink islands of the topology
matrix become ``metaxlink_group`` domains; ``SYS`` cells become explicit system links.
"""

from __future__ import annotations

import re
from typing import Any

from accel.model import Capabilities, DeviceKind, Domain, DomainKind, Link, LinkType, PartitionScheme, SharingMode
from accel.toolkit import (
    PCIE_CODES,
    Collection,
    DualPathBackend,
    NativeLibrary,
    ProcessesSurface,
    Snapshot,
    UnitReading,
    matrix_links,
    processes_of,
    topo_links,
)
from accel.tools import Runner

from . import _native
from ._parse import SEARCH_PATH, TOOL, parse_mx_smi, sgpu_enabled

__all__ = ["MetaxBackend", "normalise_model"]

_SHORT_NAME = re.compile(r"^MX(?P<model>[CN][0-9]{3}\S*)$")


def normalise_model(name: str | None) -> str | None:
    """``MXC550`` (mx-smi 2.1.x) and ``MetaX C550`` (2.2.x) name the same product."""
    if name is None:
        return None
    m = _SHORT_NAME.match(name)
    return f"MetaX {m.group('model')}" if m else name


#: Device fields MXSML can answer NOT_SUPPORTED for; the others it leaves empty are telemetry.
_DEVICE_FIELDS = frozenset({"pci.bus_id", "memory", "power.enforced_watts"})
_TELEMETRY_FIELDS = frozenset({"utilization_ratio", "temperature_celsius", "power_watts", "ecc_uncorrected_total"})


class MetaxBackend(ProcessesSurface, DualPathBackend):
    """Backend ``metax``: MXSML or ``mx-smi`` over a runner (see :mod:`accel.tools`)."""

    backend_name = "metax"
    tool = TOOL
    search_path = SEARCH_PATH
    kind = DeviceKind.GPU
    visible_env = "CUDA_VISIBLE_DEVICES"
    torch_device_type = "cuda"
    #: Ray's MetaxGPUAcceleratorManager and vLLM-metax both schedule MetaX GPUs as ``GPU``.
    ray_resource = "GPU"
    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def load_native(self) -> object:
        return _native.load_mxsml()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The MXSML read: the same units, ids, names and MetaXLink domains as ``mx-smi``."""
        read = _native.read_mxsml(lib)
        col.api_version = read.driver_version
        col.problems.extend(read.problems)
        _normalise(read.readings)
        versions = {
            "driver": read.driver_version,
            "runtime_name": "maca",
            "runtime": read.maca_version,
            "firmware": {"bios": read.bios_version} if read.bios_version else {},
        }
        devices, samples = self.build(
            col,
            read.readings,
            versions=versions,
            per_unit=lambda r: {"unsupported": read.never.get(r.index or 0, set()) & _DEVICE_FIELDS},
            telemetry_unsupported=frozenset().union(*read.never.values()) & _TELEMETRY_FIELDS
            if read.never
            else frozenset(),
        )
        links: list[Link] = []
        domains: list[Domain] = []
        if read.topology is not None:
            ids = {f"GPU{d.index}": d.id for d in devices if d.index is not None}
            links, domains = matrix_links(
                read.topology,
                ids,
                {**PCIE_CODES, "MX": LinkType.METAXLINK},
                domain_kind=DomainKind.METAXLINK_GROUP,
                domain_prefix="metaxlink",
            )
        return col.snapshot(devices, samples, links=links, domains=domains)

    def collect_cli(self, col: Collection) -> Snapshot:
        smi = col.required(lambda text, cmd: parse_mx_smi(text, command=cmd))
        readings, _listed = col.uuids(smi.readings, ("GPU",))
        _normalise(readings)
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


def _normalise(readings: list[UnitReading]) -> None:
    for r in readings:
        if r.model is not None and normalise_model(r.model) != r.model:
            r.extras["metax-tech.com/rawName"] = r.model
            r.model = normalise_model(r.model)


def _sharing(reading: UnitReading) -> dict[str, Any]:
    """sGPU (``sGPU-M`` on) makes memory and compute divisible software shares."""
    if not sgpu_enabled(reading):
        return {}
    return {
        "capabilities": Capabilities(partitioning=(PartitionScheme.SHARED,)),
        "sharing": {"mode": SharingMode.VENDOR_SHARE, "divisible_memory": True, "divisible_compute": True},
    }
