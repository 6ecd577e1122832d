"""Found by benchmarks/exporter_scrape: when the exporter read ``inventory()`` and then
``health()`` every scrape, the nvidia backend's NVLink check (which compares each reading with
the one before it) compared with the sample ``inventory()`` took a moment earlier, and a replay
count that grew since the last scrape lost its "increasing" severity.  The exporter now takes
health from the inventory's own reading; this test keeps it that way."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel.discovery import discover
from accel.exporter import SnapshotSource
from accel.plugin import BackendConfig
from accel.plugins.nvidia.testing import FakeNVML

pytest.importorskip("prometheus_client")


def _severity(source: SnapshotSource, device_index: int) -> tuple[str | None, str | None]:
    """(severity in the exporter's health, severity in the inventory's) of NvLinkReplayErrors."""
    read = source.get().backends[0]
    assert read.inventory is not None and read.up
    dev = read.inventory.devices[device_index]

    def sev(conditions: tuple[object, ...]) -> str | None:
        for cond in conditions:
            if getattr(cond, "reason", None) == "NvLinkReplayErrors":
                return str(cond.severity.value)  # type: ignore[attr-defined]
        return None

    return sev(read.health.get(dev.id, dev.health).conditions), sev(dev.health.conditions)


def test_replays_that_grew_between_scrapes_are_shown_increasing(tmp_path: Path) -> None:
    fake = FakeNVML("nvlink-replay")
    for i in range(len(fake.scenario.gpus)):
        (tmp_path / f"nvidia{i}").touch()
    config = BackendConfig(dev_root=tmp_path, enrich_from_sysfs=False)
    with fake.installed():
        source = SnapshotSource(discover(default_config=config, backends=["nvidia"]), default_config=config,
                                min_interval_s=0.0)
        try:
            assert _severity(source, 2) == ("warning", "warning")  # 17 replays, not growing
            fake.scenario.gpus[2].nvlinks[4].replay += 5
            shown, inventory = _severity(source, 2)
        finally:
            source.close()
    assert inventory == "error"  # the inventory's health saw the growth
    assert shown == "error"      # ... and the scrape shows what the inventory saw
