"""Property: whatever body a client POSTs to the extender's /filter, /prioritize or /bind, the
answer is a 2xx or a 4xx with an ``Error`` (never a 5xx, never an exception), in bounded time.

Bodies are generated in the shape kube-scheduler sends (``ExtenderArgs`` with a ``v1.Pod`` and its
``accel.dev/request`` annotation, ``NodeNames`` or full ``Nodes``; ``ExtenderBindingArgs``) with any
part swapped for arbitrary JSON (NaN and infinities included), or as raw bytes, or cut short.
Profile ``ci`` in the normal run; ``ACCEL_FUZZ_PROFILE=fuzz`` (``tox -e fuzz``) for many more.
"""

from __future__ import annotations

import http.client
import json
import time
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accel.integrations.k8s._extender import INVENTORY_ANNOTATION, REQUEST_ANNOTATION, Extender, ExtenderServer
from accel.sim import generate_cluster
from tests.fuzz._profiles import PROFILE

CALL_CEILING_S = 2.0  # a freeze, not a speed: honest calls here take milliseconds


@cache
def cluster() -> tuple[Any, ...]:
    return tuple(generate_cluster(8, {"dgx-h100": 1.0, "rtx4090-4": 1.0, "a100-mig": 1.0}, seed=11))


NAMES = [f"node-{i:05d}" for i in range(8)]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)
quantities = st.one_of(st.sampled_from(["1", "500m", "1Gi", "2e3", "-1", "1e400", "0.1n", "lots", "", "8", "1Ei"]),
                       st.integers(min_value=-(2**65), max_value=2**65), st.floats(allow_nan=True), json_values)
resource_names = st.sampled_from(["cpu", "memory", "accel.dev/gpu", "accel.dev/npu", "nvidia.com/gpu"])
resource_maps = st.dictionaries(resource_names, quantities, max_size=4)
resource_fields = st.one_of(resource_maps, json_values)
resources = st.one_of(json_values, st.fixed_dictionaries({}, optional={"requests": resource_fields,
                                                                       "limits": resource_fields}))
containers = st.lists(st.one_of(st.fixed_dictionaries({"name": st.just("c")}, optional={"resources": resources}),
                                json_values), max_size=3)
request_values = {
    "devices": st.one_of(st.integers(-2, 10), st.floats(allow_nan=True), json_values),
    "share": st.one_of(st.fixed_dictionaries({}, optional={
        "compute": st.one_of(st.floats(allow_nan=True, allow_infinity=True), json_values),
        "compute_milli": st.one_of(st.integers(-5, 2000), json_values),
        "memory_bytes": st.one_of(st.integers(-1, 2**70), json_values)}), json_values),
    "partition": st.one_of(st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb"]), json_values),
    "selector": st.one_of(st.fixed_dictionaries({}, optional={
        "vendors": st.one_of(st.lists(st.sampled_from(["nvidia", "amd"]), max_size=2), json_values),
        "kinds": st.one_of(st.lists(st.sampled_from(["gpu", "npu"]), max_size=2), json_values),
        "min_memory_bytes": st.one_of(st.integers(-1, 2**70), st.floats(allow_nan=True), json_values),
        "expr": st.one_of(st.text(max_size=30), json_values)}), json_values),
    "topology": st.one_of(st.sampled_from(["link_domain", "host", "nearby"]), json_values),
    "gang": st.one_of(st.fixed_dictionaries({}, optional={
        "name": st.one_of(st.sampled_from(["g1", "g2"]), json_values),
        "size": st.one_of(st.integers(-1, 40), st.sampled_from([1e9, 10**30, 2**53]), st.floats(allow_nan=True),
                          json_values)}), json_values),
}
requests = st.fixed_dictionaries({}, optional={**request_values, "devics": json_values})
annotations = st.one_of(
    requests.map(lambda r: json.dumps(r, allow_nan=True)),
    st.text(max_size=40),
    st.sampled_from(["[" * 5000 + "]" * 5000, '{"devices": ' + "9" * 5000 + "}", '{"share": {"compute": NaN}}']),
    json_values)
metadata = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.sampled_from(["p", "q"]), json_values), "namespace": st.one_of(st.just("ns"), json_values),
    "uid": st.one_of(st.sampled_from(["u1", "u2", "u3"]), json_values),
    "annotations": st.one_of(st.dictionaries(st.sampled_from([REQUEST_ANNOTATION, "other"]), annotations, max_size=2),
                             json_values)})
pods = st.one_of(st.fixed_dictionaries({}, optional={
    "metadata": st.one_of(metadata, json_values),
    "spec": st.one_of(st.fixed_dictionaries({}, optional={"containers": st.one_of(containers, json_values),
                                                          "initContainers": containers}), json_values)}), json_values)


@st.composite
def nodes(draw: st.DrawFn) -> Any:
    items = []
    for name in draw(st.lists(st.sampled_from([*NAMES, "ghost"]), max_size=4, unique=True)):
        inv = cluster()[NAMES.index(name)] if name in NAMES else None
        ann = draw(st.one_of(st.just(inv.model_dump_json() if inv else "{}"), st.text(max_size=20),
                             st.just("[" * 3000 + "]" * 3000), json_values))
        items.append({"metadata": {"name": name, "resourceVersion": draw(st.sampled_from(["1", "2"])),
                                   "annotations": {INVENTORY_ANNOTATION: ann}}})
    return {"items": items} if draw(st.booleans()) else draw(json_values)


extender_args = st.fixed_dictionaries({}, optional={
    "Pod": pods,
    "NodeNames": st.one_of(st.lists(st.sampled_from([*NAMES, "ghost", ""]), max_size=10), json_values),
    "Nodes": nodes(),
})
binding_args = st.fixed_dictionaries({}, optional={
    "PodName": st.one_of(st.sampled_from(["p", "q"]), json_values),
    "PodNamespace": st.one_of(st.just("ns"), json_values),
    "PodUID": st.one_of(st.sampled_from(["u1", "u2"]), json_values),
    "Node": st.one_of(st.sampled_from(NAMES), json_values)})


@st.composite
def bodies(draw: st.DrawFn, args: st.SearchStrategy[Any]) -> bytes:
    data = json.dumps(draw(st.one_of(args, json_values)), allow_nan=True).encode()
    how = draw(st.sampled_from(["whole", "whole", "whole", "cut", "bytes"]))
    if how == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if how == "bytes":
        return draw(st.binary(max_size=64))
    return data


def check(ext: Extender, verb: str, body: bytes) -> tuple[int, Any]:
    began = time.perf_counter()
    status, out = ext.handle_bytes(verb, body)
    took = time.perf_counter() - began
    assert took < CALL_CEILING_S, (verb, body[:200], took)
    assert 200 <= status < 500, (status, out)
    doc = json.loads(out)
    if status != 200:
        assert isinstance(doc, dict) and doc["Error"], doc
    elif verb == "filter":
        assert set(doc) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    elif verb == "prioritize":
        assert isinstance(doc, list) and all(0 <= p["Score"] <= 10 for p in doc)
    return status, doc


@pytest.fixture(scope="module")
def extender() -> Extender:
    return Extender(inventories=cluster())


@settings(parent=PROFILE)
@given(verb=st.sampled_from(["filter", "prioritize"]), body=bodies(extender_args))
def test_filter_and_prioritize_answer_any_body(extender: Extender, verb: str, body: bytes) -> None:
    check(extender, verb, body)


@settings(parent=PROFILE)
@given(body=bodies(binding_args))
def test_bind_answers_any_body(extender: Extender, body: bytes) -> None:
    check(extender, "bind", body)


def test_over_http_no_5xx_and_nothing_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with ExtenderServer(Extender(inventories=cluster()), port=0, max_body_bytes=1 << 20) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)

        @settings(parent=PROFILE, max_examples=max(20, PROFILE.max_examples // 3))
        @given(verb=st.sampled_from(["filter", "prioritize", "bind", "preempt"]), body=bodies(extender_args))
        def one(verb: str, body: bytes) -> None:
            conn.request("POST", f"/{verb}", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            assert resp.status < 500, (resp.status, data[:300])
            if resp.status != 200:
                assert json.loads(data)["Error"]
            if resp.getheader("connection", "").lower() == "close":
                conn.close()

        try:
            one()
        finally:
            conn.close()
    assert capfd.readouterr().err == ""
