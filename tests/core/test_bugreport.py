"""The bug-report recorder and bundle writer (issue 13; the CLI subcommand is not wired yet)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel._bugreport import RecordingRunner, write_bundle
from accel.errors import ConfigError, ToolExitError
from accel.tools import Recording, ReplayRunner


def _inner() -> ReplayRunner:
    return ReplayRunner.from_recordings(
        [
            Recording(argv=("npu-smi", "info"), stdout="table\n"),
            Recording(argv=("npu-smi", "bad"), stderr="no\n", returncode=2),
        ]
    )


def test_round_trip_through_replay(tmp_path: Path) -> None:
    rec = RecordingRunner(_inner())
    assert rec.run(["npu-smi", "info"]).stdout == "table\n"
    with pytest.raises(ToolExitError):
        rec.run(["npu-smi", "bad"])
    bundle = write_bundle(tmp_path / "b", rec.recordings, version="0", backends=["ascend"])
    replay = ReplayRunner(bundle)
    assert replay.run(["npu-smi", "info"]).stdout == "table\n"
    bad = replay.run(["npu-smi", "bad"], check=False)
    assert (bad.returncode, bad.stderr) == (2, "no\n")
    manifest = json.loads((bundle / "MANIFEST").read_text())
    assert manifest["backends"] == ["ascend"]
    assert manifest["commands"] == [["npu-smi", "info"], ["npu-smi", "bad"]]


def test_cap_exceeded_leaves_nothing(tmp_path: Path) -> None:
    rec = RecordingRunner(_inner())
    rec.run(["npu-smi", "info"])
    with pytest.raises(ConfigError, match="cap"):
        write_bundle(tmp_path / "b", rec.recordings, version="0", backends=[], max_bytes=10)
    assert list(tmp_path.iterdir()) == []


def test_no_env_in_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_TEST_SECRET", "hunter2-s3cr3t")
    rec = RecordingRunner(_inner())
    rec.run(["npu-smi", "info"])
    bundle = write_bundle(tmp_path / "b", rec.recordings, version="0", backends=[])
    for path in bundle.iterdir():
        assert "hunter2-s3cr3t" not in path.read_text()
