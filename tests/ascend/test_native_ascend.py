"""Ascend's native path (DCMI): the fake rendered from each scenario, the signature table, the
read=native|cli|auto choice, fault events, and the differential test against the npu-smi path."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from accel.errors import DriverError, LibraryNotFoundError
from accel.model import DomainKind, HealthState, LinkType
from accel.plugin import Backend, BackendConfig
from accel.plugins.ascend import PLUGIN
from accel.plugins.ascend import _native as n
from accel.plugins.ascend._native_fake import fake_of_replay
from accel.toolkit import NativeLibrary, choose_read_path, scenario_names, scenario_path, signature_problems
from accel.toolkit.testing import compare_paths
from accel.tools import ReplayRunner, SubprocessRunner

PKG = "accel.plugins.ascend"
SCENARIOS = scenario_names(PKG)

#: What one path sees and the other cannot, by compared field (docs/native-gaps.md): none of the
#: compared fields differ on Ascend.
GAPS: dict[str, str] = {}


def runner(name: str) -> ReplayRunner:
    return ReplayRunner(scenario_path(PKG, name))


def open_backend(scenario: str, read: str) -> Backend:
    return PLUGIN.open(BackendConfig(options={"scenario": scenario, "read": read}))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_differential(scenario: str) -> None:
    """Both paths agree on devices, ids, logic ids, boards, memory, links and health wherever
    both see the value; nothing is one-sided among the compared fields."""
    cli, native = open_backend(scenario, "cli"), open_backend(scenario, "native")
    try:
        a, b = cli.inventory(), native.inventory()
    finally:
        cli.close()
        native.close()
    result = compare_paths(a, b)
    if scenario != "910b-8-faults":  # that one adds what only DCMI sees
        assert result.differences == []
    assert result.undocumented(GAPS) == {}
    assert [(d.id, d.index) for d in a.devices] == [(d.id, d.index) for d in b.devices]
    assert b.sources[0].api == "libdcmi.so" and b.sources[0].tool_invocations == 0
    assert (b.sources[0].detail or "").startswith("path=native (read=native: a fake libdcmi.so of the replay)")
    assert a.sources[0].api == "npu-smi" and (a.sources[0].tool_invocations or 0) >= 1
    assert not b.problems


def test_links_and_domains_come_from_dcmi_topology() -> None:
    native = open_backend("910c-16", "native")
    try:
        inv = native.inventory()
    finally:
        native.close()
    types = {lk.type for lk in inv.links}
    assert types == {LinkType.SIO, LinkType.HCCS_SWITCH}
    assert sum(lk.type is LinkType.SIO for lk in inv.links) == 8
    assert {d.kind for d in inv.domains} == {DomainKind.HCCS_GROUP, DomainKind.DIE_PAIR}


def test_signature_table_after_full_read() -> None:
    fake = fake_of_replay(runner("910b-8-faults"))
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_dcmi(lib)
    events = n.FaultEvents(lib).poll({(c.chip.npu_id, c.chip.chip_id): f"d{i}" for i, c in enumerate(read.chips)})
    assert len(read.chips) == 8 and len(events) == 1
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []
    # Every declared function was called, but the error-code list (only for a chip not OK).
    assert set(n.TABLE.functions) - set(lib.calls) == {"dcmi_get_device_errorcode_v2"}
    assert all(fn.source == n.SOURCE for fn in n.TABLE.functions.values())


def test_error_codes_are_read_for_a_chip_in_alarm() -> None:
    fake = fake_of_replay(runner("950pr-3"))
    fake.state.chips[1].error_codes.append(0x80E18401)
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_dcmi(lib)
    assert [c.chip.health for c in read.chips].count("Alarm") == 2
    assert read.chips[1].error_codes == ("0x80E18401",)
    assert signature_problems(n.TABLE, calls=lib.calls, fake=fake) == []


def test_struct_sizes_match_the_header() -> None:
    assert ctypes.sizeof(n.PcieInfoAll) == 64  # "the size of dcmi_pcie_info_all is 64"
    # The header's comment says 96, which holds only where unsigned long is 4 bytes; on LP64
    # (x86_64, aarch64) the compiler lays the struct out in 112 bytes, as ctypes does.
    assert ctypes.sizeof(n.MemoryInfoV3) == 8 + 8 + 4 + 4 + 3 * 8 + 4 + 60
    assert ctypes.sizeof(n.EccInfo) == 9 * 4
    # 20 bytes of ids and serials, 4 of padding before the 8-byte alarm time, then the strings.
    assert ctypes.sizeof(n.DmsFaultEvent) == 4 + 2 + 6 + 8 + 4 + 8 + 256 + 32 + 32


def test_native_only_scenario_sees_ecc_and_fault_event() -> None:
    native, cli = open_backend("910b-8-faults", "native"), open_backend("910b-8-faults", "cli")
    try:
        inv = native.inventory()
        by_npu = {d.extras["huawei.com/npuId"]: d for d in inv.devices}
        assert "huawei.dcmi:ecc-double-bit" in {c.vendor_code for c in by_npu[3].health.conditions}
        assert "huawei.dcmi:event-0x80E01801" in {c.vendor_code for c in by_npu[5].health.conditions}
        assert by_npu[3].health.state is not HealthState.HEALTHY
        assert by_npu[0].health.state is HealthState.HEALTHY
        assert native.poll_events(0.0) == ()  # delivered once, kept on the device
        again = {d.extras["huawei.com/npuId"]: d for d in native.inventory().devices}
        assert "huawei.dcmi:event-0x80E01801" in {c.vendor_code for c in again[5].health.conditions}
        sample = {t.device_id: t for t in native.telemetry()}
        assert sample[by_npu[3].id].ecc_uncorrected_total == 7
        # npu-smi info prints none of it.
        assert all(d.health.state is HealthState.HEALTHY for d in cli.inventory().devices)
    finally:
        native.close()
        cli.close()


def test_auto_without_the_library_falls_back_to_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCEL_ASCEND_LIB", str(tmp_path / "libdcmi.so"))
    host = SubprocessRunner()
    choice = choose_read_path(BackendConfig(), host, library=n.LIBRARY, load=n.load_dcmi, fake=fake_of_replay)
    assert choice.path == "cli" and "libdcmi.so not loaded" in choice.why
    with pytest.raises(LibraryNotFoundError, match="ACCEL_ASCEND_LIB"):
        choose_read_path(
            BackendConfig(options={"read": "native"}), host, library=n.LIBRARY, load=n.load_dcmi, fake=fake_of_replay
        )
    auto = open_backend("910b-8", "auto")
    try:
        assert auto.read_path == "cli"  # type: ignore[attr-defined]
    finally:
        auto.close()


def test_driver_errors_are_typed_and_partial() -> None:
    fake = fake_of_replay(runner("910b-8"))
    fake.inject("dcmi_get_device_hbm_info", -8005)  # DCMI_ERR_CODE_INNER_ERR
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=None)
    read = n.read_dcmi(lib)
    assert len(read.chips) == 8 and all(c.chip.hbm_total_bytes is None for c in read.chips)
    assert len(read.problems) == 8 and all(isinstance(p, DriverError) for p in read.problems)
    assert read.problems[0].vendor_code == "huawei.dcmi:-8005"


def test_a_hung_library_is_reported_not_waited_on() -> None:
    fake = fake_of_replay(runner("910b-8"))
    fake.hang_on("dcmi_get_card_list")
    lib = NativeLibrary(fake, n.TABLE, n.ERRORS, timeout_s=0.05)
    try:
        with pytest.raises(DriverError, match="did not return"):
            n.read_dcmi(lib)
    finally:
        fake.release()
        lib.close()
