"""The KEDA external scaler over the router's autoscaler, driven by a gRPC client; the generated
code matches the proto; the desired replica count is also a Prometheus series."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import httpx
import pytest

from accel.router import DEFAULT_METRIC, KedaScaler
from accel.router._proto import externalscaler_pb2 as pb
from accel.router._proto import externalscaler_pb2_grpc as pb_grpc
from accel.scheduler.serving import ReactiveHPA

from ._engines import router_over, start_engine, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_the_proto() -> None:
    # as tests/k8s_kubelet/test_generated.py: protoc's output differs by grpcio-tools version
    from importlib.metadata import version

    pytest.importorskip("grpc_tools")
    committed = re.search(r"GRPC_GENERATED_VERSION = '([^']+)'",
                          (ROOT / "accel" / "router" / "_proto" / "externalscaler_pb2_grpc.py").read_text())
    assert committed is not None
    if version("grpcio-tools") != committed.group(1):
        pytest.skip(f"grpcio-tools {version('grpcio-tools')} installed, the code was generated with "
                    f"{committed.group(1)}: the output differs by version, not by proto")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_keda_protos.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_four_rpcs_against_a_running_scaler() -> None:
    state = {"desired": 3, "outstanding": 0}
    scaler = KedaScaler("127.0.0.1:0", lambda: state["desired"], lambda: state["outstanding"], poll_s=0.05).start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{scaler.port}") as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            ref = pb.ScaledObjectRef(name="llama", namespace="serving", scalerMetadata={"scalerAddress": "x"})
            assert stub.IsActive(ref, timeout=5).result is True
            spec = stub.GetMetricSpec(ref, timeout=5).metricSpecs
            assert [(s.metricName, s.targetSize, s.targetSizeFloat) for s in spec] == [(DEFAULT_METRIC, 1, 1.0)]
            got = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=DEFAULT_METRIC), timeout=5)
            assert [(v.metricName, v.metricValue, v.metricValueFloat) for v in got.metricValues] == [
                (DEFAULT_METRIC, 3, 3.0)]
            named = pb.ScaledObjectRef(name="llama", scalerMetadata={"metricName": "llama-replicas"})
            assert stub.GetMetricSpec(named, timeout=5).metricSpecs[0].metricName == "llama-replicas"
            try:
                stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName="other"), timeout=5)
                raise AssertionError("an unknown metric must be refused")
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.NOT_FOUND
            # StreamIsActive: the answer at once, then each change
            stream = stub.StreamIsActive(ref, timeout=10)
            assert next(stream).result is True
            state["desired"] = 0
            assert next(stream).result is False
            state["outstanding"] = 2  # requests at the router keep it active even at 0 desired
            assert next(stream).result is True
            stream.cancel()
    finally:
        scaler.close()


def test_the_autoscaler_over_live_load_feeds_keda_and_prometheus() -> None:
    engine = start_engine(time_scale=1.0)  # 60 tokens at about 30 ms a step: all four outstanding at once
    try:
        hpa = ReactiveHPA(1.0, metric="outstanding", sync_s=3600)  # decisions made by the test, not the clock
        with router_over([engine], autoscaler=hpa, keda_listen="127.0.0.1:0", min_replicas=1) as router:
            assert router.monitor.decide() == 1  # idle: the floor
            # four requests at once against a target of one outstanding request a replica
            results: list[int] = []
            threads = [threading.Thread(target=lambda i=i: results.append(httpx.post(
                router.url + "/v1/completions", json={"model": "m", "prompt": f"x{i}", "max_tokens": 60},
                timeout=30).status_code)) for i in range(4)]
            for t in threads:
                t.start()
            wait_for(lambda: router.live.arrived - router.live.finished == 4)
            desired = router.monitor.decide()
            assert desired == 4
            with grpc.insecure_channel(f"127.0.0.1:{router.scaler.port}") as channel:
                stub = pb_grpc.ExternalScalerStub(channel)
                ref = pb.ScaledObjectRef(name="llama")
                value = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=DEFAULT_METRIC),
                                        timeout=5).metricValues[0].metricValue
                assert value == 4 and stub.IsActive(ref, timeout=5).result
            assert "accel_router_desired_replicas 4.0" in httpx.get(router.url + "/metrics").text
            for t in threads:
                t.join(30)
            assert results == [200] * 4
    finally:
        engine.close()
