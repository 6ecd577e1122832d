"""``accel sched ...``: read the scheduler journal from the command line.

The lead's CLI parses the arguments and calls :func:`main` with an ``argparse.Namespace``:

Each also takes ``--cluster FILE`` (repeatable: one ``accel ls --json`` inventory per host), to
check what the journal names against that cluster too (as recovery does).

* ``history JOB [--journal PATH] [--json]``: every event of one job (every row of the journal is checked first).
* ``jobs [--journal PATH] [--json]``: each job's latest event (its current state and why).
* ``bill [--journal PATH] [--json] [--at SECONDS] [--prices FILE]``: metered usage and its cost
  per tenant and device model, from the journal (open run segments are billed up to ``--at``,
  default the last event), priced from ``--prices``, else the table the engine stored in the
  journal, else ``prices.json`` next to it; none of them: the cost is unknown, never 0).

``--journal`` defaults to ``$ACCEL_SCHED_JOURNAL`` or ``./accel-sched.db``.  The journal is
opened read-only (never created, converted, locked or written, and no ``-wal``, ``-shm`` or
``.lock`` is left beside it; a scheduler may be writing it meanwhile) and every row of it is
checked as recovery checks it, whichever command runs (:func:`._audit.read_journal`): a report
made from a journal that is wrong somewhere would be a wrong picture, so a bad row anywhere
is an error (exit 1, one line naming the file, the row and the problem), never a report that
leaves the row out.  What needs the cluster or the policy (hosts, device slots, pools, device
ids, priority classes) cannot be checked from the journal alone: with ``--cluster`` the cluster
part is checked too, and each command says in one ``note:`` line on stderr what it could not
check.  Errors are raised as :class:`accel.errors.ConfigError` (no journal, a bad cluster
file), :class:`JournalError` (the file is damaged, foreign, of another schema version, or a row
is wrong; see :mod:`._journal`) or :class:`UnknownJobError`; the CLI prints the one-line
message.

``bill`` prices usage with the price table the engine stored in the journal (schema version 3);
a journal without one (older versions) gives ``cost`` null and says so on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from accel.errors import ConfigError, SchedulerError
from accel.model import HostInventory
from accel.scheduler import ClusterState, from_inventories

from ._audit import NEEDS_CLUSTER, JournalAudit, read_journal
from ._meter import Meter, PriceTable, Segment

__all__ = ["PRICES_FILE", "UnknownJobError", "add_arguments", "default_journal", "load_prices", "main"]

DEFAULT_JOURNAL = "accel-sched.db"


class UnknownJobError(SchedulerError):
    """The journal has no event for that job."""

    code = "scheduler.unknown-job"


def default_journal() -> str:
    return os.environ.get("ACCEL_SCHED_JOURNAL") or DEFAULT_JOURNAL


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``sched`` subcommands to ``parser`` (sets ``sched_command``)."""
    sub = parser.add_subparsers(dest="sched_command", required=True)
    h = sub.add_parser("history", help="every event of one job")
    h.add_argument("job")
    j = sub.add_parser("jobs", help="each job's current state")
    b = sub.add_parser("bill", help="metered usage and cost per tenant and device model")
    b.add_argument("--at", type=float, default=None)
    b.add_argument("--prices", default=None)
    for p in (h, j, b):
        p.add_argument("--journal", default=None)
        p.add_argument("--json", action="store_true")
        p.add_argument("--cluster", action="append", default=None)


def _cluster(files: Sequence[str]) -> ClusterState:
    """The cluster from ``accel ls --json`` inventories, one file per host."""
    inventories = []
    for name in files:
        try:
            inventories.append(HostInventory.model_validate_json(Path(name).read_bytes()))
        except OSError as exc:
            raise ConfigError(f"--cluster {name}: cannot be read: {exc.strerror}") from exc
        except ValueError as exc:  # pydantic's ValidationError: not an `accel ls --json` inventory
            first = str(exc).splitlines()[0]
            raise ConfigError(f"--cluster {name}: not a host inventory (`accel ls --json`): {first}") from exc
    try:
        return from_inventories(inventories)
    except SchedulerError as exc:
        raise ConfigError(f"--cluster: {exc}") from exc


def _read(path: str | None, cluster_files: Sequence[str] | None) -> JournalAudit:
    target = path or default_journal()
    if not Path(target).exists():
        raise ConfigError(f"no scheduler journal at {target} (set --journal or ACCEL_SCHED_JOURNAL)")
    return read_journal(target, _cluster(cluster_files) if cluster_files else None)


def _note_unchecked(journal: JournalAudit, err: TextIO) -> None:
    # after the report, so that an error stays the one line on stderr
    what = "the policy" if NEEDS_CLUSTER not in journal.unchecked else "the cluster (--cluster) and the policy"
    err.write(f"note: every row of {journal.path} checked; not checked without {what}: "
              f"{'; '.join(journal.unchecked)} (recovery checks them)\n")


def _table(rows: Sequence[Sequence[str]], header: Sequence[str], out: TextIO) -> None:
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i]) for i in range(len(header))]
    out.write("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip() + "\n")
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _details(kind: str, data: dict[str, Any]) -> str:
    if kind in ("placed", "resumed"):
        chunks = ", ".join(f"{h}:{','.join(str(s) for s in slots)}" for h, slots in data.get("chunks", []))
        return f"pool={data.get('pool')} {chunks}" + (" borrowing" if data.get("borrowing") else "")
    if kind == "submitted":
        spec = data.get("spec", {})
        est = data.get("estimate")
        extra = f" est_start={est:.0f}" if isinstance(est, int | float) else ""
        return (f"tenant={spec.get('tenant')} devices={spec.get('devices')} pool={spec.get('pool') or 'any'} "
                f"estimate_s={spec.get('estimate_s')}{extra}")
    if kind in ("preempted", "failed"):
        return " ".join(f"{k}={v}" for k, v in sorted(data.items()))
    if kind == "promoted":
        return f"waited_s={data.get('waited_s', 0):.0f} base_device_s={data.get('base_device_s', 0):.0f}"
    if kind == "demoted":
        return f"tier={data.get('tier')} attained_device_s={data.get('attained_device_s', 0):.0f}"
    if kind == "preempting":
        return f"stop_at={data.get('stop_at')} for={data.get('for')}"
    return ""


def history(journal: JournalAudit, job: str, *, as_json: bool, out: TextIO) -> int:
    events = journal.history(job)
    if not events:
        raise UnknownJobError(f"job {job} is not in the journal {journal.path}")
    if as_json:
        json.dump([e.as_dict() for e in events], out, indent=2)
        out.write("\n")
        return 0
    rows = [[str(e.seq), f"{e.t:.1f}", e.kind, e.reason, _details(e.kind, e.data)] for e in events]
    _table(rows, ["SEQ", "TIME", "EVENT", "REASON", "DETAILS"], out)
    return 0


def jobs(journal: JournalAudit, *, as_json: bool, out: TextIO) -> int:
    last: dict[str, tuple[int, float, str, str]] = {}
    for ev in journal.events:
        if ev.job is not None:
            last[ev.job] = (ev.seq, ev.t, ev.kind, ev.reason)
    rows = [(j, t, k, r) for j, (_s, t, k, r) in sorted(last.items(), key=lambda x: x[1][0])]
    if as_json:
        json.dump([{"job": j, "t": t, "last_event": k, "reason": r} for j, t, k, r in rows], out, indent=2)
        out.write("\n")
        return 0
    _table([[j, f"{t:.1f}", k, r] for j, t, k, r in rows], ["JOB", "TIME", "LAST EVENT", "REASON"], out)
    return 0


PRICES_FILE = "prices.json"


def load_prices(path: str | Path) -> PriceTable:
    """A price file: ``{"currency": "USD", "per_device_hour": {MODEL: PRICE}, "per_gib_hour": {...}}``
    (what ``accel serve`` writes next to its journal); :class:`ConfigError` naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"price file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"price file {path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or set(data) - {"currency", "per_device_hour", "per_gib_hour"}:
        raise ConfigError(f"price file {path}: expected an object of currency, per_device_hour, per_gib_hour")
    tables: list[dict[str, float]] = []
    for key in ("per_device_hour", "per_gib_hour"):
        table = data.get(key, {})
        if not isinstance(table, dict) or not all(
                isinstance(m, str) and isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
                for m, v in table.items()):
            raise ConfigError(f"price file {path}: {key} must map device models to prices >= 0")
        tables.append({m: float(v) for m, v in table.items()})
    currency = data.get("currency", "USD")
    if not isinstance(currency, str) or not currency:
        raise ConfigError(f"price file {path}: currency must be a name such as USD")
    return PriceTable(tables[0], tables[1], currency=currency)


def _prices_for(journal: JournalAudit, path: str | None) -> PriceTable | None:
    """``--prices FILE`` first, then the table stored in the journal, then ``prices.json`` beside it."""
    if path is not None:
        return load_prices(path)
    if journal.prices is not None:
        return journal.prices
    beside = Path(journal.path).parent / PRICES_FILE
    return load_prices(beside) if beside.is_file() else None


def bill(journal: JournalAudit, *, at: float | None, as_json: bool, out: TextIO, err: TextIO,
         prices: PriceTable | None = None) -> int:
    meter = Meter(prices)
    last = 0.0
    for ev in journal.events:
        last = ev.t
        if ev.kind in ("placed", "resumed") and ev.job is not None:
            d = ev.data
            total = sum(len(s) for _, s in d["chunks"])
            meter.start(ev.job, [Segment(str(d.get("tenant", "?")), str(d["pool"]), len(s),
                                         int(d.get("mem_per_device", 0)) * len(s),
                                         float(d.get("share", total)) * len(s) / max(total, 1), ev.t)
                                 for _, s in d["chunks"]])
        elif ev.kind in ("preempted", "finished", "failed", "cancelled") and ev.job is not None:
            meter.stop(ev.job, ev.t)
    b = meter.bill(at if at is not None else last)
    rows = b.as_rows()
    if prices is None:  # no price table stored or given: the cost is unknown, not zero
        err.write(f"note: {journal.path} (schema version {journal.schema_version}) stores no price table: "
                  "cost unknown (--prices FILE gives one)\n")
        for r in rows:
            r["cost"] = r["currency"] = None
    if as_json:
        json.dump({"until": b.until, "lines": rows}, out, indent=2)
        out.write("\n")
        return 0
    _table([[str(r["tenant"]), str(r["model"]), f"{r['device_hours']:.3f}", f"{r['memory_gib_hours']:.3f}",
             f"{r['compute_share_hours']:.3f}",
             f"{r['cost']:.2f} {r['currency']}" if isinstance(r["cost"], float) else "unknown"] for r in rows],
           ["TENANT", "MODEL", "DEVICE-H", "MEM GIB-H", "SHARE-H", "COST"], out)
    return 0


def main(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one ``accel sched`` subcommand; returns the exit status."""
    stream = out or sys.stdout
    notes = err or sys.stderr
    cmd = args.sched_command
    if cmd not in ("history", "jobs", "bill"):
        raise ConfigError(f"unknown sched command {cmd!r} (history, jobs, bill)")
    journal = _read(getattr(args, "journal", None), getattr(args, "cluster", None))
    as_json = bool(getattr(args, "json", False))
    if cmd == "history":
        code = history(journal, str(args.job), as_json=as_json, out=stream)
    elif cmd == "jobs":
        code = jobs(journal, as_json=as_json, out=stream)
    else:
        code = bill(journal, at=getattr(args, "at", None), as_json=as_json, out=stream, err=notes,
                    prices=_prices_for(journal, getattr(args, "prices", None)))
    _note_unchecked(journal, notes)
    return code
