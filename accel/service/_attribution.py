"""Which job holds which device, published for ``accel exporter`` (``accel serve --attribution-dir``).

The service writes one small JSON file per host, ``DIR/<host>.json``, holding only what the
host's exporter needs to label its series: for each device a running job holds, the device's id,
the job's id and its tenant.  Nothing else of the service leaves it (no job names, commands,
environment, logs, tokens), and each host's file names only that host's jobs, so the operator of
a node's exporter learns which tenant's job uses which of the node's devices, which the node's
own process list shows anyway.  The file is rewritten (atomically, mode 0644) when the set of
running jobs on the host changes and at least every :data:`HEARTBEAT_S` seconds, so a reader can
tell a live answer from one the service stopped updating (``written_at``, wall seconds).

    {"format": "accel-serve-attribution/1", "host": "node1", "written_at": 1765100000.0,
     "devices": [{"device": "nvidia:GPU-...", "accel_job": "j000001-3fa2c1", "tenant": "team-a"}]}
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

__all__ = ["FORMAT", "HEARTBEAT_S", "AttributionWriter"]

FORMAT = "accel-serve-attribution/1"
#: The longest a host's file goes without being rewritten while the service runs.
HEARTBEAT_S = 30.0
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


class AttributionWriter:
    """Writes ``DIR/<host>.json`` for ``hosts`` (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        hosts: Iterable[str],
        *,
        wall: Callable[[], float] = time.time,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = directory
        self.hosts = sorted(h for h in hosts if _HOST.match(h))
        self._wall = wall
        #: Told once when writing fails (and once when it works again); the service goes on.
        self._warn = warn
        #: Why the last write failed (``None``: it did not).
        self.error: str | None = None
        self._last: dict[str, tuple[tuple[str, str, str], ...]] = {}
        self._written_at: dict[str, float] = {}
        directory.mkdir(parents=True, exist_ok=True)

    def update(self, held: Mapping[str, Iterable[tuple[str, str, str]]]) -> None:
        """``held``: host -> (device id, job id, tenant) of the running jobs; a host not in it holds none."""
        now = float(self._wall())
        for host in self.hosts:
            rows = tuple(sorted(set(held.get(host, ()))))
            if self._last.get(host) == rows and now - self._written_at.get(host, -1e18) < HEARTBEAT_S:
                continue
            doc = {
                "format": FORMAT,
                "host": host,
                "written_at": now,
                "devices": [{"device": d, "accel_job": j, "tenant": t} for d, j, t in rows],
            }
            try:
                _write(self.directory / f"{host}.json", doc)
            except OSError as exc:  # the exporters see the file grow old and drop the attribution
                if self._warn is not None and self.error is None:
                    self._warn(f"cannot write {self.directory / f'{host}.json'}: {exc}")
                self.error = str(exc)
                continue
            if self.error is not None and self._warn is not None:
                self._warn("the attribution files are written again")
            self.error = None
            self._last[host] = rows
            self._written_at[host] = now


def _write(path: Path, doc: dict[str, object]) -> None:
    """A reader sees the old file or the whole new one (a temporary file renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
