"""Event application and recovery: the only code that changes the engine's state.

Every change is an event: :func:`emit` journals it and :func:`apply` applies it to the
:class:`~._state.EngineState`, and :func:`replay` (:meth:`QueueingScheduler.recover`) applies the
journaled events again onto a fresh state, after :func:`cluster_problem` checked that each one
exists in this cluster.  Live state and rebuilt state cannot drift apart.  (``placed`` /
``resumed`` bind the requests the placement stage built, kept in ``EngineState.req_cache``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from accel.errors import SchedulerError
from accel.model import HostInventory
from accel.scheduler import Allocation, SchedulerStateError, Share, host_spec_from_inventory

from ._journal import Event, Journal, JournalError
from ._meter import Segment
from ._records import Job
from ._state import EngineState
from ._types import JobSpec, JobState, PreemptMode, WaitReason, topology_from_dict, topology_to_dict

__all__ = ["apply", "cluster_problem", "emit", "replay", "spec_dict", "stop", "update_health"]


def emit(st: EngineState, t: float, job: str | None, kind: str, reason: str = "",
         data: dict[str, Any] | None = None) -> None:
    """Journal an event (not while replaying) and apply it: every change to the state goes here."""
    data = data or {}
    if not st.replaying:
        st.journal.append(t, job, kind, reason, data)
    apply(st, Event(0, t, job, kind, reason, data))


def apply(st: EngineState, ev: Event) -> None:
    """Apply one event to the engine's state (live, right after journaling it, and on replay)."""
    st.advance(ev.t)
    handler = _HANDLERS.get(ev.kind)
    if handler is None:
        raise SchedulerStateError(f"journal has an unknown event kind {ev.kind!r}")
    handler(st, ev)


def on_submitted(st: EngineState, ev: Event) -> None:
    d = ev.data["spec"]
    share = Share(**d["share"]) if d.get("share") else None
    labels = tuple(tuple(x) for x in d.get("labels", ()))
    spec = JobSpec(**{**d, "share": share, "labels": labels, "topology": topology_from_dict(d.get("topology"))})
    st.seq += 1
    job = Job(spec, st.policy.klass(spec.priority_class), st.seq, ev.t)
    job.estimate_at_submit = ev.data.get("estimate")
    job.queued_at = ev.t
    st.jobs[spec.id] = job
    st.waiting[spec.id] = job


def on_placed(st: EngineState, ev: Event) -> None:
    """``placed`` / ``resumed``: bind the slots (with the requests the placement built, kept in
    ``req_cache``, or built again on replay) and start the job's meter segments."""
    job = st.jobs[str(ev.job)]
    pool = str(ev.data["pool"])
    spec = job.spec
    allocs: list[Allocation] = []
    chunks = ev.data["chunks"]
    cl = st.cluster
    for i, (host_name, slots) in enumerate(chunks):
        h = cl.host_index[host_name]
        req = st.req_cache.pop((job.id, i), None) or st.chunk_request(spec, pool, i, len(slots), len(chunks))
        devs = tuple(map(int, slots))
        # slots that were fully free and usable stop being free: count them down in place
        # (a full recount per host costs more than the allocation itself at 5,000 hosts; the
        # host's rows are read once as lists, cheaper than a numpy scalar per slot and field)
        usable, left, cap = cl.dev_usable[h].tolist(), cl.dev_left[h].tolist(), cl.dev_cap[h].tolist()
        pools = st.slot_pool[h].tolist()
        was_free = [d for d in devs if usable[d] and left[d] == cap[d] and pools[d] >= 0]
        allocs.append(cl.allocate(req, h, devs))
        totals = st.pool_totals  # kept in step (the per-pool sums of ``host_free``), not recounted
        for d in was_free:
            st.host_free[h, pools[d]] -= 1
            if totals is not None:
                totals[pools[d]] -= 1
        if was_free and st.free_index is not None:
            for p in {pools[d] for d in was_free}:
                st.free_index.moved(h, p)
    job.allocs = allocs
    job.pool = pool
    job.state = JobState.RUNNING
    job.promoted = False  # it got what it waited for; its tiers keep counting from the base
    st.waiting.pop(job.id, None)
    st.held_hosts.pop(job.id, None)
    job.target_hosts = ()
    st.active[job.id] = job
    job.started_at = ev.t
    job.stop_at = None
    job.attempts += 1
    job.borrowing = bool(ev.data.get("borrowing", False))
    if job.first_started_at is None:
        job.first_started_at = ev.t
        est = job.estimate_at_submit
        if st.policy.calibrate_window and est is not None and est - job.submitted_at > 1.0:
            st.ratios.append((ev.t - job.submitted_at) / (est - job.submitted_at))
    job.reason = ev.reason
    job.wait = WaitReason.NONE
    st.reservations.pop(job.id, None)
    use = st.usage(job)
    st.book.add(spec.tenant, pool, use, ev.t)
    mem = spec.share.memory_bytes if spec.share is not None else st.dev_mem.get(pool, 0)
    share = spec.compute_milli / 1000.0
    st.meter.start(job.id, [Segment(spec.tenant, pool, len(a.devices), mem * len(a.devices),
                                    share * len(a.devices) / max(spec.devices, 1), ev.t) for a in allocs])


def on_admitted(st: EngineState, ev: Event) -> None:
    pass  # informational: the quota check passed (placement follows in the same call)


def on_promoted(st: EngineState, ev: Event) -> None:
    # starvation guard: first in its class while it waits, and its tiers count afresh
    job = st.jobs[str(ev.job)]
    job.promoted = True
    job.service_base = float(ev.data["base_device_s"])
    job.tier_seen = 0
    if job.id in st.waiting:
        st.waiting[job.id] = job  # set again: its queue order key changed (the engine's kept order)


def on_demoted(st: EngineState, ev: Event) -> None:
    # informational: the tier is derived from run time; this records when the scheduler saw it
    st.jobs[str(ev.job)].tier_seen = int(ev.data["tier"])


def on_preempting(st: EngineState, ev: Event) -> None:
    job = st.jobs[str(ev.job)]
    job.state = JobState.PREEMPTING
    job.stop_at = float(ev.data["stop_at"])
    job.reason = ev.reason
    for_job = ev.data.get("for")
    job.preempted_for = str(for_job) if for_job is not None else None
    # the hosts kept for the preemptor: ``host`` (one), ``hosts`` (a gang's; absent in older journals)
    host, hosts = ev.data.get("host"), ev.data.get("hosts")
    job.preempted_hosts = tuple(str(h) for h in hosts) if hosts is not None else (
        (str(host),) if host is not None else ())
    preemptor = st.jobs.get(job.preempted_for) if job.preempted_for is not None else None
    if job.preempted_hosts and preemptor is not None:
        preemptor.target_hosts = job.preempted_hosts


def stop(st: EngineState, job: Job, t: float) -> None:
    """Release a job's devices and close its meter segments."""
    for a in job.allocs:
        st.cluster.release(a)
        st.refresh_host(a.host)
    if job.pool is not None:
        st.book.add(job.spec.tenant, job.pool, st.usage(job), t, sign=-1)
    st.meter.stop(job.id, t)
    job.allocs = []
    job.preempted_for = None
    job.preempted_hosts = ()
    st.active.pop(job.id, None)


def on_preempted(st: EngineState, ev: Event) -> None:
    job = st.jobs[str(ev.job)]
    progress = job.progress(ev.t)
    job.last_run_s = ev.t - job.started_at if job.started_at is not None else 0.0
    job.queued_at = ev.t
    keep = float(ev.data["keep"])
    stop(st, job, ev.t)
    job.lost_s += max(0.0, progress - keep)
    job.work_s = keep
    job.state = JobState.SUSPENDED if ev.data.get("mode") == PreemptMode.SUSPEND.value else JobState.QUEUED
    st.waiting[job.id] = job
    job.started_at = None
    job.stop_at = None
    job.pool = None
    job.reason = ev.reason


def on_failed(st: EngineState, ev: Event) -> None:
    job = st.jobs[str(ev.job)]
    progress = job.progress(ev.t)
    if job.started_at is not None:
        job.last_run_s = ev.t - job.started_at
    if job.active:
        stop(st, job, ev.t)
    if ev.data.get("requeue"):
        job.queued_at = ev.t
        keep = float(ev.data["keep"])
        job.lost_s += max(0.0, progress - keep)
        job.work_s = keep
        job.state = JobState.QUEUED
        st.waiting[job.id] = job
    else:
        job.work_s = progress
        job.state = JobState.FAILED
        job.ended_at = ev.t
        st.waiting.pop(job.id, None)
    job.started_at = None
    job.pool = None
    job.reason = ev.reason


def on_finished(st: EngineState, ev: Event) -> None:
    job = st.jobs[str(ev.job)]
    progress = job.progress(ev.t)
    if job.active:
        stop(st, job, ev.t)
    job.work_s = progress
    job.state = JobState.FINISHED
    job.ended_at = ev.t
    st.durations.observe((job.spec.tenant, job.spec.devices), progress)
    st.waiting.pop(job.id, None)
    job.pool = None
    job.reason = ev.reason


def on_cancelled(st: EngineState, ev: Event) -> None:
    job = st.jobs[str(ev.job)]
    if job.active:
        stop(st, job, ev.t)
    job.state = JobState.CANCELLED
    job.ended_at = ev.t
    st.waiting.pop(job.id, None)
    job.reason = ev.reason
    st.reservations.pop(job.id, None)


def on_health(st: EngineState, ev: Event) -> None:
    h = st.cluster.host_index[str(ev.data["host"])]
    slot = int(ev.data["slot"])
    st.cluster.set_device_health(h, slot, usable=bool(ev.data["usable"]), degraded=bool(ev.data.get("degraded")))
    st.refresh_host(h)


def cluster_problem(st: EngineState, ev: Event) -> str | None:
    """What in a journaled event does not exist in this cluster (replay only)."""
    cl, d = st.cluster, ev.data
    if ev.kind == "submitted":
        pool = d["spec"]["pool"]
        return f"pool {pool!r} is not in this cluster ({', '.join(st.pools)})" \
            if pool and pool not in st.pool_index else None
    if ev.kind in ("placed", "resumed"):
        pidx = st.pool_index.get(d["pool"])
        if pidx is None:
            return f"pool {d['pool']!r} is not in this cluster ({', '.join(st.pools)})"
        for host, slots in d["chunks"]:
            h = cl.host_index.get(host)
            if h is None:
                return f"host {host!r} is not in this cluster"
            for s in slots:
                if s >= len(cl.dev_ids[h]):
                    return f"host {host} has no device slot {s} (it has {len(cl.dev_ids[h])})"
                if st.slot_pool[h, s] != pidx:
                    return f"device {cl.dev_ids[h][s]} is not in pool {d['pool']}"
                if not cl.dev_usable[h, s]:
                    return f"device {cl.dev_ids[h][s]} is not usable at this point of the journal"
        return None
    if ev.kind == "preempting":
        for name in ([d["host"]] if "host" in d else []) + list(d.get("hosts", [])):
            if name not in cl.host_index:
                return f"host {name!r} is not in this cluster"
    if ev.kind == "health":
        h = cl.host_index.get(d["host"])
        if h is None:
            return f"host {d['host']!r} is not in this cluster"
        if d["slot"] >= len(cl.dev_ids[h]):
            return f"host {d['host']} has no device slot {d['slot']} (it has {len(cl.dev_ids[h])})"
        if cl.dev_ids[h][d["slot"]] != d["device"]:
            return f"slot {d['slot']} of host {d['host']} is {cl.dev_ids[h][d['slot']]}, not {d['device']}"
    return None


def replay(st: EngineState, jr: Journal) -> None:
    """Apply every event of ``jr`` to a fresh engine (:meth:`QueueingScheduler.recover`).

    Every event is checked first (:meth:`Journal.events`: format, payload, each job's life;
    here: pools, hosts, slots and devices of this cluster); the first one that is wrong, or
    that does not apply to this cluster and policy, raises :class:`JournalError` naming it.
    """
    st.replaying = True
    try:
        for ev in jr.events():
            problem = cluster_problem(st, ev)
            if problem is not None:
                raise JournalError(jr.path, problem, seq=ev.seq, kind=ev.kind)
            try:
                apply(st, ev)
            except JournalError:
                raise
            except (SchedulerError, KeyError, IndexError, TypeError, ValueError) as exc:
                # the journal's rows are the only input here: a row the state refuses is a bad row
                raise JournalError(jr.path, f"does not apply to this cluster and policy: {exc}",
                                   seq=ev.seq, kind=ev.kind) from exc
    finally:
        st.replaying = False


_HANDLERS: dict[str, Callable[[EngineState, Event], None]] = {
    "submitted": on_submitted, "admitted": on_admitted, "placed": on_placed, "resumed": on_placed,
    "promoted": on_promoted, "demoted": on_demoted,
    "preempting": on_preempting, "preempted": on_preempted, "failed": on_failed, "finished": on_finished,
    "cancelled": on_cancelled, "health": on_health,
}


def update_health(st: EngineState, now: float,
                  snapshot: Iterable[HostInventory] | Mapping[str, bool]) -> list[str]:
    """Health changes as events (:meth:`QueueingScheduler.update_health`): each job on a device
    that turned unusable ``failed`` (requeued from its last checkpoint), then the ``health``
    event; returns the failed-over jobs' ids."""
    st.advance(now)
    wanted: dict[str, tuple[bool, bool]] = {}
    if isinstance(snapshot, Mapping):
        wanted = {str(k): (bool(v), False) for k, v in snapshot.items()}
    else:
        for inv in snapshot:
            spec = host_spec_from_inventory(inv)
            for dev in spec.devices:
                wanted[dev.id] = (dev.healthy, dev.degraded)
    where: dict[str, tuple[int, int]] = {}
    for h, ids in enumerate(st.cluster.dev_ids):
        for s, did in enumerate(ids):
            where[did] = (h, s)
    hit: list[str] = []
    with st.journal.transaction():
        for did, (usable, degraded) in sorted(wanted.items()):
            if did not in where:
                continue
            h, s = where[did]
            if bool(st.cluster.dev_usable[h, s]) == usable and bool(st.cluster.dev_degraded[h, s]) == degraded:
                continue
            if not usable:
                for job in sorted(st.running(), key=lambda j: j.seq):
                    if any(a.host == h and s in a.devices for a in job.allocs):
                        keep = job.checkpoint_at(now)
                        emit(st, now, job.id, "failed", f"device {did} unhealthy: resume from checkpoint",
                                  {"requeue": True, "keep": keep, "device": did})
                        hit.append(job.id)
            emit(st, now, None, "health", f"device {did} {'usable' if usable else 'unusable'}",
                      {"host": st.cluster.host_names[h], "slot": s, "usable": usable, "degraded": degraded,
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
