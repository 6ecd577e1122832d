"""Issue 13, finding 1: a value overlapping two columns equally must not drop the chip.

No verbatim 21.x ``npu-smi info`` from a 4-chip host was found in public material (searched
issues for "npu-smi 21.0" box tables; only 24.x-26.x 910 outputs came back).  The input below is
therefore *constructed*: the layout (column positions, widths, rules, two-row header) is the
real npu-smi 20.2.0 Atlas 800 model 3000 sample in
``tests/fixtures/ascend/npu-smi-info_20.2.0_310_atlas800-3000_4chips.txt`` character for
character, with the 21.x banner and the situation the issue reports: chips 1 and 3 print
their temperature one column left of their header, so each straddles the boundary
with the Power(W) column by exactly one character (equal overlap).  The old ``>`` test gave
those chunks to the left column; the row failed and the 4-chip host read as fewer chips.
"""

from __future__ import annotations

from plugins.ascend._parse import parse_info

_INFO_21X_4CHIP = """\
+------------------------------------------------------------------------------+
| npu-smi 21.0.2                       Version: 21.0.2                         |
+-------------------+-----------------+----------------------------------------+
| NPU     Name      | Health          | Power(W)          Temp(C)              |
| Chip    Device    | Bus-Id          | AICore(%)         Memory-Usage(MB)     |
+===================+=================+========================================+
| 215     310       | OK              | 12.8              56                   |
| 0       0         | 0000:DA:00.0    | 0                 2703 / 8192          |
+-------------------+-----------------+----------------------------------------+
| 215     310       | OK              | 12.8             57                    |
| 1       1         | 0000:DC:00.0    | 0                 2703 / 8192          |
+-------------------+-----------------+----------------------------------------+
| 215     310       | OK              | 12.8              57                   |
| 2       2         | 0000:DD:00.0    | 0                 2703 / 8192          |
+-------------------+-----------------+----------------------------------------+
| 215     310       | OK              | 12.8             55                    |
| 3       3         | 0000:DB:00.0    | 0                 2703 / 8192          |
+===================+=================+========================================+
"""


def test_equal_overlap_tie_keeps_all_four_chips() -> None:
    info = parse_info(_INFO_21X_4CHIP)
    assert info.errors == ()
    assert info.tool_version == "21.0.2"
    assert [(c.npu_id, c.chip_id, c.device_id) for c in info.chips] == [
        (215, 0, 0),
        (215, 1, 1),
        (215, 2, 2),
        (215, 3, 3),
    ]
    # bus ids come back normalised to lower case
    assert [c.bus_id for c in info.chips] == ["0000:da:00.0", "0000:dc:00.0", "0000:dd:00.0", "0000:db:00.0"]
    assert [c.temperature_celsius for c in info.chips] == [56.0, 57.0, 57.0, 55.0]
    assert all(c.power_watts == 12.8 for c in info.chips)
    assert all(c.health == "OK" for c in info.chips)
    assert all(c.name == "310" for c in info.chips)
    assert all(c.ddr_used_bytes == 2703 * 1024 * 1024 for c in info.chips)
    assert all(c.ddr_total_bytes == 8192 * 1024 * 1024 for c in info.chips)
