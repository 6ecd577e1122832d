"""accel backend ``gaudi``: Intel Gaudi (HL-225 Gaudi 2, HL-325L Gaudi 3) through ``hl-smi``.

An out-of-tree example built on :mod:`accel.toolkit` only.  This module is what the
``accel.backends`` entry point names: it stays light (the backend loads on open).
"""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

__all__ = ["PLUGIN", "GaudiPlugin"]

__version__ = "0.1.0"


class GaudiPlugin(LazyCliPlugin):
    """Intel Gaudi accelerators read from the ``hl-smi`` table."""

    info = cli_plugin_info(
        "gaudi",
        vendor="intel",
        api="hl-smi",
        version=__version__,
        description="Intel Gaudi (HPU) via the hl-smi table: memory, power, temperature, uncorrectable events",
        capabilities=(Capability.POWER,),
    )
    # Habana Labs' PCI vendor id; /dev/accel/accel<N> (newer drivers) or /dev/hl<N>.
    probe_spec = CliProbeSpec(
        vendor="Intel Gaudi",
        pci_vendor_ids=("1da3",),
        pci_class_prefixes=("12",),
        device_globs=("accel/accel[0-9]*", "hl[0-9]*"),
        tool="hl-smi",
        tool_paths=("/usr/bin",),
    )
    package = __name__
    backend = "accel_gaudi._backend:GaudiBackend"


PLUGIN = GaudiPlugin()
