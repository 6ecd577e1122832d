"""Sub-commands contributed by the optional parts (conformance kit, scheduler, exporter, slurm, ray, k8s).

They are wired here so ``accel --help`` lists them; their modules load only when run.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["add_parsers", "run"]


def add_parsers(
    sub: Any, selection_args: Callable[[argparse.ArgumentParser], None], argv: list[str] | None = None
) -> None:
    conf = sub.add_parser(
        "conformance",
        help="run the conformance kit and build its matrix (run | report | matrix; see `accel conformance -h`)",
        add_help=False,
    )
    # The kit owns its command line (accel.conformance.main); everything after the word is its.
    conf.add_argument("rest", nargs=argparse.REMAINDER)
    exporter = sub.add_parser(
        "exporter",
        help="serve Prometheus metrics of every backend (`accel exporter rules`: the alerting rules)",
        description="Serve one snapshot of every backend per scrape as Prometheus metrics (loopback by default), "
        "or print the alerting and recording rules with `accel exporter rules`.",
    )
    _exporter_arguments(exporter)
    selection_args(exporter)
    ray = sub.add_parser("ray", help="Ray integration: `accel ray resources` prints this node's `ray start` resources")
    from ._ray import add_arguments as ray_arguments

    ray_arguments(ray, selection_args)
    slurm = sub.add_parser(
        "slurm",
        help="Slurm from the device model: gres-conf | task-prolog | healthcheck (see docs/slurm.md)",
        description="gres.conf for every vendor, a TaskProlog that sets each vendor's own visibility "
        "variable, and a HealthCheckProgram that drains the node when a device is lost or unhealthy.",
    )
    from ..integrations.slurm._args import add_arguments as slurm_arguments

    slurm_arguments(slurm, selection_args)
    k8s = sub.add_parser("k8s", help="Kubernetes services (`accel k8s extender`: a kube-scheduler extender; "
                          "`accel k8s kubelet-plugin`: a DRA kubelet plugin)")
    k8s_sub = k8s.add_subparsers(dest="k8s_command", metavar="SUBCOMMAND")
    k8s_sub.required = True
    extender = k8s_sub.add_parser(
        "extender",
        help="serve kube-scheduler's extender protocol (filter, prioritize, bind) on accel.scheduler placement",
        description="A kube-scheduler extender backed by accel.scheduler (loopback by default); "
        "see docs/kubernetes-extender.md.",
    )
    from ..integrations.k8s._extender_args import add_arguments as _extender_arguments

    _extender_arguments(extender)
    kubelet = k8s_sub.add_parser(
        "kubelet-plugin",
        help="serve the kubelet's DRA plugin protocol: prepare claims as CDI specs, publish ResourceSlices",
        description="A DRA kubelet plugin for one accel driver: registration and DRA gRPC (v1, v1beta1) on "
        "unix sockets, a CDI spec per prepared claim, a checkpoint, and this node's ResourceSlices kept current "
        "through the Kubernetes API; see docs/kubernetes.md.",
    )
    from ..integrations.k8s._kubelet_args import add_arguments as _kubelet_arguments

    _kubelet_arguments(kubelet)
    _seconds_options(kubelet, ("api_timeout", "poll_interval"))
    selection_args(kubelet)
    sched = sub.add_parser("sched", help="the scheduler's journal: job histories, states and bills")
    if argv is not None and "sched" not in argv:
        # The scheduler loads numpy (~150 ms): only when this command line is about it.
        sched.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        return
    try:
        sched_cli = importlib.import_module("accel.scheduler.queueing.cli")
    except ImportError:  # the scheduler needs numpy ([scheduler] extra)
        sched.set_defaults(sched_missing=True)
        sched.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        return
    sched_cli.add_arguments(sched)
    _check_sched_options(sched)


def _check_sched_options(sched: argparse.ArgumentParser) -> None:
    """Give ``sched bill --at`` its range: journal time is seconds from the journal's start."""
    from ._options import number

    at = number(unit="seconds of journal time", minimum=0)
    for action in sched._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for opt in sub._actions:
                    if "--at" in opt.option_strings:
                        opt.type = at


def _seconds_options(p: argparse.ArgumentParser, dests: tuple[str, ...]) -> None:
    """Give these options the CLI's number type (finite seconds > 0, at most a day; one-line errors)."""
    from ._options import number

    seconds = number(unit="seconds", minimum=0, min_inclusive=False, maximum=86400)
    for opt in p._actions:
        if opt.dest in dests:
            opt.type = seconds


def _exporter_arguments(p: argparse.ArgumentParser) -> None:
    # Only argparse here: the exporter (and prometheus_client) load when the command runs.
    from ..exporter._args import add_arguments

    add_arguments(p)


def run(args: argparse.Namespace) -> int:
    if args.command == "exporter":
        from ..exporter._server import main as exporter_main
        from ._commands import _configs

        selection = _configs(args) if args.action == "serve" else None
        exporter_code: int = exporter_main(args, selection)
        return exporter_code
    if args.command == "slurm":
        from ._slurm import main as slurm_main

        slurm_code: int = slurm_main(args)
        return slurm_code
    if args.command == "k8s" and args.k8s_command == "extender":
        try:  # the extender runs accel.scheduler, which needs numpy ([scheduler] extra)
            ext = importlib.import_module("accel.integrations.k8s._extender")
        except ImportError as exc:
            from ..errors import ConfigError

            raise ConfigError(f"accel k8s extender needs the scheduler's dependencies ({exc}): "
                              "pip install 'accel-sdk[scheduler]'") from exc
        ext_code: int = ext.main(args)
        return ext_code
    if args.command == "k8s" and args.k8s_command == "kubelet-plugin":
        from ._kubelet import main as kubelet_main

        kubelet_code: int = kubelet_main(args)
        return kubelet_code
    if args.command == "conformance":
        # Imported by name: the conformance kit pulls in pytest, which `accel ls` should not pay for.
        try:
            kit = importlib.import_module("accel.conformance")
        except ImportError as exc:
            from ..errors import ConfigError

            raise ConfigError(
                f"accel conformance needs pytest ({exc}): pip install 'accel-sdk[conformance]'"
            ) from exc
        code: int = kit.main(list(args.rest) or ["--help"])
        return code
    if args.command == "ray":
        from ._ray import main as ray_main

        ray_code: int = ray_main(args)
        return ray_code
    if args.command == "sched":
        if getattr(args, "sched_missing", False):
            from ..errors import ConfigError

            raise ConfigError("accel sched needs the scheduler's dependencies: pip install 'accel-sdk[scheduler]'")
        sched_cli = importlib.import_module("accel.scheduler.queueing.cli")
        sched_code: int = sched_cli.main(args)
        return sched_code
    raise AssertionError(args.command)
