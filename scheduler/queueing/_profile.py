"""Free-device profile of one pool over time: the reservation book of backfill.

``free(t)`` is a step function: the devices of the pool that are free at time ``t`` given the
running jobs' expected ends and every reservation or start booked so far.  Backfill asks two
questions of it: does a job fit in ``[now, now + d)`` (:meth:`fits`), and when is the earliest
``t`` it fits in ``[t, t + d)`` (:meth:`earliest`).  Arrays are numpy so that a profile with
thousands of breakpoints (a 5,000-host cluster) still answers in microseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

__all__ = ["Profile"]

INF = math.inf


class Profile:
    """Free devices over time from ``now``: ``fs[i]`` devices are free in ``[ts[i], ts[i+1])``."""

    __slots__ = ("_deferred", "_held", "_monotone", "fs", "now", "ts")

    def __init__(self, now: float, free: int, releases: Iterable[tuple[float, int]] = ()) -> None:
        self.now = float(now)
        rel: dict[float, int] = {}
        for t, n in releases:
            key = max(float(t), self.now)
            rel[key] = rel.get(key, 0) + int(n)
        start = int(free) + rel.pop(self.now, 0)
        times = sorted(rel)
        self.ts: npt.NDArray[np.float64] = np.array([self.now, *times], dtype=np.float64)
        steps = np.array([start, *(rel[t] for t in times)], dtype=np.int64)
        self.fs: npt.NDArray[np.int64] = np.cumsum(steps).astype(np.int64)
        # Bookings that start now are deferred while the profile only has releases in it: then
        # free(t) never decreases, so "fits now for d" is just "free now >= n" and thousands of
        # starts in one cycle cost no array inserts.  Any other question flushes them first.
        self._deferred: list[tuple[float, int]] = []
        self._held = 0
        self._monotone = True

    @classmethod
    def from_releases(cls, now: float, free: int, ends: npt.NDArray[np.float64],
                      ns: npt.NDArray[np.int64]) -> Profile:
        """``Profile(now, free, zip(ends, ns))`` from arrays: the same breakpoints and counts
        (each release at ``max(end, now)``, equal instants summed, in ascending order)."""
        out = cls(now, free)
        if not len(ends):
            return out
        keys = np.maximum(ends.astype(np.float64), out.now)
        uniq, inv = np.unique(keys, return_inverse=True)
        sums = np.zeros(len(uniq), dtype=np.int64)
        np.add.at(sums, inv, ns.astype(np.int64))
        start = int(free)
        if uniq[0] == out.now:  # releases due now count as free now
            start += int(sums[0])
            uniq, sums = uniq[1:], sums[1:]
        out.ts = np.concatenate((np.array((out.now,), dtype=np.float64), uniq))
        out.fs = np.cumsum(np.concatenate((np.array((start,), dtype=np.int64), sums))).astype(np.int64)
        return out

    def copy(self) -> Profile:
        self._flush()
        out = Profile.__new__(Profile)
        out.now, out.ts, out.fs = self.now, self.ts.copy(), self.fs.copy()
        out._deferred, out._held, out._monotone = [], 0, self._monotone
        return out

    @property
    def free_now(self) -> int:
        return int(self.fs[0]) - self._held

    def _flush(self) -> None:
        if not self._deferred:
            return
        ends = np.array([e for e, _ in self._deferred], dtype=np.float64)
        ns = np.array([n for _, n in self._deferred], dtype=np.int64)
        deltas = np.diff(self.fs, prepend=np.int64(0))
        deltas[0] -= int(ns.sum())
        # merge the (few) deferred ends into the (many) breakpoints: O(B + k log k), no full sort
        uniq, inv = np.unique(ends, return_inverse=True)
        sums = np.bincount(inv, weights=ns, minlength=len(uniq)).astype(np.int64)
        pos = np.searchsorted(self.ts, uniq, side="left")
        hit = pos < len(self.ts)
        hit[hit] = self.ts[pos[hit]] == uniq[hit]
        np.add.at(deltas, pos[hit], sums[hit])
        new = ~hit
        ts = np.insert(self.ts, pos[new], uniq[new])
        deltas = np.insert(deltas, pos[new], sums[new])
        self.ts, self.fs = ts.astype(np.float64), np.cumsum(deltas).astype(np.int64)
        self._deferred, self._held = [], 0

    def _split(self, t: float) -> int:
        """Index of the segment starting at ``t`` (inserting a breakpoint if needed)."""
        i = int(np.searchsorted(self.ts, t, side="right")) - 1
        if i < 0:
            return 0
        if self.ts[i] == t:
            return i
        # concatenation, not np.insert: the same arrays, without np.insert's generic-axis
        # overhead (a conservative cycle splits twice per reservation, tens of times per cycle)
        ts, fs, k = self.ts, self.fs, i + 1
        self.ts = np.concatenate((ts[:k], np.array((t,), dtype=np.float64), ts[k:]))
        self.fs = np.concatenate((fs[:k], fs[i:k], fs[k:]))
        return k

    def add(self, start: float, end: float, n: int) -> None:
        """Book ``n`` devices over ``[start, end)`` (``n < 0`` gives them back)."""
        start = max(start, self.now)
        if end <= start or n == 0:
            return
        if self._monotone and start == self.now and n > 0 and math.isfinite(end):
            self._deferred.append((end, n))
            self._held += n
            return
        if n < 0 and start == self.now and self._monotone and self._deferred:
            # a preemption victim gives devices back from now while bookings are deferred: give
            # them back on the breakpoints alone (adding ranges commutes with merging the
            # deferred ones later: the same breakpoints, the same counts).  If the breakpoints
            # alone still never decrease, neither does the merged profile (each deferred booking
            # only raises free(t) where it ends); else merge and check as below
            j = self._split(end) if math.isfinite(end) else len(self.ts)
            self.fs[:j] -= n
            if bool((np.diff(self.fs) >= 0).all()):
                return
            self._flush()
            self._monotone = bool((np.diff(self.fs) >= 0).all())
            return
        self._flush()
        i = self._split(start)
        j = self._split(end) if math.isfinite(end) else len(self.ts)
        self.fs[i:j] -= n
        if start > self.now or (n < 0 and self._monotone):
            # a booking that starts later makes free(t) dip; giving devices back from now on (a
            # preemption victim) usually keeps it non-decreasing: check, so the fast path stays
            self._monotone = n < 0 and start <= self.now and bool((np.diff(self.fs) >= 0).all())

    def min_over(self, start: float, end: float) -> int:
        start = max(start, self.now)
        if self._monotone and start == self.now:
            return int(self.fs[0]) - self._held  # free(t) never decreases: the minimum is now
        self._flush()
        i = int(np.searchsorted(self.ts, start, side="right")) - 1
        j = int(np.searchsorted(self.ts, end, side="left")) if math.isfinite(end) else len(self.ts)
        j = max(j, i + 1)
        return int(self.fs[max(i, 0):j].min())

    def free_at(self, t: float) -> int:
        """Devices free at the instant ``t`` (an upper bound on :meth:`min_over` from ``t``), read
        without flushing the deferred bookings (each holds its devices over ``[now, end)``)."""
        t = max(t, self.now)
        i = max(int(np.searchsorted(self.ts, t, side="right")) - 1, 0)
        return int(self.fs[i]) - sum(n for end, n in self._deferred if end > t)

    def clear_until(self, n: int) -> float:
        """How long ``n`` devices stay free from now: the start of the first later segment with
        fewer than ``n`` free (``inf``: none).  With ``free_now >= n``, ``fits(now, d, n)`` holds
        exactly when ``now + d <= clear_until(n)``: :meth:`min_over` from now covers the
        segments that start before ``now + d``."""
        if self._monotone:
            return INF  # free(t) never decreases: fits answers from the free devices now alone
        self._flush()
        short = np.flatnonzero(self.fs[1:] < n)
        return float(self.ts[short[0] + 1]) if len(short) else INF

    def fits_with(self, start: float, duration: float, n: int, extra: Iterable[tuple[float, int]]) -> bool:
        """:meth:`fits`, as if ``k`` more devices were free from ``start`` until ``end`` for each
        ``(end, k)`` of ``extra`` (devices a preemption would give back), without copying."""
        start = max(start, self.now)
        if len(self._deferred) > 256 or len(self._deferred) * 4 > len(self.ts):
            self._flush()  # many deferred bookings: merging them once is cheaper than reading them per call
        i = max(int(np.searchsorted(self.ts, start, side="right")) - 1, 0)
        end = start + duration
        j = int(np.searchsorted(self.ts, end, side="left")) if math.isfinite(end) else len(self.ts)
        j = max(j, i + 1)
        extra = list(extra)
        if all(k >= 0 for _u, k in extra):
            # bounds that answer without the window's arrays: free(t) over the window is at
            # least its least breakpoint count less every deferred booking still held at its
            # start (given-back devices only add), and at most what is free at its start
            held = sum(k for e, k in self._deferred if e > start)
            if int(self.fs[i:j].min()) - held >= n:
                return True
            if int(self.fs[i]) + sum(k for u, k in extra if u > start) - held < n:
                return False
        # the minimum is at a segment start or where a given-back range ends inside the window;
        # segment k of the window is free fs[k] from its start (``ts`` strictly increases, and
        # the first starts at ``start``), so only the cuts are looked up
        cuts = [u for u, _ in extra if start < u < end]
        pts = np.maximum(self.ts[i:j], start)
        vals = self.fs[i:j].copy()
        if cuts:
            at = np.array(cuts, dtype=np.float64)
            pts = np.concatenate([pts, at])
            vals = np.concatenate([vals, self.fs[np.searchsorted(self.ts, at, side="right") - 1]])
        for until, k in extra:
            vals[pts < until] += k
        if self._deferred:
            # the deferred bookings, read without merging them (a preemption storm asks this
            # between every few starts, and a merge costs a pass over thousands of breakpoints):
            # each holds its devices over [now, end), so free(p) loses the sum of those ending
            # after p; where one ends, free(t) only rises, so no new minimum starts there and the
            # points above (the window's start, its breakpoints, the cuts) keep the minimum
            # :meth:`_flush` would give
            ends = np.array([e for e, _ in self._deferred], dtype=np.float64)
            ns = np.array([k for _, k in self._deferred], dtype=np.int64)
            order = np.argsort(ends, kind="stable")
            ends = ends[order]
            # held_from[m]: devices of the bookings from the m-th smallest end on
            held_from = np.concatenate((np.cumsum(ns[order][::-1])[::-1], np.zeros(1, dtype=np.int64)))
            vals -= held_from[np.searchsorted(ends, pts, side="right")]
        return int(vals.min()) >= n

    def fits(self, start: float, duration: float, n: int) -> bool:
        """Are ``n`` devices free during all of ``[start, start + duration)``?"""
        if n > self.fs[0] - self._held and start <= self.now:
            return False
        return self.min_over(start, start + duration) >= n

    def earliest(self, n: int, duration: float, after: float | None = None) -> float:
        """First ``t >= after`` with ``n`` devices free during ``[t, t + duration)``; inf if never."""
        after = self.now if after is None else max(after, self.now)
        if n <= 0:
            return after
        self._flush()
        if int(self.fs.max()) < n:
            return INF
        first = max(int(np.searchsorted(self.ts, after, side="right")) - 1, 0)
        ts, ok = self.ts[first:], self.fs[first:] >= n
        cand = np.flatnonzero(ok)
        if not len(cand):
            return INF
        # A candidate segment i (enough free from its start t) fits for ``duration`` iff the
        # next segment without enough free starts at or after t + duration: segments i..j-1
        # with ts < t + duration are the ones the window covers (``ts`` strictly increases).
        bad = np.flatnonzero(~ok)
        starts = ts[cand].copy()
        starts[0] = max(float(starts[0]), after)  # only the first segment can start before ``after``
        nxt = np.searchsorted(bad, cand)  # index into ``bad`` of the next short segment after each candidate
        has = nxt < len(bad)
        good = ~has
        good[has] = ts[bad[nxt[has]]] >= starts[has] + duration
        hit = np.flatnonzero(good)
        return float(starts[hit[0]]) if len(hit) else INF

    def area_time(self, work: float, after: float) -> float:
        """Time by which ``work`` device-seconds of free capacity have passed after ``after``
        (the fluid approximation used for jobs beyond the exact planning depth)."""
        if work <= 0:
            return after
        self._flush()
        ts = np.maximum(self.ts, after)
        widths = np.diff(np.append(ts, INF))
        free = np.maximum(self.fs, 0).astype(np.float64)
        area = free[:-1] * widths[:-1]
        cum = np.cumsum(area)
        k = int(np.searchsorted(cum, work, side="left"))
        if k < len(cum):
            before = float(cum[k - 1]) if k else 0.0
            return float(ts[k]) + (work - before) / max(float(free[k]), 1e-9)
        before = float(cum[-1]) if len(cum) else 0.0
        last = max(float(free[-1]), 1e-9)
        return float(ts[-1]) + (work - before) / last
