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
    p.add_argument("--labels", choices=["accel", "dcgm"], default="accel",
                   help="labels of the value series: accel (default: device only; identity is in "
                        "accel_device_info) or dcgm (also dcgm-exporter's gpu, UUID, modelName, Hostname, "
                        "pci_bus_id, DCGM_FI_DRIVER_VERSION, and the pod or job labels; more series bytes, "
                        "see docs/exporter.md)")
    p.add_argument("--dcgm", action="store_true",
                   help="with `rules`: print the recording rules that give dcgm-exporter's names, units and "
                        "labels instead of accel's alerting rules")
    p.add_argument("--pod-resources-socket", metavar="PATH", default=None,
                   help="attribute devices to Kubernetes pods through the kubelet's PodResources API on this "
                        "unix socket (usually /var/lib/kubelet/pod-resources/kubelet.sock): "
                        "accel_device_pod_info, and pod labels with --labels dcgm")
    p.add_argument("--hpc-job-mapping-dir", metavar="DIR", default=None,
                   help="attribute devices to Slurm jobs from dcgm-exporter's job-mapping directory (a file per "
                        "GPU index holding its job ids): accel_device_hpc_job_info, and hpc_job with --labels dcgm")
    p.add_argument("--accel-serve-attribution", metavar="FILE", default=None,
                   help="the file accel serve --attribution-dir writes for this host (DIR/<host>.json): "
                        "accel_device_accel_job_info{accel_job, tenant}")
    p.add_argument("--attribution-interval", type=float, default=10.0, metavar="S",
                   help="ask the kubelet and read the job-mapping directory at most every S seconds (default 10)")
    p.add_argument("--attribution-timeout", type=float, default=2.0, metavar="S",
                   help="deadline of one PodResources call; a kubelet that does not answer costs a scrape at "
                        "most this, once per --attribution-interval (default 2)")
