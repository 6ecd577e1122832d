"""Property: whatever claims the DRA socket is sent, the plugin answers with a response or a gRPC
status it chose (never UNKNOWN: that is an exception escaping a servicer), in bounded time.

Claims are generated around real ones (allocated claims in the fake API server, missing ones,
unallocated ones) with arbitrary namespaces, names and uids, and counts up to past the limit.
Profile ``ci`` in the normal run; ``ACCEL_FUZZ_PROFILE=fuzz`` (``tox -e fuzz``) for many more.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.integrations.k8s._kubelet import MAX_CLAIMS_PER_CALL
from tests.fuzz._profiles import PROFILE
from tests.k8s_kubelet._fakeapi import FakeApiServer
from tests.k8s_kubelet.conftest import DRIVER, NODE, Start, dra_v1_pb2

CALL_CEILING_S = 5.0  # a freeze, not a speed


def test_prepare_and_unprepare_answer_any_claims(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    devices = sorted(d["name"] for s in fake.slices.values() for d in s["spec"].get("devices", []))
    real = [fake.add_claim("default", f"real{i}", [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": d}])
            for i, d in enumerate(devices[:3])]
    pending = fake.add_claim("default", "pending", [{"request": "gpu", "driver": DRIVER, "pool": NODE,
                                                     "device": devices[0]}], allocated=False)
    known = [(u, f"real{i}") for i, u in enumerate(real)] + [(pending, "pending")]
    stub = r.v1()

    texts = st.text(max_size=20) | st.text(alphabet="abcdef0123456789-", min_size=30, max_size=40) | st.sampled_from(
        ["", "../../etc/passwd", "a" * 300, "x/y", "default"])
    claim = st.one_of(
        st.sampled_from(known).map(lambda k: dra_v1_pb2.Claim(namespace="default", uid=k[0], name=k[1])),
        st.builds(dra_v1_pb2.Claim, namespace=texts, uid=texts, name=texts))
    claims = st.one_of(st.lists(claim, max_size=5),
                       st.lists(claim, min_size=MAX_CLAIMS_PER_CALL + 1, max_size=MAX_CLAIMS_PER_CALL + 5))

    @settings(parent=PROFILE, max_examples=max(30, PROFILE.max_examples // 3))
    @given(verb=st.sampled_from(["prepare", "unprepare"]), batch=claims)
    def one(verb: str, batch: list[Any]) -> None:
        call = stub.NodePrepareResources if verb == "prepare" else stub.NodeUnprepareResources
        request = (dra_v1_pb2.NodePrepareResourcesRequest if verb == "prepare"
                   else dra_v1_pb2.NodeUnprepareResourcesRequest)(claims=batch)
        began = time.monotonic()
        try:
            resp = call(request, timeout=20)
        except grpc.RpcError as err:
            assert err.code() != grpc.StatusCode.UNKNOWN, err.details()
            assert err.details()
        else:
            assert set(resp.claims) <= {c.uid for c in batch}
        assert time.monotonic() - began < CALL_CEILING_S

    one()
