"""The conformance kit over the Hygon replay scenarios (verbatim samples)."""

from pathlib import Path

import pytest
from accel.plugins.hygon.testing import build_hygon_sysfs

from accel.plugin import BackendConfig
from accel.tools import ReplayRunner

_kit = pytest.importorskip("accel.conformance")
if not hasattr(_kit, "ConformanceSuite"):  # the kit is still landing
    pytest.skip("accel.conformance has no ConformanceSuite yet", allow_module_level=True)
ConformanceSuite = _kit.ConformanceSuite
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestRemovedIn10Warning")

REPLAY = Path(__file__).resolve().parents[1] / "fixtures" / "hygon" / "replay"
# hy-smi runs one process per command; a snapshot runs at most 4 (json, concise, rocminfo, topo).
BUDGET = 4


def _config(name: str, tmp_path: Path, count: int, **kw: object) -> BackendConfig:
    # Real hosts have sysfs: the DCUs' PCI functions and amdgpu-style DRM files (the concise
    # table has no bus ids and no absolute memory).
    root = build_hygon_sysfs(tmp_path / "sys", count, **kw)
    return BackendConfig(runner=ReplayRunner(REPLAY / name), sysfs_root=root)


class TestHygonK100Ai1(ConformanceSuite):
    backend = "hygon"
    snapshot_budget = BUDGET
    scenario = "k100ai-1dcu"

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        return _config("k100ai-1dcu", tmp_path, 1, unique_ids=(0x7100FA8866904061,), vram_bytes=65520 * 2**20)


class TestHygonZ100L1(ConformanceSuite):
    backend = "hygon"
    snapshot_budget = BUDGET
    scenario = "z100l-1dcu"

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        return _config("z100l-1dcu", tmp_path, 1, unique_ids=(0xA000000000000000,), device_id=0x55B7,
                       market_name="Z100L", vram_bytes=32752 * 2**20)


class TestHygonK100Ai1Bare(ConformanceSuite):
    """The shipped scenario without any sysfs: no PCI info, which the kit flags."""

    backend = "hygon"
    snapshot_budget = BUDGET
    options = {"scenario": "k100ai-1dcu"}
    xfail = {"inventory.ids-match-pci": "a replay without sysfs has no PCI bus ids (rocm-smi --json prints none)"}


class TestHygonK100x8Concise(ConformanceSuite):
    backend = "hygon"
    snapshot_budget = BUDGET
    scenario = "k100-8dcu"

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        return _config("k100-8dcu", tmp_path, 8, market_name="K100", vram_bytes=64 * 2**30)


class TestHygonDtk2310x4Concise(ConformanceSuite):
    backend = "hygon"
    snapshot_budget = BUDGET
    scenario = "dtk23.10-4dcu"

    @classmethod
    def backend_config(cls, tmp_path: Path) -> BackendConfig:
        return _config("dtk23.10-4dcu", tmp_path, 4, market_name="DCU", vram_bytes=32 * 2**30)
