"""``accel k8s kubelet-plugin`` options: argparse only, so building the ``accel`` parser stays cheap."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]

DEFAULT_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_CDI_DIR = "/var/run/cdi"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 and <= 86400, got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The kubelet plugin's options (backend selection is added by the caller)."""
    p.add_argument("--driver-name", metavar="NAME",
                   help="the DRA driver served, <vendor>.<domain> (default: the one driver of this host's devices)")
    p.add_argument("--node-name", metavar="NAME",
                   help="this node's name in Kubernetes, also the pool name (default: $NODE_NAME, as a DaemonSet "
                        "sets it from spec.nodeName; else the inventory's hostname)")
    p.add_argument("--domain", default="accel.dev", metavar="DOMAIN", help="attribute domain (default accel.dev)")
    p.add_argument("--partitionable", action="store_true",
                   help="publish partitioned devices with their partitions and shared counters "
                        "(needs DRAPartitionableDevices; see docs/kubernetes.md)")
    p.add_argument("--dynamic-partitions", action="store_true",
                   help="publish MIG-mode devices as every placement of their profiles with shared counters, and "
                        "create each claim's partition when it is prepared, destroy it when it is unprepared (needs "
                        "a backend with partition actuation and DRAPartitionableDevices; see docs/kubernetes.md)")
    p.add_argument("--cdi-env", choices=("stable", "host", "none"), default="stable",
                   help="visibility-variable edits in the claims' CDI specs (default stable, as `accel cdi --env`)")
    p.add_argument("--plugin-dir", metavar="DIR",
                   help="directory of the DRA socket dra.sock (default /var/lib/kubelet/plugins/<driver>)")
    p.add_argument("--registry-dir", default=DEFAULT_REGISTRY_DIR, metavar="DIR",
                   help=f"the kubelet's plugin registration directory (default {DEFAULT_REGISTRY_DIR})")
    p.add_argument("--cdi-dir", default=DEFAULT_CDI_DIR, metavar="DIR",
                   help=f"where the claims' CDI specs are written (default {DEFAULT_CDI_DIR})")
    p.add_argument("--state-dir", metavar="DIR", help="where the checkpoint of prepared claims is kept "
                   "(default: the plugin directory)")
    p.add_argument("--kubeconfig", metavar="FILE",
                   help="kubeconfig of the API server (default: in-cluster service account, else ~/.kube/config)")
    p.add_argument("--api-timeout", type=_seconds, default=10.0, metavar="S",
                   help="deadline of every Kubernetes API call in seconds (default 10)")
    p.add_argument("--poll-interval", type=_seconds, default=30.0, metavar="S",
                   help="seconds between inventory reads; the ResourceSlices are re-published when they "
                        "change, health included (default 30)")
