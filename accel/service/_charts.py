"""Small server-rendered SVG line charts for a job's device readings (no JavaScript, no CDN).

Every value is formatted as a number before it reaches the markup, and labels are escaped by
the template engine, so a chart carries nothing a user typed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Chart", "line_chart"]

_W, _H, _PAD = 320, 110, 24
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True, slots=True)
class Chart:
    """A chart ready for the template: its title, unit, polylines (points text, colour, label)."""

    title: str
    unit: str
    width: int
    height: int
    lines: tuple[tuple[str, str, str], ...]
    y_max: str
    x_span: str


def _downsample(points: Sequence[tuple[float, float]], n: int = 120) -> list[tuple[float, float]]:
    if len(points) <= n:
        return list(points)
    step = len(points) / n
    return [points[int(i * step)] for i in range(n)] + [points[-1]]


def line_chart(title: str, unit: str, series: dict[str, list[tuple[float, float]]], *, scale: float = 1.0,
               y_max: float | None = None) -> Chart | None:
    """One chart: ``series`` maps a label (a device) to (t, value) points; ``scale`` divides the
    values (bytes -> GiB).  ``None`` when there is nothing to draw."""
    pts = {k: [(t, v / scale) for t, v in vs if math.isfinite(v)] for k, vs in series.items()}
    pts = {k: v for k, v in pts.items() if v}
    if not pts:
        return None
    t0 = min(t for vs in pts.values() for t, _ in vs)
    t1 = max(t for vs in pts.values() for t, _ in vs)
    top = y_max if y_max is not None else max(v for vs in pts.values() for _, v in vs)
    top = top if top > 0 else 1.0
    span = t1 - t0 if t1 > t0 else 1.0
    lines = []
    for i, (label, vs) in enumerate(sorted(pts.items())):
        xy = " ".join(f"{_PAD + (t - t0) / span * (_W - 2 * _PAD):.1f},{_H - _PAD - v / top * (_H - 2 * _PAD):.1f}"
                      for t, v in _downsample(vs))
        lines.append((xy, _COLOURS[i % len(_COLOURS)], label))
    return Chart(title, unit, _W, _H, tuple(lines), f"{top:.3g}", f"{span:.0f}")
