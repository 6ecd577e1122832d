"""The append-only job journal: one SQLite table of events, WAL mode.

Every state change of every job (and every device health change) is a row: time, job, kind,
reason and a JSON payload with what a rebuild needs (the spec at submission, the hosts and
device slots at placement).  Kinds: ``submitted``, ``admitted`` (quota passed, first start),
``placed``, ``resumed`` (placed again after preemption, suspension or failure), ``preempting``
(signalled, in its grace period), ``preempted``, ``demoted`` (passed an attained-service tier
threshold, journaled when it first matters: before a preemption for an earlier tier;
informational, the tier follows from run time), ``failed`` (with ``requeue`` when a device
failed under it), ``finished``, ``cancelled``, and ``health`` (no job: a device turned
(un)usable).  Rows are never updated or deleted.  The engine groups the rows
of one call (one cycle, one submission...) in one transaction, so a crash loses a whole call
or nothing, and rebuilding replays whole calls only.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.errors import ConfigError

__all__ = ["Event", "Journal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    t      REAL NOT NULL,
    job    TEXT,
    kind   TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    data   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_job ON events(job, seq);
CREATE TRIGGER IF NOT EXISTS events_append_only_u BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_append_only_d BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
"""


@dataclass(frozen=True, slots=True)
class Event:
    """One journal row."""

    seq: int
    t: float
    job: str | None
    kind: str
    reason: str
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "t": self.t, "job": self.job, "kind": self.kind, "reason": self.reason,
                "data": self.data}


class Journal:
    """An event journal in an SQLite file (``":memory:"`` for tests without durability)."""

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True) -> None:
        self.path = str(path)
        if not create and self.path != ":memory:" and not Path(self.path).exists():
            raise ConfigError(f"no scheduler journal at {self.path}")
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
                # NORMAL is durable against a killed process (the WAL survives it); FULL would
                # add power-loss durability at an fsync per transaction.
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path} is not a scheduler journal: {exc}") from exc
        self._depth = 0
        self._pending: list[tuple[float, str | None, str, str, str]] = []

    @property
    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group appends; nested uses join the outermost transaction."""
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self._pending.clear()
            raise
        self._depth -= 1
        if self._depth == 0:
            self.flush()

    def append(self, t: float, job: str | None, kind: str, reason: str = "",
               data: dict[str, Any] | None = None) -> None:
        self._pending.append((float(t), job, kind, reason, json.dumps(data or {}, sort_keys=True)))
        if self._depth == 0:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany("INSERT INTO events(t, job, kind, reason, data) VALUES (?,?,?,?,?)", rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def events(self) -> Iterator[Event]:
        """Every event in order."""
        for row in self._db.execute("SELECT seq, t, job, kind, reason, data FROM events ORDER BY seq"):
            yield Event(int(row[0]), float(row[1]), row[2], str(row[3]), str(row[4]), json.loads(row[5]))

    def history(self, job: str) -> list[Event]:
        """A job's whole history: one query."""
        cur = self._db.execute("SELECT seq, t, job, kind, reason, data FROM events WHERE job = ? ORDER BY seq",
                               (job,))
        return [Event(int(r[0]), float(r[1]), r[2], str(r[3]), str(r[4]), json.loads(r[5])) for r in cur]

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def close(self) -> None:
        self.flush()
        self._db.close()
