"""MIG actuation through NVML over the fake, which enforces the driver's rules and return codes."""

from __future__ import annotations

import json

import pytest

from accel import errors
from accel.plugin import BackendConfig, SupportsPartitionActuation, actuator
from accel.plugins.nvidia import NvidiaPlugin
from accel.plugins.nvidia._backend import NvidiaBackend
from accel.plugins.nvidia._nvml import Nvml
from accel.plugins.nvidia.testing import FakeNVML

MIB = 1024 * 1024


def _open(name: str = "a100-mig") -> tuple[NvidiaBackend, FakeNVML]:
    fake = FakeNVML(name)
    backend = NvidiaBackend(BackendConfig(options={"scenario": name}, enrich_from_sysfs=False), Nvml(fake),
                            plugin_version="test", scenario=name)
    return backend, fake


def _cleared() -> tuple[NvidiaBackend, FakeNVML, str]:
    """The a100-mig GPU with every instance destroyed (its busy 3g.40gb's process gone first)."""
    backend, fake = _open()
    fake.scenario.gpus[0].processes.clear()
    for part in backend.partitions():
        backend.destroy_partition(part.id)
    assert backend.partitions() == ()
    return backend, fake, backend.inventory().devices[0].id


def test_the_plugin_declares_actuation() -> None:
    backend, _ = _open()
    assert isinstance(backend, SupportsPartitionActuation)
    assert actuator(backend, NvidiaPlugin.info.capabilities) is backend


def test_mig_mode_off_is_refused() -> None:
    backend, fake = _open("h100-nvswitch-8")
    dev = backend.inventory().devices[0].id
    with pytest.raises(errors.PartitionModeOffError, match="MIG mode is off"):
        backend.create_partition(dev, "1g.10gb")
    assert fake.calls["nvmlDeviceCreateGpuInstance"] == 0


def test_a_gpu_without_mig_offers_no_profile() -> None:
    backend, _ = _open("rtx4090-4")
    dev = backend.inventory().devices[0].id
    with pytest.raises(errors.PartitionProfileNotSupportedError, match="not MIG-capable"):
        backend.create_partition(dev, "1g.10gb")


def test_created_instance_is_in_the_next_inventory_with_its_memory_and_compute_share() -> None:
    backend, _fake, dev = _cleared()
    part = backend.create_partition(dev, "4g.40gb")
    assert part.placement is not None and (part.placement.start, part.placement.size) == (0, 4)
    (seen,) = backend.inventory().partitions
    assert seen == part
    assert seen.memory_bytes == 40192 * MIB and seen.compute_units == 56
    assert seen.compute_ratio == pytest.approx(4 / 7)
    assert seen.uuid is not None and seen.id == f"nvidia:{seen.uuid}" and seen.ci_id == 0


def test_placements_follow_the_profile_and_overlaps_are_insufficient_resources() -> None:
    backend, fake, dev = _cleared()
    three = backend.create_partition(dev, "3g.40gb")  # the fake takes the highest free start
    assert three.placement is not None and three.placement.start == 4
    with pytest.raises(errors.PartitionNoPlacementError) as info:
        backend.create_partition(dev, "7g.80gb")
    assert info.value.vendor_code == "nvidia.nvml:23"
    calls = fake.calls["nvmlDeviceCreateGpuInstanceWithPlacement"]
    with pytest.raises(errors.PartitionNoPlacementError, match="cannot start at slot 1"):
        backend.create_partition(dev, "2g.20gb", placement_start=1)
    assert fake.calls["nvmlDeviceCreateGpuInstanceWithPlacement"] == calls  # refused before NVML
    with pytest.raises(errors.PartitionNoPlacementError, match="at slot 4"):
        backend.create_partition(dev, "2g.20gb", placement_start=4)
    two = backend.create_partition(dev, "2g.20gb", placement_start=2)
    assert two.placement is not None and two.placement.start == 2
    ones = [backend.create_partition(dev, "1g.10gb") for _ in range(2)]
    assert sorted(p.placement.start for p in ones if p.placement) == [0, 1]
    with pytest.raises(errors.PartitionNoPlacementError):
        backend.create_partition(dev, "1g.10gb")


def test_unknown_profile_names_what_is_offered() -> None:
    backend, _fake, dev = _cleared()
    with pytest.raises(errors.PartitionProfileNotSupportedError, match=r"offered: 1g\.10gb"):
        backend.create_partition(dev, "1g.5gb")  # an A100-40GB profile


def test_destroy_with_processes_is_busy_and_unknown_ids_are_not_found() -> None:
    backend, _fake = _open()
    busy = next(p for p in backend.partitions() if p.profile == "3g.40gb")  # pid 7001 runs on it
    with pytest.raises(errors.PartitionBusyError) as info:
        backend.destroy_partition(busy.id)
    assert info.value.vendor_code == "nvidia.nvml:19" and info.value.partition_id == busy.id
    assert busy in backend.partitions()
    with pytest.raises(errors.PartitionNotFoundError):
        backend.destroy_partition("nvidia:MIG-00000000-0000-0000-0000-000000000000")


def test_a_compute_instance_failure_destroys_the_gpu_instance_again() -> None:
    backend, fake, dev = _cleared()
    fake.scenario.gpus[0].errors["nvmlGpuInstanceCreateComputeInstance"] = 23
    with pytest.raises(errors.PartitionCreateFailedError, match="was destroyed again") as info:
        backend.create_partition(dev, "2g.20gb")
    assert info.value.left_behind == () and info.value.vendor_code == "nvidia.nvml:23"
    assert fake._migs.bare == {} and backend.partitions() == ()
    del fake.scenario.gpus[0].errors["nvmlGpuInstanceCreateComputeInstance"]
    assert backend.create_partition(dev, "7g.80gb").profile == "7g.80gb"  # nothing was left in the way


def test_a_failed_undo_is_reported_with_what_is_left() -> None:
    backend, fake, dev = _cleared()
    fake.scenario.gpus[0].errors["nvmlGpuInstanceCreateComputeInstance"] = 23
    fake.scenario.gpus[0].errors["nvmlGpuInstanceDestroy"] = 4
    with pytest.raises(errors.PartitionCreateFailedError, match="is left behind") as info:
        backend.create_partition(dev, "2g.20gb")
    assert info.value.left_behind == (f"{dev}/gi1",)
    assert list(fake._migs.bare) == [(0, 1)]


def test_without_privileges_creation_is_permission_denied() -> None:
    backend, fake, dev = _cleared()
    fake.scenario.gpus[0].mig_privileged = False
    with pytest.raises(errors.PermissionDeniedError):
        backend.create_partition(dev, "1g.10gb")


def _killed_half_way(fake: FakeNVML, dev: str, profile: str) -> None:
    """A create whose process dies (SIGKILL) between the GPU instance and its compute instance."""
    from accel.plugins.nvidia.testing._fake_mig import Killed

    backend = NvidiaBackend(BackendConfig(options={"scenario": "a100-mig"}, enrich_from_sysfs=False), Nvml(fake),
                            plugin_version="test", scenario="a100-mig")
    fake._migs.kill_at = "nvmlGpuInstanceCreateComputeInstance"
    with pytest.raises(Killed):
        backend.create_partition(dev, profile)
    # no undo ran: the driver holds a GPU instance without a compute instance, which no MIG device shows
    assert len(fake._migs.bare) == 1


def test_a_create_killed_half_way_leaves_a_gpu_instance_the_next_inventory_lists_and_clear_destroys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from accel.cli import main
    from accel.model import HealthState, Operational

    _backend, fake, dev = _cleared()
    kept = _backend.create_partition(dev, "1g.10gb")
    _killed_half_way(fake, dev, "3g.40gb")
    # the next process's inventory (a fresh backend over the same driver state) lists it
    after = NvidiaBackend(BackendConfig(options={"scenario": "a100-mig"}, enrich_from_sysfs=False), Nvml(fake),
                          plugin_version="test", scenario="a100-mig")
    inv = after.inventory()
    assert inv.problems == ()
    orphan = next(p for p in inv.partitions if p.uuid is None)
    assert {p.id for p in inv.partitions} == {kept.id, orphan.id}
    assert orphan.id == f"{dev}/gi{orphan.gi_id}" and orphan.ci_id is None and orphan.profile == "3g.40gb"
    # the fake takes the highest free start: the 1g.10gb sits at 6, so the 3g.40gb went to 0
    assert orphan.placement is not None and (orphan.placement.start, orphan.placement.size) == (0, 4)
    prof = next(p for p in after.partition_profiles() if p.name == "3g.40gb")
    assert orphan.memory_bytes == prof.memory_bytes and orphan.compute_units == prof.compute_units
    assert orphan.health.operational is Operational.OFFLINE and orphan.health.state is HealthState.UNHEALTHY
    assert [c.reason for c in orphan.health.conditions] == ["NoComputeInstance"]
    assert orphan.binding.visible_id is None  # nothing a job could be shown
    # what it holds is held: its slots are taken
    with pytest.raises(errors.PartitionNoPlacementError):
        after.create_partition(dev, "3g.40gb", placement_start=0)
    # `accel partition clear` (the CLI over the same fake driver) destroys both: zero left
    monkeypatch.setattr("accel.plugins.nvidia.testing.FakeNVML", lambda _name: fake)
    code = main(["partition", "clear", "--backend", "nvidia", "-o", "scenario=a100-mig", "--json"])
    out, _err = capsys.readouterr()
    assert code == 0, out
    assert sorted(json.loads(out)["destroyed"]) == sorted([kept.id, orphan.id])
    assert fake._migs.bare == {} and fake.scenario.gpus[0].mig_slots == {}
    assert after.partitions() == ()
    assert after.create_partition(dev, "7g.80gb").profile == "7g.80gb"  # the whole GPU is free again


def test_a_bare_gpu_instance_is_destroyed_by_id_and_a_second_destroy_is_not_found() -> None:
    backend, fake, dev = _cleared()
    _killed_half_way(fake, dev, "2g.20gb")
    (orphan,) = backend.partitions()
    calls = fake.calls["nvmlComputeInstanceDestroy"]
    backend.destroy_partition(orphan.id)
    assert fake.calls["nvmlComputeInstanceDestroy"] == calls  # no compute instance to destroy
    assert backend.partitions() == () and fake._migs.bare == {}
    with pytest.raises(errors.PartitionNotFoundError):
        backend.destroy_partition(orphan.id)


def test_without_privileges_bare_gpu_instances_cannot_be_listed() -> None:
    backend, fake, dev = _cleared()
    _killed_half_way(fake, dev, "2g.20gb")
    fake.scenario.gpus[0].mig_privileged = False
    assert backend.partitions() == ()  # NO_PERMISSION: as placements, unknown; nothing invented
    assert fake.calls["nvmlDeviceGetGpuInstances"] >= 1


def test_the_scheduler_never_places_on_a_bare_gpu_instance() -> None:
    from accel.scheduler import host_spec_from_inventory
    from accel.service._partitions import schedulable

    backend, fake, dev = _cleared()
    kept = backend.create_partition(dev, "1g.10gb")
    _killed_half_way(fake, dev, "2g.20gb")
    inv, _pools = schedulable(backend.inventory())
    specs = {d.id: d for d in host_spec_from_inventory(inv).devices}
    orphan = next(p for p in backend.partitions() if p.id != kept.id)
    assert specs[kept.id].healthy is True  # as healthy as its device
    assert specs[orphan.id].healthy is False
