"""The light ``BackendPlugin`` the ``amd`` entry point names: imports no vendor library."""

from __future__ import annotations

from accel.plugin import (
    SUPPORTED_API_VERSIONS,
    Backend,
    BackendConfig,
    BackendPlugin,
    Capability,
    PluginInfo,
    ProbeResult,
    check_options,
)
from accel.sysfs import scan_pci

__all__ = ["AmdPlugin"]

VERSION = "0.1.0"

#: PCI classes of AMD GPUs: VGA (0300), 3D (0302), display other (0380), processing accelerator (1200).
GPU_CLASSES = ("0300", "0302", "0380", "1200")


class AmdPlugin(BackendPlugin):
    """AMD Instinct and Radeon GPUs through pyrsmi, amdsmi and the amdgpu sysfs interface.

    ``probe`` looks only at sysfs (PCI vendor ``1002`` with a GPU class, then the driver's
    ``initstate``); ``open`` loads pyrsmi and amdsmi.  Option ``scenario=<name>`` (a *test
    facility*) runs the backend against the fakes in :mod:`accel.plugins.amd.testing`.
    """

    info = PluginInfo(
        name="amd",
        vendor="amd",
        version=VERSION,
        api_versions=frozenset(SUPPORTED_API_VERSIONS),
        capabilities=frozenset(
            {
                Capability.INVENTORY,
                Capability.MEMORY,
                Capability.MEMORY_USED,
                Capability.UUID,
                Capability.SERIAL,
                Capability.PCI,
                Capability.NUMA,
                Capability.TOPOLOGY,
                Capability.LINKS,
                Capability.DOMAINS,
                Capability.HEALTH,
                Capability.ECC,
                Capability.TELEMETRY,
                Capability.POWER,
                Capability.TEMPERATURE,
                Capability.CLOCKS,
                Capability.UTILIZATION,
                Capability.PROCESSES,
                Capability.PARTITIONS,
                Capability.PARTITION_ACTUATION,
                Capability.VERSIONS,
            }
        ),
        description="AMD GPUs via pyrsmi (basics), amdsmi (RAS, topology, partitions) and amdgpu sysfs",
        api="pyrsmi+amdsmi+sysfs",
    )

    def probe(self, config: BackendConfig) -> ProbeResult:
        try:
            return self._probe(config)
        except Exception as exc:  # noqa: BLE001 - probe never raises, whatever went wrong
            return ProbeResult.error(f"amd probe failed: {type(exc).__name__}: {exc}")

    def _probe(self, config: BackendConfig) -> ProbeResult:
        name = config.option("scenario")
        if name:
            from .testing import SCENARIOS

            host = SCENARIOS.get(str(name))
            if host is None:
                return ProbeResult.error(f"unknown amd scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
            if not host.driver_live:
                return ProbeResult.error(f"scenario {name}: AMD GPUs on PCI but the amdgpu driver is not live")
            return ProbeResult.present(f"scenario {name} (test facility)", device_count=len(host.gpus))
        from ._amdgpu_sysfs import driver_live, read_cards

        found = scan_pci(config.sysfs_root, vendor_ids=("1002",), class_prefixes=GPU_CLASSES)
        if not found:
            return ProbeResult.absent("no AMD GPU (PCI vendor 1002) in sysfs")
        cards = read_cards(config.sysfs_root)
        if not cards and driver_live(config.sysfs_root) is not True:
            return ProbeResult.error(
                f"{len(found)} AMD GPU(s) on PCI but the amdgpu driver is not live "
                "(module/amdgpu/initstate)"
            )
        return ProbeResult.present(f"{len(found)} AMD GPU(s) on PCI", device_count=len(found))

    def open(self, config: BackendConfig) -> Backend:
        from ._backend import AmdBackend

        check_options("amd", config, ("scenario",))

        return AmdBackend(config)
