"""The serving tables of ``accel serve``: serving groups, their replica jobs, the engine processes.

``STATE/serving.sqlite`` (WAL, ``synchronous=NORMAL``, an ``application_id`` and a
``user_version`` as the service tables have: another program's file is refused, never changed;
one connection, guarded by the serving manager's lock):

- ``groups``: one row per serving group (a tenant's name, the replica count wanted, the job
  request every replica is submitted with, the engine's options, active / cancelled / failed);
- ``replicas``: which job is which replica of which group (a job is a replica of one group), and
  the ports the service chose for it when the replica runs the group's own engine command (its
  serving port, and its KV-event port when the group declares one);
- ``engines``: the engine process of a running ``--sim`` replica (pid and its start time in clock
  ticks, so a recycled pid is never signalled, and the KV-event endpoint it bound), kept so that a
  service restarted after a crash stops what the crashed one started.

Schema version 2 added ``replicas.port``, ``replicas.kv_port`` and ``engines.kv_events``; a
version-1 file is brought up to date in place (the columns added, nothing else changed).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.errors import ConfigError

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "EngineRow", "GroupRow", "ServingStore"]

APPLICATION_ID = 0x41435347  # "ACSG": accel serving groups
SCHEMA_VERSION = 2

_SCHEMA = f"""
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
CREATE TABLE IF NOT EXISTS groups (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, desired INTEGER NOT NULL,
    state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', request TEXT NOT NULL, engine TEXT NOT NULL,
    token_id TEXT NOT NULL, created_t REAL NOT NULL, failures INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX IF NOT EXISTS groups_active_name ON groups (tenant, name) WHERE state = 'active';
CREATE TABLE IF NOT EXISTS replicas (
    job_id TEXT PRIMARY KEY, group_id TEXT NOT NULL, idx INTEGER NOT NULL, port INTEGER, kv_port INTEGER);
CREATE INDEX IF NOT EXISTS replicas_group ON replicas (group_id);
CREATE TABLE IF NOT EXISTS engines (
    job_id TEXT PRIMARY KEY, attempt INTEGER NOT NULL, pid INTEGER NOT NULL, start_ticks INTEGER NOT NULL,
    ready_file TEXT NOT NULL, url TEXT, restarts INTEGER NOT NULL DEFAULT 0, kv_events TEXT);
"""
_UPGRADE_1 = """
ALTER TABLE replicas ADD COLUMN port INTEGER;
ALTER TABLE replicas ADD COLUMN kv_port INTEGER;
ALTER TABLE engines ADD COLUMN kv_events TEXT;
PRAGMA user_version = 2;
"""


@dataclass(frozen=True, slots=True)
class GroupRow:
    id: str
    tenant: str
    name: str
    desired: int
    state: str  # active, cancelled, failed
    reason: str
    request: dict[str, Any]
    engine: dict[str, Any]
    token_id: str
    created_t: float
    failures: int


@dataclass(frozen=True, slots=True)
class EngineRow:
    job_id: str
    attempt: int
    pid: int
    start_ticks: int
    ready_file: str
    url: str | None
    restarts: int
    #: The KV-event endpoint the engine bound (``tcp://127.0.0.1:PORT``), once it serves.
    kv_events: str | None = None


class ServingStore:
    """See the module docstring.  Not thread-safe by itself: the caller holds one lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            app = int(self._db.execute("PRAGMA application_id").fetchone()[0])
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            tables = int(self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"serving state {path}: not an SQLite database or damaged ({exc})") from exc
        if app == 0 and tables == 0:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        elif (app, version) == (APPLICATION_ID, 1):
            self._db.executescript(_UPGRADE_1)
        elif (app, version) != (APPLICATION_ID, SCHEMA_VERSION):
            self._db.close()
            raise ConfigError(f"serving state {path}: not this accel's serving tables (application id {app:#x}, "
                              f"schema version {version})")
        self._db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        self._db.close()

    # -- groups ------------------------------------------------------------------------------------------
    def add_group(self, g: GroupRow) -> None:
        self._db.execute("INSERT INTO groups VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         (g.id, g.tenant, g.name, g.desired, g.state, g.reason, json.dumps(g.request),
                          json.dumps(g.engine), g.token_id, g.created_t, g.failures))

    def groups(self, tenant: str | None = None, *, active_only: bool = False) -> list[GroupRow]:
        sql, args = "SELECT * FROM groups", []
        where = []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if active_only:
            where.append("state = 'active'")
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [_group(r) for r in self._db.execute(sql + " ORDER BY created_t, id", args)]

    def group_named(self, tenant: str, name: str) -> GroupRow | None:
        """The tenant's group of that name: the active one, else the latest that ended."""
        row = self._db.execute("SELECT * FROM groups WHERE tenant = ? AND name = ? ORDER BY state = 'active' DESC, "
                               "created_t DESC LIMIT 1", (tenant, name)).fetchone()
        return _group(row) if row is not None else None

    def set_group(self, group_id: str, **values: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in values)
        self._db.execute(f"UPDATE groups SET {cols} WHERE id = ?", (*values.values(), group_id))

    # -- replicas ----------------------------------------------------------------------------------------
    def add_replica(self, job_id: str, group_id: str, idx: int, port: int | None = None,
                    kv_port: int | None = None) -> None:
        self._db.execute("INSERT OR IGNORE INTO replicas VALUES (?,?,?,?,?)", (job_id, group_id, idx, port, kv_port))

    def ports(self, job_id: str) -> tuple[int | None, int | None]:
        """The (serving, KV-event) ports chosen for a replica of an engine command (``None``: none)."""
        row = self._db.execute("SELECT port, kv_port FROM replicas WHERE job_id = ?", (job_id,)).fetchone()
        return (row[0], row[1]) if row is not None else (None, None)

    def ports_in_use(self) -> set[int]:
        """Every port chosen for a replica of an active group (a new replica gets none of them)."""
        out: set[int] = set()
        for port, kv in self._db.execute("SELECT r.port, r.kv_port FROM replicas r JOIN groups g ON g.id = r.group_id "
                                         "WHERE g.state = 'active'"):
            out.update(p for p in (port, kv) if p is not None)
        return out

    def replicas(self, group_id: str) -> list[tuple[str, int]]:
        return [(str(r[0]), int(r[1])) for r in
                self._db.execute("SELECT job_id, idx FROM replicas WHERE group_id = ? ORDER BY rowid", (group_id,))]

    def replica(self, job_id: str) -> tuple[str, int] | None:
        row = self._db.execute("SELECT group_id, idx FROM replicas WHERE job_id = ?", (job_id,)).fetchone()
        return (str(row[0]), int(row[1])) if row is not None else None

    # -- engine processes --------------------------------------------------------------------------------
    def put_engine(self, e: EngineRow) -> None:
        self._db.execute("INSERT OR REPLACE INTO engines VALUES (?,?,?,?,?,?,?,?)",
                         (e.job_id, e.attempt, e.pid, e.start_ticks, e.ready_file, e.url, e.restarts, e.kv_events))

    def engines(self) -> list[EngineRow]:
        return [EngineRow(str(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4]), r[5], int(r[6]), r[7])
                for r in self._db.execute("SELECT * FROM engines")]

    def drop_engine(self, job_id: str) -> None:
        self._db.execute("DELETE FROM engines WHERE job_id = ?", (job_id,))


def _group(r: Any) -> GroupRow:
    return GroupRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), str(r[5]), json.loads(r[6]),
                    json.loads(r[7]), str(r[8]), float(r[9]), int(r[10]))
