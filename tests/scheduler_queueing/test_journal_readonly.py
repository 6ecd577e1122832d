"""Read-only journal commands are as strict as recovery and leave nothing behind (issue 32).

Each bad journal is built here with valid checksums, so only the validation pass can refuse it:
``accel sched history/jobs/bill`` and :meth:`QueueingScheduler.recover` refuse the same rows
with the same message, what needs the cluster is checked by :func:`audit` when it is given one
(and the commands say they could not), no ``-wal``, ``-shm`` or ``.lock`` file is left beside a
journal that was only read or refused, and a reader next to a live writer sees every committed
row.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from accel.cli import EXIT_ERROR, EXIT_OK
from accel.cli import main as accel_main
from accel.scheduler.queueing import Journal, JournalError, Policy, QueueingScheduler
from accel.scheduler.queueing._audit import NEEDS_CLUSTER, read_journal

from .conftest import cluster
from .test_journal_integrity import GOOD, Row, _data, _insert, _one_line, _recover, _with, _write

HERE = Path(__file__).parent


def _health(t: float, host: str, slot: int, usable: bool, device: str) -> Row:
    return (t, None, "health", "", json.dumps({"host": host, "slot": slot, "usable": usable, "degraded": False,
                                               "device": device}))


def _listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


# rows of GOOD: 0 a submitted, 1 b submitted, 2 c submitted, 4 a placed on a100-0, 6 b placed on
# a100-1, 7 a finished (3600 s), 8 b finished (7200 s), 10 c placed on both hosts
BAD: list[tuple[str, Callable[[list[Row]], list[Row]], str]] = [
    ("placement of an unknown job", _insert(5, (20.0, "ghost", "placed", "", GOOD[4][4])),
     "event 6 (placed): job ghost was never submitted"),
    ("preempted for an unknown job", _insert(5, (20.0, "a", "preempting", "", json.dumps(
        {"for": "zz", "stop_at": 500.0}))), "event 6 (preempting): job a is preempted for job zz, which was never "
                                            "submitted"),
    ("duplicate job id", _insert(2, GOOD[1]), "event 3 (submitted): job b is submitted twice"),
    ("time goes back", _with(8, t=100.0), "event 9 (finished): time 100.0 goes back"),
    ("a state that cannot follow", _insert(8, (3600.0, "a", "cancelled", "", "{}")),
     "event 9 (cancelled): job a is cancelled after it ended"),
    ("a whole device held twice",
     _insert(5, (10.0, "b", "placed", "", _data(6, chunks=[["a100-0", [0, 1, 2, 3, 4, 5, 6, 7]]]))),
     "event 6 (placed): job b is placed on slot 0 of host a100-0, which job a holds"),
    ("placed on a slot made unusable", _insert(9, _health(7200.0, "a100-0", 3, False, "a100-0/gpu3")),
     "event 12 (placed): job c is placed on slot 3 of host a100-0, unusable since event 10"),
    ("a slot in two pools", _with(10, data=_data(10, pool="H100")),
     "event 11 (placed): job c is placed in pool H100 on slot 0 of host a100-0, in pool A100 in event 5"),
    ("a slot under two device ids", lambda rows: [*rows[:8], _health(3600.0, "a100-0", 2, False, "a100-0/gpu2"),
                                                  _health(3600.0, "a100-0", 2, True, "a100-0/gpu9"), *rows[8:]],
     "event 10 (health): slot 2 of host a100-0 is a100-0/gpu9 here but a100-0/gpu2 in event 9"),
]


@pytest.mark.parametrize(("case", "mutate", "message"), BAD, ids=[c[0] for c in BAD])
def test_read_only_commands_refuse_what_recovery_refuses_and_leave_nothing(
        tmp_path: Path, case: str, mutate: Callable[[list[Row]], list[Row]], message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "j.db", mutate(list(GOOD)))
    before, files = path.read_bytes(), _listing(path)
    assert files == ["j.db"]
    for cmd in (["history", "a"], ["history", "c"], ["jobs"], ["bill", "--json"]):
        assert accel_main(["sched", *cmd, "--journal", str(path)]) == EXIT_ERROR, cmd
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"accel: error: scheduler journal {path}, {message}"), (cmd, err)
        assert len(err.splitlines()) == 1
        assert _listing(path) == files and path.read_bytes() == before, cmd
    with pytest.raises(JournalError) as exc:
        _recover(path)
    assert message in _one_line(exc.value)
    assert _listing(path) == files and path.read_bytes() == before  # a refused recovery leaves no .lock


CLUSTER_ONLY: list[tuple[str, Callable[[list[Row]], list[Row]], str]] = [
    ("a device slot the cluster never had", _with(4, data=_data(4, chunks=[["a100-0", [0, 1, 2, 3, 4, 5, 6, 99]]])),
     "event 5 (placed): host a100-0 has no device slot 99 (it has 8)"),
    ("a host the cluster never had", _with(4, data=_data(4, chunks=[["nohost", [0, 1, 2, 3, 4, 5, 6, 7]]])),
     "event 5 (placed): host 'nohost' is not in this cluster"),
    ("a pool the cluster never had", _with(0, data=json.dumps({"spec": {**json.loads(GOOD[0][4])["spec"],
                                                                         "pool": "H100"}})),
     "event 1 (submitted): pool 'H100' is not in this cluster"),
    ("health of another device", _insert(8, _health(3600.0, "a100-1", 3, True, "a100-1/gpu4")),
     "event 9 (health): slot 3 of host a100-1 is a100-1/gpu3, not a100-1/gpu4"),
]


@pytest.mark.parametrize(("case", "mutate", "message"), CLUSTER_ONLY, ids=[c[0] for c in CLUSTER_ONLY])
def test_what_needs_the_cluster_is_checked_with_it_and_said_without_it(
        tmp_path: Path, case: str, mutate: Callable[[list[Row]], list[Row]], message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "j.db", mutate(list(GOOD)))
    assert accel_main(["sched", "jobs", "--journal", str(path)]) == EXIT_OK
    err = capsys.readouterr().err
    assert err.startswith(f"note: every row of {path} checked; not checked without the cluster (--cluster) and the "
                          "policy: "
                          f"{NEEDS_CLUSTER}")
    with pytest.raises(JournalError) as exc:
        read_journal(path, cluster(hosts=2))
    assert message in _one_line(exc.value)
    with pytest.raises(JournalError) as exc:
        _recover(path)
    assert message in _one_line(exc.value)
    assert _listing(path) == ["j.db"]


def test_a_good_journal_passes_the_audit_with_its_cluster(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.db", list(GOOD))
    got = read_journal(path, cluster(hosts=2))
    assert len(got.events) == len(GOOD) and got.unchecked == ("priority classes against the policy",)
    assert [e.kind for e in got.history("c")] == ["submitted", "admitted", "placed"]
    assert _listing(path) == ["j.db"]


def test_an_immutable_reader_notices_a_writer_that_opened_after_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.db", list(GOOD))
    ro = Journal(path, readonly=True)
    assert ro.immutable and not ro.changed()
    writer = Journal(path)  # a scheduler starts: its WAL appears
    assert ro.changed()
    writer.close()
    assert not ro.changed()  # it wrote nothing: what was read stands
    ro.close()
    ro = Journal(path, readonly=True)
    writer = Journal(path)
    writer.append(3 * 3600.0, "c", "finished", "completed")
    writer.close()  # its checkpoint changed the file under the reader
    assert ro.immutable and ro.changed()
    ro.close()
    assert [e.kind for e in read_journal(path).history("c")][-1] == "finished"
    assert _listing(path) == ["j.db"]


def _send(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_readers_beside_a_live_writer_see_every_committed_row_and_leave_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "live.db"
    proc = subprocess.Popen([sys.executable, str(HERE / "_live_writer.py"), str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        n = int(_send(proc, "batch 5"))
        # the rows are in the writer's WAL, not yet in the file: an immutable read would miss them
        ro = Journal(path, readonly=True)
        assert not ro.immutable and ro.count() == n
        ro.close()
        assert accel_main(["sched", "jobs", "--journal", str(path), "--json"]) == EXIT_OK
        assert len(json.loads(capsys.readouterr().out)) == 5
        seen = [len(read_journal(path).events)]
        for _ in range(6):  # the writer goes on between reads; each read is whole and checked
            n = int(_send(proc, "batch 3"))
            seen.append(len(read_journal(path).events))
            assert seen[-1] == n
        assert seen == sorted(seen)
        assert accel_main(["sched", "bill", "--journal", str(path), "--json"]) == EXIT_OK
        lines = json.loads(capsys.readouterr().out)["lines"]
        assert lines[0]["cost"] == pytest.approx(lines[0]["compute_share_hours"] * 2.0)
        assert _send(proc, "close") == "closed"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                f.close()
    assert _listing(path) == ["live.db"]  # the writer cleaned up; the readers created nothing
    got = read_journal(path)  # no WAL now: read as immutable
    assert len(got.events) == n and _listing(path) == ["live.db"]


def test_a_refused_recovery_leaves_no_lock_and_a_closed_writer_neither(tmp_path: Path) -> None:
    path = _write(tmp_path / "j.db", _with(4, data=_data(4, chunks=[["a100-0", [0, 1, 2, 3, 4, 5, 6, 99]]]))(
        list(GOOD)))
    with pytest.raises(JournalError, match="no device slot 99"):
        QueueingScheduler.recover(cluster(hosts=2), path, Policy())
    assert _listing(path) == ["j.db"]
    jr = Journal(path)
    assert Path(f"{path}.lock").read_text().strip().isdigit()
    jr.close()
    assert _listing(path) == ["j.db"]



@pytest.mark.parametrize("beside", ["-wal", "-shm", "-journal"])
def test_a_file_beside_the_journal_means_a_read_through_sqlites_locking(tmp_path: Path, beside: str) -> None:
    # a writer has it open, or one crashed and left it: immutable=1 would read past its rows
    path = _write(tmp_path / "j.db", list(GOOD))
    Path(f"{path}{beside}").write_bytes(b"")
    ro = Journal(path, readonly=True)
    assert not ro.immutable and ro.count() == len(GOOD)
    ro.close()


def test_accel_sched_checks_against_the_cluster_given_as_inventories(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # a journal written for the cluster of one simulated host, then a slot it never had
    from accel.cli import EXIT_USAGE
    from accel.plugin import BackendConfig
    from accel.scheduler import from_inventories
    from accel.scheduler.queueing import JobSpec
    from accel.sim import PLUGIN

    backend = PLUGIN.open(BackendConfig(options={"profile": "dgx-h100"}))
    try:
        inventory = backend.inventory()
    finally:
        backend.close()
    inv_file = tmp_path / "host.json"
    inv_file.write_text(inventory.model_dump_json())
    eng = QueueingScheduler(from_inventories([inventory]), Policy())
    eng.submit(JobSpec(id="train", devices=2, estimate_s=600.0), 0.0)
    eng.cycle(0.0)
    rows = [(e.t, e.job, e.kind, e.reason, json.dumps(e.data, sort_keys=True)) for e in eng.journal.events()]
    (host, slots), = json.loads(rows[-1][4])["chunks"]
    placed = json.loads(rows[-1][4])
    placed["chunks"] = [[host, [slots[0], 8]]]  # dgx-h100 has slots 0..7
    path = _write(tmp_path / "j.db", [*rows[:-1], (*rows[-1][:4], json.dumps(placed, sort_keys=True))])
    assert accel_main(["sched", "jobs", "--journal", str(path)]) == EXIT_OK
    assert "not checked without the cluster (--cluster) and the policy" in capsys.readouterr().err
    assert accel_main(["sched", "jobs", "--journal", str(path), "--cluster", str(inv_file)]) == EXIT_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"accel: error: scheduler journal {path}, event {len(rows)} (placed): host {host} has no "
                          "device slot 8 (it has 8)"), err
    good = _write(tmp_path / "good.db", rows)
    assert accel_main(["sched", "bill", "--journal", str(good), "--cluster", str(inv_file)]) == EXIT_OK
    assert "not checked without the policy: priority classes against the policy" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"host": 1}')
    assert accel_main(["sched", "jobs", "--journal", str(good), "--cluster", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--cluster" in err and "bad.json" in err and "not a host inventory" in err
    assert _listing(path) == ["bad.json", "good.db", "host.json", "j.db"]
