"""The fake backend, unbroken, passes every row: the three-line suite plus an oracle."""

from __future__ import annotations

from pathlib import Path

from tests.conformance import conformance_fake as fake

from accel.conformance import ConformanceSuite, SysfsOracle
from accel.model import Device
from accel.plugin import BackendConfig


class AcmeOracle(SysfsOracle):
    """Bus ids from sysfs; memory from the spec sheet (80 GiB), independent of the backend."""

    def memory_total_bytes(self, device: Device) -> int | None:
        return fake.TOTAL


class TestAcme(ConformanceSuite):
    backend = "acme"
    plugin = fake.PLUGIN

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        config = fake.make_config(tmp_path)
        cls.oracle = AcmeOracle(vendor_ids=[fake.VENDOR_ID], root=config.sysfs_root)
        return config
