"""Starting queued work: hosts and slots through the placement pipeline, and dry placements.

:func:`start` places a job the counts say fits (:func:`place`: :mod:`._placement`'s filter,
score and reserve stages, hosts kept for other preemptors excluded, a preemptor's own hosts
tried first) and journals it, or records why the pipeline refused it.  :func:`host_fits` and
:func:`released` answer "what if these allocations were gone" for victim searches, changing
nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from accel.scheduler import Allocation, Request

from ._events import emit
from ._placement import PlacementPlan, PlacementRefusal
from ._records import Job
from ._state import EngineState, IntArray
from ._tenants import Admission
from ._types import WaitReason

__all__ = ["host_fits", "place", "released", "start"]


def place(st: EngineState, job: Job, pool: str) -> list[tuple[str, list[int]]] | PlacementRefusal:
    """Hosts and slots through the placement pipeline (nothing bound; see ``_placement``).

    The chunk requests are kept in ``st.req_cache`` for the ``placed`` event to bind."""
    spec = job.spec
    cl = st.cluster

    def make(i: int, k: int, n_chunks: int) -> Request:
        return st.chunk_request(spec, pool, i, k, n_chunks)

    pool_free = st.host_free[:, st.pool_index[pool]]
    exclude = None
    held = [h for pid, (p, hs) in st.held_hosts.items() if p == pool and pid != job.id for h in hs]
    if held:
        # hosts whose free devices are kept for another preemptor in its grace period
        exclude = np.zeros(cl.n_hosts, dtype=bool)
        exclude[held] = True
        pool_free = np.where(exclude, 0, pool_free)
    got: PlacementPlan | PlacementRefusal | None = None
    targets = [h for h in (cl.host_index.get(name) for name in job.target_hosts)
               if h is not None and (exclude is None or not exclude[h])]
    split = not st.one_host(spec)
    if targets:
        # a preemptor goes where its victims made room, when the pipeline takes it there
        only = np.ones(cl.n_hosts, dtype=bool)
        only[targets] = False
        got = st.placer.plan(make, spec.devices, split=split, topology=spec.topology,
                             pool_free=np.where(only, 0, pool_free), exclude=only, exact_counts=True)
    if not isinstance(got, PlacementPlan):
        # host_free counts what the pool selector takes; its live column is indexed by count
        index = (st.free_index, st.pool_index[pool]) if exclude is None and st.free_index is not None else None
        got = st.placer.plan(make, spec.devices, split=split, topology=spec.topology, pool_free=pool_free,
                             exclude=exclude, exact_counts=True, index=index)
    if isinstance(got, PlacementRefusal):
        return got
    out: list[tuple[str, list[int]]] = []
    for i, chunk in enumerate(got.chunks):
        st.req_cache[(job.id, i)] = chunk.request
        out.append((cl.host_names[chunk.host], [int(x) for x in chunk.slots]))
    return out


def host_fits(st: EngineState, job: Job, pool: str, host: int, victims: Sequence[Job]) -> bool:
    """Would the pipeline put all of ``job`` on ``host`` once ``victims`` released what they
    hold there?  The victims' allocations on ``host`` are released for the check and put back
    exactly as they were (nothing is journaled, nothing else changes)."""
    spec = job.spec

    def make(i: int, k: int, n_chunks: int) -> Request:
        return st.chunk_request(spec, pool, i, k, n_chunks)

    with released(st, [a for v in victims for a in v.allocs if a.host == host], pool) as pool_free:
        return st.placer.fits_host(make, spec.devices, topology=spec.topology, pool_free=pool_free,
                                   host=host, exact_counts=True)


@contextmanager
def released(st: EngineState, allocs: Sequence[Allocation], pool: str) -> Iterator[IntArray]:
    """The cluster state as if ``allocs`` were released, for a dry placement: yields the fully
    free devices of ``pool`` per host then.  On exit every host is put back exactly as it was
    (nothing is journaled; the engine's own counts never change)."""
    cl = st.cluster
    hosts = sorted({a.host for a in allocs})
    saved = [(h, int(cl.cpu_free[h]), int(cl.mem_free[h]), int(cl.pods_used[h]), cl.dev_left[h].copy(),
              cl.dev_mem_left[h].copy(), cl.affinity[h].copy()) for h in hosts]
    pidx = st.pool_index[pool]
    for a in allocs:
        cl.release(a)
    try:
        pool_free = st.host_free[:, pidx].copy()
        for h in hosts:
            free = cl.dev_usable[h] & (st.slot_pool[h] == pidx) & (cl.dev_left[h] == cl.dev_cap[h])
            pool_free[h] = int(free.sum())
        yield pool_free
    finally:
        for a in allocs:
            cl.live[a.seq] = a
        for h, cpu, mem, pods, left, mem_left, aff in saved:
            (cl.cpu_free[h], cl.mem_free[h], cl.pods_used[h], cl.dev_left[h], cl.dev_mem_left[h],
             cl.affinity[h]) = cpu, mem, pods, left, mem_left, aff
            cl._touch(h)  # score caches keyed by host version see the restored host afresh


def start(st: EngineState, job: Job, pool: str, now: float, adm: Admission, reason: str) -> bool:
    """Place ``job`` in ``pool`` now and journal it (``admitted`` first for a new job, then
    ``placed``, or ``resumed``); ``False`` when the pipeline refused it (wait reason: placement)."""
    chunks = place(st, job, pool)
    if isinstance(chunks, PlacementRefusal):
        for key in [k for k in st.req_cache if k[0] == job.id]:
            del st.req_cache[key]
        # counts said it fits; the pipeline said no: a truthful reason, no "now" reservation
        job.wait = WaitReason.PLACEMENT
        st.refusals[job.id] = dataclasses.replace(chunks, pool=pool)
        return False
    st.refusals.pop(job.id, None)
    if job.attempts == 0:
        emit(st, now, job.id, "admitted", "quota ok" + (" (borrowing)" if adm.borrowing else ""),
             {"pool": pool, "borrowing": adm.borrowing})
    # a job placed again after preemption, suspension or a device failure is "resumed"
    kind = "placed" if job.attempts == 0 else "resumed"
    kind_reason = reason if job.attempts == 0 else f"resumed from {job.work_s:.0f} s of work: {reason}"
    spec = job.spec
    mem = spec.share.memory_bytes if spec.share is not None else st.dev_mem.get(pool, 0)
    # tenant, memory and share ride along so a bill can be made from the journal alone
    emit(st, now, job.id, kind, kind_reason,
         {"pool": pool, "chunks": chunks, "borrowing": adm.borrowing, "resume_from": job.work_s,
          "tenant": spec.tenant, "mem_per_device": mem, "share": spec.compute_milli / 1000.0})
    return True
