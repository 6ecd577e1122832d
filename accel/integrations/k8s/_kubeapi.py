"""What the DRA kubelet plugin asks of the Kubernetes API, and the official client behind it.

:class:`KubeApi` is the small surface the plugin needs: read a ResourceClaim and the Node, and
list, create, replace and delete this node's ResourceSlices (``resource.k8s.io/v1``).  :class:`ClientApi`
implements it with the official ``kubernetes`` Python client (``ResourceV1Api``, extra
``[kubernetes]``), loaded only when one is made; every call has a deadline, and every failure is
a :class:`KubeApiError` (:class:`KubeApiTimeoutError` when the deadline passed) naming the call.
Objects go in and come out as plain dicts in the API's own JSON shape.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Protocol

from ...errors import AccelError, ConfigError

__all__ = ["ClientApi", "KubeApi", "KubeApiError", "KubeApiTimeoutError"]


class KubeApiError(AccelError):
    """The Kubernetes API answered with an error, or could not be reached.

    ``status`` is the HTTP status when there was an answer (404: not found, 409: conflict).
    """

    code = "k8s.api-error"

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.status = status


class KubeApiTimeoutError(KubeApiError):
    """The Kubernetes API did not answer within the deadline."""

    code = "k8s.api-timeout"


class KubeApi(Protocol):
    """The calls the kubelet plugin makes; objects are dicts in the API's JSON shape."""

    def read_claim(self, namespace: str, name: str) -> dict[str, Any]:
        """The ResourceClaim ``namespace/name`` (``KubeApiError`` with status 404 when absent)."""
        ...

    def read_node(self, name: str) -> dict[str, Any]:
        """The Node ``name`` (its uid makes it the owner of the node's slices)."""
        ...

    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]:
        """The ResourceSlices of ``driver`` on ``node``."""
        ...

    def create_slice(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def replace_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace the slice named in ``obj``; ``metadata.resourceVersion`` guards the update."""
        ...

    def delete_slice(self, name: str) -> None: ...


def _is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a timeout: urllib3's, or the socket's."""
    from urllib3.exceptions import MaxRetryError
    from urllib3.exceptions import TimeoutError as Urllib3Timeout

    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError | Urllib3Timeout):
            return True
        if isinstance(seen, MaxRetryError) and isinstance(seen.reason, BaseException):
            seen = seen.reason
            continue
        seen = seen.__cause__ or seen.__context__
    return False


class ClientApi:
    """:class:`KubeApi` through the official client.

    ``kubeconfig``: a kubeconfig file; ``None`` tries the in-cluster service account, then the
    default kubeconfig.  ``api_client``: an already configured ``kubernetes.client.ApiClient``
    (tests point one at a fake server).  ``timeout_s`` bounds every call.
    """

    def __init__(self, *, kubeconfig: str | None = None, api_client: Any = None, timeout_s: float = 10.0) -> None:
        if not timeout_s > 0:
            raise ConfigError(f"API timeout must be > 0 seconds, got {timeout_s!r}")
        try:
            from kubernetes import client, config
        except ImportError as exc:
            raise ConfigError(f"the Kubernetes client is not installed ({exc}): pip install 'accel-sdk[kubernetes]'") \
                from exc
        self.timeout_s = timeout_s
        if api_client is None:
            api_client = self._configured(client, config, kubeconfig)
        self._client = api_client
        self._api = client.ResourceV1Api(api_client)
        self._core = client.CoreV1Api(api_client)
        self._models = client

    @staticmethod
    def _configured(client: Any, config: Any, kubeconfig: str | None) -> Any:
        try:
            if kubeconfig is not None:
                config.load_kube_config(config_file=kubeconfig)
            else:
                try:
                    config.load_incluster_config()
                except config.ConfigException:
                    config.load_kube_config()
        except (config.ConfigException, OSError, ValueError, TypeError) as exc:
            where = kubeconfig or "in-cluster or the default kubeconfig"
            raise ConfigError(f"cannot load the Kubernetes configuration ({where}): {exc}") from exc
        return client.ApiClient()

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            response = fn(*args, _request_timeout=self.timeout_s, _preload_content=False, **kwargs)
            data = response.data
        except ApiException as exc:
            reason = exc.reason or ""
            with contextlib.suppress(ValueError, AttributeError):  # a Status object names the cause
                reason = json.loads(exc.body or "{}").get("message") or reason
            raise KubeApiError(f"Kubernetes API: {what}: HTTP {exc.status}: {reason}", status=exc.status) from exc
        except Exception as exc:  # urllib3's and the socket's errors: the server was not reached in time
            if _is_timeout(exc):
                raise KubeApiTimeoutError(
                    f"Kubernetes API: {what}: no answer within {self.timeout_s:g} s ({type(exc).__name__})") from exc
            raise KubeApiError(f"Kubernetes API: {what}: {type(exc).__name__}: {exc}") from exc
        try:
            out: Any = json.loads(data) if data else {}
        except ValueError as exc:
            raise KubeApiError(f"Kubernetes API: {what}: the answer is not JSON") from exc
        return out

    def _slice_model(self, obj: dict[str, Any]) -> Any:
        model = self._models.V1ResourceSlice
        return model.from_dict(obj) if hasattr(model, "from_dict") else obj

    def read_claim(self, namespace: str, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self._call(f"get resourceclaim {namespace}/{name}",
                                         self._api.read_namespaced_resource_claim, name, namespace)
        return out

    def read_node(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self._call(f"get node {name}", self._core.read_node, name)
        return out

    def list_slices(self, driver: str, node: str) -> list[dict[str, Any]]:
        out = self._call(f"list resourceslices of {driver} on {node}", self._api.list_resource_slice,
                         field_selector=f"spec.driver={driver},spec.nodeName={node}")
        items: list[dict[str, Any]] = out.get("items") or []
        return items

    def create_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self._call(f"create resourceslice {obj['metadata']['name']}",
                                         self._api.create_resource_slice, self._slice_model(obj))
        return out

    def replace_slice(self, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        out: dict[str, Any] = self._call(f"replace resourceslice {name}", self._api.replace_resource_slice, name,
                                         self._slice_model(obj))
        return out

    def delete_slice(self, name: str) -> None:
        self._call(f"delete resourceslice {name}", self._api.delete_resource_slice, name)

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()
