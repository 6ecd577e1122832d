"""``accel serve``, ``accel job`` and ``accel bill``: their parsers (argparse only) and entry points.

This module is imported to list the commands (``accel --help``), so it imports nothing heavy:
the service (Starlette, uvicorn, the scheduler) loads in :func:`_serve_run`, the HTTP client
(httpx) in :func:`_job_run` / :func:`_bill_run`.
"""

from __future__ import annotations

import argparse

from accel.cli.commands import Command, CommandContext

__all__ = ["BILL", "JOB", "SERVE", "add_job_arguments"]

DEFAULT_LISTEN = "127.0.0.1:8470"


def _serve_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    parser.add_argument("--state", default=None, metavar="DIR",
                        help="the state directory: journal, service tables, tokens, logs "
                             "(default: $ACCEL_STATE or ./accel-state)")
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"address to serve on (default {DEFAULT_LISTEN}, loopback only)")
    parser.add_argument("--sim", default=None, metavar="PROFILES",
                        help="simulator profiles as hosts (the sim executor): dgx-h100,rtx4090-4")
    parser.add_argument("--executor", action="append", default=[], metavar="NAME",
                        help="an executor to run jobs on (sim, local, slurm; repeat for several clusters; "
                             "default: sim when --sim is given)")
    parser.add_argument("--run-as", default=None, metavar="USER",
                        help="local executor: run jobs as this unprivileged user (when the service runs as root)")
    parser.add_argument("--allow-root", action="store_true",
                        help="local executor: allow running jobs as root (refused unless given)")
    parser.add_argument("--executor-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option for the executors (local: inventory, path, state_dir; true/false are "
                             "booleans; repeatable)")
    parser.add_argument("--time-scale", type=float, default=1.0, metavar="X",
                        help="service seconds per wall second (a sim job of 600 s takes 10 s at 60)")
    parser.add_argument("--price", action="append", default=[], metavar="MODEL=PRICE",
                        help="price per device-hour of a device model, stored in the state (repeatable)")
    parser.add_argument("--env-allow", action="append", default=[], metavar="NAME",
                        help="an environment name jobs may set (NAME, or PREFIX*; repeatable; replaces the "
                             "default allowlist)")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second per token (default 50)")
    parser.add_argument("--burst", type=int, default=100, help="burst per token (default 100)")
    parser.add_argument("--attribution-dir", default=None, metavar="DIR",
                        help="write DIR/<host>.json: which job and tenant hold each device of the host, for "
                             "accel exporter --accel-serve-attribution (nothing else of a job leaves the service)")
    parser.add_argument("--prometheus", default=None, metavar="URL",
                        help="read the job pages' device metrics from this Prometheus (which scrapes accel exporter "
                             "on the job hosts) instead of the service's own samples")
    parser.add_argument("--prometheus-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="the limit of one Prometheus query (default 5)")
    parser.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                        help="a preempted job's grace period, service seconds (default 30)")
    sub = parser.add_subparsers(dest="serve_action", metavar="{token}")
    tok = sub.add_parser("token", help="manage API tokens")
    tsub = tok.add_subparsers(dest="token_action", metavar="{create}", required=True)
    create = tsub.add_parser("create", help="issue a token; prints it alone on stdout")
    create.add_argument("--state", dest="token_state", default=None, metavar="DIR",
                        help="the service's state directory")
    create.add_argument("--tenant", required=True, help="the tenant the token acts for")
    create.add_argument("--admin", action="store_true", help="an admin token (sees and acts on every tenant)")
    create.add_argument("--label", default="", help="a note kept with the token")


def _serve_run(args: argparse.Namespace) -> int:
    from ._server import main

    return main(args)


SERVE = Command(
    help="the job service: submit, quote, run on executors, job pages, bills (accel serve token create)",
    description="Run accel's job service: an HTTP API (OpenAPI at /openapi.json) and web pages over the "
    "queueing scheduler, running jobs on executors (--sim: simulator hosts).  `accel serve token create` "
    "issues API tokens.",
    add_arguments=_serve_arguments,
    run=_serve_run,
    requires="accel-sdk[server]",
)


def _client_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", default=None, help="the service's URL (default $ACCEL_SERVER or "
                                                       f"http://{DEFAULT_LISTEN})")
    parser.add_argument("--token", default=None, help="an API token (default $ACCEL_TOKEN)")
    parser.add_argument("--token-file", default=None, metavar="FILE",
                        help="read the token from FILE (default $ACCEL_TOKEN_FILE)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The job options shared by ``submit`` and ``quote``."""
    parser.add_argument("--name", default=None, help="a name for the job")
    parser.add_argument("--devices", type=int, default=1, help="how many devices (default 1)")
    parser.add_argument("--model", default=None, help="device model (pool), or a part of its name: H100")
    parser.add_argument("--vendor", default=None, help="device vendor: nvidia, amd, ascend...")
    parser.add_argument("--pool", default=None, help="take this pool's quote")
    parser.add_argument("--partition", default=None, metavar="PROFILE",
                        help="hardware partitions (MIG instances...) of this profile instead of whole devices: 1g.10gb")
    parser.add_argument("--share", type=int, default=None, metavar="MILLI",
                        help="a fractional share of one device, in milli-devices (1 to 1000)")
    parser.add_argument("--share-memory", type=int, default=None, metavar="BYTES",
                        help="device memory of the share, bytes")
    parser.add_argument("--topology", default=None,
                        choices=["link_domain", "pcie_switch", "numa", "host", "rack", "switch_group"],
                        help="keep the devices within this level")
    parser.add_argument("--topology-required", action="store_true", help="refuse a looser placement")
    parser.add_argument("--same-host", action="store_true", help="all devices on one host (no gang split)")
    parser.add_argument("--priority-class", default=None, help="the job's priority class")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS", help="expected run time")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS", help="wall-clock limit")
    parser.add_argument("--checkpoint-signal", default=None, metavar="SIG", help="signal that asks it to checkpoint")
    parser.add_argument("--checkpoint-interval", type=float, default=None, metavar="SECONDS",
                        help="it checkpoints every so many seconds")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the job (names on the service's allowlist)")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="a label")
    parser.add_argument("--tenant", default=None, help="admins: act for this tenant")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command, after --")


def _job_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    sub = parser.add_subparsers(dest="job_action", metavar="{submit,quote,ls,show,cancel,logs,serving}",
                                required=True)
    submit = sub.add_parser("submit", help="submit a job: accel job submit --devices 2 --model H100 -- python train.py")
    add_job_arguments(submit)
    _client_arguments(submit)
    quote = sub.add_parser("quote", help="every pool that can take the job: wait, price, expected cost")
    add_job_arguments(quote)
    _client_arguments(quote)
    ls = sub.add_parser("ls", help="list jobs")
    ls.add_argument("--state", default=None, help="only jobs in this state")
    ls.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    _client_arguments(ls)
    for name, text in (("show", "a job's whole record"), ("cancel", "cancel a job")):
        p = sub.add_parser(name, help=text)
        p.add_argument("job_id")
        _client_arguments(p)
    logs = sub.add_parser("logs", help="a job's log")
    logs.add_argument("job_id")
    logs.add_argument("--stream", choices=["stdout", "stderr"], default="stdout")
    logs.add_argument("--tail", type=int, default=None, metavar="N", help="only the last N lines")
    _client_arguments(logs)
    from ._serving_cli import add_serving_arguments

    add_serving_arguments(sub.add_parser("serving", help="serving groups: replica jobs kept at a count, their "
                                         "engines' addresses (accel router --from-serve)"),
                          add_job_arguments, _client_arguments)


def _job_run(args: argparse.Namespace) -> int:
    from ._client import job_main

    return job_main(args)


JOB = Command(
    help="submit, quote, list, show, cancel jobs of an accel serve, and read their logs",
    description="The client of `accel serve`: --server / ACCEL_SERVER and --token / ACCEL_TOKEN; a table by "
    "default, --json for the record.",
    add_arguments=_job_arguments,
    run=_job_run,
    requires="accel-sdk[server]",
)


def _bill_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    _client_arguments(parser)


def _bill_run(args: argparse.Namespace) -> int:
    from ._client import bill_main

    return bill_main(args)


BILL = Command(
    help="the bill of an accel serve: usage per tenant and device model, priced from its price table",
    add_arguments=_bill_arguments,
    run=_bill_run,
    requires="accel-sdk[server]",
)
