"""accel backend ``ppu``: T-Head PPUs through HGML (``libhgml.so``), on the public :mod:`accel.toolkit`
only.  The ``accel.backends`` entry point names this module: it stays light (no library loads)."""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

__all__ = ["PLUGIN", "PpuPlugin"]

__version__ = "0.1.0"


class PpuPlugin(LazyCliPlugin):
    info = cli_plugin_info(
        "ppu",
        vendor="t-head",
        api="libhgml",
        version=__version__,
        description="T-Head PPU via HGML (libhgml.so): memory, utilization, power, temperature, ECC counters",
        capabilities=(Capability.UUID, Capability.POWER),
    )
    # T-Head's PCI vendor id (gpustack-runtime's thead.py scans 0x1ded); ppu-smi ships with the driver.
    probe_spec = CliProbeSpec(vendor="T-Head PPU", pci_vendor_ids=("1ded",), tool="ppu-smi")
    package = __name__
    known_options = frozenset({"scenario", "read"})
    backend = "accel_ppu._backend:PpuBackend"


PLUGIN = PpuPlugin()
