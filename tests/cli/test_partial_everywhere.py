"""Every command that reads devices reports a partial read as ``ls`` does (issue 32).

The input is the one ``accel ls`` has exited 5 on since the start: a replay of the shipped
mthreads ``s5000-8`` scenario whose third row has a malformed PCI bus id (``zz``), so
device ``mthreads:index-2`` cannot be read.  ``watch`` and ``dmon`` used to drop it and exit 0
with nothing on stderr; ``dra`` and ``cdi`` named backend failures only.  Now each warns once
per problem (``accel: warning: mthreads: record: ...``), carries the problems in its own JSON
documents, and exits 5.  A backend that fails outright during ``watch`` (the simulator's
``hung_tool`` from its second read on) is a ``backend`` problem, not an empty ``[]`` and exit 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, EXIT_PARTIAL, main

RECORD = "accel: warning: mthreads: record: not a PCI bus id: '00000000:zz:00.0'"
MISSING = ("accel: warning: mthreads: device: no telemetry sample for this device in this refresh "
           "(device mthreads:index-2)")


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from accel.plugins import mthreads

    dst = tmp_path_factory.mktemp("partial") / "replay"
    shutil.copytree(Path(mthreads.__file__).parent / "scenarios" / "s5000-8", dst)
    table = dst / "mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt"
    text = table.read_text()
    assert text.count("00000000:4b:00.0") == 1
    table.write_text(text.replace("00000000:4b:00.0", "00000000:zz:00.0"))
    return dst


def _run(capsys: pytest.CaptureFixture[str], replay: Path, *argv: str) -> tuple[int, str, list[str]]:
    code = main([*argv, "--backend", "mthreads", "--replay", str(replay)])
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line.startswith("accel: warning: mthreads")]


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["ps"],
        ["dra"],
        ["dra", "--nfd"],
        ["dra", "--device-classes"],
        ["cdi"],
        ["ray", "resources"],
        ["slurm", "gres-conf"],
        ["slurm", "healthcheck", "--dry-run", "--node", "n1"],
    ],
)
def test_one_shot_commands_warn_and_exit_partial(
    capsys: pytest.CaptureFixture[str], replay: Path, argv: list[str]
) -> None:
    code, _, warnings = _run(capsys, replay, *argv)
    assert code == EXIT_PARTIAL
    assert len(warnings) == 1 and warnings[0].startswith(RECORD), warnings


@pytest.mark.parametrize("command", [["watch", "--interval", "0"], ["dmon", "-d", "0"]])
def test_sampling_commands_warn_once_and_exit_partial(
    capsys: pytest.CaptureFixture[str], replay: Path, command: list[str]
) -> None:
    code, out, warnings = _run(capsys, replay, *command, "--count", "3")
    assert code == EXIT_PARTIAL
    # The record that failed, and the device no refresh has a sample for: once each, not per refresh.
    assert len(warnings) == 2 and warnings[0].startswith(RECORD) and warnings[1] == MISSING, warnings
    assert "mthreads:pci-0000:18:00.0" in out or command[0] == "dmon"  # the other devices are still shown


@pytest.mark.parametrize("command", [["watch", "--interval", "0"], ["dmon", "-d", "0"]])
def test_sampling_json_carries_each_refreshs_problems(
    capsys: pytest.CaptureFixture[str], replay: Path, command: list[str]
) -> None:
    code, out, _ = _run(capsys, replay, *command, "--count", "2", "--json")
    refreshes = [json.loads(line) for line in out.splitlines()]
    assert code == EXIT_PARTIAL and len(refreshes) == 2
    for doc in refreshes:
        assert len(doc["samples"]) == 7 and doc["complete"] is False
        (problem,) = doc["problems"]
        assert problem["kind"] == "device" and problem["device_id"] == "mthreads:index-2"


def test_ps_and_ray_json_carry_the_problems(capsys: pytest.CaptureFixture[str], replay: Path) -> None:
    for argv, key in ((["ps", "--json"], "processes"), (["ray", "resources", "--json"], "num_gpus")):
        code, out, _ = _run(capsys, replay, *argv)
        doc = json.loads(out)
        assert code == EXIT_PARTIAL and key in doc and doc["complete"] is False
        (problem,) = doc["problems"]
        assert problem["kind"] == "record" and problem["device_id"] == "mthreads:index-2"


def test_a_backend_failing_during_watch_is_a_problem_not_an_empty_list(capsys: pytest.CaptureFixture[str]) -> None:
    # The simulator answers at its first instant (the inventory and the first refresh) and hangs
    # from the second on.
    code = main(["watch", "--sim", "dgx-h100", "-o", "faults=hung_tool@1", "--timeout", "0.05",
                 "--count", "3", "--interval", "0", "--json"])
    out, err = capsys.readouterr()
    first, *later = [json.loads(line) for line in out.splitlines()]
    assert code == EXIT_PARTIAL and len(later) == 2
    assert len(first["samples"]) == 8 and first["complete"] is True
    assert all(doc["samples"] == [] and [p["kind"] for p in doc["problems"]] == ["backend"] for doc in later)
    warnings = [line for line in err.splitlines() if line.startswith("accel: warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("accel: warning: sim: backend:"), err


def test_a_device_lost_during_watch_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["watch", "--sim", "dgx-h100", "-o", "faults=device_lost:3", "--count", "1", "--interval", "0"])
    _, err = capsys.readouterr()
    assert code == EXIT_PARTIAL
    assert "accel: warning: sim: device: no telemetry sample" in err and "GPU-7b1e0c03" in err


def test_a_complete_read_still_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["watch", "--count", "2", "--interval", "0"], ["dmon", "-c", "1", "-d", "0"], ["dra"], ["ps"]):
        assert main([*argv, "--sim", "dgx-h100"]) == EXIT_OK
        assert "warning" not in capsys.readouterr().err
