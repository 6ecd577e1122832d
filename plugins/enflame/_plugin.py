"""The light ``enflame`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

from ._parse import SEARCH_PATH, TOOL

__all__ = ["EnflamePlugin"]


class EnflamePlugin(LazyCliPlugin):
    """Enflame GCUs (T20/T21, S60/S60G, L300) through ``efsmi``."""

    info = cli_plugin_info(
        "enflame",
        api=TOOL,
        description=(
            "Enflame GCUs via EFML (libefml.so: health, ECC, events) or efsmi (table and -q); "
            "SR-IOV VFs grouped by their card's serial."
        ),
        capabilities=(
            Capability.UUID,
            Capability.SERIAL,
            Capability.POWER,
            Capability.ECC,
            Capability.PARTITIONS,
            Capability.EVENTS,
        ),
    )
    probe_spec = CliProbeSpec(
        vendor="Enflame",
        pci_vendor_ids=("1e36",),
        tool=TOOL,
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.enflame"
    #: sriov=card|vf: which is the device; read=native|cli|auto: which path reads it.
    known_options = LazyCliPlugin.known_options | {"sriov", "read"}

    backend = "accel.plugins.enflame._backend:EnflameBackend"
