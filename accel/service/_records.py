"""Reading the service: job lists, a job's whole record, bills, pools, logs and samples."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accel.scheduler import InvalidRequestError
from accel.scheduler.queueing import Event

from ._auth import Principal
from ._base import ServiceBase
from ._executor import Handle
from ._jobreq import request_from_dict
from ._reads import JobView
from ._store import JobSummaryRow


class Records(ServiceBase):
    """The reading half of the service."""

    # -- reading (no lock: the readers' connections and the published views, see ``_reads``) -------
    def jobs(self, who: Principal, *, limit: int = 100, state: str | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` jobs ``who`` sees (in ``state``), newest first: read page by page
        from the store's ``seq`` index, so the cost follows ``limit``, not the number of jobs."""
        tenant = None if who.admin else who.tenant
        page = limit if state is None else max(limit, 500)
        out: list[dict[str, Any]] = []
        before: int | None = None
        store = self.reads.store
        while len(out) < limit:
            rows = store.summaries(tenant, limit=page, before_seq=before)
            picked: list[tuple[JobSummaryRow, JobView | None]] = []
            for s in rows:
                view = self.views.get(s.id)
                if state is not None and _state(view) != state:
                    continue
                picked.append((s, view))
                if len(out) + len(picked) >= limit:
                    break
            # the pool of a job without one (any pool) that ran: its last launch's model, in one query
            ran_on = store.last_models([s.id for s, view in picked if not s.pool and view is not None
                                        and not view.pool and view.attempts] or None)
            out += [self._summary(s, view, ran_on) for s, view in picked]
            if len(rows) < page:
                break
            before = rows[-1].seq
        return out

    def _summary(self, s: JobSummaryRow, view: JobView | None, ran_on: Mapping[str, str]) -> dict[str, Any]:
        pool = (view.pool if view else None) or s.pool or None
        if pool is None and view is not None and view.attempts:
            pool = ran_on.get(s.id) or _pool_of(view, self.reads.journal.history(s.id))
        return {"id": s.id, "name": s.name, "tenant": s.tenant, "state": _state(view),
                "pool": pool, "devices": s.devices, "submitted_at": s.submitted_t,
                "submitted_wall": s.submitted_wall, "reason": view.reason if view else ""}

    def record(self, who: Principal, job_id: str) -> dict[str, Any]:
        """Everything about one job (what its page shows and ``accel job show --json`` prints)."""
        stored = self._visible_read(who, job_id)
        view = self.views.get(stored.id)  # published after the journal's commit: never ahead of it
        history = self.reads.journal.history(stored.id)
        launches = self.reads.store.launches(stored.id)
        audit = self.reads.store.audit_rows(stored.id)
        now = self.now()
        req = request_from_dict(stored.request)
        timeline = [{"t": ev.t, "wall": self.clock.wall(ev.t), "actor": "scheduler", "kind": ev.kind,
                     "reason": ev.reason} for ev in history]
        timeline += [{"t": a.t, "wall": a.wall, "actor": a.actor, "kind": a.kind, "reason": a.reason}
                     for a in audit]
        timeline.sort(key=lambda r: (r["t"], 0 if r["actor"] == "scheduler" else 1))
        last = launches[-1] if launches else None
        exit_info = None
        if last is not None and last.ended_t is not None:
            exit_info = {"exit_code": last.exit_code, "signal": last.signal, "reason": last.reason,
                         "detail": last.detail, "at": last.ended_t}
        quote = stored.quote if isinstance(stored.quote, dict) else {}
        actual = None
        if view is not None and view.first_started_at is not None:
            actual = view.first_started_at - view.submitted_at
        topo = req.topology["level"] if req.topology else None
        return {
            "id": stored.id, "name": stored.name, "tenant": stored.tenant, "submitted_by": stored.actor,
            "state": _state(view), "reason": view.reason if view else "",
            "submitted_at": stored.submitted_t, "submitted_wall": stored.submitted_wall,
            "pool": _pool_of(view, history), "attempts": view.attempts if view is not None else 0,
            "command": list(req.command), "env_names": [k for k, _v in req.env],
            "request": {k: v for k, v in stored.request.items() if k != "env"},
            "quote": {k: v for k, v in quote.items() if k != "all"}, "quotes": quote.get("all", []),
            "wait": {"quoted_p50_s": quote.get("wait_p50_s"), "quoted_p90_s": quote.get("wait_p90_s"),
                     "actual_s": actual},
            "allocation": {"devices": last.devices if last is not None else [], "topology_level": topo},
            "exit": exit_info,
            "launches": [{"attempt": la.attempt, "executor": la.executor, "ref": la.ref, "started_at": la.started_t,
                          "ended_at": la.ended_t, "exit_code": la.exit_code, "signal": la.signal, "reason": la.reason,
                          "detail": la.detail} for la in launches],
            "timeline": timeline,
            "bill": self._job_bill(history, now),
            "serving": self.serving.replica_info(stored.id) if self.serving is not None else None,
            "now": now,
        }

    def _job_bill(self, history: list[Event], now: float) -> dict[str, Any]:
        """Bill lines of one job, priced from the stored table as the engine's meter prices them."""
        prices = self.engine.meter.prices
        lines: list[dict[str, Any]] = []
        open_seg: tuple[float, str, int, float] | None = None

        def close(t: float) -> None:
            assert open_seg is not None
            start, pool, n, share = open_seg
            hours = max(0.0, t - start) / 3600.0
            share_h = share * hours
            lines.append({"pool": pool, "from": start, "until": t, "devices": n, "device_hours": round(n * hours, 6),
                          "price_per_device_hour": prices.device_hour(pool),
                          "cost": round(share_h * prices.device_hour(pool), 6)})

        for ev in history:
            if ev.kind in ("placed", "resumed"):
                n = sum(len(slots) for _h, slots in ev.data["chunks"])
                open_seg = (ev.t, str(ev.data["pool"]), n, float(ev.data["share"]))
            elif open_seg is not None and ev.kind in ("preempted", "failed", "finished", "cancelled"):
                close(ev.t)
                open_seg = None
        if open_seg is not None:
            close(now)
        return {"lines": lines, "total": round(sum(x["cost"] for x in lines), 6), "currency": prices.currency}

    def bill(self, who: Principal) -> dict[str, Any]:
        with self.lock:
            b = self.engine.bill(self.now())
        rows = [r for r in b.as_rows() if who.sees(str(r["tenant"]))]
        return {"lines": rows, "total": round(sum(float(str(r["cost"])) for r in rows), 6), "currency": b.currency,
                "until": b.until}

    def pools(self) -> list[dict[str, Any]]:
        with self.lock:
            queued = self.engine.queue()
            out = []
            for p in self.engine.pools:
                hosts = sorted({inv.host.hostname for inv in self.inventories.values()
                                for d in inv.devices if (d.model or "unknown") == p})
                out.append({"pool": p, "vendor": self._pool_vendor.get(p, ""), "hosts": hosts,
                            "devices": self.engine.pool_capacity(p), "free": self.engine.pool_free(p),
                            "queued": sum(1 for j in queued if j.spec.pool in ("", p)),
                            "running": sum(1 for j in self.engine.running() if j.pool == p),
                            "price_per_device_hour": self.engine.meter.prices.device_hour(p),
                            "currency": self.engine.meter.prices.currency})
            return out

    def log_file(self, who: Principal, job_id: str, stream: str) -> Path | None:
        """The job's ``stream`` log (``stdout`` / ``stderr`` only), or ``None`` before it ran."""
        if stream not in ("stdout", "stderr"):
            raise InvalidRequestError("stream must be stdout or stderr", field="stream")
        stored = self._visible_read(who, job_id)
        launches = self.reads.store.launches(stored.id)
        if not launches:
            return None
        last = launches[-1]
        ex = {e.name: e for e in self.executors}.get(last.executor)
        if ex is None:
            return None
        path = ex.log_path(Handle(last.executor, stored.id, last.ref or ""), "stdout" if stream == "stdout"
                           else "stderr")
        return path

    def samples(self, who: Principal, job_id: str) -> list[tuple[float, str, int | None, float | None, float | None]]:
        stored = self._visible_read(who, job_id)
        return self.reads.store.samples(stored.id)

    def run_windows(self, who: Principal, job_id: str, last: int = 4) -> list[tuple[tuple[tuple[str, str], ...], float,
                                                                                  float]]:
        """The job's last ``last`` launches as ``((host, device id)...), start wall, end wall`` (a
        running launch ends now): where and when to read its devices from a metrics source."""
        stored = self._visible_read(who, job_id)
        launches = self.reads.store.launches(stored.id)[-last:]
        now = self.now()
        return [(tuple((str(d["host"]), str(d["device_id"])) for d in la.devices), self.clock.wall(la.started_t),
                 self.clock.wall(la.ended_t if la.ended_t is not None else now)) for la in launches if la.devices]




def _state(view: JobView | None) -> str:
    """A job's state for readers: a stored job not published yet is queued (its request is
    committed; the engine queues it in the same locked call, or on restart)."""
    return view.state if view is not None else "queued"


def _pool_of(job: JobView | None, history: list[Event]) -> str | None:
    """The pool a job runs (or last ran) in: the engine's, else its last placement's."""
    if job is not None and job.pool:
        return job.pool
    placed = [ev for ev in history if ev.kind in ("placed", "resumed")]
    return str(placed[-1].data["pool"]) if placed else None


