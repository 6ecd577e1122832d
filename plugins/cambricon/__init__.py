"""Cambricon MLUs through ``cnmon`` (backend ``cambricon``).

Light entry-point module: importing it loads no vendor library and runs nothing.  The probe
looks for PCI vendor id ``cabc`` in sysfs, then ``/dev/cambricon_dev*``, then ``cnmon`` in
``/usr/bin``, ``/usr/local/neuware/bin`` or ``PATH``.

Devices are chips (``MLU_VISIBLE_DEVICES``, torch ``mlu``, collectives ``cncl``); memory is
MiB as printed; the ``Ecc-Error`` column becomes a ``cambricon.mlu:ecc-error`` condition.

Test facility: ``options["scenario"]`` (``accel ls --backend cambricon --option
scenario=mlu370-x8``) replays a shipped scenario instead of running ``cnmon``.
"""

from __future__ import annotations

from accel.plugin import PLUGIN_API, Backend, BackendConfig, Capability, PluginInfo
from accel.tools import Runner

from .._cli import CliBackendPlugin, CliProbeSpec, scenario_names

__all__ = ["PLUGIN", "PROBE", "SCENARIOS", "CambriconPlugin"]

PROBE = CliProbeSpec(
    vendor="Cambricon",
    pci_vendor_ids=("cabc",),
    device_globs=("cambricon_dev[0-9]*",),
    tool="cnmon",
    tool_paths=("/usr/bin", "/usr/local/neuware/bin"),
)

#: Shipped replay scenarios (a test facility), by name.
SCENARIOS: tuple[str, ...] = scenario_names(__name__)


class CambriconPlugin(CliBackendPlugin):
    """Entry-point object of the ``cambricon`` backend."""

    info = PluginInfo(
        name="cambricon",
        vendor="cambricon",
        version="0.1.0",
        api_versions=frozenset({PLUGIN_API}),
        capabilities=frozenset(
            {
                Capability.INVENTORY,
                Capability.MEMORY,
                Capability.MEMORY_USED,
                Capability.PCI,
                Capability.HEALTH,
                Capability.ECC,
                Capability.TELEMETRY,
                Capability.POWER,
                Capability.TEMPERATURE,
                Capability.UTILIZATION,
                Capability.PROCESSES,
                Capability.VERSIONS,
            }
        ),
        description="Cambricon MLUs (MLU370/590) through cnmon",
        api="cnmon",
    )

    probe_spec = PROBE
    package = __name__

    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        from ._backend import CambriconBackend  # deferred: keeps the entry point light

        return CambriconBackend(config, runner)


PLUGIN = CambriconPlugin()
