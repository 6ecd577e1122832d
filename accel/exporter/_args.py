"""The exporter's command-line options: argparse only, so building the ``accel`` parser stays cheap."""

from __future__ import annotations

import argparse

from . import DEFAULT_LISTEN, DEFAULT_PORT

__all__ = ["add_arguments"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The exporter's own options (the backend selection options are added by the CLI)."""
    p.add_argument("action", nargs="?", choices=["serve", "rules"], default="serve",
                   help="serve (default) the metrics, or print the Prometheus rules YAML")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="ADDR",
                   help=f"address to bind (default {DEFAULT_LISTEN}; another one only when you ask for it)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--min-interval", type=float, default=1.0, metavar="S",
                   help="minimum seconds between two real reads of the backends (default 1)")
    p.add_argument("--no-leak-detection", dest="leak_detection", action="store_false",
                   help="do not watch used memory for leaks (MemoryLeakSuspected conditions and "
                        "accel_memory_leak_* families; on by default, see docs/leaks.md)")
    p.add_argument("--processes", action="store_true",
                   help="export device memory per process (one series per pid: high cardinality)")
    p.add_argument("--fields", default="full", metavar="SPEC",
                   help="what to export, and so what the backends read: full (default), common (memory, "
                        "utilisation, clocks, power, GPU temperature, fan, PCIe throughput, processes: the "
                        "fields nvitop-exporter also exports; no health), or a comma list of groups: memory, "
                        "utilization, clocks, power, energy, temperature, fan, throttle, pcie, errors, links, "
                        "topology, health, processes, partitions (docs/exporter.md)")
