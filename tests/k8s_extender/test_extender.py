"""The scheduler extender over real loopback HTTP, with bodies shaped as kube-scheduler sends them.

kube-scheduler marshals ``k8s.io/kube-scheduler/extender/v1`` structs that have no JSON tags, so
the keys are the Go field names (``Pod``, ``NodeNames``...); the pod and nodes inside are
``k8s.io/api/core/v1`` objects with their usual lower-camel JSON.  See ``protocol.md``.
"""

from __future__ import annotations

import http.client
import json
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from accel.integrations.k8s import resource_slices
from accel.integrations.k8s._extender import (
    INVENTORY_ANNOTATION,
    MAX_EXTENDER_PRIORITY,
    REQUEST_ANNOTATION,
    Extender,
    ExtenderServer,
    host_specs_from_slices,
    parse_quantity,
    pod_request,
)
from accel.model import HostInventory
from accel.scheduler import InvalidRequestError, Scheduler, from_inventories, host_spec_from_inventory
from accel.sim import generate_cluster

PROFILES = {"dgx-h100": 1.0, "mi300x-8": 1.0, "rtx4090-4": 1.0, "ascend-910b-8": 1.0, "a100-mig": 0.5}


@pytest.fixture(scope="module")
def cluster() -> list[HostInventory]:
    return generate_cluster(120, PROFILES, seed=7)


@pytest.fixture(scope="module")
def names(cluster: list[HostInventory]) -> list[str]:
    return [inv.host.hostname for inv in cluster]


@pytest.fixture
def server(cluster: list[HostInventory]) -> Iterator[ExtenderServer]:
    with ExtenderServer(Extender(inventories=cluster), port=0, max_body_bytes=1 << 20) as srv:
        yield srv


def post(srv: ExtenderServer, verb: str, body: Any, *, raw: bytes | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    data = raw if raw is not None else json.dumps(body).encode()
    try:
        conn.request("POST", f"/{verb}", body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        out = resp.read()
    finally:
        conn.close()
    return resp.status, json.loads(out)


def make_pod(name: str, request: dict[str, Any] | None = None, *, cpu: str = "1", memory: str = "1Gi",
             limits: dict[str, str] | None = None) -> dict[str, Any]:
    """A v1.Pod as kube-scheduler marshals it (only the fields that matter here, plus a few others)."""
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "uid": f"uid-{name}",
                            "labels": {"app": "train"}}
    if request is not None:
        meta["annotations"] = {REQUEST_ANNOTATION: json.dumps(request)}
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        res["limits"] = limits
    return {"metadata": meta, "spec": {"containers": [{"name": "main", "image": "x", "resources": res}],
                                       "schedulerName": "default-scheduler"},
            "status": {"phase": "Pending"}}


def make_node(inv: HostInventory, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": inv.host.hostname, "resourceVersion": rv,
                         "annotations": {INVENTORY_ANNOTATION: inv.model_dump_json()}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi"}}}


def random_request(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    if r < 0.45:
        req: dict[str, Any] = {"devices": rng.choice([1, 1, 2, 4, 8])}
        if rng.random() < 0.3:
            req["topology"] = {"level": "link_domain", "required": False}
    elif r < 0.75:
        req = {"share": {"compute": rng.choice([0.1, 0.25, 0.5, 0.75]),
                         "memory_bytes": rng.choice([0, 4 << 30, 40 << 30])}}
    else:
        req = {"devices": rng.choice([1, 2, 4])}
    if rng.random() < 0.4:
        req["selector"] = {"vendors": [rng.choice(["nvidia", "amd", "huawei"])]}
    if rng.random() < 0.2:
        req.setdefault("selector", {})["min_memory_bytes"] = 64 << 30
    return req


# -- protocol ---------------------------------------------------------------------------------------


def test_filter_node_cache_capable_shape(server: ExtenderServer, names: list[str]) -> None:
    status, out = post(server, "filter", {"Pod": make_pod("p", {"devices": 8}), "NodeNames": names})
    assert status == 200
    assert set(out) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert out["Error"] == "" and out["Nodes"] is None
    assert out["NodeNames"] and set(out["NodeNames"]) | set(out["FailedNodes"]) == set(names)
    assert not set(out["NodeNames"]) & set(out["FailedNodes"])
    assert all(reason.startswith("accel: ") for reason in out["FailedNodes"].values())


def test_filter_full_nodes_mode_reads_annotations(cluster: list[HostInventory]) -> None:
    ext = Extender()  # knows no node: everything comes from the Node objects
    nodes = [make_node(inv) for inv in cluster[:20]]
    bare = {"metadata": {"name": "cpu-only-node"}}
    with ExtenderServer(ext, port=0) as srv:
        status, out = post(srv, "filter", {"Pod": make_pod("p", {"devices": 2}),
                                           "Nodes": {"metadata": {}, "items": [*nodes, bare]}})
        assert status == 200 and out["NodeNames"] is None
        kept = [n["metadata"]["name"] for n in out["Nodes"]["items"]]
        assert kept and "cpu-only-node" in out["FailedNodes"]
        assert "no accel.dev/inventory annotation" in out["FailedNodes"]["cpu-only-node"]
        # the node objects come back unchanged (kube-scheduler uses them as they are)
        assert out["Nodes"]["items"][0] == next(n for n in nodes if n["metadata"]["name"] == kept[0])
        builds = ext.builds
        post(srv, "filter", {"Pod": make_pod("q", {"devices": 1}), "Nodes": {"items": nodes}})
        assert ext.builds == builds  # same resourceVersions: the cluster view is not rebuilt
        nodes[0]["metadata"]["resourceVersion"] = "2"
        post(srv, "filter", {"Pod": make_pod("q", {"devices": 1}), "Nodes": {"items": nodes}})
        assert ext.builds == builds  # new version, same inventory text: parsed, same spec
        status, prio = post(srv, "prioritize", {"Pod": make_pod("p", {"devices": 2}),
                                                "Nodes": {"items": nodes}})
        assert status == 200 and [p["Host"] for p in prio] == [n["metadata"]["name"] for n in nodes]
        # a broken annotation is named as the reason; a removed one forgets the node
        nodes[1]["metadata"]["annotations"][INVENTORY_ANNOTATION] = '{"host": 1}'
        nodes[1]["metadata"]["resourceVersion"] = "9"
        del nodes[2]["metadata"]["annotations"][INVENTORY_ANNOTATION]
        _, out = post(srv, "filter", {"Pod": make_pod("p", {"devices": 1}), "Nodes": {"items": nodes[:3]}})
        assert "annotation is not a HostInventory" in out["FailedNodes"][nodes[1]["metadata"]["name"]]
        assert "no accel.dev/inventory annotation" in out["FailedNodes"][nodes[2]["metadata"]["name"]]


def test_unknown_node_is_filtered_out_with_reason(server: ExtenderServer, names: list[str]) -> None:
    status, out = post(server, "filter", {"Pod": make_pod("p", {"devices": 1}), "NodeNames": ["ghost", names[0]]})
    assert status == 200 and out["Error"] == ""
    assert "ghost" in out["FailedNodes"] and "accel has no inventory for node ghost" in out["FailedNodes"]["ghost"]
    status, prio = post(server, "prioritize", {"Pod": make_pod("p", {"devices": 1}), "NodeNames": ["ghost"]})
    assert status == 200 and prio == [{"Host": "ghost", "Score": 0}]


def test_go_decoding_is_case_insensitive(server: ExtenderServer, names: list[str]) -> None:
    # Go's encoding/json matches keys case-insensitively; some extender clients send lower case.
    status, out = post(server, "filter", {"pod": make_pod("p", {"devices": 1}), "nodenames": names[:5]})
    assert status == 200 and set(out["NodeNames"]) | set(out["FailedNodes"]) == set(names[:5])


def test_pod_without_accelerators_passes_every_node(server: ExtenderServer) -> None:
    status, out = post(server, "filter", {"Pod": make_pod("web"), "NodeNames": ["a", "b"]})
    assert status == 200 and out["NodeNames"] == ["a", "b"] and out["FailedNodes"] == {}


def test_invalid_pod_request_is_unresolvable_not_an_error(server: ExtenderServer, names: list[str]) -> None:
    pod = make_pod("p", {"devices": 1, "devics": 2})
    status, out = post(server, "filter", {"Pod": pod, "NodeNames": names[:3]})
    assert status == 200 and out["NodeNames"] == []
    assert set(out["FailedAndUnresolvableNodes"]) == set(names[:3])
    assert "unknown keys ['devics']" in out["FailedAndUnresolvableNodes"][names[0]]


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_bad_json_is_400_with_reason(server: ExtenderServer, raw: bytes) -> None:
    status, out = post(server, "filter", None, raw=raw)
    assert status == 400 and out["Error"]


@pytest.mark.parametrize("body", [{"Pod": "x", "NodeNames": []}, {"Pod": {}, "NodeNames": "node-1"},
                                  {"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}])
def test_malformed_args_are_400(server: ExtenderServer, body: dict[str, Any]) -> None:
    status, out = post(server, "filter", body)
    assert status == 400 and out["Error"]


def test_oversize_body_is_413_unread(server: ExtenderServer) -> None:
    # The answer comes from the headers alone: the server never reads (or waits for) the body.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest("POST", "/filter")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(2 << 20))
        conn.endheaders()
        resp = conn.getresponse()
        status, out = resp.status, json.loads(resp.read())
    finally:
        conn.close()
    assert status == 413 and "over the limit" in out["Error"]


def test_missing_content_length_is_411(server: ExtenderServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest("POST", "/filter")
        conn.endheaders()
        resp = conn.getresponse()
        status = resp.status
        resp.read()
    finally:
        conn.close()
    assert status == 411


def test_unknown_verb_is_404(server: ExtenderServer) -> None:
    status, out = post(server, "preempt", {})
    assert status == 404 and "unknown verb" in out["Error"]


def test_bind_without_api_client_says_so(server: ExtenderServer, names: list[str]) -> None:
    status, out = post(server, "bind", {"PodName": "p", "PodNamespace": "team-a", "PodUID": "uid-p",
                                        "Node": names[0]})
    assert status == 200 and "no Kubernetes API client is configured" in out["Error"]
    status, out = post(server, "bind", {"PodName": "p"})
    assert status == 400


def test_bind_with_binder_records_the_allocation(cluster: list[HostInventory]) -> None:
    calls: list[tuple[str, str, str, str]] = []
    ext = Extender(inventories=cluster[:4], binder=lambda ns, n, uid, node: calls.append((ns, n, uid, node)))
    names = [i.host.hostname for i in cluster[:4]]
    pod = make_pod("big", {"devices": 8})
    out = ext.filter({"Pod": pod, "NodeNames": names})
    target = out["NodeNames"][0]
    assert ext.bind({"PodName": "big", "PodNamespace": "team-a", "PodUID": "uid-big", "Node": target}) == {"Error": ""}
    assert calls == [("team-a", "big", "uid-big", target)]
    again = ext.filter({"Pod": make_pod("big2", {"devices": 8}), "NodeNames": [target]})
    assert again["NodeNames"] == [] and "8 devices wanted, 0 free" in again["FailedNodes"][target]


# -- decisions identical to accel.scheduler ------------------------------------------------------------


def test_decisions_match_scheduler_for_random_pods(server: ExtenderServer, cluster: list[HostInventory],
                                                   names: list[str]) -> None:
    direct = Scheduler(from_inventories(cluster), "fgd", workload=server.extender.workload, seed=0)
    rng = random.Random(3)
    placed = 0
    for i in range(150):
        pod = make_pod(f"p{i}", random_request(rng), cpu=rng.choice(["500m", "4", "16"]),
                       memory=rng.choice(["1Gi", "64Gi"]))
        req = pod_request(pod).request
        want = {direct.state.host_names[h] for h in direct.filter(req)}
        status, out = post(server, "filter", {"Pod": pod, "NodeNames": names})
        assert status == 200
        assert set(out["NodeNames"]) == want, pod
        decision = direct.decide(req)
        status, prio = post(server, "prioritize", {"Pod": pod, "NodeNames": out["NodeNames"]})
        assert status == 200 and all(0 <= p["Score"] <= MAX_EXTENDER_PRIORITY for p in prio)
        top = [p["Host"] for p in prio if p["Score"] == MAX_EXTENDER_PRIORITY]
        if decision.host is None:
            assert not want and top == []
            continue
        placed += 1
        assert top == [direct.state.host_names[decision.host]]
        # the order of the other scores follows the scheduler's scores
        hosts = np.array([direct.state.host_index[n] for n in out["NodeNames"]])
        raw, _ = direct.score(req, hosts)
        ext_scores = {p["Host"]: p["Score"] for p in prio}
        for a, sa in zip(out["NodeNames"], raw, strict=True):
            for b, sb in zip(out["NodeNames"], raw, strict=True):
                if sa > sb and ext_scores[b] != MAX_EXTENDER_PRIORITY:
                    assert ext_scores[a] >= ext_scores[b]
    assert placed > 50


def test_gang_goes_to_the_placer_plan(cluster: list[HostInventory], names: list[str]) -> None:
    ext = Extender(inventories=cluster)
    pod = make_pod("w0", {"devices": 8, "gang": {"name": "job", "size": 3}})
    out = ext.filter({"Pod": pod, "NodeNames": names})
    assert len(out["NodeNames"]) == 3
    racks = {next(i.host.rack for i in cluster if i.host.hostname == n) for n in out["NodeNames"]}
    assert len(racks) == 1  # the plan keeps the gang in one rack when one can hold it
    prio = ext.prioritize({"Pod": pod, "NodeNames": names})
    assert {p["Host"] for p in prio if p["Score"] == MAX_EXTENDER_PRIORITY} == set(out["NodeNames"])
    huge = make_pod("h0", {"devices": 8, "gang": {"name": "huge", "size": 10_000}})
    out = ext.filter({"Pod": huge, "NodeNames": names[:2]})
    assert out["NodeNames"] == [] and "does not fit" in out["FailedNodes"][names[0]]


# -- the pod's request ------------------------------------------------------------------------------


def test_pod_request_from_resources_and_annotation() -> None:
    pod = make_pod("p", {"selector": {"vendors": ["nvidia"]}, "topology": "link_domain"}, cpu="1500m",
                   memory="2Gi", limits={"accel.dev/gpu": "4"})
    pod["spec"]["initContainers"] = [{"resources": {"requests": {"cpu": "3", "memory": "1G"}}}]
    pr = pod_request(pod)
    r = pr.request
    assert (r.devices, r.selector.kinds, r.selector.vendors) == (4, ("gpu",), ("nvidia",))
    assert r.cpu_milli == 3000 and r.memory_bytes == 2 << 30  # init container's CPU is the larger
    assert r.topology is not None and r.topology.level == "link_domain" and r.name == "team-a/p"
    share = pod_request(make_pod("s", {"share": {"compute_milli": 250, "memory_bytes": 1 << 30}})).request
    assert share.share is not None and share.share.compute_milli == 250 and share.device_count == 1


@pytest.mark.parametrize("request_, limits, message", [
    ({"devices": 2}, {"accel.dev/gpu": "4"}, "annotation asks for 2 devices"),
    (None, {"accel.dev/gpu": "1", "accel.dev/npu": "1"}, "more than one accelerator kind"),
    ({"share": {"compute": 1.0}}, None, "share.compute_milli"),
    ({"topology": "nearby"}, None, "topology.level"),
    ({"gang": {"name": "g"}}, None, "gang.size"),
    ({"devices": 1, "partition": "1g.10gb"}, None, "more than one of"),
])
def test_pod_request_errors(request_: dict[str, Any] | None, limits: dict[str, str] | None, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        pod_request(make_pod("p", request_, limits=limits))


def test_pod_request_rejects_absurd_quantities() -> None:
    with pytest.raises(InvalidRequestError, match="out of range"):
        pod_request(make_pod("p", {"devices": 1}, memory="1e30"))


@pytest.mark.parametrize("text, value", [("500m", 0.5), ("2", 2.0), ("1Gi", 2.0**30), ("1e3", 1000.0),
                                         ("1.5G", 1.5e9), ("100Mi", 100 * 2.0**20)])
def test_parse_quantity(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_parse_quantity_rejects_garbage() -> None:
    with pytest.raises(InvalidRequestError):
        parse_quantity("lots")


# -- ResourceSlices ---------------------------------------------------------------------------------


def test_specs_from_slices_match_the_inventory(cluster: list[HostInventory]) -> None:
    # partitionable=True: the parents of partitioned GPUs are published too (the default, gate-free
    # mode withholds them: a GPU in MIG mode cannot be allocated whole), as the inventory lists them.
    for inv in cluster[:10]:
        slices = resource_slices(inv, partitionable=True).slices
        (spec,) = host_specs_from_slices(slices)
        want = host_spec_from_inventory(inv)
        totals = {d.id: d.memory_total_bytes for d in inv.devices}
        assert spec.name == want.name and len(spec.devices) == len(want.devices)
        for got, exp in zip(sorted(spec.devices, key=lambda d: d.id), sorted(want.devices, key=lambda d: d.id),
                            strict=True):
            assert (got.id, got.vendor, got.kind, got.model) == (exp.id, exp.vendor, exp.kind, exp.model)
            # slices publish the total memory (capacity), the inventory path uses the usable bytes
            assert got.memory_bytes == totals[got.id] >= exp.memory_bytes
            assert got.healthy == exp.healthy and got.numa == exp.numa
            assert (got.link_domain is None) == (exp.link_domain is None)


def test_extender_on_slices_filters_like_on_inventories(cluster: list[HostInventory], names: list[str]) -> None:
    # As above: the partitionable mode publishes what the inventory lists.
    slices = [s for inv in cluster for s in resource_slices(inv, partitionable=True).slices]
    on_slices = Extender(host_specs_from_slices(slices))
    on_invs = Extender(inventories=cluster)
    for req in ({"devices": 8}, {"devices": 2, "selector": {"vendors": ["amd"]}}, {"share": {"compute": 0.5}}):
        pod = make_pod("p", req, cpu="0", memory="0")
        a = on_slices.filter({"Pod": pod, "NodeNames": names})["NodeNames"]
        b = on_invs.filter({"Pod": pod, "NodeNames": names})["NodeNames"]
        assert a == b, req


def test_partition_requests_use_the_profiles() -> None:
    from accel.scheduler import DeviceSpec, HostSpec

    mig = DeviceSpec(id="nvidia:GPU-1", vendor="nvidia", model="A100", memory_bytes=80 << 30,
                     partition_profiles={"1g.10gb": 142, "7g.80gb": 1000})
    plain = DeviceSpec(id="nvidia:GPU-2", vendor="nvidia", model="A100", memory_bytes=80 << 30)
    ext = Extender([HostSpec("mig", 64_000, 512 << 30, (mig,)), HostSpec("plain", 64_000, 512 << 30, (plain,))])
    out = ext.filter({"Pod": make_pod("p", {"partition": "1g.10gb"}), "NodeNames": ["mig", "plain"]})
    assert out["NodeNames"] == ["mig"] and out["FailedNodes"]["plain"] == "accel: partition 1g.10gb wanted, 0 free"
    out = ext.filter({"Pod": make_pod("p", {"partition": "3g.40gb"}), "NodeNames": ["mig"]})
    assert out["NodeNames"] == []


def test_takes_every_scorer_the_queueing_engine_can_use() -> None:
    # the engine takes any name make_scorer knows; so must the extender, whatever was imported first
    from accel.scheduler import BUILTIN_SCORERS, available_scorers

    small = generate_cluster(6, {"dgx-h100": 1.0, "mi300x-8": 1.0}, seed=3)
    hosts = [inv.host.hostname for inv in small]
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"accel.dev/gpu": "2"}}}]}}
    assert set(BUILTIN_SCORERS) <= set(available_scorers())
    for name in available_scorers():
        ext = Extender(inventories=small, scorer=name)
        assert ext.scheduler is not None and ext.scheduler.scorer.name == name
        prio = ext.prioritize({"Pod": pod, "NodeNames": hosts})
        assert sorted(p["Host"] for p in prio) == sorted(hosts), name
