"""Small test plugins: well-behaved, raising, hanging and incompatible ones."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from accel.errors import DriverError
from accel.model import Device, Health, Host, HostInventory, Telemetry
from accel.plugin import (
    PLUGIN_API,
    ApiVersion,
    Backend,
    BackendConfig,
    BackendPlugin,
    PluginInfo,
    ProbeResult,
)

RELEASE = threading.Event()


def info(name: str, api: frozenset[ApiVersion] = frozenset({PLUGIN_API})) -> PluginInfo:
    return PluginInfo(name=name, vendor="acme", version="0.1", api_versions=api)


class TinyBackend(Backend):
    def __init__(self, name: str, vendor: str, n: int, fail_reads: bool = False) -> None:
        self._name, self._vendor, self._n, self._fail = name, vendor, n, fail_reads
        self.closed = 0

    @property
    def name(self) -> str:
        return self._name

    def _devices(self) -> tuple[Device, ...]:
        return tuple(
            Device(id=f"{self._vendor}:pci-0000:{i + 1:02x}:00.0", vendor=self._vendor, kind="gpu", model="Tiny")
            for i in range(self._n)
        )

    def inventory(self) -> HostInventory:
        if self._fail:
            raise DriverError("the tiny driver failed", vendor_code="tiny:42")
        return HostInventory(host=Host(hostname="h"), devices=self._devices(), collected_at=datetime.now(UTC))

    def telemetry(self, ids: Sequence[str] | None = None) -> tuple[Telemetry, ...]:
        return tuple(
            Telemetry(device_id=d.id, timestamp=datetime.now(UTC))
            for d in self._devices()
            if ids is None or d.id in ids
        )

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        return {d.id: Health.read(datetime.now(UTC)) for d in self._devices() if ids is None or d.id in ids}

    def close(self) -> None:
        self.closed += 1


class GoodPlugin(BackendPlugin):
    def __init__(self, name: str = "good", vendor: str = "acme", n: int = 2, fail_reads: bool = False) -> None:
        self.info = info(name)
        self._vendor, self._n, self._fail = vendor, n, fail_reads

    def probe(self, config: BackendConfig) -> ProbeResult:
        return ProbeResult.present(f"{self._n} tiny devices", device_count=self._n)

    def open(self, config: BackendConfig) -> Backend:
        return TinyBackend(self.info.name, self._vendor, self._n, self._fail)


class RaisingProbe(GoodPlugin):
    def probe(self, config: BackendConfig) -> ProbeResult:
        raise RuntimeError("probe exploded")


class HangingProbe(GoodPlugin):
    def probe(self, config: BackendConfig) -> ProbeResult:
        RELEASE.wait(30)
        return ProbeResult.present()


class FailingOpen(GoodPlugin):
    def open(self, config: BackendConfig) -> Backend:
        raise OSError("libtiny.so: cannot open shared object file")


class OldPlugin(GoodPlugin):
    def __init__(self) -> None:
        super().__init__("old")
        self.info = info("old", frozenset({ApiVersion(0, 9)}))
