"""``accel k8s kubelet-plugin``: the backend session it reads, handed to the plugin."""

from __future__ import annotations

import argparse
from typing import Any

from ._commands import _session, _warn_failures

__all__ = ["main"]


def _actuator(session: Any) -> Any:
    """The one open backend that declares partition actuation (ConfigError: none, or several)."""
    from ..errors import ConfigError
    from ..plugin import Capability, SupportsPartitionActuation

    found = [backend for name, backend in session.backends.items()
             if (plugin := session.report.plugins.get(name)) is not None
             and Capability.PARTITION_ACTUATION in plugin.info.capabilities
             and isinstance(backend, SupportsPartitionActuation)]
    if len(found) != 1:
        raise ConfigError("--dynamic-partitions needs exactly one selected backend that declares partition "
                          f"actuation; {len(found)} do (select one with --backend)")
    return found[0]


def main(args: argparse.Namespace) -> int:
    # The plugin, gRPC and the Kubernetes client load only here: `accel ls` never pays for them.
    from ..integrations.k8s._kubelet import main as plugin_main

    with _session(args) as session:
        _warn_failures(session.report)
        code: int = plugin_main(args, session.inventory, _actuator(session) if args.dynamic_partitions else None)
        return code
