"""A kubelet PodResources v1 server for tests: the generated servicer on a real unix socket.

It speaks the real protocol (``/v1.PodResourcesLister/List`` over gRPC on a unix socket, the
messages of ``podresources_v1.proto``); what it answers is the ``pods`` it is given, as a kubelet
answers with the pods it runs.  ``hang`` (an event) makes ``List`` wait until it is set, as a
kubelet that accepts the connection and never answers.  ``calls`` counts the ``List`` calls.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from accel.integrations.k8s._proto import podresources_v1_pb2 as pb2
from accel.integrations.k8s._proto import podresources_v1_pb2_grpc as pb2_grpc


@dataclass
class Container:
    name: str
    #: (resource name, device ids) per device-plugin allocation.
    devices: Sequence[tuple[str, Sequence[str]]] = ()


@dataclass
class Pod:
    name: str
    namespace: str
    containers: Sequence[Container] = ()


@dataclass
class FakeKubelet:
    pods: list[Pod] = field(default_factory=list)
    hang: threading.Event | None = None
    calls: int = 0


class _Servicer(pb2_grpc.PodResourcesListerServicer):  # type: ignore[misc]
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    def List(self, request: Any, context: Any) -> Any:  # the gRPC method's name
        self.kubelet.calls += 1
        if self.kubelet.hang is not None:
            self.kubelet.hang.wait(30)
        answer = pb2.ListPodResourcesResponse()
        for pod in self.kubelet.pods:
            msg = answer.pod_resources.add(name=pod.name, namespace=pod.namespace)
            for c in pod.containers:
                cmsg = msg.containers.add(name=c.name)
                for resource, ids in c.devices:
                    cmsg.devices.add(resource_name=resource, device_ids=list(ids))
        return answer


@contextmanager
def serve(socket_path: Path, kubelet: FakeKubelet) -> Iterator[FakeKubelet]:
    """Serve ``kubelet`` on ``socket_path`` until the block ends."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="fake-kubelet"))
    pb2_grpc.add_PodResourcesListerServicer_to_server(_Servicer(kubelet), server)
    server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    try:
        yield kubelet
    finally:
        if kubelet.hang is not None:
            kubelet.hang.set()
        server.stop(grace=None).wait(5)
