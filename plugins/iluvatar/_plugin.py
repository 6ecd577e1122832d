"""The light ``iluvatar`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

from ._parse import SEARCH_PATH, TOOL

__all__ = ["IluvatarPlugin"]


class IluvatarPlugin(LazyCliPlugin):
    """Iluvatar CoreX GPUs (MR-V50/V100, BI-V100, BI-V150) through ``ixsmi``."""

    info = cli_plugin_info(
        "iluvatar",
        api=TOOL,
        description="Iluvatar CoreX GPUs via ixsmi (table, -L, topo -m); BI-V150 boards as die pairs.",
        capabilities=(Capability.UUID, Capability.POWER, Capability.CLOCKS, Capability.TOPOLOGY, Capability.PROCESSES),
    )
    probe_spec = CliProbeSpec(
        vendor="Iluvatar CoreX",
        pci_vendor_ids=("1e3e",),
        device_globs=("iluvatar[0-9]*",),
        tool=TOOL,
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.iluvatar"

    known_options = LazyCliPlugin.known_options | {"read"}  # read=native|cli|auto: IXML or ixsmi
    backend = "accel.plugins.iluvatar._backend:IluvatarBackend"
