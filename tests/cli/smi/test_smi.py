"""nvidia-smi scripts run against accel (issue 32): nvidia-smi's names answer in nvidia-smi's units
and header, the model's names stay SI; ``--query-gpu``, ``-L``, ``-l``, ``ps
--query-compute-apps``; ``topo -i`` shows the selected devices' domains; ``bugreport`` on a
shipped replay scenario, the flow a newcomer tries without hardware.

The goldens were printed by accel and checked by hand against real nvidia-smi output (see
:mod:`accel.cli._query`): ``memory.total [MiB]`` / ``81559 MiB`` (an H100 80GB), ``power.draw [W]``
/ ``72.00 W``, ``temperature.gpu`` / ``31`` (no unit), ``clocks.sm`` answered as
``clocks.current.sm [MHz]``, ``pci.bus_id`` as ``00000000:18:00.0``.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from accel.cli import EXIT_OK, EXIT_USAGE, main
from accel.model import HostInventory

HERE = Path(__file__).parent

_H100 = ["ls", "--backend", "nvidia", "-o", "scenario=h100-nvswitch-8", "-i", "0,1"]
_ALL_GPU = ("index,name,uuid,pci.bus_id,driver_version,vbios_version,memory.total,memory.used,memory.free,"
            "utilization.gpu,utilization.memory,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.mem,fan.speed")


@pytest.mark.parametrize(
    ("argv", "golden"),
    [
        ([*_H100, f"--query-gpu={_ALL_GPU}", "--format=csv"], "query_gpu_h100-nvswitch-8.csv"),
        ([*_H100, "--query-gpu=index,memory.used,power.draw,temperature.gpu,clocks.gr", "--format=csv,nounits"],
         "query_gpu_h100-nvswitch-8_nounits.csv"),
        (["ls", "--backend", "nvidia", "-o", "scenario=a100-mig", "-L"], "list_gpus_a100-mig.txt"),
        (["ps", "--sim", "dgx-h100", "-i", "0,1", "--query-compute-apps=pid,process_name,used_memory,gpu_bus_id",
          "--format=csv"], "query_compute_apps_dgx-h100.csv"),
        (["topo", "--sim", "dgx-h100", "-i", "2,5"], "topo_dgx-h100_2_5.txt"),
    ],
)
def test_golden(capsys: pytest.CaptureFixture[str], argv: list[str], golden: str) -> None:
    assert main(argv) == EXIT_OK
    assert capsys.readouterr().out == (HERE / golden).read_text()


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text), skipinitialspace=True))


def test_nvidia_smi_names_use_nvidia_smi_units(capsys: pytest.CaptureFixture[str]) -> None:
    header, *rows = _rows((HERE / "query_gpu_h100-nvswitch-8.csv").read_text())
    cells = dict(zip(header, rows[0], strict=True))
    assert cells["memory.total [MiB]"] == "81559 MiB"
    assert re.fullmatch(r"\d+ %", cells["utilization.gpu [%]"])
    assert re.fullmatch(r"\d+\.\d\d W", cells["power.draw [W]"])
    assert cells["power.limit [W]"] == "700.00 W"
    assert re.fullmatch(r"\d+", cells["temperature.gpu"])  # nvidia-smi prints no unit for it
    assert re.fullmatch(r"\d+ MHz", cells["clocks.current.sm [MHz]"])  # asked as clocks.sm
    assert cells["pci.bus_id"] == "00000000:18:00.0"
    assert cells["fan.speed [%]"] == "[N/A]"  # an SXM board has no fan: never 0
    # The model's names stay SI, whatever else is asked beside them.
    assert main([*_H100, "--query", "memory_total_bytes,memory.total,power_watts,bus_id", "--format",
                 "csv,noheader"]) == EXIT_OK
    first = _rows(capsys.readouterr().out)[0]
    assert first[0].endswith(" B") and int(first[0][:-2]) // 2**20 == 81559
    assert first[1] == "81559 MiB"
    assert first[2].endswith(" W") and first[3] == "0000:18:00.0"


def test_nounits_keeps_the_header_units_and_noheader_drops_the_header(capsys: pytest.CaptureFixture[str]) -> None:
    text = (HERE / "query_gpu_h100-nvswitch-8_nounits.csv").read_text()
    header = "index, memory.used [MiB], power.draw [W], temperature.gpu, clocks.current.graphics [MHz]"
    assert text.splitlines()[0] == header
    assert all(not re.search(r"[A-Za-z%]", line) for line in text.splitlines()[1:])
    assert main([*_H100, "--query-gpu=memory.used,power.draw", "--format=csv,noheader,nounits"]) == EXIT_OK
    assert capsys.readouterr().out == "0, 72.00\n0, 72.00\n"


def test_query_gpu_is_query(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_H100, "--query-gpu=index,name"]) == EXIT_OK
    gpu = capsys.readouterr().out
    assert main([*_H100, "--query", "index,name"]) == EXIT_OK
    assert capsys.readouterr().out == gpu


def test_loop_repeats_with_one_header(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--sim", "dgx-h100", "-i", "0,1", "-l", "0.01", "--count", "3",
                 "--query-gpu=index,power.draw"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "index, power.draw [W]"
    assert len(lines) == 1 + 3 * 2 and lines.count(lines[0]) == 1
    assert [line.split(",")[0] for line in lines[1:]] == ["0", "1"] * 3
    assert main(["ls", "--sim", "dgx-h100", "--loop", "0.01", "--count", "2"]) == EXIT_OK
    assert capsys.readouterr().out.count("VENDOR") == 2


def test_list_gpus_positions_and_missing_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--sim", "dgx-h100", "-L", "-i", "3,5"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-7b1e0c03-1d2a-4c3b-9e4f-000000000003)",
        "GPU 5: NVIDIA H100 80GB HBM3 (UUID: GPU-7b1e0c05-1d2a-4c3b-9e4f-000000000005)",
    ]
    assert main(["ls", "--backend", "ascend", "-o", "scenario=910b-8", "--list-gpus", "-i", "0"]) == EXIT_OK
    assert capsys.readouterr().out == "GPU 0: Ascend 910B3 (UUID: N/A)\n"


def test_ps_query_model_names_and_empty(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ps", "--sim", "dgx-h100", "-i", "0", "--query", "pid,name,memory_bytes,device_id",
                 "--format", "csv,noheader"]) == EXIT_OK
    (row,) = _rows(capsys.readouterr().out)
    assert row[0] == "40000" and row[1] == "python3" and re.fullmatch(r"\d+ B", row[2])
    assert row[3] == "nvidia:GPU-7b1e0c00-1d2a-4c3b-9e4f-000000000000"
    # No process: nvidia-smi prints the header alone.
    assert main(["ps", "--backend", "nvidia", "-o", "scenario=h100-nvswitch-8",
                 "--query-compute-apps=gpu_uuid,pid,used_memory"]) == EXIT_OK
    assert capsys.readouterr().out == "gpu_uuid, pid, used_gpu_memory [MiB]\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ls", "--sim", "dgx-h100", "--query-gpu=index,bogus"], "unknown field 'bogus'"),
        (["ls", "--sim", "dgx-h100", "--query-gpu=index,bogus"], "nvidia-smi fields (nvidia-smi units): "),
        (["ls", "--sim", "dgx-h100", "--query-gpu=index,bogus"], "memory_total_bytes"),
        (["ps", "--sim", "dgx-h100", "--query-compute-apps=pid,bogus"], "used_memory"),
        (["ps", "--sim", "dgx-h100", "--format", "csv"], ""),
        (["ps", "--sim", "dgx-h100", "--format", "csv,noheader"], "--format needs --query"),
        (["ls", "--sim", "dgx-h100", "-L", "--query-gpu=index"], "-L/--list-gpus"),
        (["ls", "--sim", "dgx-h100", "--count", "2"], "--count needs -l/--loop"),
        (["ls", "--sim", "dgx-h100", "-l", "0"], "argument -l/--loop: must be a finite number of seconds > 0"),
        (["ls", "--sim", "dgx-h100", "-l", "nan"], "argument -l/--loop"),
    ],
)
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    if not message:  # the default format alone is fine
        assert code == EXIT_OK
        return
    assert code == EXIT_USAGE
    assert len(err) == 1 and message in err[0], err


def test_topo_selection_keeps_the_whole_domain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "--sim", "dgx-h100", "-i", "0,1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "Domains: none" not in out
    assert "nvlink-island-0 (nvlink_island, 8 devices): D0, D1, D2, D3, D4, D5, D6, D7" in out
    assert main(["topo", "--sim", "dgx-h100", "-i", "0,1", "--json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    (domain,) = doc["domains"]
    assert set(doc["devices"]) < set(domain["members"]) and len(domain["members"]) == 8
    # A device in no domain: none shown.
    assert main(["topo", "--sim", "rtx4090-4", "-i", "0"]) == EXIT_OK
    assert "Domains: none" in capsys.readouterr().out


def _devices(inv: HostInventory) -> list[dict[str, object]]:
    out = []
    for d in inv.devices:
        data = d.model_dump(mode="json")
        data["health"].pop("checked_at", None)  # the time of the read
        data["unsupported"] = sorted(data["unsupported"])
        out.append(data)
    return out


def test_bugreport_on_a_shipped_scenario_replays_to_the_same_inventory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "report"
    assert main(["bugreport", "--backend", "ascend", "-o", "scenario=910b-8", "--out", str(bundle)]) == EXIT_OK
    err = capsys.readouterr().err
    assert f"replay it with `accel ls --replay {bundle}`" in err and "8 devices, 0 problems" in err
    manifest = json.loads((bundle / "MANIFEST").read_text())
    assert manifest["backends"] == ["ascend"] and all(argv[0].endswith("npu-smi") for argv in manifest["commands"])
    assert main(["ls", "--backend", "ascend", "-o", "scenario=910b-8", "--json"]) == EXIT_OK
    scenario = HostInventory.model_validate_json(capsys.readouterr().out)
    assert main(["ls", "--backend", "ascend", "--replay", str(bundle), "--json"]) == EXIT_OK
    replayed = HostInventory.model_validate_json(capsys.readouterr().out)
    assert _devices(replayed) == _devices(scenario) and len(replayed.devices) == 8


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "nvidia", "-o", "scenario=h100-nvswitch-8"], "ships no tool-recording scenarios"),
        (["--backend", "ascend", "-o", "scenario=nope"], "shipped: 310-4"),
        (["-o", "scenario=910b-8"], "give exactly one --backend"),
        (["--sim", "dgx-h100"], "the simulator runs none"),
    ],
)
def test_bugreport_scenario_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["bugreport", *argv, "--out", str(tmp_path / "r")]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "r").exists()


def test_model_names_keep_si_and_the_header_unit_under_nounits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--backend", "ascend", "-o", "scenario=910b-8", "-i", "0", "--query",
                 "memory_total_bytes,utilization_ratio,temperature_celsius,timestamp",
                 "--format", "csv,nounits"]) == EXIT_OK
    header, row = capsys.readouterr().out.splitlines()
    assert header == "memory_total_bytes [B], utilization_ratio [ratio], temperature_celsius [C], timestamp"
    cells = row.split(", ")
    assert cells[:3] == [str(65536 * 2**20), "0", "43"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*", cells[3])  # the model's ISO 8601 time
