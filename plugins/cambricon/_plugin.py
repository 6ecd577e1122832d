"""The light ``cambricon`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

from ._parse import SEARCH_PATH, TOOL

__all__ = ["CambriconPlugin"]


class CambriconPlugin(LazyCliPlugin):
    """Cambricon MLUs (MLU370/590) through ``cnmon``."""

    info = cli_plugin_info(
        "cambricon",
        api=TOOL,
        description="Cambricon MLUs (MLU370/590) through cnmon",
        capabilities=(Capability.ECC, Capability.POWER, Capability.PROCESSES, Capability.EVENTS),
    )
    probe_spec = CliProbeSpec(
        vendor="Cambricon",
        pci_vendor_ids=("cabc",),
        device_globs=("cambricon_dev[0-9]*",),
        tool=TOOL,
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.cambricon"

    known_options = frozenset({"scenario", "read"})
    backend = "accel.plugins.cambricon._backend:CambriconBackend"
