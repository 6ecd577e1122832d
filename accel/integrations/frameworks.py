"""Framework device facts (Ray, vLLM, torch) generated from each backend's ``Device.binding``.

One row per vendor accel ships: the visibility variable and what ids go in it, the torch device
type, the collective backend, the Ray resource name, and what a vLLM platform for the vendor
would declare (``device_control_env_var``, ``device_type``).  Rows are *read*, never written by
hand: :func:`read_facts` opens every backend on a recorded replay scenario (or its fake
library) through discovery and projects the first device's binding (:func:`facts_for`).
``tests/frameworks`` compares the rows with Ray's accelerator managers and vLLM's platforms
(``tests/frameworks/upstream.json``); ``docs/frameworks.md`` carries the generated table.

:func:`ray_resources` turns an inventory into ``ray start`` arguments in Ray's conventions:
``GPU`` is ``--num-gpus``, every other name a ``--resources`` entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import AccelError
from ..model import Device, HostInventory

__all__ = [
    "REFERENCE_SCENARIOS",
    "FrameworkFacts",
    "RayResources",
    "facts_for",
    "markdown_table",
    "ray_resources",
    "read_facts",
]

#: The replay scenario (or fake-library scenario) each in-tree backend is read on.
REFERENCE_SCENARIOS: Mapping[str, str] = {
    "nvidia": "h100-nvswitch-8",
    "amd": "mi300x-8",
    "ascend": "910b-8",
    "cambricon": "mlu370-x8",
    "hygon": "k100ai-1dcu",
    "mthreads": "s5000-8",
    "iluvatar": "bi-v150-16",
    "metax": "c550-8",
    "kunlunxin": "p800-8",
    "enflame": "s60-2dev",
}

#: Ray's own resource for GPUs: ``ray start --num-gpus``, never ``--resources``.
RAY_GPU = "GPU"


@dataclass(frozen=True)
class FrameworkFacts:
    """What a framework needs to address one vendor's devices, projected from a binding."""

    backend: str
    vendor: str
    kind: str
    #: The process-level visibility variable (``CUDA_VISIBLE_DEVICES``, ``ASCEND_RT_VISIBLE_DEVICES``...).
    visible_env: str | None
    #: What goes in it: ``uuid``, ``logic id`` (Ascend) or ``index`` (the vendor tool's index).
    index_scheme: str | None
    torch_device_type: str | None
    collective_backend: str | None
    #: The Ray resource devices are scheduled under (``GPU`` means ``--num-gpus``).
    ray_resource: str | None
    #: The variable Ray should set for a task holding the resource (the binding's).
    ray_visible_env: str | None
    #: What a vLLM platform for the vendor should declare (the binding's variable and torch type).
    vllm_device_control_env_var: str | None
    vllm_device_type: str | None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "backend": self.backend,
            "vendor": self.vendor,
            "kind": self.kind,
            "visible_env": self.visible_env,
            "index_scheme": self.index_scheme,
            "torch_device_type": self.torch_device_type,
            "collective_backend": self.collective_backend,
            "ray_resource": self.ray_resource,
            "ray_visible_env": self.ray_visible_env,
            "vllm_device_control_env_var": self.vllm_device_control_env_var,
            "vllm_device_type": self.vllm_device_type,
        }


def _index_scheme(device: Device) -> str | None:
    """Which identity the binding's ``visible_id`` is, read off the device itself."""
    vid = device.binding.visible_id
    if vid is None:
        return None
    if device.uuid is not None and vid == device.uuid:
        return "uuid"
    logic = device.extras.get("huawei.com/chipLogicId")
    if logic is not None and vid == str(logic):
        return "logic id"
    if device.index is not None and vid == str(device.index):
        return "index"
    return "other"


def facts_for(backend: str, device: Device) -> FrameworkFacts:
    """The framework row of ``device`` (read by ``backend``), from its binding only."""
    b = device.binding
    return FrameworkFacts(
        backend=backend,
        vendor=device.vendor,
        kind=str(device.kind),
        visible_env=b.visible_env,
        index_scheme=_index_scheme(device),
        torch_device_type=b.torch_device_type,
        collective_backend=b.collective_backend,
        ray_resource=b.ray_resource,
        ray_visible_env=b.visible_env if b.ray_resource is not None else None,
        vllm_device_control_env_var=b.visible_env,
        vllm_device_type=b.torch_device_type,
    )


def read_facts(scenarios: Mapping[str, str] = REFERENCE_SCENARIOS) -> tuple[FrameworkFacts, ...]:
    """Open each backend on its scenario through discovery and read its first device's row.

    Raises :class:`~accel.errors.AccelError` when a backend does not open or lists no device.
    """
    from ..discovery import open_session
    from ..plugin import BackendConfig

    rows = []
    for name, scenario in scenarios.items():
        config = BackendConfig(options={"scenario": scenario})
        with open_session({name: config}, backends=[name]) as session:
            inv = session.inventory()
        if not inv.devices:
            raise AccelError(f"backend {name!r} listed no device on scenario {scenario!r}", code="frameworks.no-device")
        rows.append(facts_for(name, inv.devices[0]))
    return tuple(rows)


_COLUMNS = (
    ("backend", "backend"),
    ("visible_env", "visibility variable"),
    ("index_scheme", "ids in it"),
    ("torch_device_type", "torch device"),
    ("collective_backend", "collective"),
    ("ray_resource", "Ray resource"),
    ("vllm_device_control_env_var", "vLLM device_control_env_var"),
    ("vllm_device_type", "vLLM device_type"),
)


def markdown_table(rows: Iterable[FrameworkFacts]) -> str:
    """The table ``docs/frameworks.md`` carries (``-`` for unknown)."""
    out = ["| " + " | ".join(title for _, title in _COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for row in rows:
        d = row.as_dict()
        out.append("| " + " | ".join(f"`{d[k]}`" if d[k] else "-" for k, _ in _COLUMNS) + " |")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class RayResources:
    """``ray start`` arguments for one node, in Ray's conventions."""

    num_gpus: int = 0
    resources: dict[str, int] = field(default_factory=dict)
    #: Resource name -> the visibility variable a task holding it must get.
    env: dict[str, str | None] = field(default_factory=dict)
    #: Resource name -> the vendors counted in it.
    vendors: dict[str, list[str]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def command(self) -> str:
        parts = ["ray start"]
        if self.num_gpus:
            parts.append(f"--num-gpus={self.num_gpus}")
        if self.resources:
            parts.append(f"--resources='{json.dumps(self.resources, sort_keys=True)}'")
        return " ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "num_gpus": self.num_gpus,
            "resources": dict(self.resources),
            "env": dict(self.env),
            "vendors": {k: list(v) for k, v in self.vendors.items()},
            "command": self.command(),
            "notes": list(self.notes),
        }


def _custom_name(device: Device) -> str:
    """A resource for a vendor no Ray manager or vLLM platform names: ``<VENDOR>_<KIND>``."""
    return f"{device.vendor}_{device.kind}".upper()


def ray_resources(inv: HostInventory) -> RayResources:
    """Count the inventory's devices per Ray resource name (from each binding)."""
    counts: dict[str, int] = {}
    env: dict[str, str | None] = {}
    vendors: dict[str, list[str]] = {}
    notes: list[str] = []
    for dev in inv.devices:
        name = dev.binding.ray_resource or _custom_name(dev)
        counts[name] = counts.get(name, 0) + 1
        if name in env and env[name] != dev.binding.visible_env:
            notes.append(
                f"{name} is claimed by devices with different visibility variables "
                f"({env[name]} and {dev.binding.visible_env}): Ray cannot tell them apart on one node"
            )
        env.setdefault(name, dev.binding.visible_env)
        if dev.vendor not in vendors.setdefault(name, []):
            vendors[name].append(dev.vendor)
        if dev.binding.ray_resource is None:
            notes.append(f"{dev.vendor}: no Ray manager or vLLM platform names a resource; {name} is a custom one")
    num_gpus = counts.pop(RAY_GPU, 0)
    return RayResources(
        num_gpus=num_gpus,
        resources=dict(sorted(counts.items())),
        env=dict(sorted(env.items())),
        vendors=dict(sorted(vendors.items())),
        notes=tuple(dict.fromkeys(notes)),
    )
