"""The Hygon backend over replay directories of the verbatim samples (and a fake sysfs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pydantic
import pytest

from accel.errors import AccelError, DeviceError, ToolTimeoutError
from accel.model import DeviceKind, HealthState
from accel.plugin import BackendConfig, ProbeStatus
from accel.plugins.hygon import PLUGIN, SCENARIOS
from accel.testing import FakeSysfs
from accel.tools import ReplayRunner

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hygon"
REPLAY = FIX / "replay"
MIB = 2**20


def cfg(name: str, **kw: Any) -> BackendConfig:
    return BackendConfig(runner=ReplayRunner(REPLAY / name), **kw)


def hygon_sysfs(root: Path, n: int) -> list[str]:
    fs = FakeSysfs(root)
    fs.add_numa_node(0, "0-31")
    fs.add_numa_node(1, "32-63")
    buses = []
    for i in range(n):
        bus = f"0000:{0x11 + i * 0x20:02x}:00.0"
        fs.add_device(bus, vendor="1d94", device="6210", class_code="0x120000",
                      bridges=[f"0000:{0x0e + i * 0x20:02x}:01.0", f"0000:{0x0f + i * 0x20:02x}:00.0",
                               f"0000:{0x10 + i * 0x20:02x}:00.0"],
                      numa_node=0 if i < n // 2 else 1, cpulist="0-31" if i < n // 2 else "32-63")
        buses.append(bus)
    return buses


def test_shipped_scenarios_match_the_test_replays() -> None:
    assert set(SCENARIOS) == {p.name for p in REPLAY.iterdir()}


def test_k100ai_one_dcu_json_plus_rocminfo() -> None:
    with PLUGIN.open(cfg("k100ai-1dcu")) as b:
        inv = b.inventory()
        (t,) = b.telemetry()
    (d,) = inv.devices
    assert d.id == "hygon:0x7100fa8866904061" and d.uuid == "0x7100fa8866904061"
    assert d.kind is DeviceKind.DCU and d.vendor == "hygon"
    assert d.model == "K1xx_AI" and d.isa == "gfx928" and d.compute.units == 12
    assert d.memory_total_bytes == 65520 * MIB and d.memory_used_bytes == 2 * MIB
    assert d.serial_number is None
    assert (d.binding.visible_env, d.binding.visible_id) == ("HIP_VISIBLE_DEVICES", "0")
    assert (d.binding.torch_device_type, d.binding.collective_backend) == ("cuda", "rccl")
    assert d.extras["hygon.com/rocrVisibleDevice"] == "GPU-7100fa8866904061"
    # No RAS / ECC in these commands: health is unknown, never guessed healthy.
    assert d.health.state is HealthState.UNKNOWN
    assert t.power_watts == 80.0 and t.temperatures_celsius == {"edge": 41.0, "junction": 39.0, "memory": 44.0}
    (src, *_) = inv.sources
    assert src.api == "rocm-smi" and src.tool_invocations == 4  # json, concise, rocminfo, --showtopo
    assert "MiB" in next(s.detail for s in inv.sources if s.api == "notes")  # type: ignore[operator]


def test_z100l_one_dcu() -> None:
    with PLUGIN.open(cfg("z100l-1dcu")) as b:
        (d,) = b.inventory().devices
    # "Unique ID": "a000000000000000" is the firmware default every such card prints: never an
    # id (issue 13, finding 3).  Without sysfs there is no bus id, so the id is the marked index.
    assert d.id == "hygon:index-0" and d.model == "Z100L"
    assert d.uuid is None and "hygon.com/rocrVisibleDevice" not in d.extras
    assert d.memory_total_bytes == 32752 * MIB and d.serial_number == "TRCW200000000000"


def test_z100l_placeholder_unique_id_falls_back_to_pci(tmp_path: Path) -> None:
    (bus,) = hygon_sysfs(tmp_path, 1)
    with PLUGIN.open(cfg("z100l-1dcu", sysfs_root=tmp_path)) as b:
        (d,) = b.inventory().devices
    assert d.id == f"hygon:pci-{bus}"
    assert d.id != "hygon:0xa000000000000000"


def test_k100_8dcu_concise_with_sysfs_bus_ids(tmp_path: Path) -> None:
    buses = hygon_sysfs(tmp_path, 8)
    with PLUGIN.open(cfg("k100-8dcu", sysfs_root=tmp_path)) as b:
        inv = b.inventory()
        tel = b.telemetry()
    assert [d.id for d in inv.devices] == [f"hygon:pci-{bus}" for bus in buses]
    assert [d.index for d in inv.devices] == list(range(8))
    assert all(d.model == "K100_AI" for d in inv.devices)  # PCI device 6210, from sysfs
    assert all(d.power.enforced_watts == 300.0 for d in inv.devices)
    assert [d.numa_node for d in inv.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(d.extras["hygon.com/mode"] == "Normal" for d in inv.devices)
    assert all("memory.total_bytes" in d.unsupported for d in inv.devices)  # concise has only %
    assert [t.power_watts for t in tel] == [96.0, 96.0, 95.0, 96.0, 97.0, 95.0, 93.0, 96.0]
    assert inv.sources[0].api == "hy-smi"


def test_k100_8dcu_without_sysfs_uses_marked_index_ids() -> None:
    with PLUGIN.open(cfg("k100-8dcu")) as b:
        inv = b.inventory()
    assert [d.id for d in inv.devices] == [f"hygon:index-{i}" for i in range(8)]
    assert all("pci" in d.unsupported for d in inv.devices)


def test_dtk23_10_4dcu_concise() -> None:
    with PLUGIN.open(cfg("dtk23.10-4dcu")) as b:
        inv = b.inventory()
        tel = b.telemetry()
    assert len(inv.devices) == 4
    assert [t.temperatures_celsius["edge"] for t in tel] == [30.0, 30.0, 29.0, 29.0]
    assert [t.fan_ratio for t in tel] == [0.0] * 4
    assert all(d.power.enforced_watts == 280.0 for d in inv.devices)


def _recording(directory: Path, argv: list[str], **kw: Any) -> None:
    name = "_".join(a.strip("-").replace("/", "_") or "x" for a in argv) + ".json"
    (directory / name).write_text(json.dumps({"argv": argv, **kw}))


def test_topology_from_showtopo_reference_format_no_sample(tmp_path: Path) -> None:
    from accel.model import DistanceLevel, DomainKind, LinkType

    showtopo = (Path(__file__).parent / "test_samples.py").read_text().split('SHOWTOPO_REFERENCE_FORMAT = """\\\n')[1]
    showtopo = showtopo.split('"""')[0]
    # A recording names files inside its own directory only: the sample is copied next to it.
    shutil.copyfile(FIX / "rocm-smi_dtk23.10_4x-dcu_concise.txt", tmp_path / "rocm-smi_dtk23.10_4x-dcu_concise.txt")
    _recording(tmp_path, ["rocm-smi"], stdout_file="rocm-smi_dtk23.10_4x-dcu_concise.txt")
    _recording(tmp_path, ["rocm-smi", "--showtopo"], stdout=showtopo)
    with PLUGIN.open(BackendConfig(runner=ReplayRunner(tmp_path))) as b:
        inv = b.inventory()
    ids = [d.id for d in inv.devices]
    assert [d.numa_node for d in inv.devices] == [0, 0, 1, 1]
    assert {frozenset(lk.pair) for lk in inv.links} == {
        frozenset((ids[0], ids[1])), frozenset((ids[0], ids[2])), frozenset((ids[1], ids[2]))}
    assert all(lk.type is LinkType.XGMI for lk in inv.links)
    (hive,) = inv.domains
    assert hive.kind is DomainKind.XGMI_HIVE and set(hive.members) == set(ids[:3])
    m = inv.distance_matrix()
    assert m.level(ids[0], ids[1]) is DistanceLevel.LINK and m.level(ids[0], ids[3]) is DistanceLevel.SYS


def test_hung_tool_ends_in_timeout(tmp_path: Path) -> None:
    _recording(tmp_path, ["hy-smi", "--showid", "--showmeminfo", "vram", "--showpower", "--showserial", "--showuse",
                          "--showtemp", "--showproductname", "--showuniqueid", "--json"], delay_s=3600, stdout="")
    config = BackendConfig(runner=ReplayRunner(tmp_path), tool_timeout_s=0.2)
    with PLUGIN.open(config) as b, pytest.raises(ToolTimeoutError):
        b.inventory()


def test_unknown_id_and_closed_backend() -> None:
    b = PLUGIN.open(cfg("z100l-1dcu"))
    with pytest.raises(DeviceError):
        b.health(["hygon:nope"])
    b.close()
    b.close()
    with pytest.raises(AccelError):
        b.inventory()


def test_no_tool_at_all_is_backend_unavailable(tmp_path: Path) -> None:
    from accel.errors import BackendUnavailableError

    _recording(tmp_path, ["npu-smi", "info"], stdout="")
    with pytest.raises(BackendUnavailableError):
        PLUGIN.open(BackendConfig(runner=ReplayRunner(tmp_path)))


def _leaves(obj: Any) -> list[Any]:
    if isinstance(obj, pydantic.BaseModel):
        return [v for n in type(obj).model_fields for v in _leaves(getattr(obj, n))]
    if isinstance(obj, dict):
        return [v for k, x in obj.items() for v in (*_leaves(k), *_leaves(x))]
    if isinstance(obj, list | tuple | set | frozenset):
        return [v for x in obj for v in _leaves(x)]
    return [obj]


@pytest.mark.parametrize("name", sorted(p.name for p in REPLAY.iterdir()))
def test_no_sentinel_in_any_model(name: str, tmp_path: Path) -> None:
    with PLUGIN.open(cfg(name)) as b:
        models = [b.inventory(), *b.telemetry(), *b.health().values()]
    for leaf in (v for m in models for v in _leaves(m)):
        if isinstance(leaf, bool):
            continue
        assert leaf != -1
        assert not (isinstance(leaf, str) and leaf.strip().upper() in ("N/A", "NA", "-1"))


def test_probe_order(tmp_path: Path) -> None:
    sys_root, dev_root = tmp_path / "sys", tmp_path / "dev"
    empty = ReplayRunner.from_mapping({"npu-smi info": ""})
    fs = FakeSysfs(sys_root)
    dev_root.mkdir()
    assert PLUGIN.probe(BackendConfig(sysfs_root=sys_root, dev_root=dev_root, runner=empty)).status \
        is ProbeStatus.ABSENT
    # /dev/kfd alone is AMD's too: it counts only with a Hygon node in the KFD topology.
    fs.add_device_node(dev_root, "kfd")
    assert PLUGIN.probe(BackendConfig(sysfs_root=sys_root, dev_root=dev_root, runner=empty)).status \
        is ProbeStatus.ABSENT
    node = sys_root / "class" / "kfd" / "kfd" / "topology" / "nodes" / "1"
    node.mkdir(parents=True)
    (node / "properties").write_text("cpu_cores_count 0\nvendor_id 7572\ndevice_id 25104\n")
    res = PLUGIN.probe(BackendConfig(sysfs_root=sys_root, dev_root=dev_root, runner=empty))
    assert res.status is ProbeStatus.PRESENT and "kfd" in res.reason
    # PCI vendor 1d94 comes first.
    hygon_sysfs(sys_root, 2)
    res = PLUGIN.probe(BackendConfig(sysfs_root=sys_root, dev_root=dev_root, runner=empty))
    assert res.status is ProbeStatus.PRESENT and "1d94" in res.reason
    # The tools, under replay.
    bare = tmp_path / "bare"
    FakeSysfs(bare)
    assert PLUGIN.probe(cfg("k100-8dcu", sysfs_root=bare, dev_root=dev_root / "none")).status is ProbeStatus.PRESENT
    res = PLUGIN.probe(cfg("z100l-1dcu", sysfs_root=bare, dev_root=dev_root / "none"))
    assert res.status is ProbeStatus.PRESENT and "rocm-smi" in res.reason


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = "import sys, accel.plugins.hygon; assert 'accel.plugins.hygon._backend' not in sys.modules"
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""


@pytest.mark.parametrize("name", ["z100l-1dcu", "k100-8dcu", "k100ai-1dcu", "dtk23.10-4dcu"])
def test_health_checked_at_only_where_health_was_read(name: str) -> None:
    # Health is earned: checked_at is set exactly where the tool printed something that tells health.
    with PLUGIN.open(cfg(name)) as b:
        for h in b.health().values():
            assert (h.checked_at is not None) == h.monitored
