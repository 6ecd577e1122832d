"""Mangled framing of real samples (issue 13): a lost or broken rule, header row or border
never silently drops a device.  Each case is one the no-silent-loss property test found."""

from __future__ import annotations

import importlib
from pathlib import Path

from accel.model import HealthState, HostInventory, ProblemKind
from accel.plugin import BackendConfig
from accel.tools import Recording, ReplayRunner


def _inventory(backend: str, scenario: str, edit: dict[int, str | None], *argv: str) -> HostInventory:
    """The scenario's inventory with lines of its main output replaced (``None``: deleted)."""
    mod = importlib.import_module(f"accel.plugins.{backend}")
    assert mod.__file__ is not None
    recs = list(ReplayRunner(Path(mod.__file__).parent / "scenarios" / scenario)._table.values())
    main = next(r for r in recs if tuple(r.argv) == argv)
    lines = main.stdout.splitlines()
    for lineno in sorted(edit, reverse=True):
        new = edit[lineno]
        if new is None:
            del lines[lineno - 1]
        else:
            lines[lineno - 1] = new
    mangled = Recording(argv=main.argv, stdout="\n".join(lines) + "\n", stderr="", returncode=0)
    runner = ReplayRunner.from_recordings([mangled if r is main else r for r in recs])
    return mod.PLUGIN.open(BackendConfig(runner=runner, enrich_from_sysfs=False)).inventory()


def test_a_rule_replaced_by_a_row_copy_keeps_every_gpu_listed() -> None:
    # ixsmi 4.1, 16 GPUs: the rule under GPU 1 becomes a copy of GPU 2's first row, so GPU 1's
    # and GPU 2's records merge; GPU 2 is still printed (its bus id), so it is listed, unknown.
    inv = _inventory(
        "iluvatar", "bi-v150-16",
        {13: "| 2    Iluvatar BI-V150         | 00000000:1C:00.0     | 1500MHz   1600MHz    |"}, "ixsmi",
    )
    assert len(inv.devices) == 16
    assert not inv.complete
    assert any(p.kind is ProblemKind.RECORD for p in inv.problems)
    unread = [d for d in inv.devices if d.health.state is HealthState.UNKNOWN and not d.health.monitored]
    assert unread and all(d.pci is not None for d in unread)


def test_a_lost_header_row_does_not_end_the_table() -> None:
    # mthreads-gmi 2.4.1: without the third header row ("|  ECC Mode") every record's third
    # row has no header shape; the table used to end there, after GPU 0.
    inv = _inventory("mthreads", "s5000-8", {7: None}, "mthreads-gmi")
    assert len(inv.devices) == 8
    assert inv.problems  # the unread rows are named


def test_a_rule_with_stray_text_is_still_a_rule() -> None:
    # cnmon 4.20 (no bus ids to fall back on): "0+----+" under card 0 cut the table in two.
    mod = importlib.import_module("accel.plugins.cambricon")
    assert mod.__file__ is not None
    text = (Path(mod.__file__).parent / "scenarios" / "mlu370-x4").glob("*.txt")
    sample = next(text).read_text().splitlines()
    rule = next(i for i, ln in enumerate(sample, 1) if i > 8 and ln.startswith("+---"))
    inv = _inventory("cambricon", "mlu370-x4", {rule: "000000000" + sample[rule - 1]}, "cnmon")
    assert [d.index for d in inv.devices] == [0, 1, 2]
    assert inv.complete


def test_a_merged_card_record_is_reported() -> None:
    # cnmon 4.20: a deleted rule merges cards 0 and 1 into one four-row record.
    mod = importlib.import_module("accel.plugins.cambricon")
    assert mod.__file__ is not None
    sample = next((Path(mod.__file__).parent / "scenarios" / "mlu370-x4").glob("*.txt")).read_text().splitlines()
    rule = next(i for i, ln in enumerate(sample, 1) if i > 8 and ln.startswith("+---"))
    inv = _inventory("cambricon", "mlu370-x4", {rule: None}, "cnmon")
    assert not inv.complete
    assert any("two rows, this one 4" in p.message for p in inv.problems)


def test_two_records_claiming_one_npu_are_both_listed() -> None:
    # npu-smi 24.1, 910B3 x8: NPU 0's id mangled into 3 -> (3, 0) twice; the second one used
    # to replace the first silently.
    inv = _inventory(
        "ascend", "910b-8",
        {7: "|3               | OK            | 101.8       43                0    / 0             |"},
        "npu-smi", "info",
    )
    assert len(inv.devices) == 8
    assert any("printed twice" in p.message for p in inv.problems)


def test_a_lost_devices_row_is_found_in_the_video_table() -> None:
    # xpu_smi (runtime 4.31): the VIDEO table lists DevID 0 again; its DEVICES row was deleted.
    inv = _inventory("kunlunxin", "r300-2", {7: None}, "xpu_smi")
    assert sorted(d.index for d in inv.devices if d.index is not None) == [0, 1]
    assert any("VIDEO table" in p.message for p in inv.problems)
