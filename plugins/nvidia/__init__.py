"""accel backend ``nvidia``: NVIDIA GPUs through NVML (the ``nvidia-ml-py`` binding).

Importing this module imports nothing of ``pynvml``: the binding is loaded by :meth:`open` (and
by :meth:`probe` only when NVIDIA hardware is visible).  Install with ``pip install
'accel-sdk[nvidia]'``.

Options (``BackendConfig.options``):

``scenario``
    Run against the fake NVML of :mod:`accel.plugins.nvidia.testing` for the named scenario
    instead of the real library (``accel ls --backend nvidia --option scenario=h100-nvswitch-8``).
    This is a test facility for CI and demonstrations without hardware; inventories produced this
    way say so in ``sources[0].detail``.
``proc_root``
    Where to look up process ids (default ``/proc``), to tell host PIDs from container PIDs.

The XID and counter mapping is published as :data:`XID_TABLE` / :data:`APPLICATION_XIDS`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ...errors import AccelError, BackendUnavailableError, ConfigError
from ...plugin import (
    ApiVersion,
    BackendConfig,
    BackendPlugin,
    Capability,
    PluginInfo,
    ProbeResult,
    check_options,
)
from ._health import APPLICATION_XIDS, XID_TABLE, XidRule

if TYPE_CHECKING:
    from ._backend import NvidiaBackend

__all__ = ["APPLICATION_XIDS", "PLUGIN", "XID_TABLE", "NvidiaPlugin", "XidRule"]

__version__ = "0.1.0"

_CAPABILITIES = frozenset({
    Capability.INVENTORY, Capability.MEMORY, Capability.MEMORY_USED, Capability.UUID, Capability.SERIAL,
    Capability.PCI, Capability.NUMA, Capability.TOPOLOGY, Capability.LINKS, Capability.DOMAINS,
    Capability.HEALTH, Capability.ECC, Capability.TELEMETRY, Capability.POWER, Capability.ENERGY,
    Capability.TEMPERATURE, Capability.CLOCKS, Capability.UTILIZATION, Capability.PROCESSES,
    Capability.EVENTS, Capability.PARTITIONS, Capability.PARTITION_ACTUATION, Capability.VERSIONS,
})

#: Why a failed nvmlInit leaves the backend unusable, by accel error code.
_REASONS = {
    "driver.library-not-found": "NVIDIA GPUs are present but libnvidia-ml.so.1 is not installed",
    "driver.not-loaded": "the NVIDIA kernel driver is not loaded",
    "driver.version-mismatch": "driver/library version mismatch (driver upgraded without a reload)",
    "permission.denied": "no permission to open the NVIDIA devices",
}


class NvidiaPlugin(BackendPlugin):
    """The entry-point object of backend ``nvidia``."""

    info = PluginInfo(
        name="nvidia",
        vendor="nvidia",
        version=__version__,
        api_versions=frozenset({ApiVersion(1, 0)}),
        capabilities=_CAPABILITIES,
        description="NVIDIA GPUs through NVML (nvidia-ml-py): inventory, NVLink/NVSwitch topology, "
        "MIG, XID health, telemetry and processes",
        api="nvml",
    )

    def probe(self, config: BackendConfig) -> ProbeResult:
        """PCI vendor 10de or ``/dev/nvidia*`` first; then one nvmlInit to tell why it fails."""
        try:
            scenario = config.option("scenario")
            if scenario is not None:
                return self._probe_library(config, f"fake NVML scenario {scenario!r}")
            from ...sysfs import scan_pci

            gpus = scan_pci(config.sysfs_root, vendor_ids=("10de",), class_prefixes=("03",))
            try:
                nodes = sorted(n for n in os.listdir(config.dev_root) if n.startswith("nvidia")
                               and n[6:].isdigit())
            except OSError:
                nodes = []
            if not gpus and not nodes:
                return ProbeResult.absent("no NVIDIA PCI display/3D function (vendor 10de) and no /dev/nvidia*")
            seen = f"{len(gpus)} NVIDIA PCI function(s), {len(nodes)} /dev/nvidia* node(s)"
            return self._probe_library(config, seen)
        except Exception as exc:  # noqa: BLE001 -- probe() must never raise, whatever went wrong
            return ProbeResult.error(f"probe failed: {type(exc).__name__}: {exc}")

    def _probe_library(self, config: BackendConfig, seen: str) -> ProbeResult:
        from ._nvml import Nvml

        try:
            nv = Nvml(_fake_library(config))
            nv.init()
        except AccelError as err:
            reason = _REASONS.get(err.code, str(err))
            if err.code == "driver.library-not-found" and config.option("scenario") is None and "binding" in str(err):
                reason = str(err)
            return ProbeResult.error(f"{seen}: {reason}")
        try:
            count = int(nv.call("nvmlDeviceGetCount"))
        except AccelError as err:
            return ProbeResult.error(f"{seen}: nvmlDeviceGetCount failed: {err}")
        finally:
            nv.shutdown()
        if count == 0:
            return ProbeResult.absent(f"{seen}: NVML reports no GPUs")
        return ProbeResult.present(f"{seen}: NVML sees {count} GPU(s)", device_count=count)

    def open(self, config: BackendConfig) -> NvidiaBackend:
        """Initialise NVML (or the fake for ``scenario``) and return the backend."""
        from ._backend import NvidiaBackend
        from ._nvml import Nvml

        check_options("nvidia", config, ("scenario", "proc_root"))
        try:
            nv = Nvml(_fake_library(config))
            nv.init()
        except AccelError as err:
            raise BackendUnavailableError(f"NVIDIA backend unavailable: {err}", plugin="nvidia") from err
        return NvidiaBackend(config, nv, plugin_version=__version__, scenario=config.option("scenario"))


def _fake_library(config: BackendConfig) -> Any:
    """The fake NVML for the ``scenario`` option, or ``None`` for the real binding."""
    scenario = config.option("scenario")
    if scenario is None:
        return None
    from .testing import SCENARIOS, FakeNVML

    if str(scenario) not in SCENARIOS:
        raise ConfigError(f"unknown nvidia scenario {scenario!r}; known: {', '.join(sorted(SCENARIOS))}")
    return FakeNVML(str(scenario))


PLUGIN = NvidiaPlugin()
