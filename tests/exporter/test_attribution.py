"""Who uses each device: the kubelet's PodResources List over a real gRPC unix socket (a fake kubelet),
dcgm-exporter's HPC job-mapping directory, the cache and deadline around them, and what the collector
exports (``accel_device_pod_info``, ``accel_device_hpc_job_info``, ``accel_attribution_up``, ``--labels dcgm``)."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

pytest.importorskip("grpc")
pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accel.discovery import discover
from accel.errors import ConfigError
from accel.exporter import AccelCollector, SnapshotSource
from accel.integrations.exporter._args import add_arguments
from accel.integrations.exporter._attribution import Attribution, HpcJobMapping
from accel.integrations.exporter._options import collector_options, rules_text
from accel.integrations.k8s._podresources import DeviceHolder, PodResourcesClient, PodResourcesError
from accel.model import Device, Problem, ProblemKind
from accel.plugin import BackendConfig, register
from tests.exporter._fakes import DEV_A, DEV_B, FakeBackend, FakePlugin
from tests.exporter._podresources_fake import Container, FakeKubelet, Pod, serve

UUID_A = "GPU-11111111-2222-3333-4444-555555555555"


@pytest.fixture
def sock() -> Iterator[Path]:
    # A short path: sun_path holds 108 bytes, and pytest's tmp_path can be longer.
    import tempfile

    with tempfile.TemporaryDirectory(prefix="accel-pr-", dir="/tmp") as d:
        yield Path(d) / "kubelet.sock"


def _source(backend: FakeBackend) -> SnapshotSource:
    register("fake", lambda: FakePlugin(backend))
    report = discover(backends=["fake"], default_config=BackendConfig(enrich_from_sysfs=False))
    return SnapshotSource(report, {}, BackendConfig(enrich_from_sysfs=False), min_interval_s=0)


def _devices(source: SnapshotSource) -> tuple[Device, ...]:
    snap = source.get()
    return tuple(d for r in snap.backends if r.inventory is not None for d in r.inventory.devices)


def _scrape(collector: AccelCollector) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _kubelet() -> FakeKubelet:
    return FakeKubelet(pods=[
        Pod("train-0", "ml", [Container("trainer", [("nvidia.com/gpu", [UUID_A])]),
                              Container("sidecar", [("example.com/nic", ["eth9"])])]),
        # A time-sliced replica of the same GPU (NVIDIA's device plugin: "<uuid>::<replica>").
        Pod("infer-1", "serve", [Container("server", [("nvidia.com/gpu", [f"{UUID_A}::2"])])]),
        # The NPU by its PCI bus id, and a device this host does not have.
        Pod("npu-job", "ml", [Container("main", [("example.com/npu", ["0000:3b:00.0", "GPU-not-here"])])]),
    ])


def test_list_over_the_socket_maps_device_ids_to_accel_devices(sock: Path) -> None:
    backend = FakeBackend()
    devices = _devices(_source(backend))
    with serve(sock, _kubelet()) as kubelet:
        client = PodResourcesClient(str(sock), timeout_s=2)
        try:
            held = client.holders(devices)
        finally:
            client.close()
    assert kubelet.calls == 1
    assert held == {
        DEV_A: (DeviceHolder("ml", "train-0", "trainer"), DeviceHolder("serve", "infer-1", "server")),
        DEV_B: (DeviceHolder("ml", "npu-job", "main"),),
    }


def test_a_missing_socket_and_a_silent_kubelet_are_typed_errors_within_the_deadline(sock: Path) -> None:
    client = PodResourcesClient(str(sock), timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(PodResourcesError, match=r"UNAVAILABLE|DEADLINE_EXCEEDED"):
        client.list_pods()
    assert time.monotonic() - started < 5
    client.close()
    hang = threading.Event()
    with serve(sock, FakeKubelet(hang=hang)):
        client = PodResourcesClient(str(sock), timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(PodResourcesError, match="DEADLINE_EXCEEDED"):
            client.list_pods()
        assert time.monotonic() - started < 3
        client.close()


def test_attribution_is_cached_and_a_dead_source_is_not_asked_every_scrape() -> None:
    now = [0.0]

    class Counting:
        def __init__(self) -> None:
            self.calls = 0
            self.fail = True

        def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[DeviceHolder, ...]]:
            self.calls += 1
            if self.fail:
                raise PodResourcesError("PodResources List on /x: UNAVAILABLE: no socket")
            return {d.id: (DeviceHolder("ns", "p", "c"),) for d in devices}

    pods = Counting()
    said: list[str] = []
    attribution = Attribution(pods=pods, ttl_s=10, clock=lambda: now[0], warn=said.append)
    devices = _devices(_source(FakeBackend()))
    first = attribution.read(devices)
    assert not first.states["pod-resources"].up and "UNAVAILABLE" in (first.states["pod-resources"].reason or "")
    assert first.pods == {}
    now[0] = 5.0
    attribution.read(devices)
    assert pods.calls == 1  # within the interval: the dead socket is not asked again
    pods.fail = False
    now[0] = 10.5
    again = attribution.read(devices)
    assert pods.calls == 2 and again.states["pod-resources"].up
    assert set(again.pods) == {DEV_A, DEV_B}
    # One line when it stopped answering (with the reason), one when it answers again.
    assert said == ["pod-resources: PodResources List on /x: UNAVAILABLE: no socket; devices carry no "
                    "pod-resources attribution", "pod-resources: answers again"]
    now[0] = 11.0
    attribution.read(devices[:1])  # the device set changed: asked at once
    assert pods.calls == 3


def test_hpc_job_mapping_follows_dcgm_exporters_convention(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("4711\n4712\n\n4711\n")
    (tmp_path / "1").write_text("")
    (tmp_path / "2.0").write_text("99\n")  # a MIG instance's file: not the whole GPU
    (tmp_path / "notes.txt").write_text("not a GPU file\n")
    (tmp_path / "3").mkdir()
    assert HpcJobMapping(tmp_path).jobs_by_index() == {0: ("4711", "4712")}
    assert HpcJobMapping(tmp_path / "absent").jobs_by_index() == {}


def test_collector_exports_attribution_and_dcgm_labels(sock: Path, tmp_path: Path) -> None:
    backend = FakeBackend()
    source = _source(backend)
    devices = _devices(source)
    index = {d.id: d.index for d in devices}
    assert index == {DEV_A: None, DEV_B: None}  # the fake has no index: no job file can name them
    jobs_dir = tmp_path / "jobs"
    jobs_dir.mkdir()
    with serve(sock, _kubelet()):
        attribution = Attribution(pods=PodResourcesClient(str(sock)), jobs=HpcJobMapping(jobs_dir), ttl_s=0)
        try:
            plain = _scrape(AccelCollector(source, attribution=attribution))
            dcgm = _scrape(AccelCollector(source, attribution=attribution, labels="dcgm"))
        finally:
            attribution.close()
    pod = frozenset({("device", DEV_A), ("namespace", "ml"), ("pod", "train-0"), ("container", "trainer")})
    assert plain[("accel_device_pod_info", pod)] == 1
    assert plain[("accel_attribution_up", frozenset({("source", "pod-resources")}))] == 1
    assert plain[("accel_attribution_up", frozenset({("source", "hpc-job-mapping")}))] == 1
    assert plain[("accel_utilization_ratio", frozenset({("device", DEV_A)}))] == 0.25
    ident = {"device": DEV_A, "gpu": "", "UUID": UUID_A, "modelName": "Fake X100", "Hostname": "fakehost",
             "pci_bus_id": "0000:1a:00.0", "DCGM_FI_DRIVER_VERSION": "1.2.3", "hpc_job": ""}
    # One copy per holder, as dcgm-exporter --kubernetes does.
    for ns, name, container in (("ml", "train-0", "trainer"), ("serve", "infer-1", "server")):
        labels = frozenset({**ident, "namespace": ns, "pod": name, "container": container}.items())
        assert dcgm[("accel_utilization_ratio", labels)] == 0.25
    util = [k for k in dcgm if k[0] == "accel_utilization_ratio"]
    assert len(util) == 2
    # Identity and attribution families keep their own labels.
    assert dcgm[("accel_device_pod_info", pod)] == 1


def test_job_ids_label_value_series_with_dcgm_labels(tmp_path: Path) -> None:
    # The simulator's devices have enumeration indices, which the job files name.
    register_sim = discover(backends=["sim"], default_config=BackendConfig(options={"profile": "rtx4090-4"}))
    source = SnapshotSource(register_sim, {}, BackendConfig(options={"profile": "rtx4090-4"}), min_interval_s=0)
    try:
        (tmp_path / "1").write_text("8001\n8002\n")
        attribution = Attribution(jobs=HpcJobMapping(tmp_path), ttl_s=0)
        got = _scrape(AccelCollector(source, attribution=attribution, labels="dcgm"))
        devs = {d.index: d.id for d in _devices(source)}
    finally:
        source.close()
    assert got[("accel_device_hpc_job_info", frozenset({("device", devs[1]), ("hpc_job", "8001")}))] == 1
    jobs = {dict(k[1])["hpc_job"] for k in got if k[0] == "accel_power_watts" and dict(k[1])["device"] == devs[1]}
    assert jobs == {"8001", "8002"}
    zero = [dict(k[1]) for k in got if k[0] == "accel_power_watts" and dict(k[1])["device"] == devs[0]]
    assert len(zero) == 1 and zero[0]["hpc_job"] == "" and zero[0]["gpu"] == "0"


def test_gke_device_names_and_replicas_map_to_the_gpu_of_that_index(sock: Path) -> None:
    config = BackendConfig(options={"profile": "rtx4090-4"})
    source = SnapshotSource(discover(backends=["sim"], default_config=config), {}, config, min_interval_s=0)
    try:
        devices = _devices(source)
    finally:
        source.close()
    by_index = {d.index: d.id for d in devices}
    kubelet = FakeKubelet(pods=[
        Pod("a", "ns", [Container("c", [("nvidia.com/gpu", ["nvidia2"])])]),
        Pod("b", "ns", [Container("c", [("nvidia.com/gpu", ["nvidia3/vgpu1"])])]),
        Pod("mig", "ns", [Container("c", [("nvidia.com/gpu", ["nvidia0/gi1"])])]),  # an instance: not mapped
    ])
    with serve(sock, kubelet):
        client = PodResourcesClient(str(sock))
        try:
            held = client.holders(devices)
        finally:
            client.close()
    assert held == {by_index[2]: (DeviceHolder("ns", "a", "c"),), by_index[3]: (DeviceHolder("ns", "b", "c"),)}


def test_a_device_whose_record_failed_is_a_series() -> None:
    backend = FakeBackend()
    backend.problems = (
        Problem(kind=ProblemKind.RECORD, backend="fake", message="row 2 of fake-smi did not parse", device_id=DEV_B),
        Problem(kind=ProblemKind.FIELD, backend="fake", message="power unreadable", device_id=DEV_B),
        Problem(kind=ProblemKind.COMMAND, backend="fake", message="fake-smi --topo exited 1"),
    )
    got = _scrape(AccelCollector(_source(backend)))
    for kind in ("record", "field"):
        key = frozenset({("device", DEV_B), ("backend", "fake"), ("kind", kind)})
        assert got[("accel_device_read_problems", key)] == 1
    assert not [k for k in got if k[0] == "accel_device_read_problems" and ("device", DEV_A) in k[1]]
    assert got[("accel_inventory_complete", frozenset())] == 0
    assert got[("accel_inventory_problems", frozenset({("backend", "fake"), ("kind", "command")}))] == 1


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_options_build_the_collector_options_and_refuse_bad_values(tmp_path: Path) -> None:
    opts = collector_options(_args())
    assert opts == {"labels": "accel", "attribution": None}
    opts = collector_options(_args("--labels", "dcgm", "--pod-resources-socket", "/nonexistent/kubelet.sock",
                                   "--hpc-job-mapping-dir", str(tmp_path), "--attribution-interval", "3"))
    assert opts["labels"] == "dcgm"
    assert opts["attribution"].sources == ("pod-resources", "hpc-job-mapping")
    assert opts["attribution"].ttl_s == 3.0
    for bad in (["--attribution-interval", "-1"], ["--attribution-timeout", "0"], ["--pod-resources-socket", ""],
                ["--attribution-timeout", "nan"]):
        with pytest.raises(ConfigError, match=bad[0]):
            collector_options(_args(*bad))
    with pytest.raises(SystemExit):
        _args("--labels", "prometheus")
    assert "DCGM_FI_DEV_FB_USED" in rules_text(_args("rules", "--dcgm"))
    assert "AccelDeviceUnhealthy" in rules_text(_args("rules"))


def test_pod_resources_without_grpc_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` raises ImportError, as when not installed
    with pytest.raises(ConfigError, match=r"--pod-resources-socket: .*accel-sdk\[kubernetes\]"):
        collector_options(_args("--pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock"))
