"""Visibility variables from the placed devices' bindings, and the executors' inventory sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.errors import ConfigError
from accel.integrations.slurm import generate, task_prolog_lines
from accel.service.executors._sources import inventory_source, node_inventory_source
from accel.service.executors._visibility import job_visibility_env, placed_devices

from ._common import host


def test_each_vendor_sees_its_placed_devices_and_the_others_nothing() -> None:
    inv = host()
    npus = [d for d in inv.devices if d.vendor == "huawei"]
    env = job_visibility_env(inv, [npus[2].id, npus[0].id])
    # The Ascend variable holds what the binding names (the logic id), in the host's order.
    assert env == {
        "ASCEND_RT_VISIBLE_DEVICES": f"{npus[0].binding.visible_id},{npus[2].binding.visible_id}",
        "CUDA_VISIBLE_DEVICES": "",
    }
    assert job_visibility_env(inv, []) == {"ASCEND_RT_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": ""}


def test_the_rule_is_the_slurm_task_prologs() -> None:
    inv = host()
    conf = generate(inv)
    chosen = [conf.records[1], conf.records[4], conf.records[5]]
    exports = dict(
        line.removeprefix("export ").split("=", 1)
        for line in task_prolog_lines(chosen, conf)
        if line.startswith("export ")
    )
    assert job_visibility_env(inv, [r.device_id for r in chosen]) == exports


def test_a_mig_instance_is_seen_by_its_own_uuid() -> None:
    inv = host("a100-mig")
    part = inv.partitions[0]
    assert job_visibility_env(inv, [part.id]) == {"CUDA_VISIBLE_DEVICES": part.binding.visible_id}
    (placed,) = placed_devices(inv, [part.id])
    assert placed.visibility_env == (("CUDA_VISIBLE_DEVICES", part.binding.visible_id),)
    assert placed.model.endswith(part.profile) and placed.vendor == "nvidia"


def test_a_device_without_a_node_of_its_own_is_still_seen() -> None:
    inv = host("rtx4090-4")
    dev = inv.devices[0]
    bare = dev.model_copy(update={"binding": dev.binding.model_copy(update={"device_nodes": ()})})
    inv = inv.model_copy(update={"devices": (bare, *inv.devices[1:])})
    assert generate(inv).problems  # gres.conf cannot list it ...
    assert job_visibility_env(inv, [bare.id]) == {"CUDA_VISIBLE_DEVICES": dev.binding.visible_id}  # ... accel can


def test_placed_devices_carry_their_own_variable() -> None:
    inv = host()
    placed = placed_devices(inv, [d.id for d in inv.devices])
    assert [p.device_id for p in placed] == [d.id for d in inv.devices]
    assert all(p.host == inv.host.hostname for p in placed)
    assert [p.visibility_env for p in placed] == [((d.binding.visible_env, d.binding.visible_id),) for d in inv.devices]
    with pytest.raises(ConfigError, match="nvidia:GPU-nope"):
        placed_devices(inv, ["nvidia:GPU-nope"])
    with pytest.raises(ConfigError, match="nvidia:GPU-nope"):
        job_visibility_env(inv, ["nvidia:GPU-nope"])


def test_inventory_sources(tmp_path: Path) -> None:
    inv = host("rtx4090-4", name="n")
    path = tmp_path / "n-00000.json"
    path.write_text(inv.model_dump_json())
    assert inventory_source(str(path)).inventory().devices == inv.devices
    assert inventory_source(str(path)).telemetry([inv.devices[0].id]) == ()
    assert node_inventory_source(str(tmp_path))("n-00000").devices == inv.devices
    sim = inventory_source("sim:rtx4090-4")
    devices = sim.inventory().devices
    assert len(devices) == 4
    assert [t.device_id for t in sim.telemetry([devices[1].id])] == [devices[1].id]
    assert len(node_inventory_source("sim:dgx-h100")("any-node").devices) == 8
    with pytest.raises(ConfigError, match="not a plain file name"):
        node_inventory_source(str(tmp_path))("../etc/passwd")
    with pytest.raises(ConfigError, match="cannot be read"):
        node_inventory_source(str(tmp_path))("missing")
    (tmp_path / "bad.json").write_text('{"host": {}}')
    with pytest.raises(ConfigError, match="not an accel inventory"):
        inventory_source(str(tmp_path / "bad.json")).inventory()
    with pytest.raises(ConfigError, match="unknown simulator profile"):
        inventory_source("sim:no-such-profile")
    with pytest.raises(ConfigError):
        inventory_source("/etc/passwd")
    with pytest.raises(ConfigError):
        node_inventory_source(str(tmp_path / "nowhere"))
