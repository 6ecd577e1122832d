"""The simulator agrees with itself: one source per reading at one instant (issue 32).

Device 0 of ``dgx-h100`` used to read 6.6 GiB used in ``ls`` and ``show`` but 20.9 GiB in ``ls
--query memory.used`` and ``dmon``: every read was a tick of simulated time, so the telemetry a
command read after its inventory was the next instant.  Now a tick moves on only when a kind of
reading is taken again, so every command's first look at a fresh simulator is the same instant
and reports the same value for the same reading.
"""

from __future__ import annotations

import json

import pytest

from accel.cli import main
from accel.sim._profile import load_profile

MIB = 2**20


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--sim", "dgx-h100"]) == 0
    return capsys.readouterr().out


def _query(capsys: pytest.CaptureFixture[str], field: str) -> tuple[float, float]:
    """Device 0's value of a ``--query`` field in base units, and the resolution of its unit."""
    header, first = _out(capsys, "ls", "--query", field).splitlines()[:2]
    unit = header.split("[", 1)[1].rstrip("]") if "[" in header else ""
    scale = {"B": 1.0, "MiB": float(MIB), "W": 1.0, "C": 1.0, "": 1.0}[unit]
    return float(first.split()[0]) * scale, scale


def test_every_command_reads_the_same_memory_used(capsys: pytest.CaptureFixture[str]) -> None:
    inv = json.loads(_out(capsys, "ls", "--json"))
    used = inv["devices"][0]["memory"][0]["used_bytes"]
    assert json.loads(_out(capsys, "show", "0", "--json"))["memory"][0]["used_bytes"] == used
    for command in (["watch", "--interval", "0"], ["dmon", "-d", "0"]):
        (line,) = _out(capsys, *command, "--count", "1", "--json").splitlines()
        assert json.loads(line)["samples"][0]["memory_used_bytes"] == used, command
    value, resolution = _query(capsys, "memory.used")
    assert abs(value - used) < resolution
    dmon = _out(capsys, "dmon", "-c", "1", "-d", "0", "-s", "m").splitlines()[2]
    assert int(dmon.split()[2]) == round(used / MIB)


def test_process_memory_is_what_the_processes_hold_of_that_reading(capsys: pytest.CaptureFixture[str]) -> None:
    """``ps`` lists each process's memory: the device's used memory less what no process holds
    (the profile's idle use), at the same instant as ``ls``.  On dgx-h100 nothing is held by no
    process (the driver's reserve is ``reserved_bytes``, not used: it was counted in both, so
    ``ps`` read 6.1 GiB where ``ls`` read 6.6): the processes hold all of it."""
    inv = json.loads(_out(capsys, "ls", "--json"))
    dev = inv["devices"][0]
    procs = json.loads(_out(capsys, "ps", "--json"))["processes"]
    held = sum(p["memory_bytes"] for p in procs if p["device_id"] == dev["id"])
    idle = load_profile("dgx-h100").telemetry[0].idle_used_bytes
    assert held == dev["memory"][0]["used_bytes"] - idle
    assert idle == 0 and held == dev["memory"][0]["used_bytes"]


def test_the_other_readings_of_one_instant_agree_too(capsys: pytest.CaptureFixture[str]) -> None:
    (line,) = _out(capsys, "watch", "--count", "1", "--interval", "0", "--json").splitlines()
    sample = json.loads(line)["samples"][0]
    # As printed: nvidia-smi's temperature.gpu is whole degrees, its power.draw two decimals.
    for field, key, printed in (("temperature.gpu", "temperature_celsius", 0.5), ("power.draw", "power_watts", 0.005)):
        value, _ = _query(capsys, field)
        assert value == pytest.approx(sample[key], abs=printed + 1e-9), field


def test_time_moves_on_when_a_reading_is_taken_again(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _out(capsys, "watch", "--count", "3", "--interval", "0", "--json").splitlines()
    used = [json.loads(line)["samples"][0]["memory_used_bytes"] for line in lines]
    assert len(set(used)) == 3  # each refresh is a new instant
