"""The scheduler's health input: a suspected leak makes a device degraded (placed last), not unusable."""

from __future__ import annotations

from accel.leak import LeakDetector, LeakWatch
from accel.plugin import BackendConfig
from accel.scheduler import host_spec_from_inventory
from accel.sim import PLUGIN


def test_a_leaking_device_is_degraded_for_placement_and_the_others_are_not() -> None:
    backend = PLUGIN.open(BackendConfig(options={"profile": "dgx-h100", "seed": "1",
                                                 "faults": "memory_leak:2@200=268435456"}))
    watch = LeakWatch(LeakDetector())
    try:
        inv = backend.inventory()
        for tick in range(1, 800):
            inv = backend.inventory()
            watch.observe(inv, 1.7e9 + tick * 10.0)
            if watch.conditions():
                break
        annotated = watch.annotate(inv)
    finally:
        backend.close()
    leaking = inv.devices[2].id
    assert set(watch.conditions()) == {leaking}
    spec = host_spec_from_inventory(annotated)
    by_id = {d.id: d for d in spec.devices}
    assert by_id[leaking].healthy and by_id[leaking].degraded
    assert not any(d.degraded for i, d in by_id.items() if i != leaking)
    # Without the annotation the same reading is not degraded: the leak is the only reason.
    assert not host_spec_from_inventory(inv).devices[2].degraded
