"""``accel job serving ...``: serving groups of an ``accel serve`` (create, ls, show, scale, cancel).

The parser (:func:`add_serving_arguments`) is argparse only (imported to list the commands); the
client side (:func:`serving_main`) runs over :class:`~._client.ServiceClient`'s HTTP client.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_serving_arguments", "serving_main"]


def add_serving_arguments(parser: argparse.ArgumentParser, add_job: Any, add_client: Any) -> None:
    """``serving``'s subcommands under ``accel job`` (``add_job`` / ``add_client``: the job and client options)."""
    sub = parser.add_subparsers(dest="serving_action", metavar="{create,ls,show,scale,cancel}", required=True)
    create = sub.add_parser("create", help="a serving group --name NAME: its replica jobs kept at --replicas (under "
                            "accel serve --sim each running replica is a fake vLLM engine on a loopback port; under "
                            "local / slurm give the engine's command after --, with {port} where its port goes: "
                            "-- vllm serve MODEL --port {port})")
    create.add_argument("--replicas", type=int, default=1, help="replicas wanted (default 1, at most 64)")
    create.add_argument("--engine-model", default=None, help="the model name the engines serve (default llama-2-70b)")
    create.add_argument("--engine-time-scale", type=float, default=None,
                        help="the fake engines' speed-up over the cost model (default 1)")
    create.add_argument("--engine-cost-model", default=None, help="the cost profile's model (default llama-2-70b)")
    create.add_argument("--engine-cost-device", default=None, help="the cost profile's device (default h100-80gb)")
    create.add_argument("--engine-max-num-seqs", type=int, default=None, help="requests an engine runs at once")
    create.add_argument("--engine-kv-events", action=argparse.BooleanOptionalAction, default=None,
                        help="the replicas publish vLLM KV events (--sim: on by default; an engine command: declares "
                        "{kv_port} / ACCEL_REPLICA_KV_PORT for vLLM's --kv-events-config)")
    create.add_argument("--engine-ready-timeout", type=float, default=None, metavar="SECONDS",
                        help="an engine command: seconds until its health check first answers 200 (default 600)")
    create.add_argument("--engine-health-path", default=None, metavar="PATH",
                        help="an engine command: the health check's path (default /health, as vLLM's)")
    add_job(create)
    add_client(create)
    ls = sub.add_parser("ls", help="your serving groups")
    add_client(ls)
    for name, text in (("show", "a group and its replicas' addresses"), ("cancel", "cancel every replica")):
        p = sub.add_parser(name, help=text)
        p.add_argument("serving_name", metavar="NAME")
        add_client(p)
    scale = sub.add_parser("scale", help="set the replica count")
    scale.add_argument("serving_name", metavar="NAME")
    scale.add_argument("replicas", type=int, metavar="REPLICAS")
    add_client(scale)


def _body(args: argparse.Namespace) -> dict[str, Any]:
    from accel.errors import ConfigError

    from ._client import request_body

    body = request_body(args)
    if not body["command"]:
        del body["command"]  # --sim: the fake engine's; a real executor's service asks for one
    if "checkpoint" in body:
        raise ConfigError("accel job serving create: replicas do not checkpoint")
    if not args.name:
        raise ConfigError("accel job serving create: name the group: --name NAME")
    body["replicas"] = args.replicas
    engine = {k: v for k, v in (("model", args.engine_model), ("time_scale", args.engine_time_scale),
                                ("cost_model", args.engine_cost_model), ("cost_device", args.engine_cost_device),
                                ("max_num_seqs", args.engine_max_num_seqs), ("kv_events", args.engine_kv_events),
                                ("ready_timeout_s", args.engine_ready_timeout),
                                ("health_path", args.engine_health_path)) if v is not None}
    if engine:
        body["engine"] = engine
    return body


def _engine_line(view: dict[str, Any]) -> str:
    e = view["engine"]
    if e.get("mode") == "command":
        command = " ".join(view["request"].get("command", []))
        kv = ", KV events on {kv_port}" if e.get("kv_events") else ""
        return f"  engine: {command} (health {e['health_path']}, ready within {e['ready_timeout_s']:g} s{kv})"
    return (f"  engine: {e['model']} ({e['cost_model']} on {e['cost_device']}, time scale {e['time_scale']:g}"
            + (", KV events" if e.get("kv_events") else "") + ")")


def describe(view: dict[str, Any]) -> str:
    lines = [f"serving {view['name']} ({view['id']}), tenant {view['tenant']}: {view['state']}"
             + (f" ({view['reason']})" if view.get("reason") else ""),
             f"  replicas: {view['replicas_ready']} ready of {view['replicas_wanted']} wanted"
             f" ({view['replicas_ended']} ended)",
             _engine_line(view)]
    for r in view["replicas"]:
        kv = f"  KV events {r['kv_events']}" if r.get("kv_events") else ""
        lines.append(f"  r{r['index']}  {r['job']}  {r['state']:<10} {r['address'] or '-'}{kv}")
    return "\n".join(lines)


def serving_main(args: argparse.Namespace, client: Any, out: Any) -> int:
    action = args.serving_action
    if action == "ls":
        views = client.serving_list()
        if args.json:
            out(json.dumps(views, indent=2))
        else:
            out("\n".join(describe(v) for v in views) or "no serving groups")
        return 0
    if action == "create":
        view = client.serving_create(_body(args))
    elif action == "show":
        view = client.serving_show(args.serving_name)
    elif action == "scale":
        view = client.serving_scale(args.serving_name, args.replicas)
    else:
        view = client.serving_cancel(args.serving_name)
    out(json.dumps(view, indent=2) if args.json else describe(view))
    return 0
