"""Write errors: a full disk is one line and exit 1, a closed pipe is silent and exit 141.

``accel ls >/dev/full`` was an "internal error"; a reader that goes away (``| head``) could end
in an "Exception ignored ... BrokenPipeError" and status 120 from the interpreter's last flush.
These run the real console script with its stdout on ``/dev/full``, on a pipe whose reading end
is already closed, and closed altogether.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from accel.cli import EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from tests.cli.hostile._proc import ACCEL, accel_env, messages, run_accel

pytestmark = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")

SIM = ("--sim", "dgx-h100")
COMMANDS = [
    ["ls", *SIM],
    ["ls", *SIM, "--json"],
    ["topo", *SIM],
    ["health", "--sim", "dgx-h100"],
    ["show", "0", *SIM],
    ["plugins"],
    ["schema"],
    ["sim", "profiles"],
    ["dra", *SIM],
    ["watch", *SIM, "--count", "2", "--interval", "0"],
    ["--help"],
    ["--version"],
]


def _to(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    with open(target, "w") as out:
        return subprocess.run(
            [*ACCEL, *args], stdout=out, stderr=subprocess.PIPE, text=True, env=accel_env(), timeout=120
        )


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_full_disk_is_one_line_and_exit_1(args: list[str]) -> None:
    proc = _to("/dev/full", *args)
    assert proc.returncode == EXIT_ERROR, proc.stderr
    assert messages(proc.stderr) == ["accel: error: cannot write the output to stdout: No space left on device"]


def _closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before accel writes anything
    try:
        return subprocess.run(
            [*ACCEL, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=accel_env(), timeout=120
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_is_silent_and_exit_141(args: list[str]) -> None:
    proc = _closed_pipe(*args)
    assert proc.returncode == EXIT_BROKEN_PIPE, proc.stderr
    assert proc.stderr == ""


def test_watch_without_a_count_stops_when_its_reader_goes() -> None:
    """`accel watch | head -1`: the refreshes stop at the first write nobody reads."""
    proc = _closed_pipe("watch", *SIM, "--interval", "0")
    assert proc.returncode == EXIT_BROKEN_PIPE and proc.stderr == ""


def test_a_reader_that_stops_half_way() -> None:
    """`accel watch --json | head -3`: the first lines are delivered, then silence and 141."""
    with subprocess.Popen(
        [*ACCEL, "watch", *SIM, "--interval", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=accel_env(),
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == EXIT_BROKEN_PIPE
    assert all(line.startswith(b"{\"samples\": [") for line in lines) and err == b""  # one object a refresh (issue 32)


def test_a_closed_stdout_is_one_line() -> None:
    proc = subprocess.run(
        [*ACCEL, "ls", *SIM],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=accel_env(),
        timeout=120,
        close_fds=True,
        preexec_fn=lambda: os.close(1),
    )
    assert proc.returncode == EXIT_ERROR
    assert messages(proc.stderr) == ["accel: error: cannot write the output to stdout: the stream is closed"]


def test_a_full_stderr_does_not_change_the_answer() -> None:
    """Nowhere to say it: the exit status still tells (2 for a bad profile), and nothing crashes."""
    with open("/dev/full", "w") as full:
        bad = subprocess.run(
            [*ACCEL, "ls", "--sim", "nosuch"], stdout=subprocess.PIPE, stderr=full, env=accel_env(), timeout=120
        )
        good = subprocess.run([*ACCEL, "ls", *SIM], stdout=subprocess.PIPE, stderr=full, env=accel_env(), timeout=120)
    assert bad.returncode == EXIT_USAGE and bad.stdout == b""
    assert good.returncode == EXIT_OK and b"H100" in good.stdout


def test_normal_output_is_complete() -> None:
    proc = run_accel("ls", *SIM)
    assert proc.returncode == EXIT_OK and proc.stderr == "" and proc.stdout.count("\n") == 9
