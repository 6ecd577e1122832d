"""The ``accel`` argument parser (loaded by :func:`accel.cli.main` inside its interrupt guard)."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from . import _registry, _smi
from ._options import check_numeric_options, number, text

__all__ = ["CORE_COMMANDS", "UsageError", "build_parser"]

#: The commands of the parser itself; every other one comes from the ``accel.commands``
#: entry-point group (:mod:`accel.cli.commands`), accel's own included.
CORE_COMMANDS = frozenset({"ls", "topo", "health", "ps", "plugins", "show", "watch", "dmon", "bugreport",
                           "schema", "sim"})

#: Seconds: the longest tool timeout and refresh interval accepted (one day).
MAX_SECONDS = 86400.0

_TIMEOUT = number(unit="seconds", minimum=0, min_inclusive=False, maximum=MAX_SECONDS)
_INTERVAL = number(unit="seconds", minimum=0, maximum=MAX_SECONDS)
_COUNT = number(integer=True, unit="refreshes", minimum=0, maximum=10**9, note="0: until interrupted")
_MAX_BYTES = number(integer=True, unit="bytes", minimum=0, min_inclusive=False, maximum=2**40)


class UsageError(Exception):
    """A bad command line: ``main`` prints it as one ``accel: error:`` line and exits 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other usage error
        raise UsageError(message)


def _selection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("backend selection")
    g.add_argument("--sim", metavar="PROFILE", type=text("a profile name (see `accel sim profiles`)"),
                   help="use the simulator with this profile (see `accel sim profiles`)")
    g.add_argument("--backend", "-b", action="append", metavar="NAME", type=text("a backend name"),
                   help="only this backend (repeatable)")
    g.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a backend option, e.g. scenario=h100-nvswitch-8 or faults=device_lost:3 (repeatable)",
    )
    g.add_argument("--replay", metavar="DIR", type=text("a directory"),
                   help="answer vendor tools from recorded runs in DIR")
    g.add_argument("--sysfs", metavar="DIR", type=text("a directory"),
                   help="read PCI/NUMA facts from this sysfs root instead of /sys")
    g.add_argument("--timeout", type=_TIMEOUT, default=10.0, metavar="S",
                   help=f"vendor tool timeout in seconds, > 0 and <= {MAX_SECONDS:g} (default 10)")
    p.add_argument("--json", action="store_true", help="print the model as JSON")


def _query_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query", "--query-gpu", dest="query", metavar="FIELD[,FIELD...]", type=text("a field list"),
                   help="print these fields as CSV: the model's names (memory_total_bytes) in SI base units, or "
                   "nvidia-smi's (memory.total) in nvidia-smi's units and header (memory.total [MiB]); "
                   "[N/A] when not read")
    p.add_argument("--format", dest="query_format", metavar="csv[,noheader][,nounits]", default="csv",
                   type=text("a format"), help="the --query output format (default csv)")


def _id_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--id", "-i", dest="ids", metavar="DEVICE[,DEVICE...]", type=text("a device list"),
        help="only these devices, as with nvidia-smi -i: list positions, ids, UUIDs or PCI bus ids, comma-separated",
    )


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``accel`` parser.

    ``argv`` is the command line it is for: only that command's parser is built (``accel ls``
    reads no ``accel.commands`` entry point; ``accel sched ...`` loads only ``sched``).  Without
    it every command is built in full (the CLI reference, tests that walk every option).
    """
    parser = _Parser(
        prog="accel",
        description="One device model for every AI accelerator vendor.",
        epilog="Commands of other installed packages plug in through the accel.commands entry-point group "
        "(see accel.cli.commands). `accel COMMAND --help` shows a command's options.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"accel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, helptext in [
        ("ls", "list devices with memory and health"),
        ("topo", "topology matrix (like nvidia-smi topo -m) and link domains"),
        ("health", "health state and conditions of every device"),
        ("ps", "processes on every device: pid, name, device memory"),
        ("plugins", "the discovery report: present, absent, failed, rejected"),
    ]:
        cmd = sub.add_parser(name, help=helptext, description=helptext)
        if name != "plugins":
            _id_arg(cmd)
        if name == "ls":
            _query_args(cmd)
            _smi.add_ls_options(cmd)
        if name == "ps":
            _smi.add_ps_options(cmd)
        if name == "health":
            cmd.add_argument("--leak-history", metavar="FILE", type=text("a file path"),
                             help="keep used-memory history in this SQLite file across runs and report "
                                  "MemoryLeakSuspected (run it every minute or so, from cron or a health check)")
        _selection_args(cmd)
    show = sub.add_parser("show", help="everything about one device", description="everything about one device")
    show.add_argument("device", nargs="?", type=text("a device id, uuid, PCI bus id or list position"),
                      help="device id, uuid, PCI bus id or list position (or -i)")
    show.add_argument("--id", "-i", dest="show_id", metavar="DEVICE", type=text("a device"),
                      help="the device, as with nvidia-smi -i (instead of the positional argument)")
    _selection_args(show)
    watch = sub.add_parser("watch", help="refreshing telemetry view", description="refreshing telemetry view")
    watch.add_argument("--count", type=_COUNT, default=0, metavar="N",
                       help="stop after N refreshes (0, the default: until interrupted)")
    watch.add_argument("--interval", type=_INTERVAL, default=1.0, metavar="S",
                       help=f"seconds between refreshes, 0 to {MAX_SECONDS:g} (default 1)")
    _id_arg(watch)
    _query_args(watch)
    _selection_args(watch)
    dmon = sub.add_parser("dmon", help="one row per device per interval (like nvidia-smi dmon)",
                          description="one row per device per interval, with a timestamp (like nvidia-smi dmon)")
    dmon.add_argument("-s", dest="groups", default="pum", metavar="GROUPS", type=text("field groups"),
                      help="field groups: p power/temp, u utilization, c clocks, m memory, e ECC (default pum)")
    dmon.add_argument("-c", "--count", type=_COUNT, default=0, metavar="N",
                      help="stop after N samples (0, the default: until interrupted)")
    dmon.add_argument("-d", "--interval", type=_INTERVAL, default=1.0, metavar="S",
                      help=f"seconds between samples, 0 to {MAX_SECONDS:g} (default 1)")
    _id_arg(dmon)
    _selection_args(dmon)
    bug = sub.add_parser(
        "bugreport", help="record every vendor tool run into a bundle `accel ls --replay` replays",
        description="record every vendor tool run of the present backends (argv, exit status, stdout, stderr; no "
        "environment) and the inventory into a new directory, size-capped and written atomically: attach it "
        "when a device misparses",
    )
    bug.add_argument("--out", required=True, metavar="DIR", type=text("a directory"),
                     help="the bundle directory to create (must not exist)")
    bug.add_argument("--max-bytes", type=_MAX_BYTES, default=64 * 1024 * 1024, metavar="N",
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

    assert set(sub.choices) == CORE_COMMANDS, sorted(set(sub.choices) ^ CORE_COMMANDS)
    _registry.add_commands(sub, _selection_args, argv, CORE_COMMANDS)
    check_numeric_options(parser)  # the floor for what the other commands add
    return parser


def parse(argv: list[str]) -> Any:
    """Parse ``argv``; a bad command line raises :class:`UsageError` (one line)."""
    return build_parser(argv).parse_args(argv)
