"""Lost DCUs and unreadable health in the Hygon backend (the shared CliBackend mechanism).

hy-smi reports a DCU that fell off the bus by no longer listing it.  These tests drive that
through the public API and the conformance hook ``inject_fault`` over the shipped replays: the
8x K100 concise table (with a fake sysfs, so bus ids are real) and the 1x K100_AI JSON replay.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from accel.conformance import Fault, FaultInjector
from accel.errors import DeviceError, DeviceLostError, NotSupportedError
from accel.model import Action, HealthState, Operational, Severity, Subsystem
from accel.plugin import Backend, BackendConfig
from accel.plugins.hygon import PLUGIN
from accel.plugins.hygon.conformance import CONFORMANCE_SCENARIOS
from accel.tools import SubprocessRunner

MIB = 2**20


@pytest.fixture
def k100(tmp_path: Path) -> Iterator[Backend]:
    """The 8x K100 replay with its fake sysfs, as the conformance kit opens it."""
    with PLUGIN.open(CONFORMANCE_SCENARIOS["k100-8dcu"].config(tmp_path)) as b:
        yield b


def _injector(backend: Backend) -> FaultInjector:
    assert isinstance(backend, FaultInjector)
    return backend


def test_lost_dcu_keeps_identity_and_the_others_answer(k100: Backend) -> None:
    before = k100.inventory()
    assert len(before.devices) == 8
    first = before.devices[0]
    assert first.model == "K100" and first.pci is not None and first.pci.bus_id == "0000:11:00.0"
    others = [d.id for d in before.devices[1:]]

    _injector(k100).inject_fault(Fault.DEVICE_LOST, first.id)

    after = k100.inventory()
    assert [d.id for d in after.devices] == [d.id for d in before.devices]
    gone = after.devices[0]
    assert (gone.model, gone.pci.bus_id if gone.pci else None) == ("K100", "0000:11:00.0")
    assert gone.memory_total_bytes == first.memory_total_bytes == 64 * 2**30
    assert gone.health.operational is Operational.LOST
    assert gone.health.state is HealthState.UNHEALTHY
    (cond,) = gone.health.conditions
    assert (cond.reason, cond.subsystem, cond.severity, cond.action) == (
        "DeviceLost", Subsystem.PCIE, Severity.FATAL, Action.REBOOT_NODE,
    )
    assert cond.vendor_code == "hygon.tool:device-missing"
    assert "0000:11:00.0" in (cond.message or "")
    # The others are as they were (the concise table reads no health: unknown, not lost).
    assert [d.health for d in after.devices[1:]] == [d.health for d in before.devices[1:]]
    health = k100.health()
    assert health[first.id].operational is Operational.LOST
    assert health[first.id].checked_at is not None
    assert all(health[i].operational is Operational.ONLINE for i in others)
    # Telemetry: none for the lost DCU; asking for it by id says it is lost.
    assert [t.device_id for t in k100.telemetry()] == others
    assert [t.device_id for t in k100.telemetry(others[:2])] == others[:2]
    with pytest.raises(DeviceLostError) as err:
        k100.telemetry([first.id])
    assert err.value.device_id == first.id
    # first_seen stays put across snapshots.
    (again,) = k100.inventory().devices[0].health.conditions
    assert again.first_seen == cond.first_seen


def test_health_not_supported_is_unknown_for_that_dcu_only(tmp_path: Path) -> None:
    with PLUGIN.open(CONFORMANCE_SCENARIOS["k100ai-1dcu"].config(tmp_path)) as b:
        (d,) = b.inventory().devices
        assert d.memory_total_bytes == 65520 * MIB
        _injector(b).inject_fault(Fault.HEALTH_NOT_SUPPORTED, d.id)
        h = b.health()[d.id]
        assert (h.monitored, h.state) == (False, HealthState.UNKNOWN)
        assert h.operational is Operational.ONLINE
        (t,) = b.telemetry()  # still read
        assert t.device_id == d.id


def test_inject_fault_rejects_unknown_ids_and_faults(k100: Backend) -> None:
    with pytest.raises(DeviceError):
        _injector(k100).inject_fault(Fault.DEVICE_LOST, "hygon:nope")
    first = k100.inventory().devices[0].id
    with pytest.raises(NotSupportedError):
        _injector(k100).inject_fault("thermal_runaway", first)


class _LiveRunner(SubprocessRunner):
    """A real runner that 'finds' hy-smi: inject_fault must refuse before any tool runs."""

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        return f"/opt/hyhal/bin/{name}" if name == "hy-smi" else None


def test_inject_fault_needs_a_replay() -> None:
    with PLUGIN.open(BackendConfig(runner=_LiveRunner())) as b:
        with pytest.raises(NotSupportedError):
            _injector(b).inject_fault(Fault.DEVICE_LOST, "hygon:0x1d94000000000000")
        assert b.name == "hygon"
