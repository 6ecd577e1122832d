"""LeakHistory (SQLite) and `accel health --leak-history`: the trend survives across runs."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, EXIT_USAGE, main
from accel.errors import ConfigError
from accel.leak import LEAK_REASON, LeakDetector, LeakHistory
from accel.plugin import BackendConfig
from accel.sim import PLUGIN

GB = 10**9
TOTAL = 80 * GB


def _leaking(det: LeakDetector, key: object, end_t: float, end_used: int, total: int, rate: float = 5e6) -> None:
    n = int(det.window_s / 10) + 200
    for i in range(n):
        t = end_t - (n - 1 - i) * 10.0
        det.observe(key, t, max(0, int(end_used - (end_t - t) * rate)), total)  # type: ignore[arg-type]


def test_round_trip_keeps_buckets_and_the_held_verdict(tmp_path: Path) -> None:
    det = LeakDetector()
    _leaking(det, "d0", 1e6, 60 * GB, TOTAL)
    _leaking(det, ("d0", 7, "python"), 1e6, 30 * GB, TOTAL)
    before = det.assess("d0")
    assert before is not None
    path = tmp_path / "leak.db"
    LeakHistory(path).save(det)
    again = LeakDetector()
    assert LeakHistory(path).load(again) == 2
    assert set(again.keys()) == {"d0", ("d0", 7, "python")}
    after = again.assess("d0")
    assert after is not None and after.slope_bytes_per_s == pytest.approx(before.slope_bytes_per_s)
    assert again.export_state() == det.export_state()


def test_a_missing_file_is_an_empty_history(tmp_path: Path) -> None:
    assert LeakHistory(tmp_path / "none.db").load(LeakDetector()) == 0


def test_a_file_that_is_not_a_history_is_a_config_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ConfigError, match=r"bad\.db"):
        LeakHistory(bad).load(LeakDetector())
    with pytest.raises(ConfigError, match=r"bad\.db"):
        LeakHistory(bad).save(LeakDetector())


def test_other_window_settings_are_refused_not_mixed(tmp_path: Path) -> None:
    path = tmp_path / "leak.db"
    det = LeakDetector()
    _leaking(det, "d0", 1e6, 60 * GB, TOTAL)
    LeakHistory(path).save(det)
    with pytest.raises(ConfigError, match="bucket_s"):
        LeakHistory(path).load(LeakDetector(min_window_s=600))


def test_a_failed_save_leaves_the_previous_history(tmp_path: Path) -> None:
    path = tmp_path / "leak.db"
    det = LeakDetector()
    _leaking(det, "d0", 1e6, 60 * GB, TOTAL)
    LeakHistory(path).save(det)
    # Another writer holds the database: the save gives up with a typed error and changes nothing.
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        hist = LeakHistory(path)
        import accel.leak._history as h

        orig = h.sqlite3.connect
        h.sqlite3.connect = lambda *a, **k: orig(*a, **{**k, "timeout": 0.1})  # type: ignore[assignment]
        try:
            with pytest.raises(ConfigError, match=r"could not be written|cannot be used"):
                hist.save(LeakDetector())
        finally:
            h.sqlite3.connect = orig  # type: ignore[assignment]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    again = LeakDetector()
    assert LeakHistory(path).load(again) == 1


def test_accel_health_reports_a_leak_from_its_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The history of earlier runs says device 0's floor rose for hours up to what the simulator
    # (fixed load, so the reading is known) reads now; this run adds its reading and reports.
    backend = PLUGIN.open(BackendConfig(options={"profile": "dgx-h100", "load": "0.5"}))
    try:
        dev = backend.inventory().devices[0]
    finally:
        backend.close()
    used, total = dev.memory_used_bytes, dev.memory_total_bytes
    assert used is not None and total is not None
    det = LeakDetector()
    _leaking(det, dev.id, time.time() - 5, used, total, rate=2e6)
    path = tmp_path / "leak.db"
    LeakHistory(path).save(det)
    argv = ["health", "--sim", "dgx-h100", "-o", "load=0.5", "--leak-history", str(path), "--json"]
    assert main(argv) == EXIT_OK  # a warning: the device still works
    out = json.loads(capsys.readouterr().out)
    conds = {k: [c["reason"] for c in v["conditions"]] for k, v in out["devices"].items()}
    assert LEAK_REASON in conds[dev.id]
    assert all(LEAK_REASON not in v for k, v in conds.items() if k != dev.id)
    msg = next(c["message"] for c in out["devices"][dev.id]["conditions"] if c["reason"] == LEAK_REASON)
    assert "seconds_to_full=" in msg
    # And the file now holds this run's reading too: every device and every process, one key each.
    assert LeakHistory(path).load(LeakDetector()) == 16
    assert main(["health", "--sim", "dgx-h100", "-o", "load=0.5", "--leak-history", str(path)]) == EXIT_OK
    assert f"warning:{LEAK_REASON}" in capsys.readouterr().out


def test_accel_health_with_an_unusable_history_file_exits_2(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 500)
    assert main(["health", "--sim", "dgx-h100", "--leak-history", str(bad)]) == EXIT_USAGE
    assert "bad.db" in capsys.readouterr().err
