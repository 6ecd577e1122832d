"""Simulator hardware profiles: data files validated into a schema, then into the model.

A profile is a JSON file with device ``templates`` (what every device of one SKU shares),
a ``devices`` list (what differs per device: index, UUID, bus id, NUMA node...), link groups
(``mesh`` = every pair, ``pairs`` = consecutive members) and domains.  Members are device
positions in ``devices``.  A malformed file raises :class:`accel.errors.ProfileError` naming
the file and the field.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import Field

from ..errors import ProfileError, ValidationError
from ..model import (
    Device,
    Domain,
    Host,
    Link,
    Partition,
    PartitionProfile,
    Placement,
    device_id_for,
    validate,
)
from ..model._base import Model, NonNegInt

__all__ = ["SimProfile", "TelemetryParams", "list_profiles", "load_profile"]


class TelemetryParams(Model):
    idle_watts: float = Field(default=50.0, ge=0)
    base_temp_celsius: float = 35.0
    idle_used_bytes: NonNegInt = 0
    vendor_code_prefix: str = "sim.fault"
    ecc_code: str = "ecc"
    lost_code: str = "lost"
    unsupported: tuple[str, ...] = ()


class LinkGroup(Model):
    topology: Literal["mesh", "pairs"] = "mesh"
    members: tuple[NonNegInt, ...] = Field(min_length=2)
    type: str
    count: NonNegInt = 1
    bandwidth_bytes_per_s: NonNegInt | None = None
    via: str | None = None
    generation: NonNegInt | None = None


class DomainSpec(Model):
    id: str
    kind: str
    members: tuple[NonNegInt, ...] = Field(min_length=1)
    bandwidth_bytes_per_s: NonNegInt | None = None


class ProfileSpec(Model):
    devices: tuple[NonNegInt, ...]
    name: str
    profile_id: NonNegInt | None = None
    memory_bytes: NonNegInt | None = None
    compute_units: NonNegInt | None = None
    memory_slices: NonNegInt | None = None
    max_instances: NonNegInt | None = None
    placements: tuple[Placement, ...] = ()


class PartitionSpec(Model):
    device: NonNegInt
    profile: str
    start: NonNegInt
    size: int = Field(gt=0)
    gi_id: NonNegInt | None = None
    ci_id: NonNegInt | None = None
    memory_bytes: NonNegInt | None = None
    compute_units: NonNegInt | None = None
    uuid: str | None = None


class SimProfile(Model):
    """The schema of a profile file (see the module docstring)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str
    based_on: str | None = None
    host: Host
    templates: dict[str, dict[str, Any]]
    devices: tuple[dict[str, Any], ...] = Field(min_length=1)
    link_groups: tuple[LinkGroup, ...] = ()
    domains: tuple[DomainSpec, ...] = ()
    partition_profiles: tuple[ProfileSpec, ...] = ()
    partitions: tuple[PartitionSpec, ...] = ()


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


_DEVICE_KEYS_ON_PCI = ("bus_id", "pcie_root", "bridge_path")


class Built:
    """A profile turned into model objects (the static part of a simulated host)."""

    def __init__(self, profile: SimProfile, source: str) -> None:
        self.profile = profile
        self.source = source
        self.devices: list[Device] = []
        self.telemetry: list[TelemetryParams] = []
        for i, raw in enumerate(profile.devices):
            self.devices.append(self._device(i, raw))
        ids = [d.id for d in self.devices]
        self.links = self._links(ids)
        self.domains = [
            self._wrap(
                f"domains[{k}]",
                lambda spec=spec: Domain(
                    id=spec.id,
                    kind=spec.kind,
                    members=tuple(self._member(ids, m, "domains") for m in spec.members),
                    bandwidth_bytes_per_s=spec.bandwidth_bytes_per_s,
                ),
            )
            for k, spec in enumerate(profile.domains)
        ]
        self.partition_profiles: list[PartitionProfile] = []
        for k, spec in enumerate(profile.partition_profiles):
            for m in spec.devices:
                data = spec.model_dump(exclude={"devices"})
                data["parent_id"] = self._member(ids, m, "partition_profiles")
                self.partition_profiles.append(self._validate(PartitionProfile, data, f"partition_profiles[{k}]"))
        self.partitions: list[Partition] = []
        for k, part in enumerate(profile.partitions):
            parent = self._member(ids, part.device, "partitions")
            pid = f"{self.devices[part.device].vendor}:{part.uuid}" if part.uuid else f"{parent}/gi{part.gi_id}"
            data = {
                "id": pid,
                "parent_id": parent,
                "profile": part.profile,
                "placement": {"start": part.start, "size": part.size},
                "uuid": part.uuid,
                "gi_id": part.gi_id,
                "ci_id": part.ci_id,
                "memory_bytes": part.memory_bytes,
                "compute_units": part.compute_units,
                "binding": self.devices[part.device].binding.model_copy(update={"visible_id": part.uuid}),
            }
            self.partitions.append(self._validate(Partition, data, f"partitions[{k}]"))

    def _wrap(self, where: str, fn: Any) -> Any:
        try:
            return fn()
        except pydantic.ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in first.get("loc", ()))
            raise ProfileError(f"profile {self.source}: {where}.{loc}: {first.get('msg')}") from exc

    def _validate(self, cls: Any, data: dict[str, Any], where: str) -> Any:
        try:
            return validate(cls, data, what=where)
        except ValidationError as exc:
            raise ProfileError(f"profile {self.source}: {exc}") from exc

    def _member(self, ids: list[str], position: int, where: str) -> str:
        if position >= len(ids):
            raise ProfileError(f"profile {self.source}: {where}: no device at position {position}")
        return ids[position]

    def _device(self, i: int, raw: dict[str, Any]) -> Device:
        name = raw.get("template")
        if not isinstance(name, str) or name not in self.profile.templates:
            known = ", ".join(sorted(self.profile.templates))
            raise ProfileError(f"profile {self.source}: devices[{i}].template: {name!r} is not one of: {known}")
        template = dict(self.profile.templates[name])
        params = template.pop("telemetry", {})
        own = {k: v for k, v in raw.items() if k != "template"}
        pci_own = {k: own.pop(k) for k in _DEVICE_KEYS_ON_PCI if k in own}
        data = _merge(template, own)
        if pci_own:
            data["pci"] = _merge(data.get("pci", {}), pci_own)
        bus = data.get("pci", {}).get("bus_id")
        try:
            data["id"] = device_id_for(str(data.get("vendor")), uuid=data.get("uuid"), bus_id=bus)
        except ValueError as exc:
            raise ProfileError(f"profile {self.source}: devices[{i}]: {exc}") from exc
        binding = dict(data.get("binding", {}))
        binding.setdefault("visible_id", data.get("uuid") or str(data.get("index", i)))
        # A template names its device nodes with "{index}" (``/dev/davinci{index}``): the
        # vendor's own numbering, one node per device plus the shared control nodes.
        index = data.get("index", i)
        binding["device_nodes"] = [str(n).replace("{index}", str(index)) for n in binding.get("device_nodes", ())]
        # ... and a vendor whose variable takes indices, not UUIDs, says "visible_id": "{index}".
        binding["visible_id"] = str(binding["visible_id"]).replace("{index}", str(index))
        data["binding"] = binding
        self.telemetry.append(self._wrap(f"templates.{name}.telemetry", lambda: TelemetryParams(**params)))
        dev: Device = self._validate(Device, data, f"devices[{i}]")
        return dev

    def _links(self, ids: list[str]) -> list[Link]:
        links: list[Link] = []
        for k, group in enumerate(self.profile.link_groups):
            members = [self._member(ids, m, f"link_groups[{k}]") for m in group.members]
            if group.topology == "mesh":
                pairs = [(a, b) for x, a in enumerate(members) for b in members[x + 1 :]]
            else:
                pairs = list(zip(members[::2], members[1::2], strict=False))
            for a, b in pairs:
                data = {
                    "a": a,
                    "b": b,
                    "type": group.type,
                    "count": group.count,
                    "bandwidth_bytes_per_s": group.bandwidth_bytes_per_s,
                    "via": group.via,
                    "generation": group.generation,
                }
                links.append(self._validate(Link, data, f"link_groups[{k}]"))
        return links


def _parse(text: str, source: str) -> Built:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"profile {source}: not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    try:
        profile = SimProfile.model_validate(raw)
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ProfileError(f"profile {source}: {loc}: {first.get('msg')}") from exc
    return Built(profile, source)


def list_profiles() -> list[str]:
    """Names of the built-in profiles."""
    folder = resources.files("accel.sim").joinpath("profiles")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


@cache
def _builtin(name: str) -> Built:
    folder = resources.files("accel.sim").joinpath("profiles")
    return _parse(folder.joinpath(f"{name}.json").read_text(encoding="utf-8"), f"{name!r}")


def load_profile(name_or_path: str) -> Built:
    """A built-in profile by name, or a profile file by path (``*.json``)."""
    if name_or_path.endswith(".json") or "/" in name_or_path:
        path = Path(name_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ProfileError(f"profile file {str(path)!r} cannot be read: {exc.strerror}") from exc
        return _parse(text, repr(str(path)))
    known = list_profiles()
    if name_or_path not in known:
        from ..errors import ConfigError

        raise ConfigError(f"unknown simulator profile {name_or_path!r}; known profiles: {', '.join(known)}")
    return _builtin(name_or_path)
