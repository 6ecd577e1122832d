"""The append-only job journal: one SQLite table of events, WAL mode, one writer at a time.

Every state change of every job (and every device health change) is a row: time, job, kind,
reason and a JSON payload with what a rebuild needs (the spec at submission, the hosts and
device slots at placement).  Kinds: ``submitted``, ``admitted`` (quota passed, first start),
``placed``, ``resumed`` (placed again after preemption, suspension or failure), ``preempting``
(signalled, in its grace period), ``preempted``, ``demoted`` (passed an attained-service tier
threshold, journaled when it first matters: before a preemption for an earlier tier;
informational, the tier follows from run time), ``promoted`` (the starvation guard put a
waiting job first in its class; its tiers count afresh from ``base_device_s``), ``failed``
(with ``requeue`` when a device failed under it), ``finished``, ``cancelled``, and ``health`` (no job: a device turned
(un)usable).  Rows are never updated or deleted.  The engine groups the rows
of one call (one cycle, one submission...) in one transaction, so a crash loses a whole call
or nothing, and rebuilding replays whole calls only.

The file says what it is: SQLite's ``application_id`` is :data:`APPLICATION_ID` and its
``user_version`` the schema version.  Version 3 (:data:`SCHEMA_VERSION`, every new journal)
adds to version 2 a ``prices`` table: the engine's price tables, append-only, each row with its
sequence number and CRC-32, the latest one pricing a bill (:meth:`Journal.prices`); a writer
opening a version-2 journal adds it (its rows stay as they are).  Version 2 adds a ``crc``
column: the CRC-32 of each row's sequence number, time, job, kind, reason and
payload, and sequence numbers without gaps, so a flipped bit or a lost row anywhere is a
:class:`JournalError` instead of a wrong state.  Version 1 is the format before the version was
stored (no application id, user version 0, exactly that table, index and triggers, no
checksums): such a journal loads as schema 1 (read-only commands leave it as it is; a writer
stamps it as version 1 and keeps appending version-1 rows, so it never mixes the two).
Anything else is refused with one :class:`JournalError` naming the file and what is wrong: not
SQLite or damaged, an empty file or database, another program's database, a newer or unknown
schema version, a table of another layout; and, while reading, each row whose checksum does
not match, whose time is not a finite number or goes back in time, whose job or kind does not
fit, whose payload is not a JSON object of exactly the fields its kind carries, or which does
not follow its job's life (``placed`` before ``submitted``, ``preempted`` while running...) or
the devices as the journal itself tells them (a whole device held by two jobs, a slot in two
pools or under two device ids, a placement on a slot a ``health`` row made unusable).

Opening never changes a file it refuses (nor leaves a lock file next to it), and
``readonly=True`` (what ``accel sched`` uses) opens it read-only: no schema, no WAL switch, no
lock, and ``immutable=1`` when no ``-wal`` is beside it, so SQLite creates no ``-wal``/``-shm``
either (:meth:`Journal.changed` tells a reader that a writer came meanwhile).  A writer holds an
exclusive ``flock`` on ``PATH.lock`` (which records its pid) from open to :meth:`Journal.close`,
which removes the file; the kernel drops the lock when the process dies, so a SIGKILL leaves
no stale lock (the file stays until the next writer closes).  A second writer
gets :class:`JournalLockedError` naming the file and the holder's pid: SQLite's own locking
would let two writers interleave their transactions.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel.errors import ConfigError, SchedulerError
from accel.scheduler import TopologyLevel

from ._meter import PriceTable
from ._types import PreemptMode

#: ``json.dumps(data, sort_keys=True)``, the same text, with one encoder kept (``dumps`` builds
#: a new one per call when given any option, and every journaled event is encoded)
_encode = json.JSONEncoder(sort_keys=True).encode

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "Event", "Journal", "JournalError", "JournalLockedError"]

SCHEMA_VERSION = 3
APPLICATION_ID = 0x41434A4C  # "ACJL": accel journal (SQLite's PRAGMA application_id)

# files SQLite keeps beside a database a writer has open (or left after a crash): with any of
# them there, a read-only open goes through SQLite's locking instead of immutable=1
_BESIDE = ("-wal", "-shm", "-journal")

_COLUMNS_V1 = [("seq", "INTEGER"), ("t", "REAL"), ("job", "TEXT"), ("kind", "TEXT"), ("reason", "TEXT"),
               ("data", "TEXT")]
_COLUMNS = {1: _COLUMNS_V1, 2: [*_COLUMNS_V1, ("crc", "INTEGER")], 3: [*_COLUMNS_V1, ("crc", "INTEGER")]}
_PRICE_COLUMNS = [("seq", "INTEGER"), ("data", "TEXT"), ("crc", "INTEGER")]
_OBJECTS_V2 = {("events", "table"), ("sqlite_sequence", "table"), ("events_job", "index"),
               ("events_append_only_u", "trigger"), ("events_append_only_d", "trigger")}
_OBJECTS = {1: _OBJECTS_V2, 2: _OBJECTS_V2,
            3: _OBJECTS_V2 | {("prices", "table"), ("prices_append_only_u", "trigger"),
                              ("prices_append_only_d", "trigger")}}

_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE events (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    t      REAL NOT NULL,
    job    TEXT,
    kind   TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    data   TEXT NOT NULL DEFAULT '{{}}',
    crc    INTEGER NOT NULL
);
CREATE INDEX events_job ON events(job, seq);
CREATE TRIGGER events_append_only_u BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER events_append_only_d BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
{{prices}}
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;
"""

# version 3: the price tables the engine billed with, append-only (the latest one prices a bill)
_PRICES = """
CREATE TABLE prices (
    seq  INTEGER PRIMARY KEY,
    data TEXT NOT NULL,
    crc  INTEGER NOT NULL
);
CREATE TRIGGER prices_append_only_u BEFORE UPDATE ON prices
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER prices_append_only_d BEFORE DELETE ON prices
    BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
"""
_SCHEMA = _SCHEMA.replace("{prices}", _PRICES)

# a writer opening a version-2 journal adds the price table (its rows stay as they are)
_UPGRADE_V2 = f"""
BEGIN IMMEDIATE;
{_PRICES}
PRAGMA user_version = 3;
COMMIT;
"""

_STAMP_V1 = f"""
BEGIN IMMEDIATE;
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = 1;
COMMIT;
"""


def _price_crc(seq: int, data: str) -> int:
    """The CRC-32 a price-table row carries."""
    return zlib.crc32(f"{seq}\x1f{data}".encode("utf-8", "surrogatepass"))


def _row_crc(seq: int, t: float, job: str | None, kind: str, reason: str, data: str) -> int:
    """The CRC-32 a version-2 row carries (``job`` None and ``""`` differ)."""
    text = "\x1f".join((str(seq), repr(t), "\x00" if job is None else job, kind, reason, data))
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


class JournalError(SchedulerError):
    """A scheduler journal cannot be used: damaged, foreign, of another schema version, or a
    row that is not a valid event (``seq`` names it).  The message is one line naming the file."""

    code = "scheduler.journal-invalid"

    def __init__(self, path: str, problem: str, *, seq: int | None = None, kind: str | None = None) -> None:
        where = f"scheduler journal {path}"
        if seq is not None:
            where += f", event {seq}" + (f" ({kind})" if kind else "")
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.seq = seq


class JournalLockedError(JournalError):
    """Another process (``pid``, when it could be read) has the journal open for writing."""

    code = "scheduler.journal-locked"

    def __init__(self, path: str, lock_path: str, pid: int | None) -> None:
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(path, f"is open for writing by {who} (lock {lock_path}); one writer at a time")
        self.pid = pid


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


# -- payload schemas: kind -> (required fields, optional fields), each field -> a check -----------------
def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _nat(v: Any) -> bool:
    return _int(v) and v >= 0


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _opt_num(v: Any) -> bool:
    return v is None or _num(v)


def _chunks(v: Any) -> bool:
    return (isinstance(v, list) and len(v) > 0
            and all(isinstance(c, list) and len(c) == 2 and _str(c[0]) and isinstance(c[1], list) and c[1]
                    and all(_nat(s) for s in c[1]) and len(set(c[1])) == len(c[1]) for c in v))


def _share(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and set(v) == {"compute_milli", "memory_bytes"}
                         and _nat(v["compute_milli"]) and _nat(v["memory_bytes"]))


def _labels(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, list) and len(x) == 2 and _str(x[0]) and _str(x[1]) for x in v)


def _hosts(v: Any) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(_str(h) for h in v) and len(set(v)) == len(v)


_Check = Callable[[Any], bool]
_SPEC: dict[str, _Check] = {
    "id": _str, "tenant": _str, "devices": _nat, "pool": _str, "share": _share, "estimate_s": _num,
    "priority_class": _str, "same_host": _bool, "checkpoint_interval_s": _opt_num, "cpu_milli": _nat,
    "memory_bytes": _nat, "preemptible": _bool, "labels": _labels,
}


def _topology(v: Any) -> bool:
    return (isinstance(v, dict) and set(v) == {"level", "required"} and _str(v["level"])
            and v["level"] in {lvl.value for lvl in TopologyLevel} and _bool(v["required"]))


# optional spec fields: absent in journals written before them (and when unset)
_SPEC_OPTIONAL: dict[str, _Check] = {"topology": _topology}
_PLACED: tuple[dict[str, _Check], dict[str, _Check]] = (
    {"pool": _str, "chunks": _chunks, "borrowing": _bool, "resume_from": _num, "tenant": _str,
     "mem_per_device": _nat, "share": _num}, {})
_PAYLOADS: dict[str, tuple[dict[str, _Check], dict[str, _Check]]] = {
    "submitted": ({"spec": lambda v: isinstance(v, dict)}, {"estimate": _opt_num, "raw_estimate": _num}),
    "admitted": ({"pool": _str, "borrowing": _bool}, {}),
    "placed": _PLACED,
    "resumed": _PLACED,
    "preempting": ({"stop_at": _num, "for": _str}, {"host": _str, "hosts": _hosts}),
    "preempted": ({"mode": lambda v: v in {m.value for m in PreemptMode}, "keep": _num}, {}),
    "demoted": ({"tier": lambda v: _int(v) and v >= 1, "attained_device_s": _num}, {}),
    "promoted": ({"waited_s": lambda v: _num(v) and v >= 0, "base_device_s": lambda v: _num(v) and v >= 0}, {}),
    "failed": ({"requeue": _bool}, {"keep": _num, "device": _str}),
    "finished": ({}, {}),
    "cancelled": ({}, {}),
    "health": ({"host": _str, "slot": _nat, "usable": _bool, "degraded": _bool, "device": _str}, {}),
}
KINDS = frozenset(_PAYLOADS)


def _fields(data: dict[str, Any], required: dict[str, _Check], optional: dict[str, _Check], what: str) -> str | None:
    missing = sorted(set(required) - set(data))
    if missing:
        return f"{what} lacks field(s) {', '.join(missing)}"
    extra = sorted(set(data) - set(required) - set(optional))
    if extra:
        return f"{what} has unexpected field(s) {', '.join(extra)}"
    for name, check in (*required.items(), *optional.items()):
        if name in data and not check(data[name]):
            return f"{what} field {name} has a bad value {json.dumps(data[name])[:80]}"
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


_Slot = tuple[str, int]  # (host, device slot)


class _Life:
    """Each job's life as the journal tells it, to refuse rows that do not follow it; and the
    devices as the journal tells them, without the cluster: a device slot held by a whole-device
    job is given to no other job, a slot stays in one pool and keeps one device id, and a slot
    a ``health`` event made unusable gets no job until one makes it usable again."""

    __slots__ = ("device_at", "held", "holders", "jobs", "pool_of", "slot_of", "unusable", "whole")

    def __init__(self, whole: bool) -> None:
        self.whole = whole  # every row, not one job's: what other jobs' rows say can be checked
        # job -> [phase, attempts, devices, tier_seen, stop_at, whole]; phase: waiting/running/preempting/ended
        self.jobs: dict[str, list[Any]] = {}
        self.held: dict[str, list[_Slot]] = {}  # job -> the slots it holds now
        self.holders: dict[_Slot, dict[str, bool]] = {}  # slot -> {job: holds it whole}
        self.pool_of: dict[_Slot, tuple[str, int]] = {}  # slot -> (pool, the event that said so)
        self.device_at: dict[_Slot, tuple[str, int]] = {}  # slot -> (device id, the event that said so)
        self.slot_of: dict[str, tuple[_Slot, int]] = {}  # device id -> (slot, the event that said so)
        self.unusable: dict[_Slot, int] = {}  # slot -> the health event that made it unusable

    def _health(self, ev: Event) -> str | None:
        d = ev.data
        slot, dev = (str(d["host"]), int(d["slot"])), str(d["device"])
        named = self.device_at.get(slot)
        if named is not None and named[0] != dev:
            return f"slot {slot[1]} of host {slot[0]} is {dev} here but {named[0]} in event {named[1]}"
        where = self.slot_of.get(dev)
        if where is not None and where[0] != slot:
            return f"device {dev} is slot {slot[1]} of host {slot[0]} here but slot {where[0][1]} of host " \
                   f"{where[0][0]} in event {where[1]}"
        self.device_at.setdefault(slot, (dev, ev.seq))
        self.slot_of.setdefault(dev, (slot, ev.seq))
        if d["usable"]:
            self.unusable.pop(slot, None)
        else:
            self.unusable.setdefault(slot, ev.seq)
        return None

    def _take(self, job: str, whole: bool, ev: Event) -> str | None:
        pool = str(ev.data["pool"])
        slots = [(str(h), int(s)) for h, ss in ev.data["chunks"] for s in ss]
        for slot in slots:
            where = f"slot {slot[1]} of host {slot[0]}"
            if slot in self.unusable:
                return f"job {job} is {ev.kind} on {where}, unusable since event {self.unusable[slot]}"
            known = self.pool_of.get(slot)
            if known is not None and known[0] != pool:
                return f"job {job} is {ev.kind} in pool {pool} on {where}, in pool {known[0]} in event {known[1]}"
            others = self.holders.get(slot, {})
            for other, other_whole in others.items():
                if whole or other_whole:
                    return f"job {job} is {ev.kind} on {where}, which job {other} holds"
        for slot in slots:
            self.pool_of.setdefault(slot, (pool, ev.seq))
            self.holders.setdefault(slot, {})[job] = whole
        self.held[job] = slots
        return None

    def _release(self, job: str) -> None:
        for slot in self.held.pop(job, []):
            holders = self.holders.get(slot)
            if holders is not None:
                holders.pop(job, None)
                if not holders:
                    del self.holders[slot]

    def check(self, ev: Event) -> str | None:
        if ev.kind == "health":
            return self._health(ev)
        job = str(ev.job)
        rec = self.jobs.get(job)
        d = ev.data
        if ev.kind == "submitted":
            if rec is not None:
                return f"job {job} is submitted twice"
            self.jobs[job] = ["waiting", 0, int(d["spec"]["devices"]), 0, 0.0, d["spec"]["share"] is None]
            return None
        if rec is None:
            return f"job {job} was never submitted"
        phase, attempts = rec[0], rec[1]
        if ev.kind in ("preempted", "failed", "finished", "cancelled"):
            self._release(job)
        if ev.kind == "admitted":
            if phase != "waiting" or attempts:
                return f"job {job} is admitted while {phase} after {attempts} start(s)"
        elif ev.kind in ("placed", "resumed"):
            if phase != "waiting":
                return f"job {job} is {ev.kind} while {phase}"
            if (ev.kind == "placed") != (attempts == 0):
                return f"job {job} is {ev.kind} after {attempts} start(s)"
            n = sum(len(slots) for _host, slots in d["chunks"])
            if n != rec[2]:
                return f"job {job} is {ev.kind} on {n} devices; it asked for {rec[2]}"
            problem = self._take(job, bool(rec[5]), ev)
            if problem is not None:
                return problem
            rec[0], rec[1] = "running", attempts + 1
        elif ev.kind == "preempting":
            if phase != "running":
                return f"job {job} is signalled to stop while {phase}"
            if float(d["stop_at"]) < ev.t:
                return f"job {job} is to stop at {d['stop_at']}, before the event's time {ev.t}"
            if self.whole and d["for"] not in self.jobs:
                return f"job {job} is preempted for job {d['for']}, which was never submitted"
            rec[0], rec[4] = "preempting", float(d["stop_at"])
        elif ev.kind == "preempted":
            if phase != "preempting":
                return f"job {job} is preempted while {phase}, not in a grace period"
            if ev.t < rec[4] - 1e-9:
                return f"job {job} is preempted at {ev.t}, before its grace period ends at {rec[4]}"
            rec[0] = "waiting"
        elif ev.kind == "promoted":
            if phase != "waiting":
                return f"job {job} is promoted while {phase}"
            rec[3] = 0  # its tiers count afresh
        elif ev.kind == "demoted":
            if phase != "running":
                return f"job {job} is demoted while {phase}"
            if int(d["tier"]) <= rec[3]:
                return f"job {job} is demoted to tier {d['tier']}, not below its tier {rec[3]}"
            rec[3] = int(d["tier"])
        elif ev.kind == "failed":
            if phase == "ended":
                return f"job {job} fails after it ended"
            if d["requeue"]:
                if phase not in ("running", "preempting"):
                    return f"job {job} is requeued after a failure while {phase}"
                if "keep" not in d:
                    return "a requeued failure lacks field keep"
                rec[0] = "waiting"
            else:
                rec[0] = "ended"
        elif phase == "ended":  # finished, cancelled
            return f"job {job} is {ev.kind} after it ended"
        else:
            rec[0] = "ended"
        return None


class Journal:
    """An event journal in an SQLite file (``":memory:"`` for tests without durability).

    ``create=False``: the file must exist (recovery).  ``readonly=True``: open it read-only for
    reports; appending is refused; ``immutable`` (read-only only) says whether to open it with
    SQLite's ``immutable=1`` (None: when no ``-wal`` is beside it; see :meth:`changed`).  See the
    module docstring for the format checks and the lock.
    """

    def __init__(self, path: str | Path = ":memory:", *, create: bool = True, readonly: bool = False,
                 immutable: bool | None = None) -> None:
        self.path = str(path)
        self._want_immutable = immutable
        self.readonly = readonly
        #: True for a journal written before the schema version was stored (loaded as version 1)
        self.unversioned = False
        self._version = SCHEMA_VERSION
        self._next_seq = 1  # version 2: the writer numbers rows itself, without gaps
        self._depth = 0
        self._pending: list[tuple[float, str | None, str, str, str]] = []
        self._prices_pending: str | None = None  # a price table to store with the next rows
        self._lock_fd: int | None = None
        self._closed = False
        #: read-only and opened ``immutable=1`` (no ``-wal`` beside the file: nothing to miss)
        self.immutable = False
        self._stamp: tuple[int, int, int] | None = None
        memory = self.path == ":memory:"
        if memory and readonly:
            raise ConfigError("an in-memory journal cannot be opened read-only")
        if not memory:
            p = Path(self.path)
            if not p.exists() and (readonly or not create):
                raise ConfigError(f"no scheduler journal at {self.path}")
            if p.is_dir():
                raise ConfigError(f"{self.path} is a directory, not a scheduler journal")
        empty_file = not memory and (not Path(self.path).exists() or Path(self.path).stat().st_size == 0)
        if not memory and not readonly:
            self._lock()
        try:
            self._db = self._connect()
            try:
                self._check_format(create=(create and not readonly) or memory, empty_file=empty_file)
            except BaseException:
                self._db.close()
                raise
        except BaseException:
            self._unlock()  # and its lock file: no trace next to a file that was refused
            raise

    # -- opening -----------------------------------------------------------------------------------
    def _lock(self) -> None:
        lock_path = self.path + ".lock"
        while True:
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise JournalError(self.path, f"cannot open its lock file {lock_path}: {exc.strerror}") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                finally:
                    os.close(fd)
                raise JournalLockedError(self.path, lock_path, int(text) if text.isdigit() else None) from None
            # The holder removes the lock file before it lets go (see _unlock): a lock taken on
            # a file that is no longer at lock_path is the previous holder's; take it afresh.
            try:
                here = os.stat(lock_path)
            except FileNotFoundError:
                os.close(fd)
                continue
            mine = os.fstat(fd)
            if (here.st_dev, here.st_ino) != (mine.st_dev, mine.st_ino):
                os.close(fd)
                continue
            break
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        """Remove the lock file, then drop the lock: a writer that closes (or is refused) leaves
        no ``.lock`` behind.  Removing it while still holding it is what keeps this safe: a
        process that opened the old file meanwhile sees it gone once it gets the lock."""
        if self._lock_fd is not None:
            with suppress(OSError):
                os.unlink(self.path + ".lock")
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.readonly:
                # No -wal (nor -shm) beside the file: no writer has it open and every committed
                # row is in the file itself, so read it as immutable: SQLite then takes no lock
                # and creates no -wal/-shm.  With a -wal (a live writer, or one killed before
                # its checkpoint) the rows in the WAL must be read through SQLite's shared
                # memory: plain mode=ro.  A writer that starts after this check is caught by
                # :meth:`changed` (the reader then reads again).
                self.immutable = not any(os.path.lexists(self.path + x) for x in _BESIDE) \
                    if self._want_immutable is None else self._want_immutable
                self._stamp = self._file_stamp()
                query = "?mode=ro&immutable=1" if self.immutable else "?mode=ro"
                uri = "file:" + self.path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + query
                return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise JournalError(self.path, f"cannot be opened: {exc}") from exc

    def _check_format(self, *, create: bool, empty_file: bool) -> None:
        db = self._db
        try:
            app = int(db.execute("PRAGMA application_id").fetchone()[0])
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            objects = {(str(n), str(t)) for n, t in db.execute("SELECT name, type FROM sqlite_master")}
        except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: text that is not UTF-8
            raise JournalError(self.path, f"is not an SQLite database or is damaged ({exc})") from exc
        if app == 0 and not objects:
            if not create:
                what = "is an empty file" if empty_file else "is an empty SQLite database"
                raise JournalError(self.path, f"{what}, not a scheduler journal")
            self._init_writer()
            self._script(_SCHEMA)
            self._version = SCHEMA_VERSION
            return
        if app not in (0, APPLICATION_ID):
            raise JournalError(self.path, f"is another program's SQLite database (application id {app:#x}), "
                                          "not a scheduler journal")
        if app == APPLICATION_ID and version > SCHEMA_VERSION:
            raise JournalError(self.path, f"has schema version {version}, from a newer accel; this one reads "
                                          f"version {SCHEMA_VERSION}")
        if app == APPLICATION_ID and version not in _COLUMNS:
            raise JournalError(self.path, f"has an unknown schema version {version}; this accel reads versions "
                                          f"1 to {SCHEMA_VERSION}")
        self._version = version if app == APPLICATION_ID else 1
        if app == 0 and ("events", "table") not in objects:
            names = ", ".join(sorted(n for n, _t in objects))
            raise JournalError(self.path, f"is another SQLite database (tables and indexes: {names}), "
                                          "not a scheduler journal")
        problem = self._layout_problem(objects, self._version)
        if problem is not None:
            if app == 0:
                raise JournalError(self.path, f"has no schema version and {problem}: an older or foreign "
                                              "format this accel cannot read")
            raise JournalError(self.path, f"is damaged: {problem}")
        if app == 0:
            if version != 0:
                raise JournalError(self.path, f"has no application id but user version {version}: not a "
                                              "scheduler journal")
            self.unversioned = True  # the version-1 layout written before the version was stored
        if not self.readonly:
            self._init_writer()
            if self.unversioned:
                self._script(_STAMP_V1)
            elif self._version == 2:  # same rows, plus the price table: version 3
                self._script(_UPGRADE_V2)
                self._version = 3
            try:
                self._next_seq = int(db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]) + 1
            except (sqlite3.DatabaseError, ValueError) as exc:
                raise JournalError(self.path, f"cannot be read: {exc}") from exc

    def _layout_problem(self, objects: set[tuple[str, str]], version: int) -> str | None:
        tables = [("events", _COLUMNS[version])] + ([("prices", _PRICE_COLUMNS)] if version >= 3 else [])
        for table, want in tables:
            try:
                cols = [(str(r[1]), str(r[2]).upper()) for r in self._db.execute(f"PRAGMA table_info({table})")]
            except (sqlite3.DatabaseError, ValueError) as exc:
                return f"its {table} table cannot be read ({exc})"
            if cols and cols != want:
                return f"its {table} table has columns " + ", ".join(f"{n} {t}" for n, t in cols)
        missing = sorted(n for n, _t in _OBJECTS[version] - objects)
        if missing:
            return f"it lacks {', '.join(missing)}"
        extra = sorted(n for n, _t in objects - _OBJECTS[version])
        if extra:
            return f"it has other tables or indexes: {', '.join(extra)}"
        return None

    def _init_writer(self) -> None:
        if self.path == ":memory:":
            return
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process (the WAL survives it); FULL would
            # add power-loss durability at an fsync per transaction.
            self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            raise JournalError(self.path, f"cannot be opened for writing: {exc}") from exc

    def _script(self, script: str) -> None:
        try:
            self._db.executescript(script)
        except sqlite3.DatabaseError as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise JournalError(self.path, f"cannot be initialised: {exc}") from exc

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def changed(self) -> bool:
        """Read-only and immutable: a writer opened the file since (a ``-wal`` appeared or the
        file itself changed), so what was read may be torn or stale; read it again (a reopen
        sees the ``-wal`` and reads through SQLite's locking).  Always False otherwise."""
        if not self.immutable:
            return False
        return (any(os.path.lexists(self.path + x) for x in _BESIDE)
                or self._file_stamp() != self._stamp)

    @property
    def journal_mode(self) -> str:
        return str(self._db.execute("PRAGMA journal_mode").fetchone()[0])

    @property
    def schema_version(self) -> int:
        """The schema version of the file (an unversioned journal reads as version 1)."""
        return self._version

    # -- writing -----------------------------------------------------------------------------------
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
        if self.readonly:
            raise ConfigError(f"scheduler journal {self.path} is open read-only")
        self._pending.append((float(t), job, kind, reason, _encode(data or {})))
        if self._depth == 0:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        seq0 = self._next_seq
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if self._version >= 2:
                self._db.executemany(
                    "INSERT INTO events(seq, t, job, kind, reason, data, crc) VALUES (?,?,?,?,?,?,?)",
                    [(seq0 + i, *r, _row_crc(seq0 + i, *r)) for i, r in enumerate(rows)])
            else:
                self._db.executemany("INSERT INTO events(t, job, kind, reason, data) VALUES (?,?,?,?,?)", rows)
            if self._prices_pending is not None:
                data = self._prices_pending
                pseq = int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM prices").fetchone()[0]) + 1
                self._db.execute("INSERT INTO prices(seq, data, crc) VALUES (?,?,?)",
                                 (pseq, data, _price_crc(pseq, data)))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._next_seq = seq0 + len(rows)
        self._prices_pending = None

    def use_prices(self, prices: PriceTable) -> bool:
        """Bills are priced with ``prices`` from now on: stored (a row of its own, version 3) in
        the transaction of the next events, so a journal that is refused or never written gets
        nothing; nothing when it equals the latest stored table.  Returns whether it will be
        stored: a version-1 journal has no price table (its bills say the cost is unknown)."""
        if self.readonly:
            raise ConfigError(f"scheduler journal {self.path} is open read-only")
        if self._version < 3 or self.prices() == prices:
            self._prices_pending = None
            return False
        self._prices_pending = json.dumps(prices.as_dict(), sort_keys=True)
        return True

    def prices(self) -> PriceTable | None:
        """The latest price table stored (:meth:`record_prices`), None when there is none (a
        journal of version 1 or 2, or an engine that never stored one).  Every price row is
        checked: its checksum, the sequence without gaps, the table's fields."""
        if self._version < 3:
            return None
        try:
            rows = self._db.execute("SELECT seq, data, crc FROM prices ORDER BY seq").fetchall()
        except (sqlite3.DatabaseError, ValueError) as exc:
            raise JournalError(self.path, f"its price table cannot be read: {exc}") from exc
        table: PriceTable | None = None
        for expect, (seq, data, crc) in enumerate(rows, 1):
            where = f"price table {seq!r}"
            try:
                intact = _int(crc) and isinstance(data, str) and crc == _price_crc(seq, data)
            except TypeError:
                intact = False
            if not intact:
                raise JournalError(self.path, f"{where}: its checksum does not match: the row is damaged")
            if seq != expect:
                raise JournalError(self.path, f"price table {expect} is missing (the next is {seq}): the journal "
                                              "is damaged")
            try:
                table = PriceTable.from_dict(json.loads(data, parse_constant=_no_constant))
            except (ValueError, SchedulerError) as exc:  # JSONDecodeError, NaN, a bad field
                raise JournalError(self.path, f"{where}: {exc}") from exc
        return table

    # -- reading -----------------------------------------------------------------------------------
    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[Event]:
        cur: sqlite3.Cursor | None = None
        try:
            cur = self._db.execute(sql, args)
            rows: Iterable[Any] = cur
            for row in rows:
                yield self._decode(row)
        except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: text that is not UTF-8
            raise JournalError(self.path, f"cannot be read: {exc}") from exc
        finally:
            # a statement left open (a read stopped at a bad row) would keep the connection
            # from closing for real: its -wal and -shm would stay beside the file
            if cur is not None:
                cur.close()

    def _select(self, where: str = "") -> str:
        crc = "crc" if self._version >= 2 else "NULL"
        return f"SELECT seq, t, job, kind, reason, data, {crc} FROM events {where} ORDER BY seq"

    def _decode(self, row: Any) -> Event:
        seq, t, job, kind, reason, data, crc = row
        if self._version >= 2:
            try:
                intact = _int(crc) and crc == _row_crc(seq, t, job, kind, reason, data)
            except TypeError:  # a column of the wrong type: damaged too
                intact = False
            if not intact:
                raise JournalError(self.path, "its checksum does not match: the row is damaged",
                                   seq=seq if _int(seq) else None)
        if not _int(seq):
            raise JournalError(self.path, f"a row has a bad sequence number {seq!r}")
        if not _num(t):
            raise JournalError(self.path, f"time {t!r} is not a finite number", seq=seq)
        if not isinstance(kind, str) or kind not in KINDS:
            raise JournalError(self.path, f"unknown event kind {kind!r}", seq=seq)
        if kind == "health" and job is not None:
            raise JournalError(self.path, f"a health event names a job ({job!r})", seq=seq, kind=kind)
        if kind != "health" and (not isinstance(job, str) or not job):
            raise JournalError(self.path, f"job {job!r} is not a job id", seq=seq, kind=kind)
        if not isinstance(reason, str):
            raise JournalError(self.path, f"reason {reason!r} is not text", seq=seq, kind=kind)
        if not isinstance(data, str):
            raise JournalError(self.path, f"payload {data!r} is not text", seq=seq, kind=kind)
        try:
            payload = json.loads(data, parse_constant=_no_constant)
        except ValueError as exc:  # JSONDecodeError and NaN/Infinity
            raise JournalError(self.path, f"payload is not valid JSON ({exc})", seq=seq, kind=kind) from exc
        if not isinstance(payload, dict):
            raise JournalError(self.path, "payload is not a JSON object", seq=seq, kind=kind)
        required, optional = _PAYLOADS[kind]
        problem = _fields(payload, required, optional, "payload")
        if problem is None and kind == "submitted":
            problem = _fields(payload["spec"], _SPEC, _SPEC_OPTIONAL, "spec")
            if problem is None and payload["spec"]["id"] != job:
                problem = f"spec id {payload['spec']['id']!r} is not the event's job {job!r}"
        if problem is not None:
            raise JournalError(self.path, problem, seq=seq, kind=kind)
        return Event(seq, float(t), job, kind, reason, payload)

    def _checked(self, events: Iterable[Event], *, whole: bool = False) -> Iterator[Event]:
        """Time never goes back, each job's events follow its life, and (``whole``: every row,
        version 2) sequence numbers have no gap (a row lost to damage)."""
        try:
            yield from self._check_each(events, whole)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()  # the row generator's statement, at once (see _rows)

    def _check_each(self, events: Iterable[Event], whole: bool) -> Iterator[Event]:
        last = -math.inf
        life = _Life(whole)
        expect = 1
        for ev in events:
            if whole and self._version >= 2:
                if ev.seq != expect:
                    raise JournalError(self.path, f"event {expect} is missing (the next is {ev.seq}): the journal "
                                                  "is damaged")
                expect += 1
            if ev.t < last:
                raise JournalError(self.path, f"time {ev.t} goes back before the previous event's {last}",
                                   seq=ev.seq, kind=ev.kind)
            last = ev.t
            problem = life.check(ev)
            if problem is not None:
                raise JournalError(self.path, problem, seq=ev.seq, kind=ev.kind)
            yield ev

    def events(self) -> Iterator[Event]:
        """Every event in order, each checked (:class:`JournalError` at the first bad one)."""
        return self._checked(self._rows(self._select()), whole=True)

    def history(self, job: str) -> list[Event]:
        """A job's whole history: one query (its rows checked as :meth:`events` does)."""
        return list(self._checked(self._rows(self._select("WHERE job = ?"), (job,))))

    def count(self) -> int:
        try:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        except (sqlite3.DatabaseError, ValueError) as exc:
            raise JournalError(self.path, f"cannot be read: {exc}") from exc

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._db.close()
            self._unlock()
