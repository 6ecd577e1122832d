"""accel backend ``example``: the conformance kit's own out-of-tree test plugin (``example-smi``).

This module is what the ``accel.backends`` entry point names.  It stays light: accel imports it
on every discovery, on hosts without the hardware.  The plugin shape is the toolkit's
(:mod:`accel.toolkit`): a :class:`~accel.toolkit.LazyCliPlugin` that names its backend class,
imported on open only, and probes sysfs, device nodes and the tool through a
:class:`~accel.toolkit.CliProbeSpec`.  Replay scenarios live in ``scenarios/<name>/``
(``--option scenario=<name>``).
"""

from __future__ import annotations

from accel.plugin import Capability
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info

__all__ = ["PLUGIN", "TOOL", "ExamplePlugin"]

__version__ = "0.1.0"

#: The vendor CLI this backend reads (through accel.tools, never subprocess).
TOOL = "example-smi"


class ExamplePlugin(LazyCliPlugin):
    """Example X1 boards through ``example-smi --query --format=json``."""

    # Declare exactly what the backend reports (BASE_CAPABILITIES plus these); every other
    # row of the kit is N/A.
    info = cli_plugin_info(
        "example",
        api=TOOL,
        version=__version__,
        description="Template backend replaying recorded example-smi output",
        capabilities=(Capability.UUID, Capability.POWER),
    )
    probe_spec = CliProbeSpec(vendor="Example", pci_vendor_ids=("1e99",), tool=TOOL)
    package = __name__
    backend = "accel_backend_example._backend:ExampleBackend"


PLUGIN = ExamplePlugin()
