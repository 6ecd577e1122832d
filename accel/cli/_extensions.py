"""Sub-commands contributed by the optional parts (conformance kit, scheduler).

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
    conf = sub.add_parser("conformance", help="run the conformance kit and build its matrix")
    csub = conf.add_subparsers(dest="conformance_command", metavar="SUBCOMMAND", parser_class=type(conf))
    csub.required = True
    run_p = csub.add_parser("run", help="run the kit against one backend")
    run_p.add_argument("--report", metavar="DIR", help="write matrix.md, matrix.json and matrix.html here")
    run_p.add_argument("--certify", action="store_true", help="fail on any skipped required row; write a bundle")
    selection_args(run_p)
    rep = csub.add_parser("report", help="merge several runs into one matrix")
    rep.add_argument("runs", nargs="+", metavar="RUN_DIR")
    rep.add_argument("--out", required=True, metavar="DIR")
    rep.add_argument("--json", action="store_true")
    sched = sub.add_parser("sched", help="the scheduler's journal: job histories, states and bills")
    if argv is not None and "sched" not in argv:
        # The scheduler loads numpy (~150 ms): only when this command line is about it.
        sched.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        return
    try:
        sched_cli = importlib.import_module("accel.scheduler.queueing.cli")
    except ImportError:  # the scheduler needs numpy ([scheduler] extra)
        sched.set_defaults(sched_missing=True)
        return
    sched_cli.add_arguments(sched)


def run(args: argparse.Namespace) -> int:
    if args.command == "conformance":
        # Imported by name: the conformance kit is an optional part with its own import cost.
        conformance_cli = importlib.import_module("accel.conformance.cli")
        code: int = conformance_cli.main(args)
        return code
    if args.command == "sched":
        if getattr(args, "sched_missing", False):
            from ..errors import ConfigError

            raise ConfigError("accel sched needs the scheduler's dependencies: pip install 'accel-sdk[scheduler]'")
        sched_cli = importlib.import_module("accel.scheduler.queueing.cli")
        sched_code: int = sched_cli.main(args)
        return sched_code
    raise AssertionError(args.command)
