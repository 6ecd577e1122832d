"""The leak test: a step-robust trend test on the lower envelope of used memory, at several scales.

Used memory on an inference node moves for many reasons that are not leaks: a caching allocator
grows to its working set and holds it, garbage collection draws a sawtooth, a model load is a
step.  A leak is what is left: the *floor* of used memory rising steadily.  The test, per key
(a device, or one process on a device):

1. Samples are folded into buckets of ``min_window_s / segments`` seconds, keeping each bucket's
   minimum: the lower envelope, on which a sawtooth's teeth and transient allocations vanish.
2. At every scale ``W = min_window_s * 2**k`` (k < ``scales``) whose span the history covers, the
   last ``W`` seconds are cut into ``segments`` equal segments and each segment's floor taken.
3. Steps are removed: a difference between consecutive floors that is an outlier against the
   others (more than ``step_mads`` robust deviations from their median) is a step (a model load or
   unload), and is zeroed; the floors are rebuilt from what is left.
4. The rebuilt floors must rise by a Mann-Kendall trend test (``z >= z_min``), their median
   difference must be positive, and the median slope must be at least ``min_slope_bytes_per_s``.
5. Urgency decides how much evidence is needed: at the longest scale a trend is enough (when it
   would fill the device within ``horizon_s``); at a shorter scale ``W`` only a trend that would
   fill the device within ``urgency * W`` counts, and only with history as long again before the
   window whose floors the current floor passes by a quarter of the window's rise: the rising
   edge of a sawtooth climbs back to its old peaks, a leak passes them.

A verdict, once raised, holds until the longest covered scale's trend falls below ``z_clear``
(hysteresis: one noisy window does not clear and re-raise an alert).  The time to full is the
headroom left at the recent peak (device total minus device used) over the recent median slope.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import pairwise

from ..errors import ConfigError, ValidationError

__all__ = ["LeakDetector", "LeakVerdict"]


@dataclass(frozen=True)
class LeakVerdict:
    """A suspected leak on ``key``.

    ``slope_bytes_per_s`` is the median growth of the floor of used memory; ``seconds_to_full``
    the headroom over that slope (0 when already full); ``window_s`` the scale that saw it;
    ``z`` the trend statistic at that scale.
    """

    key: Hashable
    slope_bytes_per_s: float
    seconds_to_full: float
    used_bytes: int
    headroom_bytes: int
    total_bytes: int
    window_s: float
    z: float


@dataclass
class _Bucket:
    index: int
    floor: int  # the least used memory in the bucket
    last: int  # the latest sample
    headroom: int  # the least headroom in the bucket: memory runs out at the peaks, not the floor
    total: int


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0


def mann_kendall_z(values: list[float]) -> float:
    """Mann-Kendall trend statistic (normal approximation with tie correction); 0 for < 3 values."""
    n = len(values)
    if n < 3:
        return 0.0
    s = 0
    for i in range(n - 1):
        vi = values[i]
        for j in range(i + 1, n):
            d = values[j] - vi
            s += (d > 0) - (d < 0)
    ties: dict[float, int] = {}
    for v in values:
        ties[v] = ties.get(v, 0) + 1
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties.values())) / 18.0
    if var <= 0:
        return 0.0
    return (s - (1 if s > 0 else -1 if s < 0 else 0)) / math.sqrt(var)


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"LeakDetector: {name} must be a positive finite number, got {value!r}")
    return float(value)


class LeakDetector:
    """Sliding-window memory-leak detector over used-memory samples; see the module docstring.

    Feed :meth:`observe` one sample per reading (``key`` is any hashable: a device id, or
    ``(device_id, pid, name)`` for a process) and ask :meth:`assess`.  Memory is bounded: a key
    keeps at most ``segments * 2**(scales-1)`` buckets, and :meth:`forget_stale` drops keys that
    stopped reporting (a process that exited).  Bad samples raise
    :class:`~accel.errors.ValidationError`; bad parameters :class:`~accel.errors.ConfigError`.
    """

    def __init__(
        self,
        *,
        min_window_s: float = 300.0,
        scales: int = 6,
        segments: int = 12,
        z_min: float = 3.5,
        z_clear: float = 1.0,
        step_mads: float = 5.0,
        min_slope_bytes_per_s: float = 1024.0,
        horizon_s: float = 7 * 86400.0,
        urgency: float = 1.0,
    ) -> None:
        self.min_window_s = _positive("min_window_s", min_window_s)
        self.horizon_s = _positive("horizon_s", horizon_s)
        self.urgency = _positive("urgency", urgency)
        self.step_mads = _positive("step_mads", step_mads)
        self.z_min = _positive("z_min", z_min)
        if not (isinstance(z_clear, (int, float)) and math.isfinite(z_clear) and z_clear < z_min):
            raise ConfigError(f"LeakDetector: z_clear must be finite and below z_min, got {z_clear!r}")
        self.z_clear = float(z_clear)
        if not (isinstance(min_slope_bytes_per_s, (int, float)) and math.isfinite(min_slope_bytes_per_s)
                and min_slope_bytes_per_s >= 0):
            raise ConfigError(f"LeakDetector: min_slope_bytes_per_s must be >= 0, got {min_slope_bytes_per_s!r}")
        self.min_slope = float(min_slope_bytes_per_s)
        if not (isinstance(scales, int) and 1 <= scales <= 12):
            raise ConfigError(f"LeakDetector: scales must be an integer 1..12, got {scales!r}")
        if not (isinstance(segments, int) and 6 <= segments <= 64):
            raise ConfigError(f"LeakDetector: segments must be an integer 6..64, got {segments!r}")
        self.scales, self.segments = scales, segments
        self.bucket_s = self.min_window_s / segments
        self.max_buckets = segments * 2 ** (scales - 1)
        self._data: dict[Hashable, deque[_Bucket]] = {}
        self._last_t: dict[Hashable, float] = {}
        self._flagged: dict[Hashable, LeakVerdict] = {}
        # assess() is recomputed only when a key's buckets changed shape (a new bucket started);
        # within a bucket the floors it reads can only move by that bucket's own minimum.
        self._cache: dict[Hashable, tuple[int, int, LeakVerdict | None]] = {}

    @property
    def window_s(self) -> float:
        """The longest scale: how much history a key keeps."""
        return self.min_window_s * float(2 ** (self.scales - 1))

    def keys(self) -> list[Hashable]:
        return list(self._data)

    # -- input ------------------------------------------------------------------------------------
    def observe(self, key: Hashable, t_s: float, used_bytes: int, total_bytes: int,
                *, headroom_bytes: int | None = None) -> None:
        """Add one sample.

        ``headroom_bytes`` is what is left before the *device* is full (default ``total - used``:
        right for a device key; a process key passes the device's headroom).  Time going
        backwards (a clock step) restarts the key's history instead of mixing two clocks.
        """
        if not (isinstance(t_s, (int, float)) and math.isfinite(t_s)):
            raise ValidationError(f"leak sample for {key!r}: time must be finite, got {t_s!r}", field="t_s")
        for name, value in (("used_bytes", used_bytes), ("total_bytes", total_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValidationError(f"leak sample for {key!r}: {name} must be an int >= 0, got {value!r}",
                                      field=name)
        if total_bytes == 0 or used_bytes > total_bytes:
            raise ValidationError(f"leak sample for {key!r}: used {used_bytes} B of total {total_bytes} B",
                                  field="used_bytes")
        headroom = total_bytes - used_bytes if headroom_bytes is None else headroom_bytes
        if not isinstance(headroom, int) or headroom < 0 or headroom > total_bytes:
            raise ValidationError(f"leak sample for {key!r}: headroom {headroom!r} outside 0..{total_bytes}",
                                  field="headroom_bytes")
        last = self._last_t.get(key)
        q = self._data.get(key)
        if q is None or (last is not None and t_s < last) or (q and q[-1].total != total_bytes):
            # New key, a clock step, or the memory itself changed (repartitioned): start over.
            q = self._data[key] = deque()
            self._flagged.pop(key, None)
            self._cache.pop(key, None)
        self._last_t[key] = t_s
        index = math.floor(t_s / self.bucket_s)
        if q and q[-1].index == index:
            b = q[-1]
            if used_bytes < b.floor:
                b.floor = used_bytes
            b.headroom = min(b.headroom, headroom)
            b.last = used_bytes
        else:
            q.append(_Bucket(index, used_bytes, used_bytes, headroom, total_bytes))
        while q and q[0].index <= index - self.max_buckets:
            q.popleft()

    def forget(self, key: Hashable) -> None:
        self._data.pop(key, None)
        self._last_t.pop(key, None)
        self._flagged.pop(key, None)
        self._cache.pop(key, None)

    def forget_stale(self, now_s: float, max_age_s: float | None = None) -> list[Hashable]:
        """Drop keys with no sample in ``max_age_s`` (default: the longest scale); returns them."""
        limit = self.window_s if max_age_s is None else max_age_s
        stale = [k for k, t in self._last_t.items() if now_s - t > limit]
        for k in stale:
            self.forget(k)
        return stale

    # -- state, for a store that outlives the process (see LeakHistory) ------------------------------
    def export_state(self) -> list[tuple[Hashable, float, list[tuple[int, int, int, int, int]], float | None]]:
        """Per key: last sample time, buckets ``(index, floor, last, headroom, total)``, held slope."""
        out = []
        for key, q in self._data.items():
            held = self._flagged.get(key)
            out.append((key, self._last_t[key], [(b.index, b.floor, b.last, b.headroom, b.total) for b in q],
                        None if held is None else held.slope_bytes_per_s))
        return out

    def import_state(self, key: Hashable, last_t: float, buckets: list[tuple[int, int, int, int, int]],
                     held_slope: float | None = None) -> None:
        """Restore one key from :meth:`export_state` rows (buckets outside the window are dropped)."""
        if not buckets:
            return
        rows = sorted(buckets)
        newest = rows[-1][0]
        q = deque(_Bucket(*r) for r in rows if r[0] > newest - self.max_buckets)
        self._data[key], self._last_t[key] = q, float(last_t)
        self._cache.pop(key, None)
        if held_slope is not None and held_slope > 0:
            last = q[-1]
            self._flagged[key] = LeakVerdict(key, held_slope, last.headroom / held_slope, last.last,
                                             last.headroom, last.total, self.window_s, self.z_clear)

    # -- the test ---------------------------------------------------------------------------------
    def _floors(self, idx: list[int], fl: list[int], last_index: int, per_segment: int) -> list[float] | None:
        start = last_index - per_segment * self.segments + 1
        floors: list[float | None] = [None] * self.segments
        for pos in range(bisect_left(idx, start), len(idx)):
            s = (idx[pos] - start) // per_segment
            f = floors[s]
            v = fl[pos]
            if f is None or v < f:
                floors[s] = v
        # A scale counts only when its first and last segments and most of the rest were read.
        if floors[0] is None or floors[-1] is None or sum(f is None for f in floors) > self.segments // 4:
            return None
        # A missing segment takes its predecessor's floor: no trend is invented across a gap.
        out: list[float] = []
        for f in floors:
            out.append(out[-1] if f is None else float(f))
        return out

    def _destep(self, floors: list[float]) -> list[float]:
        """Consecutive floor differences with upward steps (a model load) zeroed.

        Only upward outliers are steps: a downward one is memory given back (an unload, a
        collection), which is evidence against a leak and stays in.
        """
        diffs = [b - a for a, b in pairwise(floors)]
        med = _median(diffs)
        mad = _median([abs(d - med) for d in diffs]) * 1.4826
        # A floor for the spread: on exactly flat data the MAD is 0 and any rise is a step.
        spread = max(mad, 1.0)
        return [0.0 if d - med > self.step_mads * spread else d for d in diffs]

    def _scale(self, key: Hashable, buckets: list[_Bucket], idx: list[int], fl: list[int],
               k: int) -> LeakVerdict | float | None:
        """The verdict at scale ``k``, or the trend statistic when there is none (None: not covered)."""
        per_segment = 2 ** k
        last_index = idx[-1]
        floors = self._floors(idx, fl, last_index, per_segment)
        if floors is None:
            return None
        diffs = self._destep(floors)
        rebuilt = [floors[0]]
        for d in diffs:
            rebuilt.append(rebuilt[-1] + d)
        z = mann_kendall_z(rebuilt)
        seg_s = per_segment * self.bucket_s
        half = len(diffs) // 2
        early, recent = _median(diffs[:half]), _median(diffs[half:])
        # The recent half's slope: a leak that began inside the window is not diluted by the
        # flat part before it, and a growth that is levelling off (a cache warming) shows it.
        slope = recent / seg_s
        if z < self.z_min or _median(diffs) <= 0 or slope <= 0 or slope < self.min_slope:
            return z
        last = buckets[-1]
        start = last_index - per_segment * self.segments + 1
        # Headroom at the peak of the last segment: an allocation fails at the peaks.
        headroom = min(b.headroom for b in buckets[bisect_left(idx, last_index - per_segment + 1):])
        ttf = headroom / slope
        window = seg_s * self.segments
        if k == self.scales - 1:
            if ttf > self.horizon_s:
                return z
        else:
            # A shorter scale needs urgency and a shape only a leak has: growth not levelling
            # off, and a floor above every floor seen before this window (the rising edge of a
            # sawtooth reaches its old peaks; a leak passes them).
            if ttf > self.urgency * window or recent < 0.5 * early:
                return z
            # That needs history: as long again as the window before it (a first rising edge
            # seen with nothing before it is not enough).
            cut = bisect_left(idx, start)
            rise = rebuilt[-1] - rebuilt[0]
            if idx[0] > start - per_segment * self.segments or cut == 0 \
                    or floors[-1] <= max(fl[:cut]) + 0.25 * rise:
                return z
        return LeakVerdict(key, slope, ttf, last.last, headroom, last.total, window, z)

    def assess(self, key: Hashable) -> LeakVerdict | None:
        """The current verdict for ``key`` (None: no leak seen, or too little history)."""
        q = self._data.get(key)
        if not q:
            return None
        stamp = (q[-1].index, len(q))
        cached = self._cache.get(key)
        if cached is not None and cached[:2] == stamp:
            return cached[2]
        verdict = self._assess(key, list(q))
        self._cache[key] = (*stamp, verdict)
        return verdict

    def _assess(self, key: Hashable, buckets: list[_Bucket]) -> LeakVerdict | None:
        covered = buckets[-1].index - buckets[0].index + 1
        ks = [k for k in range(self.scales) if self.segments * 2 ** k <= covered]
        longest_z: float | None = None
        found: LeakVerdict | None = None
        idx = [b.index for b in buckets]
        fl = [b.floor for b in buckets]
        for k in reversed(ks):
            r = self._scale(key, buckets, idx, fl, k)
            if isinstance(r, LeakVerdict):
                found = r
                break
            if longest_z is None and r is not None:
                longest_z = r
        if found is not None:
            self._flagged[key] = found
            return found
        held = self._flagged.get(key)
        if held is not None and longest_z is not None and longest_z >= self.z_clear:
            # Hysteresis: the verdict holds while the trend has not gone, with today's headroom.
            last = buckets[-1]
            held = LeakVerdict(key, held.slope_bytes_per_s, last.headroom / held.slope_bytes_per_s,
                               last.last, last.headroom, last.total, held.window_s, longest_z)
            self._flagged[key] = held
            return held
        self._flagged.pop(key, None)
        return None
