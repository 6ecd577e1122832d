"""``accel partition``: profiles, list, create, destroy and clear, with typed refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_profiles_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "partition", "profiles", "--sim", "dgx-h100", "-i", "0")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["DEVICE", "PROFILE", "MEMORY", "COMPUTE", "UNITS", "MAX", "FREE", "PLACEMENTS"]
    row = next(line.split() for line in lines if " 3g.40gb " in line)
    assert row[2:] == ["39.4", "GiB", "0.429", "60", "2", "2", "0:4,4:4"]
    assert len(lines) == 7  # one device's six profiles
    code, out, _ = _run(capsys, "partition", "profiles", "--sim", "mi300x-8", "--json")
    docs = json.loads(out)
    assert code == 0 and {d["name"] for d in docs} == {"dpx_nps1", "qpx_nps1", "cpx_nps1", "cpx_nps4"}
    assert len(docs) == 8 * 4


def test_create_list_destroy_across_processes_through_the_state_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sim = ("--sim", "ascend-910b-8", "-o", f"state={tmp_path / 's.json'}")
    code, out, _ = _run(capsys, "partition", "create", "1", "vir10_3c_32g", *sim, "--json")
    made = json.loads(out)
    assert code == 0 and made["profile"] == "vir10_3c_32g" and made["compute_ratio"] == 0.5
    code, out, _ = _run(capsys, "ls", *sim, "--json")
    assert [p["id"] for p in json.loads(out)["partitions"]] == [made["id"]]
    code, out, _ = _run(capsys, "partition", "list", *sim)
    assert code == 0 and made["id"] in out and "32.0 GiB" in out
    code, out, _ = _run(capsys, "partition", "destroy", made["id"], *sim)
    assert code == 0 and out.strip() == f"destroyed {made['id']}"
    code, out, err = _run(capsys, "partition", "list", *sim)
    assert code == 0 and out == "" and "no partitions" in err


@pytest.mark.parametrize(
    "argv,code,cause",
    [
        (("create", "0", "1g.10gb", "--sim", "dgx-h100"), 1, "[partition.mode-off]"),
        (("create", "0", "9g.1gb", "--sim", "a100-mig"), 2, "[partition.profile-not-supported]"),
        (("create", "0", "1g.10gb", "--sim", "a100-mig"), 1, "[partition.no-placement]"),
        (("destroy", "nvidia:MIG-none", "--sim", "a100-mig"), 2, "[partition.not-found]"),
        (("create", "7", "cpx_nps4", "--sim", "mi300x-8", "-o", "faults=partition_busy:7"), 1,
         "[partition.processes-running]"),
        (("create", "0", "vir05_1c_16g", "--sim", "ascend-910b-8", "-o", "faults=partition_create_fail:0"), 1,
         "[partition.create-failed]"),
        (("create", "0", "1g.10gb", "--sim", "a100-mig", "--start", "-1"), 2, "--start"),
        (("create", "99", "1g.10gb", "--sim", "a100-mig"), 1, "no device '99'"),
    ],
)
def test_every_refusal_is_one_line_naming_its_cause(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], code: int, cause: str
) -> None:
    got, out, err = _run(capsys, "partition", *argv)
    assert (got, out) == (code, "")
    assert len(err.splitlines()) == 1 and err.startswith("accel: error:") and cause in err


def test_destroy_of_a_busy_partition_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "partition", "destroy", "nvidia:MIG-5c3a1f00-0000-5a0b-9c1d-000000000002",
                        "--sim", "a100-mig", "-o", "faults=partition_busy:0")
    assert code == 1 and "MIG-5c3a1f00-0000-5a0b-9c1d-000000000002 is in use" in err and "[partition.busy]" in err


def test_clear_destroys_every_partition_and_reports_the_busy_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sim = ("--sim", "a100-mig", "-o", f"state={tmp_path / 's.json'}")
    code, out, _ = _run(capsys, "partition", "clear", *sim, "-o", "faults=partition_busy:0", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["destroyed"] == [] and len(doc["refused"]) == 4
    assert {r["code"] for r in doc["refused"]} == {"partition.busy"}
    code, out, _ = _run(capsys, "partition", "clear", "0", *sim)
    assert code == 0 and out.count("destroyed ") == 4
    code, out, err = _run(capsys, "partition", "clear", *sim)
    assert code == 0 and "no partitions to clear" in err
    code, out, _ = _run(capsys, "partition", "create", "0", "7g.80gb", *sim, "--json")
    assert code == 0 and json.loads(out)["placement"] == {"start": 0, "size": 8}


def test_the_nvml_backend_answers_through_the_same_commands(capsys: pytest.CaptureFixture[str]) -> None:
    nv = ("--backend", "nvidia", "-o", "scenario=a100-mig")
    code, out, _ = _run(capsys, "partition", "list", *nv, "--json")
    assert code == 0 and len(json.loads(out)) == 4
    code, _, err = _run(capsys, "partition", "create", "0", "1g.10gb", *nv)
    assert code == 1 and "NVML error 23" in err and err.rstrip().endswith("[partition.no-placement]")
    code, _, err = _run(capsys, "partition", "destroy", "nvidia:MIG-5c3a1f00-0000-5a0b-9c1d-000000000002", *nv)
    assert code == 1 and "NVML error 19" in err and "[partition.busy]" in err
    code, out, _ = _run(capsys, "partition", "destroy", "nvidia:MIG-5c3a1f00-0000-5a0b-9c1d-000000000009", *nv)
    assert code == 0 and out.startswith("destroyed ")
