"""Fragmentation measure of the FGD paper (Weng et al., USENIX ATC'23), vectorised.

A host's *fragmentation* with respect to a target workload is the expected amount of its idle
device compute that a pod drawn from the workload could not use: for every typical pod type
``t`` with frequency ``p_t`` the host is classified (the paper's quadrants) and

* if ``t`` fits (devices and CPU) -> the idle compute on devices too small for one of ``t``'s
  per-device demand counts as fragment,
* otherwise (lacks devices, lacks CPU, type not accessible, or ``t`` is CPU-only) -> all idle
  compute of the host counts as fragment,

weighted by ``p_t``.  FGD places a pod where this measure grows least.  Sums follow the
published simulator's order (per-quadrant accumulation in typical-pod order, then quadrants
0, 1, 3, 4, 5, 6) so that integer-truncated scores agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._request import MILLI, Request

__all__ = ["TypicalPod", "TypicalPods"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_Q1_LACK_BOTH, _Q2_LACK_GPU, _Q4_LACK_CPU, _XL, _XR, _NO_ACCESS = 0, 1, 3, 4, 5, 6


@dataclass(frozen=True, slots=True)
class TypicalPod:
    """One pod type of the target workload and its frequency (0..1)."""

    cpu_milli: int
    milli: int
    count: int
    models: tuple[str, ...]
    freq: float


def pod_type_key(req: Request) -> tuple[int, int, int, str]:
    """(cpu, milli per device, device count, model list) as the FGD paper keys pod types."""
    models = "|".join(req.selector.models)
    if req.share is not None:
        return (req.cpu_milli, req.share.compute_milli, 1, models)
    if req.devices:
        return (req.cpu_milli, MILLI, req.devices, models)
    return (req.cpu_milli, 0, 0, models)


class TypicalPods:
    """The target workload's pod-type distribution, chosen as the paper's simulator does.

    Pod types are counted, sorted by decreasing count (ties: larger resource first), and the most
    popular ones are kept until they cover ``popularity`` (default 95%) of all pods, then
    renormalised.  CPU-only pods take part (their types make all idle device compute fragment).
    """

    def __init__(self, types: Sequence[TypicalPod]) -> None:
        self.types = tuple(types)

    @classmethod
    def from_requests(cls, workload: Iterable[Request], popularity: float = 95.0) -> TypicalPods:
        counts: dict[tuple[int, int, int, str], int] = {}
        total = 0
        for req in workload:
            key = pod_type_key(req)
            counts[key] = counts.get(key, 0) + 1
            total += 1
        if total == 0:
            return cls([])
        ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        expected = popularity * float(total) / 100.0
        cum = 0.0
        i = 0
        chosen = 0
        while cum < expected:
            chosen += 1
            while i < chosen and i < len(ordered):
                cum += float(ordered[i][1])
                i += 1
            if i >= len(ordered):
                break
        tot = float(total)
        out: list[TypicalPod] = []
        renorm = i < len(ordered)
        for (cpu, milli, num, models), cnt in ordered[:i]:
            freq = float(cnt) / tot
            if renorm:
                freq /= cum / tot
            out.append(TypicalPod(cpu, milli, num, tuple(m for m in models.split("|") if m), freq))
        return cls(out)

    def access_table(self, class_models: Sequence[str | None]) -> npt.NDArray[np.bool_]:
        """``[class + 1, type]``: may pods of type ``t`` use hosts of device class ``c``.

        Row 0 stands for hosts without devices (class -1)."""
        table = np.ones((len(class_models) + 1, len(self.types)), dtype=bool)
        for t, tp in enumerate(self.types):
            if not tp.models:
                continue
            table[0, t] = False
            for c, model in enumerate(class_models):
                table[c + 1, t] = model in tp.models
        return table


class FragMeasure:
    """Evaluates the fragmentation of many (cpu_left, device lefts, class) states at once."""

    def __init__(self, typical: TypicalPods, class_models: Sequence[str | None]) -> None:
        self.typical = typical
        self.access = typical.access_table(class_models)
        types = typical.types
        self.cpu = np.array([t.cpu_milli for t in types], dtype=np.int64)
        self.milli = np.array([t.milli for t in types], dtype=np.int64)
        self.count = np.array([t.count for t in types], dtype=np.int64)
        self.freq = np.array([t.freq for t in types], dtype=np.float64)
        self.unique_milli = sorted({int(m) for m in self.milli if m > 0})
        pos = {m: i for i, m in enumerate(self.unique_milli)}
        self._midx = np.array([pos.get(int(m), 0) for m in self.milli], dtype=np.int64)
        self._gpu_type = self.milli > 0

    def __call__(self, cpu_left: IntArray, left: IntArray, cls: IntArray) -> FloatArray:
        """Fragmentation (milli units) of each state; ``left`` is ``S x D``.

        Vectorised over (state, type); each quadrant is summed with ``cumsum`` along the type
        axis, which adds strictly left to right like the published simulator's loop."""
        if len(self.freq) == 0:
            return np.zeros(cpu_left.shape[0])
        total = left.sum(axis=1)
        totf = total.astype(np.float64)[:, None]
        cpu_ok = cpu_left[:, None] >= self.cpu[None, :]
        if self.unique_milli:
            um = np.asarray(self.unique_milli, dtype=np.int64)
            small = left[:, :, None] < um[None, None, :]
            cnt = (~small).sum(axis=1)
            frag_small = np.where(small, left[:, :, None], 0).sum(axis=1)
            cnt_t = cnt[:, self._midx]
            frag_t = frag_small[:, self._midx].astype(np.float64)
        else:
            cnt_t = np.zeros(cpu_ok.shape, dtype=np.int64)
            frag_t = np.zeros(cpu_ok.shape)
        access = self.access[cls + 1]
        fits = cnt_t >= self.count[None, :]
        gpu_type = self._gpu_type[None, :]
        bucket = np.where(gpu_type,
                          np.where(~access, _NO_ACCESS,
                                   np.where(cpu_ok, _Q2_LACK_GPU, np.where(fits, _Q4_LACK_CPU, _Q1_LACK_BOTH))),
                          np.where(cpu_ok, _XL, _XR))
        q3 = gpu_type & access & fits & cpu_ok
        amount = self.freq[None, :] * np.where(q3, frag_t, totf)
        out: FloatArray | None = None
        for b in (_Q1_LACK_BOTH, _Q2_LACK_GPU, _Q4_LACK_CPU, _XL, _XR, _NO_ACCESS):
            part = np.cumsum(np.where(bucket == b, amount, 0.0), axis=1)[:, -1]
            out = part if out is None else out + part
        assert out is not None
        return out
