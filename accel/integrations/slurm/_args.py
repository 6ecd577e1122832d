"""``accel slurm`` arguments (argparse only: the implementation loads when the command runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_arguments(p: argparse.ArgumentParser, selection_args: Callable[[argparse.ArgumentParser], None]) -> None:
    sub = p.add_subparsers(dest="slurm_action", metavar="ACTION", required=True)
    gres = sub.add_parser(
        "gres-conf",
        help="print this node's gres.conf and its slurm.conf Gres= (or --check an existing file)",
        description="Print gres.conf lines for every device (Name=gpu, Type from the model, File= its device "
        "node, Cores= its CPU affinity, Links= the topology, Flags= per vendor), then the slurm.conf "
        "fragment as comments. Exit 5 when a device had to be left out (no device node).",
    )
    _dev_root(gres)
    gres.add_argument(
        "--threads-per-core",
        type=int,
        default=1,
        metavar="N",
        help="hardware threads per core, to turn CPU ids into Slurm's core indices (default 1)",
    )
    gres.add_argument(
        "--shards",
        type=int,
        default=0,
        metavar="N",
        help="also write Name=shard Count=N per device (gres/shard; 0: none)",
    )
    gres.add_argument("--check", metavar="FILE", help="compare FILE with the hardware; exit 1 on any difference")
    selection_args(gres)
    prolog = sub.add_parser(
        "task-prolog",
        help="TaskProlog: print export/unset lines mapping SLURM_STEP_GPUS to each vendor's variable",
    )
    _dev_root(prolog)
    prolog.add_argument("--threads-per-core", type=int, default=1, metavar="N", help=argparse.SUPPRESS)
    prolog.add_argument(
        "--gres-conf", metavar="FILE", help="the node's gres.conf (default: the same generation from the devices)"
    )
    prolog.add_argument(
        "--if-absent",
        choices=("error", "hide", "keep"),
        default="error",
        help="without SLURM_STEP_GPUS/SLURM_JOB_GPUS: error (exit 2), hide every device, or keep",
    )
    selection_args(prolog)
    job = sub.add_parser(
        "prolog",
        help="Prolog: refuse to start a job on a lost or unhealthy device it was given (exit 1: Slurm "
        "drains the node and requeues the job)",
    )
    _dev_root(job)
    job.add_argument("--threads-per-core", type=int, default=1, metavar="N", help=argparse.SUPPRESS)
    job.add_argument(
        "--gres-conf", metavar="FILE", help="the node's gres.conf (default: the same generation from the devices)"
    )
    selection_args(job)
    health = sub.add_parser(
        "healthcheck",
        help="HealthCheckProgram: drain this node when a device is lost or unhealthy",
    )
    health.add_argument("--node", metavar="NAME", help="the Slurm node name (default: the short hostname)")
    health.add_argument(
        "--resume", action="store_true", help="undrain the node when healthy, if accel drained it (reason 'accel: ...')"
    )
    health.add_argument(
        "--slurm-conf", metavar="FILE", help="slurm.conf for scontrol (default: $SLURM_CONF, else Slurm's own default)"
    )
    health.add_argument("--dry-run", action="store_true", help="print the decision, run no scontrol update")
    selection_args(health)


def _dev_root(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dev-root", metavar="DIR", help="put every device node under DIR (DIR/dev/davinci0): for tests and containers"
    )
