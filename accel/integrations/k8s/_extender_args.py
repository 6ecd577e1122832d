"""``accel k8s extender`` options: argparse only, so building the ``accel`` parser stays cheap."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]

DEFAULT_LISTEN = "127.0.0.1"
DEFAULT_PORT = 8888


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The extender's options."""
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="ADDR",
                   help=f"address to bind (default {DEFAULT_LISTEN}; another one only when you ask for it)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--inventories", action="append", metavar="PATH",
                   help="HostInventory JSON (a file, a list, or a directory of *.json); the node name is "
                        "the inventory's hostname; repeatable")
    p.add_argument("--slices", action="append", metavar="PATH",
                   help="ResourceSlices (accel dra output: a file, a List, or a directory); repeatable")
    p.add_argument("--scorer", default="fgd", metavar="NAME",
                   help="accel.scheduler scorer (default fgd: fragmentation-aware; see docs/kubernetes-extender.md)")
    p.add_argument("--workload", metavar="FILE",
                   help="target workload for fragmentation-aware scorers: a JSON list of accel.dev/request "
                        "objects, each with an optional count")
    p.add_argument("--seed", type=int, default=0, help="tie-break seed of the scheduler (default 0)")
    p.add_argument("--max-body-bytes", type=int, default=64 * 1024 * 1024, metavar="N",
                   help="largest request body accepted (default 64 MiB; larger ones get HTTP 413)")
    p.add_argument("--verbose", action="store_true", help="log every HTTP request on stderr")


