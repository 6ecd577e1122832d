"""The light ``kunlunxin`` entry-point object (no tool is run at import or probe time)."""

from __future__ import annotations

from accel.plugin import BackendConfig, Capability, ProbeResult
from accel.toolkit import CliProbeSpec, LazyCliPlugin, cli_plugin_info
from accel.tools import which

from ._parse import SEARCH_PATH

__all__ = ["KunlunxinPlugin"]


class KunlunxinPlugin(LazyCliPlugin):
    """Kunlunxin XPUs (R200/R300, P800) through ``xpu_smi`` / ``xpu-smi``.

    The probe trusts PCI vendor id ``1d22`` and ``/dev/xpuN`` first and, of the tools, only
    ``xpu_smi``: a bare ``xpu-smi`` may be Intel's GPU tool, so it never makes the backend
    present on its own.
    """

    info = cli_plugin_info(
        "kunlunxin",
        api="xpu_smi",
        description=(
            "Kunlunxin XPUs via XPUML (libxpuml.so: device state) or xpu_smi "
            "(4.x and 5.x layouts, -L, topo -m with XL groups, SR-IOV mode)."
        ),
        capabilities=(
            Capability.UUID,
            Capability.POWER,
            Capability.ECC,
            Capability.TOPOLOGY,
            Capability.LINKS,
            Capability.DOMAINS,
            Capability.PROCESSES,
        ),
    )
    probe_spec = CliProbeSpec(
        vendor="Kunlunxin",
        pci_vendor_ids=("1d22",),
        device_globs=("xpu[0-9]*", "xpuctrl"),
        tool="xpu_smi",
        tool_paths=SEARCH_PATH,
    )
    package = __package__ or "accel.plugins.kunlunxin"
    known_options = frozenset({"scenario", "read"})

    def probe(self, config: BackendConfig) -> ProbeResult:
        result = super().probe(config)
        if result.status == "absent":
            finder = config.runner.which if config.runner is not None else which
            try:
                other = finder("xpu-smi", SEARCH_PATH)
            except Exception:  # noqa: BLE001 - probe() never raises
                other = None
            if other is not None:
                return ProbeResult.absent(
                    f"{result.reason}; xpu-smi at {other} is not trusted without a Kunlunxin PCI device "
                    "(Intel's GPU tool has the same name)"
                )
        return result

    backend = "accel.plugins.kunlunxin._backend:KunlunxinBackend"
