"""Partition actuation: the optional surface that creates and destroys partitions.

A backend that can carve its devices declares :attr:`Capability.PARTITION_ACTUATION` in its
:class:`~accel.plugin.PluginInfo` and implements :class:`SupportsPartitionActuation` (which
includes :class:`~accel.plugin.SupportsPartitions`: what it makes, it must also read back).
Both are needed: callers get the surface through :func:`actuator`, never by vendor name.

Rules every implementation keeps (the conformance of docs/guides/partitions.md):

* ``partition_profiles()`` lists, per parent device, every profile it can be cut into, with
  ``memory_bytes``, ``compute_ratio`` (or ``compute_units``), ``max_instances`` and, where the
  vendor has them, ``placements``.
* ``create_partition(device_id, profile)`` makes one partition and returns it as the next
  ``partitions()`` / ``inventory()`` reports it (same ``id``, memory and compute share).
* ``destroy_partition(partition_id)`` removes it; afterwards it is in no inventory.
* Every refusal is a :class:`~accel.errors.PartitionError` subclass naming the cause: the
  profile is not offered on this product, no placement is left, the partitioning mode is off,
  processes run on the parent, the partition is busy, the partition does not exist.  A create
  that fails half-way undoes what it made, or raises
  :class:`~accel.errors.PartitionCreateFailedError` listing what it could not undo.
* Nothing is left behind silently: whatever exists on the device is in the next inventory.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..errors import NotSupportedError
from ..model import Partition, PartitionProfile
from ._capabilities import Capability

__all__ = ["SupportsPartitionActuation", "actuator"]


@runtime_checkable
class SupportsPartitionActuation(Protocol):
    def partitions(self) -> tuple[Partition, ...]:
        """Live hardware partitions."""
        ...

    def partition_profiles(self) -> tuple[PartitionProfile, ...]:
        """Profiles each device can be partitioned into (memory, compute share, count, placements)."""
        ...

    def create_partition(self, device_id: str, profile: str, *, placement_start: int | None = None) -> Partition:
        """Create one partition of ``profile`` on ``device_id`` (at slot ``placement_start`` when
        given and the vendor places by slot) and return it as the next inventory reports it."""
        ...

    def destroy_partition(self, partition_id: str) -> None:
        """Destroy the partition ``partition_id``; refused (``PartitionBusyError``) while in use."""
        ...


def actuator(backend: object, capabilities: frozenset[Capability] | None = None) -> SupportsPartitionActuation:
    """``backend`` as a partition actuator, or :class:`~accel.errors.NotSupportedError` saying why.

    ``capabilities`` is what the backend's plugin declared (``PluginInfo.capabilities``); when
    given, the backend must declare :attr:`Capability.PARTITION_ACTUATION` as well as implement
    the surface (fail-closed: a backend that has the methods but does not declare it is refused).
    """
    name = getattr(backend, "name", type(backend).__name__)
    if capabilities is not None and Capability.PARTITION_ACTUATION not in capabilities:
        raise NotSupportedError(f"backend {name!r} does not declare partition actuation")
    if not isinstance(backend, SupportsPartitionActuation):
        raise NotSupportedError(f"backend {name!r} cannot create or destroy partitions")
    return backend
