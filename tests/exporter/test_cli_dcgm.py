"""``accel exporter`` end to end with the issue-32 options: ``rules --dcgm``, ``--labels dcgm`` with the
kubelet's PodResources (a fake kubelet on a real unix socket) and a Slurm job-mapping directory, and a
dead socket that leaves the scrape answering with ``accel_attribution_up 0``."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("grpc")

from prometheus_client.parser import text_string_to_metric_families

from tests.exporter._podresources_fake import Container, FakeKubelet, Pod, serve
from tests.exporter._procs import exporter, free_port, get

#: dgx-h100's GPU at index 1 (the simulator's ids are stable).
UUID_1 = "GPU-7b1e0c01-1d2a-4c3b-9e4f-000000000001"


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_rules_dcgm_prints_the_dcgm_recording_rules() -> None:
    out = subprocess.run([sys.executable, "-m", "accel", "exporter", "rules", "--dcgm"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "record: \"DCGM_FI_DEV_FB_USED\"" in out.stdout and "AccelDeviceUnhealthy" not in out.stdout


def test_labels_dcgm_with_pods_and_jobs_over_the_cli(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "1").write_text("4711\n")
    with tempfile.TemporaryDirectory(prefix="accel-pr-", dir="/tmp") as d:
        sock = Path(d) / "kubelet.sock"
        kubelet = FakeKubelet(pods=[Pod("train-0", "ml", [Container("trainer", [("nvidia.com/gpu", [UUID_1])])])])
        port = free_port()
        with serve(sock, kubelet), exporter(["--sim", "dgx-h100", "--labels", "dcgm", "--pod-resources-socket",
                                             str(sock), "--hpc-job-mapping-dir", str(jobs)], port):
            text = get(f"http://127.0.0.1:{port}/metrics")
    got = _samples(text)
    power = [labels for name, labels, _ in got if name == "accel_power_watts" and labels["UUID"] == UUID_1]
    assert power == [{**power[0], "gpu": "1", "namespace": "ml", "pod": "train-0", "container": "trainer",
                      "hpc_job": "4711"}]
    assert ("accel_attribution_up", {"source": "pod-resources"}, 1.0) in got
    assert any(n == "accel_device_pod_info" and lab["pod"] == "train-0" for n, lab, _ in got)


def test_a_dead_socket_does_not_stall_the_scrape(tmp_path: Path) -> None:
    port = free_port()
    with exporter(["--sim", "dgx-h100", "--pod-resources-socket", str(tmp_path / "absent.sock"),
                   "--attribution-timeout", "0.5"], port):
        started = time.monotonic()
        text = get(f"http://127.0.0.1:{port}/metrics")
        took = time.monotonic() - started
    assert took < 5
    got = _samples(text)
    assert ("accel_attribution_up", {"source": "pod-resources"}, 0.0) in got
    assert not [n for n, _, _ in got if n == "accel_device_pod_info"]
    assert any(n == "accel_power_watts" for n, _, _ in got)  # the devices are still exported
