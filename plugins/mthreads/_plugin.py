"""The light ``mthreads`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

from ._parse import SEARCH_PATH, TOOL

__all__ = ["MthreadsPlugin"]


class MthreadsPlugin(LazyCliPlugin):
    """Moore Threads MTT GPUs through ``mthreads-gmi``."""

    info = cli_plugin_info(
        "mthreads",
        api=TOOL,
        description="Moore Threads MTT S-series GPUs via mthreads-gmi (table, -q -j, mtlink -s).",
        capabilities=(
            Capability.UUID,
            Capability.SERIAL,
            Capability.ECC,
            Capability.POWER,
            Capability.LINKS,
            Capability.DOMAINS,
            Capability.PROCESSES,
            Capability.PARTITIONS,
        ),
    )
    probe_spec = CliProbeSpec(
        vendor="Moore Threads",
        pci_vendor_ids=("1ed5",),
        # Display (03xx) only: the S80's HDMI audio function (0403) is not a GPU.
        pci_class_prefixes=("03", "12"),
        device_globs=("mtgpu.*",),
        tool=TOOL,
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.mthreads"
    known_options = LazyCliPlugin.known_options | {"read"}  # read=native|cli|auto: MTML or mthreads-gmi

    backend = "accel.plugins.mthreads._backend:MthreadsBackend"
