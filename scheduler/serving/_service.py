"""A model service: what each replica needs, how many there may be, and its latency objective.

A :class:`Service` is the unit the autoscaler and the engine bridge work on.  Each replica is a
job of the queueing engine (:meth:`Service.replica_job`): ``devices`` whole devices of ``pool``
(kept on one host, as tensor parallelism needs), or one fractional ``share`` of a device; a
pool whose devices are hardware partitions gives partition replicas.  The replica's serving
behaviour (:meth:`Service.replica_spec`) follows its slice:

- KV-cache capacity is :func:`cache_blocks` on the slice's memory (``devices x`` the
  profile's per-device memory, the share's ``memory_bytes``, or ``slice_memory_bytes`` when
  given, e.g. a partition's memory);
- timing is the (model, device) cost profile, whose ``devices_per_replica`` a whole-device
  replica must match (a 70B model measured at TP=8 says nothing about TP=4); a share runs each
  iteration ``1000 / compute_milli`` times as long as the profile's one-device figures (a
  stated simplification: a time-sliced share gets that fraction of the device's time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accel.scheduler import Share
from accel.scheduler.queueing import JobSpec

from ._costmodel import DEFAULT_BLOCK_TOKENS, CostProfile, CostTable, ModelCatalog, cache_blocks, load_catalog
from ._engine import EngineConfig
from ._errors import InvalidRequestError
from ._sim import Objective, ReplicaSpec

__all__ = ["Service"]

#: A replica job's declared duration: a service runs until scaled down; the engine only uses
#: this for reservations and wait estimates of the jobs behind it.
_REPLICA_ESTIMATE_S = 30 * 86400.0


@dataclass(frozen=True)
class Service:
    """A model service: per-replica device need, replica bounds, latency objective, priority class.

    ``model`` and ``device`` name a cost profile in the catalog (``data/models.json``);
    ``pool`` is the engine pool (device model) replicas are placed in (empty: any pool).
    ``startup_s`` is the model load time between placement and serving (default: the model's
    published figure).  ``priority_class`` must be a class of the engine's policy, normally a
    high one that may preempt training.  ``engine``: replicas run as calibrated engine replicas
    (chunked prefill, KV on demand; :class:`EngineConfig`) instead of the whole-iteration model.
    """

    name: str
    model: str
    device: str
    objective: Objective
    min_replicas: int = 1
    max_replicas: int = 16
    devices: int | None = None
    pool: str = ""
    share: Share | None = None
    slice_memory_bytes: int | None = None
    startup_s: float | None = None
    priority_class: str = "serving"
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    engine: EngineConfig | None = None

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise InvalidRequestError(f"service name must be non-empty without '/', got {self.name!r}",
                                      field="name")
        if self.min_replicas < 0:
            raise InvalidRequestError(f"service {self.name}: min_replicas must be >= 0, got {self.min_replicas}",
                                      field="min_replicas")
        if self.max_replicas < max(1, self.min_replicas):
            raise InvalidRequestError(
                f"service {self.name}: max_replicas ({self.max_replicas}) must be >= 1 and >= min_replicas "
                f"({self.min_replicas})", field="max_replicas")
        if self.devices is not None and self.devices < 1:
            raise InvalidRequestError(f"service {self.name}: devices must be >= 1, got {self.devices}",
                                      field="devices")
        if self.share is not None and self.devices not in (None, 1):
            raise InvalidRequestError(f"service {self.name}: a share replica takes one device", field="devices")
        if self.slice_memory_bytes is not None and self.slice_memory_bytes <= 0:
            raise InvalidRequestError(f"service {self.name}: slice_memory_bytes must be > 0",
                                      field="slice_memory_bytes")
        if self.startup_s is not None and not (self.startup_s >= 0 and math.isfinite(self.startup_s)):
            raise InvalidRequestError(f"service {self.name}: startup_s must be >= 0, got {self.startup_s}",
                                      field="startup_s")
        o = self.objective
        if not (o.ttft_s > 0 and o.tpot_s > 0 and 0 < o.percentile <= 1):
            raise InvalidRequestError(
                f"service {self.name}: objective needs TTFT > 0, TPOT > 0 and a percentile in (0, 1]",
                field="objective")

    def profile(self, catalog: ModelCatalog | None = None) -> CostProfile:
        """The cost profile of one replica (a share's is slowed by its compute fraction)."""
        prof = (catalog or load_catalog()).profile(self.model, self.device)
        if self.share is not None:
            if prof.devices_per_replica != 1:
                raise InvalidRequestError(
                    f"service {self.name}: a share replica needs a one-device cost profile; "
                    f"{self.model}@{self.device} was measured on {prof.devices_per_replica} devices",
                    field="share")
            slow = 1000.0 / self.share.compute_milli
            return CostProfile(
                model=prof.model, device=prof.device, devices_per_replica=1,
                device_memory_bytes=prof.device_memory_bytes,
                prefill=CostTable(prof.prefill.xs, tuple(v * slow for v in prof.prefill.ms)),
                decode=CostTable(prof.decode.xs, tuple(v * slow for v in prof.decode.ms)),
                source=prof.source, units=prof.units)
        if self.replica_devices != prof.devices_per_replica:
            raise InvalidRequestError(
                f"service {self.name}: {self.model}@{self.device} was measured on {prof.devices_per_replica} "
                f"devices per replica, the service asks for {self.replica_devices}", field="devices")
        return prof

    @property
    def replica_devices(self) -> int:
        """Whole devices per replica (1 for a share); defaults to the profile's."""
        if self.share is not None:
            return 1
        if self.devices is not None:
            return self.devices
        return load_catalog().profile(self.model, self.device).devices_per_replica

    def memory_bytes(self, catalog: ModelCatalog | None = None) -> int:
        """Memory one replica's KV cache and weights live in: its slice of the devices."""
        if self.slice_memory_bytes is not None:
            return self.slice_memory_bytes
        if self.share is not None:
            if self.share.memory_bytes <= 0:
                raise InvalidRequestError(f"service {self.name}: a share replica needs share.memory_bytes > 0",
                                          field="share.memory_bytes")
            return self.share.memory_bytes
        prof = (catalog or load_catalog()).profile(self.model, self.device)
        return self.replica_devices * prof.device_memory_bytes

    def replica_spec(self, catalog: ModelCatalog | None = None) -> ReplicaSpec:
        """How one replica serves: timing from the profile, KV blocks from the slice's memory."""
        cat = catalog or load_catalog()
        prof = self.profile(cat)
        blocks = cache_blocks(prof.model, self.memory_bytes(cat), block_tokens=self.block_tokens,
                              memory_utilization=cat.memory_utilization)
        startup = self.startup_s if self.startup_s is not None else prof.model.startup_seconds
        if startup is None:
            raise InvalidRequestError(f"service {self.name}: no published start-up time for {self.model}; "
                                      "set startup_s", field="startup_s")
        return ReplicaSpec(prof, blocks, self.block_tokens, startup, engine=self.engine)

    def replica_job(self, index: int) -> JobSpec:
        """The queueing-engine job of replica ``index`` (id ``<service>/r<index>``, not preemptible)."""
        return JobSpec(id=f"{self.name}/r{index}", tenant=self.name, devices=self.replica_devices, pool=self.pool,
                       share=self.share, estimate_s=_REPLICA_ESTIMATE_S, priority_class=self.priority_class,
                       same_host=self.share is None and self.replica_devices > 1, preemptible=False,
                       labels=(("accel.serving/service", self.name),))
