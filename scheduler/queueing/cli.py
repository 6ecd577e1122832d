"""``accel sched ...``: read the scheduler journal from the command line.

The lead's CLI parses the arguments and calls :func:`main` with an ``argparse.Namespace``:

* ``history JOB [--journal PATH] [--json]``: every event of one job (one SQL query).
* ``jobs [--journal PATH] [--json]``: each job's latest event (its current state and why).
* ``bill [--journal PATH] [--json] [--at SECONDS] [--prices FILE]``: metered usage and its cost
  per tenant and device model, from the journal (open run segments are billed up to ``--at``,
  default the last event), priced from ``--prices`` (default ``prices.json`` next to the
  journal, which ``accel serve`` keeps from its stored price table; none: every cost is 0).

``--journal`` defaults to ``$ACCEL_SCHED_JOURNAL`` or ``./accel-sched.db``.  The journal is
opened read-only (never created, converted, locked or written; a scheduler may be writing it
meanwhile) and every row read is checked.  Errors are raised as
:class:`accel.errors.ConfigError` (no journal), :class:`JournalError` (the file is damaged,
foreign, of another schema version, or a row is wrong: the message names the file, the row and
the problem; see :mod:`._journal`) or :class:`UnknownJobError`; the CLI prints the one-line
message.
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

from ._journal import Journal
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


def _open(path: str | None) -> Journal:
    target = path or default_journal()
    if not Path(target).exists():
        raise ConfigError(f"no scheduler journal at {target} (set --journal or ACCEL_SCHED_JOURNAL)")
    return Journal(target, readonly=True)


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


def history(journal: Journal, job: str, *, as_json: bool, out: TextIO) -> int:
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


def jobs(journal: Journal, *, as_json: bool, out: TextIO) -> int:
    # every row is read (and checked), not only each job's last: a report on a journal that
    # is wrong somewhere would be a wrong picture
    last: dict[str, tuple[int, float, str, str]] = {}
    for ev in journal.events():
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


def _prices_for(journal: Journal, path: str | None) -> PriceTable | None:
    if path is not None:
        return load_prices(path)
    beside = Path(journal.path).parent / PRICES_FILE
    return load_prices(beside) if beside.is_file() else None


def bill(journal: Journal, *, at: float | None, as_json: bool, out: TextIO, prices: PriceTable | None = None) -> int:
    meter = Meter(prices)
    last = 0.0
    for ev in journal.events():
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
    if as_json:
        json.dump({"until": b.until, "lines": rows}, out, indent=2)
        out.write("\n")
        return 0
    _table([[str(r["tenant"]), str(r["model"]), f"{r['device_hours']:.3f}", f"{r['memory_gib_hours']:.3f}",
             f"{r['compute_share_hours']:.3f}", f"{r['cost']:.2f} {r['currency']}" if prices is not None else "-"]
            for r in rows],
           ["TENANT", "MODEL", "DEVICE-H", "MEM GIB-H", "SHARE-H", "COST"], out)
    return 0


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run one ``accel sched`` subcommand; returns the exit status."""
    stream = out or sys.stdout
    journal = _open(getattr(args, "journal", None))
    try:
        cmd = args.sched_command
        as_json = bool(getattr(args, "json", False))
        if cmd == "history":
            return history(journal, str(args.job), as_json=as_json, out=stream)
        if cmd == "jobs":
            return jobs(journal, as_json=as_json, out=stream)
        if cmd == "bill":
            return bill(journal, at=getattr(args, "at", None), as_json=as_json, out=stream,
                        prices=_prices_for(journal, getattr(args, "prices", None)))
        raise ConfigError(f"unknown sched command {cmd!r} (history, jobs, bill)")
    finally:
        journal.close()
