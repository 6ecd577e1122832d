"""The fake NVML's scenarios and the simulator's NVIDIA profiles describe the same machines."""

from __future__ import annotations

from typing import Any

import pytest

from accel.model import HostInventory
from accel.plugin import BackendConfig
from accel.plugins.nvidia import PLUGIN as NVIDIA
from accel.sim import PLUGIN as SIM

PAIRS = [("h100-nvswitch-8", "dgx-h100"), ("rtx4090-4", "rtx4090-4"), ("a100-mig", "a100-mig")]


def _facts(inv: HostInventory) -> dict[str, Any]:
    return {
        "devices": [
            (d.id, d.model, d.memory_total_bytes, d.pci.bus_id if d.pci else None, d.numa_node, d.cpu_affinity,
             d.serial_number, d.compute_capability, d.partition_mode.scheme.value)
            for d in inv.devices
        ],
        "partitions": sorted(
            (p.id, p.parent_id, p.profile, p.gi_id, (p.placement.start, p.placement.size) if p.placement else None,
             p.memory_bytes, p.compute_units)
            for p in inv.partitions
        ),
        "links": sorted((min(x.a, x.b), max(x.a, x.b), x.type.value, x.count) for x in inv.links
                        if x.type.value in ("nvlink", "nvswitch")),
        "domain_sizes": sorted(d.size for d in inv.domains),
    }


@pytest.mark.parametrize(("scenario", "profile"), PAIRS)
def test_fake_and_simulator_agree(scenario: str, profile: str) -> None:
    with NVIDIA.open(BackendConfig(options={"scenario": scenario})) as fake:
        fake_facts = _facts(fake.inventory())
    with SIM.open(BackendConfig(options={"profile": profile})) as sim:
        sim_facts = _facts(sim.inventory())
    assert fake_facts == sim_facts
