"""The simulator's partition actuation: real placement rules, modes, templates and faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel import errors
from accel.model import PartitionScheme
from accel.plugin import BackendConfig, Capability, SupportsPartitionActuation, actuator
from accel.sim import SimBackend, SimPlugin

GIB = 1024**3


def _open(profile: str, **options: str) -> SimBackend:
    backend = SimPlugin().open(BackendConfig(options={"profile": profile, **options}))
    assert isinstance(backend, SimBackend)
    return backend


def test_the_simulator_declares_and_implements_actuation() -> None:
    backend = _open("dgx-h100")
    assert Capability.PARTITION_ACTUATION in SimPlugin.info.capabilities
    assert isinstance(backend, SupportsPartitionActuation)
    assert actuator(backend, SimPlugin.info.capabilities) is backend
    with pytest.raises(errors.NotSupportedError, match="does not declare"):
        actuator(backend, frozenset({Capability.PARTITIONS}))
    with pytest.raises(errors.NotSupportedError, match="cannot create"):
        actuator(object())


def test_h100_profiles_carry_memory_compute_share_count_and_placements() -> None:
    backend = _open("dgx-h100")
    dev = backend.inventory().devices[0]
    profiles = {p.name: p for p in backend.partition_profiles() if p.parent_id == dev.id}
    assert list(profiles) == ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    three = profiles["3g.40gb"]
    assert (three.profile_id, three.max_instances, three.compute_units) == (9, 2, 60)
    assert three.compute_ratio == pytest.approx(3 / 7, abs=1e-6)
    assert [(p.start, p.size) for p in three.placements] == [(0, 4), (4, 4)]
    assert [(p.start, p.size) for p in profiles["7g.80gb"].placements] == [(0, 8)]


def test_mig_mode_off_is_refused_with_its_own_error() -> None:
    backend = _open("dgx-h100")  # MIG mode is off on every GPU of this profile
    dev = backend.inventory().devices[0]
    with pytest.raises(errors.PartitionModeOffError, match="MIG mode is off") as info:
        backend.create_partition(dev.id, "1g.10gb")
    assert info.value.device_id == dev.id and info.value.code == "partition.mode-off"


def _cleared_a100() -> tuple[SimBackend, str]:
    backend = _open("a100-mig")
    dev = backend.inventory().devices[0].id
    for part in backend.partitions():
        backend.destroy_partition(part.id)
    assert backend.partitions() == ()
    return backend, dev


def test_mig_placements_follow_the_profile_starts_and_never_overlap() -> None:
    backend, dev = _cleared_a100()
    three = backend.create_partition(dev, "3g.40gb")
    assert three.placement is not None and (three.placement.start, three.placement.size) == (4, 4)
    four = backend.create_partition(dev, "4g.40gb")  # slot 0 was kept free for it
    assert four.placement is not None and four.placement.start == 0
    with pytest.raises(errors.PartitionNoPlacementError) as info:
        backend.create_partition(dev, "1g.10gb")
    assert info.value.code == "partition.no-placement" and info.value.profile == "1g.10gb"
    backend.destroy_partition(four.id)
    with pytest.raises(errors.PartitionNoPlacementError, match="cannot start at slot 1"):
        backend.create_partition(dev, "2g.20gb", placement_start=1)
    two = backend.create_partition(dev, "2g.20gb", placement_start=2)
    assert two.placement is not None and two.placement.start == 2
    with pytest.raises(errors.PartitionNoPlacementError, match="at slot 2"):
        backend.create_partition(dev, "1g.10gb", placement_start=2)


def test_mig_max_instances_is_enforced() -> None:
    backend, dev = _cleared_a100()
    made = [backend.create_partition(dev, "1g.10gb") for _ in range(7)]
    assert sorted(p.placement.start for p in made if p.placement) == list(range(7))
    with pytest.raises(errors.PartitionNoPlacementError):
        backend.create_partition(dev, "1g.10gb")


def test_a_created_partition_is_in_the_next_inventory_with_its_memory_and_compute_share() -> None:
    backend, dev = _cleared_a100()
    part = backend.create_partition(dev, "2g.20gb")
    inv = backend.inventory()
    (seen,) = inv.partitions
    assert seen == part
    assert seen.memory_bytes == 20937965568 and seen.compute_units == 28
    assert seen.compute_ratio == pytest.approx(2 / 7, abs=1e-6)
    assert seen.uuid is not None and seen.binding.visible_id == seen.uuid and seen.gi_id == 1


def test_unknown_profile_and_partition_are_typed() -> None:
    backend, dev = _cleared_a100()
    with pytest.raises(errors.PartitionProfileNotSupportedError, match=r"offered: 1g\.10gb"):
        backend.create_partition(dev, "vir04")
    with pytest.raises(errors.PartitionNotFoundError) as info:
        backend.destroy_partition("nvidia:MIG-nope")
    assert info.value.partition_id == "nvidia:MIG-nope"


def test_amd_modes_apply_to_the_whole_device_with_legal_pairs_only() -> None:
    backend = _open("mi300x-8")
    dev = backend.inventory().devices[0]
    names = [p.name for p in backend.partition_profiles() if p.parent_id == dev.id]
    assert names == ["dpx_nps1", "qpx_nps1", "cpx_nps1", "cpx_nps4"]  # no qpx_nps4, no dpx_nps4
    with pytest.raises(errors.PartitionProfileNotSupportedError):
        backend.create_partition(dev.id, "dpx_nps4")
    first = backend.create_partition(dev.id, "cpx_nps4")
    inv = backend.inventory()
    mine = [p for p in inv.partitions if p.parent_id == dev.id]
    assert first == mine[0] and len(mine) == 8
    assert all(p.memory_bytes == dev.memory_total_bytes // 8 and p.compute_units == 38 for p in mine)
    mode = inv.devices[0].partition_mode
    assert (mode.scheme, mode.compute_mode, mode.memory_mode) == (PartitionScheme.AMD_XCP, "cpx", "nps4")
    with pytest.raises(errors.PartitionNoPlacementError, match="destroy its partitions first"):
        backend.create_partition(dev.id, "dpx_nps1")
    backend.destroy_partition(mine[5].id)  # any one returns the device to SPX + NPS1
    assert backend.partitions() == ()
    assert backend.inventory().devices[0].partition_mode.compute_mode == "spx"


def test_amd_mode_change_is_refused_while_processes_run() -> None:
    backend = _open("mi300x-8", faults="partition_busy:1")
    devs = backend.inventory().devices
    with pytest.raises(errors.PartitionProcessesRunningError):
        backend.create_partition(devs[1].id, "dpx_nps1")
    assert backend.create_partition(devs[0].id, "dpx_nps1").parent_id == devs[0].id


def test_ascend_vnpu_templates_take_cores_and_memory_from_the_chip() -> None:
    backend = _open("ascend-910b-8")
    dev = backend.inventory().devices[0]
    profiles = {p.name: p for p in backend.partition_profiles() if p.parent_id == dev.id}
    assert set(profiles) == {"vir05_1c_16g", "vir10_3c_32g"}  # 910B3's templates
    assert profiles["vir10_3c_32g"].memory_bytes == 32 * GIB and profiles["vir10_3c_32g"].compute_ratio == 0.5
    big = backend.create_partition(dev.id, "vir10_3c_32g")
    small = [backend.create_partition(dev.id, "vir05_1c_16g") for _ in range(2)]
    assert big.id.endswith("/vnpu100") and [p.id[-3:] for p in small] == ["101", "102"]
    assert small[0].compute_units == 5 and small[0].compute_ratio == 0.25
    with pytest.raises(errors.PartitionNoPlacementError, match="AI cores"):
        backend.create_partition(dev.id, "vir05_1c_16g")
    with pytest.raises(errors.PartitionProfileNotSupportedError):
        backend.create_partition(dev.id, "vir16")  # a 910A template, not a 910B3 one
    assert len(backend.inventory().partitions) == 3


def test_destroy_is_refused_while_the_partition_is_busy() -> None:
    backend = _open("ascend-910b-8")
    dev = backend.inventory().devices[0].id
    part = backend.create_partition(dev, "vir05_1c_16g")
    from accel.sim import Fault, FaultKind

    backend.inject(Fault(FaultKind.PARTITION_BUSY, 0, backend.tick))
    with pytest.raises(errors.PartitionBusyError) as info:
        backend.destroy_partition(part.id)
    assert info.value.partition_id == part.id
    assert part in backend.partitions()
    backend.clear_faults()
    backend.destroy_partition(part.id)
    assert backend.partitions() == ()


@pytest.mark.parametrize("profile,device,name", [("a100-mig", 0, "1g.10gb"), ("ascend-910b-8", 0, "vir05_1c_16g"),
                                                  ("mi300x-8", 0, "qpx_nps1")])
def test_a_create_failing_half_way_leaves_nothing_behind(profile: str, device: int, name: str) -> None:
    backend = _open(profile, faults=f"partition_create_fail:{device}")
    before = backend.partitions()
    dev = backend.inventory().devices[device].id
    if profile == "a100-mig":
        backend.destroy_partition(before[-1].id)
        before = backend.partitions()
    with pytest.raises(errors.PartitionCreateFailedError, match="undone") as info:
        backend.create_partition(dev, name)
    assert info.value.left_behind == ()
    assert backend.partitions() == before


def test_a_create_failing_half_way_that_cannot_be_undone_is_reported_and_inventoried() -> None:
    backend = _open("ascend-910b-8", faults="partition_create_fail:0=leak")
    dev = backend.inventory().devices[0].id
    with pytest.raises(errors.PartitionCreateFailedError, match="left behind") as info:
        backend.create_partition(dev, "vir05_1c_16g")
    (left,) = info.value.left_behind
    assert [p.id for p in backend.inventory().partitions] == [left]
    backend.clear_faults()
    backend.destroy_partition(left)
    assert backend.partitions() == ()


def test_the_state_file_is_shared_by_backends_and_survives_reopening(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    one = _open("ascend-910b-8", state=str(state))
    dev = one.inventory().devices[2].id
    part = one.create_partition(dev, "vir05_1c_16g")
    two = _open("ascend-910b-8", state=str(state))
    assert two.partitions() == (part,)
    two.destroy_partition(part.id)
    assert one.partitions() == ()
    assert json.loads(state.read_text())["made"] == []
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temporary file renamed over it


@pytest.mark.parametrize("text,why", [("{", "not a state file"), ('{"version": 2}', "version-1"),
                                      ('{"version": 1, "made": {}}', "'made' must be a list")])
def test_a_bad_state_file_is_a_config_error(tmp_path: Path, text: str, why: str) -> None:
    state = tmp_path / "state.json"
    state.write_text(text)
    with pytest.raises(errors.ConfigError, match=why):
        _open("a100-mig", state=str(state))


def test_a_lost_device_cannot_be_partitioned() -> None:
    backend = _open("ascend-910b-8", faults="device_lost:0")
    dev = backend.inventory().devices[0].id
    with pytest.raises(errors.DeviceLostError):
        backend.create_partition(dev, "vir05_1c_16g")
