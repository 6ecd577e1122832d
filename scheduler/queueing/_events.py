"""Event application and recovery: the only code that changes the engine's state.

Every change is an event: :meth:`QueueingScheduler._emit` journals it and :func:`apply` applies it,
and :func:`replay` (:meth:`QueueingScheduler.recover`) applies the journaled events again onto a
fresh cluster view, after :func:`cluster_problem` checked that each one exists in this cluster.
Live state and rebuilt state cannot drift apart.  (``placed``/``resumed`` are applied by the
engine's ``_on_placed``, next to the placement code that builds their requests.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from accel.errors import SchedulerError
from accel.model import HostInventory
from accel.scheduler import SchedulerStateError, Share, host_spec_from_inventory

from ._journal import Event, Journal, JournalError
from ._records import Job
from ._types import JobSpec, JobState, PreemptMode, topology_from_dict, topology_to_dict

if TYPE_CHECKING:
    from ._engine import QueueingScheduler

__all__ = ["apply", "cluster_problem", "replay", "spec_dict", "stop", "update_health"]


def apply(eng: QueueingScheduler, ev: Event) -> None:
    """Apply one event to the engine's state (live, right after journaling it, and on replay)."""
    eng._advance(ev.t)
    handler = _HANDLERS.get(ev.kind)
    if handler is None:
        raise SchedulerStateError(f"journal has an unknown event kind {ev.kind!r}")
    handler(eng, ev)


def on_submitted(eng: QueueingScheduler, ev: Event) -> None:
    d = ev.data["spec"]
    share = Share(**d["share"]) if d.get("share") else None
    labels = tuple(tuple(x) for x in d.get("labels", ()))
    spec = JobSpec(**{**d, "share": share, "labels": labels, "topology": topology_from_dict(d.get("topology"))})
    eng._seq += 1
    job = Job(spec, eng.policy.klass(spec.priority_class), eng._seq, ev.t)
    job.estimate_at_submit = ev.data.get("estimate")
    job.queued_at = ev.t
    eng.jobs[spec.id] = job
    eng._waiting[spec.id] = job


def on_placed(eng: QueueingScheduler, ev: Event) -> None:
    # placement stays with the engine: it uses the requests the engine's placer built
    eng._on_placed(ev)


def on_admitted(eng: QueueingScheduler, ev: Event) -> None:
    pass  # informational: the quota check passed (placement follows in the same call)


def on_promoted(eng: QueueingScheduler, ev: Event) -> None:
    # starvation guard: first in its class while it waits, and its tiers count afresh
    job = eng.jobs[str(ev.job)]
    job.promoted = True
    job.service_base = float(ev.data["base_device_s"])
    job.tier_seen = 0
    if job.id in eng._waiting:
        eng._waiting[job.id] = job  # set again: its queue order key changed (the engine's kept order)


def on_demoted(eng: QueueingScheduler, ev: Event) -> None:
    # informational: the tier is derived from run time; this records when the scheduler saw it
    eng.jobs[str(ev.job)].tier_seen = int(ev.data["tier"])


def on_preempting(eng: QueueingScheduler, ev: Event) -> None:
    job = eng.jobs[str(ev.job)]
    job.state = JobState.PREEMPTING
    job.stop_at = float(ev.data["stop_at"])
    job.reason = ev.reason
    for_job = ev.data.get("for")
    job.preempted_for = str(for_job) if for_job is not None else None
    # the hosts kept for the preemptor: ``host`` (one), ``hosts`` (a gang's; absent in older journals)
    host, hosts = ev.data.get("host"), ev.data.get("hosts")
    job.preempted_hosts = tuple(str(h) for h in hosts) if hosts is not None else (
        (str(host),) if host is not None else ())
    preemptor = eng.jobs.get(job.preempted_for) if job.preempted_for is not None else None
    if job.preempted_hosts and preemptor is not None:
        preemptor.target_hosts = job.preempted_hosts


def stop(eng: QueueingScheduler, job: Job, t: float) -> None:
    """Release a job's devices and close its meter segments."""
    for a in job.allocs:
        eng.state.release(a)
        eng._refresh_host(a.host)
    if job.pool is not None:
        eng.book.add(job.spec.tenant, job.pool, eng._usage(job), t, sign=-1)
    eng.meter.stop(job.id, t)
    job.allocs = []
    job.preempted_for = None
    job.preempted_hosts = ()
    eng._active.pop(job.id, None)


def on_preempted(eng: QueueingScheduler, ev: Event) -> None:
    job = eng.jobs[str(ev.job)]
    progress = job.progress(ev.t)
    job.last_run_s = ev.t - job.started_at if job.started_at is not None else 0.0
    job.queued_at = ev.t
    keep = float(ev.data["keep"])
    stop(eng, job, ev.t)
    job.lost_s += max(0.0, progress - keep)
    job.work_s = keep
    job.state = JobState.SUSPENDED if ev.data.get("mode") == PreemptMode.SUSPEND.value else JobState.QUEUED
    eng._waiting[job.id] = job
    job.started_at = None
    job.stop_at = None
    job.pool = None
    job.reason = ev.reason


def on_failed(eng: QueueingScheduler, ev: Event) -> None:
    job = eng.jobs[str(ev.job)]
    progress = job.progress(ev.t)
    if job.started_at is not None:
        job.last_run_s = ev.t - job.started_at
    if job.active:
        stop(eng, job, ev.t)
    if ev.data.get("requeue"):
        job.queued_at = ev.t
        keep = float(ev.data["keep"])
        job.lost_s += max(0.0, progress - keep)
        job.work_s = keep
        job.state = JobState.QUEUED
        eng._waiting[job.id] = job
    else:
        job.work_s = progress
        job.state = JobState.FAILED
        job.ended_at = ev.t
        eng._waiting.pop(job.id, None)
    job.started_at = None
    job.pool = None
    job.reason = ev.reason


def on_finished(eng: QueueingScheduler, ev: Event) -> None:
    job = eng.jobs[str(ev.job)]
    progress = job.progress(ev.t)
    if job.active:
        stop(eng, job, ev.t)
    job.work_s = progress
    job.state = JobState.FINISHED
    job.ended_at = ev.t
    eng.durations.observe((job.spec.tenant, job.spec.devices), progress)
    eng._waiting.pop(job.id, None)
    job.pool = None
    job.reason = ev.reason


def on_cancelled(eng: QueueingScheduler, ev: Event) -> None:
    job = eng.jobs[str(ev.job)]
    if job.active:
        stop(eng, job, ev.t)
    job.state = JobState.CANCELLED
    job.ended_at = ev.t
    eng._waiting.pop(job.id, None)
    job.reason = ev.reason
    eng.reservations.pop(job.id, None)


def on_health(eng: QueueingScheduler, ev: Event) -> None:
    h = eng.state.host_index[str(ev.data["host"])]
    slot = int(ev.data["slot"])
    eng.state.set_device_health(h, slot, usable=bool(ev.data["usable"]), degraded=bool(ev.data.get("degraded")))
    eng._refresh_host(h)


def cluster_problem(eng: QueueingScheduler, ev: Event) -> str | None:
    """What in a journaled event does not exist in this cluster (replay only)."""
    st, d = eng.state, ev.data
    if ev.kind == "submitted":
        pool = d["spec"]["pool"]
        return f"pool {pool!r} is not in this cluster ({', '.join(eng.pools)})" \
            if pool and pool not in eng._pool_index else None
    if ev.kind in ("placed", "resumed"):
        pidx = eng._pool_index.get(d["pool"])
        if pidx is None:
            return f"pool {d['pool']!r} is not in this cluster ({', '.join(eng.pools)})"
        for host, slots in d["chunks"]:
            h = st.host_index.get(host)
            if h is None:
                return f"host {host!r} is not in this cluster"
            for s in slots:
                if s >= len(st.dev_ids[h]):
                    return f"host {host} has no device slot {s} (it has {len(st.dev_ids[h])})"
                if eng._slot_pool[h, s] != pidx:
                    return f"device {st.dev_ids[h][s]} is not in pool {d['pool']}"
                if not st.dev_usable[h, s]:
                    return f"device {st.dev_ids[h][s]} is not usable at this point of the journal"
        return None
    if ev.kind == "preempting":
        for name in ([d["host"]] if "host" in d else []) + list(d.get("hosts", [])):
            if name not in st.host_index:
                return f"host {name!r} is not in this cluster"
    if ev.kind == "health":
        h = st.host_index.get(d["host"])
        if h is None:
            return f"host {d['host']!r} is not in this cluster"
        if d["slot"] >= len(st.dev_ids[h]):
            return f"host {d['host']} has no device slot {d['slot']} (it has {len(st.dev_ids[h])})"
        if st.dev_ids[h][d["slot"]] != d["device"]:
            return f"slot {d['slot']} of host {d['host']} is {st.dev_ids[h][d['slot']]}, not {d['device']}"
    return None


def replay(eng: QueueingScheduler, jr: Journal) -> None:
    """Apply every event of ``jr`` to a fresh engine (:meth:`QueueingScheduler.recover`).

    Every event is checked first (:meth:`Journal.events`: format, payload, each job's life;
    here: pools, hosts, slots and devices of this cluster); the first one that is wrong, or
    that does not apply to this cluster and policy, raises :class:`JournalError` naming it.
    """
    eng._replaying = True
    try:
        for ev in jr.events():
            problem = cluster_problem(eng, ev)
            if problem is not None:
                raise JournalError(jr.path, problem, seq=ev.seq, kind=ev.kind)
            try:
                apply(eng, ev)
            except JournalError:
                raise
            except (SchedulerError, KeyError, IndexError, TypeError, ValueError) as exc:
                # the journal's rows are the only input here: a row the state refuses is a bad row
                raise JournalError(jr.path, f"does not apply to this cluster and policy: {exc}",
                                   seq=ev.seq, kind=ev.kind) from exc
    finally:
        eng._replaying = False


_HANDLERS: dict[str, Callable[[QueueingScheduler, Event], None]] = {
    "submitted": on_submitted, "admitted": on_admitted, "placed": on_placed, "resumed": on_placed,
    "promoted": on_promoted, "demoted": on_demoted,
    "preempting": on_preempting, "preempted": on_preempted, "failed": on_failed, "finished": on_finished,
    "cancelled": on_cancelled, "health": on_health,
}


def update_health(eng: QueueingScheduler, now: float,
                  snapshot: Iterable[HostInventory] | Mapping[str, bool]) -> list[str]:
    """Health changes as events (:meth:`QueueingScheduler.update_health`): each job on a device
    that turned unusable ``failed`` (requeued from its last checkpoint), then the ``health``
    event; returns the failed-over jobs' ids."""
    eng._advance(now)
    wanted: dict[str, tuple[bool, bool]] = {}
    if isinstance(snapshot, Mapping):
        wanted = {str(k): (bool(v), False) for k, v in snapshot.items()}
    else:
        for inv in snapshot:
            spec = host_spec_from_inventory(inv)
            for dev in spec.devices:
                wanted[dev.id] = (dev.healthy, dev.degraded)
    where: dict[str, tuple[int, int]] = {}
    for h, ids in enumerate(eng.state.dev_ids):
        for s, did in enumerate(ids):
            where[did] = (h, s)
    hit: list[str] = []
    with eng.batch():
        for did, (usable, degraded) in sorted(wanted.items()):
            if did not in where:
                continue
            h, s = where[did]
            if bool(eng.state.dev_usable[h, s]) == usable and bool(eng.state.dev_degraded[h, s]) == degraded:
                continue
            if not usable:
                for job in sorted(eng.running(), key=lambda j: j.seq):
                    if any(a.host == h and s in a.devices for a in job.allocs):
                        keep = job.checkpoint_at(now)
                        eng._emit(now, job.id, "failed", f"device {did} unhealthy: resume from checkpoint",
                                  {"requeue": True, "keep": keep, "device": did})
                        hit.append(job.id)
            eng._emit(now, None, "health", f"device {did} {'usable' if usable else 'unusable'}",
                      {"host": eng.state.host_names[h], "slot": s, "usable": usable, "degraded": degraded,
                       "device": did})
    return hit


def spec_dict(spec: JobSpec) -> dict[str, Any]:
    """A job's spec as a ``submitted`` event carries it (:func:`on_submitted` reads it back)."""
    return {"id": spec.id, "tenant": spec.tenant, "devices": spec.devices, "pool": spec.pool,
            "share": ({"compute_milli": spec.share.compute_milli, "memory_bytes": spec.share.memory_bytes}
                      if spec.share else None),
            "estimate_s": spec.estimate_s, "priority_class": spec.priority_class, "same_host": spec.same_host,
            "checkpoint_interval_s": spec.checkpoint_interval_s, "cpu_milli": spec.cpu_milli,
            "memory_bytes": spec.memory_bytes, "preemptible": spec.preemptible,
            "labels": [list(x) for x in spec.labels],
            # optional fields only when set: a journal without them reads as before
            **({"topology": topology_to_dict(spec.topology)} if spec.topology is not None else {})}
