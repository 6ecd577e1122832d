"""accel backend ``example``: the template an out-of-tree vendor plugin starts from.

This module is what the ``accel.backends`` entry point names.  It imports only ``accel.plugin``
and the standard library: accel imports it on every discovery, on hosts without the hardware.
The backend (and, in a real plugin, the vendor library) loads in :meth:`ExamplePlugin.open`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from accel.plugin import (
    PLUGIN_API,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    PluginInfo,
    ProbeResult,
)

__all__ = ["PLUGIN", "TOOL", "ExamplePlugin", "recordings"]

__version__ = "0.1.0"

#: The vendor CLI this backend reads (through accel.tools, never subprocess).
TOOL = "example-smi"
_PCI_VENDOR = "1e99"  # the PCI vendor id probe() looks for in sysfs


def recordings(scenario: str) -> Path:
    """The directory of recorded ``example-smi`` runs of one scenario shipped with the plugin."""
    return Path(str(resources.files(__name__).joinpath("recordings", scenario)))


class ExamplePlugin(BackendPlugin):
    info = PluginInfo(
        name="example",
        vendor="example",
        version=__version__,
        api_versions=frozenset({PLUGIN_API}),
        # Declare exactly what the backend reports; every other row of the kit is N/A.
        capabilities=frozenset({
            Capability.INVENTORY, Capability.MEMORY, Capability.MEMORY_USED, Capability.UUID, Capability.PCI,
            Capability.HEALTH, Capability.TELEMETRY, Capability.POWER, Capability.TEMPERATURE,
            Capability.UTILIZATION, Capability.VERSIONS,
        }),
        description="Template backend replaying recorded example-smi output",
        api=TOOL,
    )

    def probe(self, config: BackendConfig) -> ProbeResult:
        """Cheap and never raises: a recorded scenario, the PCI vendor id in sysfs, or the tool on PATH."""
        try:
            scenario = config.option("scenario")
            if scenario:
                found = recordings(str(scenario)).is_dir()
                return (ProbeResult.present(f"recorded scenario {scenario}") if found
                        else ProbeResult.absent(f"no recorded scenario {scenario!r}"))
            base = config.sysfs_root / "bus" / "pci" / "devices"
            ours = [d for d in base.iterdir() if (d / "vendor").read_text().strip() == f"0x{_PCI_VENDOR}"] \
                if base.is_dir() else []
            if ours:
                return ProbeResult.present(f"{len(ours)} PCI functions of vendor {_PCI_VENDOR}", device_count=len(ours))
            return ProbeResult.absent(f"no PCI device of vendor {_PCI_VENDOR} under {base}")
        except Exception as exc:  # noqa: BLE001 - probe() reports, never raises
            return ProbeResult.error(f"probe failed: {exc}")

    def open(self, config: BackendConfig) -> Backend:
        from ._backend import ExampleBackend  # the heavy part loads only here

        return ExampleBackend(config)


PLUGIN = ExamplePlugin()
