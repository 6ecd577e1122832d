"""``accel exporter``: serve the collector over HTTP (uvicorn, with the limits of
:mod:`accel._net.asgi_server`; the page is rendered by :mod:`._asgi`)."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import signal
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

from ..._net import is_loopback
from ...discovery import EntryStatus, discover
from ...errors import AccelError, ConfigError, ProfileError
from ...leak import LeakWatch
from ...plugin import BackendConfig
from ._families import FieldSelection, parse_fields
from ._options import collector_options, rules_text
from ._snapshot import SnapshotSource

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_DEVICES = 3


def _check_selection(errors: Mapping[str, AccelError | None], names: list[str] | None) -> None:
    """A backend the user named that is misconfigured is the answer (as in ``accel ls``), not a 0."""
    for name in names or []:
        error = errors.get(name)
        if isinstance(error, (ConfigError, ProfileError)):
            raise error


def main(
    args: argparse.Namespace,
    selection: tuple[list[str] | None, Mapping[str, BackendConfig], BackendConfig] | None = None,
) -> int:
    """Run ``accel exporter``; ``selection`` is the CLI's (backends, configs, default config)."""
    if args.action == "rules":
        sys.stdout.write(rules_text(args))
        return EXIT_OK
    try:
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"accel exporter needs prometheus_client ({exc}): pip install 'accel-sdk[exporter]'") from exc
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be 0..65535, got {args.port}")
    if args.min_interval < 0:
        raise ConfigError("--min-interval must not be negative")
    fields = parse_fields(getattr(args, "fields", "full"), processes=args.processes)
    # --labels and attribution: checked before anything opens (a bad value is a ConfigError).
    collector_kw = collector_options(args)
    backends, configs, base = selection if selection is not None else (None, {}, BackendConfig())
    if fields.readings is not None:
        # Each backend is asked to read only what the selected families need (a hint: one that
        # cannot narrow reads everything, and the collector still emits only those families).
        configs = {n: dataclasses.replace(c, readings=fields.readings) for n, c in configs.items()}
        base = dataclasses.replace(base, readings=fields.readings)
    report = discover(configs, default_config=base, backends=backends)
    if not report.plugins and not report.by_status(EntryStatus.FAILED):
        print("accel: no accelerator found on this machine; try `accel exporter --sim dgx-h100`", file=sys.stderr)
        return EXIT_NO_DEVICES
    # Leak verdicts are health conditions: without health exported nobody would see them.
    leak = LeakWatch() if getattr(args, "leak_detection", True) and fields.health else None
    source = SnapshotSource(report, configs, base, min_interval_s=args.min_interval, leak=leak)
    try:
        _check_selection(source.startup_errors, backends)
        return _serve(args, source, fields, collector_kw)
    finally:
        source.close()
        if collector_kw["attribution"] is not None:
            collector_kw["attribution"].close()


def _serve(args: argparse.Namespace, source: SnapshotSource, fields: FieldSelection,
           collector_kw: Mapping[str, Any]) -> int:
    from prometheus_client import CollectorRegistry
    from prometheus_client.platform_collector import PlatformCollector
    from prometheus_client.process_collector import ProcessCollector

    from ._collector import AccelCollector

    registry = CollectorRegistry()
    registry.register(AccelCollector(source, processes=args.processes, fields=fields, **collector_kw))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    if not is_loopback(args.listen):
        print(f"accel: warning: exporter listens on {args.listen}, reachable beyond this host; metrics are "
              "unauthenticated", file=sys.stderr)
    try:
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"accel exporter serves with uvicorn ({exc}): pip install 'accel-sdk[exporter]'") from exc
    from ..._net.asgi_server import BackgroundServer
    from ._asgi import MetricsApp

    app = MetricsApp(registry)
    try:
        server = BackgroundServer(app, listen=args.listen, port=args.port, name="accel-exporter")
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            print(f"accel: error: port {args.port} on {args.listen} is in use; pick another with --port",
                  file=sys.stderr)
        else:
            print(f"accel: error: cannot listen on {args.listen}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    server.start()
    port = server.port
    host = f"[{args.listen}]" if ":" in args.listen else args.listen
    names = ", ".join(source.backend_names) or "none"
    shown = "" if fields.spec == "full" else f"; fields: {fields.spec}"
    print(f"accel: exporter on http://{host}:{port}/metrics (backends: {names}{shown})", file=sys.stderr, flush=True)
    stop = threading.Event()

    def _terminate(signum: int, frame: FrameType | None) -> Any:
        stop.set()

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        while not stop.wait(3600):
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
        app.close()
    return EXIT_OK
