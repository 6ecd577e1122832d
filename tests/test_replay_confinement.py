"""A replay recording reads nothing outside its own directory (issue 14, item 6).

A bug-report bundle is data from someone else.  ``stdout_file`` / ``stderr_file`` (and the
recording files themselves) must resolve inside the recording's directory: absolute paths,
``..`` and symlinks out are a ConfigError that names the recording and the key, raised before
the file is opened, and no message quotes the file's content.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accel.errors import ConfigError
from accel.tools import MAX_REPLAY_FILE_BYTES, ReplayRunner

REPO = Path(__file__).resolve().parents[1]
SECRET = "root:$6$not-a-real-hash:19000:0:99999:7:::"

# Every path this process opens while `_OPENED` is a list (audit event "open": builtin open,
# os.open, Path.read_bytes...).  An audit hook cannot be removed; it does nothing when off.
_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def opened() -> Iterator[list[str]]:
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the replay directory, standing in for /etc/shadow."""
    outside = tmp_path / "outside"
    outside.mkdir()
    path = outside / "shadow"
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture
def replay(tmp_path: Path) -> Path:
    directory = tmp_path / "bundle"
    directory.mkdir()
    return directory


def _record(directory: Path, name: str = "run.json", **fields: object) -> Path:
    path = directory / name
    path.write_text(json.dumps({"argv": ["npu-smi", "info"], **fields}))
    return path


def _refused(directory: Path, opened: list[str], secret: Path) -> str:
    opened.clear()  # what the test itself wrote does not count
    with pytest.raises(ConfigError) as info:
        ReplayRunner(directory)
    message = str(info.value)
    assert SECRET not in message and "root:" not in message
    assert str(secret) not in opened and str(secret.resolve()) not in opened, "the file was opened"
    assert len(message.splitlines()) == 1
    return message


@pytest.mark.parametrize("key", ["stdout_file", "stderr_file"])
def test_an_absolute_path_is_refused_without_opening_it(
    replay: Path, secret: Path, opened: list[str], key: str
) -> None:
    rec = _record(replay, **{key: str(secret)})
    message = _refused(replay, opened, secret)
    assert str(rec) in message and key in message and "absolute path" in message


def test_etc_shadow_is_not_read(replay: Path, opened: list[str]) -> None:
    rec = _record(replay, stdout_file="/etc/shadow")
    opened.clear()
    with pytest.raises(ConfigError, match="absolute path") as info:
        ReplayRunner(replay)
    assert str(rec) in str(info.value) and "/etc/shadow" not in opened


@pytest.mark.parametrize(
    "rel",
    [
        "../outside/shadow",  # out of the directory
        "../../outside/shadow",
        "sub/../../outside/shadow",
        "sub/../sample.txt",  # resolves inside, but `..` is refused as written
        "./../outside/shadow",
    ],
)
def test_dot_dot_is_refused(replay: Path, secret: Path, opened: list[str], rel: str) -> None:
    (replay / "sample.txt").write_text("inside\n")
    (replay / "sub").mkdir()
    rec = _record(replay, stdout_file=rel)
    message = _refused(replay, opened, secret)
    assert str(rec) in message and "stdout_file" in message and "'..'" in message


def test_a_symlink_out_of_the_directory_is_refused(replay: Path, secret: Path, opened: list[str]) -> None:
    (replay / "innocent.txt").symlink_to(secret)
    rec = _record(replay, stdout_file="innocent.txt")
    message = _refused(replay, opened, secret)
    assert str(rec) in message and "stdout_file" in message and "resolves outside" in message


def test_a_symlinked_sub_directory_out_is_refused(replay: Path, secret: Path, opened: list[str]) -> None:
    (replay / "samples").symlink_to(secret.parent, target_is_directory=True)
    _record(replay, stdout_file="samples/shadow")
    assert "resolves outside" in _refused(replay, opened, secret)


def test_a_recording_file_that_links_out_is_refused(tmp_path: Path, replay: Path, opened: list[str]) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"argv": ["npu-smi", "info"], "stdout": SECRET}))
    (replay / "run.json").symlink_to(elsewhere)
    opened.clear()
    with pytest.raises(ConfigError, match="resolves outside") as info:
        ReplayRunner(replay)
    assert "run.json" in str(info.value) and SECRET not in str(info.value)
    assert str(elsewhere) not in opened


def test_files_inside_the_directory_are_read(tmp_path: Path, replay: Path) -> None:
    (replay / "samples").mkdir()
    (replay / "samples" / "table.txt").write_text("NPU 0\n")
    (replay / "link.txt").symlink_to(replay / "samples" / "table.txt")  # a symlink that stays inside
    _record(replay, "a.json", stdout_file="samples/table.txt", stderr_file="./link.txt")
    # The directory itself may be reached through a symlink: the root is resolved too.
    alias = tmp_path / "alias"
    alias.symlink_to(replay, target_is_directory=True)
    for directory in (replay, alias):
        result = ReplayRunner(directory).run(["npu-smi", "info"])
        assert result.stdout == "NPU 0\n" and result.stderr == "NPU 0\n"


def test_from_mapping_is_confined_to_its_directory(
    replay: Path, secret: Path, opened: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (replay / "ok.txt").write_text("fine\n")
    opened.clear()
    runner = ReplayRunner.from_mapping({"npu-smi info": {"stdout_file": "ok.txt"}}, directory=replay)
    assert runner.run(["npu-smi", "info"]).stdout == "fine\n"
    for value in (str(secret), "../outside/shadow"):
        with pytest.raises(ConfigError, match="stdout_file") as info:
            ReplayRunner.from_mapping({"npu-smi info": {"stdout_file": value}}, directory=replay)
        assert "<mapping entry 'npu-smi info'>" in str(info.value) and SECRET not in str(info.value)
    # Without a directory the root is the current directory.
    monkeypatch.chdir(replay)
    assert ReplayRunner.from_mapping({"x": {"stdout_file": "ok.txt"}}).run(["x"]).stdout == "fine\n"
    with pytest.raises(ConfigError, match="absolute path"):
        ReplayRunner.from_mapping({"x": {"stdout_file": str(secret)}})
    assert str(secret) not in opened


def test_a_fifo_or_a_huge_file_is_refused_without_blocking(replay: Path) -> None:
    os.mkfifo(replay / "pipe.txt")  # no writer: reading it would block forever
    _record(replay, "a.json", stdout_file="pipe.txt")
    with pytest.raises(ConfigError, match=re.escape("cannot read stdout_file 'pipe.txt': it is not a regular file")):
        ReplayRunner(replay)
    (replay / "a.json").unlink()
    with (replay / "huge.txt").open("wb") as f:
        f.truncate(MAX_REPLAY_FILE_BYTES + 1)  # sparse: refused on its size, nothing read
    _record(replay, "b.json", stdout_file="huge.txt")
    with pytest.raises(ConfigError, match="larger than"):
        ReplayRunner(replay)


@pytest.mark.parametrize("rel", ["", "a\x00b"])
def test_empty_and_nul_paths_are_refused(replay: Path, rel: str) -> None:
    _record(replay, stdout_file=rel)
    with pytest.raises(ConfigError, match="stdout_file"):
        ReplayRunner(replay)


def test_accel_ls_replay_of_a_crafted_bundle_exits_2_in_one_line(replay: Path, secret: Path) -> None:
    rec = _record(replay, stdout_file=str(secret))
    proc = subprocess.run(
        [sys.executable, "-m", "accel", "ls", "--replay", str(replay), "--backend", "ascend"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel: error:"), proc.stderr
    assert str(rec) in lines[0] and "stdout_file" in lines[0] and "absolute path" in lines[0]
    assert SECRET not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr


def test_no_shipped_or_test_recording_names_a_file_outside_its_directory() -> None:
    """Every recording in the repository (tests/fixtures, the plugins' shipped scenarios) obeys the rule."""
    offenders = []
    count = 0
    for root in (REPO / "tests", REPO / "plugins"):
        for path in root.rglob("*.json"):
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if not isinstance(obj, dict) or "argv" not in obj:
                continue
            for key in ("stdout_file", "stderr_file"):
                rel = obj.get(key)
                if rel is None:
                    continue
                count += 1
                target = (path.parent / str(rel)).resolve()
                if os.path.isabs(str(rel)) or ".." in Path(str(rel)).parts or not target.is_file():
                    offenders.append(f"{path.relative_to(REPO)}: {key}={rel!r}")
    assert count >= 5 and not offenders, offenders
