"""The bug-report recorder, bundle writer and `accel bugreport` (issue 13): round trips through replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel._bugreport import RecordingRunner, write_bundle
from accel.errors import ConfigError, ToolExitError
from accel.tools import Recording, ReplayRunner


def _inner() -> ReplayRunner:
    return ReplayRunner.from_recordings(
        [
            Recording(argv=("npu-smi", "info"), stdout="table\n"),
            Recording(argv=("npu-smi", "bad"), stderr="no\n", returncode=2),
        ]
    )


def test_round_trip_through_replay(tmp_path: Path) -> None:
    rec = RecordingRunner(_inner())
    assert rec.run(["npu-smi", "info"]).stdout == "table\n"
    with pytest.raises(ToolExitError):
        rec.run(["npu-smi", "bad"])
    bundle = write_bundle(tmp_path / "b", rec.recordings, version="0", backends=["ascend"])
    replay = ReplayRunner(bundle)
    assert replay.run(["npu-smi", "info"]).stdout == "table\n"
    bad = replay.run(["npu-smi", "bad"], check=False)
    assert (bad.returncode, bad.stderr) == (2, "no\n")
    manifest = json.loads((bundle / "MANIFEST").read_text())
    assert manifest["backends"] == ["ascend"]
    assert manifest["commands"] == [["npu-smi", "info"], ["npu-smi", "bad"]]


def test_cap_exceeded_leaves_nothing(tmp_path: Path) -> None:
    rec = RecordingRunner(_inner())
    rec.run(["npu-smi", "info"])
    with pytest.raises(ConfigError, match="cap"):
        write_bundle(tmp_path / "b", rec.recordings, version="0", backends=[], max_bytes=10)
    assert list(tmp_path.iterdir()) == []


def test_no_env_in_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_TEST_SECRET", "hunter2-s3cr3t")
    rec = RecordingRunner(_inner())
    rec.run(["npu-smi", "info"])
    bundle = write_bundle(tmp_path / "b", rec.recordings, version="0", backends=[])
    for path in bundle.iterdir():
        assert "hunter2-s3cr3t" not in path.read_text()


def _plugin_dir(name: str) -> Path:
    import importlib

    mod = importlib.import_module(f"accel.plugins.{name}")
    assert mod.__file__ is not None
    return Path(mod.__file__).parent


def _comparable(doc: dict[str, object]) -> str:
    """An inventory's JSON without the times a read stamps (collected_at, checked_at)."""
    text = json.dumps(doc, sort_keys=True)
    import re

    return re.sub(r'"(collected_at|checked_at|first_seen|last_seen)": "[^"]*"', r'"\1": "-"', text)


@pytest.mark.parametrize(("backend", "scenario"), [("mthreads", "s5000-8"), ("ascend", "910b-8"), ("metax", "c550-8")])
def test_accel_bugreport_round_trip_replays_to_the_same_inventory(
    backend: str, scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from accel.cli import main

    src = _plugin_dir(backend) / "scenarios" / scenario
    if not src.is_dir():
        pytest.skip(f"no shipped scenario {backend}/{scenario}")
    monkeypatch.setenv("ACCEL_TEST_SECRET", "hunter2-do-not-leak")
    # Record: the user's machine, here a replay of a shipped scenario.
    out = tmp_path / "bundle"
    code = main(["bugreport", "--backend", backend, "--replay", str(src), "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "wrote" in err and (out / "MANIFEST").is_file() and (out / "INVENTORY").is_file()
    manifest = json.loads((out / "MANIFEST").read_text())
    assert manifest["backends"] == [backend] and manifest["commands"]
    assert not any("hunter2" in f.read_text() for f in out.iterdir())
    # Replay elsewhere: the bundle alone gives the same inventory as the original run.
    main(["ls", "--backend", backend, "--replay", str(src), "--json"])
    original, _ = capsys.readouterr()
    code = main(["ls", "--backend", backend, "--replay", str(out), "--json"])
    replayed, err = capsys.readouterr()
    assert code == 0, err
    assert _comparable(json.loads(replayed)) == _comparable(json.loads(original))
    assert _comparable(json.loads((out / "INVENTORY").read_text())) == _comparable(json.loads(original))


def test_accel_bugreport_refuses_an_existing_dir_and_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accel.cli import EXIT_USAGE, main

    src = _plugin_dir("mthreads") / "scenarios" / "s5000-8"
    out = tmp_path / "b"
    out.mkdir()
    assert main(["bugreport", "--backend", "mthreads", "--replay", str(src), "--out", str(out)]) == EXIT_USAGE
    assert "already exists" in capsys.readouterr().err
    small = tmp_path / "small"
    code = main(["bugreport", "--backend", "mthreads", "--replay", str(src), "--out", str(small), "--max-bytes", "100"])
    assert code == EXIT_USAGE and "over the cap" in capsys.readouterr().err
    assert not small.exists() and [p.name for p in tmp_path.iterdir()] == ["b"]
    assert main(["bugreport", "--sim", "dgx-h100", "--out", str(tmp_path / "s")]) == EXIT_USAGE


def _fake_sysfs(root: Path, buses: list[str]) -> None:
    """A sysfs tree shaped like the kernel's: real dirs under devices/pci..., links in bus/."""
    (root / "bus" / "pci" / "devices").mkdir(parents=True)
    for i, bus in enumerate(buses):
        bridge = f"0000:{int(bus[5:7], 16) - 1:02x}:01.0"
        real = root / "devices" / "pci0000:00" / bridge / bus
        real.mkdir(parents=True)
        for name, value in {"vendor": "0x1ed5", "device": "0x0323", "class": "0x030200",
                            "numa_node": str(i // 4), "local_cpulist": "0-31" if i < 4 else "32-63"}.items():
            (real / name).write_text(value + "\n")
        (root / "bus" / "pci" / "devices" / bus).symlink_to(Path("../../..") / real.relative_to(root))
    for n, cpus in enumerate(("0-31", "32-63")):
        node = root / "devices" / "system" / "node" / f"node{n}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus + "\n")
        (node / "meminfo").write_text(f"Node {n} MemTotal:       263921384 kB\n")


def test_bugreport_carries_the_sysfs_it_read_and_replays_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accel.cli import main

    src = _plugin_dir("mthreads") / "scenarios" / "s5000-8"
    buses = ["0000:18:00.0", "0000:3a:00.0", "0000:4b:00.0", "0000:5c:00.0",
             "0000:9a:00.0", "0000:ba:00.0", "0000:ca:00.0", "0000:da:00.0"]
    sysfs = tmp_path / "sys"
    _fake_sysfs(sysfs, buses)
    (sysfs / "secret").write_text("hunter2")  # not an attribute accel reads: never copied
    out = tmp_path / "bundle"
    assert main(["bugreport", "--backend", "mthreads", "--replay", str(src), "--sysfs", str(sysfs),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    copied = out / "sysfs" / "bus" / "pci" / "devices" / "0000:18:00.0"
    assert copied.is_symlink() and (copied / "numa_node").read_text() == "0\n"
    assert not (out / "sysfs" / "secret").exists()
    manifest = json.loads((out / "MANIFEST").read_text())
    assert "devices/system/node/node1/meminfo" in manifest["sysfs"]
    main(["ls", "--backend", "mthreads", "--replay", str(src), "--sysfs", str(sysfs), "--json"])
    original, _ = capsys.readouterr()
    # Elsewhere: the bundle alone, no --sysfs, gives the same sysfs-enriched inventory.
    assert main(["ls", "--backend", "mthreads", "--replay", str(out), "--json"]) == 0
    replayed, _ = capsys.readouterr()
    doc = json.loads(replayed)
    assert _comparable(doc) == _comparable(json.loads(original))
    assert [d["numa_node"] for d in doc["devices"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert doc["devices"][0]["pci"]["pcie_root"] == "pci0000:00"
