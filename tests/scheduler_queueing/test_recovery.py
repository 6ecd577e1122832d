"""Health-aware recovery, the journal (WAL, append-only, one-query history), rebuild after a
crash, wait estimates per pool with reasons, and the ``accel sched`` commands."""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
from pathlib import Path

import pytest

from accel.errors import ConfigError
from accel.scheduler.queueing import (
    JobState,
    Journal,
    Policy,
    PriceTable,
    QueueingScheduler,
    WaitReason,
)
from accel.scheduler.queueing.cli import UnknownJobError, add_arguments, main

from .conftest import cluster, job

H = 3600.0


def test_unhealthy_device_fails_jobs_over_from_their_checkpoint() -> None:
    eng = QueueingScheduler(cluster(hosts=2), Policy())
    eng.submit(job("train", 8, 10 * H, checkpoint_interval_s=1000.0), 0)
    eng.submit(job("other", 4, 10 * H), 0)
    eng.cycle(0)
    train = eng.jobs["train"]
    bad = train.allocs[0].device_ids[3]
    hit = eng.update_health(2500.0, {bad: False})
    assert hit == ["train"]
    assert train.state == JobState.QUEUED and train.work_s == 2000.0 and train.lost_s == pytest.approx(500.0)
    # 7 healthy free devices on its host + 4 on the other: re-placed at once, as a 2-host gang
    res = eng.cycle(2500.0)
    assert "train" in res.started and bad not in {d for a in train.allocs for d in a.device_ids}
    assert sum(len(a.devices) for a in train.allocs) == 8 and len(train.allocs) == 2
    assert eng.history("train")[-1].reason.startswith("resumed")
    kinds = [e.kind for e in eng.history("train")]
    assert kinds == ["submitted", "admitted", "placed", "failed", "resumed"]
    assert "unhealthy" in eng.history("train")[3].reason
    # a same-host job waits for a whole healthy host instead
    eng.submit(job("pinned", 8, H, same_host=True), 2600.0)
    assert "pinned" not in eng.cycle(2600.0).started
    eng.check_invariants()
    # the device comes back
    eng.update_health(4000.0, {bad: True})
    assert eng.pool_capacity("A100") == 16


def test_health_from_inventory_snapshots() -> None:
    sim = pytest.importorskip("accel.sim")
    from accel.model import Health, Operational
    from accel.scheduler import from_inventories

    invs = sim.generate_cluster(2, "dgx-h100", seed=0)
    eng = QueueingScheduler(from_inventories(invs), Policy())
    (pool,) = eng.pools
    eng.submit(job("train", 8, 10 * H, pool=pool, checkpoint_interval_s=600.0), 0)
    eng.cycle(0)
    train = eng.jobs["train"]
    host = train.allocs[0].host_name
    lost_id = train.allocs[0].device_ids[0]
    # the next snapshot of that host reports the device lost
    new = []
    for inv in invs:
        if inv.host.hostname == host:
            devs = [d.model_copy(update={"health": Health(operational=Operational.LOST)}) if d.id == lost_id else d
                    for d in inv.devices]
            inv = inv.model_copy(update={"devices": devs})
        new.append(inv)
    assert eng.update_health(1000.0, new) == ["train"]
    assert train.lost_s == pytest.approx(400.0) and train.work_s == 600.0
    res = eng.cycle(1000.0)
    assert "train" in res.started  # the other DGX is free: re-placed there, whole
    assert {a.host_name for a in train.allocs} != {host} and eng.pool_capacity(pool) == 15
    # an unchanged snapshot changes nothing
    assert eng.update_health(2000.0, new) == []
    eng.check_invariants()


def _run(eng: QueueingScheduler) -> None:
    eng.submit(job("a", 8, H, tenant="t1"), 0)
    eng.submit(job("b", 8, 2 * H, tenant="t2"), 0)
    eng.submit(job("c", 16, H, tenant="t1"), 10)
    eng.cycle(10)
    eng.finish("a", H)
    eng.cycle(H)
    eng.finish("b", 2 * H)
    eng.cycle(2 * H)


def test_journal_is_wal_append_only_and_history_is_one_query(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=path)
    _run(eng)
    assert eng.journal.journal_mode == "wal"
    hist = eng.history("c")
    assert [e.kind for e in hist] == ["submitted", "admitted", "placed"]
    assert hist[0].data["spec"]["devices"] == 16
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM events")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE events SET kind = 'x'")
    db.close()


def test_state_is_rebuilt_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    prices = PriceTable(per_device_hour={"A100": 3.0})
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=path, prices=prices)
    _run(eng)
    eng.journal.close()
    back = QueueingScheduler.recover(cluster(hosts=2), path, Policy(), prices=prices)
    assert back.snapshot() == eng.snapshot()
    assert back.bill(3 * H).total() == pytest.approx(eng.bill(3 * H).total())
    back.check_invariants()
    # and it keeps going
    back.finish("c", 3 * H)
    back.cycle(3 * H)
    assert back.jobs["c"].state == JobState.FINISHED


def test_recover_refuses_a_missing_journal(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no scheduler journal"):
        QueueingScheduler.recover(cluster(), tmp_path / "missing.db")


def test_estimates_per_pool_with_price() -> None:
    c = cluster(pools={"A100": 1, "H100": 1})
    prices = PriceTable(per_device_hour={"A100": 2.0, "H100": 4.5})
    eng = QueueingScheduler(c, Policy(), prices=prices)
    eng.submit(job("busy", 8, 420.0, pool="A100"), 0)
    eng.cycle(0)
    eng.submit(job("mine", 8, H, pool="A100"), 0)
    eng.cycle(0)
    est = {e.pool: e for e in eng.estimate("mine", 0)}
    assert est["A100"].wait_s == pytest.approx(420.0) and est["A100"].reason == WaitReason.CAPACITY
    assert est["H100"].wait_s == 0 and est["H100"].reason == WaitReason.NONE
    assert est["A100"].describe() == "A100 pool: about 7 minutes (capacity), 16.00/h"
    assert est["H100"].describe() == "H100 pool: now, 36.00/h"
    # ordered best first: H100 now, at a higher price
    assert eng.estimate("mine", 0)[0].pool == "H100"


def test_estimate_reasons_priority_and_reservation() -> None:
    eng = QueueingScheduler(cluster(hosts=1), Policy())
    eng.submit(job("busy", 6, H), 0)
    eng.cycle(0)
    eng.submit(job("head", 8, H), 1)
    eng.submit(job("next", 8, H), 2)
    eng.submit(job("small-long", 2, 5 * H), 3)
    eng.cycle(3)
    (nxt,) = eng.estimate("next", 3)
    assert nxt.reason == WaitReason.PRIORITY and nxt.start_at == pytest.approx(2 * H)
    (sl,) = eng.estimate("small-long", 3)
    assert sl.reason == WaitReason.RESERVATION  # 2 devices are free but held for "head"
    assert sl.start_at == pytest.approx(3 * H)


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_cli_history_jobs_and_bill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.db"
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=path)
    _run(eng)
    eng.journal.close()
    out = io.StringIO()
    assert main(_args("history", "c", "--journal", str(path)), out) == 0
    text = out.getvalue().splitlines()
    assert text[0].split() == ["SEQ", "TIME", "EVENT", "REASON", "DETAILS"]
    assert [ln.split()[2] for ln in text[1:]] == ["submitted", "admitted", "placed"]
    out = io.StringIO()
    monkeypatch.setenv("ACCEL_SCHED_JOURNAL", str(path))
    assert main(_args("history", "a", "--json"), out) == 0
    rows = json.loads(out.getvalue())
    assert [r["kind"] for r in rows] == ["submitted", "admitted", "placed", "finished"]
    out = io.StringIO()
    assert main(_args("jobs", "--json"), out) == 0
    assert {r["job"]: r["last_event"] for r in json.loads(out.getvalue())} == {
        "a": "finished", "b": "finished", "c": "placed"}
    out = io.StringIO()
    assert main(_args("bill", "--json", "--at", str(3 * H)), out) == 0
    lines = {r["tenant"]: r for r in json.loads(out.getvalue())["lines"]}
    assert lines["t1"]["device_hours"] == pytest.approx(8 * (H - 10) / H + 16 * (3 * H - 2 * H) / H)  # a from 10 s
    assert lines["t2"]["device_hours"] == pytest.approx(8 * (2 * H - 10) / H)
    with pytest.raises(UnknownJobError, match="nope"):
        main(_args("history", "nope"), io.StringIO())
    with pytest.raises(ConfigError, match="no scheduler journal"):
        main(_args("history", "a", "--journal", str(tmp_path / "x.db")), io.StringIO())


def test_journal_in_memory_counts() -> None:
    j = Journal()
    with j.transaction():
        j.append(0.0, "x", "submitted", "r", {"a": 1})
        assert j.count() == 0  # not committed until the transaction ends
    assert j.count() == 1
