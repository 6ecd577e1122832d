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


def _plugin_dir(name: str) -> Path:
    import importlib

    mod = importlib.import_module(f"accel.plugins.{name}")
    assert mod.__file__ is not None
    return Path(mod.__file__).parent


def _comparable(doc: dict[str, object]) -> str:
    """An inventory's JSON without the times a read stamps (collected_at, checked_at)."""
    text = json.dumps(doc, sort_keys=True)
    import re

    return re.sub(r'"(collected_at|checked_at|first_seen|last_seen)": "[^"]*"', r'"\1": "-"', text)


@pytest.mark.parametrize(("backend", "scenario"), [("mthreads", "s5000-8"), ("ascend", "910b-8"), ("metax", "c550-8")])
def test_accel_bugreport_round_trip_replays_to_the_same_inventory(
    backend: str, scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from accel.cli import main

    src = _plugin_dir(backend) / "scenarios" / scenario
    if not src.is_dir():
        pytest.skip(f"no shipped scenario {backend}/{scenario}")
    monkeypatch.setenv("ACCEL_TEST_SECRET", "hunter2-do-not-leak")
    # Record: the user's machine, here a replay of a shipped scenario.
    out = tmp_path / "bundle"
    code = main(["bugreport", "--backend", backend, "--replay", str(src), "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "wrote" in err and (out / "MANIFEST").is_file() and (out / "INVENTORY").is_file()
    manifest = json.loads((out / "MANIFEST").read_text())
    assert manifest["backends"] == [backend] and manifest["commands"]
    assert not any("hunter2" in f.read_text() for f in out.iterdir())
    # Replay elsewhere: the bundle alone gives the same inventory as the original run.
    main(["ls", "--backend", backend, "--replay", str(src), "--json"])
    original, _ = capsys.readouterr()
    code = main(["ls", "--backend", backend, "--replay", str(out), "--json"])
    replayed, err = capsys.readouterr()
    assert code == 0, err
    assert _comparable(json.loads(replayed)) == _comparable(json.loads(original))
    assert _comparable(json.loads((out / "INVENTORY").read_text())) == _comparable(json.loads(original))


def test_accel_bugreport_refuses_an_existing_dir_and_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accel.cli import EXIT_USAGE, main

    src = _plugin_dir("mthreads") / "scenarios" / "s5000-8"
    out = tmp_path / "b"
    out.mkdir()
    assert main(["bugreport", "--backend", "mthreads", "--replay", str(src), "--out", str(out)]) == EXIT_USAGE
    assert "already exists" in capsys.readouterr().err
    small = tmp_path / "small"
    code = main(["bugreport", "--backend", "mthreads", "--replay", str(src), "--out", str(small), "--max-bytes", "100"])
    assert code == EXIT_USAGE and "over the cap" in capsys.readouterr().err
    assert not small.exists() and [p.name for p in tmp_path.iterdir()] == ["b"]
    assert main(["bugreport", "--sim", "dgx-h100", "--out", str(tmp_path / "s")]) == EXIT_USAGE
