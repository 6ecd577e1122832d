"""``accel ray resources``: this node's ``ray start`` resources in Ray's conventions.

``GPU`` devices go to ``--num-gpus`` (Ray's own resource, whose manager sets the visibility
variable); every other resource name (``NPU``, ``MLU``...) to ``--resources``.  The facts come
from each device's binding (see :mod:`accel.integrations.frameworks` and ``docs/frameworks.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser, selection_args: Callable[[argparse.ArgumentParser], None]) -> None:
    sub = p.add_subparsers(dest="ray_action", metavar="ACTION", required=True)
    res = sub.add_parser(
        "resources",
        help="the resources for `ray start` (--num-gpus and --resources) and the variable each needs",
        description="Print this node's accelerators as `ray start` arguments in Ray's conventions "
        "(GPU -> --num-gpus, other names -> --resources), with the visibility variable of each.",
    )
    selection_args(res)  # --sim, --backend, --option, --replay, --json...


def main(args: argparse.Namespace) -> int:
    from ..integrations.frameworks import ray_resources
    from . import EXIT_NO_DEVICES
    from ._commands import _no_devices, _read_code, _session, _warn_problems

    with _session(args) as session:
        inv = session.inventory()
        if not inv.devices and _no_devices(session, inv):
            return EXIT_NO_DEVICES
        _warn_problems(inv)
        res = ray_resources(inv)
        for note in res.notes:
            print(f"accel: note: {note}", file=sys.stderr)
        if args.json:
            doc = {**res.as_dict(), "problems": [p.model_dump(mode="json") for p in inv.problems],
                   "complete": inv.complete}
            print(json.dumps(doc, indent=2))
            return _read_code(inv)
        if res.num_gpus:
            gpu_env = res.env.get("GPU")
            print(f"--num-gpus={res.num_gpus}    (Ray's GPU resource; the devices' visibility variable: {gpu_env})")
        if res.resources:
            print(f"--resources='{json.dumps(res.resources, sort_keys=True)}'")
            for name, count in res.resources.items():
                print(f"    {name}: {count}    (visibility variable {res.env.get(name)})")
        print(res.command())
        return _read_code(inv)
