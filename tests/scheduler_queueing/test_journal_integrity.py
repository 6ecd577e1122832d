"""A journal that survives anything: every damaged, foreign, older, newer or wrong journal gives
one :class:`JournalError` (one line naming the file and what is wrong), read-only commands
change nothing, and a second writer is refused while the first holds the journal."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accel.cli import EXIT_ERROR, EXIT_OK
from accel.cli import main as accel_main
from accel.errors import ConfigError
from accel.scheduler.queueing import (
    SCHEMA_VERSION,
    Journal,
    JournalError,
    JournalLockedError,
    Policy,
    QueueingScheduler,
)
from accel.scheduler.queueing._journal import _row_crc

from .conftest import cluster
from .test_recovery import _run

Row = tuple[Any, Any, Any, Any, Any]  # t, job, kind, reason, data (JSON text)

# the journal format before the schema version was stored (kept here to build such a file)
_UNVERSIONED = """
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


def _good_rows() -> list[Row]:
    eng = QueueingScheduler(cluster(hosts=2), Policy())
    _run(eng)
    return [(e.t, e.job, e.kind, e.reason, json.dumps(e.data, sort_keys=True)) for e in eng.journal.events()]


GOOD = _good_rows()


def _write(path: Path, rows: list[Row], *, crc: Callable[[int, Row], int] | None = None,
           skip: int | None = None) -> Path:
    """A journal of ``rows`` as given (each with its valid checksum unless ``crc`` says otherwise;
    without the row numbered ``skip``)."""
    Journal(path).close()  # a new, stamped, empty journal
    db = sqlite3.connect(path)
    db.executemany("INSERT INTO events(seq, t, job, kind, reason, data, crc) VALUES (?,?,?,?,?,?,?)",
                   [(i, *r, crc(i, r) if crc else _row_crc(i, *r)) for i, r in enumerate(rows, 1) if i != skip])
    db.commit()
    db.close()
    return path


def _recover(path: Path) -> QueueingScheduler:
    eng = QueueingScheduler.recover(cluster(hosts=2), path, Policy())
    eng.journal.close()
    return eng


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text.startswith("scheduler journal "), text
    return text


def _data(i: int, **change: Any) -> str:
    d = json.loads(GOOD[i][4])
    for k, v in change.items():
        if v is _DROP:
            del d[k]
        else:
            d[k] = v
    return json.dumps(d)


_DROP = object()


def _with(i: int, **fields: Any) -> Callable[[list[Row]], list[Row]]:
    """Replace fields of row ``i`` (t, job, kind, reason, data)."""
    names = ("t", "job", "kind", "reason", "data")

    def mutate(rows: list[Row]) -> list[Row]:
        r = list(rows[i])
        for k, v in fields.items():
            r[names.index(k)] = v
        rows[i] = (r[0], r[1], r[2], r[3], r[4])
        return rows
    return mutate


def _swap(i: int, j: int) -> Callable[[list[Row]], list[Row]]:
    def mutate(rows: list[Row]) -> list[Row]:
        rows[i], rows[j] = rows[j], rows[i]
        return rows
    return mutate


def _insert(i: int, row: Row) -> Callable[[list[Row]], list[Row]]:
    def mutate(rows: list[Row]) -> list[Row]:
        return [*rows[:i], row, *rows[i:]]
    return mutate


# row 0: a submitted, 2: c submitted, 4: a placed on a100-0, 7: a finished, 10: c placed
ROW_CASES: list[tuple[str, Callable[[list[Row]], list[Row]], str]] = [
    ("payload not JSON", _with(4, data='{"pool": "A100", "chunks": [['), "event 5 (placed): payload is not valid JSON"),
    ("payload a JSON list", _with(7, data="[]"), "event 8 (finished): payload is not a JSON object"),
    ("payload with NaN", _with(4, data=_data(4, resume_from=float("nan"))), "payload is not valid JSON (NaN is not"),
    ("time not a number", _with(7, t="soon"), "event 8: time 'soon' is not a finite number"),
    ("time infinite", _with(7, t=float("inf")), "event 8: time inf is not a finite number"),
    ("time goes back", _with(7, t=5.0), "event 8 (finished): time 5.0 goes back before the previous event's 10.0"),
    ("extra field", _with(4, data=_data(4, colour="red")), "event 5 (placed): payload has unexpected field(s) colour"),
    ("missing field", _with(4, data=_data(4, chunks=_DROP)), "event 5 (placed): payload lacks field(s) chunks"),
    ("field of a wrong type", _with(4, data=_data(4, pool=7)),
     "event 5 (placed): payload field pool has a bad value 7"),
    ("spec field missing", _with(0, data=json.dumps({"spec": {"id": "a"}})),
     "event 1 (submitted): spec lacks field(s) checkpoint_interval_s, cpu_milli"),
    ("spec of another job", _with(0, job="zz"), "event 1 (submitted): spec id 'a' is not the event's job 'zz'"),
    ("unknown kind", _with(7, kind="exploded"), "event 8: unknown event kind 'exploded'"),
    ("job missing", _with(7, job=None), "event 8 (finished): job None is not a job id"),
    ("unknown job", _with(7, job="ghost"), "event 8 (finished): job ghost was never submitted"),
    ("placed before submitted", _swap(0, 4), "event 1 (placed): job a was never submitted"),
    ("submitted twice", _insert(1, GOOD[0]), "event 2 (submitted): job a is submitted twice"),
    ("placed twice", _insert(5, GOOD[4]), "event 6 (placed): job a is placed while running"),
    ("finished twice", _insert(8, GOOD[7]), "event 9 (finished): job a is finished after it ended"),
    ("preempted while running", _insert(5, (20.0, "a", "preempted", "", '{"keep": 0.0, "mode": "checkpoint"}')),
     "event 6 (preempted): job a is preempted while running, not in a grace period"),
    ("preempted before its grace ends",
     lambda rows: [*rows[:5], (20.0, "a", "preempting", "", '{"for": "c", "stop_at": 500.0}'),
                   (30.0, "a", "preempted", "", '{"keep": 0.0, "mode": "checkpoint"}'), *rows[5:]],
     "event 7 (preempted): job a is preempted at 30.0, before its grace period ends at 500.0"),
    ("resumed as a first start", _with(4, kind="resumed"), "event 5 (resumed): job a is resumed after 0 start(s)"),
    ("placed on too few devices", _with(4, data=_data(4, chunks=[["a100-0", [0, 1]]])),
     "event 5 (placed): job a is placed on 2 devices; it asked for 8"),
    ("health event naming a job", _insert(5, (10.0, "a", "health", "", '{}')),
     "event 6 (health): a health event names a job ('a')"),
    ("unknown host", _with(4, data=_data(4, chunks=[["nohost", [0, 1, 2, 3, 4, 5, 6, 7]]])),
     "event 5 (placed): host 'nohost' is not in this cluster"),
    ("slot out of range", _with(4, data=_data(4, chunks=[["a100-0", [0, 1, 2, 3, 4, 5, 6, 99]]])),
     "event 5 (placed): host a100-0 has no device slot 99 (it has 8)"),
    ("slot taken twice", _with(6, data=_data(6, chunks=[["a100-0", [0, 1, 2, 3, 4, 5, 6, 7]]])),
     "event 7 (placed): job b is placed on slot 0 of host a100-0, which job a holds"),
    ("unknown pool", _with(4, data=_data(4, pool="H100")), "event 5 (placed): pool 'H100' is not in this cluster"),
    ("unknown priority class", _with(0, data=json.dumps({"spec": {**json.loads(GOOD[0][4])["spec"],
                                                                  "priority_class": "gold"}})),
     "event 1 (submitted): does not apply to this cluster and policy: unknown priority class 'gold'"),
    ("preempting for a gang on an unknown host", _insert(5, (20.0, "a", "preempting", "", json.dumps(
        {"for": "c", "stop_at": 500.0, "hosts": ["a100-1", "nohost"]}))),
     "event 6 (preempting): host 'nohost' is not in this cluster"),
    ("preempting for a gang on no host", _insert(5, (20.0, "a", "preempting", "", json.dumps(
        {"for": "c", "stop_at": 500.0, "hosts": []}))),
     "event 6 (preempting): payload field hosts has a bad value []"),
    ("health of an unknown host", _insert(8, (3600.0, None, "health", "", json.dumps(
        {"host": "nohost", "slot": 0, "usable": False, "degraded": False, "device": "x"}))),
     "event 9 (health): host 'nohost' is not in this cluster"),
    ("health of another device", _insert(8, (3600.0, None, "health", "", json.dumps(
        {"host": "a100-1", "slot": 3, "usable": False, "degraded": False, "device": "a100-1/gpu4"}))),
     "event 9 (health): slot 3 of host a100-1 is a100-1/gpu3, not a100-1/gpu4"),
]


def test_the_good_journal_recovers(tmp_path: Path) -> None:
    eng = _recover(_write(tmp_path / "j.db", list(GOOD)))
    assert eng.jobs["c"].allocs and eng.jobs["a"].ended_at == 3600.0


def test_a_row_whose_checksum_does_not_match_is_damaged(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.db", list(GOOD), crc=lambda i, r: _row_crc(i, *r) ^ (i == 6))
    with pytest.raises(JournalError) as err:
        _recover(path)
    assert _one_line(err.value).endswith("event 6: its checksum does not match: the row is damaged")


def test_a_lost_row_is_a_gap_in_the_sequence(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.db", list(GOOD), skip=8)  # what a damaged page could do
    with pytest.raises(JournalError) as err:
        _recover(path)
    assert _one_line(err.value).endswith(": event 8 is missing (the next is 9): the journal is damaged")


@pytest.mark.parametrize(("case", "mutate", "message"), ROW_CASES, ids=[c[0] for c in ROW_CASES])
def test_each_bad_row_is_one_journal_error(tmp_path: Path, case: str, mutate: Callable[[list[Row]], list[Row]],
                                           message: str) -> None:
    path = _write(tmp_path / "j.db", mutate(list(GOOD)))
    with pytest.raises(JournalError) as err:
        _recover(path)
    text = _one_line(err.value)
    assert message in text, text
    assert err.value.code == "scheduler.journal-invalid"
    Journal(path).close()  # the failed recovery let go of the journal


def _foreign(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (name TEXT)")
    db.execute("INSERT INTO users VALUES ('ada')")
    db.commit()
    db.close()
    return path


def _pragma(path: Path, name: str, value: int) -> Path:
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA {name} = {value}")
    db.commit()
    db.close()
    return path


def _empty_db(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE x (a)")
    db.execute("DROP TABLE x")
    db.commit()
    db.close()
    return path


def _older(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL, job TEXT, kind TEXT, data TEXT)")
    db.commit()
    db.close()
    return path


def _truncated(path: Path) -> Path:
    _write(path, list(GOOD))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 100])
    return path


FILE_CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("empty file", lambda p: (p.write_bytes(b""), p)[1], "is an empty file, not a scheduler journal"),
    ("empty SQLite database", _empty_db, "is an empty SQLite database, not a scheduler journal"),
    ("not SQLite", lambda p: (p.write_bytes(os.urandom(4096)), p)[1],
     "is not an SQLite database or is damaged (file is not a database)"),
    ("text file", lambda p: (p.write_text("hello\n" * 200), p)[1], "is not an SQLite database or is damaged"),
    ("foreign database", _foreign, "is another SQLite database (tables and indexes: users), not a scheduler journal"),
    ("another program's database", lambda p: _pragma(_foreign(p), "application_id", 1234),
     "is another program's SQLite database (application id 0x4d2)"),
    ("newer schema", lambda p: _pragma(_write(p, list(GOOD)), "user_version", SCHEMA_VERSION + 1),
     f"has schema version {SCHEMA_VERSION + 1}, from a newer accel; this one reads version {SCHEMA_VERSION}"),
    ("unknown schema version", lambda p: _pragma(_write(p, list(GOOD)), "user_version", 0),
     "has an unknown schema version 0"),
    ("older schema", _older, "has no schema version and its events table has columns seq INTEGER, t REAL, job TEXT, "
                             "kind TEXT, data TEXT: an older or foreign format this accel cannot read"),
    ("truncated", _truncated, "database disk image is malformed"),
]


@pytest.mark.parametrize(("case", "make", "message"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_each_bad_file_is_one_journal_error_and_is_left_as_it_was(tmp_path: Path, case: str,
                                                                   make: Callable[[Path], Path], message: str) -> None:
    path = make(tmp_path / "j.db")
    before = path.read_bytes()
    lock_before = Path(f"{path}.lock").exists()  # the cases made through Journal() have one
    empty = case.startswith("empty")

    def read() -> None:
        ro = Journal(path, readonly=True)
        try:
            list(ro.events())
        finally:
            ro.close()

    def write() -> None:
        Journal(path, create=True).close()

    for open_it in (read, lambda: _recover(path), *(() if empty else (write,))):
        with pytest.raises(JournalError) as err:
            open_it()
        assert message in _one_line(err.value), str(err.value)
    assert path.read_bytes() == before  # nothing added, nothing switched to WAL
    assert not Path(f"{path}-wal").exists() and Path(f"{path}.lock").exists() == lock_before
    if empty:  # a new scheduler may start its journal in an empty file (nothing to lose there)
        write()
        ro = Journal(path, readonly=True)
        assert ro.count() == 0 and ro.schema_version == SCHEMA_VERSION
        ro.close()


def test_accel_sched_on_a_foreign_database_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _foreign(tmp_path / "theirs.db")
    before = path.read_bytes()
    assert accel_main(["sched", "jobs", "--journal", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("accel: error: scheduler journal ") and "[scheduler.journal-invalid]" in err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err
    assert path.read_bytes() == before and not Path(f"{path}-wal").exists() and not Path(f"{path}.lock").exists()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["users"]
    db.close()


@pytest.mark.parametrize("cmd", [["jobs"], ["history", "a"], ["bill"]])
def test_accel_sched_reports_a_bad_row_in_one_line(tmp_path: Path, cmd: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "j.db", _with(4, data='{"pool": "A100"')(list(GOOD)))
    assert accel_main(["sched", *cmd, "--journal", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"accel: error: scheduler journal {path}, event 5 (placed): payload is not valid JSON")
    assert len(err.splitlines()) == 1


def _unversioned(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.executescript(_UNVERSIONED)
    db.executemany("INSERT INTO events(t, job, kind, reason, data) VALUES (?,?,?,?,?)", GOOD)
    db.commit()
    db.close()
    return path


def test_a_journal_from_before_the_schema_version_loads_as_schema_1(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = _unversioned(tmp_path / "old.db")
    before = path.read_bytes()
    ro = Journal(path, readonly=True)
    assert ro.unversioned and ro.schema_version == 1 and len(list(ro.events())) == len(GOOD)
    ro.close()
    assert accel_main(["sched", "jobs", "--journal", str(path), "--json"]) == EXIT_OK
    assert {r["job"] for r in json.loads(capsys.readouterr().out)} == {"a", "b", "c"}
    assert path.read_bytes() == before  # read-only commands leave it unstamped
    eng = QueueingScheduler.recover(cluster(hosts=2), path, Policy())  # a writer stamps it as version 1
    eng.finish("c", 3 * 3600.0)  # and keeps appending version-1 rows
    eng.journal.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("PRAGMA application_id").fetchone()[0] != 0
    db.close()
    again = Journal(path, readonly=True)
    assert not again.unversioned and again.schema_version == 1
    assert [e.kind for e in again.history("c")][-1] == "finished"
    again.close()
    assert SCHEMA_VERSION == 3  # new journals: version 3, with checksums and the price table


def test_an_unversioned_journal_with_a_bad_row_is_still_refused(tmp_path: Path) -> None:
    path = _unversioned(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.execute("INSERT INTO events(t, job, kind, reason, data) VALUES (9000.0, 'a', 'finished', '', '{}')")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="event 12 \\(finished\\): job a is finished after it ended"):
        _recover(path)


def test_a_bit_flip_is_a_journal_error_or_changes_nothing(tmp_path: Path) -> None:
    """A flipped bit anywhere in the file: one JournalError (the row checksums, the sequence, or
    SQLite itself), or it was in space no row uses and every event reads back unchanged; never
    another exception, never another state."""
    src = _write(tmp_path / "good.db", list(GOOD))
    ro = Journal(src, readonly=True)
    events = [(e.seq, e.t, e.job, e.kind, e.reason, e.data) for e in ro.events()]
    ro.close()
    data = bytearray(src.read_bytes())
    rng = random.Random(19)
    refused = 0
    for k in range(400):
        pos = rng.randrange(len(data))
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rng.randrange(8)
        path = tmp_path / f"flip{k}.db"
        path.write_bytes(bytes(flipped))
        try:
            eng = QueueingScheduler.recover(cluster(hosts=2), path, Policy())
        except JournalError as exc:
            _one_line(exc)
            refused += 1
            continue
        try:
            assert [(e.seq, e.t, e.job, e.kind, e.reason, e.data) for e in eng.journal.events()] == events, pos
            eng.check_invariants()
        finally:
            eng.journal.close()
    assert refused > 0


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    first = Journal(path)
    with pytest.raises(JournalLockedError) as err:
        Journal(path)
    text = _one_line(err.value)
    assert f"is open for writing by process {os.getpid()}" in text and str(path) in text
    assert err.value.pid == os.getpid() and err.value.code == "scheduler.journal-locked"
    with pytest.raises(JournalLockedError):
        QueueingScheduler.recover(cluster(hosts=2), path, Policy())
    reader = Journal(path, readonly=True)  # readers never wait for the lock
    assert reader.count() == 0
    reader.close()
    first.close()
    Journal(path).close()  # free again


def test_a_writer_in_another_process_is_named_and_its_death_frees_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    code = ("import sys, time; from accel.scheduler.queueing import Journal; j = Journal(sys.argv[1]); "
            "print('open', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        with pytest.raises(JournalLockedError, match=f"by process {proc.pid} \\(lock {path}.lock\\)"):
            QueueingScheduler(cluster(hosts=2), Policy(), journal=path)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=path)  # SIGKILL left no stale lock
    _run(eng)
    eng.journal.close()


def test_read_only_journals_refuse_appends_and_missing_ones_are_config_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.db", list(GOOD))
    ro = Journal(path, readonly=True)
    with pytest.raises(ConfigError, match="open read-only"):
        ro.append(1.0, "x", "finished")
    ro.close()
    with pytest.raises(ConfigError, match="no scheduler journal"):
        Journal(tmp_path / "none.db", readonly=True)
    with pytest.raises(ConfigError, match="is a directory"):
        Journal(tmp_path, readonly=True)
