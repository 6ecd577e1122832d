"""The live service: the queueing engine on the wall clock, the executors, the service tables.

:class:`Service` owns one :class:`accel.scheduler.queueing.QueueingScheduler` (through its public
calls only) whose journal is ``STATE/journal.sqlite``, the executors whose hosts make up its
cluster, and the :class:`ServiceStore`.  Every call that changes something takes the service's
lock, so the HTTP handlers and the live loop (:meth:`Service.tick`, run by a thread every
``tick_s``) never interleave.  The parts, one job each: the shared state (:mod:`._base`), the
live loop and restart recovery (:mod:`._runloop`), quotes (:mod:`._quoting`), reading records,
bills and pools (:mod:`._records`); this module opens, submits, cancels and closes.

Time: the engine's clock is ``t0 + (wall - wall0) * time_scale`` seconds (kept in the store, so a
restart continues the same time line; the time the service was down passes as it did).
"""

from __future__ import annotations

import json
import math
import os
import secrets
import signal as _signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from accel.errors import ConfigError
from accel.model import HostInventory
from accel.scheduler import ClusterState, InvalidRequestError, SchedulerStateError, host_spec_from_inventory
from accel.scheduler.queueing import (
    InClassOrder,
    JobState,
    Journal,
    Policy,
    PriceTable,
    PriorityClass,
    QueueingScheduler,
)

from ._auth import Principal
from ._base import NotFoundError, ServiceClock
from ._executor import Executor, ExitReason
from ._jobreq import EnvAllowlist, JobRequest
from ._partitions import PartitionPool, partition_prices, schedulable
from ._quoting import Quoting
from ._records import Records
from ._runloop import RunLoop
from ._store import ServiceStore, StoredJob

__all__ = ["DEFAULT_PRICES", "NotFoundError", "Service", "ServiceClock", "default_policy"]

#: List prices per device-hour (USD) seeded into a new state directory when ``--price`` gives none;
#: matched as a case-insensitive substring of the device model.  Change them with ``--price``.
DEFAULT_PRICES: tuple[tuple[str, float], ...] = (
    ("H200", 5.0), ("H100", 4.0), ("A100", 2.0), ("MI300X", 3.5), ("910B", 2.5), ("4090", 0.5), ("MLU370", 1.0),
)
_CHECKPOINT_GRACE_S = 30.0  # service seconds between the checkpoint signal and SIGTERM when cancelling


def default_policy(grace_s: float = 30.0) -> Policy:
    """The service's default classes: ``default`` (preemptible) and ``high`` (preempts ``default``,
    never preempted); victims checkpoint (their work up to the last checkpoint is kept)."""
    return Policy(classes=(PriorityClass("default", 0, InClassOrder.FIFO),
                           PriorityClass("high", 10, InClassOrder.FIFO, preempts=True, preemptible=False)),
                  grace_s=grace_s, default_class="default")



class Service(RunLoop, Quoting, Records):
    """See the module docstring.  Build with :meth:`open`; call :meth:`close` when done."""

    # -- opening -------------------------------------------------------------------------------------
    @classmethod
    def open(cls, state: Path, executors: Sequence[Executor], *, time_scale: float = 1.0,
             prices: Mapping[str, float] | None = None, policy: Policy | None = None,
             env_allow: EnvAllowlist | None = None, sample_every_s: float = 2.0,
             wall: Callable[[], float] = time.time) -> Service:
        """Open (or create) the state directory and rebuild the service from it (``wall``: the
        wall clock, a fake one in tests)."""
        if not (time_scale > 0 and math.isfinite(time_scale)):
            raise ConfigError(f"--time-scale must be a positive number, not {time_scale}")
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        (state / "logs").mkdir(exist_ok=True, mode=0o700)
        store = ServiceStore(state / "service.sqlite")
        try:
            kept = store.meta("time_scale")
            if kept is None:
                now = wall()
                with store.transaction():
                    store.set_meta("time_scale", repr(float(time_scale)))
                    store.set_meta("t0", repr(0.0))
                    store.set_meta("wall0", repr(now))
            elif float(kept) != float(time_scale):
                raise ConfigError(f"state {state} runs at --time-scale {float(kept):g}, not {time_scale:g}: its "
                                  "journal's times are on that scale (start it with the same --time-scale)")
            clock = ServiceClock(float(store.meta("t0") or 0.0), float(store.meta("wall0") or 0.0), float(time_scale),
                                 wall)
            inventories: dict[str, HostInventory] = {}
            partition_pools: dict[str, PartitionPool] = {}
            host_executor: dict[str, Executor] = {}
            for ex in executors:
                for inv in ex.hosts():
                    name = inv.host.hostname
                    if name in inventories:
                        raise ConfigError(f"host {name!r} is offered by two executors ({host_executor[name].name}, "
                                          f"{ex.name})")
                    # a device split into partitions is offered as its partitions (pools of their own)
                    inventories[name], pools = schedulable(inv)
                    partition_pools.update(pools)
                    host_executor[name] = ex
            if not inventories:
                raise ConfigError("no executor offers any host: nothing to schedule on")
            cluster = ClusterState.from_specs(host_spec_from_inventory(inv) for inv in inventories.values())
            with store.transaction():
                for model, price in (prices or {}).items():
                    store.set_price(model, float(price))
                if not store.prices():
                    # a partition pool is priced from its device model's price (below)
                    models = {d.model for inv in inventories.values() for d in inv.devices
                              if d.model and d.model not in partition_pools}
                    models |= {pp.parent_model for pp in partition_pools.values()}
                    for model in sorted(models):
                        for key, price in DEFAULT_PRICES:
                            if key.lower() in model.lower():
                                store.set_price(model, price)
                                break
                for pool, price in partition_prices(partition_pools,
                                                    {m: p[0] for m, p in store.prices().items()}).items():
                    store.set_price(pool, price)
            table = PriceTable({m: p[0] for m, p in store.prices().items()},
                               {m: p[1] for m, p in store.prices().items() if p[1]})
            _write_prices(state / "prices.json", table)
            path = state / "journal.sqlite"
            if path.exists():
                engine = QueueingScheduler.recover(cluster, path, policy, prices=table)
            else:
                engine = QueueingScheduler(cluster, policy, prices=table, journal=Journal(path))
        except BaseException:
            store.close()
            raise
        svc = cls(state, executors, store, clock, engine, env_allow=env_allow or EnvAllowlist(),
                  inventories=inventories, host_executor=host_executor, sample_every_s=sample_every_s)
        svc._recover()
        return svc


    def start_loop(self, tick_s: float = 0.2) -> None:
        """Tick every ``tick_s`` wall seconds, when woken (a submit, a cancel, an end), and at the
        next declared end of a running job (so an end is seen when it happens, before a later
        request moves the engine's time past it)."""
        def loop() -> None:
            while not self._stop.is_set():
                self.tick()
                self._wake.wait(self._until_next_end(tick_s))
                self._wake.clear()

        self._thread = threading.Thread(target=loop, name="accel-serve-loop", daemon=True)
        self._thread.start()


    def _until_next_end(self, tick_s: float) -> float:
        """Wall seconds until the next declared end of a running job, at most ``tick_s``."""
        with self.lock:
            now = self.now()
            # only ends still ahead: a job past its declared end is looked at every tick_s, no busy loop
            ends = [end for j in self.engine.running() if j.state == JobState.RUNNING and j.started_at is not None
                    and (end := j.started_at + max(0.0, j.spec.estimate_s - j.work_s)) > now]
            if not ends:
                return tick_s
            wait = self.clock.wall(min(ends)) - self.clock.wall(now)
        return min(tick_s, max(0.0, wait) + 1e-4)

    def close(self) -> None:
        if self.serving is not None:
            self.serving.close()  # its engines first: they stop while the service still answers
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.reads.close()
        with self.lock:
            self.engine.journal.close()
            self.store.close()
            for ex in self.executors:
                closer = getattr(ex, "close", None)
                if callable(closer):
                    closer()


    def submit(self, who: Principal, req: JobRequest) -> str:
        """Queue ``req``; the chosen pool's quote is kept with it.  Returns the job id."""
        tenant = self._tenant(who, req)
        with self.lock:
            now = self.now()
            # ends already due are applied at their times first: the submit moves the engine's time
            self._reap(now, due_only=True)
            quotes = self._quote(tenant, req, now)
            chosen = min(quotes, key=lambda q: (q["start_at"] if q["start_at"] is not None else math.inf,
                                                q["price_per_device_hour"]))
            if req.pool and req.pool not in [q["pool"] for q in quotes]:
                raise InvalidRequestError(self._no_pool(req), field="pool")
            seq = self.store.next_seq()
            job_id = f"j{seq:06d}-{secrets.token_hex(3)}"
            # a request naming no pool may go to any, unless partitions are offered: those a
            # request for whole devices never gets
            pinned = req.pool or req.model or req.vendor or req.partition or self.partitioned
            pool = chosen["pool"] if pinned else ""
            stored = StoredJob(job_id, seq, tenant, req.name, {**req.as_dict(), "tenant": tenant, "pool": pool}, now,
                               self.clock.wall(now), who.actor, {**chosen, "all": quotes})
            with self.store.transaction():  # the request and its quote: one commit, before the journal's
                self.store.add_job(stored)  # ``submitted`` (a crash in between is resubmitted on restart)
                self._audit(now, job_id, who.actor, "quoted", chosen["summary"], {"pools": len(quotes)})
            self._engine_submit(stored, now)
            self.publish(job_id)
        self.wake()
        return job_id

    def cancel(self, who: Principal, job_id: str) -> None:
        with self.lock:
            stored = self._visible(who, job_id)
            job = self.engine.jobs[stored.id]
            if job.state.terminal:
                raise SchedulerStateError(f"job {job_id} already {job.state.value}")
            now = self.now()
            self.engine.cancel(job_id, now, reason=f"cancelled by {who.actor}")
            run = self.runs.get(job_id)
            if run is not None:
                run.stop_reason = ExitReason.CANCELLED.value
                self._signal(run, _signal.SIGTERM, now)
            self.publish()
        self.wake()



def _write_prices(path: Path, table: PriceTable) -> None:
    """The stored price table as ``prices.json`` next to the journal, for ``accel sched bill``
    (written to a temporary file, flushed and renamed: a crash leaves the old file or the new)."""
    text = json.dumps({"currency": table.currency, "per_device_hour": dict(table.per_device_hour),
                       "per_gib_hour": dict(table.per_gib_hour)}, indent=2, sort_keys=True) + "\n"
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)




def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
