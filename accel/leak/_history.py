"""A leak detector's history in SQLite, so runs that each take one reading (``accel health`` from
cron, a Slurm HealthCheckProgram) see the trend across runs.

One file holds the buckets of every key.  Each save is one transaction (``BEGIN IMMEDIATE``:
two runs at once serialise rather than interleave), and replaces the whole history, so a crash
leaves the previous history, never half of a new one.  A file that is not such a database, or
one from a detector with other bucket widths, is a :class:`~accel.errors.ConfigError` naming it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Hashable
from pathlib import Path

from ..errors import ConfigError
from ._detector import LeakDetector

__all__ = ["LeakHistory"]

_SCHEMA_VERSION = 1


def _encode(key: Hashable) -> str:
    return json.dumps(list(key) if isinstance(key, tuple) else key)


def _decode(text: str) -> Hashable:
    value = json.loads(text)
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, (str, int)):
        return value
    raise ValueError(f"bad key {text!r}")


class LeakHistory:
    """Load a :class:`LeakDetector`'s buckets from ``path`` and save them back."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
            conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, last_t REAL NOT NULL,"
                         " held_slope REAL)")
            conn.execute("CREATE TABLE IF NOT EXISTS buckets (key TEXT NOT NULL, idx INTEGER NOT NULL,"
                         " floor INTEGER NOT NULL, last INTEGER NOT NULL, headroom INTEGER NOT NULL,"
                         " total INTEGER NOT NULL, PRIMARY KEY (key, idx))")
        except sqlite3.Error as exc:
            raise ConfigError(f"leak history {str(self.path)!r} cannot be used: {exc}") from exc
        return conn

    def load(self, detector: LeakDetector) -> int:
        """Restore every key into ``detector``; returns how many keys were restored."""
        if not self.path.exists():
            return 0
        conn = self._connect()
        try:
            meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
            if meta and (meta.get("version") != str(_SCHEMA_VERSION)
                         or float(meta.get("bucket_s", "nan")) != detector.bucket_s):
                raise ConfigError(
                    f"leak history {str(self.path)!r} was written with bucket_s={meta.get('bucket_s')} "
                    f"(version {meta.get('version')}); this detector uses bucket_s={detector.bucket_s}: "
                    "use another file or the same window settings")
            restored = 0
            for key_text, last_t, held in conn.execute("SELECT key, last_t, held_slope FROM keys").fetchall():
                rows = conn.execute("SELECT idx, floor, last, headroom, total FROM buckets WHERE key = ?"
                                    " ORDER BY idx", (key_text,)).fetchall()
                detector.import_state(_decode(key_text), last_t, [tuple(r) for r in rows], held)
                restored += 1
            return restored
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise ConfigError(f"leak history {str(self.path)!r} is not readable: {exc}") from exc
        finally:
            conn.close()

    def save(self, detector: LeakDetector) -> None:
        """Replace the stored history with ``detector``'s, in one transaction.

        Every key is assessed first, so a verdict raised by this reading is saved as held: the
        next run (another process) keeps it while the trend lasts (the detector's hysteresis)
        instead of dropping it whenever its own windows fall short of a fresh verdict.
        """
        keys = detector.keys()  # a list of the detector's keys (it is not a mapping)
        for key in keys:
            detector.assess(key)  # cached: a caller that assesses afterwards pays nothing more
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM buckets")
            conn.execute("DELETE FROM keys")
            conn.execute("DELETE FROM meta")
            conn.executemany("INSERT INTO meta VALUES (?, ?)",
                             [("version", str(_SCHEMA_VERSION)), ("bucket_s", repr(detector.bucket_s))])
            for key, last_t, buckets, held in detector.export_state():
                k = _encode(key)
                conn.execute("INSERT INTO keys VALUES (?, ?, ?)", (k, last_t, held))
                conn.executemany("INSERT INTO buckets VALUES (?, ?, ?, ?, ?, ?)",
                                 [(k, *b) for b in buckets])
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise ConfigError(f"leak history {str(self.path)!r} could not be written: {exc}") from exc
        finally:
            conn.close()
