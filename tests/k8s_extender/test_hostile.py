"""The extender under hostile requests (issue 32 §1): every one is a 4xx naming what was wrong, or
the protocol's own refusal, answered at once; nothing reaches stderr; idle sockets cost no thread.

The time ceilings here are loose (seconds) on purpose: they catch a freeze (the old code built a
list of 10**9 gang members, or recursed 100,000 levels into json.loads), not a speed; speed is
benchmarks/service_load's job.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from accel._net.asgi_server import ServerLimits
from accel.integrations.k8s._extender import (
    MAX_NAME_CHARS,
    MAX_NODES,
    REQUEST_ANNOTATION,
    Extender,
    ExtenderServer,
    PodShapeError,
    pod_request,
)
from accel.model import HostInventory
from accel.scheduler import InvalidRequestError
from accel.sim import generate_cluster

FREEZE_S = 2.0  # far above any honest answer here (milliseconds); far below a freeze


@pytest.fixture(scope="module")
def cluster() -> list[HostInventory]:
    return generate_cluster(12, {"dgx-h100": 1.0, "rtx4090-4": 1.0}, seed=3)


@pytest.fixture(scope="module")
def names(cluster: list[HostInventory]) -> list[str]:
    return [inv.host.hostname for inv in cluster]


LIMITS = ServerLimits(header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1)


@pytest.fixture
def server(cluster: list[HostInventory]) -> Iterator[ExtenderServer]:
    with ExtenderServer(Extender(inventories=cluster), port=0, max_body_bytes=4 << 20, limits=LIMITS) as srv:
        yield srv


def post_raw(srv: ExtenderServer, verb: str, data: bytes) -> tuple[int, Any, float]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
    start = time.perf_counter()
    try:
        conn.request("POST", f"/{verb}", body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        out = resp.read()
    finally:
        conn.close()
    return resp.status, json.loads(out), time.perf_counter() - start


def pod(request: Any = None, *, resources: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "uid-p"}
    if request is not None:
        meta["annotations"] = {REQUEST_ANNOTATION: request if isinstance(request, str) else json.dumps(request)}
    res = resources if resources is not None else {"requests": {"cpu": "1"}}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "resources": res}]}}


def body(p: dict[str, Any], names: list[str]) -> bytes:
    return json.dumps({"Pod": p, "NodeNames": names}).encode()


# -- the findings, one by one -------------------------------------------------------------------------


def test_gang_of_a_billion_is_refused_at_once_naming_gang_size(server: ExtenderServer, names: list[str],
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    status, out, took = post_raw(server, "filter", body(pod({"devices": 1, "gang": {"name": "g", "size": 1e9}}),
                                                         names))
    assert status == 200 and took < FREEZE_S
    assert out["NodeNames"] == [] and set(out["FailedAndUnresolvableNodes"]) == set(names)
    assert "gang.size" in out["FailedAndUnresolvableNodes"][names[0]]
    status, prio, took = post_raw(server, "prioritize", body(pod({"devices": 1, "gang": {"name": "g", "size": 1e9}}),
                                                             names))
    assert status == 200 and took < FREEZE_S and {p["Score"] for p in prio} == {0}
    assert capfd.readouterr().err == ""


def test_gang_larger_than_the_cluster_does_not_fit_without_placing(server: ExtenderServer, names: list[str]) -> None:
    st = server.extender.scheduler
    assert st is not None
    devices = int(st.state.n_devices.sum())
    req = {"devices": 1, "gang": {"name": "big", "size": devices + 1}}
    status, out, took = post_raw(server, "filter", body(pod(req), names))
    assert status == 200 and took < FREEZE_S and out["NodeNames"] == []
    assert f"over the {devices} members the cluster can hold" in out["FailedNodes"][names[0]]
    assert not server.extender._gang_plans  # answered from the count: the placer never ran


@pytest.mark.parametrize(("resources", "field"), [
    ({"limits": ["accel.dev/gpu", "1"]}, "resources.limits"),
    ({"requests": "cpu=1"}, "resources.requests"),
    ("lots", "resources"),
    ({"limits": {f"r{i}": "1" for i in range(300)}}, "resources.limits"),
])
def test_malformed_pod_is_400_naming_the_field(server: ExtenderServer, names: list[str], resources: Any,
                                               field: str, capfd: pytest.CaptureFixture[str]) -> None:
    for verb in ("filter", "prioritize"):
        status, out, took = post_raw(server, verb, body(pod(resources=resources), names))
        assert status == 400 and took < FREEZE_S, out
        assert field in out["Error"] and "spec.containers[0]" in out["Error"]
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(("request_", "field"), [
    ('{"share": {"compute": NaN}}', "share.compute"),
    ('{"share": {"compute": Infinity}}', "share.compute"),
    ('{"share": {"compute": -0.5}}', "share.compute"),
    ('{"devices": 1e300}', "devices"),
    ('{"selector": {"min_memory_bytes": 1e30}}', "selector.min_memory_bytes"),
    ('{"gang": {"name": "' + "g" * 300 + '", "size": 2}}', "gang.name"),
    ('{"devices": ' + "9" * 100_000 + "}", "devices"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),
])
def test_bad_request_annotation_is_unresolvable_naming_the_field(server: ExtenderServer, names: list[str],
                                                                 request_: str, field: str,
                                                                 capfd: pytest.CaptureFixture[str]) -> None:
    # The pod itself is well formed: its accel request is not, which the protocol says with
    # FailedAndUnresolvableNodes (the pod's events show it; kube-scheduler does not retry in vain).
    status, out, took = post_raw(server, "filter", body(pod(request_), names))
    assert status == 200 and took < FREEZE_S, out
    reason = out["FailedAndUnresolvableNodes"][names[0]]
    assert field in reason and len(reason) < 1000
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(("raw", "needle"), [
    (b'{"Pod":' * 10_000 + b"{}" + b"}" * 10_000, "nested deeper than 64"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64"),
    (b"[" * 100_000, "nested deeper than 64"),
    (b'{"Pod": {}, "NodeNames": [' + b"9" * 100_000 + b"]}", "100000 characters long"),
    (b'{"Pod": {"metadata": {"generation": ' + b"9" * 100_000 + b"}}}", "'generation'"),
    (b'{"Pod": {"spec": {"priority": NaN}}, "NodeNames": []}', "NaN"),
    (b'{"Pod": {"spec": {"priority": -Infinity}}, "NodeNames": []}', "Infinity"),
])
def test_hostile_json_is_400_at_once(server: ExtenderServer, raw: bytes, needle: str,
                                     capfd: pytest.CaptureFixture[str]) -> None:
    status, out, took = post_raw(server, "filter", raw)
    assert status == 400 and took < FREEZE_S
    assert needle in out["Error"], out
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(("args", "needle"), [
    ({"Pod": {"metadata": {"name": "p"}}, "NodeNames": [f"n{i}" for i in range(MAX_NODES + 1)]},
     f"the limit is {MAX_NODES}"),
    ({"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n" * (MAX_NAME_CHARS + 1)]}, "NodeNames"),
    ({"Pod": {"metadata": {"uid": "u" * 1000}}, "NodeNames": []}, "metadata.uid"),
    ({"Pod": {"metadata": ["x"]}, "NodeNames": []}, "Pod.metadata"),
    ({"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n" * 300}}]}}, "metadata.name"),
])
def test_oversized_args_are_400(server: ExtenderServer, args: dict[str, Any], needle: str) -> None:
    status, out, took = post_raw(server, "filter", json.dumps(args).encode())
    assert status == 400 and took < FREEZE_S and needle in out["Error"], out


def test_bind_names_are_bounded(server: ExtenderServer) -> None:
    args = {"PodName": "p" * 1000, "PodNamespace": "ns", "PodUID": "u", "Node": "n"}
    status, out, _ = post_raw(server, "bind", json.dumps(args).encode())
    assert status == 400 and "at most 253" in out["Error"]


def test_pod_request_api_raises_typed_errors() -> None:
    with pytest.raises(PodShapeError, match=r"spec.containers\[0\].resources.limits"):
        pod_request(pod(resources={"limits": ["x"]}))
    with pytest.raises(InvalidRequestError, match=r"share\.compute") as info:
        pod_request(pod('{"share": {"compute": NaN}}'))
    assert info.value.field == "share.compute"
    with pytest.raises(InvalidRequestError, match="out of range"):
        pod_request(pod(resources={"requests": {"cpu": "1e400"}}))
    with pytest.raises(InvalidRequestError, match="out of range"):
        pod_request(pod(resources={"requests": {"memory": 10**400}}))


def test_learnt_nodes_are_bounded(cluster: list[HostInventory], monkeypatch: pytest.MonkeyPatch) -> None:
    import accel.integrations.k8s._extender as mod

    monkeypatch.setattr(mod, "MAX_NODES", 3)
    ext = Extender()
    annotated = [{"metadata": {"name": f"n{i}", "annotations": {mod.INVENTORY_ANNOTATION: inv.model_dump_json()}}}
                 for i, inv in enumerate(cluster[:3])]
    ext.filter({"Pod": pod({"devices": 1}), "Nodes": {"items": annotated}})
    assert len(ext._dynamic) == 3
    fresh = [{"metadata": {"name": f"m{i}", "annotations": a["metadata"]["annotations"]}}
             for i, a in enumerate(annotated)]
    ext.filter({"Pod": pod({"devices": 1}), "Nodes": {"items": fresh}})
    assert sorted(ext._dynamic) == ["m0", "m1", "m2"]  # the old ones were forgotten, not kept


def test_deep_inventory_annotation_names_the_node(server: ExtenderServer) -> None:
    nodes = {"items": [{"metadata": {"name": "deep", "annotations": {
        "accel.dev/inventory": "[" * 50_000 + "]" * 50_000}}}]}
    status, out, took = post_raw(server, "filter", json.dumps({"Pod": pod({"devices": 1}), "Nodes": nodes}).encode())
    assert status == 200 and took < FREEZE_S
    assert "nested deeper than 32" in out["FailedNodes"]["deep"]


# -- connections ----------------------------------------------------------------------------------------


def _threads() -> int:
    return threading.active_count()


def _closed_by_server(s: socket.socket) -> bool:
    """True when the server closes ``s`` (EOF or reset) before its timeout; any bytes it sends
    first (an error page) are read past."""
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def test_300_half_open_sockets_are_no_threads_and_are_closed(server: ExtenderServer, names: list[str]) -> None:
    before = _threads()
    socks = []
    try:
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if i % 2:
                s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
            socks.append(s)
        assert _threads() <= before + 2  # one event loop holds them all
        # a real client is still answered at once
        status, out, took = post_raw(server, "filter", body(pod({"devices": 1}), names))
        assert status == 200 and took < FREEZE_S and out["Error"] == ""
        # and the server closes each idle socket after the header timeout
        deadline = time.monotonic() + 10
        for s in socks:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            assert _closed_by_server(s)
    finally:
        for s in socks:
            s.close()


def test_slowloris_head_is_cut_off(server: ExtenderServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        start = time.monotonic()
        try:
            for ch in b"POST /filter HTTP/1.1\r\nHost: x\r\n":
                s.sendall(bytes([ch]))
                time.sleep(0.05)
        except OSError:
            pass  # the server closed while we trickled: that is the point
        s.settimeout(5)
        assert _closed_by_server(s)
        assert time.monotonic() - start < LIMITS.header_timeout_s + 3


def test_slow_body_is_408(server: ExtenderServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        s.settimeout(5)
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 408")


def test_garbage_request_line_is_400_and_quiet(server: ExtenderServer, capfd: pytest.CaptureFixture[str]) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        s.settimeout(5)
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (128 * 1024) + b"\r\n\r\n")
        s.settimeout(5)
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 4")  # h11 refuses a head over the limit
    assert capfd.readouterr().err == ""
