"""``accel k8s kubelet-plugin``: the backend session it reads, handed to the plugin."""

from __future__ import annotations

import argparse

from ._commands import _session, _warn_failures

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    # The plugin, gRPC and the Kubernetes client load only here: `accel ls` never pays for them.
    from ..integrations.k8s._kubelet import main as plugin_main

    with _session(args) as session:
        _warn_failures(session.report)
        code: int = plugin_main(args, session.inventory)
        return code
