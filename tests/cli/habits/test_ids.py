"""`-i/--id` on the reading commands (issue 16): nvidia-smi's device selection, every vendor."""

from __future__ import annotations

import json

import pytest

from accel.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main

SIM = ["--sim", "dgx-h100"]
GPU1 = "nvidia:GPU-7b1e0c01-1d2a-4c3b-9e4f-000000000001"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main([*argv, *SIM, "--json"]) == EXIT_OK
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("key", ["1", GPU1, "GPU-7b1e0c01-1d2a-4c3b-9e4f-000000000001", "0000:2a:00.0"])
def test_every_kind_of_key_selects_the_same_device(capsys: pytest.CaptureFixture[str], key: str) -> None:
    inv = _json(capsys, "ls", "-i", key)
    assert [d["id"] for d in inv["devices"]] == [GPU1]  # type: ignore[index]


def test_a_comma_list_keeps_positions_processes_and_links_among_them(capsys: pytest.CaptureFixture[str]) -> None:
    inv = _json(capsys, "ls", "--id", "0,3")
    ids = {d["id"] for d in inv["devices"]}  # type: ignore[index]
    assert len(ids) == 2
    assert {p["device_id"] for p in inv["processes"]} <= ids  # type: ignore[index]
    assert all(x["a"] in ids and x["b"] in ids for x in inv["links"])  # type: ignore[index]
    assert main(["ls", *SIM, "-i", "0,3"]) == EXIT_OK
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["0", "3"]  # positions of the whole list


def test_topo_health_ps_watch_and_show_take_it(capsys: pytest.CaptureFixture[str]) -> None:
    topo = _json(capsys, "topo", "-i", "0,1")
    assert len(topo["devices"]) == 2  # type: ignore[index]
    health = _json(capsys, "health", "-i", "1")
    assert list(health["devices"]) == [GPU1]  # type: ignore[index]
    procs = _json(capsys, "ps", "-i", "1")
    assert {p["device_id"] for p in procs["processes"]} == {GPU1}  # type: ignore[index]
    assert main(["watch", *SIM, "-i", "1", "--count", "1", "--json"]) == EXIT_OK
    samples = json.loads(capsys.readouterr().out)["samples"]
    assert [s["device_id"] for s in samples] == [GPU1]
    shown = _json(capsys, "show", "-i", "1")
    assert shown["id"] == GPU1  # type: ignore[index]


def test_partitions_follow_their_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--sim", "a100-mig", "-i", "0", "--json"]) == EXIT_OK
    inv = json.loads(capsys.readouterr().out)
    (dev,) = inv["devices"]
    assert inv["partitions"] and all(p["parent_id"] == dev["id"] for p in inv["partitions"])


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["ls", "-i", "9"], EXIT_ERROR, "no device '9'"),
        (["ls", "-i", "0,"], EXIT_USAGE, "an empty device"),
        (["ls", "-i", ""], EXIT_USAGE, "a device list"),
        (["show", "1", "-i", "1"], EXIT_USAGE, "one device"),
        (["show"], EXIT_USAGE, "one device"),
    ],
)
def test_bad_selections_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    assert main([*argv, *SIM]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
