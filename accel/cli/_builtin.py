"""accel's own commands in the ``accel.commands`` entry-point group (registered in pyproject.toml).

This module is imported to list them (``accel --help``): it and what ``add_arguments`` imports
are argparse only; each command's implementation (the scheduler and numpy, the conformance kit
and pytest, prometheus_client, the Kubernetes and Slurm integrations) loads in ``run``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from ._options import number, text
from .commands import Command, CommandContext

__all__ = ["CDI", "CONFORMANCE", "DRA", "EXPORTER", "K8S", "RAY", "SCHED", "SLURM"]


def _import_for(command: str, module: str, requirement: str) -> Any:
    """Import a sub-command's implementation; a missing optional dependency is a ConfigError
    naming what to install (``Command.requires`` does this for whole commands)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        from ..errors import ConfigError
        from ._registry import missing_module

        missing = missing_module(exc)
        if missing is None:
            raise  # not a missing optional dependency: a bug, reported as one
        raise ConfigError(f"{command} needs {missing!r}, which is not installed: "
                          f"pip install '{requirement}'") from exc


# -- conformance ---------------------------------------------------------------------------------


def _conformance_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    from ..conformance._cli import add_arguments  # argparse only; accel.conformance is a lazy package

    add_arguments(parser)


def _conformance_run(args: argparse.Namespace) -> int:
    # The kit pulls in pytest ([conformance] extra): a missing one is reported by the registry.
    from ..conformance._cli import run_parsed

    return run_parsed(args)


CONFORMANCE = Command(
    help="run the conformance kit and build its matrix (run | report | matrix)",
    description="Run and report the accel conformance kit: certify a backend plugin, merge run directories "
    "into one matrix, or run every shipped scenario of every backend.",
    add_arguments=_conformance_arguments,
    run=_conformance_run,
    requires="accel-sdk[conformance]",
)


# -- exporter ------------------------------------------------------------------------------------


def _exporter_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    from ..integrations.exporter._args import add_arguments  # the exporter and prometheus_client load in run

    add_arguments(parser)
    context.add_selection_arguments(parser)


def _exporter_run(args: argparse.Namespace) -> int:
    from ..integrations.exporter._server import main
    from ._commands import _configs

    selection = _configs(args) if args.action == "serve" else None
    code: int = main(args, selection)
    return code


EXPORTER = Command(
    help="serve Prometheus metrics of every backend (`accel exporter rules`: the alerting rules)",
    description="Serve one snapshot of every backend per scrape as Prometheus metrics (loopback by default), "
    "or print the alerting and recording rules with `accel exporter rules`.",
    add_arguments=_exporter_arguments,
    run=_exporter_run,
    requires="accel-sdk[exporter]",
)


# -- ray -----------------------------------------------------------------------------------------


def _ray_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    from ._ray import add_arguments

    add_arguments(parser, context.add_selection_arguments)


def _ray_run(args: argparse.Namespace) -> int:
    from ._ray import main

    return main(args)


RAY = Command(
    help="Ray integration: `accel ray resources` prints this node's `ray start` resources",
    add_arguments=_ray_arguments,
    run=_ray_run,
)


# -- slurm ---------------------------------------------------------------------------------------


def _slurm_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    from ..integrations.slurm._args import add_arguments

    add_arguments(parser, context.add_selection_arguments)


def _slurm_run(args: argparse.Namespace) -> int:
    from ._slurm import main

    return main(args)


SLURM = Command(
    help="Slurm from the device model: gres-conf | task-prolog | prolog | healthcheck (see docs/slurm.md)",
    description="gres.conf for every vendor, a TaskProlog that sets each vendor's own visibility "
    "variable, and a HealthCheckProgram that drains the node when a device is lost or unhealthy.",
    add_arguments=_slurm_arguments,
    run=_slurm_run,
)


# -- k8s -----------------------------------------------------------------------------------------


def _k8s_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    from ..integrations.k8s._extender_args import add_arguments as extender_arguments

    sub = parser.add_subparsers(dest="k8s_command", metavar="SUBCOMMAND", required=True)
    extender = sub.add_parser(
        "extender",
        help="serve kube-scheduler's extender protocol (filter, prioritize, bind) on accel.scheduler placement",
        description="A kube-scheduler extender backed by accel.scheduler (loopback by default); "
        "see docs/kubernetes-extender.md.",
        epilog="Needs accel-sdk[scheduler] (pip install 'accel-sdk[scheduler]').",
    )
    extender_arguments(extender)
    from ..integrations.k8s._kubelet_args import add_arguments as kubelet_arguments

    kubelet = sub.add_parser(
        "kubelet-plugin",
        help="serve the kubelet's DRA plugin protocol: prepare claims as CDI specs, publish ResourceSlices",
        description="A DRA kubelet plugin for one accel driver: registration and DRA gRPC (v1, v1beta1) on "
        "unix sockets, a CDI spec per prepared claim, a checkpoint, and this node's ResourceSlices kept current "
        "through the Kubernetes API; see docs/kubernetes.md.",
        epilog="Needs accel-sdk[kubernetes] (pip install 'accel-sdk[kubernetes]').",
    )
    kubelet_arguments(kubelet)
    seconds = number(unit="seconds", minimum=0, min_inclusive=False, maximum=86400)
    for opt in kubelet._actions:  # the CLI's number type: finite seconds > 0, at most a day
        if opt.dest in ("api_timeout", "poll_interval"):
            opt.type = seconds
    context.add_selection_arguments(kubelet)


def _k8s_run(args: argparse.Namespace) -> int:
    if args.k8s_command == "kubelet-plugin":  # gRPC, protobuf and the Kubernetes client
        kubelet = _import_for("accel k8s kubelet-plugin", "accel.cli._kubelet", "accel-sdk[kubernetes]")
        kubelet_code: int = kubelet.main(args)
        return kubelet_code
    if args.k8s_command == "extender":  # the extender runs accel.scheduler, which needs numpy
        ext = _import_for("accel k8s extender", "accel.integrations.k8s._extender", "accel-sdk[scheduler]")
        code: int = ext.main(args)
        return code
    raise AssertionError(args.k8s_command)  # argparse allows only the sub-commands above


K8S = Command(
    help="Kubernetes services (`accel k8s extender`: a kube-scheduler extender; "
    "`accel k8s kubelet-plugin`: a DRA kubelet plugin)",
    add_arguments=_k8s_arguments,
    run=_k8s_run,
)


# -- dra, cdi ------------------------------------------------------------------------------------


def _dra_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    parser.add_argument("--domain", default="accel.dev", type=text("a domain name"),
                        help="attribute domain; drivers are <vendor>.<domain>")
    parser.add_argument("--node", type=text("a node name"), help="node name (default: the hostname in the inventory)")
    parser.add_argument("--partitionable", action="store_true",
                        help="publish partitioned devices beside their partitions with shared counters "
                        "(needs the DRAPartitionableDevices feature gate; default: parent or partitions)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--device-classes", action="store_true", help="print DeviceClasses instead of slices")
    what.add_argument("--claim-templates", action="store_true",
                      help="print example ResourceClaimTemplates instead of slices")
    what.add_argument("--nfd", action="store_true",
                      help="print a node-feature-discovery feature file (features.d, one label=value a line)")
    context.add_selection_arguments(parser)


def _dra_run(args: argparse.Namespace) -> int:
    from ._commands import cmd_dra

    return cmd_dra(args)


DRA = Command(
    help="the inventory as Kubernetes DRA ResourceSlices (resource.k8s.io/v1)",
    description="the inventory as Kubernetes DRA ResourceSlices (resource.k8s.io/v1), as JSON",
    add_arguments=_dra_arguments,
    run=_dra_run,
)


def _cdi_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    parser.add_argument("--domain", default="accel.dev", type=text("a domain name"),
                        help="CDI vendors are <vendor>.<domain>, the DRA driver names")
    parser.add_argument("--out", metavar="DIR", type=text("a directory"),
                        help="write the specs into DIR (for example /etc/cdi) instead of stdout")
    parser.add_argument("--force", action="store_true", help="with --out: overwrite existing spec files")
    parser.add_argument("--env", choices=("stable", "host", "none"), default="stable",
                        help="visibility-variable edits: stable (default) only UUID ids, host also host indexes, "
                        "none")
    context.add_selection_arguments(parser)


def _cdi_run(args: argparse.Namespace) -> int:
    from ._commands import cmd_cdi

    return cmd_cdi(args)


CDI = Command(
    help="CDI specs (Container Device Interface) from each device's binding",
    description="one CDI spec per vendor and device kind (kind <vendor>.<domain>/<kind>), as JSON on "
    "stdout, or one <vendor>-<class>.json per kind under --out",
    add_arguments=_cdi_arguments,
    run=_cdi_run,
)


# -- sched ---------------------------------------------------------------------------------------


def _sched_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    """The options of :mod:`accel.scheduler.queueing.cli` (kept equal to its ``add_arguments`` by a
    test), declared here so ``accel sched --help`` works without the scheduler's numpy."""
    sub = parser.add_subparsers(dest="sched_command", metavar="SUBCOMMAND", required=True)
    history = sub.add_parser("history", help="every event of one job", description="every event of one job")
    history.add_argument("job", help="the job id")
    jobs = sub.add_parser("jobs", help="each job's current state", description="each job's current state and why")
    bill = sub.add_parser("bill", help="metered usage and cost per tenant and device model",
                          description="metered usage per tenant and device model, from the journal alone")
    # Journal time is seconds from the journal's start: open run segments are billed up to it.
    bill.add_argument("--at", type=number(unit="seconds of journal time", minimum=0), default=None, metavar="S",
                      help="bill open run segments up to this journal time (default: the last event)")
    bill.add_argument("--prices", default=None, metavar="FILE",
                      help="price per device model (JSON; default: prices.json next to the journal, which "
                           "accel serve keeps; without one every cost is 0)")
    for p in (history, jobs, bill):
        p.add_argument("--journal", default=None, metavar="PATH",
                       help="the scheduler journal (default: $ACCEL_SCHED_JOURNAL or ./accel-sched.db)")
        p.add_argument("--json", action="store_true", help="print JSON")
        p.add_argument("--cluster", action="append", default=None, metavar="FILE",
                       help="a host inventory (`accel ls --json`), one per host: check the journal's hosts, "
                       "device slots, pools and device ids against them too")


def _sched_run(args: argparse.Namespace) -> int:
    from ..scheduler.queueing.cli import main  # the scheduler needs numpy ([scheduler] extra)

    return main(args)


SCHED = Command(
    help="the scheduler's journal: job histories, states and bills",
    description="Read the scheduler journal: every event of one job, each job's current state, "
    "or the metered bill per tenant and device model.",
    add_arguments=_sched_arguments,
    run=_sched_run,
    requires="accel-sdk[scheduler]",
)
