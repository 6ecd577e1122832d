"""The live service: the queueing engine on the wall clock, the executors, the service tables.

:class:`Service` owns one :class:`accel.scheduler.queueing.QueueingScheduler` (through its public
calls only) whose journal is ``STATE/journal.sqlite``, the executors whose hosts make up its
cluster, and the :class:`ServiceStore`.  Every call that changes something takes the service's
lock, so the HTTP handlers and the live loop (:meth:`Service.tick`, run by a thread every
``tick_s``) never interleave.  One tick: end the runs that ended (poll), stop what must stop
(time limits, cancellations, preemptions), run one scheduling cycle, launch what the cycle
placed, and sample the devices of running jobs.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.errors import AccelError, ConfigError
from accel.model import HostInventory, Telemetry
from accel.scheduler import (
    ClusterState,
    InvalidRequestError,
    SchedulerStateError,
    Share,
    TopologyConstraint,
    TopologyLevel,
    host_spec_from_inventory,
)
from accel.scheduler.queueing import (
    Event,
    InClassOrder,
    Job,
    JobSpec,
    JobState,
    Journal,
    Policy,
    PriceTable,
    PriorityClass,
    QueueingScheduler,
    WaitEstimate,
    WaitReason,
)

from ._auth import Principal
from ._executor import Executor, ExecutorError, ExitReason, Handle, JobLostError, LaunchSpec, PlacedDevice, RunStatus
from ._jobreq import EnvAllowlist, JobRequest, request_from_dict
from ._store import Launch, ServiceStore, StoredJob
from .executors import DeviceSampler

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


class NotFoundError(LookupError):
    """No such job for this principal (another tenant's job reads the same: 404)."""


class ServiceClock:
    """``t0 + (wall - wall0) * scale``, never going back."""

    def __init__(self, t0: float, wall0: float, scale: float, wall: Callable[[], float] = time.time) -> None:
        self.t0, self.wall0, self.scale = t0, wall0, scale
        self._wall = wall
        self._last = -math.inf

    def __call__(self) -> float:
        t = max(self._last, self.t0 + (self._wall() - self.wall0) * self.scale)
        self._last = t
        return t

    def wall(self, t: float) -> float:
        return self.wall0 + (t - self.t0) / self.scale


@dataclass(slots=True)
class _Run:
    """An open launch: the job's current attempt on an executor."""

    launch: Launch
    executor: Executor
    handle: Handle | None
    stop_reason: str | None = None  # why the service is stopping it (cancelled, preempted, time_limit)
    signalled_at: float | None = None  # when SIGTERM went out (service seconds)
    checkpoint_sent: bool = False


class Service:
    """See the module docstring.  Build with :meth:`open`; call :meth:`close` when done."""

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
        self.lock = threading.RLock()
        self.runs: dict[str, _Run] = {}
        self._sample_every_s = sample_every_s
        self._last_sample = 0.0
        self._pool_vendor: dict[str, str] = {}
        for inv in inventories.values():
            for dev in inv.devices:
                self._pool_vendor.setdefault(dev.model or "unknown", dev.vendor)
        self._wait_ratios: list[float] = []
        self._requests: dict[str, JobRequest] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

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
            host_executor: dict[str, Executor] = {}
            for ex in executors:
                for inv in ex.hosts():
                    name = inv.host.hostname
                    if name in inventories:
                        raise ConfigError(f"host {name!r} is offered by two executors ({host_executor[name].name}, "
                                          f"{ex.name})")
                    inventories[name] = inv
                    host_executor[name] = ex
            if not inventories:
                raise ConfigError("no executor offers any host: nothing to schedule on")
            cluster = ClusterState.from_specs(host_spec_from_inventory(inv) for inv in inventories.values())
            with store.transaction():
                for model, price in (prices or {}).items():
                    store.set_price(model, float(price))
                if not store.prices():
                    models = {d.model for inv in inventories.values() for d in inv.devices if d.model}
                    for model in sorted(models):
                        for key, price in DEFAULT_PRICES:
                            if key.lower() in model.lower():
                                store.set_price(model, price)
                                break
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

    def _recover(self) -> None:
        """After a restart: submit requests the journal never got, find running jobs again."""
        now = self.now()
        by_name = {ex.name: ex for ex in self.executors}
        with self.lock:
            for stored in reversed(self.store.jobs()):
                if stored.id not in self.engine.jobs:
                    # committed here, lost before the journal's ``submitted``: submit it now
                    self._engine_submit(stored, now)
                    self._audit(now, stored.id, "service", "resubmitted",
                                     "the service stopped between storing the request and queueing it")
            for active in self.engine.running():
                ended = [la for la in self.store.launches(active.id)
                         if la.attempt == active.attempts and la.ended_t is not None]
                if ended:
                    # its end was stored, the engine's never journaled: finish it now (never start it again)
                    la = ended[0]
                    try:
                        why = ExitReason(la.reason or "failed")
                    except ValueError:
                        why = ExitReason.FAILED
                    self._finish_engine(active, why, la.detail or why.value, now)
            for launch in self.store.open_launches():
                job = self.engine.jobs.get(launch.job)
                ex = by_name.get(launch.executor)
                if ex is None:
                    self.store.end_launch(launch.job, launch.attempt, now, None, None, ExitReason.NODE_LOST.value,
                                          f"executor {launch.executor} is not configured any more")
                    if job is not None and job.active and job.attempts == launch.attempt:
                        self.engine.finish(job.id, now, ok=False, reason="node lost: executor gone")
                    continue
                if launch.ref is None:
                    self._recover_unlaunched(launch, job, ex, now)
                    continue
                handle = Handle(launch.executor, launch.job, launch.ref)
                run = _Run(launch, ex, handle)
                if job is None or not job.active or job.attempts != launch.attempt:
                    # the engine moved on (cancelled, preempted) while the run was still open: stop it
                    run.stop_reason = (ExitReason.CANCELLED.value if job is not None and job.state == JobState.CANCELLED
                                       else ExitReason.PREEMPTED.value)
                    self.runs[launch.job] = run
                    self._kill(run, now)
                    continue
                try:
                    status = ex.reattach(handle)
                except JobLostError as exc:
                    status = RunStatus(False, None, None, ExitReason.NODE_LOST, str(exc))
                self.runs[launch.job] = run
                self._audit(now, launch.job, f"executor:{ex.name}", "reattached",
                                 "found again after a restart of the service" if status.running
                                 else "ended while the service was down")
                if not status.running:
                    self._ended(run, status, now)

    def _recover_unlaunched(self, launch: Launch, job: Job | None, ex: Executor, now: float) -> None:
        """A launch committed without a handle: the service died inside ``start``."""
        if getattr(ex, "relaunch_safe", False) and job is not None and job.active and job.attempts == launch.attempt:
            # the executor keeps nothing outside the service: starting it now cannot run it twice
            self._audit(now, launch.job, "service", "relaunched", "the service stopped while launching it")
            self._launch(job, now, relaunch=True)
            return
        self.store.end_launch(launch.job, launch.attempt, now, None, None, ExitReason.NODE_LOST.value,
                              "the service stopped while launching it; whether it started is unknown")
        if job is not None and job.active and job.attempts == launch.attempt:
            self.engine.finish(job.id, now, ok=False, reason="node lost: the service stopped while launching it")

    def _audit(self, t: float, job: str | None, actor: str, kind: str, reason: str,
               data: dict[str, Any] | None = None) -> None:
        self.store.audit(t, job, actor, kind, reason, data, wall=self.clock.wall(t))

    # -- the loop ------------------------------------------------------------------------------------
    def now(self) -> float:
        return max(self.clock(), self.engine.now if math.isfinite(self.engine.now) else -math.inf)

    def start_loop(self, tick_s: float = 0.2) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.tick()
                self._wake.wait(tick_s)
                self._wake.clear()

        self._thread = threading.Thread(target=loop, name="accel-serve-loop", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self.lock:
            self.engine.journal.close()
            self.store.close()
            for ex in self.executors:
                closer = getattr(ex, "close", None)
                if callable(closer):
                    closer()

    def tick(self) -> None:
        """One pass of the live loop (see the module docstring)."""
        with self.lock:
            now = self.now()
            self._enforce(now)  # signals first, so the poll right after sees what they ended
            self._reap(now)
            self.engine.cycle(now)
            for job in self.engine.running():
                run = self.runs.get(job.id)
                if job.state == JobState.RUNNING and (run is None or run.launch.attempt != job.attempts):
                    if any(la.attempt == job.attempts for la in self.store.launches(job.id)):
                        continue  # this attempt was launched already: never start it twice
                    self._launch(job, now)
                elif job.state == JobState.PREEMPTING and run is not None and not run.checkpoint_sent:
                    self._preempting(job, run, now)
            wall_now = self.clock.wall(now)
            todo: list[tuple[str, Executor, list[PlacedDevice]]] = []
            if wall_now - self._last_sample >= self._sample_every_s:
                self._last_sample = wall_now
                todo = self._to_sample()
        # device reads are I/O: outside the lock, so API calls do not wait for them
        self._sample(todo, now)

    def _reap(self, now: float) -> None:
        for job_id, run in list(self.runs.items()):
            if run.handle is None:
                continue
            try:
                status = run.executor.poll(run.handle)
            except JobLostError as exc:
                status = RunStatus(False, None, None, ExitReason.NODE_LOST, str(exc))
            except ExecutorError as exc:
                self._audit(now, job_id, f"executor:{run.executor.name}", "poll-failed", str(exc))
                continue
            if not status.running:
                self._ended(run, status, now)

    def _ended(self, run: _Run, status: RunStatus, now: float) -> None:
        launch = run.launch
        job = self.engine.jobs.get(launch.job)
        reason = status.reason or (ExitReason.COMPLETED if status.exit_code == 0 else ExitReason.FAILED)
        if run.stop_reason is not None and reason != ExitReason.COMPLETED:
            reason = ExitReason(run.stop_reason)
        detail = status.detail or reason.value
        self.store.end_launch(launch.job, launch.attempt, now, status.exit_code, status.signal, reason.value, detail)
        self._audit(now, launch.job, f"executor:{run.executor.name}", "exited",
                         f"{reason.value}: {detail}", {"exit_code": status.exit_code, "signal": status.signal})
        self.runs.pop(launch.job, None)
        if job is None or job.state.terminal or job.attempts != launch.attempt:
            return
        self._finish_engine(job, reason, detail, now)
        self.wake()

    def _finish_engine(self, job: Job, reason: ExitReason, detail: str, now: float) -> None:
        if job.state == JobState.PREEMPTING and reason != ExitReason.COMPLETED:
            return  # stopped for its preemptor: the engine requeues it when its grace period ends
        if reason == ExitReason.COMPLETED:
            self.engine.finish(job.id, now, ok=True, reason="completed: exit code 0")
        else:
            self.engine.finish(job.id, now, ok=False, reason=f"{reason.value}: {detail}")

    def _enforce(self, now: float) -> None:
        for job_id, run in list(self.runs.items()):
            job = self.engine.jobs.get(job_id)
            stale = job is None or not job.active or job.attempts != run.launch.attempt
            if stale:
                if run.stop_reason is None:
                    run.stop_reason = (ExitReason.CANCELLED.value if job is not None and job.state == JobState.CANCELLED
                                       else ExitReason.PREEMPTED.value)
                self._kill(run, now)
                continue
            assert job is not None
            if (job.state == JobState.PREEMPTING and job.stop_at is not None and job.stop_at <= now + 1e-9
                    and run.signalled_at is None):
                # its grace period is over: it stops now, before this tick's cycle gives its devices away
                run.stop_reason = ExitReason.PREEMPTED.value
                self._signal(run, _signal.SIGTERM, now)
                continue
            req = self._request(job_id)
            if (req is not None and req.time_limit_s is not None and run.stop_reason is None
                    and now - run.launch.started_t >= req.time_limit_s):
                run.stop_reason = ExitReason.TIME_LIMIT.value
                self._audit(now, job_id, "service", "time-limit",
                                 f"ran {now - run.launch.started_t:.0f} s, its limit is {req.time_limit_s:.0f} s")
                self._signal(run, _signal.SIGTERM, now)

    def _kill(self, run: _Run, now: float) -> None:
        """Stop a run the engine no longer counts: SIGTERM, then SIGKILL after the grace period."""
        if run.handle is None:
            return
        if run.signalled_at is None:
            self._signal(run, _signal.SIGTERM, now)
        elif now - run.signalled_at >= max(self.engine.policy.grace_s, _CHECKPOINT_GRACE_S):
            self._signal(run, _signal.SIGKILL, now)

    def _signal(self, run: _Run, signum: int, now: float) -> None:
        if run.handle is None:
            return
        try:
            run.executor.signal(run.handle, signum)
        except ExecutorError as exc:
            self._audit(now, run.launch.job, f"executor:{run.executor.name}", "signal-failed", str(exc))
            return
        if signum in (_signal.SIGTERM, _signal.SIGKILL):
            run.signalled_at = run.signalled_at if run.signalled_at is not None else now
        self._audit(now, run.launch.job, "service", "signalled", _signal.Signals(signum).name,
                         {"signal": signum, "why": run.stop_reason})

    def _preempting(self, job: Job, run: _Run, now: float) -> None:
        run.checkpoint_sent = True
        run.stop_reason = ExitReason.PREEMPTED.value
        req = self._request(job.id)
        signum = req.checkpoint_signal if req is not None and req.checkpoint_signal else _signal.SIGTERM
        self._signal(run, signum, now)

    def _placed(self, job: Job) -> list[PlacedDevice]:
        out: list[PlacedDevice] = []
        for alloc in job.allocs:
            inv = self.inventories[alloc.host_name]
            for slot in alloc.devices:
                dev = inv.devices[slot]
                env: tuple[tuple[str, str], ...] = ()
                if dev.binding.visible_env and dev.binding.visible_id:
                    env = ((dev.binding.visible_env, dev.binding.visible_id),)
                out.append(PlacedDevice(alloc.host_name, dev.id, slot, dev.vendor, dev.model or "unknown", env))
        return out

    def _launch(self, job: Job, now: float, *, relaunch: bool = False) -> None:
        """Start the job's current attempt (``relaunch``: its launch row exists without a handle)."""
        devices = self._placed(job)
        executors = {self.host_executor[d.host].name: self.host_executor[d.host] for d in devices}
        attempt = job.attempts
        if len(executors) != 1:
            self.engine.finish(job.id, now, ok=False, reason=f"placed across executors {sorted(executors)}")
            return
        ex = next(iter(executors.values()))
        stored = self.store.job(job.id)
        req = request_from_dict(stored.request) if stored is not None else None
        if req is None:
            self.engine.finish(job.id, now, ok=False, reason="the service has no request for it")
            return
        dev_rows = [{"host": d.host, "device_id": d.device_id, "index": d.index, "vendor": d.vendor, "model": d.model,
                     "visibility_env": dict(d.visibility_env)} for d in devices]
        if not relaunch:
            # committed before the executor starts it: a crash inside start() is seen on restart
            self.store.add_launch(job.id, attempt, ex.name, now, dev_rows)
        launch = Launch(job.id, attempt, ex.name, None, now, dev_rows, None, None, None, None, None)
        run = _Run(launch, ex, None)
        self.runs[job.id] = run
        # a resumed job runs what is left after the work the engine kept (its last checkpoint)
        declared = req.duration_s if req.duration_s is not None else job.spec.estimate_s
        spec = LaunchSpec(job.id, job.spec.tenant, req.command, tuple(devices), req.env, self.log_root / job.id,
                          max(0.0, declared - job.work_s), req.time_limit_s, req.checkpoint_signal)
        try:
            handle = ex.start(spec)
        except ExecutorError as exc:
            self.store.end_launch(job.id, attempt, now, None, None, ExitReason.FAILED.value, f"could not start: {exc}")
            self.runs.pop(job.id, None)
            self.engine.finish(job.id, now, ok=False, reason=f"could not start: {exc}")
            return
        self.store.set_ref(job.id, attempt, handle.ref, now)
        run.handle = handle
        run.launch = Launch(job.id, launch.attempt, ex.name, handle.ref, now, dev_rows, None, None, None, None, None)
        hosts = sorted({d.host for d in devices})
        self._audit(now, job.id, f"executor:{ex.name}", "started", f"on {', '.join(hosts)}",
                         {"ref": handle.ref, "attempt": attempt})
        stored_quote = stored.quote if stored is not None else None
        if job.attempts == 1 and isinstance(stored_quote, dict) and stored_quote.get("wait_p50_s"):
            q = float(stored_quote["wait_p50_s"])
            if q > 1.0:
                self._wait_ratios.append((now - job.submitted_at) / q)

    def _to_sample(self) -> list[tuple[str, Executor, list[PlacedDevice]]]:
        out: list[tuple[str, Executor, list[PlacedDevice]]] = []
        for job_id, run in self.runs.items():
            if run.handle is None:
                continue
            if not isinstance(run.executor, DeviceSampler) and not callable(getattr(run.executor, "telemetry", None)):
                continue
            out.append((job_id, run.executor, [PlacedDevice(d["host"], d["device_id"], int(d["index"]), d["vendor"],
                                                            d["model"]) for d in run.launch.devices]))
        return out

    def _sample(self, todo: list[tuple[str, Executor, list[PlacedDevice]]], now: float) -> None:
        """Read the devices of running jobs: an executor's ``sample`` (:class:`DeviceSampler`), or
        its ``telemetry(devices)`` returning accel's :class:`accel.model.Telemetry` readings."""
        rows: list[tuple[str, float, str, int | None, float | None, float | None]] = []
        for job_id, ex, devices in todo:
            if isinstance(ex, DeviceSampler):
                for s in ex.sample(devices):
                    rows.append((job_id, now, s.device_id, s.memory_used_bytes, s.utilization_ratio, s.power_watts))
                continue
            try:
                readings = ex.telemetry(devices)  # type: ignore[attr-defined]
            except (AccelError, ExecutorError):
                continue  # an unreadable device is left out of this sample, never fatal
            for tel in readings:
                if isinstance(tel, Telemetry):
                    rows.append((job_id, now, tel.device_id, tel.memory_used_bytes, tel.utilization_ratio,
                                 tel.power_watts))
        self.store.add_samples(rows)

    # -- requests ------------------------------------------------------------------------------------
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
        pools = list(self.engine.pools)
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

    def quote(self, who: Principal, req: JobRequest) -> list[dict[str, Any]]:
        """Every pool that can take ``req``: wait p50 / p90, price, expected cost, why it waits."""
        tenant = self._tenant(who, req)
        with self.lock:
            now = self.now()
            return self._quote(tenant, req, now)

    def _quote(self, tenant: str, req: JobRequest, now: float) -> list[dict[str, Any]]:
        pools = self.pools_for(req)
        if not pools:
            raise InvalidRequestError(self._no_pool(req), field="model")
        probe = f"quote-{secrets.token_hex(6)}"
        ests: list[WaitEstimate] = self.engine.quote(self._spec(probe, tenant, req, ""), now)
        ahead = len(self.engine.queue(now))
        out = []
        for est in ests:
            if est.pool not in pools:
                continue
            price = self.engine.meter.prices.device_hour(est.pool)
            share = (req.share["compute_milli"] / 1000.0) if req.share else float(req.devices)
            hours = (req.duration_s or req.time_limit_s or 3600.0) / 3600.0
            # p50 / p90 from the engine's interval (the spread of the durations it predicts for
            # the jobs ahead; equal to the plan when durations are declared and taken as exact)
            finite = math.isfinite(est.wait_s)
            wait = (est.p50_s if est.p50_s is not None else est.wait_s) if finite else None
            p90 = (est.p90_s if est.p90_s is not None else est.wait_s) if finite else None
            out.append({"pool": est.pool, "vendor": self._pool_vendor.get(est.pool, ""),
                        "wait_p50_s": wait, "wait_p90_s": p90, "p90_basis": est.basis or "declared durations",
                        "start_at": est.start_at if math.isfinite(est.start_at) else None,
                        "price_per_device_hour": price, "currency": self.engine.meter.prices.currency,
                        "expected_cost": round(price * share * hours, 6), "reason": est.reason.value,
                        "why": self._why(est, ahead), "summary": est.describe()})
        return out

    @staticmethod
    def _why(est: WaitEstimate, ahead: int) -> str:
        if est.reason == WaitReason.NONE:
            return "starts now"
        if est.reason == WaitReason.PRIORITY:
            return f"queue position: {ahead} job(s) queued ahead"
        if est.reason == WaitReason.RESERVATION:
            return "a reservation ahead holds the free devices"
        if est.reason == WaitReason.QUOTA:
            return "the tenant's quota is in use until its own jobs end"
        if est.reason == WaitReason.CAPACITY:
            return "waits for running jobs to release devices" if math.isfinite(est.wait_s) else \
                "not with the current capacity"
        return "the placement pipeline refused it with the devices free now"

    def _no_pool(self, req: JobRequest) -> str:
        what = req.pool or req.model or req.vendor or "any"
        return (f"no pool can take {req.devices} device(s) of {what!r}; pools: "
                + ", ".join(f"{p} ({self.engine.pool_capacity(p)})" for p in self.engine.pools))

    def _tenant(self, who: Principal, req: JobRequest) -> str:
        if req.tenant and req.tenant != who.tenant:
            if not who.admin:
                raise PermissionError("only an admin submits for another tenant")
            return req.tenant
        return who.tenant

    def submit(self, who: Principal, req: JobRequest) -> str:
        """Queue ``req``; the chosen pool's quote is kept with it.  Returns the job id."""
        tenant = self._tenant(who, req)
        with self.lock:
            now = self.now()
            quotes = self._quote(tenant, req, now)
            chosen = min(quotes, key=lambda q: (q["start_at"] if q["start_at"] is not None else math.inf,
                                                q["price_per_device_hour"]))
            if req.pool and req.pool not in [q["pool"] for q in quotes]:
                raise InvalidRequestError(self._no_pool(req), field="pool")
            seq = self.store.next_seq()
            job_id = f"j{seq:06d}-{secrets.token_hex(3)}"
            pool = chosen["pool"] if (req.pool or req.model or req.vendor) else ""
            stored = StoredJob(job_id, seq, tenant, req.name, {**req.as_dict(), "tenant": tenant, "pool": pool}, now,
                               self.clock.wall(now), who.actor, {**chosen, "all": quotes})
            with self.store.transaction():  # the request and its quote: one commit, before the journal's
                self.store.add_job(stored)  # ``submitted`` (a crash in between is resubmitted on restart)
                self._audit(now, job_id, who.actor, "quoted", chosen["summary"], {"pools": len(quotes)})
            self._engine_submit(stored, now)
        self.wake()
        return job_id

    def _engine_submit(self, stored: StoredJob, now: float) -> None:
        req = request_from_dict(stored.request)
        self.engine.submit(self._spec(stored.id, stored.tenant, req, req.pool), max(now, self.engine.now))

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
        self.wake()

    def _visible(self, who: Principal, job_id: str) -> StoredJob:
        stored = self.store.job(job_id)
        if stored is None or not who.sees(stored.tenant):
            raise NotFoundError(f"no job {job_id}")
        return stored

    # -- reading -------------------------------------------------------------------------------------
    def jobs(self, who: Principal, *, limit: int = 100, state: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            rows = self.store.jobs(None if who.admin else who.tenant, limit=limit if state is None else None)
            ran_on = self.store.last_models([s.id for s in rows[:limit] if state is None] or None)
            out = []
            for s in rows:
                job = self.engine.jobs.get(s.id)
                st = job.state.value if job is not None else "unknown"
                if state is not None and st != state:
                    continue
                out.append(self._summary(s, job, ran_on))
                if len(out) >= limit:
                    break
            return out

    def _summary(self, s: StoredJob, job: Job | None, ran_on: Mapping[str, str] | None = None) -> dict[str, Any]:
        pool = (job.pool if job else None) or s.request.get("pool") or None
        if pool is None and job is not None and job.attempts:
            pool = (ran_on or {}).get(s.id) or _pool_of(job, self.engine.history(s.id))
        return {"id": s.id, "name": s.name, "tenant": s.tenant, "state": job.state.value if job else "unknown",
                "pool": pool,
                "devices": s.request["devices"], "submitted_at": s.submitted_t,
                "submitted_wall": s.submitted_wall, "reason": job.reason if job else ""}

    def record(self, who: Principal, job_id: str) -> dict[str, Any]:
        """Everything about one job (what its page shows and ``accel job show --json`` prints)."""
        with self.lock:
            stored = self._visible(who, job_id)
            job = self.engine.jobs.get(stored.id)
            history = self.engine.history(stored.id)
            launches = self.store.launches(stored.id)
            audit = self.store.audit_rows(stored.id)
            now = self.now()
        req = request_from_dict(stored.request)
        timeline = [{"t": ev.t, "wall": self.clock.wall(ev.t), "actor": "scheduler", "kind": ev.kind,
                     "reason": ev.reason} for ev in history]
        timeline += [{"t": a.t, "wall": a.wall, "actor": a.actor, "kind": a.kind, "reason": a.reason}
                     for a in audit]
        timeline.sort(key=lambda r: (r["t"], 0 if r["actor"] == "scheduler" else 1))
        last = launches[-1] if launches else None
        exit_info = None
        if last is not None and last.ended_t is not None:
            exit_info = {"exit_code": last.exit_code, "signal": last.signal, "reason": last.reason,
                         "detail": last.detail, "at": last.ended_t}
        quote = stored.quote if isinstance(stored.quote, dict) else {}
        actual = None
        if job is not None and job.first_started_at is not None:
            actual = job.first_started_at - job.submitted_at
        topo = req.topology["level"] if req.topology else None
        return {
            "id": stored.id, "name": stored.name, "tenant": stored.tenant, "submitted_by": stored.actor,
            "state": job.state.value if job is not None else "unknown", "reason": job.reason if job else "",
            "submitted_at": stored.submitted_t, "submitted_wall": stored.submitted_wall,
            "pool": _pool_of(job, history), "attempts": job.attempts if job is not None else 0,
            "command": list(req.command), "env_names": [k for k, _v in req.env],
            "request": {k: v for k, v in stored.request.items() if k != "env"},
            "quote": {k: v for k, v in quote.items() if k != "all"}, "quotes": quote.get("all", []),
            "wait": {"quoted_p50_s": quote.get("wait_p50_s"), "quoted_p90_s": quote.get("wait_p90_s"),
                     "actual_s": actual},
            "allocation": {"devices": last.devices if last is not None else [], "topology_level": topo},
            "exit": exit_info,
            "launches": [{"attempt": la.attempt, "executor": la.executor, "ref": la.ref, "started_at": la.started_t,
                          "ended_at": la.ended_t, "exit_code": la.exit_code, "signal": la.signal, "reason": la.reason,
                          "detail": la.detail} for la in launches],
            "timeline": timeline,
            "bill": self._job_bill(history, now),
            "now": now,
        }

    def _job_bill(self, history: list[Event], now: float) -> dict[str, Any]:
        """Bill lines of one job, priced from the stored table as the engine's meter prices them."""
        prices = self.engine.meter.prices
        lines: list[dict[str, Any]] = []
        open_seg: tuple[float, str, int, float] | None = None

        def close(t: float) -> None:
            assert open_seg is not None
            start, pool, n, share = open_seg
            hours = max(0.0, t - start) / 3600.0
            share_h = share * hours
            lines.append({"pool": pool, "from": start, "until": t, "devices": n, "device_hours": round(n * hours, 6),
                          "price_per_device_hour": prices.device_hour(pool),
                          "cost": round(share_h * prices.device_hour(pool), 6)})

        for ev in history:
            if ev.kind in ("placed", "resumed"):
                n = sum(len(slots) for _h, slots in ev.data["chunks"])
                open_seg = (ev.t, str(ev.data["pool"]), n, float(ev.data["share"]))
            elif open_seg is not None and ev.kind in ("preempted", "failed", "finished", "cancelled"):
                close(ev.t)
                open_seg = None
        if open_seg is not None:
            close(now)
        return {"lines": lines, "total": round(sum(x["cost"] for x in lines), 6), "currency": prices.currency}

    def bill(self, who: Principal) -> dict[str, Any]:
        with self.lock:
            b = self.engine.bill(self.now())
        rows = [r for r in b.as_rows() if who.sees(str(r["tenant"]))]
        return {"lines": rows, "total": round(sum(float(str(r["cost"])) for r in rows), 6), "currency": b.currency,
                "until": b.until}

    def pools(self) -> list[dict[str, Any]]:
        with self.lock:
            queued = self.engine.queue()
            out = []
            for p in self.engine.pools:
                hosts = sorted({inv.host.hostname for inv in self.inventories.values()
                                for d in inv.devices if (d.model or "unknown") == p})
                out.append({"pool": p, "vendor": self._pool_vendor.get(p, ""), "hosts": hosts,
                            "devices": self.engine.pool_capacity(p), "free": self.engine.pool_free(p),
                            "queued": sum(1 for j in queued if j.spec.pool in ("", p)),
                            "running": sum(1 for j in self.engine.running() if j.pool == p),
                            "price_per_device_hour": self.engine.meter.prices.device_hour(p),
                            "currency": self.engine.meter.prices.currency})
            return out

    def log_file(self, who: Principal, job_id: str, stream: str) -> Path | None:
        """The job's ``stream`` log (``stdout`` / ``stderr`` only), or ``None`` before it ran."""
        if stream not in ("stdout", "stderr"):
            raise InvalidRequestError("stream must be stdout or stderr", field="stream")
        with self.lock:
            stored = self._visible(who, job_id)
            launches = self.store.launches(stored.id)
            if not launches:
                return None
            last = launches[-1]
            ex = {e.name: e for e in self.executors}.get(last.executor)
        if ex is None:
            return None
        path = ex.log_path(Handle(last.executor, stored.id, last.ref or ""), "stdout" if stream == "stdout"
                           else "stderr")
        return path

    def samples(self, who: Principal, job_id: str) -> list[tuple[float, str, int | None, float | None, float | None]]:
        with self.lock:
            stored = self._visible(who, job_id)
        return self.store.samples(stored.id)


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


def _pool_of(job: Job | None, history: list[Event]) -> str | None:
    """The pool a job runs (or last ran) in: the engine's, else its last placement's."""
    if job is not None and job.pool:
        return job.pool
    placed = [ev for ev in history if ev.kind in ("placed", "resumed")]
    return str(placed[-1].data["pool"]) if placed else None


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
