"""A KEDA external scaler over the router's autoscaler (gRPC, ``externalscaler.proto``).

KEDA's operator calls ``GetMetricSpec`` once per ScaledObject and then ``GetMetrics`` every polling
interval; the HPA it builds computes ``ceil(value / target)`` replicas for an ``AverageValue``
metric (KEDA's default for external metrics).  The scaler answers one metric,
``accel-router-desired-replicas`` (or the trigger's ``metricName`` metadata), with target 1 and
value the desired replica count of the router's autoscaler (:class:`Monitor.desired`), so the HPA
asks for exactly what the autoscaler wants.  ``IsActive`` is true while the desired count or the
router's outstanding requests are above zero (KEDA scales to zero replicas only when inactive);
``StreamIsActive`` (``external-push`` triggers) sends the answer at once and again each time it
changes.  Names and fields: kedacore/keda@125494be45e8ea3ba1bd734a697e4a5bcd397197 (the proto
beside this module), wire-facts.md section 4.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

from ._errors import RouterError

__all__ = ["DEFAULT_METRIC", "KedaScaler"]

DEFAULT_METRIC = "accel-router-desired-replicas"


def _servicer_base() -> Any:
    from ._proto import externalscaler_pb2_grpc

    return externalscaler_pb2_grpc.ExternalScalerServicer


class KedaScaler:
    """Serves the external scaler on ``listen`` (``HOST:PORT``; port 0 picks one): :attr:`port`.

    ``desired``: the current desired replica count (``None`` before the first decision: reported as
    0, inactive); ``outstanding``: requests at the router now.
    """

    def __init__(self, listen: str, desired: Callable[[], int | None], outstanding: Callable[[], int], *,
                 poll_s: float = 1.0) -> None:
        import grpc

        from ._proto import externalscaler_pb2, externalscaler_pb2_grpc

        self._pb = externalscaler_pb2
        self._desired = desired
        self._outstanding = outstanding
        self._poll_s = poll_s
        self._stop = threading.Event()
        scaler = self

        class Servicer(_servicer_base()):  # type: ignore[misc]
            def IsActive(self, request: Any, context: Any) -> Any:
                return scaler._pb.IsActiveResponse(result=scaler.active())

            def StreamIsActive(self, request: Any, context: Any) -> Iterator[Any]:
                last: bool | None = None
                while context.is_active() and not scaler._stop.is_set():
                    now = scaler.active()
                    if now != last:
                        yield scaler._pb.IsActiveResponse(result=now)
                        last = now
                    scaler._stop.wait(scaler._poll_s)

            def GetMetricSpec(self, request: Any, context: Any) -> Any:
                name = scaler.metric_name(request.scalerMetadata)
                spec = scaler._pb.MetricSpec(metricName=name, targetSize=1, targetSizeFloat=1.0)
                return scaler._pb.GetMetricSpecResponse(metricSpecs=[spec])

            def GetMetrics(self, request: Any, context: Any) -> Any:
                name = scaler.metric_name(request.scaledObjectRef.scalerMetadata)
                if request.metricName and request.metricName != name:
                    context.abort(grpc.StatusCode.NOT_FOUND, f"unknown metric {request.metricName!r}; this scaler "
                                  f"serves {name!r}")
                value = scaler.desired()
                return scaler._pb.GetMetricsResponse(metricValues=[
                    scaler._pb.MetricValue(metricName=name, metricValue=value, metricValueFloat=float(value))])

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="keda-scaler"))
        externalscaler_pb2_grpc.add_ExternalScalerServicer_to_server(Servicer(), self._server)  # type: ignore[no-untyped-call]
        port = self._server.add_insecure_port(listen)
        if port == 0:
            raise RouterError(f"--keda-listen {listen!r}: cannot listen there")
        self.port = port

    @staticmethod
    def metric_name(metadata: Any) -> str:
        name = metadata.get("metricName", "") if metadata is not None else ""
        return name or DEFAULT_METRIC

    def desired(self) -> int:
        value = self._desired()
        return 0 if value is None else int(value)

    def active(self) -> bool:
        return self.desired() > 0 or self._outstanding() > 0

    def start(self) -> KedaScaler:
        self._server.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._server.stop(grace=0.5).wait(2)
