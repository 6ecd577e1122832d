"""The service's own tables: job requests, prices, tokens, launches, the audit trail, samples.

They live in ``STATE/service.sqlite`` next to the scheduler journal (``STATE/journal.sqlite``):
the journal refuses any table that is not its own (it checks its layout on open), so the
service keeps what the engine does not know in a second SQLite file with the same rules: WAL,
``synchronous=NORMAL`` (durable against a killed process), one transaction per call so a crash
keeps a whole call or none of it, ``application_id`` :data:`APPLICATION_ID` and ``user_version``
:data:`SCHEMA_VERSION` (a file of another program or a newer schema is refused, never changed).

Crash order (what makes "loses none, runs none twice" hold across the two files): a job's
request is committed here *before* the engine journals ``submitted`` (a request without a
journal row is submitted again on restart); a launch is committed here *before* the executor
starts it (``ref`` empty), and its handle right after; a launch left without a handle after a
crash is relaunched only by an executor that says this is safe, and failed otherwise.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.errors import ConfigError

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "AuditRow", "JobSummaryRow", "Launch", "ServiceStore", "StoredJob",
           "TokenRow"]

APPLICATION_ID = 0x41435356  # "ACSV": accel service
SCHEMA_VERSION = 1

_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, tenant TEXT NOT NULL, name TEXT NOT NULL,
    request TEXT NOT NULL, submitted_t REAL NOT NULL, submitted_wall REAL NOT NULL, actor TEXT NOT NULL,
    quote TEXT NOT NULL DEFAULT 'null');
CREATE INDEX jobs_tenant ON jobs(tenant, seq);
CREATE TABLE prices (model TEXT PRIMARY KEY, per_device_hour REAL NOT NULL, per_gib_hour REAL NOT NULL);
CREATE TABLE tokens (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, admin INTEGER NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,
    created_wall REAL NOT NULL, label TEXT NOT NULL DEFAULT '');
CREATE TABLE launches (
    job TEXT NOT NULL, attempt INTEGER NOT NULL, executor TEXT NOT NULL, ref TEXT, started_t REAL NOT NULL,
    devices TEXT NOT NULL, ended_t REAL, exit_code INTEGER, signal INTEGER, reason TEXT, detail TEXT,
    PRIMARY KEY (job, attempt));
CREATE TABLE audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, wall REAL NOT NULL, job TEXT, actor TEXT NOT NULL,
    kind TEXT NOT NULL, reason TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX audit_job ON audit(job, seq);
CREATE TRIGGER audit_append_only_u BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TRIGGER audit_append_only_d BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'append-only'); END;
CREATE TABLE samples (
    job TEXT NOT NULL, t REAL NOT NULL, device_id TEXT NOT NULL, memory_used_bytes INTEGER,
    utilization_ratio REAL, power_watts REAL);
CREATE INDEX samples_job ON samples(job, t);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""


@dataclass(frozen=True, slots=True)
class StoredJob:
    id: str
    seq: int
    tenant: str
    name: str
    request: dict[str, Any]
    submitted_t: float
    submitted_wall: float
    actor: str
    quote: Any


@dataclass(frozen=True, slots=True)
class JobSummaryRow:
    """What a job list shows of a stored job (:meth:`ServiceStore.summaries`)."""

    id: str
    seq: int
    tenant: str
    name: str
    devices: int
    pool: str
    submitted_t: float
    submitted_wall: float


@dataclass(frozen=True, slots=True)
class TokenRow:
    id: str
    tenant: str
    admin: bool
    salt: bytes
    hash: bytes
    label: str


@dataclass(frozen=True, slots=True)
class Launch:
    job: str
    attempt: int
    executor: str
    ref: str | None
    started_t: float
    devices: list[dict[str, Any]]
    ended_t: float | None
    exit_code: int | None
    signal: int | None
    reason: str | None
    detail: str | None


@dataclass(frozen=True, slots=True)
class AuditRow:
    seq: int
    t: float
    wall: float
    job: str | None
    actor: str
    kind: str
    reason: str
    data: dict[str, Any]


class ServiceStore:
    """The service tables (see the module docstring).  Safe to share between threads: every
    call takes the store's lock, and a call's writes are one transaction."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        """Open (or create) the tables; ``readonly``: an existing file, opened read-only (a
        reader beside the service's writer: WAL lets it read what was committed, unblocked)."""
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0
        try:
            if readonly:
                uri = "file:" + str(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            else:
                self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            app = int(self._db.execute("PRAGMA application_id").fetchone()[0])
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            tables = self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"service state {path}: not an SQLite database or damaged ({exc})") from exc
        if readonly and (app != APPLICATION_ID or version != SCHEMA_VERSION):
            self._db.close()
            raise ConfigError(f"service state {path}: not this accel's service tables (application id {app:#x}, "
                              f"schema version {version})")
        if readonly:
            return
        if app == 0 and tables == 0:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        elif app != APPLICATION_ID:
            self._db.close()
            raise ConfigError(f"service state {path}: another program's database (application id {app:#x})")
        elif version != SCHEMA_VERSION:
            self._db.close()
            raise ConfigError(f"service state {path}: schema version {version}; this accel reads {SCHEMA_VERSION}")
        else:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction (nested uses join the outer one)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self._db
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            return list(self._db.execute(sql, args))

    # -- meta ----------------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- jobs ----------------------------------------------------------------------------------------
    def next_seq(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(seq), 0) FROM jobs")[0][0]) + 1

    def add_job(self, job: StoredJob) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO jobs(id, seq, tenant, name, request, submitted_t, submitted_wall, actor, quote) "
                       "VALUES (?,?,?,?,?,?,?,?,?)",
                       (job.id, job.seq, job.tenant, job.name, json.dumps(job.request, sort_keys=True),
                        job.submitted_t, job.submitted_wall, job.actor, json.dumps(job.quote, sort_keys=True)))

    @staticmethod
    def _job(row: Any) -> StoredJob:
        return StoredJob(str(row[0]), int(row[1]), str(row[2]), str(row[3]), json.loads(row[4]), float(row[5]),
                         float(row[6]), str(row[7]), json.loads(row[8]))

    _JOB_COLS = "id, seq, tenant, name, request, submitted_t, submitted_wall, actor, quote"

    def job(self, job_id: str) -> StoredJob | None:
        rows = self._query(f"SELECT {self._JOB_COLS} FROM jobs WHERE id = ?", (job_id,))
        return self._job(rows[0]) if rows else None

    def jobs(self, tenant: str | None = None, *, limit: int | None = None, before_seq: int | None = None
             ) -> list[StoredJob]:
        where: list[str] = []
        args: list[Any] = []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if before_seq is not None:
            where.append("seq < ?")
            args.append(before_seq)
        sql = f"SELECT {self._JOB_COLS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [self._job(r) for r in self._query(sql, tuple(args))]

    def summaries(self, tenant: str | None = None, *, limit: int, before_seq: int | None = None
                  ) -> list[JobSummaryRow]:
        """The newest ``limit`` jobs (before ``before_seq``), only what a list shows: the request's
        ``devices`` and ``pool`` are read by SQLite (``json_extract``), the quote is not read."""
        where: list[str] = []
        args: list[Any] = []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if before_seq is not None:
            where.append("seq < ?")
            args.append(before_seq)
        sql = ("SELECT id, seq, tenant, name, json_extract(request, '$.devices'), json_extract(request, '$.pool'), "
               "submitted_t, submitted_wall FROM jobs")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY seq DESC LIMIT {int(limit)}"
        return [JobSummaryRow(str(r[0]), int(r[1]), str(r[2]), str(r[3]), int(r[4]), str(r[5] or ""), float(r[6]),
                              float(r[7])) for r in self._query(sql, tuple(args))]

    # -- prices --------------------------------------------------------------------------------------
    def prices(self) -> dict[str, tuple[float, float]]:
        return {str(m): (float(d), float(g)) for m, d, g in self._query("SELECT model, per_device_hour, "
                                                                        "per_gib_hour FROM prices")}

    def set_price(self, model: str, per_device_hour: float, per_gib_hour: float = 0.0) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO prices(model, per_device_hour, per_gib_hour) VALUES (?,?,?)",
                       (model, per_device_hour, per_gib_hour))

    # -- tokens --------------------------------------------------------------------------------------
    def add_token(self, row: TokenRow) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO tokens(id, tenant, admin, salt, hash, created_wall, label) VALUES (?,?,?,?,?,?,?)",
                       (row.id, row.tenant, int(row.admin), row.salt, row.hash, time.time(), row.label))

    def token(self, token_id: str) -> TokenRow | None:
        rows = self._query("SELECT id, tenant, admin, salt, hash, label FROM tokens WHERE id = ?", (token_id,))
        if not rows:
            return None
        r = rows[0]
        return TokenRow(str(r[0]), str(r[1]), bool(r[2]), bytes(r[3]), bytes(r[4]), str(r[5]))

    def token_count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM tokens")[0][0])

    # -- launches ------------------------------------------------------------------------------------
    _LAUNCH_COLS = "job, attempt, executor, ref, started_t, devices, ended_t, exit_code, signal, reason, detail"

    @staticmethod
    def _launch(r: Any) -> Launch:
        return Launch(str(r[0]), int(r[1]), str(r[2]), None if r[3] is None else str(r[3]), float(r[4]),
                      json.loads(r[5]), None if r[6] is None else float(r[6]), r[7], r[8], r[9], r[10])

    def add_launch(self, job: str, attempt: int, executor: str, started_t: float, devices: list[dict[str, Any]]
                   ) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO launches(job, attempt, executor, ref, started_t, devices) VALUES (?,?,?,?,?,?)",
                       (job, attempt, executor, None, started_t, json.dumps(devices, sort_keys=True)))

    def set_ref(self, job: str, attempt: int, ref: str, started_t: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE launches SET ref = ?, started_t = ? WHERE job = ? AND attempt = ?",
                       (ref, started_t, job, attempt))

    def end_launch(self, job: str, attempt: int, t: float, exit_code: int | None, signal: int | None,
                   reason: str, detail: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE launches SET ended_t = ?, exit_code = ?, signal = ?, reason = ?, detail = ? "
                       "WHERE job = ? AND attempt = ? AND ended_t IS NULL",
                       (t, exit_code, signal, reason, detail, job, attempt))

    def launches(self, job: str) -> list[Launch]:
        return [self._launch(r) for r in self._query(
            f"SELECT {self._LAUNCH_COLS} FROM launches WHERE job = ? ORDER BY attempt", (job,))]

    def last_models(self, jobs: list[str] | None) -> dict[str, str]:
        """The device model of each job's last launch (its pool), in one query (``None``: none asked)."""
        if not jobs:
            return {}
        marks = ",".join("?" * len(jobs))
        rows = self._query(f"SELECT job, devices FROM launches WHERE job IN ({marks}) ORDER BY job, attempt",
                           tuple(jobs))
        out: dict[str, str] = {}
        for job, devices in rows:
            devs = json.loads(devices)
            if devs:
                out[str(job)] = str(devs[0]["model"])
        return out

    def open_launches(self) -> list[Launch]:
        return [self._launch(r) for r in self._query(
            f"SELECT {self._LAUNCH_COLS} FROM launches WHERE ended_t IS NULL ORDER BY job, attempt")]

    # -- audit ---------------------------------------------------------------------------------------
    def audit(self, t: float, job: str | None, actor: str, kind: str, reason: str,
              data: dict[str, Any] | None = None, *, wall: float | None = None) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO audit(t, wall, job, actor, kind, reason, data) VALUES (?,?,?,?,?,?,?)",
                       (t, time.time() if wall is None else wall, job, actor, kind, reason,
                        json.dumps(data or {}, sort_keys=True)))

    def audit_rows(self, job: str) -> list[AuditRow]:
        return [AuditRow(int(r[0]), float(r[1]), float(r[2]), r[3], str(r[4]), str(r[5]), str(r[6]),
                         json.loads(r[7]))
                for r in self._query("SELECT seq, t, wall, job, actor, kind, reason, data FROM audit "
                                     "WHERE job = ? ORDER BY seq", (job,))]

    # -- samples -------------------------------------------------------------------------------------
    def add_samples(self, rows: list[tuple[str, float, str, int | None, float | None, float | None]]) -> None:
        if not rows:
            return
        with self.transaction() as db:
            db.executemany("INSERT INTO samples(job, t, device_id, memory_used_bytes, utilization_ratio, power_watts) "
                           "VALUES (?,?,?,?,?,?)", rows)

    def samples(self, job: str) -> list[tuple[float, str, int | None, float | None, float | None]]:
        return [(float(r[0]), str(r[1]), r[2], r[3], r[4]) for r in self._query(
            "SELECT t, device_id, memory_used_bytes, utilization_ratio, power_watts FROM samples "
            "WHERE job = ? ORDER BY t, device_id", (job,))]
