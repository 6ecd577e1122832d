"""Putting a router together: replicas, policy, proxy, monitor, KV-event subscribers, KEDA scaler.

:func:`start_router` runs one in this process (on :class:`~accel._net.fast_server.FastServer`: uvicorn
with httptools and uvloop, the header and body deadlines and connection limits of accel's shared stack);
``accel router`` (:func:`main`) runs one until SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from accel._net import is_loopback
from accel.scheduler.serving import Autoscaler, Predictive, ReactiveHPA, decode_weight, load_catalog

from ._app import Proxy, ProxyConfig, build_app
from ._backends import Backend, BackendSet, CircuitBreaker, Role
from ._errors import RouterError
from ._fromserve import ServeDiscovery, ServeSource, read_token_file
from ._kvevents import BlockMap, EventCache, KVSubscriber
from ._metrics import RouterMetrics
from ._monitor import LiveLoad, Monitor, MonitorConfig
from ._policy import EngineFedCacheAware, Picker, make_policy
from ._prefix import PromptHasher

__all__ = ["RunningRouter", "main", "parse_listen", "start_router"]

DEFAULT_CACHE_BLOCKS = 31_250  # llm-d's default LRU capacity per server (its plugin.go, see _prefix)


def parse_listen(text: str, what: str = "--listen") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise RouterError(f"{what} {text!r}: expected HOST:PORT (127.0.0.1:8480)")
    return host, int(port)


def _check_url(url: str) -> str:
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise RouterError(f"--backend {url!r}: not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise RouterError(f"--backend {url!r}: expected http://HOST:PORT")
    return url.rstrip("/")


@dataclass
class RunningRouter:
    """A router serving in this process; :meth:`close` stops every part of it."""

    server: Any
    picker: Picker
    proxy: Proxy
    metrics: RouterMetrics
    monitor: Monitor
    live: LiveLoad
    scaler: Any = None
    subscribers: list[KVSubscriber] = field(default_factory=list)
    discovery: ServeDiscovery | None = None

    @property
    def port(self) -> int:
        return int(self.server.port)

    @property
    def url(self) -> str:
        host = self.server.socket.getsockname()[0]
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def close(self) -> None:
        if self.discovery is not None:
            self.discovery.close()
        self.proxy.close()
        self.server.close()
        self.monitor.close()
        for sub in self.subscribers:
            sub.close()
        if self.scaler is not None:
            self.scaler.close()


def start_router(backends: Sequence[str], *, listen: str = "127.0.0.1", port: int = 0,
                 policy: str = "cache-aware", hasher: PromptHasher | None = None,
                 proxy_config: ProxyConfig | None = None, monitor_config: MonitorConfig | None = None,
                 kv_events: Mapping[str, str] | None = None, roles: Mapping[str, Role] | None = None,
                 cache_blocks: int | None = DEFAULT_CACHE_BLOCKS, breaker: CircuitBreaker | None = None,
                 autoscaler: Autoscaler | None = None, min_replicas: int = 0, max_replicas: int = 1000,
                 keda_listen: str | None = None, model: str | None = None,
                 from_serve: ServeSource | None = None) -> RunningRouter:
    """Start a router over ``backends`` (engine base URLs), or over the ready replicas of an
    ``accel serve`` serving group (``from_serve``, followed while the router runs); see
    :mod:`accel.router`."""
    from accel._net.fast_server import serve

    if from_serve is not None and (backends or kv_events or roles):
        raise RouterError("--from-serve takes the replicas (and their roles) from the service: no --backend, "
                          "--kv-events or --role with it")
    if not backends and from_serve is None:
        raise RouterError("name at least one --backend URL, or --from-serve")
    urls = [_check_url(u) for u in backends]
    if len(set(urls)) != len(urls):
        raise RouterError("a --backend is named twice")
    kv_events = {_check_url(k): v for k, v in (kv_events or {}).items()}
    unknown = set(kv_events) - set(urls)
    if unknown:
        raise RouterError(f"--kv-events names {', '.join(sorted(unknown))}, which is not a --backend")
    hasher = hasher or PromptHasher()
    proxy_config = proxy_config or ProxyConfig()
    monitor_config = monitor_config or MonitorConfig()
    router = make_policy(policy, capacity_blocks=cache_blocks)
    tmpl = breaker or CircuitBreaker()
    reps = BackendSet((Backend(i, u, role=(roles or {}).get(u, "both"),
                               breaker=CircuitBreaker(tmpl.failure_threshold, tmpl.open_s))
                       for i, u in enumerate(urls)), breaker=tmpl)
    picker = Picker(router, reps)
    reps.on_removed = picker.forget
    subscribers = []

    def attach_kv(b: Backend, endpoint: str) -> KVSubscriber:
        """``b``'s cache view fed by the engine's KV events at ``endpoint``."""
        cache = (router.event_cache(b.id) if isinstance(router, EngineFedCacheAware)
                 else EventCache(cache_blocks))
        block_map = BlockMap(cache, hasher.block_size, model)
        b.block_map, b.kv_endpoint = block_map, endpoint

        def on_batch(batch: Any, m: BlockMap = block_map) -> None:
            with picker.lock:
                m.apply(batch)

        b.kv = KVSubscriber(endpoint, on_batch).start()
        return b.kv

    for b in reps:
        endpoint = kv_events.get(b.url)
        if endpoint is not None:
            subscribers.append(attach_kv(b, endpoint))
    live = LiveLoad(reps)
    monitor = Monitor(reps, monitor_config, live=live, autoscaler=autoscaler, min_replicas=min_replicas,
                      max_replicas=max_replicas)
    metrics = RouterMetrics(reps, lambda: monitor.desired)
    config = proxy_config if model is None else dataclasses.replace(proxy_config, default_model=model)
    proxy = Proxy(picker, hasher, metrics, config, on_routed=live.routed, on_finished=live.done)
    discovery = None
    if from_serve is not None:
        # each replica's KV events (the endpoint the service reports) feed its cache view
        discovery = ServeDiscovery(from_serve, reps, desired=lambda: monitor.desired, attach_kv=attach_kv)
        discovery.poll_once()  # start with the group's replicas (a failed poll: reported, retried)
    app = build_app(proxy, metrics, discovery.status if discovery is not None else None)
    try:
        server = serve(app, listen=listen, port=port, name="accel-router")
    except OSError as exc:
        for sub in subscribers:
            sub.close()
        if discovery is not None:
            discovery.close()
        raise RouterError(f"cannot listen on {listen}:{port}: {exc.strerror or exc}") from None
    scaler = None
    if keda_listen is not None:
        from ._keda import KedaScaler

        scaler = KedaScaler(keda_listen, lambda: monitor.desired,
                            lambda: max(0, live.arrived - live.finished)).start()
    monitor.start()
    server.start()
    if discovery is not None:
        discovery.start()
    return RunningRouter(server, picker, proxy, metrics, monitor, live, scaler, subscribers, discovery)


def build_autoscaler(args: argparse.Namespace) -> Autoscaler | None:
    """The autoscaler ``--autoscaler`` names, from scheduler.serving (see docs/router.md)."""
    name = args.autoscaler
    if name == "none":
        return None
    if name in ("hpa-outstanding", "hpa-kv"):
        if name == "hpa-outstanding":
            return ReactiveHPA(16.0 if args.scale_target is None else args.scale_target, metric="outstanding",
                               sync_s=args.scale_sync_s)
        return ReactiveHPA(0.8 if args.scale_target is None else args.scale_target, metric="kv",
                           sync_s=args.scale_sync_s)
    if name == "predictive":
        if args.capacity_tokens_per_s is None:
            raise RouterError("--autoscaler predictive needs --capacity-tokens-per-s (a replica's work tokens per "
                              "second at the objective)")
        profile = load_catalog().profile(args.cost_model, args.cost_device)
        lead = args.lead_s if args.lead_s is not None else (profile.model.startup_seconds or 60.0) + args.scale_sync_s
        return Predictive(args.capacity_tokens_per_s, decode_weight(profile), lead, sync_s=args.scale_sync_s)
    raise RouterError(f"unknown --autoscaler {name!r}")


def _pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.rpartition("=")
        if not sep or not key or not value:
            raise RouterError(f"{what} {item!r}: expected URL=VALUE")
        out[key] = value
    return out


def _wait_for_signal(parent_pid: int | None = None) -> None:
    """Until SIGTERM / SIGINT, or until the process ``parent_pid`` is no longer this one's parent."""
    stop = threading.Event()

    def _terminate(signum: int, frame: FrameType | None) -> Any:
        stop.set()

    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(3600 if parent_pid is None else 0.5):
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # the parent is gone (killed): so is this process, no orphan
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def main(args: argparse.Namespace) -> int:
    if getattr(args, "router_action", None) == "fake-engine":
        return fake_main(args)
    # The monitor's thread (health checks, metric scrapes) shares the GIL with the proxy's loop; a thread
    # waiting for it takes it after the switch interval, 5 ms by default: a scrape's parsing could put up to
    # that into a proxied request.  1 ms bounds it (the process runs nothing else that wants long slices).
    sys.setswitchinterval(0.001)
    host, port = parse_listen(args.listen)
    if not is_loopback(host):
        print(f"accel router: warning: listening on {host}, not loopback: the router has no authentication; put "
              "it behind one", file=sys.stderr)
    roles: dict[str, Role] = {}
    for url, role in _pairs(args.role, "--role").items():
        if role not in ("both", "prefill", "decode"):
            raise RouterError(f"--role {url}={role}: a role is both, prefill or decode")
        roles[url.rstrip("/")] = role  # type: ignore[assignment]
    hasher = PromptHasher(tokenizer=args.tokenizer, block_chars=args.block_chars, block_tokens=args.block_tokens)
    try:
        proxy_config = ProxyConfig(max_body_bytes=args.max_body_bytes, connect_timeout_s=args.connect_timeout,
                                   read_timeout_s=args.read_timeout, retries=args.retries,
                                   max_in_flight=args.max_in_flight, lag_retries=args.lag_retries)
    except ValueError as exc:
        raise RouterError(str(exc).replace("ProxyConfig: ", "")) from None
    from_serve = None
    if args.from_serve is not None:
        if not args.service:
            raise RouterError("--from-serve needs --service NAME (the serving group)")
        token_file = args.token_file or os.environ.get("ACCEL_TOKEN_FILE")
        token = read_token_file(token_file) if token_file else os.environ.get("ACCEL_TOKEN", "")
        if not token:
            raise RouterError("--from-serve needs a token of the group's tenant: --token-file FILE (or "
                              "$ACCEL_TOKEN_FILE / $ACCEL_TOKEN)")
        from_serve = ServeSource(args.from_serve, token, args.service, interval_s=args.serve_interval,
                                 scale=args.scale_serve)
    elif args.service or args.scale_serve:
        raise RouterError("--service and --scale-serve go with --from-serve URL")
    running = start_router(
        args.backend, listen=host, port=port, policy=args.policy, hasher=hasher, proxy_config=proxy_config,
        monitor_config=MonitorConfig(health_interval_s=args.health_interval, scrape_interval_s=args.scrape_interval),
        kv_events=_pairs(args.kv_events, "--kv-events"), roles=roles, cache_blocks=args.cache_blocks,
        breaker=CircuitBreaker(args.breaker_failures, args.breaker_open), autoscaler=build_autoscaler(args),
        min_replicas=args.min_replicas, max_replicas=args.max_replicas, keda_listen=args.keda_listen,
        model=args.model, from_serve=from_serve)
    # What start-up made (modules, tables: about 77,000 objects) stays for the process's life; a full
    # collection that walks it costs about 37 ms of CPU on the loaded 2-core development machine (gc.collect
    # timed in a router process), a pause every request in flight would wait for.  Frozen, the collector
    # walks only what requests make.
    gc.freeze()
    keda = f", KEDA scaler on {args.keda_listen.rsplit(':', 1)[0]}:{running.scaler.port}" if running.scaler else ""
    where = (f"serving group {args.service} of {args.from_serve} ({len(running.picker.backends)} ready)"
             if from_serve is not None else f"{len(args.backend)} replicas")
    print(f"accel router: {running.url} -> {where}, policy {args.policy}, "
          f"{hasher.unit} blocks of {hasher.block_size}{keda}", file=sys.stderr, flush=True)
    try:
        _wait_for_signal()
    finally:
        running.close()
    return 0


def _write_ready(path: str, data: dict[str, Any]) -> None:
    """``data`` as JSON in ``path``: a reader sees the whole file or none (written aside, then renamed)."""
    import json

    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(tmp, path)
    except OSError as exc:
        raise RouterError(f"--ready-file {path}: {exc.strerror or exc}") from None


def fake_main(args: argparse.Namespace) -> int:
    from accel._net.fast_server import serve

    from ._fake import FakeEngine, FakeEngineConfig

    host, port = parse_listen(args.listen)
    if args.exit_with_parent is not None and os.getppid() != args.exit_with_parent:
        return 1  # started for a parent that is gone already
    engine = FakeEngine(FakeEngineConfig(
        model=args.model, profile_model=args.cost_model, profile_device=args.cost_device, time_scale=args.time_scale,
        max_num_seqs=args.max_num_seqs, default_max_tokens=args.default_max_tokens, tokenizer=args.tokenizer,
        block_size=args.block_size, kv_blocks=args.kv_blocks, metric_names=args.metric_names,
        kv_events_endpoint=args.kv_events, kv_events_form=args.kv_events_form))
    try:
        # the router's server stack (httptools, uvloop): vLLM's API server is uvicorn with them installed
        # (vllm-project/vllm requirements/common.txt at b61ce3b08a2ea6cc7d4f40f02b6e3e07dd94e4ea requires
        # fastapi[standard], whose uvicorn[standard] brings both)
        server = serve(engine.app(), listen=host, port=port, name="accel-fake-engine").start()
    except OSError as exc:
        engine.close()
        raise RouterError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
    kv = f", KV events on {engine.kv_endpoint}" if engine.kv_endpoint else ""
    url = f"http://{'[' + host + ']' if ':' in host else host}:{server.port}"
    print(f"accel router fake-engine: {url} serving {args.model} "
          f"({args.cost_model} on {args.cost_device}, time scale {args.time_scale:g}){kv}", file=sys.stderr,
          flush=True)
    try:
        if args.ready_file:
            _write_ready(args.ready_file, {"url": url, "pid": os.getpid(), "kv_events": engine.kv_endpoint})
        _wait_for_signal(args.exit_with_parent)
    finally:
        server.close()
        engine.close()
    return 0
