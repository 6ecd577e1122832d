"""Hardware partitions (MIG instances and the like) as the service schedules them.

A device split into hardware-isolated partitions (an NVIDIA GPU in MIG mode with its GPU
instances made) cannot run a job as a whole device any more: what a job can be given is one of
its partitions.  :func:`schedulable` therefore offers such a device to the engine as its
partitions, each a device of its own in the pool ``"<device model> / <profile>"`` (the scheme
of NVIDIA's device plugin's "mixed" strategy, where ``nvidia.com/mig-1g.10gb`` is a resource of
its own): a job asks for ``partition: "1g.10gb"`` (and optionally a model), gets whole
partitions of that profile, and its visibility variable names the partition
(``CUDA_VISIBLE_DEVICES=MIG-...``) from the partition's own ``binding``.  Devices without
partitions are offered as they are.  A partition is as healthy as its device unless it reports
itself out of service (a MIG GPU instance left without a compute instance is ``offline``): then
its own health, so no job is placed on it.  Its memory is its own, and its list price is its
device's times its share of the device (its ``compute_ratio``, else its share of the device's
memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accel.model import Device, HostInventory, Operational, Partition, PartitionFamily

__all__ = ["PartitionPool", "is_partition_pool", "partition_pool", "partition_prices", "pool_profile", "schedulable"]

_SEP = " / "


def partition_pool(model: str, profile: str) -> str:
    """The pool of ``profile`` partitions of ``model`` devices."""
    return f"{model}{_SEP}{profile}"


def pool_profile(pool: str) -> str | None:
    """The partition profile of a pool, ``None`` for a pool of whole devices."""
    _model, sep, profile = pool.rpartition(_SEP)
    return profile if sep else None


def is_partition_pool(pool: str) -> bool:
    return pool_profile(pool) is not None


@dataclass(frozen=True, slots=True)
class PartitionPool:
    """A pool of partitions: its devices' model and the share of a device one partition is."""

    parent_model: str
    fraction: float


def schedulable(inv: HostInventory) -> tuple[HostInventory, dict[str, PartitionPool]]:
    """``inv`` as the engine places on it (see the module docstring), and its partition pools."""
    parts: dict[str, list[Partition]] = {}
    for part in inv.partitions:
        if part.family == PartitionFamily.HARDWARE_ISOLATED and part.parent_id:
            parts.setdefault(part.parent_id, []).append(part)
    if not parts:
        return inv, {}
    pools: dict[str, PartitionPool] = {}
    devices: list[Device] = []
    for dev in inv.devices:
        mine = sorted(parts.get(dev.id, ()), key=lambda p: (p.placement.start if p.placement else 0, p.id))
        if not mine:
            devices.append(dev)
            continue
        model = dev.model or "unknown"
        total = sum(m.total_bytes or 0 for m in dev.memory)
        for p in mine:
            fraction = p.compute_ratio or (p.memory_bytes / total if p.memory_bytes and total else None)
            pool = partition_pool(model, p.profile)
            pools.setdefault(pool, PartitionPool(model, round(fraction, 6) if fraction else 0.0))
            memory = (
                tuple(
                    m.model_copy(
                        update={
                            "total_bytes": p.memory_bytes,
                            "usable_bytes": p.memory_bytes,
                            "used_bytes": None,
                            "reserved_bytes": None,
                        }
                    )
                    for m in dev.memory[:1]
                )
                if p.memory_bytes
                else ()
            )
            devices.append(
                dev.model_copy(
                    update={
                        "id": p.id,
                        "uuid": p.uuid,
                        "model": pool,
                        "binding": p.binding,
                        "memory": memory,
                        **({"health": p.health} if p.health.operational != Operational.ONLINE else {}),
                        "pci": None,
                    }
                )
            )
    return inv.model_copy(update={"devices": tuple(devices), "partitions": ()}), pools


def partition_prices(pools: Mapping[str, PartitionPool], prices: Mapping[str, float]) -> dict[str, float]:
    """List prices of the partition pools that have none, from their device model's price."""
    return {
        pool: round(prices[pp.parent_model] * pp.fraction, 6)
        for pool, pp in pools.items()
        if pool not in prices and pp.parent_model in prices and pp.fraction
    }
