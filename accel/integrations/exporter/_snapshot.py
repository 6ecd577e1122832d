"""One snapshot of every backend per scrape, shared by concurrent scrapes.

:class:`SnapshotSource` owns one :class:`~accel.discovery.Session` per opened backend, all
built from one discovery report, and reads them (the inventory, whose devices carry their
health, and telemetry) at most once per ``min_interval_s``.  A scrape that arrives while a
read is in flight waits for that read and shares its result instead of starting another one.
Backends are read side by side, each under its own per-call deadline
(:func:`accel.discovery.call_deadline`), so a hung backend costs the scrape one deadline at most
and never hides the others; a backend whose call failed is not called again in the same read
(its ``up`` is 0 for that scrape).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from ...discovery import BackendEntry, DiscoveryReport, EntryStatus, Session
from ...errors import AccelError
from ...leak import LeakVerdict, LeakWatch
from ...model import Health, HostInventory, Problem, ProblemKind, Telemetry
from ...plugin import BackendConfig

__all__ = ["BackendRead", "Snapshot", "SnapshotSource"]

#: The reads one backend gets per snapshot, in order; the first that fails ends that backend's read.
CALLS = ("inventory", "telemetry")


@dataclass(frozen=True)
class BackendRead:
    """What one backend answered for one snapshot.

    ``up`` is true only when every call of :data:`CALLS` answered in this read.  ``inventory``
    is ``None`` when the inventory call failed (or the backend never opened); ``failed_call``
    names the call that failed and ``reason`` says why.
    """

    name: str
    up: bool
    inventory: HostInventory | None = None
    telemetry: tuple[Telemetry, ...] = ()
    health: Mapping[str, Health] = field(default_factory=dict)
    failed_call: str | None = None
    reason: str | None = None

    @property
    def problems(self) -> tuple[Problem, ...]:
        """The inventory's problems, plus one ``backend`` problem when this read failed."""
        own = self.inventory.problems if self.inventory is not None else ()
        if self.up:
            return own
        why = self.reason or f"backend {self.name!r} did not answer"
        return (*own, Problem(kind=ProblemKind.BACKEND, backend=self.name, message=why[:1000]))


@dataclass(frozen=True)
class Snapshot:
    """Every backend's read for one scrape (or several concurrent ones).

    ``started``/``finished`` are :func:`time.monotonic` values; ``duration_s`` is the length of
    the read.  ``reads`` counts the real reads this source made so far (this one included) and
    ``read_errors`` the failed calls per ``(backend, call)`` since the source was built.
    With leak detection on, each device's health carries its ``MemoryLeakSuspected`` conditions
    and ``leaks`` the verdicts.
    """

    backends: tuple[BackendRead, ...]
    started: float
    finished: float
    reads: int
    read_errors: Mapping[tuple[str, str], int]
    #: Suspected leaks: device id or ``(device_id, pid, name)`` -> verdict (empty without leak detection).
    leaks: Mapping[object, LeakVerdict] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return max(self.finished - self.started, 0.0)

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(p for b in self.backends for p in b.problems)

    @property
    def complete(self) -> bool:
        """True when every backend answered and no inventory has a problem."""
        return not self.problems


def _single_report(report: DiscoveryReport, name: str) -> DiscoveryReport:
    entry = report.entry(name)
    return DiscoveryReport(entries=[entry], plugins={name: report.plugins[name]})


class SnapshotSource:
    """Reads all backends at most once per ``min_interval_s``; thread-safe.

    Build it from a :class:`~accel.discovery.DiscoveryReport` (the usable plugins are opened,
    one :class:`~accel.discovery.Session` each, at construction) or hand it ready sessions
    (``sessions``, tests).  ``clock`` is the monotonic clock (a fake in tests).  Backends that
    failed before they could be read (load, probe, open) are reported down on every snapshot.
    ``leak`` watches used memory across reads (:class:`~accel.leak.LeakWatch`; ``None``: off),
    timed by ``clock``.
    """

    def __init__(
        self,
        report: DiscoveryReport | None = None,
        configs: Mapping[str, BackendConfig] | None = None,
        default_config: BackendConfig | None = None,
        *,
        sessions: Mapping[str, Session] | None = None,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        leak: LeakWatch | None = None,
    ) -> None:
        if min_interval_s < 0 or min_interval_s != min_interval_s:
            from ...errors import ConfigError

            raise ConfigError(f"min interval must be zero or more seconds, got {min_interval_s!r}")
        self.min_interval_s = float(min_interval_s)
        self._clock = clock
        self.leak = leak
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._reads = 0
        self._errors: dict[tuple[str, str], int] = {}
        self._errors_lock = threading.Lock()
        self._sessions: dict[str, Session] = dict(sessions or {})
        #: Backends that failed before any read (load, probe, open): name -> reason.
        self._dead: dict[str, str] = {}
        #: The typed error of each backend that failed before any read (``None`` when untyped).
        self.startup_errors: dict[str, AccelError | None] = {}
        if report is not None:
            cfgs = dict(configs or {})
            default = default_config or BackendConfig()
            for entry in report.entries:
                if entry.status is EntryStatus.FAILED:
                    self._dead[entry.name] = entry.reason or f"backend {entry.name!r} failed at {entry.stage}"
                    self.startup_errors[entry.name] = entry.error
            for name in sorted(report.plugins):
                session = Session(_single_report(report, name), cfgs, default)
                opened = session.report.entry(name)
                if opened.status is EntryStatus.FAILED or name not in session.backends:
                    self._dead[name] = opened.reason or f"backend {name!r} could not be opened"
                    self.startup_errors[name] = opened.error
                    session.close()
                    continue
                self._sessions[name] = session

    @property
    def backend_names(self) -> list[str]:
        """Every backend this source reports on (readable or dead), sorted."""
        return sorted(set(self._sessions) | set(self._dead))

    def get(self) -> Snapshot:
        """The current snapshot: a fresh read, or one that is recent or just finished."""
        arrived = self._clock()
        with self._lock:
            snap = self._snapshot
            if snap is not None and (snap.finished >= arrived or arrived - snap.finished < self.min_interval_s):
                return snap
            snap = self._read()
            self._snapshot = snap
            return snap

    def _read(self) -> Snapshot:
        started = self._clock()
        names = sorted(self._sessions)
        reads: dict[str, BackendRead] = {}
        if len(names) == 1:
            reads[names[0]] = self._read_backend(names[0], self._sessions[names[0]])
        elif names:
            with ThreadPoolExecutor(max_workers=len(names), thread_name_prefix="accel-exporter-read") as pool:
                futures = {n: pool.submit(self._read_backend, n, self._sessions[n]) for n in names}
                reads = {n: f.result() for n, f in futures.items()}
        for name, reason in self._dead.items():
            reads[name] = BackendRead(name=name, up=False, reason=reason)
        leaks: dict[object, LeakVerdict] = {}
        if self.leak is not None:
            reads, leaks = self._watch_leaks(reads, started)
        self._reads += 1
        return Snapshot(
            backends=tuple(reads[n] for n in sorted(reads)),
            started=started,
            finished=self._clock(),
            reads=self._reads,
            read_errors=self._error_counts(),
            leaks=leaks,
        )

    def _watch_leaks(
        self, reads: dict[str, BackendRead], now: float
    ) -> tuple[dict[str, BackendRead], dict[object, LeakVerdict]]:
        assert self.leak is not None
        for read in reads.values():
            if read.inventory is not None:
                self.leak.observe(read.inventory, now)
        verdicts = self.leak.verdicts()
        if not verdicts:
            return reads, {}
        out: dict[str, BackendRead] = {}
        for name, read in reads.items():
            if read.inventory is None:
                out[name] = read
                continue
            health = {d.id: read.health.get(d.id, d.health) for d in read.inventory.devices}
            health.update({k: v for k, v in read.health.items() if k not in health})
            out[name] = replace(read, health=self.leak.annotate_health(health))
        return out, dict(verdicts)

    def _error_counts(self) -> dict[tuple[str, str], int]:
        with self._errors_lock:
            return dict(self._errors)

    def _read_backend(self, name: str, session: Session) -> BackendRead:
        if name not in session.backends:
            entry = _entry(session, name)
            why = entry.reason if entry is not None and entry.reason else f"backend {name!r} is not open"
            return BackendRead(name=name, up=False, failed_call="inventory", reason=why)
        # Both calls of CALLS in one hand-off to the backend's worker thread, each under its own
        # deadline; telemetry is not called when the inventory failed.
        inv, telemetry, failed = session.read_backend(name)
        if failed is not None or inv is None:
            call = failed or "inventory"
            with self._errors_lock:
                self._errors[(name, call)] = self._errors.get((name, call), 0) + 1
            entry = _entry(session, name)
            why = entry.reason if entry is not None and entry.reason else f"backend {name!r}: {call}() failed"
            return BackendRead(name=name, up=False, inventory=inv if call == "telemetry" else None,
                               failed_call=call, reason=why)
        # Health comes from the inventory's own reading: a separate health() call would read the
        # devices a third time per scrape and compare stateful checks (NVLink replay growth)
        # with the sample the inventory took a moment earlier instead of the previous scrape's.
        health = {d.id: d.health for d in inv.devices}
        health.update({p.id: p.health for p in inv.partitions})
        return BackendRead(name=name, up=True, inventory=inv, telemetry=tuple(telemetry or ()), health=health)

    def close(self) -> None:
        """Close every session (a backend that passed a deadline is not called again)."""
        for session in self._sessions.values():
            session.close()


def _entry(session: Session, name: str) -> BackendEntry | None:
    try:
        return session.report.entry(name)
    except KeyError:
        return None
