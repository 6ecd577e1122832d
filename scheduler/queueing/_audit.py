"""One validation pass over a whole journal, with or without the cluster it was written for.

Read-only commands (``accel sched``) and recovery refuse the same journals where they can:
:meth:`Journal.events` checks every row (checksum, gaps, times, payloads, each job's life, and
the devices as the journal itself tells them: a whole device held by two jobs, a slot in two
pools or under two device ids, a placement on a slot a ``health`` event made unusable, a
preemption for a job never submitted).  :func:`audit` runs that over every row and, given the
cluster, checks each host, device slot, pool and device id the rows name against it, as
recovery does.  What it could not check is said in :attr:`JournalAudit.unchecked`.

:func:`read_journal` is the read-only way in: it opens the file read-only (``immutable=1``
when no writer has it open, so nothing is created beside it) and reads it again, through
SQLite's locking, when a writer opened it meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from accel.scheduler import ClusterState

from ._journal import Event, Journal, JournalError
from ._meter import PriceTable

__all__ = ["NEEDS_CLUSTER", "NEEDS_POLICY", "JournalAudit", "audit", "read_journal"]

#: what only the cluster can tell (checked when :func:`audit` is given it)
NEEDS_CLUSTER = "hosts, device slots, pools and device ids against the cluster"
#: what only the policy can tell (recovery checks it)
NEEDS_POLICY = "priority classes against the policy"

_ATTEMPTS = 3  # reads of a file a writer keeps opening; the last one goes through SQLite's locking


@dataclass(frozen=True, slots=True)
class JournalAudit:
    """Every event of a journal that passed the checks, its latest price table (None: none
    stored, so costs are unknown), and what could not be checked."""

    path: str
    schema_version: int
    events: tuple[Event, ...]
    prices: PriceTable | None
    unchecked: tuple[str, ...]

    def history(self, job: str) -> list[Event]:
        return [e for e in self.events if e.job == job]


class _Cluster:
    """The cluster's hosts as the journal names them: host -> [(device id, pool)] per slot."""

    def __init__(self, cluster: ClusterState) -> None:
        self.hosts = {h.name: [(d.id, d.model or "unknown") for d in h.devices] for h in cluster.specs}
        self.pools = sorted({p for devs in self.hosts.values() for _d, p in devs})

    def _slot(self, host: str, slot: int) -> tuple[str | None, str | None]:
        devs = self.hosts.get(host)
        if devs is None:
            return None, f"host {host!r} is not in this cluster"
        if slot >= len(devs):
            return None, f"host {host} has no device slot {slot} (it has {len(devs)})"
        return devs[slot][0], None

    def problem(self, ev: Event) -> str | None:
        d = ev.data
        if ev.kind == "submitted":
            pool = d["spec"]["pool"]
            if pool and pool not in self.pools:
                return f"pool {pool!r} is not in this cluster ({', '.join(self.pools)})"
        elif ev.kind in ("placed", "resumed"):
            if d["pool"] not in self.pools:
                return f"pool {d['pool']!r} is not in this cluster ({', '.join(self.pools)})"
            for host, slots in d["chunks"]:
                for s in slots:
                    dev, problem = self._slot(host, s)
                    if problem is not None:
                        return problem
                    if self.hosts[host][s][1] != d["pool"]:
                        return f"device {dev} is not in pool {d['pool']}"
        elif ev.kind == "preempting":
            for name in ([d["host"]] if "host" in d else []) + list(d.get("hosts", [])):
                if name not in self.hosts:
                    return f"host {name!r} is not in this cluster"
        elif ev.kind == "health":
            dev, problem = self._slot(d["host"], d["slot"])
            if problem is not None:
                return problem
            if dev != d["device"]:
                return f"slot {d['slot']} of host {d['host']} is {dev}, not {d['device']}"
        return None


def _checked(journal: Journal, cluster: _Cluster | None) -> Iterator[Event]:
    for ev in journal.events():
        if cluster is not None:
            problem = cluster.problem(ev)
            if problem is not None:
                raise JournalError(journal.path, problem, seq=ev.seq, kind=ev.kind)
        yield ev


def audit(journal: Journal, cluster: ClusterState | None = None) -> JournalAudit:
    """Check every row of ``journal`` (and, given ``cluster``, what each names in it); the first
    wrong one raises :class:`JournalError` naming it."""
    view = _Cluster(cluster) if cluster is not None else None
    events = tuple(_checked(journal, view))
    prices = journal.prices()
    unchecked = (NEEDS_POLICY,) if view is not None else (NEEDS_CLUSTER, NEEDS_POLICY)
    return JournalAudit(journal.path, journal.schema_version, events, prices, unchecked)


def read_journal(path: str | Path, cluster: ClusterState | None = None) -> JournalAudit:
    """Open ``path`` read-only, :func:`audit` it, and close it: nothing is created, locked or
    written beside it.  A read that a writer overlapped (:meth:`Journal.changed`) is done again."""
    for attempt in range(_ATTEMPTS):
        journal = Journal(path, readonly=True, immutable=None if attempt < _ATTEMPTS - 1 else False)
        try:
            try:
                result = audit(journal, cluster)
            except JournalError:
                if journal.changed():
                    continue  # a torn read of a file a writer changed under it: read it again
                raise
            if not journal.changed():
                return result
        finally:
            journal.close()
    raise AssertionError("unreachable: the last attempt reads through SQLite's locking")  # pragma: no cover
