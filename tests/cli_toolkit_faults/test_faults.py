"""Lost devices and unreadable health in the shared CLI backend (accel.toolkit._snapshot.CliBackend).

A vendor tool reports a device that fell off the bus by no longer listing it.  These tests drive
that through the public API: the conformance hook ``inject_fault`` over the shipped replays of
an 8x Ascend 910B3 host, a 2x MLU370-X8 host and an 8x MetaX C550 host (and the 910A replay,
whose ``npu-smi info`` lists processes), plus a hand-made sequence of snapshots where a device
really disappears from the tool output and comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from accel.conformance import Fault, FaultInjector
from accel.errors import DeviceError, DeviceLostError, NotSupportedError
from accel.model import (
    Action,
    Device,
    DeviceKind,
    HealthState,
    Link,
    LinkState,
    LinkType,
    Operational,
    ProcessUsage,
    Severity,
    Subsystem,
    Telemetry,
)
from accel.plugin import Backend, BackendConfig, BackendPlugin, SupportsProcesses
from accel.plugins import ascend, cambricon, metax
from accel.toolkit import Snapshot, scenario_path
from accel.toolkit._plugin import CliBackendPlugin
from accel.toolkit._snapshot import CliBackend
from accel.tools import ReplayRunner

# (plugin, scenario, device count, model, first bus id, vendor prefix of the vendor code)
SCENARIOS: list[tuple[CliBackendPlugin, str, int, str, str, str]] = [
    (ascend.PLUGIN, "910b-8", 8, "Ascend 910B3", "0000:c1:00.0", "huawei"),
    (cambricon.PLUGIN, "mlu370-x8", 2, "MLU370-X8", "0000:39:00.0", "cambricon"),
    (metax.PLUGIN, "c550-8", 8, "MetaX C550", "0000:0f:00.0", "metax"),
]
IDS = [s[1] for s in SCENARIOS]


@pytest.fixture
def opened() -> Iterator[Callable[[BackendPlugin, BackendConfig], Backend]]:
    backends: list[Backend] = []

    def open_(plugin: BackendPlugin, config: BackendConfig) -> Backend:
        b = plugin.open(config)
        backends.append(b)
        return b

    yield open_
    for b in backends:
        b.close()


def _injector(backend: Backend) -> FaultInjector:
    assert isinstance(backend, FaultInjector)
    return backend


@pytest.mark.parametrize(("plugin", "scenario", "count", "model", "bus", "vendor"), SCENARIOS, ids=IDS)
def test_device_lost_keeps_identity_and_isolates(
    opened: Callable[[BackendPlugin, BackendConfig], Backend],
    plugin: CliBackendPlugin,
    scenario: str,
    count: int,
    model: str,
    bus: str,
    vendor: str,
) -> None:
    backend = opened(plugin, BackendConfig(options={"scenario": scenario}))
    before = backend.inventory()
    assert len(before.devices) == count
    first = before.devices[0]
    assert (first.model, first.pci.bus_id if first.pci else None) == (model, bus)
    others = [d.id for d in before.devices[1:]]
    lost_links = {(lk.a, lk.b) for lk in before.links if first.id in (lk.a, lk.b)}

    _injector(backend).inject_fault(Fault.DEVICE_LOST, first.id)

    after = backend.inventory()
    # Still reported, in its place, with the identity it had.
    assert [d.id for d in after.devices] == [d.id for d in before.devices]
    gone = after.devices[0]
    assert (gone.id, gone.model, gone.pci.bus_id if gone.pci else None) == (first.id, model, bus)
    assert gone.memory == first.memory
    assert gone.health.operational is Operational.LOST
    assert gone.health.state is HealthState.UNHEALTHY
    (cond,) = gone.health.conditions
    assert (cond.reason, cond.subsystem, cond.severity, cond.action) == (
        "DeviceLost", Subsystem.PCIE, Severity.FATAL, Action.REBOOT_NODE,
    )
    assert cond.vendor_code == f"{vendor}.tool:device-missing"
    assert cond.vendor_code.split(".", 1)[0] == gone.vendor  # the kit's vendor-codes rule
    # The others keep answering, online.
    assert all(d.health.operational is Operational.ONLINE for d in after.devices[1:])
    health = backend.health()
    assert health[first.id].operational is Operational.LOST
    assert all(health[i].operational is Operational.ONLINE for i in others)
    # Telemetry: none for the lost one, all the others; asking for it by id says it is lost.
    assert sorted(t.device_id for t in backend.telemetry()) == sorted(others)
    assert [t.device_id for t in backend.telemetry(others)] == others
    with pytest.raises(DeviceLostError) as err:
        backend.telemetry([first.id])
    assert err.value.device_id == first.id
    # Its links read down; links between the survivors are untouched.
    assert {(lk.a, lk.b) for lk in after.links if first.id in (lk.a, lk.b)} == lost_links
    for lk in after.links:
        want = LinkState.DOWN if first.id in (lk.a, lk.b) else next(
            x.state for x in before.links if (x.a, x.b, x.type) == (lk.a, lk.b, lk.type)
        )
        assert lk.state is want
    # The condition's first_seen stays put across snapshots.
    again = backend.health([first.id])[first.id].conditions[0]
    assert again.first_seen == cond.first_seen


@pytest.mark.parametrize(("plugin", "scenario", "count", "model", "bus", "vendor"), SCENARIOS, ids=IDS)
def test_health_not_supported_is_unknown_for_that_device_only(
    opened: Callable[[BackendPlugin, BackendConfig], Backend],
    plugin: CliBackendPlugin,
    scenario: str,
    count: int,
    model: str,
    bus: str,
    vendor: str,
) -> None:
    # A replay given as config.runner (``accel --replay DIR``) counts as a replay too.
    config = BackendConfig(runner=ReplayRunner(scenario_path(plugin.package, scenario)))
    backend = opened(plugin, config)
    before = backend.inventory()
    target = before.devices[-1]
    _injector(backend).inject_fault(Fault.HEALTH_NOT_SUPPORTED, target.id)

    health = backend.health()
    assert len(health) == count
    assert health[target.id].monitored is False
    assert health[target.id].state is HealthState.UNKNOWN
    assert health[target.id].operational is Operational.ONLINE
    for d in before.devices[:-1]:
        # Each read is a new health reading: the same health, checked again (checked_at is the
        # read time where the tool printed health, so it moves on; it never goes back).
        now, then = health[d.id], d.health
        assert now.model_copy(update={"checked_at": None}) == then.model_copy(update={"checked_at": None})
        assert (now.checked_at is None) == (then.checked_at is None)
        assert now.checked_at is None or then.checked_at is None or now.checked_at >= then.checked_at
    after = backend.inventory()
    dev = next(d for d in after.devices if d.id == target.id)
    assert (dev.model, dev.pci.bus_id if dev.pci else None) == (target.model, target.pci.bus_id if target.pci else None)
    assert dev.health.state is HealthState.UNKNOWN
    # Its readings are still there: only health is unreadable.
    assert target.id in {t.device_id for t in backend.telemetry()}


def test_lost_device_processes_are_omitted(opened: Callable[[BackendPlugin, BackendConfig], Backend]) -> None:
    backend = opened(ascend.PLUGIN, BackendConfig(options={"scenario": "910a-8"}))
    before = backend.inventory()
    assert len(before.processes) == 32
    busy = before.processes[0].device_id
    _injector(backend).inject_fault(Fault.DEVICE_LOST, busy)
    assert isinstance(backend, SupportsProcesses)
    procs = backend.processes()
    assert busy not in {p.device_id for p in procs}
    assert len(procs) == len([p for p in before.processes if p.device_id != busy])
    assert backend.processes([busy]) == ()


def test_faults_need_a_replay_and_a_known_fault(opened: Callable[[BackendPlugin, BackendConfig], Backend]) -> None:
    real = opened(metax.PLUGIN, BackendConfig())  # the real mx-smi: never simulated
    with pytest.raises(NotSupportedError):
        _injector(real).inject_fault(Fault.DEVICE_LOST, "metax:pci-0000:0f:00.0")
    replay = opened(metax.PLUGIN, BackendConfig(options={"scenario": "c550-8"}))
    with pytest.raises(NotSupportedError):
        _injector(replay).inject_fault(cast(Fault, "xid_79"), "metax:pci-0000:0f:00.0")
    with pytest.raises(DeviceError) as err:
        _injector(replay).inject_fault(Fault.DEVICE_LOST, "metax:pci-0000:ff:00.0")
    assert err.value.device_id == "metax:pci-0000:ff:00.0"
    assert not isinstance(err.value, NotSupportedError)
    assert len(replay.inventory().devices) == 8  # nothing was injected


# -- the detection path itself: a tool that stops listing a device, then lists it again --------
NOW = datetime(2024, 5, 1, tzinfo=UTC)


def _dev(n: int) -> Device:
    bus = f"0000:{n + 1:02x}:00.0"
    return Device.model_validate(
        {"id": f"metax:pci-{bus}", "vendor": "metax", "kind": DeviceKind.GPU, "model": "MetaX C550", "index": n,
         "pci": {"bus_id": bus}}
    )


def _snap(present: list[int]) -> Snapshot:
    devs = [_dev(n) for n in present]
    ids = [d.id for d in devs]
    links = [Link(a=a, b=b, type=LinkType.METAXLINK) for i, a in enumerate(ids) for b in ids[i + 1:]]
    return Snapshot(
        devices=tuple(devs),
        telemetry=tuple(Telemetry(device_id=i, timestamp=NOW) for i in ids),
        links=tuple(links),
        processes=tuple(ProcessUsage(pid=100 + n, device_id=_dev(n).id) for n in present),
    )


class _Tool:
    """Hands out the next scripted snapshot on each run, like a tool whose output changes."""

    def __init__(self, *listings: list[int]) -> None:
        self.listings = list(listings)

    def __call__(self) -> Snapshot:
        return _snap(self.listings.pop(0) if len(self.listings) > 1 else self.listings[0])


def test_a_device_the_tool_stops_listing_is_lost_then_back_online() -> None:
    tool = _Tool([0, 1, 2], [0, 2], [0, 2], [0, 1, 2])
    backend = CliBackend("metax", tool)
    ids = [_dev(n).id for n in range(3)]
    assert [d.id for d in backend.inventory().devices] == ids

    inv: Any = backend.inventory()  # device 1 is no longer listed
    assert [d.id for d in inv.devices] == ids  # still there, in its place
    assert inv.devices[1].health.operational is Operational.LOST
    assert inv.devices[1].health.conditions[0].vendor_code == "metax.tool:device-missing"
    assert {lk.state for lk in inv.links if ids[1] in (lk.a, lk.b)} == {LinkState.DOWN}
    assert len([lk for lk in inv.links if ids[1] in (lk.a, lk.b)]) == 2  # its last known links, down
    assert {lk.state for lk in inv.links if ids[1] not in (lk.a, lk.b)} == {LinkState.UP}
    assert ids[1] not in {p.device_id for p in inv.processes}
    with pytest.raises(DeviceLostError):
        backend.telemetry([ids[0], ids[1]])
    assert backend.lost_ids() == frozenset({ids[1]})

    inv = backend.inventory()  # listed again
    assert all(d.health.operational is Operational.ONLINE for d in inv.devices)
    assert {lk.state for lk in inv.links} == {LinkState.UP}
    assert [t.device_id for t in backend.telemetry([ids[1]])] == [ids[1]]
    assert backend.lost_ids() == frozenset()



def test_a_row_that_fails_to_parse_is_unknown_not_lost() -> None:
    """A device missing from a snapshot whose output had unparseable records is not declared lost."""
    import dataclasses

    from accel.model import HealthState, Operational
    from accel.plugin import BackendConfig
    from accel.plugins.metax import PLUGIN

    backend = PLUGIN.open(BackendConfig(options={"scenario": "c550-8"}, enrich_from_sysfs=False))
    first = backend.inventory()
    victim = first.devices[3].id
    original = backend._collect  # type: ignore[attr-defined]

    def partial() -> object:
        snap = original()
        kept = tuple(d for d in snap.devices if d.id != victim)
        return dataclasses.replace(snap, devices=kept, unparsed=snap.unparsed + 1)

    backend._collect = partial  # type: ignore[attr-defined]
    inv = backend.inventory()
    dev = next(d for d in inv.devices if d.id == victim)
    assert dev.health.operational is Operational.ONLINE and dev.health.state is HealthState.UNKNOWN
    assert [c.reason for c in dev.health.conditions] == ["DeviceNotRead"]
    assert victim not in backend.lost_ids()
