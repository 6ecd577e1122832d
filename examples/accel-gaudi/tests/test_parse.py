"""The hl-smi table parser on the two recorded samples and on damaged input."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from accel_gaudi import PLUGIN
from accel_gaudi._backend import parse_hl_smi

from accel.errors import ParseError
from accel.model import HealthState
from accel.plugin import BackendConfig
from accel.tools import ReplayRunner

MIB = 2**20


def _sample(scenario: str, name: str) -> str:
    return resources.files("accel_gaudi").joinpath("scenarios", scenario, name).read_text()


def test_gaudi2_hl_smi_1_16() -> None:
    units, versions, _ = parse_hl_smi(_sample("hl225-8", "hl-smi-1.16.0-hl225x8.txt"))
    assert versions == {"hl_smi": "hl-1.16.0-fw-50.1.2.0", "driver": "1.16.0-94aac46"}
    assert [u.index for u in units] == list(range(8))
    six = units[6]
    assert (six.bus_id, six.model, six.temperature_celsius) == ("0000:43:00.0", "HL-225", 26.0)
    assert (six.power_watts, six.power_limit_watts) == (101.0, 600.0)
    assert (six.memory_used_bytes, six.memory_total_bytes) == (27098 * MIB, 98304 * MIB)
    # The ECC header: a real uncorrected-ECC count, so health is read.
    assert six.ecc_uncorrected_total == 0 and six.health_read and not six.conditions


def test_gaudi3_hl_smi_1_21_uncor_events() -> None:
    units, versions, _ = parse_hl_smi(_sample("hl325l-8", "hl-smi-1.21.0-hl325lx8.txt"))
    assert versions["nic_driver"] == "1.20.1-213b09b"
    assert {u.model for u in units} == {"HL-325L"} and len(units) == 8
    first = units[0]
    assert (first.bus_id, first.power_watts, first.memory_total_bytes) == ("0000:e9:00.0", 228.0, 131072 * MIB)
    # Uncor-Events counts more than ECC: kept as an extra, never as the ECC counter.
    assert first.ecc_uncorrected_total is None and first.extras["habana.ai/uncorrectableErrors"] == 0
    assert first.health_read


def test_uncorrectable_errors_become_a_condition() -> None:
    text = _sample("hl325l-8", "hl-smi-1.21.0-hl325lx8.txt").replace(
        "0000:e9:00.0     N/A |                   0  |", "0000:e9:00.0     N/A |                   3  |"
    )
    units, _, _ = parse_hl_smi(text)
    assert [c.reason for c in units[0].conditions] == ["UncorrectableErrors"]


def test_bad_value_is_a_condition_not_a_lost_device() -> None:
    text = _sample("hl225-8", "hl-smi-1.16.0-hl225x8.txt").replace("  26C   N/A    82W", "  ??C   N/A    82W")
    units, _, _ = parse_hl_smi(text)
    assert len(units) == 8 and units[0].temperature_celsius is None
    assert [c.reason for c in units[0].conditions] == ["UnreadableValue"]


def test_no_table_is_a_located_parse_error() -> None:
    with pytest.raises(ParseError, match="hl-smi device table") as info:
        parse_hl_smi("hl-smi: command not supported\n")
    assert info.value.tool == "hl-smi"


def test_one_bad_record_hides_no_other(tmp_path: Path) -> None:
    text = _sample("hl225-8", "hl-smi-1.16.0-hl225x8.txt").replace("| 0000:cc:00.0 ", "| 0000:zz:00.0 ")
    units, _, errors = parse_hl_smi(text)
    assert len(units) == 7 and len(errors) == 1
    assert errors[0].device_index == 2 and errors[0].tool == "hl-smi"
    # Through the backend: the device is still listed, health unknown, and the read is partial.
    (tmp_path / "hl-smi.txt").write_text(text)
    recording = {"argv": ["hl-smi"], "returncode": 0, "stdout_file": "hl-smi.txt"}
    (tmp_path / "hl-smi.json").write_text(json.dumps(recording))
    backend = PLUGIN.open(BackendConfig(runner=ReplayRunner(tmp_path)))
    inv = backend.inventory()
    backend.close()
    assert len(inv.devices) == 8 and inv.devices[2].health.state is HealthState.UNKNOWN
    assert [p.kind.value for p in inv.problems] == ["record"]
