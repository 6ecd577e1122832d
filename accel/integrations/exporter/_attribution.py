"""Who is using each device: Kubernetes pods (kubelet PodResources) and Slurm jobs (a job-mapping directory).

``accel exporter --pod-resources-socket PATH`` asks the kubelet's PodResources ``List``
(:mod:`accel.integrations.k8s._podresources`); ``--hpc-job-mapping-dir DIR`` reads
dcgm-exporter's HPC convention (NVIDIA/dcgm-exporter internal/pkg/transformation/hpc.go and its
README "How to include HPC jobs in metric labels"): one plain file per GPU, named by the GPU's
index (``0``, ``1``...; ``<gpu>.<gpu instance>`` for a MIG instance, ``2.0``), holding one job id
per line; other names and subdirectories are skipped, and a missing directory means no jobs.
A Slurm prolog writes the files and the epilog removes them.  Files named for a MIG instance
are read but not attributed: accel's value series are per device, and a job on one instance
does not hold the whole GPU.

Both answers are cached for ``ttl_s`` (a scrape every second must not ask the kubelet every
second), and a source that failed is not asked again before ``ttl_s`` has passed either, so a
dead socket costs at most one call deadline per ``ttl_s``, never a stalled scrape per scrape.
A failure keeps no stale answer: the devices lose their attribution and the source reports
``up`` 0 with the reason (``accel_attribution_up{source=...} 0``), so nobody charges a job for a
device on an answer that may be minutes old.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..._net.bounded_json import JSONLimitError, loads_bounded
from ...errors import AccelError, ConfigError
from ...model import Device

if TYPE_CHECKING:  # the k8s package loads only with --pod-resources-socket
    from ..k8s._podresources import DeviceHolder

__all__ = [
    "HPC_SOURCE",
    "POD_SOURCE",
    "SERVE_SOURCE",
    "Attribution",
    "AttributionRead",
    "HpcJobMapping",
    "JobSource",
    "PodSource",
    "ServeJobs",
    "SourceState",
]

POD_SOURCE = "pod-resources"
HPC_SOURCE = "hpc-job-mapping"
SERVE_SOURCE = "accel-serve"
#: What ``accel serve --attribution-dir`` writes (accel/service/_attribution.py ``FORMAT``).
SERVE_FORMAT = "accel-serve-attribution/1"
_MAX_SERVE_BYTES = 1 << 20
_MAX_SERVE_ROWS = 4096
#: dcgm-exporter's file-name rule (hpc.go ``validGPUFile``).
_GPU_FILE = re.compile(r"^\d+(\.\d+)?$")
#: A job-mapping file larger than this is not read (a GPU holds a handful of jobs).
_MAX_FILE_BYTES = 64 * 1024


class PodSource(Protocol):
    """Says which containers hold each device (the PodResources client)."""

    def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[DeviceHolder, ...]]: ...


class JobSource(Protocol):
    """Says which HPC jobs hold each device (:class:`HpcJobMapping`)."""

    def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[str, ...]]: ...


class HpcJobMapping:
    """dcgm-exporter's HPC job-mapping directory: device index -> job ids."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def jobs_by_index(self) -> dict[int, tuple[str, ...]]:
        """The jobs of each GPU index; a missing directory is no jobs (as in dcgm-exporter)."""
        try:
            entries = sorted(os.scandir(self.directory), key=lambda e: e.name)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise AccelError(f"HPC job mapping directory {self.directory}: {exc.strerror or exc}",
                             code="exporter.hpc-job-mapping") from exc
        jobs: dict[int, tuple[str, ...]] = {}
        for entry in entries:
            if not _GPU_FILE.match(entry.name) or "." in entry.name:
                continue  # not a GPU file, or a MIG instance's (see the module docstring)
            try:
                if not entry.is_file():
                    continue
                with open(entry.path, "rb") as fh:
                    raw = fh.read(_MAX_FILE_BYTES + 1)
            except OSError as exc:
                raise AccelError(f"HPC job mapping file {entry.path}: {exc.strerror or exc}",
                                 code="exporter.hpc-job-mapping") from exc
            if len(raw) > _MAX_FILE_BYTES:
                raise AccelError(f"HPC job mapping file {entry.path} is over {_MAX_FILE_BYTES} bytes",
                                 code="exporter.hpc-job-mapping")
            ids = tuple(dict.fromkeys(line.strip() for line in raw.decode("utf-8", "replace").splitlines()
                                      if line.strip()))
            if ids:
                jobs[int(entry.name)] = ids
        return jobs

    def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[str, ...]]:
        by_index = self.jobs_by_index()
        return {d.id: by_index[d.index] for d in devices if d.index is not None and d.index in by_index}


class ServeJobs:
    """``accel serve``'s jobs on this host: the file ``accel serve --attribution-dir DIR`` writes as
    ``DIR/<host>.json`` (accel/service/_attribution.py): device id -> ``(job id, tenant)``.

    Bounded: at most :data:`_MAX_SERVE_BYTES` read and :data:`_MAX_SERVE_ROWS` rows; a file that is
    not that format, names another host's file format, or was last written more than ``max_age_s``
    ago (the service rewrites it at least every 30 s while it runs) is an error: the devices lose
    the attribution rather than carry an answer the service may no longer stand behind.  A
    missing file is an error too (the service has not started, or the path is wrong).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_age_s: float = 120.0,
                 wall: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.max_age_s = max_age_s
        self._wall = wall

    def _fail(self, why: str) -> AccelError:
        return AccelError(f"accel serve attribution file {self.path}: {why}", code="exporter.accel-serve")

    def read(self) -> dict[str, tuple[tuple[str, str], ...]]:
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read(_MAX_SERVE_BYTES + 1)
        except OSError as exc:
            raise self._fail(exc.strerror or str(exc)) from exc
        if len(raw) > _MAX_SERVE_BYTES:
            raise self._fail(f"over {_MAX_SERVE_BYTES} bytes")
        try:  # the shared bounded reader: deep nesting is "not JSON" here, never a RecursionError
            doc = loads_bounded(raw, what=str(self.path))
        except JSONLimitError as exc:
            raise self._fail(f"not JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != SERVE_FORMAT or not isinstance(doc.get("devices"), list):
            raise self._fail(f"not the {SERVE_FORMAT} format")
        written = doc.get("written_at")
        if isinstance(written, bool) or not isinstance(written, int | float) or not math.isfinite(written):
            raise self._fail("no written_at time")
        age = self._wall() - float(written)
        if age > self.max_age_s:
            raise self._fail(f"written {age:.0f} s ago (over {self.max_age_s:g} s): the service stopped updating it")
        rows = doc["devices"]
        if len(rows) > _MAX_SERVE_ROWS:
            raise self._fail(f"over {_MAX_SERVE_ROWS} devices")
        out: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            values = [row.get(k) if isinstance(row, dict) else None for k in ("device", "accel_job", "tenant")]
            if not all(isinstance(v, str) and 0 < len(v) <= 256 for v in values):
                raise self._fail("a row is not {device, accel_job, tenant} strings")
            device, job, tenant = (str(v) for v in values)
            out.setdefault(device, []).append((job, tenant))
        return {d: tuple(sorted(set(v))) for d, v in out.items()}

    def holders(self, devices: Iterable[Device]) -> Mapping[str, tuple[tuple[str, str], ...]]:
        held = self.read()
        return {d.id: held[d.id] for d in devices if d.id in held}


@dataclass(frozen=True)
class SourceState:
    """One source's last answer: ``up``, the ``reason`` when not, and when it was asked."""

    up: bool
    reason: str | None = None
    asked_at: float = 0.0


@dataclass(frozen=True)
class AttributionRead:
    """What the sources say for one scrape: per device id, the pod holders and the HPC jobs."""

    pods: Mapping[str, tuple[DeviceHolder, ...]] = field(default_factory=dict)
    jobs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    states: Mapping[str, SourceState] = field(default_factory=dict)
    #: ``accel serve``'s jobs: device id -> (job id, tenant) pairs.
    serve: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


class _Cached:
    def __init__(self, name: str, source: PodSource | JobSource | ServeJobs) -> None:
        self.name = name
        self.source = source
        self.answer: Mapping[str, tuple[Any, ...]] = {}
        self.key: frozenset[str] = frozenset()
        self.state: SourceState | None = None


class Attribution:
    """The configured sources, each asked at most once per ``ttl_s`` (thread-safe).

    ``pods``: a :class:`PodSource` (the PodResources client); ``jobs``: a :class:`JobSource`
    (an :class:`HpcJobMapping`).  ``clock`` is monotonic (a fake
    in tests).  A new device set (a device appeared) asks again at once.  ``warn`` gets one line
    when a source stops answering (with the reason) and one when it answers again.
    """

    def __init__(self, *, pods: PodSource | None = None, jobs: JobSource | None = None,
                 serve: ServeJobs | None = None, ttl_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 warn: Callable[[str], None] | None = None) -> None:
        if not ttl_s >= 0:
            raise ConfigError(f"attribution cache time must be zero or more seconds, got {ttl_s!r}")
        self.ttl_s = float(ttl_s)
        self._clock = clock
        #: Told (one line) when a source stops or starts answering, not on every failed ask.
        self._warn = warn
        self._lock = threading.Lock()
        self._sources: list[_Cached] = []
        if pods is not None:
            self._sources.append(_Cached(POD_SOURCE, pods))
        if jobs is not None:
            self._sources.append(_Cached(HPC_SOURCE, jobs))
        if serve is not None:
            self._sources.append(_Cached(SERVE_SOURCE, serve))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(c.name for c in self._sources)

    def read(self, devices: Iterable[Device]) -> AttributionRead:
        devs = tuple(devices)
        key = frozenset(d.id for d in devs)
        answers: dict[str, Mapping[str, tuple[Any, ...]]] = {}
        states: dict[str, SourceState] = {}
        with self._lock:
            for cached in self._sources:
                now = self._clock()
                fresh = cached.state is not None and now - cached.state.asked_at < self.ttl_s
                if not fresh or cached.key != key:
                    self._ask(cached, devs, key, now)
                assert cached.state is not None
                answers[cached.name] = cached.answer
                states[cached.name] = cached.state
        return AttributionRead(pods=answers.get(POD_SOURCE, {}), jobs=answers.get(HPC_SOURCE, {}), states=states,
                               serve=answers.get(SERVE_SOURCE, {}))

    def _ask(self, cached: _Cached, devs: tuple[Device, ...], key: frozenset[str], now: float) -> None:
        cached.key = key
        was_up = cached.state.up if cached.state is not None else True
        try:
            cached.answer = dict(cached.source.holders(devs))
            cached.state = SourceState(up=True, asked_at=now)
        except AccelError as exc:
            cached.answer = {}
            cached.state = SourceState(up=False, reason=str(exc)[:500], asked_at=now)
        if self._warn is not None and cached.state.up != was_up:
            self._warn(f"{cached.name}: {cached.state.reason}; devices carry no {cached.name} attribution"
                       if not cached.state.up else f"{cached.name}: answers again")

    def close(self) -> None:
        for cached in self._sources:
            close = getattr(cached.source, "close", None)
            if callable(close):
                close()
