"""A job's device readings from Prometheus (``accel serve --prometheus URL``).

When the service is given a Prometheus that scrapes ``accel exporter`` on the job's hosts, the
job page's charts (memory used, utilization, power) come from there rather than from the
service's own samples: :meth:`PrometheusSource.job_samples` asks Prometheus's HTTP API
(``GET /api/v1/query_range``, documented in prometheus/prometheus ``docs/querying/api.md``) for
the exporter's series ``accel_memory_used_bytes``, ``accel_utilization_ratio`` and
``accel_power_watts`` (accel's own names, ``accel/exporter/_families.py``) of the job's devices
(their ``device`` label) over the job's run.

Bounded: one timeout per request (also handed to Prometheus as its query ``timeout``), at most
:data:`MAX_POINTS` points per series (the step grows with the window), at most ``max_bytes`` of
answer read, at most :data:`MAX_DEVICES` devices per job.  Every failure (unreachable, an HTTP
error, Prometheus's own ``"status": "error"``, an answer too large or not the documented shape,
one device's series on several hosts) is a :class:`MetricsSourceError` naming what went wrong,
which the page shows as such: never an empty chart that looks like an idle device.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["MAX_DEVICES", "MAX_POINTS", "MetricsSourceError", "PrometheusSource", "Sample"]

#: Points per series at most (Prometheus itself refuses more than 11,000 per series).
MAX_POINTS = 240
#: Devices of one job asked for at most (a bigger job's charts show the first ones).
MAX_DEVICES = 64
#: The exporter's series per chart: (sample field, metric name).
SERIES = (
    ("memory_used_bytes", "accel_memory_used_bytes"),
    ("utilization_ratio", "accel_utilization_ratio"),
    ("power_watts", "accel_power_watts"),
)

#: One reading: (wall time, device id, memory used bytes, utilization ratio, power watts).
Sample = tuple[float, str, int | None, float | None, float | None]


class MetricsSourceError(RuntimeError):
    """The metrics source could not give the job's readings (the message says why)."""


def _label_regex(values: Sequence[str]) -> str:
    """A PromQL regex matching exactly ``values`` (RE2 syntax; escaped, then quoted for a string)."""
    alternatives = "|".join(re.escape(v) for v in values)
    return alternatives.replace("\\", "\\\\").replace('"', '\\"')


@dataclass(frozen=True)
class PrometheusSource:
    """Prometheus at ``url`` (``http://host:9090``, a path prefix allowed)."""

    url: str
    timeout_s: float = 5.0
    max_bytes: int = 4 << 20

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--prometheus {self.url!r}: expected an http:// or https:// URL of a Prometheus")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError(f"--prometheus {self.url!r}: give the server's URL without credentials, query or fragment")
        if not 0 < self.timeout_s <= 60:
            raise ValueError(f"--prometheus-timeout {self.timeout_s}: give a number of seconds above 0, at most 60")
        if not self.max_bytes > 0:
            raise ValueError(f"the limit on a Prometheus answer must be > 0 bytes, not {self.max_bytes}")
        object.__setattr__(self, "url", self.url.rstrip("/"))

    def describe(self) -> str:
        return f"Prometheus at {self.url}"

    def job_samples(self, hosts_devices: Sequence[tuple[str, str]], start_wall: float, end_wall: float) -> list[Sample]:
        """The readings of the devices ``(host, device id)`` between two wall times, sorted by time.

        :raises MetricsSourceError: see the module docstring.
        """
        devices = sorted({d for _h, d in hosts_devices})[:MAX_DEVICES]
        if not devices or not (math.isfinite(start_wall) and math.isfinite(end_wall)):
            return []
        end_wall = max(end_wall, start_wall + 1.0)
        step = max(1.0, math.ceil((end_wall - start_wall) / (MAX_POINTS - 1)))
        rows: dict[tuple[float, str], list[float | None]] = {}
        selector = f'{{device=~"{_label_regex(devices)}"}}'
        for i, (_field, metric) in enumerate(SERIES):
            for device, points in self._range(metric + selector, start_wall, end_wall, step).items():
                for t, v in points:
                    rows.setdefault((t, device), [None, None, None])[i] = v
        out: list[Sample] = []
        for (t, device), (mem, util, power) in sorted(rows.items()):
            out.append((t, device, int(mem) if mem is not None else None, util, power))
        return out

    def _range(self, query: str, start: float, end: float, step: float) -> dict[str, list[tuple[float, float]]]:
        import httpx

        params = {
            "query": query,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step:g}",
            "timeout": f"{self.timeout_s:g}s",
        }
        where = f"{self.describe()}: query_range {query}"
        try:
            with (
                httpx.Client(timeout=self.timeout_s, follow_redirects=False) as client,
                client.stream(
                    "GET", f"{self.url}/api/v1/query_range", params=params, headers={"Accept": "application/json"}
                ) as resp,
            ):
                body = bytearray()
                for chunk in resp.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise MetricsSourceError(f"{where}: the answer is larger than {self.max_bytes} bytes")
                status = resp.status_code
        except httpx.TimeoutException as exc:
            raise MetricsSourceError(f"{where}: no answer within {self.timeout_s:g} s") from exc
        except httpx.HTTPError as exc:
            raise MetricsSourceError(f"{where}: {type(exc).__name__}: {exc}") from exc
        doc = _decode(bytes(body))
        if doc is None:
            raise MetricsSourceError(f"{where}: HTTP {status}, not a JSON answer of the Prometheus API")
        if doc.get("status") != "success":
            error = str(doc.get("error") or "no error message")[:300]
            raise MetricsSourceError(f"{where}: HTTP {status}, {doc.get('errorType') or 'error'}: {error}")
        return _matrix(doc, where)


def _decode(body: bytes) -> dict[str, Any] | None:
    from accel._net.bounded_json import JSONLimitError, loads_bounded

    try:  # the shared bounded reader: a deeply nested answer is refused, never a RecursionError
        doc = loads_bounded(body, what="Prometheus's answer")
    except JSONLimitError:
        return None
    return doc if isinstance(doc, dict) else None


def _matrix(doc: dict[str, Any], where: str) -> dict[str, list[tuple[float, float]]]:
    """The ``matrix`` result by device id; one device seen on several series is an error."""
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise MetricsSourceError(f"{where}: the answer is not a range query's matrix")
    out: dict[str, list[tuple[float, float]]] = {}
    origin: dict[str, str] = {}
    for series in data["result"]:
        metric = series.get("metric") if isinstance(series, dict) else None
        values = series.get("values") if isinstance(series, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            raise MetricsSourceError(f"{where}: a series is not {{metric, values}}")
        device = metric.get("device")
        if not isinstance(device, str):
            raise MetricsSourceError(f"{where}: a series has no device label")
        instance = str(metric.get("instance", ""))
        if device in origin and origin[device] != instance:
            raise MetricsSourceError(
                f"{where}: device {device} is reported by several targets "
                f"({origin[device]}, {instance}): which one ran the job is unknown"
            )
        origin[device] = instance
        points = out.setdefault(device, [])
        for pair in values:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError) as exc:
                raise MetricsSourceError(f'{where}: a point of {device} is not [time, "value"]') from exc
            if math.isfinite(v):
                points.append((t, v))
    return out
