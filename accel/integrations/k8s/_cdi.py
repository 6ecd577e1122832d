"""Container Device Interface (CDI) specs from each device's :class:`~accel.model.Binding`.

One spec per vendor and device kind, ``kind: <vendor>.<domain>/<kind>`` (for example
``nvidia.accel.dev/gpu``): the vendor part is the DRA driver name that
:func:`~accel.integrations.k8s.resource_slices` publishes the same devices under, so a DRA
kubelet plugin can answer with CDI ids (``nvidia.accel.dev/gpu=0``) for what it allocated.

Each device gets up to three ``devices[]`` entries with the same edits (CDI device names may hold
``A-Z a-z 0-9 - _ . :`` and start and end with a letter or digit):

- the vendor tool's index (``"0"``), when the device has one;
- its UUID (``"GPU-1b2c..."``; characters outside the CDI set become ``-``), when it has one and
  the UUID was printed by the vendor (a synthesized UUID is not a name anyone would ask for);
- its DRA device name (``"gpu-0000-18-00-0"``), always.  (``accel k8s kubelet-plugin`` writes a
  spec of its own per prepared claim, kind ``<driver>/claim``, with the same edits from
  :func:`device_edits`, so two claims sharing a device never define one CDI name twice.)

plus ``"all"``: every device of the spec at once, with the visibility variable listing every id.

``containerEdits.deviceNodes`` are the binding's ``device_nodes``; the vendor's shared control
nodes (Ascend ``/dev/davinci_manager``, ``/dev/devmm_svm``, ``/dev/hisi_hdc``; Cambricon
``/dev/cambricon_ctl``; ROCm ``/dev/kfd``) go into the spec-level ``containerEdits`` (applied once
whenever any device of the spec is injected). ``containerEdits.env`` is
``<visible_env>=<visible_id>`` where that id names the device itself (a UUID); host indexes
(Ascend, AMD, Cambricon, KunlunXin) are left out by default, as the vendor runtime re-bases them
inside a container that only has some device nodes (``ASCEND_RT_VISIBLE_DEVICES=3`` would name a
chip the container does not have); ``env="host"`` writes them anyway.  Nothing is invented:
nodes the model does not list (NVIDIA's ``/dev/nvidiactl``, ``/dev/nvidia-uvm``; MIG's
``/dev/nvidia-caps``; KunlunXin ``/dev/xpuctrl``; Cambricon ``/dev/cambricon_ipcmN``) are not added.

A device that cannot be described is not silently dropped: it is named in
:attr:`CdiProjection.problems` with a :class:`CdiProblem` code (``no_device_nodes``: the binding
lists no node of the device's own, only shared ones or none; ``no_visible_id``: a visibility
variable without a value; ``duplicate_name``: a name another device already took, that name is
left out; ``invalid_name``: no CDI-valid name could be made).

``cdiVersion`` is ``0.5.0``: the oldest version that allows device names starting with a digit
(index names); nothing else used here needs newer. Checked against the CDI JSON schema only.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...model import Device, HostInventory, Partition
from ._dra import DEFAULT_DOMAIN, _device_name

__all__ = ["CDI_VERSION", "ENV_MODES", "SHARED_NODES", "CdiProblem", "CdiProjection", "cdi_specs", "device_edits",
           "spec_file_name", "write_specs"]

CDI_VERSION = "0.5.0"
#: ``cdi_specs(env=...)``: which visibility-variable edits to write.
ENV_MODES = ("stable", "host", "none")

#: Control nodes a vendor's runtime needs once per container, whichever devices it gets
#: (from the plugins' bindings; see /work/shared/reference/vendors.md).
SHARED_NODES: dict[str, frozenset[str]] = {
    "huawei": frozenset({"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}),
    "cambricon": frozenset({"/dev/cambricon_ctl"}),
    "amd": frozenset({"/dev/kfd"}),
    "hygon": frozenset({"/dev/kfd"}),
}

# CDI's name rules (pkg/parser): vendor and class A-Z a-z 0-9 . - _ (class without '.'),
# device names add ':'; each starts with a letter or digit and ends with one.
_VENDOR = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9]$")
_CLASS = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*[A-Za-z0-9]$|^[A-Za-z]$")
_INDEXES = re.compile(r"^[0-9]+(,[0-9]+)*$")
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class CdiProblem:
    """Why a device (or one of its names) is missing from a spec."""

    device_id: str
    code: str
    message: str


@dataclass
class CdiProjection:
    """The specs, keyed by CDI kind, and what could not be put in them."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[CdiProblem] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems


def _cdi_name(text: str) -> str | None:
    name = re.sub(r"[^A-Za-z0-9_.:-]", "-", text).strip("-_.:")
    return name if _NAME.match(name) else None


def _names(dev: Device) -> list[str]:
    names: list[str] = []
    if dev.index is not None:
        names.append(str(dev.index))
    if dev.uuid and not dev.uuid_synthesized:
        cleaned = _cdi_name(dev.uuid)
        if cleaned:
            names.append(cleaned)
    dra = _device_name(dev)
    if _NAME.match(dra):
        names.append(dra)
    return list(dict.fromkeys(names))


def spec_file_name(kind: str) -> str:
    """The file name CDI's own tooling uses for a spec of ``kind``: ``<vendor>-<class>.json``."""
    vendor, _, cls = kind.partition("/")
    return f"{vendor}-{cls}.json"


def _stable(visible_id: str) -> bool:
    """A visible id that names the device wherever it is (a UUID), not a host index."""
    return not _INDEXES.match(visible_id)


def device_edits(
    dev: Device | Partition, vendor: str, *, env: str = "stable", kind: str = ""
) -> tuple[dict[str, Any], CdiProblem | None] | CdiProblem:
    """The ``containerEdits`` of one device or partition, as :func:`cdi_specs` writes them.

    ``vendor`` is the device's (a partition's parent's).  ``deviceNodes`` are the binding's nodes
    less the vendor's shared control nodes (:data:`SHARED_NODES`, which belong in a spec's own
    edits); ``env`` follows the ``env`` mode of :func:`cdi_specs`.
    Returns the edits and a problem about them (``no_visible_id``), or only a problem
    (``no_device_nodes``) when the binding lists no node of the device's own.
    """
    if env not in ENV_MODES:
        raise ConfigError(f"CDI env mode must be one of {', '.join(ENV_MODES)}, got {env!r}")
    shared = SHARED_NODES.get(vendor, frozenset())
    own = [n for n in dev.binding.device_nodes if n not in shared]
    where = f"{dev.id} ({kind})" if kind else dev.id
    if not own:
        listed = ", ".join(dev.binding.device_nodes) or "none"
        return CdiProblem(dev.id, "no_device_nodes",
                          f"{where}: the binding lists no device node of its own (nodes: {listed}); "
                          "no CDI device for it")
    edits: dict[str, Any] = {"deviceNodes": [{"path": n} for n in own]}
    env_name = dev.binding.visible_env
    visible = dev.binding.visible_id
    if env == "none" or (env == "stable" and visible and not _stable(visible)):
        env_name = None
    if env_name and visible:
        edits["env"] = [f"{env_name}={visible}"]
    elif env_name:
        return edits, CdiProblem(dev.id, "no_visible_id", f"{where}: {env_name} has no value; no env edit")
    return edits, None


def cdi_specs(inv: HostInventory, *, domain: str = DEFAULT_DOMAIN, env: str = "stable") -> CdiProjection:
    """One CDI spec per ``<vendor>.<domain>/<kind>`` for the devices of ``inv``.

    ``env`` chooses the visibility-variable edits: ``"stable"`` (default) only where the
    binding's id names the device itself (a UUID: NVIDIA); ``"host"`` the binding's value as is,
    host indexes included; ``"none"`` no env edits.
    """
    if env not in ENV_MODES:
        raise ConfigError(f"CDI env mode must be one of {', '.join(ENV_MODES)}, got {env!r}")
    out = CdiProjection()
    groups: dict[str, list[Device]] = {}
    for dev in inv.devices:
        groups.setdefault(f"{dev.vendor}.{domain}/{dev.kind.value}", []).append(dev)
    for kind, devices in sorted(groups.items()):
        vendor, _, cls = kind.partition("/")
        if not _VENDOR.match(vendor) or not _CLASS.match(cls):
            raise ConfigError(f"not a valid CDI kind: {kind!r}")
        shared = SHARED_NODES.get(devices[0].vendor, frozenset())
        spec_nodes: list[str] = []
        entries: list[dict[str, Any]] = []
        taken: dict[str, str] = {}
        all_nodes: list[str] = []
        all_ids: dict[str, list[str]] = {}
        for dev in devices:
            for node in dev.binding.device_nodes:
                if node in shared and node not in spec_nodes:
                    spec_nodes.append(node)
            made = device_edits(dev, dev.vendor, env=env, kind=kind)
            if isinstance(made, CdiProblem):
                out.problems.append(made)
                continue
            edits, problem = made
            if problem is not None:
                out.problems.append(problem)
            own = [n["path"] for n in edits["deviceNodes"]]
            for var in edits.get("env", []):
                name, _, visible = var.partition("=")
                all_ids.setdefault(name, []).append(visible)
            names = []
            for name in _names(dev):
                if name in taken or name == "all":
                    out.problems.append(CdiProblem(
                        dev.id, "duplicate_name",
                        f"{dev.id} ({kind}): CDI name {name!r} is already {taken.get(name, 'the all device')}'s; "
                        "left out"))
                    continue
                taken[name] = dev.id
                names.append(name)
            if not names:
                out.problems.append(CdiProblem(
                    dev.id, "invalid_name", f"{dev.id} ({kind}): no CDI-valid device name is left; no CDI device"))
                continue
            entries.extend({"name": name, "containerEdits": edits} for name in names)
            all_nodes.extend(n for n in own if n not in all_nodes)
        if entries:
            everything: dict[str, Any] = {"deviceNodes": [{"path": n} for n in all_nodes]}
            if all_ids:
                everything["env"] = [f"{k}={','.join(v)}" for k, v in all_ids.items()]
            entries.append({"name": "all", "containerEdits": everything})
        spec: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": kind, "devices": entries}
        if spec_nodes:
            spec["containerEdits"] = {"deviceNodes": [{"path": n} for n in spec_nodes]}
        out.specs[kind] = spec
    return out


def write_specs(specs: dict[str, dict[str, Any]], directory: Path, *, force: bool = False) -> list[Path]:
    """Write each spec to ``directory/<vendor>-<class>.json`` atomically (temporary file, rename).

    Refuses (:class:`~accel.errors.ConfigError`, nothing written) when a target exists and
    ``force`` is false.
    """
    if not directory.is_dir():
        raise ConfigError(f"not a directory: {directory}")
    targets = {kind: directory / spec_file_name(kind) for kind in specs}
    if not force:
        existing = sorted(str(p) for p in targets.values() if p.exists())
        if existing:
            raise ConfigError(f"refusing to overwrite {', '.join(existing)} (use --force)")
    written: list[Path] = []
    for kind, path in targets.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(specs[kind], fh, indent=2)
                fh.write("\n")
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise ConfigError(f"cannot write {path}: {exc}") from exc
        written.append(path)
    return written
