"""One outer guard (issue 14): only accel.errors types leave a public Backend method."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from accel.errors import AccelError, BackendUnavailableError, DeviceError
from accel.model import Health, Host, HostInventory, Telemetry
from accel.plugin import Backend
from accel.plugin._contract import GUARDED_METHODS


class Buggy(Backend):
    """Each method fails the way plugin bugs do."""

    @property
    def name(self) -> str:
        return "buggy"

    def inventory(self) -> HostInventory:
        return {}["devices"]  # type: ignore[no-any-return]  # KeyError

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        import csv

        raise csv.Error("field larger than field limit (131072)")

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        raise SystemExit(3)  # a vendor library calling exit()

    def close(self) -> None:
        raise DeviceError("typed errors pass unchanged")

    def processes(self, ids: Sequence[str] | None = None) -> tuple[()]:
        raise KeyboardInterrupt


def test_foreign_exceptions_become_typed_with_the_cause_kept() -> None:
    b = Buggy()
    with pytest.raises(BackendUnavailableError, match=r"backend 'buggy': inventory\(\) failed: KeyError") as info:
        b.inventory()
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(BackendUnavailableError, match=r"Error: field larger"):
        b.telemetry()
    with pytest.raises(BackendUnavailableError, match="SystemExit"):
        b.health()


def test_accel_errors_pass_unchanged_and_ctrl_c_is_the_users() -> None:
    b = Buggy()
    with pytest.raises(DeviceError, match="typed errors pass unchanged"):
        b.close()
    with pytest.raises(KeyboardInterrupt):
        b.processes()


def test_a_subclass_of_a_guarded_backend_is_guarded_once() -> None:
    class Child(Buggy):
        def inventory(self) -> HostInventory:
            raise ValueError("child bug")

    with pytest.raises(BackendUnavailableError, match="child bug") as info:
        Child().inventory()
    assert not isinstance(info.value.__cause__, AccelError)
    assert "failed: BackendUnavailableError" not in str(info.value)


def test_good_results_pass_through() -> None:
    inv = HostInventory(host=Host(hostname="h"), collected_at=datetime.now(UTC))

    class Fine(Buggy):
        def inventory(self) -> HostInventory:
            return inv

    assert Fine().inventory() is inv


def test_every_surface_method_is_guarded() -> None:
    assert {"inventory", "telemetry", "health", "close", "processes", "partitions", "poll_events"} <= GUARDED_METHODS
