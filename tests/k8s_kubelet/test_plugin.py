"""The DRA kubelet plugin over the real gRPC protocols, against a fake API server checked by schema.

The client side is what the kubelet does: GetInfo and NotifyRegistrationStatus on the
registration socket, then NodePrepareResources / NodeUnprepareResources on the endpoint it names,
with stubs generated from the same .proto files.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from accel.integrations.k8s._kubelet import SERVICES, KubeletPlugin, KubeletPluginServer, PluginInUseError
from tests.k8s_kubelet._fakeapi import FakeApiServer, validate
from tests.k8s_kubelet.conftest import (
    DRIVER,
    NODE,
    Start,
    cdi_errors,
    claim_msg,
    client_api,
    dra_v1_pb2,
    dra_v1beta1_pb2,
    inventory,
    reg_pb2,
)


def published(fake: FakeApiServer) -> dict[str, dict[str, Any]]:
    """Device name -> published device, over every slice of the pool in the fake API."""
    return {d["name"]: d for s in fake.slices.values() for d in s["spec"].get("devices", [])}


def result(device: str, request: str = "gpu", pool: str = NODE, driver: str = DRIVER) -> dict[str, str]:
    return {"request": request, "driver": driver, "pool": pool, "device": device}


def prepare(stub: Any, pb2: Any, *claims: tuple[str, str], timeout: float = 20) -> Any:
    return stub.NodePrepareResources(
        pb2.NodePrepareResourcesRequest(claims=[claim_msg(pb2, uid, name) for uid, name in claims]), timeout=timeout)


def unprepare(stub: Any, pb2: Any, *claims: tuple[str, str]) -> Any:
    return stub.NodeUnprepareResources(
        pb2.NodeUnprepareResourcesRequest(claims=[claim_msg(pb2, uid, name) for uid, name in claims]), timeout=20)


def claim_reads(fake: FakeApiServer) -> int:
    return sum(1 for method, path, _ in fake.requests if method == "GET" and "/resourceclaims/" in path)


def test_registration_as_the_kubelet_sees_it(start: Start) -> None:
    r = start()
    stub = r.registration()
    info = stub.GetInfo(reg_pb2.InfoRequest(), timeout=10)
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(r.server.dra_socket) and Path(info.endpoint).is_socket()
    assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"] == list(SERVICES)
    assert r.server.registration_socket.name == f"{DRIVER}-reg.sock"
    stub.NotifyRegistrationStatus(reg_pb2.RegistrationStatus(plugin_registered=True), timeout=10)
    assert r.server.registration == (True, "")
    stub.NotifyRegistrationStatus(reg_pb2.RegistrationStatus(plugin_registered=False, error="version"), timeout=10)
    assert r.server.registration == (False, "version")


def test_publishes_the_pool_through_the_api_checked_against_the_schema(start: Start, fake: FakeApiServer) -> None:
    r = start()
    created, replaced, deleted = r.plugin.publish()
    assert created and not replaced and not deleted
    assert fake.validated == len(created)  # every object the client sent passed the 1.37 schema, strictly
    assert all(s["spec"]["driver"] == DRIVER and s["spec"]["nodeName"] == NODE for s in fake.slices.values())
    assert all(s["spec"]["pool"]["generation"] == 1 for s in fake.slices.values())
    assert len(published(fake)) == 8
    writes = len(fake.requests)
    assert r.plugin.publish() == ([], [], [])  # nothing changed: one list, no write
    assert len(fake.requests) == writes + 1 and fake.requests[-1][0] == "GET"


def test_the_node_owns_its_slices_when_it_can_be_read(start: Start, fake: FakeApiServer) -> None:
    uid = fake.add_node(NODE)
    r = start()
    r.plugin.publish()
    owners = [s["metadata"]["ownerReferences"] for s in fake.slices.values()]
    assert owners and all(o == [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid, "controller": True}]
                          for o in owners)


def test_an_unreadable_node_leaves_the_slices_without_owner_said_once(start: Start, fake: FakeApiServer) -> None:
    lines: list[str] = []
    r = start(log=lines.append)
    r.plugin.publish()
    r.plugin.publish()
    assert fake.slices and not any("ownerReferences" in s["metadata"] for s in fake.slices.values())
    assert sum("without an owner" in line for line in lines) == 1
    assert sum(1 for m, path, _ in fake.requests if path.startswith("/api/v1/nodes/")) == 1


def test_health_change_is_republished_with_a_taint(start: Start, fake: FakeApiServer) -> None:
    state = {"faults": None}
    r = start(lambda: inventory(faults=state["faults"]))
    assert r.plugin.refresh() is True  # first read: publish
    assert not any("taints" in d for d in published(fake).values())
    assert r.plugin.refresh() is False  # same inventory: nothing sent
    state["faults"] = "ecc_uncorrectable:2"
    assert r.plugin.refresh() is True
    tainted = {n: d["taints"] for n, d in published(fake).items() if "taints" in d}
    assert list(tainted) == ["gpu-0000-3a-00-0"]
    assert tainted["gpu-0000-3a-00-0"][0]["effect"] == "NoSchedule"
    assert {s["spec"]["pool"]["generation"] for s in fake.slices.values()} == {2}
    for s in fake.slices.values():
        validate(s)
    state["faults"] = None
    assert r.plugin.refresh() is True
    assert not any("taints" in d for d in published(fake).values())
    assert {s["spec"]["pool"]["generation"] for s in fake.slices.values()} == {3}


def test_a_failed_publication_is_retried_at_the_next_refresh(start: Start, fake: FakeApiServer) -> None:
    from accel.integrations.k8s._kubeapi import KubeApiTimeoutError

    state = {"faults": None}
    r = start(lambda: inventory(faults=state["faults"]), timeout_s=1.0)
    assert r.plugin.refresh() is True
    state["faults"] = "ecc_uncorrectable:2"
    fake.start_hanging()
    with pytest.raises(KubeApiTimeoutError):
        r.plugin.refresh()
    fake.stop_hanging()
    assert not any("taints" in d for d in published(fake).values())
    assert r.plugin.refresh() is True  # the inventory did not change again; the API still lags
    assert [n for n, d in published(fake).items() if "taints" in d] == ["gpu-0000-3a-00-0"]


def test_an_inventory_with_a_backend_missing_is_not_published(start: Start, fake: FakeApiServer) -> None:
    from accel.model import Problem, ProblemKind

    state = {"broken": False}

    def inv() -> Any:
        full = inventory()
        if not state["broken"]:
            return full
        gone = Problem(kind=ProblemKind.BACKEND, backend="sim", message="sim: read timed out")
        return full.model_copy(update={"devices": (), "problems": (gone,)})

    r = start(inv)
    assert r.plugin.refresh() is True
    state["broken"] = True
    assert r.plugin.refresh() is False
    assert len(published(fake)) == 8


def test_stale_slices_of_the_pool_are_deleted_and_others_left(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    other = json.loads(json.dumps(next(iter(fake.slices.values()))))
    stale = json.loads(json.dumps(other))
    stale["metadata"] = {"name": "node-1-nvidia-accel-dev-9"}
    other["metadata"] = {"name": "node-2-nvidia-accel-dev-0"}
    other["spec"]["nodeName"] = other["spec"]["pool"]["name"] = "node-2"
    for obj in (stale, other):
        assert fake.answer("POST", "/apis/resource.k8s.io/v1/resourceslices", {}, obj)[0] == 201
    created, replaced, deleted = r.plugin.publish()
    assert deleted == ["node-1-nvidia-accel-dev-9"] and not created and replaced
    assert "node-2-nvidia-accel-dev-0" in fake.slices


def test_prepare_survives_a_restart_and_unprepare_removes_the_spec(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    names = sorted(published(fake))[:2]
    uid = fake.add_claim("default", "two-gpus", [result(n) for n in names])
    resp = prepare(r.v1(), dra_v1_pb2, (uid, "two-gpus"))
    entry = resp.claims[uid]
    assert entry.error == ""
    assert [(list(d.request_names), d.pool_name, d.device_name) for d in entry.devices] == [
        (["gpu"], NODE, n) for n in names]
    ids = [list(d.cdi_device_ids) for d in entry.devices]
    assert ids == [[f"{DRIVER}/claim={uid}-{n}"] for n in names]
    spec_path = r.cdi_dir / f"{DRIVER}-claim-{uid}.json"
    spec = json.loads(spec_path.read_text())
    assert cdi_errors(spec) == []
    assert spec["kind"] == f"{DRIVER}/claim"
    assert [d["name"] for d in spec["devices"]] == [f"{uid}-{n}" for n in names]
    # CUDA_VISIBLE_DEVICES names both GPUs in each device's edits (CDI keeps the last env edit).
    envs = {tuple(d["containerEdits"]["env"]) for d in spec["devices"]}
    assert len(envs) == 1 and next(iter(envs))[0].count("GPU-") == 2
    assert uid in json.loads((r.base / "state" / "checkpoint.json").read_text())["claims"]
    mtime = spec_path.stat().st_mtime_ns

    r.stop()  # a restart: a new plugin and server on the same state and CDI directories
    assert not r.server.dra_socket.exists() and not r.server.registration_socket.exists()
    reads = claim_reads(fake)
    r2 = start()
    again = prepare(r2.v1(), dra_v1_pb2, (uid, "two-gpus")).claims[uid]
    assert [list(d.cdi_device_ids) for d in again.devices] == ids
    assert claim_reads(fake) == reads  # answered from the checkpoint: not prepared a second time
    assert spec_path.stat().st_mtime_ns == mtime
    done = unprepare(r2.v1(), dra_v1_pb2, (uid, "two-gpus"))
    assert done.claims[uid].error == ""
    assert not spec_path.exists()
    assert json.loads((r2.base / "state" / "checkpoint.json").read_text())["claims"] == {}
    # The kubelet retries: an unknown claim unprepares fine.
    assert unprepare(r2.v1(), dra_v1_pb2, (uid, "two-gpus")).claims[uid].error == ""


def test_v1beta1_serves_the_same(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    name = sorted(published(fake))[0]
    uid = fake.add_claim("ns", "one", [result(name)])
    resp = r.v1beta1().NodePrepareResources(dra_v1beta1_pb2.NodePrepareResourcesRequest(
        claims=[dra_v1beta1_pb2.Claim(namespace="ns", uid=uid, name="one")]), timeout=20)
    assert [list(d.cdi_device_ids) for d in resp.claims[uid].devices] == [[f"{DRIVER}/claim={uid}-{name}"]]
    assert (r.cdi_dir / f"{DRIVER}-claim-{uid}.json").exists()
    out = r.v1beta1().NodeUnprepareResources(dra_v1beta1_pb2.NodeUnprepareResourcesRequest(
        claims=[dra_v1beta1_pb2.Claim(namespace="ns", uid=uid, name="one")]), timeout=20)
    assert out.claims[uid].error == ""
    assert not (r.cdi_dir / f"{DRIVER}-claim-{uid}.json").exists()


def test_a_device_this_node_does_not_own_is_a_grpc_error(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    good = sorted(published(fake))[0]
    other_node = fake.add_claim("default", "elsewhere", [result(good, pool="node-2")])
    unknown = fake.add_claim("default", "unknown", [result("gpu-0000-ff-00-0")])
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, (other_node, "elsewhere"), (unknown, "unknown"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "node-2/" in err.value.details() and "gpu-0000-ff-00-0" in err.value.details()
    assert not list(r.cdi_dir.glob("*.json"))
    # With one claim that can be prepared, the call succeeds and the other claim carries its error.
    ok = fake.add_claim("default", "ok", [result(good)])
    resp = prepare(r.v1(), dra_v1_pb2, (ok, "ok"), (unknown, "unknown"))
    assert resp.claims[ok].error == "" and len(resp.claims[ok].devices) == 1
    assert "not published by node node-1" in resp.claims[unknown].error
    assert [p.name for p in r.cdi_dir.glob("*.json")] == [f"{DRIVER}-claim-{ok}.json"]


def test_claims_the_api_does_not_have_or_did_not_allocate(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, ("0b8a3c5e-0000-4000-8000-000000000001", "missing"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    pending = fake.add_claim("default", "pending", [result(sorted(published(fake))[0])], allocated=False)
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, (pending, "pending"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not allocated" in err.value.details()
    wrong_uid = fake.add_claim("default", "renamed", [result(sorted(published(fake))[0])])
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, ("0b8a3c5e-0000-4000-8000-000000000002", "renamed"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and wrong_uid in err.value.details()
    other_driver = fake.add_claim("default", "amd", [result("gpu-x", driver="amd.accel.dev")])
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, (other_driver, "amd"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, ("../../etc/passwd", "evil"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert not list(r.cdi_dir.iterdir())


def test_concurrent_prepares_of_different_claims(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    names = sorted(published(fake))
    uids = [fake.add_claim("default", f"c{i}", [result(n)]) for i, n in enumerate(names)]

    def one(i: int) -> Any:
        return prepare(r.v1(), dra_v1_pb2, (uids[i], f"c{i}")).claims[uids[i]]

    with ThreadPoolExecutor(max_workers=len(uids)) as pool:  # .result() raises what a thread raised
        answers = dict(zip(uids, [f.result(60) for f in [pool.submit(one, i) for i in range(len(uids))]],
                           strict=True))
    assert sorted(answers) == sorted(uids)
    assert {a.devices[0].device_name for a in answers.values()} == set(names)
    checkpoint = json.loads((r.base / "state" / "checkpoint.json").read_text())
    assert sorted(checkpoint["claims"]) == sorted(uids)
    assert len(list(r.cdi_dir.glob(f"{DRIVER}-claim-*.json"))) == len(uids)
    # The same claim prepared twice at once: one spec, one answer.
    again = fake.add_claim("default", "twice", [result(names[0], request="other")])
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [f.result(60) for f in [pool.submit(prepare, r.v1(), dra_v1_pb2, (again, "twice"))
                                          for _ in range(4)]]
    assert len({tuple(x.claims[again].devices[0].cdi_device_ids) for x in results}) == 1 and len(results) == 4


def test_a_hung_api_server_is_a_deadline_error_in_time(start: Start, fake: FakeApiServer) -> None:
    r = start(timeout_s=1.0)
    r.plugin.publish()
    uid = fake.add_claim("default", "slow", [result(sorted(published(fake))[0])])
    fake.start_hanging()
    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        prepare(r.v1(), dra_v1_pb2, (uid, "slow"), timeout=30)
    took = time.monotonic() - began
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no answer within 1 s" in err.value.details()
    assert took < 10
    from accel.integrations.k8s._kubeapi import KubeApiTimeoutError

    with pytest.raises(KubeApiTimeoutError):
        r.plugin.publish()
    fake.stop_hanging()
    assert prepare(r.v1(), dra_v1_pb2, (uid, "slow")).claims[uid].error == ""


def test_env_is_left_out_when_devices_answer_different_requests(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    a, b = sorted(published(fake))[:2]
    uid = fake.add_claim("default", "split", [result(a, request="train"), result(b, request="eval")])
    entry = prepare(r.v1(), dra_v1_pb2, (uid, "split")).claims[uid]
    assert [list(d.request_names) for d in entry.devices] == [["train"], ["eval"]]
    spec = json.loads((r.cdi_dir / f"{DRIVER}-claim-{uid}.json").read_text())
    assert cdi_errors(spec) == []
    assert all("env" not in d["containerEdits"] and d["containerEdits"]["deviceNodes"] for d in spec["devices"])


def test_partitions_are_prepared_from_their_own_binding(start: Start, fake: FakeApiServer) -> None:
    r = start(lambda: inventory("a100-mig"))
    r.plugin.publish()
    name = next(n for n in sorted(published(fake)) if "3g40gb" in n)
    uid = fake.add_claim("default", "mig", [result(name)])
    prepare(r.v1(), dra_v1_pb2, (uid, "mig"))
    spec = json.loads((r.cdi_dir / f"{DRIVER}-claim-{uid}.json").read_text())
    assert cdi_errors(spec) == []
    mig = published(fake)[name]["attributes"]["accel.dev/id"]["string"].split(":", 1)[1]
    assert mig.startswith("MIG-")
    assert spec["devices"][0]["containerEdits"] == {"deviceNodes": [{"path": "/dev/nvidia0"},
                                                                    {"path": "/dev/nvidiactl"},
                                                                    {"path": "/dev/nvidia-uvm"}],
                                                    "env": [f"CUDA_VISIBLE_DEVICES={mig}"]}


def test_start_removes_leaked_specs_and_restores_missing_ones(start: Start, fake: FakeApiServer) -> None:
    r = start()
    r.plugin.publish()
    name = sorted(published(fake))[0]
    uid = fake.add_claim("default", "kept", [result(name)])
    prepare(r.v1(), dra_v1_pb2, (uid, "kept"))
    r.stop()
    kept = r.cdi_dir / f"{DRIVER}-claim-{uid}.json"
    leaked = r.cdi_dir / f"{DRIVER}-claim-11111111-2222-4333-8444-555555555555.json"
    leaked.write_text(kept.read_text())  # a prepare that crashed before its checkpoint
    tmp = r.cdi_dir / f".{DRIVER}-claim-x.json.abc.tmp"
    tmp.write_text("{")
    foreign = r.cdi_dir / "vendor-gpu.json"
    foreign.write_text("{}")
    kept.unlink()  # and one removed behind the plugin's back
    start()
    assert kept.exists() and not leaked.exists() and not tmp.exists() and foreign.exists()


def test_a_socket_in_use_is_refused_and_a_stale_one_replaced(start: Start, fake: FakeApiServer,
                                                             short_dir: Path) -> None:
    r = start()
    with pytest.raises(PluginInUseError, match=r"state directory .* is in use by another plugin"):
        start()
    other = KubeletPlugin(driver=DRIVER, node=NODE, inventory=inventory, api=client_api(fake),
                          cdi_dir=short_dir / "cdi", state_dir=short_dir / "state2")
    try:
        second = KubeletPluginServer(other, plugin_dir=r.server.dra_socket.parent,
                                     registry_dir=r.server.registration_socket.parent)
        with pytest.raises(PluginInUseError, match=r"socket .*dra\.sock is in use by another process"):
            second.start()
    finally:
        other.close()
    assert r.server.dra_socket.exists()
    assert r.registration().GetInfo(reg_pb2.InfoRequest(), timeout=10).name == DRIVER
    r.stop()
    import socket

    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(r.server.dra_socket))  # bound, never listening: what a killed plugin leaves
    stale.close()
    r2 = start()
    assert r2.registration().GetInfo(reg_pb2.InfoRequest(), timeout=10).name == DRIVER


def test_a_broken_checkpoint_is_an_error_not_a_fresh_start(fake: FakeApiServer, short_dir: Path) -> None:
    from accel.errors import ConfigError

    (short_dir / "state").mkdir()
    (short_dir / "state" / "checkpoint.json").write_text("{not json")
    with pytest.raises(ConfigError, match="checkpoint"):
        KubeletPlugin(driver=DRIVER, node=NODE, inventory=inventory, api=client_api(fake),
                      cdi_dir=short_dir / "cdi", state_dir=short_dir / "state")


def test_driver_is_inferred_or_must_be_named(fake: FakeApiServer, short_dir: Path) -> None:
    from accel.errors import ConfigError

    plugin = KubeletPlugin(driver=None, node=None, inventory=inventory, api=client_api(fake),
                           cdi_dir=short_dir / "cdi", state_dir=short_dir / "state")
    assert plugin.driver == DRIVER and plugin.node == inventory().host.hostname
    with pytest.raises(ConfigError, match="--driver-name is needed"):
        KubeletPlugin(driver=None, node=None, inventory=lambda: inventory("mixed-nvidia-ascend"),
                      api=client_api(fake), cdi_dir=short_dir / "cdi2", state_dir=short_dir / "state2")


def test_a_checkpoint_of_another_driver_is_refused(fake: FakeApiServer, short_dir: Path) -> None:
    from accel.errors import ConfigError

    (short_dir / "state").mkdir()
    (short_dir / "state" / "checkpoint.json").write_text(
        json.dumps({"version": 1, "driver": "amd.accel.dev", "claims": {}}))
    with pytest.raises(ConfigError, match=r"belongs to driver 'amd\.accel\.dev'"):
        KubeletPlugin(driver=DRIVER, node=NODE, inventory=inventory, api=client_api(fake),
                      cdi_dir=short_dir / "cdi", state_dir=short_dir / "state")
    # The failed start released the state directory: a right one starts there.
    (short_dir / "state" / "checkpoint.json").unlink()
    KubeletPlugin(driver=DRIVER, node=NODE, inventory=inventory, api=client_api(fake), cdi_dir=short_dir / "cdi",
                  state_dir=short_dir / "state").close()


def test_a_socket_path_too_long_for_unix_sockets_is_refused(fake: FakeApiServer, short_dir: Path) -> None:
    from accel.errors import ConfigError

    plugin = KubeletPlugin(driver=DRIVER, node=NODE, inventory=inventory, api=client_api(fake),
                           cdi_dir=short_dir / "cdi", state_dir=short_dir / "state")
    try:
        deep = short_dir / ("d" * 120)
        server = KubeletPluginServer(plugin, plugin_dir=deep, registry_dir=short_dir / "registry")
        with pytest.raises(ConfigError, match="longer than 107 bytes"):
            server.start()
        assert not list((short_dir / "registry").glob("*.sock"))
    finally:
        plugin.close()


def test_unprepare_of_an_impossible_uid_is_a_grpc_error(start: Start) -> None:
    r = start()
    with pytest.raises(grpc.RpcError) as err:
        unprepare(r.v1(), dra_v1_pb2, ("a/../b", "x"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    empty = r.v1().NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(), timeout=10)
    assert dict(empty.claims) == {}
