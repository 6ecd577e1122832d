"""docs/kubernetes/kubelet-plugin.yaml: valid objects, a command line accel accepts, and a
ClusterRole that grants every call the plugin makes (taken from what the fake API server saw)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from accel.cli._parser import parse
from tests.k8s_kubelet._fakeapi import FakeApiServer, validate
from tests.k8s_kubelet.conftest import DRIVER, NODE, Start, dra_v1_pb2, inventory

yaml = pytest.importorskip("yaml")

MANIFEST = Path(__file__).resolve().parents[2] / "docs" / "kubernetes" / "kubelet-plugin.yaml"


def _objects() -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(MANIFEST.read_text()) if o]


def test_every_object_passes_the_schema() -> None:
    objs = _objects()
    assert [o["kind"] for o in objs] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                         "DaemonSet"]
    for obj in objs:
        validate(obj)


def test_the_container_runs_a_command_line_accel_accepts() -> None:
    ds = next(o for o in _objects() if o["kind"] == "DaemonSet")
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:1] == ["accel"]
    args = parse([*container["command"][1:], *container["args"]])
    assert (args.command, args.k8s_command, args.driver_name) == ("k8s", "kubelet-plugin", DRIVER)
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {args.registry_dir, args.cdi_dir, str(Path(f"/var/lib/kubelet/plugins/{DRIVER}").parent)} <= mounts
    assert any(e["name"] == "NODE_NAME" and e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
               for e in container["env"])


_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "DELETE": "delete"}


def _needed(method: str, path: str) -> tuple[str, str, str]:
    m = re.match(r"^/apis/([^/]+)/[^/]+/(?:namespaces/[^/]+/)?([^/]+)(/[^/]+)?$", path) or \
        re.match(r"^/api()/v1/([^/]+)(/[^/]+)?$", path)
    assert m, path
    group, resource, name = m.group(1), m.group(2), m.group(3)
    verb = "list" if method == "GET" and not name else _VERBS[method]
    return group, resource, verb


def test_the_cluster_role_grants_every_call_the_plugin_makes(start: Start, fake: FakeApiServer) -> None:
    fake.add_node(NODE)
    state: dict[str, str | None] = {"faults": None}
    r = start(lambda: inventory(faults=state["faults"]))
    r.plugin.refresh()  # get node, list, create
    stale = json.loads(json.dumps(next(iter(fake.slices.values()))))
    stale["metadata"] = {"name": f"{NODE}-stale"}
    fake.answer("POST", "/apis/resource.k8s.io/v1/resourceslices", {}, stale)
    state["faults"] = "ecc_uncorrectable:2"
    r.plugin.refresh()  # update, delete
    device = next(d["name"] for s in fake.slices.values() for d in s["spec"]["devices"])
    uid = fake.add_claim("default", "c", [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}])
    r.v1().NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(
        claims=[dra_v1_pb2.Claim(namespace="default", uid=uid, name="c")]), timeout=20)  # get claim
    needed = {_needed(method, path) for method, path, _ in fake.requests}
    assert {v for _, _, v in needed} == {"get", "list", "create", "update", "delete"}
    role = next(o for o in _objects() if o["kind"] == "ClusterRole")
    granted = {(g, res, v) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"]
               for v in rule["verbs"]}
    assert needed <= granted, needed - granted
    assert granted <= needed, f"more than the plugin uses: {granted - needed}"
