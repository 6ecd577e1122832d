"""``accel slurm ...`` (:mod:`accel.integrations.slurm`): loaded by the ``slurm`` command only when run."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..integrations.slurm._gres import GRES_NAME, GresConf, check, generate, parse_gres_conf
from ..integrations.slurm._health import bad_devices, decide_and_act
from ..integrations.slurm._prolog import allocated, task_prolog_lines
from ..model import HostInventory
from ..tools import Runner, SubprocessRunner, ToolResult

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_UNHEALTHY, EXIT_PARTIAL = 0, 1, 4, 5


def _inventory(args: argparse.Namespace) -> HostInventory:
    from ._commands import _session, _warn_problems

    with _session(args) as session:
        inv = session.inventory()
    _warn_problems(inv)
    return inv


def _conf(args: argparse.Namespace, inv: HostInventory) -> GresConf:
    tpc = getattr(args, "threads_per_core", 1)
    shards = getattr(args, "shards", 0)
    return generate(inv, dev_root=args.dev_root, threads_per_core=tpc, shards_per_device=shards)


def _warn(conf: GresConf) -> None:
    from ._partial import problem_line

    for p in conf.problems:
        print(problem_line(p), file=sys.stderr)


def _check_numbers(args: argparse.Namespace) -> None:
    """Numeric options are checked before anything runs (the CLI's rule)."""
    if getattr(args, "threads_per_core", 1) < 1:
        raise ConfigError(f"--threads-per-core must be >= 1, got {args.threads_per_core}")
    if getattr(args, "shards", 0) < 0:
        raise ConfigError(f"--shards must be >= 0 per device, got {args.shards}")


def cmd_gres_conf(args: argparse.Namespace) -> int:
    _check_numbers(args)
    inv = _inventory(args)
    conf = _conf(args, inv)
    _warn(conf)
    if args.check:
        try:
            text = Path(args.check).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--check: cannot read {args.check!r}: {exc.strerror or exc}") from exc
        diffs = check(text, conf)
        for d in diffs:
            print(f"{args.check}: {d}")
        if not diffs:
            print(f"{args.check}: matches the hardware ({len(conf.records)} gpu records)")
        return EXIT_ERROR if diffs else (EXIT_PARTIAL if conf.problems else EXIT_OK)
    if args.json:
        from . import dump

        print(
            dump(
                {
                    "records": [r.__dict__ for r in conf.records],
                    "node_gres": conf.node_gres(),
                    "problems": [p.model_dump(mode="json") for p in conf.problems],
                }
            )
        )
    else:
        sys.stdout.write(conf.render())
        print(f"# slurm.conf: {conf.gres_types()}")
        print(f"# slurm.conf: NodeName={conf.node} {conf.node_gres()}")
    return EXIT_PARTIAL if conf.problems or not inv.complete else EXIT_OK


def _prolog_conf(args: argparse.Namespace, inv: HostInventory) -> GresConf:
    conf = _conf(args, inv)
    if not args.gres_conf:
        return conf
    try:
        text = Path(args.gres_conf).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--gres-conf: cannot read {args.gres_conf!r}: {exc.strerror or exc}") from exc
    by_file = {r.file: r for r in conf.records}
    records = []
    for p in parse_gres_conf(text):
        if p.fields.get("name", "").lower() != GRES_NAME:
            continue
        rec = by_file.get(p.fields.get("file", ""))
        if rec is None:
            raise ConfigError(f"{args.gres_conf} line {p.line}: {p.fields.get('file')!r} is no device here")
        records.append(rec)
    return GresConf(node=conf.node, records=tuple(records))


def cmd_task_prolog(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    _check_numbers(args)
    inv = _inventory(args)
    conf = _prolog_conf(args, inv)
    records = allocated(os.environ if env is None else env, conf, if_absent=args.if_absent)
    for line in task_prolog_lines(records, conf):
        print(line)
    return EXIT_OK


def cmd_prolog(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    """A job Prolog: the job's devices (``SLURM_JOB_GPUS``) must not be lost or unhealthy.

    Slurm's Prolog cannot set the tasks' environment (that is the TaskProlog's job); what it
    can do is refuse the job: a non-zero exit drains the node and requeues the job, so a job is
    never started on a device that fell off the bus since the last health check.
    """
    _check_numbers(args)
    inv = _inventory(args)
    conf = _prolog_conf(args, inv)
    records = allocated(os.environ if env is None else env, conf, if_absent="hide")
    given = {r.device_id for r in records or ()}
    bad = bad_devices(inv, only=given)
    for dev, cond in bad:
        print(f"accel: job's device {dev}: {cond}", file=sys.stderr)
    return EXIT_ERROR if bad else EXIT_OK


class _DryRunner:
    """Runs ``scontrol show``; prints ``scontrol update`` instead of running it."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner

    def run(self, argv: Sequence[str], **kw: Any) -> ToolResult:
        if len(argv) > 1 and argv[1] == "update":
            print("would run: " + " ".join(argv))
            return ToolResult(tuple(argv), "", "", 0, 0.0)
        return self.inner.run(argv, **kw)

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        return self.inner.which(name, search_path)


def cmd_healthcheck(args: argparse.Namespace, runner: Runner | None = None) -> int:
    inv = _inventory(args)
    node = args.node or socket.gethostname().split(".", 1)[0]
    real: Runner = runner if runner is not None else SubprocessRunner()
    used: Any = _DryRunner(real) if args.dry_run else real
    slurm_conf = args.slurm_conf or os.environ.get("SLURM_CONF")
    decision = decide_and_act(inv, node, used, resume=args.resume, slurm_conf=slurm_conf)
    for dev, cond in decision.bad:
        print(f"accel: {node}: {dev}: {cond}", file=sys.stderr)
    if decision.action != "none":
        print(f"{decision.action} {node}: {decision.reason}")
    # As `accel health`: a bad device (4) matters more than a partial read (5).  slurmd does not
    # act on this status (the check drains through scontrol itself); it is for the person.
    if decision.bad:
        return EXIT_UNHEALTHY
    return EXIT_OK if inv.complete else EXIT_PARTIAL


def main(args: argparse.Namespace) -> int:
    action = args.slurm_action
    if action == "gres-conf":
        return cmd_gres_conf(args)
    if action == "task-prolog":
        return cmd_task_prolog(args)
    if action == "prolog":
        return cmd_prolog(args)
    if action == "healthcheck":
        return cmd_healthcheck(args)
    raise AssertionError(action)
