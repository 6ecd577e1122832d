"""The fake backend, unbroken, passes every row: the three-line suite plus an oracle."""

from __future__ import annotations

from pathlib import Path

from accel.conformance import ConformanceSuite
from accel.plugin import BackendConfig
from tests.conformance import conformance_fake as fake


class TestAcme(ConformanceSuite):
    backend = "acme"
    plugin = fake.PLUGIN

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        config = fake.make_config(tmp_path)
        cls.oracle = fake.AcmeOracle(vendor_ids=[fake.VENDOR_ID], root=config.sysfs_root)
        return config
