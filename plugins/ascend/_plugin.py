"""The light ``ascend`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

from ._parse import SEARCH_PATH, TOOL

__all__ = ["AscendPlugin"]


class AscendPlugin(LazyCliPlugin):
    """Huawei Ascend NPUs (910A/910B/910C, 310/310P) through ``npu-smi``."""

    info = cli_plugin_info(
        "ascend",
        vendor="huawei",
        api=TOOL,
        description="Huawei Ascend NPUs (910A/910B/910C, 310/310P) through npu-smi",
        capabilities=(
            Capability.TOPOLOGY,
            Capability.LINKS,
            Capability.DOMAINS,
            Capability.POWER,
            Capability.PROCESSES,
            Capability.EVENTS,
            # vNPUs (npu-smi create-vnpu / destroy-vnpu): chips without them refuse each
            # profile with a typed error; the inventory lists them with option vnpu=true.
            Capability.PARTITIONS,
            Capability.PARTITION_ACTUATION,
        ),
    )
    probe_spec = CliProbeSpec(
        vendor="Huawei Ascend",
        pci_vendor_ids=("19e5",),
        pci_class_prefixes=("12",),
        device_globs=("davinci[0-9]*",),
        tool=TOOL,
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.ascend"
    # board=1: npu-smi info -t board per chip; read=native|cli|auto: DCMI or npu-smi;
    # vnpu=1: vNPU templates and live vNPUs in every inventory (two views per chip).
    known_options = LazyCliPlugin.known_options | {"board", "read", "vnpu"}

    backend = "accel.plugins.ascend._backend:AscendBackend"
