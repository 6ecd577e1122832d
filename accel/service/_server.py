"""``accel serve``: open the state, build the executors, run the live loop and the HTTP app."""

from __future__ import annotations

import argparse
import math
import os
import signal as _signal
import sys
from pathlib import Path
from typing import Any

from accel._net import is_loopback
from accel.errors import ConfigError

__all__ = ["main", "parse_listen", "state_dir"]


def state_dir(value: str | None) -> Path:
    return Path(value or os.environ.get("ACCEL_STATE") or "accel-state")


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen {text!r}: expected HOST:PORT (127.0.0.1:8470)")
    return host, int(port)


def _prices(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        model, sep, price = item.rpartition("=")
        try:
            value = float(price)
        except ValueError:
            value = -1.0
        if not sep or not model or not value >= 0:
            raise ConfigError(f"--price {item!r}: expected MODEL=PRICE with a price >= 0")
        out[model] = value
    return out


def _token_create(args: argparse.Namespace) -> int:
    from ._auth import TokenBook
    from ._store import ServiceStore

    state = state_dir(args.token_state or args.state)
    if not (state / "service.sqlite").is_file():
        raise ConfigError(f"{state} is not the state directory of an accel serve (no service.sqlite); start "
                          f"`accel serve --state {state}` once first")
    store = ServiceStore(state / "service.sqlite")
    try:
        token = TokenBook(store).create(args.tenant, admin=args.admin, label=args.label)
    finally:
        store.close()
    print(token)
    return 0


def main(args: argparse.Namespace) -> int:
    if getattr(args, "serve_action", None) == "token":
        return _token_create(args)

    from ._app import build_app
    from ._auth import TokenBook, ensure_admin_token
    from ._core import Service, default_policy
    from ._jobreq import DEFAULT_ENV_ALLOW, EnvAllowlist
    from .executors import ExecutorContext, build_executor

    host, port = parse_listen(args.listen)
    state = state_dir(args.state)
    names = list(args.executor) or (["sim"] if args.sim else [])
    if not names:
        raise ConfigError("name the hosts to run on: --sim PROFILES (simulated) or --executor local|slurm")
    if args.grace < 0:
        raise ConfigError("--grace must be >= 0")
    metrics = None
    if args.prometheus:
        from ._prometheus import PrometheusSource

        try:
            metrics = PrometheusSource(args.prometheus, timeout_s=args.prometheus_timeout)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    holder: dict[str, Service] = {}

    def clock() -> float:
        svc = holder.get("svc")
        return svc.now() if svc is not None else 0.0

    def wall_to_clock(wall: float) -> float:
        svc = holder.get("svc")
        return svc.clock.at_wall(wall) if svc is not None else math.nan  # nan: unknown, the poll's time is used

    extra: dict[str, object] = {}
    for item in args.executor_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--executor-option {item!r}: expected NAME=VALUE")
        extra[key] = {"true": True, "false": False}.get(value.lower(), value)
    if args.run_as:
        extra["run_as"] = args.run_as
    if args.allow_root:
        extra["allow_root"] = True
    executors = []
    for name in names:
        options: dict[str, object] = {"time_scale": args.time_scale, **extra}
        if name == "sim":
            options["profiles"] = args.sim or ""
        executors.append(build_executor(name, ExecutorContext(clock, state / "logs", options, wall_to_clock)))
    service = Service.open(state, executors, time_scale=args.time_scale, prices=_prices(args.price),
                           policy=default_policy(args.grace),
                           env_allow=EnvAllowlist(tuple(args.env_allow) or DEFAULT_ENV_ALLOW))
    holder["svc"] = service
    from ._serving import ServingManager

    # serving groups (/v1/serving): replicas get fake engines on the sim executor; elsewhere each replica
    # job runs the group's engine command
    service.serving = ServingManager(service, spawn=all(ex.name == "sim" for ex in executors))
    if args.attribution_dir:
        from ._attribution import AttributionWriter

        def warn(line: str) -> None:
            print(f"accel serve: attribution: {line}", file=sys.stderr, flush=True)

        try:
            service.attribution = AttributionWriter(Path(args.attribution_dir), service.inventories, warn=warn)
        except OSError as exc:
            service.close()
            raise ConfigError(f"--attribution-dir {args.attribution_dir}: {exc.strerror or exc}") from exc
    tokens = TokenBook(service.store)
    written = ensure_admin_token(state, tokens, service.store)
    if written is not None:
        print(f"accel serve: wrote the admin token to {written} (mode 0600)", file=sys.stderr)
    if not is_loopback(host):
        print(f"accel serve: warning: listening on {host}, not loopback: put TLS in front of it", file=sys.stderr)
    app = build_app(service, tokens, rate=args.rate, burst=args.burst, metrics=metrics)
    from accel._net.fast_server import serve

    # The shared stack's server (httptools on uvloop where installed): a deadline for each request
    # head (a slow client is cut off, not held), a cap on connections, and no signal handlers of
    # uvicorn's (they stay this thread's).
    try:
        server = serve(app, listen=host, port=port, name="accel-serve")
    except OSError as exc:
        service.close()
        raise ConfigError(f"--listen {host}:{port}: {exc.strerror or exc}") from exc
    shown = f"[{host}]" if ":" in host else host
    print(f"accel serve: http://{shown}:{server.port} (state {state}, executors {', '.join(names)}, "
          f"time scale {args.time_scale:g})", file=sys.stderr, flush=True)
    # The handlers' threads, the live loop and the event loop share one GIL, and every SQLite
    # call lets it go: at the default 5 ms switch interval a thread that wants it back (holding
    # the service lock, or answering a read) can wait 5 ms per call behind a busy one.  1 ms
    # bounds that wait (benchmarks/service/README.md).
    sys.setswitchinterval(0.001)
    service.start_loop()
    service.serving.start()
    _run(server, service)
    return 0


def _run(server: Any, service: Any) -> None:
    """Serve until SIGTERM / SIGINT, then stop the server and close the service (its journal, and
    its replicas' engines).  The server runs on its own thread; the signals are this thread's."""
    previous = {s: _signal.signal(s, lambda signum, frame: server.shutdown())
                for s in (_signal.SIGTERM, _signal.SIGINT)}
    try:
        server.start()
        while server.running:
            server.wait(0.2)
    finally:
        server.close()
        service.close()
        for s, handler in previous.items():
            _signal.signal(s, handler)
