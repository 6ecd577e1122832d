"""Generate clusters of simulated hosts for the scheduler and its benchmarks."""

from __future__ import annotations

import random
import uuid as _uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from ..errors import ConfigError
from ..model import Device, Domain, Host, HostInventory, Link, Partition, SourceInfo
from ._profile import Built, load_profile

__all__ = ["generate_cluster"]

_NS = _uuid.UUID("6f1c1b40-7d1e-4f7e-9a51-acce1acce100")


def _retag(built: Built, host_index: int, hostname: str) -> tuple[list[Device], dict[str, str]]:
    """Give every device a cluster-unique UUID derived from (host, position)."""
    mapping: dict[str, str] = {}
    devices: list[Device] = []
    for pos, dev in enumerate(built.devices):
        if dev.uuid:
            derived = _uuid.uuid5(_NS, f"{hostname}/{pos}")
            prefix = dev.uuid.split("-", 1)[0] if "-" in dev.uuid and not dev.uuid.startswith("0x") else ""
            new_uuid = f"{prefix}-{derived}" if prefix else f"0x{derived.int & (2**64 - 1):016x}"
            new_id = f"{dev.vendor}:{new_uuid}"
            binding = dev.binding.model_copy(update={"visible_id": new_uuid})
            new = dev.model_copy(update={"id": new_id, "uuid": new_uuid, "binding": binding})
        else:
            new_id = dev.id
            new = dev
        mapping[dev.id] = new_id
        devices.append(new)
    return devices, mapping


def generate_cluster(
    hosts: int,
    profile: str | Mapping[str, float] = "dgx-h100",
    *,
    seed: int = 0,
    hosts_per_rack: int = 8,
    hostname_prefix: str = "node",
) -> list[HostInventory]:
    """``hosts`` simulated hosts, each an independent :class:`HostInventory`.

    ``profile`` is one profile name, or a mapping ``{profile: weight}`` drawn from with
    ``seed``.  Hosts are grouped into racks of ``hosts_per_rack`` (``Host.rack``), so
    topology-aware placement has racks to keep gangs in.  Device UUIDs are unique across the
    cluster and stable for a given (hostname, position).
    """
    if hosts < 0:
        raise ConfigError(f"hosts must be >= 0, got {hosts}")
    if hosts_per_rack <= 0:
        raise ConfigError(f"hosts_per_rack must be > 0, got {hosts_per_rack}")
    weights = {profile: 1.0} if isinstance(profile, str) else dict(profile)
    if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ConfigError("profile weights must be non-negative and not all zero")
    builts = {name: load_profile(name) for name in weights}
    names = sorted(weights)
    rng = random.Random(seed)
    now = datetime.now(UTC)
    out: list[HostInventory] = []
    for h in range(hosts):
        name = names[0] if len(names) == 1 else rng.choices(names, [weights[n] for n in names])[0]
        built = builts[name]
        hostname = f"{hostname_prefix}-{h:05d}"
        devices, mapping = _retag(built, h, hostname)
        links = [link.model_copy(update={"a": mapping[link.a], "b": mapping[link.b]}) for link in built.links]
        domains = [
            d.model_copy(update={"id": f"{hostname}/{d.id}", "members": tuple(mapping[m] for m in d.members)})
            for d in built.domains
        ]
        parts = [p.model_copy(update={"parent_id": mapping[p.parent_id]}) for p in built.partitions]
        host = Host(
            hostname=hostname,
            cpu_count=built.profile.host.cpu_count,
            memory_bytes=built.profile.host.memory_bytes,
            numa_nodes=built.profile.host.numa_nodes,
            rack=f"rack-{h // hosts_per_rack:04d}",
        )
        out.append(_inventory(host, devices, links, domains, parts, name, now))
    return out


def _inventory(
    host: Host,
    devices: list[Device],
    links: list[Link],
    domains: list[Domain],
    partitions: list[Partition],
    profile: str,
    now: datetime,
) -> HostInventory:
    return HostInventory(
        host=host,
        devices=tuple(devices),
        links=tuple(links),
        domains=tuple(domains),
        partitions=tuple(partitions),
        collected_at=now,
        sources=(SourceInfo(backend="sim", api="sim", detail=f"generated from profile {profile}"),),
    )
