"""Hardware partitions (MIG, AMD CPX/NPS, Ascend vNPU, Cambricon MIM) and their profiles."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from ._base import Bytes, Count, Model, Ratio
from .device import Binding
from .health import Health

__all__ = ["Partition", "PartitionFamily", "PartitionProfile", "Placement"]


class PartitionFamily(StrEnum):
    HARDWARE_ISOLATED = "hardware_isolated"
    SRIOV_VF = "sriov_vf"
    SOFTWARE_SHARE = "software_share"


class Placement(Model):
    """A slot range on the parent: ``start`` and ``size`` in the parent's memory slices."""

    start: Count
    size: int = Field(gt=0)

    @property
    def end(self) -> int:
        return self.start + self.size

    def overlaps(self, other: Placement) -> bool:
        return self.start < other.end and other.start < self.end


class PartitionProfile(Model):
    """A template a parent device can be cut into (``1g.10gb``, ``cpx_nps4``, ``vir04``)."""

    name: str = Field(min_length=1)
    parent_id: str
    family: PartitionFamily = PartitionFamily.HARDWARE_ISOLATED
    profile_id: Count | None = None
    memory_bytes: Bytes | None = None
    compute_units: Count | None = None
    compute_ratio: Ratio | None = None
    memory_slices: Count | None = None
    max_instances: Count | None = None
    placements: tuple[Placement, ...] = ()


class Partition(Model):
    """A live partition instance.  Its ``id`` is a stable device-like id (MIG UUID when real)."""

    id: str = Field(min_length=3)
    parent_id: str
    profile: str = Field(min_length=1)
    family: PartitionFamily = PartitionFamily.HARDWARE_ISOLATED
    placement: Placement | None = None
    uuid: str | None = None
    gi_id: Count | None = None
    ci_id: Count | None = None
    memory_bytes: Bytes | None = None
    compute_units: Count | None = None
    compute_ratio: Ratio | None = None
    binding: Binding = Field(default_factory=Binding)
    health: Health = Field(default_factory=Health)

    @model_validator(mode="after")
    def _not_self(self) -> Partition:
        if self.id == self.parent_id:
            raise ValueError("a partition id must differ from its parent's")
        return self
