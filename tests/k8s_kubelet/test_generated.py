"""The committed gRPC code is what protoc makes of the committed .proto files, and they say the
wire names the kubelet uses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "accel" / "integrations" / "k8s" / "_proto"


def test_generated_code_matches_the_protos() -> None:
    tools = pytest.importorskip("grpc_tools")
    from importlib.metadata import version

    committed = re.search(r"GRPC_GENERATED_VERSION = '([^']+)'", (PROTO_DIR / "dra_v1_pb2_grpc.py").read_text())
    assert committed is not None
    if version("grpcio-tools") != committed.group(1):
        pytest.skip(f"grpcio-tools {version('grpcio-tools')} installed, the code was generated with "
                    f"{committed.group(1)}: the output differs by version, not by proto ({tools.__name__})")
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_kubelet_protos.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_protos_name_their_upstream_source_and_the_wire_names() -> None:
    from accel.integrations.k8s._proto import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_v1_pb2

    for pb2, package in ((dra_v1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1"),
                         (dra_v1beta1_pb2, "k8s.io.kubelet.pkg.apis.dra.v1beta1")):
        service = pb2.DESCRIPTOR.services_by_name["DRAPlugin"]
        assert service.full_name == f"{package}.DRAPlugin"
        assert [m.name for m in service.methods] == ["NodePrepareResources", "NodeUnprepareResources"]
        device = pb2.DESCRIPTOR.message_types_by_name["Device"]
        assert [(f.name, f.number) for f in device.fields] == [
            ("request_names", 1), ("pool_name", 2), ("device_name", 3), ("cdi_device_ids", 4)]
        claim = pb2.DESCRIPTOR.message_types_by_name["Claim"]
        assert [(f.name, f.number) for f in claim.fields] == [("namespace", 1), ("uid", 2), ("name", 3)]
    reg = pluginregistration_v1_pb2.DESCRIPTOR.services_by_name["Registration"]
    assert reg.full_name == "pluginregistration.Registration"
    info = pluginregistration_v1_pb2.DESCRIPTOR.message_types_by_name["PluginInfo"]
    assert [(f.name, f.number) for f in info.fields] == [
        ("type", 1), ("name", 2), ("endpoint", 3), ("supported_versions", 4)]
    for proto in PROTO_DIR.glob("*.proto"):
        header = proto.read_text()[:600]
        assert "kubernetes/kubernetes" in header and re.search(r"@ [0-9a-f]{40}", header), proto.name


def test_a_changed_proto_is_caught(tmp_path: Path) -> None:
    """--check is not a no-op: generated code from an edited proto differs."""
    pytest.importorskip("grpc_tools")
    from grpc_tools import protoc

    edited = (PROTO_DIR / "dra_v1.proto").read_text().replace("string pool_name = 2;", "string pool = 2;")
    (tmp_path / "dra_v1.proto").write_text(edited)
    assert protoc.main(["protoc", f"-I{tmp_path}", f"--python_out={tmp_path}", "dra_v1.proto"]) == 0
    assert (tmp_path / "dra_v1_pb2.py").read_text() != (PROTO_DIR / "dra_v1_pb2.py").read_text()


def test_grpc_and_the_kubernetes_client_load_only_when_the_plugin_runs() -> None:
    """`import accel.integrations.k8s` and building accel's parser load neither (accel ls pays nothing)."""
    code = ("import json, sys, accel.integrations.k8s\n"
            "from accel.cli._parser import parse\n"
            "args = parse(['k8s', 'kubelet-plugin', '--sim', 'dgx-h100'])\n"
            "import accel.integrations.k8s._kubelet\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'kubernetes', 'google'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert run.stdout.strip() == "[]", run.stdout
