"""A small argparse front end, for ``accel conformance``, ``python -m accel.conformance`` and the
matrix command.  argparse only at import: the kit (and pytest) loads when a command runs, so
``accel conformance --help`` works without the [conformance] extra."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from accel.errors import AccelError

__all__ = ["add_arguments", "main", "matrix_main", "run_parsed"]


def _kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="accel conformance", description="Run and report the accel conformance kit.")
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``run``, ``report`` and ``matrix`` sub-commands (sets ``conformance_command``)."""
    sub = p.add_subparsers(dest="conformance_command", metavar="ACTION", required=True)
    r = sub.add_parser("run", help="run the kit against one backend")
    r.add_argument("--backend", required=True, help="accel.backends entry-point name")
    r.add_argument("--report", metavar="DIR", help="write the run directory (matrix.md/json/html...) here")
    r.add_argument("--option", action="append", type=_kv, default=[], metavar="KEY=VALUE",
                   help="BackendConfig.options entry (repeatable)")
    r.add_argument("--scenario", help="one of the plugin's CONFORMANCE_SCENARIOS")
    r.add_argument("--certify", action="store_true", help="fail on any required row that did not pass; write a bundle")
    r.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    m = sub.add_parser("report", help="merge run directories into one matrix")
    m.add_argument("runs", nargs="+", metavar="RUN_DIR")
    m.add_argument("--out", required=True, metavar="DIR")
    a = sub.add_parser("matrix", help="run every shipped scenario of every backend and write the matrix")
    _matrix_args(a)


def _matrix_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all", action="store_true", help="every installed backend with scenarios (the default)")
    p.add_argument("--backend", action="append", default=[], help="only these backends (repeatable)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--keep-results", action="store_true", help="also write results.json and junit.xml")


def _matrix(ns: argparse.Namespace) -> int:
    from ._api import run_all

    result = run_all(ns.out, backends=ns.backend or None, keep_results=ns.keep_results)
    for kind, path in result.matrix.items():
        print(f"wrote {kind}: {path}")
    if not result.passed:
        print(result.output[-4000:], file=sys.stderr)
    return result.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    return run_parsed(_parser().parse_args(argv))


def run_parsed(ns: argparse.Namespace) -> int:
    """Run the sub-command :func:`add_arguments` parsed; returns the exit status."""
    from ._api import report, run

    try:
        if ns.conformance_command == "run":
            result = run(ns.backend, report=ns.report, options=dict(ns.option), scenario=ns.scenario,
                         certify=ns.certify, pytest_args=ns.pytest_args, echo=True)
            return result.exit_code
        if ns.conformance_command == "report":
            for kind, path in report(ns.runs, ns.out).items():
                print(f"wrote {kind}: {path}")
            return 0
        return _matrix(ns)
    except AccelError as exc:
        print(f"accel conformance: {exc}", file=sys.stderr)
        return 2


def matrix_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m accel.conformance.matrix",
                                description="Run the kit on every shipped scenario and write the combined matrix.")
    _matrix_args(p)
    ns = p.parse_args(argv)
    try:
        return _matrix(ns)
    except AccelError as exc:
        print(f"accel conformance matrix: {exc}", file=sys.stderr)
        return 2
