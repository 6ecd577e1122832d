"""The journal keeps the engine's price table (schema version 3): ``accel sched bill`` prices
usage as the engine billed it, recovery without prices bills with the stored ones, and older
journals still read (their cost is unknown, never 0)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from accel.cli import EXIT_ERROR, EXIT_OK
from accel.cli import main as accel_main
from accel.scheduler.queueing import Journal, JournalError, Policy, PriceTable, QueueingScheduler

from .conftest import GIB, cluster
from .test_journal_integrity import GOOD, _recover, _write
from .test_recovery import _run

H = 3600.0
PRICES = PriceTable(per_device_hour={"A100": 3.0}, per_gib_hour={"A100": 0.01}, currency="EUR")


def _priced(path: Path, prices: PriceTable = PRICES) -> QueueingScheduler:
    eng = QueueingScheduler(cluster(hosts=2), Policy(), journal=path, prices=prices)
    _run(eng)
    eng.journal.close()
    return eng


def _bill_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[list[dict[str, object]], str]:
    assert accel_main(["sched", "bill", "--journal", str(path), "--json", *extra]) == EXIT_OK
    got = capsys.readouterr()
    return json.loads(got.out)["lines"], got.err


def test_the_bill_from_the_journal_is_priced_as_the_engines(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "j.db"
    eng = _priced(path)
    lines, _err = _bill_json(path, capsys, "--at", str(3 * H))
    want = {(x.tenant, x.model): x for x in eng.bill(3 * H).lines}
    assert {(str(r["tenant"]), str(r["model"])) for r in lines} == set(want)
    for r in lines:
        line = want[(str(r["tenant"]), str(r["model"]))]
        assert r["cost"] == pytest.approx(line.cost, abs=1e-6) and r["currency"] == "EUR"
        assert line.cost > 0  # the case that printed 0.0: the engine billed money
        mem_gib_h = 80 * GIB / GIB * float(str(r["device_hours"]))
        assert r["cost"] == pytest.approx(3.0 * float(str(r["compute_share_hours"])) + 0.01 * mem_gib_h)
    assert accel_main(["sched", "bill", "--journal", str(path), "--at", str(3 * H)]) == EXIT_OK
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["TENANT", "MODEL", "DEVICE-H", "MEM", "GIB-H", "SHARE-H", "COST"]
    assert all(ln.endswith(" EUR") for ln in table[1:])


def test_recovery_without_prices_bills_with_the_stored_ones_and_new_prices_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    eng = _priced(path)
    back = QueueingScheduler.recover(cluster(hosts=2), path, Policy())
    assert back.bill(3 * H).total() == pytest.approx(eng.bill(3 * H).total()) and back.bill(3 * H).total() > 0
    back.journal.close()
    cheaper = PriceTable(per_device_hour={"A100": 1.0})
    back = QueueingScheduler.recover(cluster(hosts=2), path, Policy(), prices=cheaper)
    ro = Journal(path, readonly=True)
    assert ro.prices() == PRICES  # kept with the next rows it prices, not before
    ro.close()
    back.finish("c", 3 * H)
    back.journal.close()
    ro = Journal(path, readonly=True)
    assert ro.prices() == cheaper
    ro.close()
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT seq FROM prices ORDER BY seq")] == [1, 2]
    db.close()


def _v2(path: Path) -> Path:
    """A journal as schema version 2 wrote it: checksummed events, no price table."""
    _write(path, list(GOOD))
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE prices; PRAGMA user_version = 2;")
    db.commit()
    db.close()
    return path


def test_a_version_2_journal_reads_with_an_unknown_cost_and_a_writer_adds_the_price_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _v2(tmp_path / "old.db")
    before = path.read_bytes()
    lines, err = _bill_json(path, capsys)
    assert lines and all(r["cost"] is None and r["currency"] is None for r in lines)
    assert f"note: {path} (schema version 2) stores no price table: cost unknown" in err
    assert path.read_bytes() == before
    eng = QueueingScheduler.recover(cluster(hosts=2), path, Policy(), prices=PRICES)
    assert eng.journal.schema_version == 3
    eng.finish("c", 3 * H)
    eng.journal.close()
    lines, _err = _bill_json(path, capsys)
    assert all(isinstance(r["cost"], float) and r["cost"] > 0 for r in lines)


def test_a_damaged_or_wrong_price_row_is_a_journal_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "j.db"
    _priced(path)
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE prices SET data = '{}'")
    db.execute("INSERT INTO prices(seq, data, crc) VALUES (2, '{}', 7)")
    db.commit()
    db.close()
    assert accel_main(["sched", "bill", "--journal", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"accel: error: scheduler journal {path}: price table 2: its checksum does not match")
    with pytest.raises(JournalError, match="price table 2"):
        _recover(path)


@pytest.mark.parametrize(("data", "problem"), [
    ({"currency": "USD"}, "a price table has the fields"),
    ({"currency": "USD", "default_device_hour": -1.0, "per_device_hour": {}, "per_gib_hour": {}},
     "default_device_hour must be a finite number >= 0"),
    ({"currency": "", "default_device_hour": 0.0, "per_device_hour": {}, "per_gib_hour": {}}, "currency"),
    ({"currency": "USD", "default_device_hour": 0.0, "per_device_hour": {"A100": True}, "per_gib_hour": {}},
     r"per_device_hour\[A100\]"),
])
def test_price_tables_from_data_name_the_bad_field(data: dict[str, object], problem: str) -> None:
    with pytest.raises(Exception, match=problem) as err:
        PriceTable.from_dict(data)
    assert type(err.value).__name__ == "InvalidRequestError"
    assert PriceTable.from_dict(PRICES.as_dict()) == PRICES
