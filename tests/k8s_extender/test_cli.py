"""``accel k8s extender`` as a process: start on a free loopback port, answer, stop on SIGTERM."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

ACCEL = [sys.executable, "-m", "accel"]


def _start(args: list[str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([*ACCEL, "k8s", "extender", "--port", "0", *args], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if m:
            return proc, int(m.group(1))
    proc.wait(10)
    raise AssertionError("".join(lines))


def _post(port: int, verb: str, body: object) -> tuple[int, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("POST", f"/{verb}", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_serves_slices_from_accel_dra(tmp_path: Path) -> None:
    slices = subprocess.run([*ACCEL, "dra", "--sim", "dgx-h100", "--node", "gpu-1"], capture_output=True,
                            text=True, check=True).stdout
    (tmp_path / "slices.json").write_text(slices)
    proc, port = _start(["--slices", str(tmp_path / "slices.json")])
    try:
        pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
               "spec": {"containers": [{"name": "c", "resources": {"limits": {"accel.dev/gpu": "8"}}}]}}
        status, out = _post(port, "filter", {"Pod": pod, "NodeNames": ["gpu-1", "cpu-1"]})
        assert status == 200 and isinstance(out, dict)
        assert out["NodeNames"] == ["gpu-1"] and "cpu-1" in out["FailedNodes"]
        status, prio = _post(port, "prioritize", {"Pod": pod, "NodeNames": ["gpu-1"]})
        assert status == 200 and prio == [{"Host": "gpu-1", "Score": 10}]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stderr is not None
        proc.stderr.close()


def test_non_loopback_listen_warns(tmp_path: Path) -> None:
    proc = subprocess.Popen([*ACCEL, "k8s", "extender", "--port", "0", "--listen", "0.0.0.0"],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    proc.wait(20)
    proc.stderr.close()
    assert "warning: extender listens on 0.0.0.0" in first


def test_unknown_scorer_is_an_error() -> None:
    run = subprocess.run([*ACCEL, "k8s", "extender", "--scorer", "nope"], capture_output=True, text=True)
    assert run.returncode != 0 and "unknown scorer 'nope'" in run.stderr


def test_takes_the_queueing_engines_default_scorer(tmp_path: Path) -> None:
    # fewest-free lives in accel.scheduler.queueing, which the extender never imports
    slices = subprocess.run([*ACCEL, "dra", "--sim", "dgx-h100", "--node", "gpu-1"], capture_output=True,
                            text=True, check=True).stdout
    (tmp_path / "slices.json").write_text(slices)
    proc, port = _start(["--slices", str(tmp_path / "slices.json"), "--scorer", "fewest-free"])
    try:
        pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
               "spec": {"containers": [{"name": "c", "resources": {"limits": {"accel.dev/gpu": "2"}}}]}}
        status, prio = _post(port, "prioritize", {"Pod": pod, "NodeNames": ["gpu-1"]})
        assert status == 200 and isinstance(prio, list) and [p["Host"] for p in prio] == ["gpu-1"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert proc.stderr is not None
        proc.stderr.close()
