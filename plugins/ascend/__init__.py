"""Huawei Ascend NPUs through ``npu-smi`` (backend ``ascend``).

Light entry-point module: importing it loads no vendor library and runs nothing.  The probe
looks, in order, for PCI functions with vendor id ``19e5`` and the processing-accelerator
class ``12xxxx`` (a Huawei iBMC VGA function, class ``0300``, shares the vendor id and is
ignored), then ``/dev/davinci*`` nodes, then ``npu-smi`` in ``/usr/local/bin``,
``/usr/local/sbin``, ``/usr/sbin`` or ``PATH``.

Devices are chips as the runtime schedules them (chip logic id, the number
``ASCEND_RT_VISIBLE_DEVICES`` takes; torch device type ``npu``; collectives ``hccl``), with
the NPU id kept in ``board_id``.  Ids are the PCI address, or the VDie ID with
``options["board"] = true``.  Memory keeps HBM and DDR apart (``MB`` is MiB).  Topology from
``npu-smi info -t topo`` gives HCCS / SIO / HCCS_SW links, HCCS groups and die pairs.

Test facility: ``options["scenario"]`` (``accel ls --backend ascend --option
scenario=910b-8``) replays a shipped scenario instead of running ``npu-smi``; see
:data:`SCENARIOS`.
"""

from __future__ import annotations

from accel.plugin import PLUGIN_API, Backend, BackendConfig, Capability, PluginInfo
from accel.tools import Runner

from .._cli import CliBackendPlugin, CliProbeSpec, scenario_names

__all__ = ["PLUGIN", "PROBE", "SCENARIOS", "AscendPlugin"]

PROBE = CliProbeSpec(
    vendor="Huawei Ascend",
    pci_vendor_ids=("19e5",),
    pci_class_prefixes=("12",),
    device_globs=("davinci[0-9]*",),
    tool="npu-smi",
    tool_paths=("/usr/local/bin", "/usr/local/sbin", "/usr/sbin"),
)

#: Shipped replay scenarios (a test facility), by name.
SCENARIOS: tuple[str, ...] = scenario_names(__name__)


class AscendPlugin(CliBackendPlugin):
    """Entry-point object of the ``ascend`` backend."""

    info = PluginInfo(
        name="ascend",
        vendor="huawei",
        version="0.1.0",
        api_versions=frozenset({PLUGIN_API}),
        capabilities=frozenset(
            {
                Capability.INVENTORY,
                Capability.MEMORY,
                Capability.MEMORY_USED,
                Capability.PCI,
                Capability.TOPOLOGY,
                Capability.LINKS,
                Capability.DOMAINS,
                Capability.HEALTH,
                Capability.TELEMETRY,
                Capability.POWER,
                Capability.TEMPERATURE,
                Capability.UTILIZATION,
                Capability.PROCESSES,
                Capability.VERSIONS,
            }
        ),
        description="Huawei Ascend NPUs (910A/910B/910C, 310/310P) through npu-smi",
        api="npu-smi",
    )

    probe_spec = PROBE
    package = __name__

    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        from ._backend import AscendBackend  # deferred: keeps the entry point light

        return AscendBackend(config, runner)


PLUGIN = AscendPlugin()
