"""Hygon DCUs (Z100/Z100L, K100, K100_AI, BW "HCU") through ``hy-smi`` / DTK ``rocm-smi``.

Backend ``hygon``.  Light entry-point module: importing it loads nothing heavy and runs nothing.
The probe looks, in order, for PCI functions with vendor id ``1d94`` in sysfs, then ``/dev/kfd``
with a Hygon (``0x1d94``) node in the KFD topology (or Hygon's ``/dev/mkfd``), then ``hy-smi`` in
``/opt/hyhal/bin`` (or ``PATH``), then the DTK ``rocm-smi`` (``/opt/dtk/bin``).

Devices are DCUs (kind ``dcu``) with the Hygon unique id as the stable id (``hygon:0x<hex>``),
the PCI address otherwise.  Memory comes from the ``--json`` query, whose keys say MiB (AMD's
say bytes).  Binding is ``HIP_VISIBLE_DEVICES`` / torch ``cuda`` / ``rccl``: the DTK stack is a
ROCm fork.  The model builder, health table and sysfs reader are the AMD plugin's
(:mod:`accel.plugins.amd.layers`).

Test facility: ``options["scenario"]`` (``accel ls --backend hygon --option
scenario=k100ai-1dcu``) replays a shipped scenario; ``--replay DIR`` replays any directory.
"""

from __future__ import annotations

from pathlib import Path

from accel.plugin import PLUGIN_API, Backend, BackendConfig, Capability, PluginInfo, ProbeResult
from accel.tools import Runner

from .._cli import CliBackendPlugin, CliProbeSpec, runner_for, scenario_names

__all__ = ["DTK_PATHS", "HYSMI_PATHS", "PLUGIN", "PROBE", "SCENARIOS", "HygonPlugin"]

#: Where ``hy-smi`` lives (not always on PATH).
HYSMI_PATHS = ("/opt/hyhal/bin",)
#: Where the DTK's forked ``rocm-smi`` and ``rocminfo`` live.
DTK_PATHS = ("/opt/dtk/bin", "/opt/dtk/rocm/bin", "/opt/rocm/bin")

PROBE = CliProbeSpec(
    vendor="Hygon DCU",
    pci_vendor_ids=("1d94",),
    device_globs=("mkfd",),
    tool="hy-smi",
    tool_paths=HYSMI_PATHS,
)

#: Shipped replay scenarios (a test facility), by name.
SCENARIOS: tuple[str, ...] = scenario_names(__name__)


def _kfd_has_hygon(sysfs_root: Path) -> bool:
    base = sysfs_root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    try:
        nodes = list(base.iterdir())
    except OSError:
        return False
    for node in nodes:
        try:
            props = (node / "properties").read_text(errors="replace")
        except OSError:
            continue
        for line in props.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "vendor_id" and parts[1].isdigit() and int(parts[1]) == 0x1D94:
                return True
    return False


class HygonPlugin(CliBackendPlugin):
    """Entry-point object of the ``hygon`` backend."""

    info = PluginInfo(
        name="hygon",
        vendor="hygon",
        version="0.1.0",
        api_versions=frozenset({PLUGIN_API}),
        capabilities=frozenset(
            {
                Capability.INVENTORY,
                Capability.MEMORY,
                Capability.MEMORY_USED,
                Capability.UUID,
                Capability.SERIAL,
                Capability.PCI,
                Capability.TOPOLOGY,
                Capability.LINKS,
                Capability.DOMAINS,
                Capability.HEALTH,
                Capability.TELEMETRY,
                Capability.POWER,
                Capability.TEMPERATURE,
                Capability.UTILIZATION,
            }
        ),
        description="Hygon DCUs through hy-smi or the DTK rocm-smi (and rocminfo)",
        api="hy-smi",
    )

    probe_spec = PROBE
    package = __name__

    def probe(self, config: BackendConfig) -> ProbeResult:
        """PCI ``1d94``, then ``/dev/mkfd`` / ``/dev/kfd`` with Hygon ids, then hy-smi, then DTK rocm-smi."""
        first = super().probe(config)  # PCI vendor id, /dev/mkfd, hy-smi; never raises
        if first.status.value == "present":
            return first
        try:
            if (config.dev_root / "kfd").exists() and _kfd_has_hygon(config.sysfs_root):
                return ProbeResult.present("/dev/kfd with a Hygon (0x1d94) node in the KFD topology")
            runner = runner_for(config, __name__)
            path = runner.which("rocm-smi", DTK_PATHS)
            # A bare rocm-smi on PATH is AMD's: only the DTK's own copy (or a replay) counts.
            if path and (path.startswith("/opt/dtk") or config.runner is not None or config.option("scenario")):
                return ProbeResult.present(f"DTK rocm-smi at {path}")
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return ProbeResult.error(f"hygon probe failed: {type(exc).__name__}: {exc}")
        return first

    def open_with(self, config: BackendConfig, runner: Runner) -> Backend:
        from ._backend import HygonBackend  # deferred: keeps the entry point light

        return HygonBackend(config, runner)


#: The object the ``hygon`` entry point names.
PLUGIN = HygonPlugin()
