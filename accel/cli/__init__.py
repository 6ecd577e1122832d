"""The ``accel`` command.

Exit codes (stable, for scripts):

====  ==========================================================================
0     success
1     an accel error at run time (a backend failed, a device is lost, a tool hung)
2     bad usage or configuration (unknown backend, bad option, malformed profile)
3     no accelerator found (no backend present; try ``--sim <profile>``)
4     ``accel health``: at least one device is not known to be healthy (unhealthy,
      degraded, lost, or ``unknown``: nothing was read that says it is healthy)
5     partial read: ``ls``, ``show``, ``topo``, ``health`` printed what could be read, but
      something could not (a record that failed to parse, a failed command, a backend that
      failed); one ``accel: warning:`` line per problem is on stderr, and ``--json`` carries
      them (``HostInventory.problems``)
130   interrupted
====  ==========================================================================

``health`` exits 4 before 5: a device that is not known healthy matters more than a partial
read.  Every command takes ``--json`` and then prints the model (``HostInventory``,
``Device``...) instead of a table; ``health --json`` prints ``{"devices": {id: Health},
"problems": [Problem], "complete": bool}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import AccelError, ConfigError, ProfileError, ValidationError

__all__ = ["EXIT_ERROR", "EXIT_NO_DEVICES", "EXIT_OK", "EXIT_PARTIAL", "EXIT_UNHEALTHY", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_DEVICES = 3
EXIT_UNHEALTHY = 4
EXIT_PARTIAL = 5


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other usage error
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _selection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("backend selection")
    g.add_argument("--sim", metavar="PROFILE", help="use the simulator with this profile (see `accel sim profiles`)")
    g.add_argument("--backend", "-b", action="append", metavar="NAME", help="only this backend (repeatable)")
    g.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a backend option, e.g. scenario=h100-nvswitch-8 or faults=device_lost:3 (repeatable)",
    )
    g.add_argument("--replay", metavar="DIR", help="answer vendor tools from recorded runs in DIR")
    g.add_argument("--sysfs", metavar="DIR", help="read PCI/NUMA facts from this sysfs root instead of /sys")
    g.add_argument("--timeout", type=float, default=10.0, metavar="S", help="vendor tool timeout (default 10 s)")
    p.add_argument("--json", action="store_true", help="print the model as JSON")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``accel`` parser; ``argv`` lets optional parts skip their imports when not asked for."""
    parser = _Parser(prog="accel", description="One device model for every AI accelerator vendor.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"accel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, helptext in [
        ("ls", "list devices with memory and health"),
        ("topo", "topology matrix (like nvidia-smi topo -m) and link domains"),
        ("health", "health state and conditions of every device"),
        ("plugins", "the discovery report: present, absent, failed, rejected"),
    ]:
        _selection_args(sub.add_parser(name, help=helptext, description=helptext))
    show = sub.add_parser("show", help="everything about one device", description="everything about one device")
    show.add_argument("device", help="device id, uuid, PCI bus id or list position")
    _selection_args(show)
    watch = sub.add_parser("watch", help="refreshing telemetry view", description="refreshing telemetry view")
    watch.add_argument("--count", type=int, default=0, help="stop after N refreshes (0: until interrupted)")
    watch.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes")
    _selection_args(watch)
    dra = sub.add_parser(
        "dra", help="the inventory as Kubernetes DRA ResourceSlices (resource.k8s.io/v1)",
        description="the inventory as Kubernetes DRA ResourceSlices (resource.k8s.io/v1), as JSON",
    )
    dra.add_argument("--domain", default="accel.dev", help="attribute domain; drivers are <vendor>.<domain>")
    dra.add_argument("--node", help="node name (default: the hostname in the inventory)")
    _selection_args(dra)
    bug = sub.add_parser(
        "bugreport", help="record every vendor tool run into a bundle `accel ls --replay` replays",
        description="record every vendor tool run of the present backends (argv, exit status, stdout, stderr; no "
        "environment) and the inventory into a new directory, size-capped and written atomically: attach it "
        "when a device misparses",
    )
    bug.add_argument("--out", required=True, metavar="DIR", help="the bundle directory to create (must not exist)")
    bug.add_argument("--max-bytes", type=int, default=64 * 1024 * 1024, metavar="N",
                     help="refuse to write a bundle larger than N bytes (default 64 MiB)")
    _selection_args(bug)
    schema = sub.add_parser("schema", help="print the versioned JSON Schema of the model")
    schema.add_argument("--kind", choices=["inventory", "telemetry"], default="inventory")
    schema.add_argument("--json", action="store_true", help="accepted for symmetry; the schema is JSON")
    sim = sub.add_parser("sim", help="simulator utilities")
    simsub = sim.add_subparsers(dest="sim_command", metavar="SUBCOMMAND", parser_class=_Parser)
    simsub.required = True
    prof = simsub.add_parser("profiles", help="list the built-in simulator profiles")
    prof.add_argument("--json", action="store_true")
    from . import _extensions

    _extensions.add_parsers(sub, _selection_args, argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``accel`` console script; returns the exit code."""
    arglist = list(argv) if argv is not None else sys.argv[1:]
    parser = build_parser(arglist)
    try:
        args = parser.parse_args(arglist)
    except _UsageError as exc:
        print(f"accel: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from . import _commands

    try:
        code: int = _commands.dispatch(args)
        return code
    except (ConfigError, ProfileError, ValidationError) as exc:
        print(f"accel: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except AccelError as exc:
        print(f"accel: error: {exc} [{exc.code}]", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug, not bad input: one line, the traceback on request
        if os.environ.get("ACCEL_DEBUG"):
            raise
        hint = "(ACCEL_DEBUG=1 shows the traceback)"
        print(f"accel: internal error: {type(exc).__name__}: {exc} {hint}", file=sys.stderr)
        return EXIT_ERROR


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str)
