"""Which pod and container holds each device: the kubelet's PodResources API v1 ``List``.

The kubelet serves ``v1.PodResourcesLister`` on a unix socket (default
:data:`DEFAULT_SOCKET`; GA in Kubernetes 1.28, kubernetes.io/blog/2023/08/23/kubelet-podresources-api-ga/),
the same API dcgm-exporter asks with ``--kubernetes`` (its ``--pod-resources-kubelet-socket``
has the same default).  ``List`` answers every pod on the node with, per container, the device
ids each device plugin allocated (``resource_name`` such as ``nvidia.com/gpu``).

Device plugins name devices their own way, so an id is matched against every name accel knows
for a device: its UUID (NVIDIA's device plugin: ``GPU-...``), its PCI bus id (in either case,
with or without the PCI domain), accel's own id, and for an NVIDIA GPU with an index the device
name GKE's plugin uses (``nvidia0``; dcgm-exporter's ``--kubernetes-gpu-id-type device-name``).
A shared GPU's id carries a replica suffix (``GPU-...::3`` from NVIDIA's time-slicing,
``nvidia0/vgpu3`` from GKE; dcgm-exporter internal/pkg/transformation/kubernetes.go
``getSharedGPU``/``stripVGPUSuffix``): the part before it names the device.  MIG instances
(``MIG-...``, ``nvidia0/gi1``) and DRA claims (``dynamic_resources``) are not mapped: accel's value
series are per device, and an instance does not hold the whole GPU.

The call has a deadline (:class:`PodResourcesClient` ``timeout_s``) so a kubelet that does not
answer costs one deadline, never a hung scrape; failures raise :class:`PodResourcesError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import AccelError
from ...model import Device

__all__ = ["DEFAULT_SOCKET", "DeviceHolder", "PodResourcesClient", "PodResourcesError", "holders_by_device",
           "require_grpc"]

#: The kubelet's PodResources socket.
DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
#: Largest answer accepted (a node with hundreds of pods answers well under 1 MiB).
_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class PodResourcesError(AccelError):
    """The kubelet's PodResources API could not be asked (no socket, refused, timed out, bad answer)."""

    code = "k8s.pod-resources-unavailable"


@dataclass(frozen=True, order=True)
class DeviceHolder:
    """One container the kubelet allocated a device to."""

    namespace: str
    pod: str
    container: str


def _names(device: Device) -> set[str]:
    names = {device.id}
    if device.vendor == "nvidia" and device.index is not None:
        names.add(f"nvidia{device.index}")
    if device.uuid:
        names.add(device.uuid)
    if device.pci is not None:
        bus = device.pci.bus_id
        names |= {bus, bus.lower(), bus.upper()}
        if bus.count(":") == 2:  # 0000:c1:00.0 -> c1:00.0 as some plugins print it
            short = bus.split(":", 1)[1]
            names |= {short, short.lower(), short.upper()}
    return names


def _base(device_id: str) -> str:
    # A replica of a shared device: the device's own id is before the separator.
    return device_id.split("::", 1)[0].split("/vgpu", 1)[0]


def holders_by_device(
    pods: Iterable[Any], devices: Iterable[Device]
) -> dict[str, tuple[DeviceHolder, ...]]:
    """Map ``List``'s ``pod_resources`` onto accel device ids (devices no pod holds are absent)."""
    owner: dict[str, str] = {}
    for dev in devices:
        for name in _names(dev):
            owner.setdefault(name, dev.id)
    found: dict[str, set[DeviceHolder]] = {}
    for pod in pods:
        for container in pod.containers:
            for alloc in container.devices:
                for raw in alloc.device_ids:
                    dev_id = owner.get(raw) or owner.get(_base(raw))
                    if dev_id is not None:
                        found.setdefault(dev_id, set()).add(DeviceHolder(pod.namespace, pod.name, container.name))
    return {dev: tuple(sorted(holders)) for dev, holders in found.items()}


def require_grpc() -> None:
    """Raise :class:`PodResourcesError` when grpcio or protobuf (extra ``[kubernetes]``) is missing."""
    try:
        import grpc  # noqa: F401

        from ._proto import podresources_v1_pb2, podresources_v1_pb2_grpc  # noqa: F401
    except ImportError as exc:
        raise PodResourcesError(
            f"asking the kubelet's PodResources API needs grpcio and protobuf ({exc}): "
            "pip install 'accel-sdk[kubernetes]'") from exc


class PodResourcesClient:
    """Asks the kubelet's ``PodResourcesLister.List`` over ``socket_path``; each call has ``timeout_s``.

    The channel is made on first use and kept; grpc reconnects it when the kubelet restarts.
    Needs ``grpcio`` and ``protobuf`` (extra ``[kubernetes]``); without them the first call
    raises :class:`PodResourcesError` saying so.
    """

    def __init__(self, socket_path: str = DEFAULT_SOCKET, *, timeout_s: float = 2.0) -> None:
        if not socket_path:
            raise PodResourcesError("the PodResources socket path is empty")
        if not timeout_s > 0:
            raise PodResourcesError(f"the PodResources timeout must be positive, got {timeout_s!r}")
        self.socket_path = socket_path
        self.timeout_s = float(timeout_s)
        self._channel: Any = None
        self._stub: Any = None
        self._pb2: Any = None
        self._grpc: Any = None

    @property
    def target(self) -> str:
        return f"unix://{self.socket_path}" if not self.socket_path.startswith("unix:") else self.socket_path

    def _connect(self) -> None:
        require_grpc()
        import grpc

        from ._proto import podresources_v1_pb2 as pb2
        from ._proto import podresources_v1_pb2_grpc as pb2_grpc

        self._grpc = grpc
        self._pb2 = pb2
        self._channel = grpc.insecure_channel(
            self.target, options=[("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES)])
        self._stub = pb2_grpc.PodResourcesListerStub(self._channel)  # type: ignore[no-untyped-call]

    def list_pods(self) -> tuple[Any, ...]:
        """``List``'s ``pod_resources`` (protobuf ``PodResources`` messages)."""
        if self._stub is None:
            self._connect()
        try:
            answer = self._stub.List(self._pb2.ListPodResourcesRequest(), timeout=self.timeout_s)
        except self._grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            name = code.name if code is not None else "UNKNOWN"
            raise PodResourcesError(
                f"PodResources List on {self.socket_path}: {name}: {str(detail)[:300]}") from exc
        return tuple(answer.pod_resources)

    def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[DeviceHolder, ...]]:
        """Who holds each of ``devices`` (accel device id -> containers), from one ``List``."""
        return holders_by_device(self.list_pods(), devices)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = self._stub = None
