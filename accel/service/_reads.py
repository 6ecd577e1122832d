"""What the readers of the service (show, list, pages) read without the service's lock.

A request that only reads never waits for the live loop's tick (a scheduling cycle, launches)
or for a submit: it reads

- the service tables and the scheduler journal through read-only SQLite connections of its own
  thread (:class:`ReadSide`; both files are in WAL mode, so a reader sees what was committed
  and never blocks the writer, nor is blocked by it), and
- each job's engine state from a :class:`JobView`: an immutable copy of the fields a record or
  a list shows, which the service publishes (:meth:`Views.publish`) under its lock after every
  change to the engine: at the end of a tick, a submit, a cancel.  Readers take a view with one
  dict lookup, so the fields they see belong together.

Views are published after the journal's commit of the change they show, so what a reader
sees of the engine is never ahead of the journal it reads.  Only jobs that are not over yet
are refreshed (:attr:`Views.live`): an ended job's view never changes again, so a publish costs
the jobs in flight, not the history.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from accel.scheduler.queueing import Job, Journal

from ._store import ServiceStore

__all__ = ["JobView", "ReadSide", "Views"]


@dataclass(frozen=True, slots=True)
class JobView:
    """A job's engine state as readers see it (see the module docstring)."""

    state: str
    reason: str
    pool: str | None
    attempts: int
    submitted_at: float
    first_started_at: float | None

    @classmethod
    def of(cls, job: Job) -> JobView:
        return cls(job.state.value, job.reason, job.pool, job.attempts, job.submitted_at, job.first_started_at)


class Views:
    """The published :class:`JobView` per job id (see the module docstring)."""

    def __init__(self) -> None:
        self._views: dict[str, JobView] = {}
        self._live: set[str] = set()  # ids of jobs whose view may still change (not over)

    def get(self, job_id: str) -> JobView | None:
        """The job's last published view (``None``: stored, not yet published)."""
        return self._views.get(job_id)

    def publish(self, jobs: Mapping[str, Job], new: Iterable[str] = ()) -> None:
        """Refresh the views of the jobs ``new`` and of every job not over yet, from the
        engine's ``jobs`` (call under the lock that guards the engine, after the change was
        committed to the journal)."""
        self._live.update(new)
        over: list[str] = []
        for job_id in self._live:
            job = jobs.get(job_id)
            if job is None:
                over.append(job_id)
                continue
            view = JobView.of(job)
            if self._views.get(job_id) != view:
                self._views[job_id] = view  # one store of an immutable value: readers see old or new
            if job.state.terminal:
                over.append(job_id)
        self._live.difference_update(over)


class ReadSide:
    """Read-only connections to the service tables and the journal, one pair per thread."""

    def __init__(self, service_db: Path, journal: Path) -> None:
        self._service_db = service_db
        self._journal = journal
        self._local = threading.local()
        self._opened: list[tuple[ServiceStore, Journal]] = []
        self._lock = threading.Lock()
        self._closed = False

    def _pair(self) -> tuple[ServiceStore, Journal]:
        pair: tuple[ServiceStore, Journal] | None = getattr(self._local, "pair", None)
        if pair is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the service is closed")
                store = ServiceStore(self._service_db, readonly=True)
                try:
                    # a live writer holds the file (a -wal beside it): read through SQLite's locking
                    journal = Journal(self._journal, readonly=True, immutable=False)
                except BaseException:
                    store.close()
                    raise
                pair = self._local.pair = (store, journal)
                self._opened.append(pair)
        return pair

    @property
    def store(self) -> ServiceStore:
        """This thread's read-only view of the service tables."""
        return self._pair()[0]

    @property
    def journal(self) -> Journal:
        """This thread's read-only view of the scheduler journal."""
        return self._pair()[1]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            opened, self._opened = self._opened, []
        for store, journal in opened:
            store.close()
            journal.close()
