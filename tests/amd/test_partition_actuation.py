"""AMD compute / memory partition modes through amdsmi, over the fake that enforces the driver's rules."""

from __future__ import annotations

import ast
import importlib.machinery
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accel import errors
from accel.cli import main
from accel.plugin import BackendConfig, SupportsPartitionActuation, actuator
from accel.plugins.amd import AmdPlugin
from accel.plugins.amd._backend import AmdBackend
from accel.plugins.amd.testing import FakeProcess, make_fake_amdsmi, scenario

GIB = 2**30
#: The pairs the driver accepts on MI300X (8 XCCs, NPS1 / NPS4): SPX only with NPS1, DPX with
#: NPS1 (NPS2 is not an MI300X mode), QPX and CPX with NPS1 or NPS4 (aqua_vanjaram.c, see
#: plugins/amd/testing/_fake_partition.py); SPX + NPS1 is the whole device.
MI300X_MODES = {"dpx_nps1": 2, "qpx_nps1": 4, "qpx_nps4": 4, "cpx_nps1": 8, "cpx_nps4": 8}
SETTERS = ("amdsmi_set_gpu_compute_partition", "amdsmi_set_gpu_memory_partition")


@pytest.fixture
def amd() -> Iterator[AmdBackend]:
    backend = AmdBackend(BackendConfig(options={"scenario": "mi300x-8"}))
    try:
        yield backend
    finally:
        backend.close()


def _fake(backend: AmdBackend) -> Any:
    install = backend._install
    assert install is not None and install.amdsmi is not None
    return install.amdsmi._fake_state


def _setter_calls(backend: AmdBackend) -> list[str]:
    return [c for c in _fake(backend).calls if c in SETTERS]


def _same(a: Any, b: Any) -> bool:
    """The same partition as read at two instants (only the health check's time differs)."""
    return bool(a.model_copy(update={"health": b.health}) == b)


def _dev(backend: AmdBackend, k: int = 0) -> str:
    return backend.inventory().devices[k].id


def test_the_plugin_declares_actuation(amd: AmdBackend) -> None:
    assert isinstance(amd, SupportsPartitionActuation)
    assert actuator(amd, AmdPlugin.info.capabilities) is amd


def test_a_whole_mi300x_offers_the_drivers_pairs_with_their_shares(amd: AmdBackend) -> None:
    inv = amd.inventory()
    dev = inv.devices[0]
    mine = {p.name: p for p in inv.partition_profiles if p.parent_id == dev.id}
    assert set(mine) == set(MI300X_MODES)
    for name, count in MI300X_MODES.items():
        prof = mine[name]
        assert prof.max_instances == count and prof.compute_ratio == pytest.approx(1 / count)
        assert prof.memory_bytes == 192 * GIB // count and prof.compute_units == 304 // count
    assert len(inv.partition_profiles) == 8 * len(MI300X_MODES)


@pytest.mark.parametrize("name", sorted(MI300X_MODES))
def test_each_legal_mode_is_made_whole_and_shows_in_the_next_inventory(amd: AmdBackend, name: str) -> None:
    count = MI300X_MODES[name]
    dev = _dev(amd, 2)
    part = amd.create_partition(dev, name)
    inv = amd.inventory()
    mine = [p for p in inv.partitions if p.parent_id == dev]
    assert _same(part, mine[0]) and len(mine) == count and len(inv.partitions) == count
    assert all(p.profile == name for p in mine)
    assert {p.memory_bytes for p in mine} == {192 * GIB // count}
    assert {p.compute_units for p in mine} == {304 // count}
    assert all(p.compute_ratio == pytest.approx(1 / count) for p in mine)
    device = next(d for d in inv.devices if d.id == dev)
    assert (device.partition_mode.compute_mode, device.partition_mode.memory_mode) == tuple(name.split("_"))
    assert device.memory_total_bytes == 192 * GIB and device.compute.units == 304
    assert len(inv.devices) == 8  # partitions of one device, not new devices
    # compute mode first, then the memory mode (the driver checks compute against the current memory)
    assert _setter_calls(amd) == list(SETTERS[: 1 if name.endswith("nps1") else 2])
    # a partitioned device offers its live mode only: another needs the device whole again
    assert [p.name for p in inv.partition_profiles if p.parent_id == dev] == [name]
    amd.destroy_partition(mine[-1].id)  # any one of the set takes the whole mode with it
    after = amd.inventory()
    assert after.partitions == () and after.devices[2].partition_mode.compute_mode == "spx"
    assert after.devices[2].partition_mode.memory_mode == "nps1"


def test_handles_of_before_a_mode_change_are_stale_and_the_backend_refetches(amd: AmdBackend) -> None:
    st = _fake(amd)
    mod = amd._install.amdsmi  # type: ignore[union-attr]
    old = mod.amdsmi_get_processor_handles()
    amd.create_partition(_dev(amd), "cpx_nps4")
    with pytest.raises(mod.AmdSmiLibraryException) as info:
        mod.amdsmi_get_gpu_compute_partition(old[0])
    assert info.value.get_error_code() == 31  # AMDSMI_STATUS_NOT_FOUND
    new = mod.amdsmi_get_processor_handles()
    assert len(new) == 8 + 7 and st.generation == 2
    # the backend re-enumerated every layer: nothing is reported lost, telemetry reads
    inv = amd.inventory()
    assert all(d.health.operational.value != "lost" for d in inv.devices)
    assert len(amd.telemetry()) == 8


def test_refusals_before_the_library_is_asked(amd: AmdBackend) -> None:
    dev = _dev(amd)
    with pytest.raises(errors.PartitionProfileNotSupportedError, match="offered: dpx_nps1, qpx_nps1") as info:
        amd.create_partition(dev, "spx_nps4")
    assert info.value.code == "partition.profile-not-supported" and info.value.device_id == dev
    with pytest.raises(errors.PartitionProfileNotSupportedError):
        amd.create_partition(dev, "dpx_nps4")  # DPX does not take NPS4
    with pytest.raises(errors.PartitionNoPlacementError, match="no slot 3"):
        amd.create_partition(dev, "cpx_nps4", placement_start=3)
    _fake(amd).add_process(0, FakeProcess(4242, "python3", 2 * GIB))
    with pytest.raises(errors.PartitionProcessesRunningError, match="4242"):
        amd.create_partition(dev, "cpx_nps4")
    assert _setter_calls(amd) == []
    with pytest.raises(errors.DeviceError):
        amd.create_partition("amd:nope", "cpx_nps4")


def test_a_partitioned_device_refuses_another_mode(amd: AmdBackend) -> None:
    dev = _dev(amd)
    amd.create_partition(dev, "qpx_nps1")
    with pytest.raises(errors.PartitionNoPlacementError, match="is in qpx_nps1"):
        amd.create_partition(dev, "cpx_nps1")
    with pytest.raises(errors.PartitionNoPlacementError, match="already exist"):
        amd.create_partition(dev, "qpx_nps1")


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        ("BUSY", errors.PartitionProcessesRunningError, "amd.smi:30"),
        ("SETTING_UNAVAILABLE", errors.PartitionProfileNotSupportedError, "amd.smi:55"),
        ("NOT_SUPPORTED", errors.PartitionProfileNotSupportedError, None),
        ("NO_PERM", errors.PermissionDeniedError, None),
    ],
)
def test_library_refusals_are_typed(
    amd: AmdBackend, status: str, error: type[errors.AccelError], code: str | None
) -> None:
    dev = _dev(amd)
    _fake(amd).fail_next("amdsmi_set_gpu_compute_partition", status)
    with pytest.raises(error) as info:
        amd.create_partition(dev, "cpx_nps4")
    assert getattr(info.value, "vendor_code", None) == code
    assert amd.inventory().partitions == ()


def test_an_unprivileged_caller_gets_permission_denied(amd: AmdBackend) -> None:
    _fake(amd).privileged = False
    with pytest.raises(errors.PermissionDeniedError, match="needs root"):
        amd.create_partition(_dev(amd), "dpx_nps1")


def test_a_product_without_partitions_offers_none() -> None:
    backend = AmdBackend(BackendConfig(options={"scenario": "radeon-rx7800xt"}))
    try:
        inv = backend.inventory()
        assert inv.partition_profiles == ()
        with pytest.raises(errors.PartitionProfileNotSupportedError, match="cannot be partitioned"):
            backend.create_partition(inv.devices[0].id, "cpx_nps4")
    finally:
        backend.close()


def test_half_way_failure_is_undone(amd: AmdBackend) -> None:
    dev = _dev(amd)
    _fake(amd).fail_next("amdsmi_set_gpu_memory_partition", "AMDGPU_RESTART_ERR")
    with pytest.raises(errors.PartitionCreateFailedError, match="set back to SPX") as info:
        amd.create_partition(dev, "cpx_nps4")
    assert info.value.left_behind == () and info.value.vendor_code == "amd.smi:54"
    assert "processes hold the device" in str(info.value)
    inv = amd.inventory()
    assert inv.partitions == () and inv.devices[0].partition_mode.compute_mode == "spx"
    assert _setter_calls(amd) == [SETTERS[0], SETTERS[1], SETTERS[0]]


def test_half_way_failure_not_undone_names_what_is_left(amd: AmdBackend) -> None:
    dev = _dev(amd)
    st = _fake(amd)
    st.fail_next("amdsmi_set_gpu_memory_partition", "NO_PERM")
    st.fail_next("amdsmi_set_gpu_compute_partition", "BUSY", skip=1)  # the undo fails too
    with pytest.raises(errors.PartitionCreateFailedError, match="left in CPX") as info:
        amd.create_partition(dev, "cpx_nps4")
    live = [p.id for p in amd.inventory().partitions]
    assert info.value.left_behind == tuple(live) and len(live) == 8  # listed, and in the next inventory
    amd.destroy_partition(live[0])  # what was left is cleared like any mode
    assert amd.inventory().partitions == ()


def test_destroy_refusals(amd: AmdBackend) -> None:
    dev = _dev(amd)
    part = amd.create_partition(dev, "cpx_nps4")
    with pytest.raises(errors.PartitionNotFoundError):
        amd.destroy_partition(f"{dev}/cpx9")
    st = _fake(amd)
    st.add_process(0, FakeProcess(77, "train", GIB))
    with pytest.raises(errors.PartitionBusyError, match="pid 77") as info:
        amd.destroy_partition(part.id)
    assert info.value.partition_id == part.id
    st.clear_processes(0)
    st.fail_next("amdsmi_set_gpu_memory_partition", "AMDGPU_RESTART_ERR")
    with pytest.raises(errors.PartitionBusyError, match="amdsmi status 54"):
        amd.destroy_partition(part.id)
    assert len(amd.inventory().partitions) == 8  # nothing changed
    st.fail_next("amdsmi_set_gpu_compute_partition", "BUSY")  # memory reset, then compute refused
    with pytest.raises(errors.PartitionBusyError, match="NPS1, its partitions still exist"):
        amd.destroy_partition(part.id)
    left = amd.inventory()
    assert len(left.partitions) == 8 and {p.profile for p in left.partitions} == {"cpx_nps1"}
    amd.destroy_partition(left.partitions[3].id)
    assert amd.inventory().partitions == ()


def test_the_fake_enforces_the_driver_rules() -> None:
    mod = make_fake_amdsmi(scenario("mi300x-8"))
    lib = mod.AmdSmiLibraryException
    mod.amdsmi_init()
    h = mod.amdsmi_get_processor_handles()[0]

    def code(fn: Any, *args: Any) -> int:
        with pytest.raises(lib) as info:
            fn(*args)
        return int(info.value.get_error_code())

    cp, mp = mod.AmdSmiComputePartitionType, mod.AmdSmiMemoryPartitionType
    with pytest.raises(mod.AmdSmiParameterException):
        mod.amdsmi_set_gpu_compute_partition(h, 5)  # a plain int is not the enum
    assert code(mod.amdsmi_set_gpu_compute_partition, h, cp.TPX) == 55  # not an 8-XCC mode
    assert code(mod.amdsmi_set_gpu_compute_partition, h, cp.INVALID) == 1
    assert code(mod.amdsmi_set_gpu_memory_partition, h, mp.NPS2) == 1  # not an MI300X memory mode
    mod.amdsmi_set_gpu_compute_partition(h, cp.SPX)  # the current mode: nothing happens
    assert mod._fake_state.generation == 0
    # NPS4 under SPX: the driver reloads and takes the automatic compute mode (CPX)
    mod.amdsmi_set_gpu_memory_partition(h, mp.NPS4)
    h = mod.amdsmi_get_processor_handles()[0]
    assert (mod.amdsmi_get_gpu_compute_partition(h), mod.amdsmi_get_gpu_memory_partition(h)) == ("CPX", "NPS4")
    assert code(mod.amdsmi_set_gpu_compute_partition, h, cp.SPX) == 55  # SPX needs NPS1
    assert code(mod.amdsmi_set_gpu_compute_partition, h, cp.DPX) == 55  # DPX needs NPS1 / NPS2
    mod.amdsmi_set_gpu_compute_partition(h, cp.QPX)  # QPX takes NPS4
    h = mod.amdsmi_get_processor_handles()[0]
    mod._fake_state.add_process(0, FakeProcess(1, "p", 1))
    assert code(mod.amdsmi_set_gpu_compute_partition, h, cp.CPX) == 30  # BUSY: KFD is in use
    assert code(mod.amdsmi_set_gpu_memory_partition, h, mp.NPS1) == 54  # the driver cannot reload
    mod._fake_state.privileged = False
    assert code(mod.amdsmi_set_gpu_memory_partition, h, mp.NPS1) == 10
    radeon = make_fake_amdsmi(scenario("radeon-rx7800xt"))
    radeon.amdsmi_init()
    rh = radeon.amdsmi_get_processor_handles()[0]
    assert code(radeon.amdsmi_set_gpu_compute_partition, rh, radeon.AmdSmiComputePartitionType.CPX) == 2
    assert code(radeon.amdsmi_get_gpu_accelerator_partition_profile_config, rh) == 2


def _real_interface() -> dict[str, list[str]] | None:
    """Parameter names of the installed amdsmi's functions, read without importing it (the real
    package does not import without ``libamd_smi.so``)."""
    # The path finder, not importlib.util.find_spec: a fake installed in sys.modules has no spec.
    spec = importlib.machinery.PathFinder.find_spec("amdsmi")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / "amdsmi_interface.py"
        if path.is_file():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            return {n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)}
    return None


def test_fake_signatures_match_the_real_bindings() -> None:
    real = _real_interface()
    if real is None:
        pytest.skip("the real amdsmi package is not installed (pip install amdsmi==7.0.2 to compare)")
    fake = make_fake_amdsmi(scenario("mi300x-8"))
    from accel.plugins.amd._carve import ACTUATION_CALLS

    for fn in (*ACTUATION_CALLS, "amdsmi_set_gpu_memory_partition_mode"):
        assert fn in real, f"{fn} is not in the real amdsmi"
    checked = 0
    for name in dir(fake):
        if name.startswith("amdsmi_") and inspect.isfunction(getattr(fake, name)) and name in real:
            assert list(inspect.signature(getattr(fake, name)).parameters) == real[name], name
            checked += 1
    assert checked >= 40


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_profiles_create_and_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    amd = ("--backend", "amd", "-o", "scenario=mi300x-8")
    code, out, _ = _cli(capsys, "partition", "profiles", "-i", "0", *amd, "--json")
    assert code == 0 and {d["name"] for d in json.loads(out)} == set(MI300X_MODES)
    code, out, _ = _cli(capsys, "partition", "create", "0", "cpx_nps4", *amd, "--json")
    made = json.loads(out)
    assert code == 0 and made["profile"] == "cpx_nps4" and made["id"].endswith("/cpx0")
    assert made["memory_bytes"] == 24 * GIB and made["compute_ratio"] == pytest.approx(0.125)
    code, _, err = _cli(capsys, "partition", "create", "0", "spx_nps4", *amd)
    assert code == 2 and err.strip().endswith("[partition.profile-not-supported]")
    code, out, _ = _cli(capsys, "partition", "clear", "0", "--backend", "amd", "-o", "scenario=mi300x-8-cpx", "--json")
    cleared = json.loads(out)
    assert code == 0 and len(cleared["destroyed"]) == 1 and cleared["refused"] == []  # its siblings went with it


def test_without_amdsmi_nothing_is_offered_and_create_says_why() -> None:
    backend = AmdBackend(BackendConfig(options={"scenario": "amdsmi-absent"}))
    try:
        inv = backend.inventory()
        assert inv.partition_profiles == ()
        with pytest.raises(errors.NotSupportedError, match="through amdsmi, which is not loaded"):
            backend.create_partition(inv.devices[0].id, "cpx_nps4")
    finally:
        backend.close()
