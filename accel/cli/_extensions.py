"""Sub-commands contributed by the optional parts (conformance kit, scheduler).

They are wired here so ``accel --help`` lists them; their modules load only when run.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["add_parsers", "run"]


def add_parsers(sub: Any, selection_args: Callable[[argparse.ArgumentParser], None]) -> None:
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
    sched = sub.add_parser("sched", help="the scheduler's journal: job histories")
    ssub = sched.add_subparsers(dest="sched_command", metavar="SUBCOMMAND", parser_class=type(sched))
    ssub.required = True
    hist = ssub.add_parser("history", help="every state change of one job, from the journal")
    hist.add_argument("job", help="the job id")
    hist.add_argument(
        "--journal", metavar="PATH", help="SQLite journal (default $ACCEL_SCHED_JOURNAL or ./accel-sched.db)"
    )
    hist.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.command == "conformance":
        # Imported by name: the conformance kit is an optional part with its own import cost.
        conformance_cli = importlib.import_module("accel.conformance.cli")
        code: int = conformance_cli.main(args)
        return code
    if args.command == "sched":
        sched_cli = importlib.import_module("accel.scheduler.queueing.cli")
        sched_code: int = sched_cli.main(args)
        return sched_code
    raise AssertionError(args.command)
