"""Broken plugins, one way of breaking each: they hang, raise ``BaseException``s or return junk.

Every hanging call waits on :data:`GATE`, which the fixtures set after each test so no thread
outlives its test for long.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from accel.model import Device, Health, Host, HostInventory, Telemetry
from accel.plugin import PLUGIN_API, Backend, BackendConfig, BackendPlugin, PluginInfo, ProbeResult

GATE = threading.Event()
#: Long enough to outlive any deadline of these tests, short enough not to keep a run alive.
HANG_S = 60.0


def hang() -> None:
    GATE.wait(HANG_S)


class TinyBackend(Backend):
    """Two devices; ``broken`` names the method that misbehaves and ``how`` the way."""

    def __init__(self, name: str, broken: str = "", how: str = "hang") -> None:
        self._name, self.broken, self.how = name, broken, how
        self.calls: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def _misbehave(self, method: str) -> Any:
        self.calls.append(method)
        if self.broken != method:
            return None
        if self.how == "hang":
            hang()
            return None
        if self.how == "systemexit":
            raise SystemExit(3)
        if self.how == "keyboardinterrupt":
            raise KeyboardInterrupt
        return self.how  # "junk": the method returns this string

    def _devices(self) -> tuple[Device, ...]:
        return tuple(
            Device(id=f"tiny:pci-0000:{i + 1:02x}:00.0", vendor="tiny", kind="gpu", model="Tiny") for i in range(2)
        )

    def inventory(self) -> HostInventory:
        junk = self._misbehave("inventory")
        if junk == "construct":
            return HostInventory.model_construct(
                host=Host(hostname="h"), devices=("not a device",), collected_at=datetime.now(UTC)
            )
        if junk is not None:
            return junk  # type: ignore[no-any-return]
        return HostInventory(host=Host(hostname="h"), devices=self._devices(), collected_at=datetime.now(UTC))

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        junk = self._misbehave("telemetry")
        if junk is not None:
            return (junk,)  # type: ignore[return-value]
        now = datetime.now(UTC)
        return tuple(Telemetry(device_id=d.id, timestamp=now) for d in self._devices() if ids is None or d.id in ids)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        junk = self._misbehave("health")
        if junk is not None:
            return {d.id: junk for d in self._devices()}  # type: ignore[misc]
        return {d.id: Health.read(datetime.now(UTC)) for d in self._devices() if ids is None or d.id in ids}

    def close(self) -> None:
        self._misbehave("close")


class TinyPlugin(BackendPlugin):
    """A plugin whose ``broken`` stage (``probe``, ``open`` or a backend method) misbehaves."""

    def __init__(self, name: str, broken: str = "", how: str = "hang") -> None:
        self.info = PluginInfo(name=name, vendor="tiny", version="0.1", api_versions=frozenset({PLUGIN_API}))
        self.broken, self.how = broken, how
        self.opened: list[TinyBackend] = []

    def probe(self, config: BackendConfig) -> ProbeResult:
        if self.broken == "probe":
            if self.how == "hang":
                hang()
            raise base_exception(self.how)
        return ProbeResult.present("2 tiny devices", device_count=2)

    def open(self, config: BackendConfig) -> Backend:
        if self.broken == "open":
            if self.how == "hang":
                hang()
            elif self.how == "systemexit":
                raise SystemExit(7)
            else:
                return self.how  # type: ignore[return-value]
        backend = TinyBackend(self.info.name, self.broken, self.how)
        self.opened.append(backend)
        return backend


class _Custom(BaseException):
    """A BaseException that is not an Exception, as a plugin might define one."""


def base_exception(kind: str) -> BaseException:
    """A fresh ``BaseException`` (not an ``Exception``) of the named kind."""
    made: dict[str, BaseException] = {
        "systemexit": SystemExit(4),
        "keyboardinterrupt": KeyboardInterrupt(),
        "generatorexit": GeneratorExit("closed"),
        "custom": _Custom("plugin-defined base exception"),
    }
    return made[kind]
