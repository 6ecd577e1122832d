"""The DRA socket's request bounds (issue 32 §1): too many claims, names too long, a call's deadline.

Each refusal is a gRPC status naming the field, given before any API read or file write.
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from accel.integrations.k8s._kubelet import MAX_CLAIMS_PER_CALL
from tests.k8s_kubelet._fakeapi import FakeApiServer
from tests.k8s_kubelet.conftest import DRIVER, NODE, Start, claim_msg, dra_v1_pb2, dra_v1beta1_pb2

UID = "0b8a3c5e-0000-4000-8000-{:012d}"


def claim_reads(fake: FakeApiServer) -> int:
    return sum(1 for method, path, _ in fake.requests if method == "GET" and "/resourceclaims/" in path)


@pytest.mark.parametrize("pb2", [dra_v1_pb2, dra_v1beta1_pb2])
def test_300_claims_are_refused_at_once_naming_the_field(start: Start, fake: FakeApiServer, pb2: object) -> None:
    r = start()
    stub = r.v1() if pb2 is dra_v1_pb2 else r.v1beta1()
    claims = [claim_msg(pb2, UID.format(i), f"c{i}") for i in range(300)]
    threads = threading.active_count()
    for call, request in ((stub.NodePrepareResources, pb2.NodePrepareResourcesRequest),  # type: ignore[attr-defined]
                          (stub.NodeUnprepareResources, pb2.NodeUnprepareResourcesRequest)):  # type: ignore[attr-defined]
        began = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            call(request(claims=claims), timeout=20)
        assert time.monotonic() - began < 2.0
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == f"claims: 300 claims in one call; the limit is {MAX_CLAIMS_PER_CALL}"
    assert claim_reads(fake) == 0 and not list(r.cdi_dir.glob("*.json"))
    assert threading.active_count() <= threads + 4  # the bounded pool, not a thread per claim


@pytest.mark.parametrize(("field", "claim"), [
    ("uid", {"uid": "u" * 10_000, "name": "c", "namespace": "default"}),
    ("name", {"uid": UID.format(1), "name": "n" * 300, "namespace": "default"}),
    ("namespace", {"uid": UID.format(1), "name": "c", "namespace": "x" * 64}),
])
def test_overlong_names_are_invalid_argument(start: Start, fake: FakeApiServer, field: str,
                                             claim: dict[str, str]) -> None:
    r = start()
    with pytest.raises(grpc.RpcError) as err:
        r.v1().NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(
            claims=[claim_msg(dra_v1_pb2, UID.format(0), "ok"), dra_v1_pb2.Claim(**claim)]), timeout=20)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith(f"claims[1].{field} is ")
    assert claim_reads(fake) == 0


def test_a_message_over_the_size_limit_is_refused(start: Start) -> None:
    r = start()
    huge = dra_v1_pb2.Claim(namespace="default", uid=UID.format(0), name="c" * (2 * 1024 * 1024))
    with pytest.raises(grpc.RpcError) as err:
        r.v1().NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=[huge]), timeout=20)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_claims_past_the_calls_deadline_are_not_worked_on(start: Start, fake: FakeApiServer) -> None:
    r = start(timeout_s=1.0)
    fake.start_hanging()
    try:
        claims = [claim_msg(dra_v1_pb2, UID.format(i), f"c{i}") for i in range(20)]
        with pytest.raises(grpc.RpcError) as err:
            r.v1().NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), timeout=1.5)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        time.sleep(2.5)  # what the plugin still does after the kubelet gave up
    finally:
        fake.stop_hanging()
    # 1 s per hung claim (the client's retries included): two claims fit the 1.5 s deadline, not twenty
    read = {path.rsplit("/", 1)[-1] for method, path, _ in fake.requests
            if method == "GET" and "/resourceclaims/" in path}
    assert 1 <= len(read) <= 2, read
    assert DRIVER and NODE  # the plugin under test is the conftest's
