"""The router's own Prometheus metrics (``prometheus_client``, one registry per router)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ._backends import Backend

__all__ = ["RouterMetrics"]


class RouterMetrics:
    """Counters and histograms updated per request; per-replica gauges read at scrape time."""

    def __init__(self, backends: Sequence[Backend], desired: Callable[[], int | None]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("accel_router_requests", "Requests answered by the router, by replica "
                                "(empty: none chosen) and HTTP status", ["backend", "code"], registry=self.registry)
        self.retries = Counter("accel_router_retries", "Requests sent again to another replica after this one "
                               "failed before its first byte", ["backend"], registry=self.registry)
        self.stream_errors = Counter("accel_router_stream_errors", "Streams ended with an error event after the "
                                     "replica failed mid-stream", ["backend"], registry=self.registry)
        self.duration = Histogram("accel_router_request_duration_seconds", "Time from the request's arrival to "
                                  "the end of its response", registry=self.registry,
                                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                           10, 30, 60, 120))
        self.prefix_blocks = Counter("accel_router_prompt_blocks", "Prompt blocks hashed for routing",
                                     registry=self.registry)
        self.matched_blocks = Counter("accel_router_matched_blocks", "Prompt blocks found in the chosen replica's "
                                      "cache view when routed", registry=self.registry)
        self.shed = Counter("accel_router_shed", "Requests the router answered 503 itself because it is "
                            "overloaded (reason: in_flight, over its bound of requests at a time; loop_lag, its "
                            "event loop ran so late that an upstream timeout was its own), never a replica's "
                            "fault", ["reason"], registry=self.registry)
        self.lag_timeouts = Counter("accel_router_lag_timeouts", "Upstream timeouts that fired while the router's "
                                    "own event loop was late by a comparable time: not counted against the "
                                    "replica (no breaker failure), the request retried or shed",
                                    ["backend", "phase"], registry=self.registry)
        self.loop_lag = Gauge("accel_router_loop_lag_seconds", "How late the router's event loop runs now "
                              "(its heartbeat's lateness)", registry=self.registry)
        self.in_flight = Gauge("accel_router_in_flight", "Proxied requests the router holds now",
                               registry=self.registry)
        self.registry.register(_Live(backends, desired))
        self._requests: dict[tuple[str, str], Any] = {}

    def request(self, backend: str, code: str) -> None:
        """Count one answered request (the labelled child made once per backend and code)."""
        child = self._requests.get((backend, code))
        if child is None:
            child = self._requests[(backend, code)] = self.requests.labels(backend, code)
        child.inc()

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        out: bytes = generate_latest(self.registry)
        return out


class _Live:
    """Gauges read from the replica table at each scrape."""

    def __init__(self, backends: Sequence[Backend], desired: Callable[[], int | None]) -> None:
        self._backends = backends
        self._desired = desired

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        fams = {
            "healthy": GaugeMetricFamily("accel_router_backend_healthy", "1 if the replica's last health checks "
                                         "passed", labels=["backend", "role"]),
            "open": GaugeMetricFamily("accel_router_backend_circuit_open", "1 while the replica's circuit breaker "
                                      "is open or half-open", labels=["backend"]),
            "in_flight": GaugeMetricFamily("accel_router_backend_in_flight", "Requests the router has at the "
                                           "replica now", labels=["backend"]),
            "engine": GaugeMetricFamily("accel_router_backend_engine_outstanding", "Running + waiting requests "
                                        "from the replica's last scrape", labels=["backend"]),
            "kv": GaugeMetricFamily("accel_router_backend_kv_usage_ratio", "KV-cache use (0..1) from the "
                                    "replica's last scrape", labels=["backend"]),
            "view": GaugeMetricFamily("accel_router_backend_cached_blocks", "Blocks in the router's view of the "
                                      "replica's prefix cache (KV events)", labels=["backend"]),
        }
        kv_batches = CounterMetricFamily("accel_router_kv_event_batches", "KV-event batches received, by "
                                         "outcome", labels=["backend", "outcome"])
        opened = CounterMetricFamily("accel_router_circuit_opened", "Times the replica's breaker opened",
                                     labels=["backend"])
        for b in self._backends:
            fams["healthy"].add_metric([b.url, b.role], 1.0 if b.healthy else 0.0)
            fams["open"].add_metric([b.url], 0.0 if b.breaker.opened_at is None else 1.0)
            fams["in_flight"].add_metric([b.url], float(b.in_flight))
            opened.add_metric([b.url], float(b.breaker.opened_total))
            if b.load is not None and b.load.outstanding is not None:
                fams["engine"].add_metric([b.url], b.load.outstanding)
            if b.load is not None and b.load.kv_usage is not None:
                fams["kv"].add_metric([b.url], b.load.kv_usage)
            if b.block_map is not None:
                fams["view"].add_metric([b.url], float(len(b.block_map.cache)))
            if b.kv is not None:
                kv_batches.add_metric([b.url, "ok"], float(b.kv.batches))
                kv_batches.add_metric([b.url, "malformed"], float(b.kv.errors))
                kv_batches.add_metric([b.url, "gap"], float(b.kv.gaps))
        yield from fams.values()
        yield kv_batches
        yield opened
        desired = self._desired()
        if desired is not None:
            g = GaugeMetricFamily("accel_router_desired_replicas", "Replicas the autoscaler wants for the "
                                  "router's live load (an HPA external metric)")
            g.add_metric([], float(desired))
            yield g
