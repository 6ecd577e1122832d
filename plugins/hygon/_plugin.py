"""The light ``hygon`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from pathlib import Path

from accel.plugin import BackendConfig, Capability, ProbeResult
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info, runner_for

__all__ = ["DTK_PATHS", "HYSMI_PATHS", "HygonPlugin"]

#: Where ``hy-smi`` lives (not always on PATH).
HYSMI_PATHS = ("/opt/hyhal/bin",)
#: Where the DTK's forked ``rocm-smi`` and ``rocminfo`` live.
DTK_PATHS = ("/opt/dtk/bin", "/opt/dtk/rocm/bin", "/opt/rocm/bin")


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


class HygonPlugin(LazyCliPlugin):
    """Hygon DCUs through ``hy-smi`` or the DTK ``rocm-smi`` (and ``rocminfo``)."""

    info = cli_plugin_info(
        "hygon",
        api="hy-smi",
        description="Hygon DCUs through the DTK ROCm SMI library (rsmi_*) or hy-smi / the DTK rocm-smi (and rocminfo)",
        capabilities=(
            Capability.UUID,
            Capability.SERIAL,
            Capability.TOPOLOGY,
            Capability.LINKS,
            Capability.DOMAINS,
            Capability.POWER,
        ),
        without=(Capability.VERSIONS,),
    )
    probe_spec = CliProbeSpec(
        vendor="Hygon DCU",
        pci_vendor_ids=("1d94",),
        device_globs=("mkfd",),
        tool="hy-smi",
        tool_paths=HYSMI_PATHS,
    )
    package = __package__ or "accel.plugins.hygon"
    known_options = frozenset({"scenario", "read"})

    backend = "accel.plugins.hygon._backend:HygonBackend"

    def probe(self, config: BackendConfig) -> ProbeResult:
        """PCI ``1d94``, then ``/dev/mkfd`` / ``/dev/kfd`` with Hygon ids, then hy-smi, then DTK rocm-smi."""
        first = super().probe(config)  # PCI vendor id, /dev/mkfd, hy-smi; never raises
        if first.status.value == "present":
            return first
        try:
            if (config.dev_root / "kfd").exists() and _kfd_has_hygon(config.sysfs_root):
                return ProbeResult.present("/dev/kfd with a Hygon (0x1d94) node in the KFD topology")
            runner = runner_for(config, self.package)
            path = runner.which("rocm-smi", DTK_PATHS)
            # A bare rocm-smi on PATH is AMD's: only the DTK's own copy (or a replay) counts.
            if path and (path.startswith("/opt/dtk") or config.runner is not None or config.option("scenario")):
                return ProbeResult.present(f"DTK rocm-smi at {path}")
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return ProbeResult.error(f"hygon probe failed: {type(exc).__name__}: {exc}")
        return first
