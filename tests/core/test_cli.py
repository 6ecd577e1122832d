"""The `accel` command: done-means of the core issue, one-line errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accel.cli import EXIT_ERROR, EXIT_NO_DEVICES, EXIT_OK, EXIT_UNHEALTHY, EXIT_USAGE, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ls_dgx_h100_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ls", "--sim", "dgx-h100", "--json")
    assert code == EXIT_OK
    inv = json.loads(out)
    devices = inv["devices"]
    assert len(devices) == 8 and len({d["id"] for d in devices}) == 8
    for d in devices:
        assert "H100" in d["model"]
        total = sum(r["total_bytes"] for r in d["memory"])
        assert 79 * 10**9 < total < 90 * 10**9
    assert inv["schema_version"] == "1.2"


def test_topo_json_shows_the_vendor_fabric(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "topo", "--sim", "dgx-h100", "--json")
    doc = json.loads(out)
    assert code == EXIT_OK and len(doc["devices"]) == 8
    pairs = {frozenset((x["a"], x["b"])) for x in doc["links"] if x["type"] == "nvswitch"}
    assert len(pairs) == 28  # every GPU pair through NVSwitch
    assert doc["pcie"][0][4] == "SYS" and doc["pcie"][0][1] == "NODE"
    _, out, _ = run(capsys, "topo", "--sim", "mi300x-8", "--json")
    doc = json.loads(out)
    assert [d["kind"] for d in doc["domains"]] == ["xgmi_hive"] and len(doc["domains"][0]["members"]) == 8
    assert all(cell == "XGMI" for i, row in enumerate(doc["labels"]) for j, cell in enumerate(row) if i != j)
    _, out, _ = run(capsys, "topo", "--sim", "ascend-910b-8", "--json")
    doc = json.loads(out)
    assert {x["type"] for x in doc["links"]} == {"hccs"} and doc["domains"][0]["kind"] == "hccs_group"


def test_human_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ls", "--sim", "rtx4090-4")
    assert code == EXIT_OK and out.count("NVIDIA GeForce RTX 4090") == 4 and "24.0 GiB" in out
    code, out, _ = run(capsys, "topo", "--sim", "dgx-h100")
    assert "NV18" in out and "nvlink-island-0 (nvlink_island, 8 devices)" in out
    code, out, _ = run(capsys, "show", "0", "--sim", "mi300x-8")
    assert code == EXIT_OK and "AMD Instinct MI300X" in out and "HIP_VISIBLE_DEVICES" in out
    code, out, _ = run(capsys, "show", "0000:c1:00.0", "--sim", "ascend-910b-8", "--json")
    assert json.loads(out)["pci"]["bus_id"] == "0000:c1:00.0"
    code, out, _ = run(capsys, "sim", "profiles")
    assert "dgx-h100" in out and "mixed-nvidia-ascend" in out
    code, out, _ = run(capsys, "sim", "profiles", "--json")
    assert {p["name"] for p in json.loads(out)} >= {"a100-mig", "mlu370-x8"}


def test_health_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "health", "--sim", "dgx-h100")
    assert code == EXIT_OK and out.count("healthy") == 8
    code, out, _ = run(capsys, "health", "--sim", "dgx-h100", "-o", "faults=ecc_uncorrectable:2", "--json")
    doc = json.loads(out)
    assert code == EXIT_UNHEALTHY
    assert sorted(h["state"] for h in doc["devices"].values()) == ["healthy"] * 7 + ["unhealthy"]
    assert doc["problems"] == [] and doc["complete"] is True


def test_watch_counts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "watch", "--sim", "mi300x-8", "--count", "3", "--interval", "0", "--json")
    lines = out.strip().splitlines()
    assert code == EXIT_OK and len(lines) == 3
    # One object a refresh: its samples and what it could not read (issue 32: was a bare list).
    assert all(len(json.loads(line)["samples"]) == 8 for line in lines)
    assert all(json.loads(line)["problems"] == [] and json.loads(line)["complete"] for line in lines)


def test_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == EXIT_OK and json.loads(out)["x-accel-schema-version"] == "1.2"
    _, out, _ = run(capsys, "schema", "--kind", "telemetry")
    assert "energy_joules" in json.loads(out)["properties"]


def test_no_accelerator_points_to_sim(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCEL_SIM", raising=False)
    monkeypatch.setenv("ACCEL_BACKENDS", "sim")
    code, out, err = run(capsys, "ls")
    assert code == EXIT_NO_DEVICES and out == ""
    assert len(err.strip().splitlines()) == 1 and "--sim" in err


def test_plugins_report(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plugins", "--json")
    names = {b["name"]: b for b in json.loads(out)["backends"]}
    assert code == EXIT_OK and "sim" in names and names["sim"]["status"] in {"absent", "present"}


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["ls", "--sim", "nope"], EXIT_USAGE, "unknown simulator profile 'nope'"),
        (["ls", "--backend", "bogus"], EXIT_USAGE, "unknown backend 'bogus'"),
        (["ls", "--sim", "dgx-h100", "-o", "faults=zap"], EXIT_USAGE, "unknown fault 'zap'"),
        (["ls", "--sim", "dgx-h100", "-o", "novalue"], EXIT_USAGE, "KEY=VALUE"),
        (["ls", "--sim", "dgx-h100", "--replay", "/nonexistent"], EXIT_USAGE, "not a directory"),
        (["show", "99", "--sim", "dgx-h100"], EXIT_ERROR, "no device '99'"),
        (["ls", "--sim", "dgx-h100", "-o", "faults=hung_tool", "--timeout", "0.1"], EXIT_ERROR, "did not answer"),
        (["frobnicate"], EXIT_USAGE, "invalid choice"),
        (["watch", "--sim", "dgx-h100", "--count", "-1"], EXIT_USAGE, "whole number of refreshes >= 0"),
    ],
)
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], code: int, needle: str) -> None:
    got, _, err = run(capsys, *argv)
    assert got == code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel: error:") and needle in lines[0]
    assert "Traceback" not in err


def test_malformed_profile_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(
        json.dumps(
            {
                "name": "x",
                "description": "d",
                "host": {"hostname": "h"},
                "templates": {},
                "devices": [{"template": "missing"}],
            }
        )
    )
    code, _, err = run(capsys, "ls", "--sim", str(bad))
    assert code == EXIT_USAGE and "devices[0].template" in err and len(err.strip().splitlines()) == 1


def test_console_script_runs_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "accel", "ls", "--sim", "nope"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == EXIT_USAGE
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_dra_command_prints_resource_slices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "dra", "--sim", "mixed-nvidia-ascend", "--node", "worker-1")
    doc = json.loads(out)
    assert code == EXIT_OK and doc["kind"] == "List"
    assert sorted(s["spec"]["driver"] for s in doc["items"]) == ["huawei.accel.dev", "nvidia.accel.dev"]
    assert sum(len(s["spec"]["devices"]) for s in doc["items"]) == 8


def _corrupt_mthreads_replay(tmp_path: Path) -> Path:
    """The shipped s5000-8 replay with one GPU row's bus id mangled (the row no longer parses)."""
    import shutil

    from accel.plugins import mthreads

    src = Path(mthreads.__file__).parent / "scenarios" / "s5000-8"
    dst = tmp_path / "replay"
    shutil.copytree(src, dst)
    table = dst / "mthreads-gmi_2.4.1_s5000_8gpu_ecc-ondie.txt"
    text = table.read_text()
    assert "00000000:4b:00.0" in text
    table.write_text(text.replace("00000000:4b:00.0", "00000000:zz:00.0"))
    return dst


@pytest.mark.parametrize("command", ["ls", "topo", "health"])
def test_a_partial_read_warns_once_per_problem_and_exits_5(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accel.cli import EXIT_PARTIAL

    replay = _corrupt_mthreads_replay(tmp_path)
    code, out, err = run(capsys, command, "--backend", "mthreads", "--replay", str(replay))
    warnings = [line for line in err.splitlines() if line.startswith("accel: warning:")]
    assert len(warnings) == 1, err
    assert "mthreads: record:" in warnings[0] and "line 17" in warnings[0] and "mthreads:index-2" in warnings[0]
    # health: the unread GPU is "unknown", which is not healthy, so 4 wins over 5.
    assert code == (EXIT_UNHEALTHY if command == "health" else EXIT_PARTIAL)
    assert "mthreads:index-2" in out


def test_partial_read_json_carries_the_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from accel.cli import EXIT_PARTIAL

    replay = _corrupt_mthreads_replay(tmp_path)
    code, out, _ = run(capsys, "ls", "--backend", "mthreads", "--replay", str(replay), "--json")
    inv = json.loads(out)
    assert code == EXIT_PARTIAL and len(inv["devices"]) == 8
    (problem,) = inv["problems"]
    assert problem["kind"] == "record" and problem["line"] == 17 and problem["device_id"] == "mthreads:index-2"
    code, out, _ = run(capsys, "health", "--backend", "mthreads", "--replay", str(replay), "--json")
    doc = json.loads(out)
    assert doc["complete"] is False and doc["devices"]["mthreads:index-2"]["state"] == "unknown"
    assert [p["device_id"] for p in doc["problems"]] == ["mthreads:index-2"]
    code, out, _ = run(capsys, "show", "mthreads:index-2", "--backend", "mthreads", "--replay", str(replay), "--json")
    assert code == EXIT_PARTIAL and json.loads(out)["health"]["state"] == "unknown"

