"""``accel router`` and ``accel router fake-engine``: their parsers (argparse only) and entry point.

Imported to list the commands (``accel --help``), so it imports nothing heavy: Starlette, uvicorn,
httpx, pyzmq and the scheduler load in :func:`_run`.
"""

from __future__ import annotations

import argparse

from accel.cli.commands import Command, CommandContext

__all__ = ["ROUTER"]

DEFAULT_LISTEN = "127.0.0.1:8480"
POLICIES = ("round-robin", "least-outstanding", "consistent-hash", "cache-aware")


def _cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cost-model", default="llama-2-70b", help="the cost profile's model in scheduler.serving's "
                        "data (default llama-2-70b)")
    parser.add_argument("--cost-device", default="h100-80gb", help="the cost profile's device (default h100-80gb)")


def _router_arguments(parser: argparse.ArgumentParser, context: CommandContext) -> None:
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"address to serve on (default {DEFAULT_LISTEN})")
    parser.add_argument("--backend", action="append", default=[], metavar="URL",
                        help="an engine's base URL (http://HOST:PORT, OpenAI-compatible; repeatable)")
    parser.add_argument("--from-serve", default=None, metavar="URL",
                        help="take the replicas from an accel serve: the ready replicas of its serving group "
                        "--service, followed as it scales (instead of --backend)")
    parser.add_argument("--service", default=None, metavar="NAME", help="with --from-serve: the serving group")
    parser.add_argument("--token-file", default=None, metavar="FILE",
                        help="with --from-serve: a token of the group's tenant (default $ACCEL_TOKEN_FILE, "
                        "$ACCEL_TOKEN)")
    parser.add_argument("--serve-interval", type=float, default=1.0, metavar="SECONDS",
                        help="with --from-serve: how often the service is asked for the replicas (default 1)")
    parser.add_argument("--scale-serve", action="store_true",
                        help="with --from-serve: send the autoscaler's desired replica count to the service "
                        "(set --min-replicas: the autoscaler may want 0)")
    parser.add_argument("--policy", default="cache-aware", choices=POLICIES, help="routing policy (default "
                        "cache-aware)")
    parser.add_argument("--model", default=None, help="the model of requests that name none (also seeds the block "
                        "hashes of KV events; default: what each replica's /v1/models says)")
    parser.add_argument("--tokenizer", default=None, metavar="FILE", help="a Hugging Face tokenizer.json: token "
                        "blocks instead of character blocks")
    parser.add_argument("--block-chars", type=int, default=64, help="characters a block, without --tokenizer "
                        "(default 64, llm-d's approximate mode)")
    parser.add_argument("--block-tokens", type=int, default=16, help="tokens a block, with --tokenizer (default 16, "
                        "vLLM's block size)")
    parser.add_argument("--cache-blocks", type=int, default=31_250, help="blocks the cache-aware view holds per "
                        "replica (default 31250, llm-d's default)")
    parser.add_argument("--kv-events", action="append", default=[], metavar="URL=ENDPOINT",
                        help="a replica's vLLM KV-event ZMQ endpoint (URL=tcp://HOST:PORT; repeatable)")
    parser.add_argument("--role", action="append", default=[], metavar="URL=ROLE",
                        help="a replica's role: both (default), prefill or decode (only 'both' takes requests "
                             "until disaggregation is built)")
    parser.add_argument("--retries", type=int, default=None, help="other replicas tried when one fails before its "
                        "first byte (default: all)")
    parser.add_argument("--connect-timeout", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument("--max-in-flight", type=int, default=1000, metavar="N",
                        help="proxied requests at a time; one more is answered 503 with Retry-After at once (0: no "
                        "bound; default 1000)")
    parser.add_argument("--lag-retries", type=int, default=3, metavar="N",
                        help="times a connect timeout that was the router's own event-loop lateness is sent again "
                        "(not counted against the replica) before a 503 with Retry-After (default 3)")
    parser.add_argument("--read-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="longest silence of a replica mid-answer (default 300)")
    parser.add_argument("--max-body-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--health-interval", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument("--scrape-interval", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument("--breaker-failures", type=int, default=3, help="failures in a row that open a replica's "
                        "circuit breaker (default 3)")
    parser.add_argument("--breaker-open", type=float, default=5.0, metavar="SECONDS",
                        help="how long an open breaker keeps a replica out (default 5)")
    parser.add_argument("--autoscaler", default="hpa-outstanding",
                        choices=("hpa-outstanding", "hpa-kv", "predictive", "none"),
                        help="scheduler.serving's autoscaler over the live load (default hpa-outstanding)")
    parser.add_argument("--scale-target", type=float, default=None, help="HPA target (outstanding requests a "
                        "replica, default 16; KV use, default 0.8)")
    parser.add_argument("--scale-sync-s", type=float, default=15.0, help="autoscaler period (default 15, HPA's)")
    parser.add_argument("--capacity-tokens-per-s", type=float, default=None,
                        help="predictive: work tokens per second a replica carries at the objective")
    parser.add_argument("--lead-s", type=float, default=None, help="predictive: start-up + sync (default from the "
                        "cost profile)")
    parser.add_argument("--min-replicas", type=int, default=0)
    parser.add_argument("--max-replicas", type=int, default=1000)
    parser.add_argument("--keda-listen", default=None, metavar="HOST:PORT",
                        help="serve KEDA's external scaler (gRPC) here")
    _cost_arguments(parser)
    sub = parser.add_subparsers(dest="router_action", metavar="{fake-engine}")
    fake = sub.add_parser("fake-engine", help="a fake vLLM server (OpenAI API, vLLM metrics and KV events)",
                          description="A fake vLLM OpenAI server for tests and demos: tokens at the cost model's "
                          "rate, a prefix cache, vLLM's metric names and KV events in vLLM's wire format.")
    fake.add_argument("--listen", default="127.0.0.1:8000", metavar="HOST:PORT")
    fake.add_argument("--model", default="llama-2-70b", help="the model name it serves")
    fake.add_argument("--time-scale", type=float, default=1.0, help="speed-up over the cost model (default 1)")
    fake.add_argument("--max-num-seqs", type=int, default=256, help="requests running at once (vLLM's option)")
    fake.add_argument("--default-max-tokens", type=int, default=16)
    fake.add_argument("--tokenizer", default=None, metavar="FILE", help="a tokenizer.json (default: characters)")
    fake.add_argument("--block-size", type=int, default=None, help="ids a block (default 16 tokens, 64 characters)")
    fake.add_argument("--kv-blocks", type=int, default=None, help="KV-cache blocks (default: from the cost profile)")
    fake.add_argument("--metric-names", default="new", choices=("new", "old", "both"),
                      help="vLLM's KV and prefix metric names: from 0.9.2 (new), before (old), or both")
    fake.add_argument("--kv-events", default=None, metavar="ENDPOINT", help="publish KV events here "
                      "(tcp://127.0.0.1:5557)")
    fake.add_argument("--kv-events-form", default="array", choices=("array", "map"),
                      help="event encoding: vLLM <= 0.23 arrays, or maps (vLLM PR #42892)")
    fake.add_argument("--ready-file", default=None, metavar="FILE",
                      help="once serving, write {\"url\", \"pid\"} to FILE (atomically; with --listen HOST:0, the "
                      "port the kernel picked): how accel serve --sim learns a replica's address")
    fake.add_argument("--exit-with-parent", type=int, default=None, metavar="PID",
                      help="exit when the process PID (its parent, accel serve) is gone")
    _cost_arguments(fake)


def _run(args: argparse.Namespace) -> int:
    from ._server import main

    return main(args)


ROUTER = Command(
    help="an OpenAI-compatible router in front of vLLM / SGLang replicas (accel router fake-engine: a fake vLLM)",
    description="Route OpenAI requests over engine replicas with scheduler.serving's policies on the prompt's "
    "prefix blocks, fed by the engines' metrics and KV events; health checks, retries, circuit breakers, its own "
    "metrics and a KEDA external scaler.  `accel router fake-engine` runs a fake vLLM server.",
    add_arguments=_router_arguments,
    run=_run,
    requires="accel-sdk[router]",
)
