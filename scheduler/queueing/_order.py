"""The queue order: which waiting job a walk examines first.

:func:`order_key` is the order (higher class first, then the class's in-class order, then
submit order); :func:`queue` lists the waiting jobs in it.  When every class orders FIFO, the
order is kept between calls in the :class:`~._state.EngineState` and brought up to date from the
waiting set's changes (:func:`sync_waiting`), as are the (class level, tier) of the waiting jobs
(:func:`waiting_tiers`).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection

from ._records import Job
from ._state import EngineState
from ._types import InClassOrder

__all__ = ["kept_order", "order_key", "queue", "sync_waiting", "waiting_tiers"]


def _first(pair: tuple[tuple[float, ...], Job]) -> tuple[float, ...]:
    return pair[0]


def order_key(st: EngineState, job: Job, now: float) -> tuple[float, ...]:
    """Queue order: higher class first, then the class's in-class order, then submit order."""
    k = job.klass
    if k.order == InClassOrder.SHORTEST:
        inner = k.band(st.duration(job) * job.spec.devices)
    elif k.order == InClassOrder.FAIR:
        inner = st.book.fair_usage(job.spec.tenant, now)
    else:
        inner = 0.0
    if st.policy.demote_after_device_s:
        if st.guard:
            return (-float(k.level), float(st.tier(job, now)), float(not job.promoted), inner, float(job.seq))
        return (-float(k.level), float(st.tier(job, now)), inner, float(job.seq))
    if st.guard:
        return (-float(k.level), float(not job.promoted), inner, float(job.seq))
    return (-float(k.level), inner, float(job.seq))


def queue(st: EngineState, now: float, *, upto: str | None = None) -> list[Job]:
    """Queued (and suspended) jobs in the order the next cycle examines them; with ``upto`` (a
    waiting job's id), only the jobs up to and including that one (what an estimate walks)."""
    if st.order_kept:
        order = kept_order(st, now)
        target_key = st.order_keys.get(upto) if upto is not None else None
        if target_key is not None:
            order = order[:bisect.bisect_right(order, target_key, key=_first)]
        return [j for _, j in order]
    sync_waiting(st, now)  # the kept tiers (waiting_tiers) still follow the waiting set
    keyed = [(order_key(st, j, now), j) for j in st.waiting.values()]
    target = st.waiting.get(upto) if upto is not None else None
    if target is not None:
        # keys are unique (they end with the submit sequence): the prefix of the full order
        last = order_key(st, target, now)
        keyed = [kj for kj in keyed if kj[0] <= last]
    keyed.sort(key=_first)
    return [j for _, j in keyed]


def kept_order(st: EngineState, now: float) -> list[tuple[tuple[float, ...], Job]]:
    """The waiting jobs in queue order, kept up to date from the waiting set's changes
    (:func:`sync_waiting`).

    Exact when every class orders FIFO, or SHORTEST under the declared-duration model
    (:class:`~._estimators.DeclaredModel` itself, no subclass): a waiting job's key is then
    (class level, tier, promoted, inner, submit sequence) with ``inner`` 0 (FIFO) or the band of
    its expected device-seconds, ``max(1, declared - kept work (or the overrun margin)) x
    devices``, which reads only the job's spec, its kept work and the policy; and each term is
    fixed while the job waits.  The tier of a
    job holding no devices is a function of its kept work, lost work and service base
    (``EngineState.tier``), and those, the promoted flag and the class change only through
    events that also set or remove the job in ``waiting`` (preemption, failure, requeue,
    promotion), so a key computed when the job was last set stays the key :func:`order_key`
    would give at any later instant until it is set or removed again.  (SHORTEST under a model
    that learns, such as the history model, and FAIR's decayed usage move while a job waits:
    those orders are sorted afresh.)
    """
    sync_waiting(st, now)
    return st.order


def waiting_tiers(st: EngineState, now: float) -> Collection[tuple[int, int]]:
    """The (class level, tier) of every waiting job, each once: a waiting job's tier is fixed
    while it waits (see :func:`kept_order`), so this is kept, not recomputed per call."""
    sync_waiting(st, now)
    return st.tier_count.keys()


def sync_waiting(st: EngineState, now: float) -> None:
    """Bring the kept (class level, tier) counts and, for FIFO classes, the kept order up to
    date with the jobs set in or removed from ``waiting`` since the last call."""
    changed = st.waiting.take_changed()
    if not changed:
        return
    order, keys, waiting = st.order, st.order_keys, st.waiting
    tiers, count, kept = st.wait_tier, st.tier_count, st.order_kept
    if len(changed) * 8 > len(tiers) + 64:
        # many changes (recovery, a burst of submissions): one pass and one sort are cheaper
        keys.clear()
        tiers.clear()
        count.clear()
        for j in waiting.values():
            lt = tiers[j.id] = (j.klass.level, st.tier(j, now))
            count[lt] = count.get(lt, 0) + 1
        if kept:
            keyed = [(order_key(st, j, now), j) for j in waiting.values()]
            for k, j in keyed:
                keys[j.id] = k
            keyed.sort(key=_first)
            st.order = keyed
        return
    for jid in changed:
        was = tiers.pop(jid, None)
        if was is not None:
            left = count[was] - 1
            if left:
                count[was] = left
            else:
                del count[was]
        old = keys.pop(jid, None)
        if old is not None:
            del order[bisect.bisect_left(order, old, key=_first)]  # keys are unique (they end with seq)
    for jid in changed:
        job = waiting.get(jid)
        if job is not None:
            lt = tiers[jid] = (job.klass.level, st.tier(job, now))
            count[lt] = count.get(lt, 0) + 1
            if kept:
                k = keys[jid] = order_key(st, job, now)
                bisect.insort(order, (k, job), key=_first)
