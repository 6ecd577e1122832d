"""A kube-scheduler extender backed by :mod:`accel.scheduler` (``accel k8s extender``).

kube-scheduler calls an extender over HTTP with the JSON types of
``k8s.io/kube-scheduler/extender/v1`` (Go structs without JSON tags, so the field names are the
Go names: ``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ``FailedAndUnresolvableNodes``,
``Error``, ``Host``, ``Score``, ``PodName``, ``PodNamespace``, ``PodUID``, ``Node``).  This module
answers three verbs:

* ``POST /filter``: ``ExtenderArgs`` -> ``ExtenderFilterResult``: the nodes where
  :class:`accel.scheduler.Scheduler` finds the pod's devices (its filter stage), every other node
  in ``FailedNodes`` with a reason; a node it has no inventory for is failed, never an error;
* ``POST /prioritize``: ``ExtenderArgs`` -> ``HostPriorityList``: 0..10
  (``MaxExtenderPriority``); the host the scheduler itself would choose gets 10, the others
  0..9 in the order of the scheduler's score (fragmentation-aware ``fgd`` by default);
* ``POST /bind``: ``ExtenderBindingArgs`` -> ``ExtenderBindingResult``: only with a
  :class:`Binder` (a Kubernetes API client); without one it answers an ``Error`` saying so.

Both ``nodeCacheCapable`` modes work: with ``NodeNames`` the nodes come from inventories or
ResourceSlices loaded at start; with full ``Nodes`` each node's ``accel.dev/inventory``
annotation (a ``HostInventory`` JSON document) is read, cached per node by
``metadata.resourceVersion`` (or the annotation text), so the cluster view is rebuilt only when
an inventory changes.  The pod's request: see :func:`pod_request`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from http import HTTPStatus
from itertools import repeat
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..._net import is_loopback
from ..._net.asgi_server import BodyTimeoutError, ServerLimits, read_body
from ..._net.bounded_json import JSONLimitError, JSONLimits, check_bounds, loads_bounded
from ...errors import AccelError, ConfigError
from ...model import HostInventory
from ...scheduler import (
    MILLI,
    DeviceSelector,
    DeviceSpec,
    GangPlacer,
    HostSpec,
    InvalidRequestError,
    Request,
    Scheduler,
    Share,
    TopologyConstraint,
    TopologyLevel,
    host_spec_from_inventory,
)
from ...scheduler import ClusterState as _ClusterState

__all__ = [
    "INVENTORY_ANNOTATION",
    "MAX_ANNOTATION_BYTES",
    "MAX_CONTAINERS",
    "MAX_COUNT",
    "MAX_EXPR_CHARS",
    "MAX_EXTENDER_PRIORITY",
    "MAX_GANG_SIZE",
    "MAX_LIST_ITEMS",
    "MAX_NAME_CHARS",
    "MAX_NODES",
    "MAX_RESOURCES",
    "REQUEST_ANNOTATION",
    "RESOURCE_PREFIX",
    "Binder",
    "Extender",
    "ExtenderServer",
    "PodRequest",
    "PodShapeError",
    "host_specs_from_slices",
    "load_inventories",
    "load_slices",
    "parse_quantity",
    "pod_request",
]

INVENTORY_ANNOTATION = "accel.dev/inventory"
"""Node annotation holding the node's ``HostInventory`` JSON (``accel inventory --json``)."""
REQUEST_ANNOTATION = "accel.dev/request"
"""Pod annotation holding the pod's accelerator request as JSON (see :func:`pod_request`)."""
RESOURCE_PREFIX = "accel.dev/"
"""Extended resources ``accel.dev/<kind>`` in container limits count whole devices of a kind."""
MAX_EXTENDER_PRIORITY = 10
"""``MaxExtenderPriority`` of ``k8s.io/kube-scheduler/extender/v1``."""
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest request body (``--max-body-bytes``): full ``Node`` objects with inventory annotations
for a few thousand nodes fit."""
MAX_NODES = 50_000
"""Most nodes in one call (``NodeNames`` or ``Nodes.items``), and most nodes learnt from
annotations: ten times the 5,000 nodes Kubernetes supports in one cluster."""
MAX_ANNOTATION_BYTES = 256 * 1024
"""Largest ``accel.dev/request`` or ``accel.dev/inventory`` annotation: the API server's limit on
all of an object's annotations together (apimachinery ``TotalAnnotationSizeLimitB``)."""
MAX_NAME_CHARS = 253
"""Longest node, pod, namespace, UID, gang or partition name (a DNS subdomain's 253)."""
MAX_CONTAINERS = 1000
"""Most containers (and, separately, init containers) in one pod."""
MAX_RESOURCES = 256
"""Most entries in one container's ``requests`` or ``limits``."""
MAX_LIST_ITEMS = 256
"""Most entries in one selector list (``vendors``, ``models``...)."""
MAX_EXPR_CHARS = 4096
"""Longest ``selector.expr``."""
MAX_GANG_SIZE = 1_000_000
"""Largest ``gang.size`` accepted at all (more pods than the largest Kubernetes cluster, 5,000
nodes of 110, can run); a smaller gang that the cluster cannot hold (more members than its devices
or pod slots) is answered "does not fit" before any placement is tried."""
MAX_COUNT = 2**53
"""Largest device count, byte count or quantity (an exact float; larger is surely a mistake)."""
DEFAULT_WORKLOAD: tuple[Request, ...] = (
    Request("typical-1", cpu_milli=4000, devices=1), Request("typical-2", cpu_milli=8000, devices=2),
    Request("typical-4", cpu_milli=16000, devices=4), Request("typical-8", cpu_milli=32000, devices=8),
    Request("typical-half", cpu_milli=2000, share=Share(500)))
"""Target workload for fragmentation-aware scorers when none is given (an assumption: pass
your own mix with ``workload=`` / ``--workload``)."""

_UNLIMITED = 2**52  # host CPU / memory when the node source does not say (slices)
_ANNOTATION_JSON = JSONLimits(max_bytes=MAX_ANNOTATION_BYTES, max_depth=16, allow_constants=True)
_INVENTORY_JSON = JSONLimits(max_bytes=MAX_ANNOTATION_BYTES, max_depth=32)
_BODY_JSON = JSONLimits(max_bytes=2**62)  # the server checked the size against --max-body-bytes


# ------------------------------------------------------------------------------------------------
# the pod's request


_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
                       r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {None: 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def _short(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a message never echoes a megabyte back)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def parse_quantity(value: object, *, field: str = "quantity") -> float:
    """A Kubernetes ``resource.Quantity`` (``"500m"``, ``"2"``, ``"1Gi"``, ``"1e9"``) as a number;
    finite and at most :data:`MAX_COUNT` in magnitude, else :class:`InvalidRequestError`."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidRequestError(f"{field}: {_short(value)} is not a quantity", field=field)
    if isinstance(value, str):
        m = _QUANTITY.match(value.strip()) if len(value) <= 64 else None
        if m is None:
            raise InvalidRequestError(f"{field}: {_short(value)} is not a Kubernetes quantity", field=field)
        number = float(m.group(1)) * _SUFFIX[m.group(2)]
    else:
        number = float(value) if abs(value) <= 2 * MAX_COUNT else math.inf  # no 10**400-digit float()
    if not math.isfinite(number) or abs(number) > MAX_COUNT:
        raise InvalidRequestError(f"{field}: {_short(value)} is out of range", field=field)
    return number


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What a pod asks accel for: the :class:`Request`, and its gang (name, size) if any."""

    request: Request
    gang_size: int = 0

    @property
    def wants_devices(self) -> bool:
        return self.request.wants_devices


_REQUEST_KEYS = {"devices", "share", "partition", "selector", "topology", "gang"}
_SELECTOR_KEYS = {"vendors", "models", "architectures", "kinds", "min_memory_bytes", "expr"}


class PodShapeError(InvalidRequestError):
    """The ``Pod`` is not a ``v1.Pod`` (``limits`` as a list, ``spec`` a string...): no API server
    would have stored it, so the request body is malformed (HTTP 400), not the pod's request."""


def _as_mapping(value: object, field: str, error: type[InvalidRequestError] = InvalidRequestError,
                limit: int | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise error(f"{field} must be a JSON object, got {type(value).__name__}", field=field)
    if limit is not None and len(value) > limit:
        raise error(f"{field} has {len(value)} entries; the limit is {limit}", field=field)
    return value


def _int(value: object, field: str, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    if (isinstance(value, bool) or not isinstance(value, int | float) or not minimum <= value <= maximum
            or value != int(value)):  # NaN fails the range test first; +-inf too
        raise InvalidRequestError(f"{field} must be an integer in {minimum}..{maximum}, got {_short(value)}",
                                  field=field)
    return int(value)


def _name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS:
        raise InvalidRequestError(f"{field} must be a non-empty string of at most {MAX_NAME_CHARS} characters, "
                                  f"got {_short(value)}", field=field)
    return value


def _strings(value: object, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if (not isinstance(value, list) or len(value) > MAX_LIST_ITEMS
            or not all(isinstance(v, str) and len(v) <= MAX_NAME_CHARS for v in value)):
        raise InvalidRequestError(f"{field} must be a list of at most {MAX_LIST_ITEMS} strings of at most "
                                  f"{MAX_NAME_CHARS} characters", field=field)
    return tuple(value)


def _container_totals(spec: Mapping[str, Any]) -> tuple[int, int, dict[str, int]]:
    """(cpu milli, memory bytes, accel.dev/<kind> counts): sum over containers, max with init ones."""

    def one(containers: object, field: str) -> list[tuple[int, int, dict[str, int]]]:
        if containers is None:
            return []
        if not isinstance(containers, list) or len(containers) > MAX_CONTAINERS:
            raise PodShapeError(f"{field} must be a list of at most {MAX_CONTAINERS} containers", field=field)
        out = []
        for i, c in enumerate(containers):
            where = f"{field}[{i}]"
            c = _as_mapping(c, where, PodShapeError)
            res = _as_mapping(c.get("resources") or {}, f"{where}.resources", PodShapeError)
            req = _as_mapping(res.get("requests") or {}, f"{where}.resources.requests", PodShapeError, MAX_RESOURCES)
            lim = _as_mapping(res.get("limits") or {}, f"{where}.resources.limits", PodShapeError, MAX_RESOURCES)
            cpu = req.get("cpu", lim.get("cpu"))
            mem = req.get("memory", lim.get("memory"))
            kinds: dict[str, int] = {}
            for name, qty in {**req, **lim}.items():
                if isinstance(name, str) and name.startswith(RESOURCE_PREFIX):
                    kinds[name[len(RESOURCE_PREFIX):]] = _int(parse_quantity(qty, field=f"{where} {name}"),
                                                              f"{where} {name}")
            out.append((math.ceil(parse_quantity(cpu, field="cpu") * MILLI - 1e-9) if cpu is not None else 0,
                        math.ceil(parse_quantity(mem, field="memory") - 1e-9) if mem is not None else 0, kinds))
        return out

    main = one(spec.get("containers"), "spec.containers")
    for c, m, _ in main + one(spec.get("initContainers"), "spec.initContainers"):
        if not 0 <= c < 2**53 or not 0 <= m < 2**62:
            raise InvalidRequestError("container CPU or memory request out of range", field="resources")
    init = one(spec.get("initContainers"), "spec.initContainers")
    cpu = sum(c for c, _, _ in main)
    mem = sum(m for _, m, _ in main)
    kinds: dict[str, int] = {}
    for _, _, k in main:
        for name, n in k.items():
            kinds[name] = kinds.get(name, 0) + n
    for c, m, k in init:
        cpu, mem = max(cpu, c), max(mem, m)
        for name, n in k.items():
            kinds[name] = max(kinds.get(name, 0), n)
    return cpu, mem, {k: v for k, v in kinds.items() if v > 0}


def pod_request(pod: Mapping[str, Any]) -> PodRequest:
    """The accel request of a ``v1.Pod`` (as JSON).  Raises :class:`InvalidRequestError`.

    * host CPU and memory: the sum of the containers' ``requests`` (``limits`` when a request is
      absent), at least the largest init container's, as kube-scheduler counts them;
    * whole devices: extended resources ``accel.dev/<kind>`` (``accel.dev/gpu: 2``) in container
      limits or requests; one kind per pod; the kind becomes a selector;
    * annotation ``accel.dev/request``: a JSON object with any of ``devices`` (int), ``share``
      (``{"compute": 0.25}`` or ``{"compute_milli": 250}``, plus ``memory_bytes``),
      ``partition`` (a profile name such as ``"1g.10gb"``), ``selector`` (``vendors``,
      ``models``, ``architectures``, ``kinds``, ``min_memory_bytes``, ``expr``), ``topology``
      (``{"level": "link_domain", "required": true}``, or just the level) and ``gang``
      (``{"name": "job-7", "size": 4}``).  Unknown keys are an error (a typo must not widen the
      request).  When both the annotation and resources give a device count they must agree.
    """
    meta = _as_mapping(pod.get("metadata") or {}, "metadata", PodShapeError)
    spec = _as_mapping(pod.get("spec") or {}, "spec", PodShapeError)
    for key in ("namespace", "name", "uid"):
        if meta.get(key) is not None and (not isinstance(meta[key], str) or len(meta[key]) > MAX_NAME_CHARS):
            raise PodShapeError(f"metadata.{key} must be a string of at most {MAX_NAME_CHARS} characters",
                                field=f"metadata.{key}")
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name') or meta.get('uid') or 'pod'}"
    cpu, mem, kinds = _container_totals(spec)
    annotations = _as_mapping(meta.get("annotations") or {}, "metadata.annotations", PodShapeError)
    raw = annotations.get(REQUEST_ANNOTATION)
    body: Mapping[str, Any] = {}
    if raw is not None:
        if not isinstance(raw, str):  # annotations are map[string]string
            raise PodShapeError(f"annotation {REQUEST_ANNOTATION} must be a string (JSON text)",
                                field=REQUEST_ANNOTATION)
        try:
            # NaN / Infinity pass the decoder here so that the field they sit in is named below.
            body = _as_mapping(loads_bounded(raw, _ANNOTATION_JSON, what=f"annotation {REQUEST_ANNOTATION}"),
                               REQUEST_ANNOTATION)
        except JSONLimitError as exc:
            raise InvalidRequestError(str(exc), field=exc.field or REQUEST_ANNOTATION) from None
        unknown = sorted(set(body) - _REQUEST_KEYS)
        if unknown:
            raise InvalidRequestError(f"annotation {REQUEST_ANNOTATION}: unknown keys {unknown} "
                                      f"(known: {sorted(_REQUEST_KEYS)})", field=REQUEST_ANNOTATION)
    if len(kinds) > 1:
        raise InvalidRequestError(f"pod asks for more than one accelerator kind: {sorted(kinds)}",
                                  field="resources")
    devices = _int(body["devices"], "devices", 1) if "devices" in body else 0
    sel = dict(_as_mapping(body.get("selector") or {}, "selector"))
    unknown = sorted(set(sel) - _SELECTOR_KEYS)
    if unknown:
        raise InvalidRequestError(f"selector: unknown keys {unknown}", field="selector")
    if kinds:
        (kind, count), = kinds.items()
        if devices and devices != count:
            raise InvalidRequestError(f"annotation asks for {devices} devices, resources for {count} "
                                      f"{RESOURCE_PREFIX}{kind}", field="devices")
        devices = count
        given = _strings(sel.get("kinds", []), "selector.kinds")
        if given and kind not in given:
            raise InvalidRequestError(f"resource {RESOURCE_PREFIX}{kind} contradicts selector.kinds {list(given)}",
                                      field="selector.kinds")
        sel["kinds"] = [kind]
    selector = DeviceSelector(
        vendors=_strings(sel.get("vendors", []), "selector.vendors"),
        models=_strings(sel.get("models", []), "selector.models"),
        architectures=_strings(sel.get("architectures", []), "selector.architectures"),
        kinds=_strings(sel.get("kinds", []), "selector.kinds"),
        min_memory_bytes=_int(sel.get("min_memory_bytes", 0), "selector.min_memory_bytes"),
        expr=_expr(sel.get("expr")))
    share = None
    if body.get("share") is not None:
        sh = _as_mapping(body["share"], "share")
        if "compute_milli" in sh:
            milli = _int(sh["compute_milli"], "share.compute_milli", 1, MILLI)
        elif "compute" in sh and isinstance(sh["compute"], int | float) and not isinstance(sh["compute"], bool):
            if not 0 < sh["compute"] <= 1:  # NaN and infinities fail this too
                raise InvalidRequestError(f"share.compute must be a number in (0, 1], got {_short(sh['compute'])}",
                                          field="share.compute")
            milli = round(float(sh["compute"]) * MILLI)
        else:
            raise InvalidRequestError("share needs compute (0..1) or compute_milli (1..999)", field="share")
        share = Share(milli, _int(sh.get("memory_bytes", 0), "share.memory_bytes"))
    partition = body.get("partition")
    if partition is not None:
        _name(partition, "partition")
    topology = None
    if body.get("topology") is not None:
        top = body["topology"]
        top = {"level": top} if isinstance(top, str) else _as_mapping(top, "topology")
        try:
            level = TopologyLevel(top.get("level", "host"))
        except (ValueError, TypeError) as exc:
            raise InvalidRequestError(f"topology.level must be one of {[str(v) for v in TopologyLevel]}",
                                      field="topology.level") from exc
        topology = TopologyConstraint(level, bool(top.get("required", False)))
    gang, size = None, 0
    if body.get("gang") is not None:
        g = _as_mapping(body["gang"], "gang")
        gang, size = _name(g.get("name"), "gang.name"), _int(g.get("size"), "gang.size", 1, MAX_GANG_SIZE)
    req = Request(name, cpu_milli=cpu, memory_bytes=mem, devices=devices, share=share, partition=partition,
                  selector=selector, topology=topology, gang=gang)
    return PodRequest(req, size)


def _expr(value: object) -> str | None:
    if isinstance(value, str) and len(value) > MAX_EXPR_CHARS:
        raise InvalidRequestError(f"selector.expr is {len(value)} characters long; the limit is {MAX_EXPR_CHARS}",
                                  field="selector.expr")
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------------------------------------
# node sources


def _read_json_docs(path: Path) -> list[Any]:
    files = sorted(p for p in path.iterdir() if p.suffix == ".json") if path.is_dir() else [path]
    docs: list[Any] = []
    for f in files:
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{f}: cannot read JSON: {exc}") from exc
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
            doc = doc["items"]
        docs.extend(doc if isinstance(doc, list) else [doc])
    return docs


def load_inventories(path: str | Path) -> list[HostInventory]:
    """``HostInventory`` documents from a JSON file (one, or a list) or a directory of them."""
    out = []
    for i, doc in enumerate(_read_json_docs(Path(path))):
        try:
            out.append(HostInventory.model_validate(doc))
        except ValueError as exc:
            raise ConfigError(f"{path}: document {i} is not a HostInventory: {exc}") from exc
    return out


def load_slices(path: str | Path) -> list[Mapping[str, Any]]:
    """ResourceSlice objects from a JSON file (one, a list, or a ``List``) or a directory."""
    docs = _read_json_docs(Path(path))
    for i, doc in enumerate(docs):
        if not isinstance(doc, Mapping) or doc.get("kind") != "ResourceSlice":
            raise ConfigError(f"{path}: document {i} is not a ResourceSlice")
    return docs


def _attr(attrs: Mapping[str, Any], *names: str) -> Any:
    for n in names:
        v = attrs.get(n)
        if isinstance(v, Mapping):
            for key in ("string", "int", "bool", "version"):
                if key in v:
                    return v[key]
    return None


def _cap(caps: Mapping[str, Any], name: str) -> int | None:
    v = caps.get(name)
    if isinstance(v, Mapping) and v.get("value") is not None:
        try:
            return int(parse_quantity(v["value"], field=name))
        except InvalidRequestError:
            return None
    return None


def host_specs_from_slices(slices: Iterable[Mapping[str, Any]], *, domain: str = "accel.dev",
                           max_pods: int = 110) -> list[HostSpec]:
    """Scheduler host specs rebuilt from accel's ResourceSlices (``accel dra``'s attribute names).

    Devices of ``type`` ``device`` become devices; ``partition`` entries become partition
    profiles of their parent (matched by ``parentUUID``), each taking the parent's compute in the
    ratio of their ``computeUnits`` (else ``memory``).  Device memory is the published ``memory``
    capacity (the total; inventories give the scheduler the usable bytes).  Slices carry no host
    CPU or memory, so those are unlimited here (kube-scheduler checks them itself)."""
    std = "resource.kubernetes.io"
    per_node: dict[str, list[Mapping[str, Any]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if isinstance(node, str) and node:
            per_node.setdefault(node, []).extend(d for d in spec.get("devices") or [] if isinstance(d, Mapping))
    out = []
    for node, devices in per_node.items():
        parents: list[dict[str, Any]] = []
        parts: list[tuple[str, str, int | None, int | None]] = []
        for d in devices:
            attrs = d.get("attributes") or {}
            caps = d.get("capacity") or {}
            typ = _attr(attrs, f"{domain}/type") or "device"
            if typ == "partition":
                parts.append((str(_attr(attrs, f"{domain}/parentUUID")),
                              str(_attr(attrs, f"{domain}/partitionProfile")),
                              _cap(caps, f"{domain}/computeUnits"), _cap(caps, f"{domain}/memory")))
                continue
            health = str(_attr(attrs, f"{domain}/health") or "unknown")
            numa = _attr(attrs, f"{std}/numaNode", f"{domain}/numaNode")
            parents.append({
                "id": str(_attr(attrs, f"{domain}/id") or f"{node}/{d.get('name')}"),
                "uuid": _attr(attrs, f"{domain}/uuid"),
                "vendor": str(_attr(attrs, f"{domain}/vendor") or "unknown"),
                "kind": str(_attr(attrs, f"{domain}/kind") or "gpu"),
                "model": str(_attr(attrs, f"{domain}/model") or ""),
                "architecture": _attr(attrs, f"{domain}/architecture"),
                "compute_capability": _attr(attrs, f"{domain}/computeCapability", f"{domain}/isa"),
                "memory_bytes": _cap(caps, f"{domain}/memory") or 0,
                "units": _cap(caps, f"{domain}/computeUnits"),
                "healthy": health != "unhealthy" and not any(
                    t.get("effect") in ("NoSchedule", "NoExecute") for t in d.get("taints") or []
                    if isinstance(t, Mapping)),
                "degraded": health in ("degraded", "unknown"),
                "link_domain": _attr(attrs, f"{domain}/linkDomain"),
                "pcie": _attr(attrs, f"{std}/pcieRoot"),
                "numa": int(numa) if isinstance(numa, int) else None,
                "profiles": {},
            })
        by_uuid = {p["uuid"]: p for p in parents if p["uuid"]}
        for parent_uuid, profile, units, mem in parts:
            p = by_uuid.get(parent_uuid)
            if p is None:
                continue
            if units and p["units"]:
                ratio = units / p["units"]
            elif mem and p["memory_bytes"]:
                ratio = mem / p["memory_bytes"]
            else:
                continue
            p["profiles"][profile] = max(1, min(MILLI, round(ratio * MILLI)))
        specs = tuple(DeviceSpec(id=p["id"], vendor=p["vendor"], kind=p["kind"], model=p["model"],
                                 architecture=p["architecture"], memory_bytes=p["memory_bytes"],
                                 compute_capability=None if p["compute_capability"] is None
                                 else str(p["compute_capability"]),
                                 healthy=p["healthy"], degraded=p["degraded"], link_domain=p["link_domain"],
                                 pcie_switch=p["pcie"], numa=p["numa"], partition_profiles=p["profiles"])
                      for p in parents)
        out.append(HostSpec(node, _UNLIMITED, _UNLIMITED, specs, max_pods=max_pods))
    return out


# ------------------------------------------------------------------------------------------------
# the extender


class Binder(Protocol):
    """Binds a pod to a node through the Kubernetes API (``pods/binding``); raises on failure."""

    def __call__(self, namespace: str, name: str, uid: str, node: str) -> None: ...


class _BadRequest(Exception):
    """The request body is not what the protocol sends (answered with HTTP 400)."""


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matches field names case-insensitively on decode; so do we."""
    if name in obj:
        return obj[name]
    low = name.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


@dataclass(slots=True)
class _Bound:
    request: Request
    node: str
    device_ids: tuple[str, ...]


class Extender:
    """The extender's decisions, independent of HTTP (the server calls these).

    ``specs`` / ``inventories`` are the nodes known in advance (``nodeCacheCapable`` mode);
    nodes sent in full (``Nodes``) with an ``accel.dev/inventory`` annotation are added or
    refreshed as they come.  ``scorer``, ``workload`` and ``seed`` are passed to
    :class:`accel.scheduler.Scheduler` unchanged, so a scheduler built with the same arguments on
    the same hosts (in the same order) decides the same."""

    def __init__(self, specs: Iterable[HostSpec] = (), *, inventories: Iterable[HostInventory] = (),
                 scorer: str = "fgd", workload: Sequence[Request] | None = None, seed: int = 0,
                 binder: Binder | None = None, annotation: str = INVENTORY_ANNOTATION,
                 max_pods: int = 110, remember_pods: int = 10000) -> None:
        self.scorer = scorer
        self.workload = tuple(workload) if workload else DEFAULT_WORKLOAD
        self.seed = seed
        self.binder = binder
        self.annotation = annotation
        self.max_pods = max_pods
        self._static: dict[str, HostSpec] = {}
        for spec in [*specs, *(host_spec_from_inventory(i, max_pods=max_pods) for i in inventories)]:
            self._static[spec.name] = spec
        self._dynamic: dict[str, tuple[object, HostSpec]] = {}
        self._names: list[str] = list(self._static)
        self._sched: Scheduler | None = None
        self._placer: GangPlacer | None = None
        self._pods: OrderedDict[str, PodRequest] = OrderedDict()
        self._remember = remember_pods
        self._bound: dict[str, _Bound] = {}
        self._gang_bound: dict[str, int] = {}
        self._gang_plans: dict[tuple[str, int, int], frozenset[int] | None] = {}
        self._epoch = 0
        self.builds = 0
        self._frags: dict[str, bytes] = {}
        self._bad: dict[str, str] = {}
        self._idx_cache: OrderedDict[tuple[str, ...], tuple[int, np.ndarray]] = OrderedDict()
        self._pfrags: dict[str, list[bytes]] = {}
        self._table = np.empty((0, MAX_EXTENDER_PRIORITY + 1), dtype=object)
        self._table_epoch = -1
        self.lock = threading.Lock()

    # -- cluster view ------------------------------------------------------------------------------
    @property
    def scheduler(self) -> Scheduler | None:
        """The current :class:`Scheduler` (``None`` until a node is known)."""
        return self._ensure()

    def _spec(self, name: str) -> HostSpec | None:
        dyn = self._dynamic.get(name)
        return dyn[1] if dyn is not None else self._static.get(name)

    def _ensure(self) -> Scheduler | None:
        if self._sched is None and self._names:
            state = _ClusterState([s for n in self._names if (s := self._spec(n)) is not None])
            self._sched = Scheduler(state, self.scorer, workload=self.workload, seed=self.seed)
            self._placer = GangPlacer(self._sched)
            self.builds += 1
            self._epoch += 1
            for uid, b in list(self._bound.items()):  # allocations recorded by bind survive a rebuild
                if not self._reapply(b):
                    del self._bound[uid]
        return self._sched

    def _reapply(self, b: _Bound) -> bool:
        assert self._sched is not None
        st = self._sched.state
        host = st.host_index.get(b.node)
        if host is None:
            return False
        slots = tuple(st.dev_ids[host].index(d) for d in b.device_ids if d in st.dev_ids[host])
        try:
            st.allocate(b.request, host, slots)
        except AccelError:
            return False
        return True

    def _forget(self, name: str) -> None:
        del self._dynamic[name]
        if name not in self._static:
            self._names.remove(name)

    def _learn_nodes(self, items: Sequence[Any]) -> None:
        """Take inventories from full ``Node`` objects' annotations (cached per resourceVersion)."""
        changed = False
        for node in items:
            if not isinstance(node, Mapping):
                raise _BadRequest("Nodes.items[] must be Node objects")
            meta = node.get("metadata") or {}
            name = meta.get("name") if isinstance(meta, Mapping) else None
            if not isinstance(name, str):
                raise _BadRequest("a Node in Nodes.items has no metadata.name")
            annotations = meta.get("annotations") or {}
            raw = annotations.get(self.annotation) if isinstance(annotations, Mapping) else None
            if len(name) > MAX_NAME_CHARS:
                raise _BadRequest(f"a Node's metadata.name is over {MAX_NAME_CHARS} characters")
            cached = self._dynamic.get(name)
            if not isinstance(raw, str):
                if cached is not None:  # the annotation went away: forget the node's devices
                    self._forget(name)
                    changed = True
                continue
            key: object = ("rv", meta["resourceVersion"]) if meta.get("resourceVersion") else raw
            if cached is not None and cached[0] == key:
                continue
            try:
                check_bounds(raw, _INVENTORY_JSON, what=f"annotation {self.annotation}")
                inv = HostInventory.model_validate_json(raw)
            except ValueError as exc:  # JSONLimitError is one
                if len(self._bad) >= MAX_NODES:
                    self._bad.clear()
                self._bad[name] = f"its {self.annotation} annotation is not a HostInventory: {str(exc)[:200]}"
                if cached is not None:  # never keep placing on a picture the node no longer publishes
                    self._forget(name)
                    changed = True
                continue
            self._bad.pop(name, None)
            if name not in self._dynamic and len(self._dynamic) >= MAX_NODES:
                self._evict(items)
            spec = replace(host_spec_from_inventory(inv, max_pods=self.max_pods), name=name)
            self._dynamic[name] = (key, spec)
            if name not in self._names:
                self._names.append(name)
            if cached is None or cached[1] != spec:
                changed = True
        if changed:
            self._sched = None

    def _evict(self, items: Sequence[Any]) -> None:
        """Make room among the nodes learnt from annotations: forget those this call does not
        name (a client inventing node names must not grow the view without end)."""
        keep = {(n.get("metadata") or {}).get("name") for n in items if isinstance(n, Mapping)}
        drop = {n for n in self._dynamic if n not in keep}
        for name in drop:  # one pass over the names below, not a list.remove per node
            del self._dynamic[name]
        self._names = [n for n in self._names if n not in drop or n in self._static]
        self._sched = None

    # -- helpers -------------------------------------------------------------------------------------
    def _pod(self, args: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
        pod = _field(args, "Pod")
        if not isinstance(pod, Mapping):
            raise _BadRequest("ExtenderArgs.Pod is missing or not an object")
        meta = pod.get("metadata") or {}
        if not isinstance(meta, Mapping):
            raise _BadRequest(f"Pod.metadata must be a JSON object, got {type(meta).__name__}")
        for key in ("uid", "namespace", "name"):
            if meta.get(key) is not None and (not isinstance(meta[key], str) or len(meta[key]) > MAX_NAME_CHARS):
                raise _BadRequest(f"Pod.metadata.{key} must be a string of at most {MAX_NAME_CHARS} characters")
        uid = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        return pod, uid

    def _candidates(self, args: Mapping[str, Any]) -> tuple[list[str], list[Any] | None]:
        """Node names asked about, and the full Node items when sent (non-cache mode)."""
        nodes = _field(args, "Nodes")
        names = _field(args, "NodeNames")
        if nodes is not None:
            if not isinstance(nodes, Mapping) or not isinstance(nodes.get("items", []), list):
                raise _BadRequest("ExtenderArgs.Nodes must be a NodeList with items")
            items = list(nodes.get("items") or [])
            if len(items) > MAX_NODES:
                raise _BadRequest(f"ExtenderArgs.Nodes.items has {len(items)} nodes; the limit is {MAX_NODES}")
            self._learn_nodes(items)
            return [str((n.get("metadata") or {}).get("name")) for n in items], items
        if names is None:
            return [], None
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise _BadRequest("ExtenderArgs.NodeNames must be a list of strings")
        if len(names) > MAX_NODES:
            raise _BadRequest(f"ExtenderArgs.NodeNames has {len(names)} names; the limit is {MAX_NODES}")
        if names and max(map(len, names)) > MAX_NAME_CHARS:
            raise _BadRequest(f"ExtenderArgs.NodeNames: a name is over {MAX_NAME_CHARS} characters")
        return names, None

    def _indices(self, st: _ClusterState, names: list[str]) -> np.ndarray:
        """Host index per candidate name (-1 = unknown); kube-scheduler repeats the same lists,
        so the last few are cached for the current cluster view."""
        key = tuple(names)
        hit = self._idx_cache.get(key)
        if hit is not None and hit[0] == self.builds:  # host indices change only when the view is rebuilt
            self._idx_cache.move_to_end(key)
            return hit[1]
        idx = np.fromiter(map(st.host_index.get, names, repeat(-1)), dtype=np.int64, count=len(names))
        self._idx_cache[key] = (self.builds, idx)
        while len(self._idx_cache) > 8:
            self._idx_cache.popitem(last=False)
        return idx

    def _remember_pod(self, uid: str, pr: PodRequest) -> None:
        self._pods[uid] = pr
        self._pods.move_to_end(uid)
        while len(self._pods) > self._remember:
            self._pods.popitem(last=False)

    def _unknown_reason(self, name: str) -> str:
        if name in self._bad:
            return f"accel cannot use node {name}: {self._bad[name]}"
        return (f"accel has no inventory for node {name} (no {self.annotation} annotation "
                "and not in the extender's inventories or ResourceSlices)")

    @staticmethod
    def _gang_room(st: _ClusterState, req: Request) -> int:
        """Most members like ``req`` the cluster could ever hold: one pod slot each, and whole
        devices (or a share's part of one) each.  A larger gang cannot fit, so it is answered
        without asking the placer, whose work grows with the member count."""
        devices = int(st.n_devices.sum())
        per_device = max(1, MILLI // req.milli_per_device) if req.devices == 0 else 1
        return min(int(st.pods_cap.sum()), devices * per_device // max(1, req.devices))

    def _gang_hosts(self, sched: Scheduler, pr: PodRequest) -> frozenset[int] | None:
        """Hosts of the gang's current all-or-nothing plan, or ``None`` when it does not fit."""
        gang = pr.request.gang
        assert gang is not None and self._placer is not None
        remaining = max(1, pr.gang_size - self._gang_bound.get(gang, 0))
        if remaining > self._gang_room(sched.state, pr.request):
            return None
        key = (gang, remaining, self._epoch)
        if key not in self._gang_plans:
            members = [replace(pr.request, name=f"{pr.request.name}#{i}") for i in range(remaining)]
            allocs = self._placer.place(members, reserve=False)
            hosts = None
            if allocs is not None:
                hosts = frozenset(a.host for a in allocs)
                for a in allocs:
                    sched.state.release(a)
            self._gang_plans = {k: v for k, v in self._gang_plans.items()
                                if k[2] == self._epoch} if len(self._gang_plans) < 10_000 else {}
            self._gang_plans[key] = hosts
        return self._gang_plans[key]

    def _feasible(self, sched: Scheduler, pr: PodRequest) -> tuple[np.ndarray, str]:
        """Per host of the state: does it pass the scheduler's filter (or the gang plan)."""
        st = sched.state
        ok = np.zeros(st.n_hosts, dtype=bool)
        if pr.request.gang is not None and pr.gang_size > 1:
            hosts = self._gang_hosts(sched, pr)
            if hosts is None:
                room = self._gang_room(st, pr.request)
                more = f" (gang.size is over the {room} members the cluster can hold)" if pr.gang_size > room else ""
                return ok, f"gang {pr.request.gang} ({pr.gang_size} members) does not fit on the cluster now{more}"
            ok[list(hosts)] = True
            ok &= st.feasible(pr.request)
            return ok, f"not a host of gang {pr.request.gang}'s placement"
        ok[sched.filter(pr.request)] = True
        return ok, ""

    def _reasons(self, st: _ClusterState, req: Request, hosts: np.ndarray, gang_why: str) -> list[str]:
        """Why each of ``hosts`` fails, computed for all of them at once (few distinct strings)."""
        if len(hosts) == 0:
            return []
        cpu = st.cpu_free[hosts] < req.cpu_milli
        mem = st.mem_free[hosts] < req.memory_bytes
        pods = st.pods_used[hosts] >= st.pods_cap[hosts]
        fit = st.slot_fit(req, hosts).sum(axis=1) if req.wants_devices else np.zeros(len(hosts), dtype=np.int64)
        need = req.device_count
        what = (f"{req.devices} devices" if req.devices else
                f"partition {req.partition}" if req.partition else "a device share")
        cache: dict[tuple[int, int], str] = {}
        out = []
        for c, m, p, f in zip(cpu.tolist(), mem.tolist(), pods.tolist(), fit.tolist(), strict=True):
            code = 1 if c else 2 if m else 3 if p else 4 if f < need else 5
            text = cache.get((code, f))
            if text is None:
                text = cache[(code, f)] = (
                    f"accel: {req.cpu_milli}m CPU wanted, less free" if code == 1 else
                    f"accel: {req.memory_bytes} bytes memory wanted, less free" if code == 2 else
                    "accel: pod slots full" if code == 3 else
                    f"accel: {what} wanted, {f} free" if code == 4 else
                    f"accel: {gang_why or 'refused by a scheduler filter'}")
            out.append(text)
        return out

    # -- verbs -----------------------------------------------------------------------------------
    def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``ExtenderArgs`` -> ``ExtenderFilterResult``."""
        pod, uid = self._pod(args)
        names, items = self._candidates(args)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        try:
            pr = pod_request(pod)
        except PodShapeError as exc:
            raise _BadRequest(f"ExtenderArgs.Pod: {exc}") from None
        except AccelError as exc:
            unresolvable = {n: f"accel: invalid pod request: {exc}" for n in names}
            return self._filter_result([], items, failed, unresolvable)
        self._remember_pod(uid, pr)
        if not pr.wants_devices:
            return self._filter_result(names, items, failed, unresolvable)
        sched = self._ensure()
        passed: list[str] = []
        if sched is None:
            return self._filter_result([], items, {n: self._unknown_reason(n) for n in names}, unresolvable)
        st = sched.state
        ok, why = self._feasible(sched, pr)
        idx = self._indices(st, names)
        known = idx >= 0
        good = np.zeros(len(names), dtype=bool)
        good[known] = ok[idx[known]]
        passed = [names[i] for i in np.nonzero(good)[0].tolist()]
        bad = np.nonzero(~good & known)[0]
        failed = dict(zip([names[i] for i in bad.tolist()], self._reasons(st, pr.request, idx[bad], why),
                          strict=True))
        for i in np.nonzero(~known)[0].tolist():
            failed[names[i]] = self._unknown_reason(names[i])
        return self._filter_result(passed, items, failed, unresolvable)

    @staticmethod
    def _filter_result(passed: list[str], items: list[Any] | None, failed: dict[str, str],
                       unresolvable: dict[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
        if items is None:
            out["Nodes"] = None
            out["NodeNames"] = passed
        else:
            keep = set(passed)
            out["Nodes"] = {"metadata": {},
                            "items": [n for n in items if (n.get("metadata") or {}).get("name") in keep]}
            out["NodeNames"] = None
        return out

    def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``ExtenderArgs`` -> ``HostPriorityList`` (scores 0..``MaxExtenderPriority``)."""
        names, scores, _ = self._prioritize(args)
        listed = scores if isinstance(scores, list) else scores.tolist()
        return [{"Host": n, "Score": s} for n, s in zip(names, listed, strict=True)]

    def _prioritize(self, args: Mapping[str, Any]) -> tuple[list[str], Any, np.ndarray | None]:
        """(names, scores, host index per name or ``None``)."""
        pod, uid = self._pod(args)
        names, _ = self._candidates(args)
        zero = names, [0] * len(names), None
        try:
            pr = pod_request(pod)
        except PodShapeError as exc:
            raise _BadRequest(f"ExtenderArgs.Pod: {exc}") from None
        except AccelError:
            return zero
        self._remember_pod(uid, pr)
        sched = self._ensure()
        if sched is None or not pr.wants_devices:
            return zero
        st = sched.state
        idx = self._indices(st, names)
        ok, _ = self._feasible(sched, pr)
        ok = np.append(ok, False)  # index -1 (unknown node) reads this
        hosts = np.unique(idx[ok[idx]])
        if len(hosts) == 0:
            return zero
        per_host = np.zeros(st.n_hosts + 1, dtype=np.int64)  # the last entry stays 0 for unknown nodes
        if pr.request.gang is not None and pr.gang_size > 1:
            per_host[hosts] = MAX_EXTENDER_PRIORITY
        else:
            scores, _ = sched.score(pr.request, hosts)
            finite = np.isfinite(scores)
            if finite.any():
                best = scores[finite].max()
                low = scores[finite].min()
                tied = np.nonzero(scores == best)[0]
                pick = int(hosts[tied[np.argmin(sched.host_rank[hosts[tied]])]])
                span = best - low
                with np.errstate(invalid="ignore"):
                    scaled = np.full(len(hosts), 9) if span <= 0 else np.minimum(9, ((scores - low) / span * 9))
                per_host[hosts[finite]] = scaled[finite].astype(np.int64)
                per_host[pick] = MAX_EXTENDER_PRIORITY
        return names, per_host[idx], idx

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``ExtenderBindingArgs`` -> ``ExtenderBindingResult``; records the allocation on success."""
        name, ns, uid, node = (_field(args, k) for k in ("PodName", "PodNamespace", "PodUID", "Node"))
        if not all(isinstance(v, str) for v in (name, ns, uid, node)) or not name or not node:
            raise _BadRequest("ExtenderBindingArgs needs PodName, PodNamespace, PodUID and Node strings")
        if max(len(name), len(ns), len(uid), len(node)) > MAX_NAME_CHARS:
            raise _BadRequest(f"ExtenderBindingArgs: PodName, PodNamespace, PodUID and Node are at most "
                              f"{MAX_NAME_CHARS} characters")
        if self.binder is None:
            return {"Error": f"accel extender: no Kubernetes API client is configured, so it cannot bind "
                             f"{ns}/{name} to {node}; leave bindVerb out of the extender configuration "
                             "(kube-scheduler then binds), or run the extender with a binder"}
        pr = self._pods.get(uid)
        try:
            self.binder(ns, name, uid, node)
        except Exception as exc:  # noqa: BLE001 - the binder is the API client: its failure is the answer
            return {"Error": f"accel extender: binding {ns}/{name} to {node} failed: {exc}"}
        sched = self._ensure()
        if pr is not None and pr.wants_devices and sched is not None and node in sched.state.host_index:
            host = sched.state.host_index[node]
            try:
                devs = sched.reserve_devices(pr.request, host)
                alloc = sched.state.allocate(pr.request, host, devs)
            except AccelError as exc:
                return {"Error": f"accel extender: {ns}/{name} was bound to {node}, but its devices no "
                                 f"longer fit there: {exc}"}
            self._bound[uid] = _Bound(pr.request, node, alloc.device_ids)
            if pr.request.gang is not None:
                self._gang_bound[pr.request.gang] = self._gang_bound.get(pr.request.gang, 0) + 1
            self._epoch += 1
        return {"Error": ""}

    def handle(self, verb: str, body: bytes) -> tuple[int, Any]:
        """Answer one POST: (HTTP status, JSON-able body)."""
        fn: Callable[[Mapping[str, Any]], Any] | None = {
            "filter": self.filter, "prioritize": self.prioritize, "bind": self.bind}.get(verb)
        return self._run(verb, fn, body)

    def _run(self, verb: str, fn: Callable[[Mapping[str, Any]], Any] | None, body: bytes) -> tuple[int, Any]:
        try:
            args = loads_bounded(body, _BODY_JSON)
        except JSONLimitError as exc:
            return HTTPStatus.BAD_REQUEST, {"Error": str(exc)}
        if not isinstance(args, Mapping):
            return HTTPStatus.BAD_REQUEST, {"Error": "request body must be a JSON object"}
        if fn is None:
            return HTTPStatus.NOT_FOUND, {"Error": f"unknown verb {verb!r} (filter, prioritize, bind)"}
        try:
            with self.lock:
                return HTTPStatus.OK, fn(args)
        except _BadRequest as exc:
            return HTTPStatus.BAD_REQUEST, {"Error": str(exc)}

    def handle_bytes(self, verb: str, body: bytes) -> tuple[int, bytes]:
        """:meth:`handle`, encoded: what the HTTP server sends back."""
        if verb == "prioritize":
            status, out = self._run(verb, self._prioritize, body)
            if status == HTTPStatus.OK:
                return status, self._encode_priorities(*out)
        else:
            status, out = self.handle(verb, body)
            if status == HTTPStatus.OK and verb == "filter":
                return status, self._encode_filter(out)
        return status, json.dumps(out, separators=(",", ":")).encode()

    def _key(self, name: str) -> bytes:
        """``"name"`` as JSON bytes, cached per node name (names repeat on every call)."""
        frag = self._frags.get(name)
        if frag is None:
            if len(self._frags) > 4 * max(1, len(self._names)) + 100_000:
                self._frags.clear()
            frag = self._frags[name] = json.dumps(name).encode()
        return frag

    def _encode_priorities(self, names: list[str], scores: Any, idx: np.ndarray | None = None) -> bytes:
        if idx is not None and len(idx) and bool((idx >= 0).all()) and self._sched is not None:
            if self._table_epoch != self.builds:  # one fragment per (host, score), made once per view
                hosts = self._sched.state.host_names
                self._table = np.empty((len(hosts), MAX_EXTENDER_PRIORITY + 1), dtype=object)
                for h, n in enumerate(hosts):
                    head = b'{"Host":' + json.dumps(n).encode() + b',"Score":'
                    self._table[h] = [head + b"%d}" % v for v in range(MAX_EXTENDER_PRIORITY + 1)]
                self._table_epoch = self.builds
            return b"[" + b",".join(self._table[idx, np.asarray(scores)].tolist()) + b"]"
        if not isinstance(scores, list):
            scores = scores.tolist()
        frags = self._pfrags
        parts = []
        for n, sc in zip(names, scores, strict=True):
            per = frags.get(n)
            if per is None:
                if len(frags) > 4 * max(1, len(self._names)) + 100_000:
                    frags.clear()
                head = b'{"Host":' + self._key(n) + b',"Score":'
                per = frags[n] = [head + b"%d}" % v for v in range(MAX_EXTENDER_PRIORITY + 1)]
            parts.append(per[sc])
        return b"[" + b",".join(parts) + b"]"

    def _encode_map(self, m: Mapping[str, str]) -> bytes:
        key = self._key
        values: dict[str, bytes] = {}
        parts = []
        for name, reason in m.items():
            v = values.get(reason)
            if v is None:
                v = values[reason] = json.dumps(reason).encode()
            parts.append(key(name) + b":" + v)
        return b"{" + b",".join(parts) + b"}"

    def _encode_filter(self, out: Mapping[str, Any]) -> bytes:
        names = out["NodeNames"]
        return b"".join((
            b'{"Nodes":', json.dumps(out["Nodes"], separators=(",", ":")).encode(),
            b',"NodeNames":', b"null" if names is None else b"[" + b",".join(map(self._key, names)) + b"]",
            b',"FailedNodes":', self._encode_map(out["FailedNodes"]),
            b',"FailedAndUnresolvableNodes":', self._encode_map(out["FailedAndUnresolvableNodes"]),
            b',"Error":', json.dumps(out["Error"]).encode(), b"}"))


# ------------------------------------------------------------------------------------------------
# HTTP


_log = logging.getLogger("accel.extender")


class _App:
    """The extender as an ASGI app: ``POST /<verb>``, ``GET /healthz`` and ``/readyz``.

    The verbs run on the event loop itself: the extender answers one call at a time anyway (its
    lock), every input is bounded, and a call takes milliseconds."""

    def __init__(self, extender: Extender, max_body_bytes: int, limits: ServerLimits) -> None:
        self.extender = extender
        self.max_body_bytes = max_body_bytes
        self.limits = limits

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if method == "GET":
            if path.rstrip("/") in ("/healthz", "/readyz"):
                await _respond(send, HTTPStatus.OK, b'{"ok":true}')
            else:
                await _respond(send, HTTPStatus.NOT_FOUND, b'{"Error":"POST /filter, /prioritize or /bind"}')
            return
        if method != "POST":
            await _respond(send, HTTPStatus.METHOD_NOT_ALLOWED, b'{"Error":"POST /filter, /prioritize or /bind"}')
            return
        verb = path.strip("/").rsplit("/", 1)[-1]
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is None or not length.isdigit():
            await _respond(send, HTTPStatus.LENGTH_REQUIRED, {"Error": "Content-Length is required"}, close=True)
            return
        n = int(length)
        if n > self.max_body_bytes:  # answered from the headers: the body is never read
            await _respond(send, HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                           {"Error": f"request body of {n} bytes is over the limit of {self.max_body_bytes}"},
                           close=True)
            return
        try:
            body = await read_body(receive, n, self.limits.body_timeout_s, scope)
        except BodyTimeoutError as exc:
            await _respond(send, HTTPStatus.REQUEST_TIMEOUT, {"Error": str(exc)}, close=True)
            return
        try:
            status, out = self.extender.handle_bytes(verb, body)
        except Exception as exc:  # noqa: BLE001 - a bug: one line on stderr and a 500, never a dead server
            _log.error("accel: extender: internal error on /%s: %s: %s", verb, type(exc).__name__, exc)
            status = HTTPStatus.INTERNAL_SERVER_ERROR
            out = json.dumps({"Error": f"accel extender: internal error: {exc}"}).encode()
        await _respond(send, status, out)


async def _respond(send: Any, status: int, body: Any, *, close: bool = False) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": int(status), "headers": headers})
    await send({"type": "http.response.body", "body": data})


class ExtenderServer:
    """The extender on HTTP (loopback by default); ``start()`` serves on a thread, ``close()`` stops.

    One event loop holds every connection (uvicorn; see :mod:`accel._net.asgi_server` for the
    timeouts and limits).  ``port=0`` picks a free port (see :attr:`port`)."""

    def __init__(self, extender: Extender, *, listen: str = "127.0.0.1", port: int = 8888,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, verbose: bool = False,
                 limits: ServerLimits | None = None) -> None:
        if not 0 <= port <= 65535:
            raise ConfigError(f"port must be 0..65535, got {port}")
        if max_body_bytes <= 0:
            raise ConfigError("max_body_bytes must be positive")
        from ..._net.asgi_server import BackgroundServer

        try:
            import uvicorn  # noqa: F401
        except ImportError as exc:
            raise ConfigError(f"accel k8s extender serves with uvicorn ({exc}): "
                              "pip install 'accel-sdk[kubernetes]'") from exc
        self.extender = extender
        self.limits = limits or ServerLimits()
        self.server = BackgroundServer(_App(extender, max_body_bytes, self.limits), listen=listen, port=port,
                                       limits=self.limits, name="accel-extender", verbose=verbose)

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> ExtenderServer:
        self.server.start()
        return self

    def shutdown(self) -> None:
        """Ask the server to stop (safe from a signal handler)."""
        self.server.shutdown()

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (uvicorn runs on a thread, so signals stay the caller's)."""
        self.server.start()
        while self.server.running:
            self.server.wait(0.5)

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> ExtenderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _warn(msg: str) -> None:
    print(f"accel: warning: {msg}", file=sys.stderr)


# ------------------------------------------------------------------------------------------------
# the command


def _load_workload(path: str) -> list[Request]:
    try:
        docs = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--workload {path}: cannot read JSON: {exc}") from exc
    if not isinstance(docs, list) or not docs:
        raise ConfigError(f"--workload {path}: expected a non-empty JSON list of accel.dev/request objects")
    out = []
    for i, doc in enumerate(docs):
        count = doc.pop("count", 1) if isinstance(doc, dict) else 1
        pod = {"metadata": {"name": f"workload-{i}", "annotations": {REQUEST_ANNOTATION: json.dumps(doc)}}}
        req = pod_request(pod).request
        out.extend([req] * _int(count, "count", 1))
    return out


def main(args: Any) -> int:
    """Run ``accel k8s extender`` with parsed arguments (see ``_extender_args``)."""
    from ...scheduler import make_scorer

    make_scorer(args.scorer)  # an unknown name is the answer now, not at the first call
    specs: list[HostSpec] = []
    invs: list[HostInventory] = []
    for path in args.inventories or []:
        invs.extend(load_inventories(path))
    for path in args.slices or []:
        specs.extend(host_specs_from_slices(load_slices(path)))
    workload = _load_workload(args.workload) if args.workload else None
    ext = Extender(specs, inventories=invs, scorer=args.scorer, workload=workload, seed=args.seed)
    ext.scheduler  # build the view now: errors at start, not at the first call  # noqa: B018
    if not is_loopback(args.listen):
        _warn(f"extender listens on {args.listen}, reachable beyond this host; the protocol is "
              "unauthenticated (put it behind TLS and a network policy)")
    try:
        server = ExtenderServer(ext, listen=args.listen, port=args.port, max_body_bytes=args.max_body_bytes,
                                verbose=args.verbose)
    except OSError as exc:
        print(f"accel: error: cannot listen on {args.listen}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    host = f"[{args.listen}]" if ":" in args.listen else args.listen
    n = len(ext._names)
    print(f"accel: scheduler extender on http://{host}:{server.port}/ (filter, prioritize, bind; "
          f"{n} node(s) known, scorer {args.scorer})", file=sys.stderr, flush=True)
    import signal

    def _stop(signum: int, frame: object) -> None:
        server.shutdown()

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
    return 0
