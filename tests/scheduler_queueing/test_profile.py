"""The free-device profile against a naive step-function model (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from accel.scheduler.queueing import Profile

NOW = 100.0


class Naive:
    def __init__(self, free: int, releases: list[tuple[float, int]]) -> None:
        self.free0 = free
        self.rel = [(max(t, NOW), n) for t, n in releases]
        self.book: list[tuple[float, float, int]] = []

    def free(self, t: float) -> int:
        return (self.free0 + sum(n for r, n in self.rel if r <= t)
                - sum(n for a, b, n in self.book if a <= t < b))

    def points(self) -> list[float]:
        pts = {NOW, *(r for r, _ in self.rel)}
        for a, b, _ in self.book:
            pts |= {a, b}
        return sorted(p for p in pts if math.isfinite(p))

    def min_over(self, a: float, b: float) -> int:
        return min(self.free(t) for t in [a, *(p for p in self.points() if a < p < b)])

    def earliest(self, n: int, d: float, after: float) -> float:
        for t in [after, *(p for p in self.points() if p > after)]:
            if self.min_over(t, t + d) >= n:
                return t
        return math.inf


times = st.floats(NOW - 10, NOW + 500, allow_nan=False).map(lambda x: round(x, 1))
ops = st.lists(st.tuples(st.sampled_from(["now", "later", "neg", "release", "query"]), times,
                         st.floats(1, 300).map(lambda x: round(x, 1)), st.integers(1, 4)), max_size=25)


@settings(max_examples=300, deadline=None)
@given(free=st.integers(0, 8), releases=st.lists(st.tuples(times, st.integers(1, 4)), max_size=6), ops=ops)
def test_profile_matches_the_naive_model(free: int, releases: list[tuple[float, int]],
                                         ops: list[tuple[str, float, float, int]]) -> None:
    prof, ref = Profile(NOW, free, releases), Naive(free, releases)
    for kind, t, d, n in ops:
        if kind == "now":
            prof.add(NOW, NOW + d, n)
            ref.book.append((NOW, NOW + d, n))
        elif kind == "later":
            start = max(t, NOW)
            prof.add(start, start + d, n)
            ref.book.append((start, start + d, n))
        elif kind == "neg":
            start = max(t, NOW)
            prof.add(start, start + d, -n)
            ref.book.append((start, start + d, -n))
        elif kind == "release":  # devices given back from now on (a preemption victim)
            prof.add(NOW, NOW + d, -n)
            ref.book.append((NOW, NOW + d, -n))
        assert prof.free_now == ref.free(NOW)
        assert prof.fits(NOW, d, n) == (ref.min_over(NOW, NOW + d) >= n)
        if kind == "query":
            a = max(t, NOW)
            assert prof.min_over(a, a + d) == ref.min_over(a, a + d)
            assert prof.earliest(n, d, after=a) == ref.earliest(n, d, a)
            assert prof.copy().earliest(n, d) == ref.earliest(n, d, NOW)
            # fits_with: as if 2 more devices were free from a until a + d / 2
            ref.book.append((a, a + d / 2, -2))
            want = ref.min_over(a, a + d) >= n + 1
            ref.book.pop()
            assert prof.fits_with(a, d, n + 1, [(a + d / 2, 2)]) == want
