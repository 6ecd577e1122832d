"""The real ``rocm-smi --json`` sample (RX 7800 XT, ROCm 6.2.4): the shape the parser reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ParseError
from accel.plugin import BackendConfig
from accel.plugins.amd import PLUGIN
from accel.plugins.amd.layers import parse_rocm_smi_json

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "amd" / "rocm-smi-json_rocm6.2.4_rx7800xt.txt"


def test_rx7800xt_sample_values() -> None:
    parsed = parse_rocm_smi_json(SAMPLE.read_text())
    assert parsed.errors == [] and parsed.memory_unit == "B"
    (r,) = parsed.readings
    assert r.index == 0
    assert r.name == "Navi 32 [Radeon RX 7700 XT / 7800 XT]"
    assert r.pci_device_id == "747e" and r.pci_revision == "0xc8" and r.subsystem_id == "7801"
    assert r.unique_id == "0x5c88007d760374f3"
    assert r.memory_total_bytes == 17163091968  # "(B)": bytes, not MiB
    assert r.memory_used_bytes == 11615076352
    assert r.temperatures_celsius == {"edge": 45.0, "junction": 51.0, "memory": 54.0}
    assert r.power_watts == 53.0
    assert r.utilization_ratio == 1.0
    assert r.serial_number is None  # "N/A"
    assert r.isa == "gfx11001"  # as rocm-smi prints it


def test_radeon_scenario_agrees_with_the_sample() -> None:
    (r,) = parse_rocm_smi_json(SAMPLE.read_text()).readings
    with PLUGIN.open(BackendConfig(options={"scenario": "radeon-rx7800xt"})) as b:
        (d,) = b.inventory().devices
        (t,) = b.telemetry()
    assert d.id == f"amd:{r.unique_id}"
    assert d.model == r.name
    assert d.memory_total_bytes == r.memory_total_bytes and d.memory_used_bytes == r.memory_used_bytes
    assert d.pci is not None and d.pci.device_id == r.pci_device_id
    assert t.temperatures_celsius == r.temperatures_celsius and t.power_watts == r.power_watts


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "no JSON object"),
        ("WARNING: something\n{\"card0\": ", "malformed JSON"),
        ("[1, 2]", "no JSON object"),
        ('{"system": {}}', "no cardN"),
        ('{"card0": "oops"}', "not an object"),
    ],
)
def test_bad_input_is_a_parse_error_naming_tool_and_command(text: str, needle: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_rocm_smi_json(text, tool="rocm-smi", command="rocm-smi --showmeminfo vram --json")
    assert needle in str(err.value) and "rocm-smi" in str(err.value)


def test_an_unknown_memory_unit_is_reported_not_guessed() -> None:
    parsed = parse_rocm_smi_json('{"card0": {"VRAM Total Memory (MB)": "1"}}')
    assert parsed.readings[0].memory_total_bytes is None
    assert "unknown memory unit 'MB'" in str(parsed.errors[0])


def test_log_lines_before_the_json_and_a_bad_card_do_not_hide_the_good_one() -> None:
    text = "Some log line\n" + '{"card0": {"VRAM Total Memory (B)": "x1"}, "card1": ' + SAMPLE.read_text()[
        SAMPLE.read_text().index('{"') if '{"' in SAMPLE.read_text() else 0:
    ].split('"card0":', 1)[1].rsplit("}", 1)[0] + "}"
    parsed = parse_rocm_smi_json(text)
    assert [r.index for r in parsed.readings] == [0, 1]
    assert parsed.readings[1].memory_total_bytes == 17163091968
    assert parsed.errors and "card0" in str(parsed.errors[0])


def test_json_truncated_after_a_newline_names_the_last_line() -> None:
    # Found by Hypothesis: the decoder's error position sat past the final newline.
    text = '{\n  "card0": {\n    "Device ID": "0x6210",\n'
    with pytest.raises(ParseError, match=r"malformed JSON .*line 3.*Device ID"):
        parse_rocm_smi_json(text)
