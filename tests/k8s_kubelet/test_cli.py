"""``accel k8s kubelet-plugin`` as a process: registers, prepares, survives a restart, stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from accel.integrations.k8s._proto import dra_v1_pb2_grpc
from accel.integrations.k8s._proto import pluginregistration_v1_pb2_grpc as reg_grpc
from tests._helpers import stop
from tests.cli.hostile._proc import foreground_signals
from tests.k8s_kubelet._fakeapi import FakeApiServer
from tests.k8s_kubelet.conftest import DRIVER, NODE, cdi_errors, dra_v1_pb2, reg_pb2

ACCEL = [sys.executable, "-m", "accel"]


def _command(base: Path, kubeconfig: Path, *extra: str) -> list[str]:
    return [*ACCEL, "k8s", "kubelet-plugin", "--sim", "dgx-h100", "--node-name", NODE,
            "--plugin-dir", str(base / "plugin"), "--registry-dir", str(base / "registry"),
            "--cdi-dir", str(base / "cdi"), "--state-dir", str(base / "state"),
            "--kubeconfig", str(kubeconfig), "--api-timeout", "5", "--poll-interval", "0.5", *extra]


def _start(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    # SIGINT at its default in the child, as in a foreground process: a run started by a shell
    # without job control inherits it ignored, and accel (rightly) keeps an inherited ignore.
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env, preexec_fn=foreground_signals)
    assert proc.stderr is not None
    lines = []
    for raw in proc.stderr:
        line = raw.decode()
        lines.append(line)
        if "serving nvidia.accel.dev" in line:
            assert f"serving nvidia.accel.dev on node {NODE}:" in line, line
            return proc
    proc.wait(10)
    raise AssertionError("".join(lines))


def _wait(cond: object, what: str, seconds: float = 20) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if callable(cond) and cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_command_end_to_end_with_a_restart(fake: FakeApiServer, short_dir: Path) -> None:
    kubeconfig = fake.kubeconfig(short_dir / "kubeconfig")
    cmd = _command(short_dir, kubeconfig)
    proc = _start(cmd)
    try:
        reg_sock = short_dir / "registry" / f"{DRIVER}-reg.sock"
        with grpc.insecure_channel(f"unix://{reg_sock}") as ch:
            info = reg_grpc.RegistrationStub(ch).GetInfo(reg_pb2.InfoRequest(), timeout=10)
        assert (info.type, info.name, info.endpoint) == ("DRAPlugin", DRIVER, str(short_dir / "plugin" / "dra.sock"))
        _wait(lambda: len(fake.slices) > 0, "the ResourceSlices")
        assert fake.validated == len(fake.slices)
        device = sorted(d["name"] for s in fake.slices.values() for d in s["spec"]["devices"])[0]
        uid = fake.add_claim("default", "c", [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}])
        with grpc.insecure_channel(f"unix://{info.endpoint}") as ch:
            resp = dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(
                claims=[dra_v1_pb2.Claim(namespace="default", uid=uid, name="c")]), timeout=20)
        assert list(resp.claims[uid].devices[0].cdi_device_ids) == [f"{DRIVER}/claim={uid}-{device}"]
        spec = short_dir / "cdi" / f"{DRIVER}-claim-{uid}.json"
        assert cdi_errors(json.loads(spec.read_text())) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        stop(proc)
    assert not reg_sock.exists() and not Path(info.endpoint).exists()

    # A new process on the same directories, told its node the way a DaemonSet does ($NODE_NAME).
    without_node = [a for i, a in enumerate(cmd) if a != "--node-name" and cmd[i - 1] != "--node-name"]
    proc = _start(without_node, env={**os.environ, "NODE_NAME": NODE})
    try:
        assert spec.exists()
        with grpc.insecure_channel(f"unix://{info.endpoint}") as ch:
            out = dra_v1_pb2_grpc.DRAPluginStub(ch).NodeUnprepareResources(dra_v1_pb2.NodeUnprepareResourcesRequest(
                claims=[dra_v1_pb2.Claim(namespace="default", uid=uid, name="c")]), timeout=20)
        assert out.claims[uid].error == "" and not spec.exists()
        assert {s["spec"]["nodeName"] for s in fake.slices.values()} == {NODE}
        # A second plugin on the same sockets: one line, exit 2, and the first keeps serving.
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert second.stderr.strip().count("\n") == 0 and "in use" in second.stderr, second.stderr
        assert Path(info.endpoint).exists()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        stop(proc)
    assert not Path(info.endpoint).exists()
