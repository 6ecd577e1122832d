"""The service's shared state: what the live loop, the quotes and the records all read.

:class:`ServiceBase` holds the engine, the executors, the store, the clock and the open runs
(:class:`Run`), and the small helpers every part uses (the service clock, the audit log, a job's
request, its engine spec, who may see it).  :class:`accel.service._core.Service` puts the parts
together (:mod:`._runloop`, :mod:`._quoting`, :mod:`._records`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.model import HostInventory
from accel.scheduler import Share, TopologyConstraint, TopologyLevel
from accel.scheduler.queueing import JobSpec, QueueingScheduler

from ._attribution import AttributionWriter
from ._auth import Principal
from ._executor import Executor, Handle
from ._jobreq import EnvAllowlist, JobRequest, request_from_dict
from ._partitions import is_partition_pool, pool_profile
from ._reads import ReadSide, Views
from ._store import Launch, ServiceStore, StoredJob


class NotFoundError(LookupError):
    """No such job for this principal (another tenant's job reads the same: 404)."""


class ServiceClock:
    """``t0 + (wall - wall0) * scale``, never going back."""

    def __init__(self, t0: float, wall0: float, scale: float, wall: Callable[[], float] = time.time) -> None:
        self.t0, self.wall0, self.scale = t0, wall0, scale
        self._wall = wall
        self._last = -math.inf
        self._lock = threading.Lock()  # readers call it outside the service's lock

    def __call__(self) -> float:
        with self._lock:
            t = max(self._last, self.t0 + (self._wall() - self.wall0) * self.scale)
            self._last = t
        return t

    def wall(self, t: float) -> float:
        return self.wall0 + (t - self.t0) / self.scale

    def at_wall(self, wall: float) -> float:
        """A Unix time on the service's clock (what an executor's exit record says, mapped)."""
        return self.t0 + (wall - self.wall0) * self.scale


@dataclass(slots=True)
class Run:
    """An open launch: the job's current attempt on an executor."""

    launch: Launch
    executor: Executor
    handle: Handle | None
    stop_reason: str | None = None  # why the service is stopping it (cancelled, preempted, time_limit)
    signalled_at: float | None = None  # when SIGTERM went out (service seconds)
    checkpoint_sent: bool = False



class ServiceBase:
    """The state and helpers shared by the service's parts (see the module docstring)."""

    def __init__(self, state: Path, executors: Sequence[Executor], store: ServiceStore, clock: ServiceClock,
                 engine: QueueingScheduler, *, env_allow: EnvAllowlist, inventories: Mapping[str, HostInventory],
                 host_executor: Mapping[str, Executor], sample_every_s: float = 2.0) -> None:
        self.state = state
        self.executors = list(executors)
        self.store = store
        self.clock = clock
        self.engine = engine
        self.env_allow = env_allow
        self.inventories = dict(inventories)
        self.host_executor = dict(host_executor)
        self.log_root = state / "logs"
        #: Guards the engine, the executors' runs and the writes: the live loop's tick, submit,
        #: cancel, quotes.  Readers (show, list, pages) never take it (:mod:`._reads`).
        self.lock = threading.RLock()
        #: Each job's engine state as readers see it, published under ``lock`` after each change.
        self.views = Views()
        #: Read-only connections per thread to the service tables and the journal.
        self.reads = ReadSide(store.path, Path(engine.journal.path))
        self.runs: dict[str, Run] = {}
        self._sample_every_s = sample_every_s
        self._last_sample = 0.0
        self._pool_vendor: dict[str, str] = {}
        for inv in inventories.values():
            for dev in inv.devices:
                self._pool_vendor.setdefault(dev.model or "unknown", dev.vendor)
        #: Whether some device is offered as its partitions (see ``_partitions``).
        self.partitioned = any(is_partition_pool(p) for p in engine.pools)
        #: Publishes which job holds which device for the exporters (``--attribution-dir``).
        self.attribution: AttributionWriter | None = None
        self._last_tick = -math.inf  # the service time of the last tick's poll of every run
        self._requests: dict[str, JobRequest] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        #: The serving groups' manager (:mod:`._serving`), when the service keeps any.
        self.serving: Any = None


    def _audit(self, t: float, job: str | None, actor: str, kind: str, reason: str,
               data: dict[str, Any] | None = None) -> None:
        self.store.audit(t, job, actor, kind, reason, data, wall=self.clock.wall(t))


    def now(self) -> float:
        return max(self.clock(), self.engine.now if math.isfinite(self.engine.now) else -math.inf)


    def wake(self) -> None:
        self._wake.set()


    def _request(self, job_id: str) -> JobRequest | None:
        """A job's request (immutable once stored: kept in memory after the first read)."""
        req = self._requests.get(job_id)
        if req is None:
            stored = self.store.job(job_id)
            if stored is None:
                return None
            req = self._requests[job_id] = request_from_dict(stored.request)
        return req

    def pools_for(self, req: JobRequest) -> list[str]:
        """The pools that can take ``req`` (its model / pool / vendor selectors)."""
        # whole devices for a request without a partition profile, that profile's partitions for one
        pools = [p for p in self.engine.pools if pool_profile(p) == (req.partition or None)]
        want = req.pool or req.model
        if want:
            exact = [p for p in pools if p == want]
            pools = exact or [p for p in pools if want.lower() in p.lower()]
        if req.vendor:
            pools = [p for p in pools if self._pool_vendor.get(p, "").lower() == req.vendor.lower()]
        return [p for p in pools if self.engine.pool_capacity(p) >= req.devices]

    def _spec(self, job_id: str, tenant: str, req: JobRequest, pool: str) -> JobSpec:
        share = Share(req.share["compute_milli"], req.share["memory_bytes"]) if req.share else None
        topo = (TopologyConstraint(TopologyLevel(req.topology["level"]), bool(req.topology["required"]))
                if req.topology else None)
        estimate = req.duration_s or req.time_limit_s or 3600.0
        return JobSpec(job_id, tenant, req.devices, pool, share, estimate, req.priority_class, req.same_host,
                       req.checkpoint_interval_s, labels=(("name", req.name),), topology=topo)


    def _engine_submit(self, stored: StoredJob, now: float) -> None:
        req = request_from_dict(stored.request)
        self.engine.submit(self._spec(stored.id, stored.tenant, req, req.pool), max(now, self.engine.now))

    def _tenant(self, who: Principal, req: JobRequest) -> str:
        if req.tenant and req.tenant != who.tenant:
            if not who.admin:
                raise PermissionError("only an admin submits for another tenant")
            return req.tenant
        return who.tenant


    def _visible(self, who: Principal, job_id: str) -> StoredJob:
        stored = self.store.job(job_id)
        if stored is None or not who.sees(stored.tenant):
            raise NotFoundError(f"no job {job_id}")
        return stored

    def _visible_read(self, who: Principal, job_id: str) -> StoredJob:
        """:meth:`_visible` for a reader: through this thread's read-only connection, no lock."""
        stored = self.reads.store.job(job_id)
        if stored is None or not who.sees(stored.tenant):
            raise NotFoundError(f"no job {job_id}")
        return stored

    def publish(self, *new: str) -> None:
        """Publish the engine's state of the jobs ``new`` and of every job in flight to readers
        (call under ``lock`` after a change: the journal has committed it by then)."""
        self.views.publish(self.engine.jobs, new)

