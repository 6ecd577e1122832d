"""The live loop: restart recovery, then per tick end, stop, schedule, launch and sample runs.

One tick: end the runs that ended (poll), stop what must stop (time limits, cancellations,
preemptions), run one scheduling cycle, launch what the cycle placed, and sample the devices of
running jobs.  After a restart, :meth:`RunLoop._recover` resubmits requests the journal never got
and finds running jobs again.
"""

from __future__ import annotations

import heapq
import math
import signal as _signal

from accel.errors import AccelError
from accel.model import Telemetry
from accel.scheduler.queueing import Job, JobState

from ._base import Run, ServiceBase
from ._executor import Executor, ExecutorError, ExitReason, Handle, JobLostError, LaunchSpec, PlacedDevice, RunStatus
from ._jobreq import request_from_dict
from ._store import Launch
from .executors import DeviceSampler

_CHECKPOINT_GRACE_S = 30.0  # service seconds between the checkpoint signal and SIGTERM when cancelling


class RunLoop(ServiceBase):
    """Recovery and the live loop's tick (see the module docstring)."""

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
                run = Run(launch, ex, handle)
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
            self.publish(*self.engine.jobs)  # every job's view, once: readers start from here

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


    def tick(self) -> None:
        """One pass of the live loop (see the module docstring)."""
        with self.lock:
            now = self.now()
            self._enforce(now)  # signals first, so the poll right after sees what they ended
            self._reap(now)
            self._last_tick = now
            self.engine.cycle(now)
            self._launch_placed(now)
            self.publish()
            wall_now = self.clock.wall(now)
            todo: list[tuple[str, Executor, list[PlacedDevice]]] = []
            if wall_now - self._last_sample >= self._sample_every_s:
                self._last_sample = wall_now
                todo = self._to_sample()
            held = self._held() if self.attribution is not None else None
        # device reads are I/O: outside the lock, so API calls do not wait for them
        self._sample(todo, now)
        if self.attribution is not None and held is not None:
            self.attribution.update(held)

    def _held(self) -> dict[str, list[tuple[str, str, str]]]:
        """host -> (device id, job id, tenant) of every job with a started run."""
        out: dict[str, list[tuple[str, str, str]]] = {}
        for job_id, run in self.runs.items():
            job = self.engine.jobs.get(job_id)
            if run.handle is None or job is None:
                continue
            for d in run.launch.devices:
                out.setdefault(str(d["host"]), []).append((str(d["device_id"]), job_id, job.spec.tenant))
        return out

    def _launch_placed(self, now: float) -> list[Run]:
        """Launch what the engine placed and no executor runs yet; send checkpoint signals to
        jobs the engine is preempting.  Returns the runs it launched."""
        launched: list[Run] = []
        for job in self.engine.running():
            run = self.runs.get(job.id)
            if job.state == JobState.RUNNING and (run is None or run.launch.attempt != job.attempts):
                if any(la.attempt == job.attempts for la in self.store.launches(job.id)):
                    continue  # this attempt was launched already: never start it twice
                self._launch(job, now)
                new = self.runs.get(job.id)
                if new is not None and new.handle is not None:
                    launched.append(new)
            elif job.state == JobState.PREEMPTING and run is not None and not run.checkpoint_sent:
                self._preempting(job, run, now)
        return launched

    def _poll(self, run: Run, now: float) -> RunStatus | None:
        """The run's status (``None``: the executor could not say this time, audited)."""
        assert run.handle is not None
        try:
            return run.executor.poll(run.handle)
        except JobLostError as exc:
            return RunStatus(False, None, None, ExitReason.NODE_LOST, str(exc))
        except ExecutorError as exc:
            self._audit(now, run.launch.job, f"executor:{run.executor.name}", "poll-failed", str(exc))
            return None

    def _reap(self, now: float, *, due_only: bool = False) -> None:
        """End the runs that ended, each at the time its executor says (``RunStatus.ended_at``,
        kept within the engine's time and this tick's), in time order.  After the ends of one
        instant before ``now`` the engine runs a cycle at that instant and what it places is
        launched (``LaunchSpec.placed_at``: from then), as a replay of the same events does; a
        run so launched that has already ended joins the ends still to apply.  ``due_only``: poll
        only the runs whose declared end came since the last tick (what a request does before it
        moves the engine's time: cheap, and exact for an executor that ends jobs on time)."""
        ended: list[tuple[float, int, int, Run, RunStatus]] = []  # (end, engine seq, tiebreak, ...)
        count = 0

        def add(run: Run) -> None:
            nonlocal count
            status = self._poll(run, now)
            if status is not None and not status.running:
                job = self.engine.jobs.get(run.launch.job)
                count += 1
                heapq.heappush(ended, (self._end_time(status, now), job.seq if job is not None else 0, count, run,
                                       status))

        for run in list(self.runs.values()):
            if run.handle is None:
                continue
            if due_only:
                # declared ends that came since the last tick (one further behind was polled by that
                # tick and overruns: the next tick looks again, a request never waits on it)
                job = self.engine.jobs.get(run.launch.job)
                end = math.inf if job is None or job.started_at is None else \
                    job.started_at + max(0.0, job.spec.estimate_s - job.work_s)
                if not self._last_tick < end <= now:
                    continue
            add(run)
        while ended:
            t = ended[0][0]
            while ended and ended[0][0] == t:
                _t, _seq, _n, run, status = heapq.heappop(ended)
                self._ended(run, status, t)
            if t < now:
                self.engine.cycle(max(t, self.engine.now))
                for run in self._launch_placed(now):
                    add(run)

    def _end_time(self, status: RunStatus, now: float) -> float:
        """When a run ended on the engine's time line: the executor's ``ended_at``, no later than
        ``now`` and no earlier than the engine's time (it never goes back); else ``now``."""
        t = status.ended_at
        if t is None or not math.isfinite(t):
            return now
        floor = self.engine.now if math.isfinite(self.engine.now) else t
        return min(now, max(t, floor))

    def _ended(self, run: Run, status: RunStatus, now: float) -> None:
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

    def _kill(self, run: Run, now: float) -> None:
        """Stop a run the engine no longer counts: SIGTERM, then SIGKILL after the grace period."""
        if run.handle is None:
            return
        if run.signalled_at is None:
            self._signal(run, _signal.SIGTERM, now)
        elif now - run.signalled_at >= max(self.engine.policy.grace_s, _CHECKPOINT_GRACE_S):
            self._signal(run, _signal.SIGKILL, now)

    def _signal(self, run: Run, signum: int, now: float) -> None:
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

    def _preempting(self, job: Job, run: Run, now: float) -> None:
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
        run = Run(launch, ex, None)
        self.runs[job.id] = run
        # a resumed job runs what is left after the work the engine kept (its last checkpoint)
        declared = req.duration_s if req.duration_s is not None else job.spec.estimate_s
        # the contract: an existing absolute path (the state directory may be given relative)
        log_dir = (self.log_root / job.id).resolve()
        spec = LaunchSpec(job.id, job.spec.tenant, req.command, tuple(devices), req.env, log_dir,
                          max(0.0, declared - job.work_s), req.time_limit_s, req.checkpoint_signal,
                          placed_at=job.started_at)
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            handle = ex.start(spec)
        except (ExecutorError, OSError) as exc:
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

