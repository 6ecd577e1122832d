"""The light ``metax`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

from ._parse import SEARCH_PATH, TOOL

__all__ = ["MetaxPlugin"]


class MetaxPlugin(LazyCliPlugin):
    """MetaX GPUs (C500/C550/C600, N260) through ``mx-smi``."""

    info = cli_plugin_info(
        "metax",
        api=TOOL,
        description=(
            "MetaX GPUs via MXSML (libmxsml.so: ECC counters) or mx-smi "
            "(2.1/2.2 tables, -L, topo -m with MetaXLink groups, sGPU mode)."
        ),
        capabilities=(
            Capability.UUID,
            Capability.POWER,
            Capability.TOPOLOGY,
            Capability.LINKS,
            Capability.DOMAINS,
            Capability.PROCESSES,
            Capability.SHARING,
        ),
    )
    probe_spec = CliProbeSpec(
        vendor="MetaX",
        pci_vendor_ids=("9999",),
        device_globs=("mxcd", "mxgd", "mxnd"),
        tool=TOOL,
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.metax"
    known_options = frozenset({"scenario", "read"})

    backend = "accel.plugins.metax._backend:MetaxBackend"
