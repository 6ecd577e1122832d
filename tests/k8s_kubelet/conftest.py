"""The kubelet plugin under test, driven the way the kubelet drives it (gRPC on unix sockets)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")
pytest.importorskip("kubernetes")
pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")

import grpc  # noqa: E402
from kubernetes import client as k8s  # noqa: E402

from accel.integrations.k8s._kubeapi import ClientApi  # noqa: E402
from accel.integrations.k8s._kubelet import KubeletPlugin, KubeletPluginServer  # noqa: E402
from accel.integrations.k8s._proto import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc  # noqa: E402
from accel.integrations.k8s._proto import pluginregistration_v1_pb2 as reg_pb2  # noqa: E402
from accel.integrations.k8s._proto import pluginregistration_v1_pb2_grpc as reg_grpc  # noqa: E402
from accel.model import HostInventory  # noqa: E402
from accel.plugin import BackendConfig  # noqa: E402
from accel.sim import PLUGIN as SIM  # noqa: E402
from tests.k8s_kubelet._fakeapi import FakeApiServer  # noqa: E402

DRIVER = "nvidia.accel.dev"
NODE = "node-1"
CDI_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"


def inventory(profile: str = "dgx-h100", faults: str | None = None) -> HostInventory:
    options = {"profile": profile} | ({"faults": faults} if faults else {})
    with SIM.open(BackendConfig(options=options)) as backend:
        return backend.inventory()


def _cdi_validator() -> Any:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    schema = json.loads((CDI_FIXTURES / "schema.json").read_text())
    defs = json.loads((CDI_FIXTURES / "defs.json").read_text())
    registry = Registry().with_resource("defs.json", Resource.from_contents(defs, default_specification=DRAFT7))
    return jsonschema.Draft7Validator(schema, registry=registry)


_CDI = _cdi_validator()


def cdi_errors(spec: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _CDI.iter_errors(spec)]


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer()
    yield server
    server.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory: a unix socket path holds at most 107 bytes, pytest's tmp_path can be longer."""
    path = Path(tempfile.mkdtemp(prefix="akp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def client_api(fake: FakeApiServer, timeout_s: float = 5.0) -> ClientApi:
    cfg = k8s.Configuration()
    cfg.host = fake.url
    return ClientApi(api_client=k8s.ApiClient(cfg), timeout_s=timeout_s)


@dataclass
class Running:
    plugin: KubeletPlugin
    server: KubeletPluginServer
    base: Path

    @property
    def cdi_dir(self) -> Path:
        return self.base / "cdi"

    def stop(self) -> None:
        """Stop serving and release the state directory (what a process exit does)."""
        self.server.stop(grace=0)
        self.plugin.close()

    def channel(self, path: Path | None = None) -> grpc.Channel:
        return grpc.insecure_channel(f"unix://{path or self.server.dra_socket}")

    def v1(self) -> Any:
        return dra_v1_pb2_grpc.DRAPluginStub(self.channel())

    def v1beta1(self) -> Any:
        return dra_v1beta1_pb2_grpc.DRAPluginStub(self.channel())

    def registration(self) -> Any:
        return reg_grpc.RegistrationStub(self.channel(self.server.registration_socket))


Start = Callable[..., Running]


@pytest.fixture
def start(fake: FakeApiServer, short_dir: Path) -> Iterator[Start]:
    """Start a plugin and its servers on ``short_dir`` (again after a stop: a restart)."""
    running: list[Running] = []

    def _start(inv: Callable[[], HostInventory] | None = None, *, timeout_s: float = 5.0,
               base: Path | None = None, **kwargs: Any) -> Running:
        base = base or short_dir
        plugin = KubeletPlugin(driver=kwargs.pop("driver", DRIVER), node=NODE, inventory=inv or inventory,
                               api=client_api(fake, timeout_s), cdi_dir=base / "cdi", state_dir=base / "state",
                               **kwargs)
        server = KubeletPluginServer(plugin, plugin_dir=base / "plugins" / DRIVER,
                                     registry_dir=base / "plugins_registry")
        server.start()
        r = Running(plugin, server, base)
        running.append(r)
        return r

    yield _start
    for r in running:
        r.stop()


def claim_msg(pb2: Any, uid: str, name: str, namespace: str = "default") -> Any:
    return pb2.Claim(namespace=namespace, uid=uid, name=name)


__all__ = ["CDI_FIXTURES", "DRIVER", "NODE", "Running", "Start", "cdi_errors", "claim_msg", "client_api",
           "dra_v1_pb2", "dra_v1beta1_pb2", "inventory", "reg_pb2"]
