"""PCIe and NUMA facts from sysfs, on a fake tree shaped like a dual-socket server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from accel.model import Device, DistanceLevel, Host, HostInventory, PciInfo
from accel.sysfs import enrich_inventory, numa_nodes, pci_function, scan_pci
from accel.testing import FakeSysfs


def _devices(ids: list[str], vendor: str = "nvidia") -> list[Device]:
    return [Device(id=f"{vendor}:pci-{b}", vendor=vendor, kind="gpu", model="X", pci=PciInfo(bus_id=b)) for b in ids]


def test_dual_socket_levels(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path)
    ids = fs.dual_socket_server("10de", "2330")
    assert len(ids) == 8
    inv = HostInventory(host=Host(hostname="h"), devices=tuple(_devices(ids)), collected_at=datetime.now(UTC))
    inv = enrich_inventory(inv, tmp_path)
    m = inv.distance_matrix()
    # Two GPUs per switch, two switches per socket, two sockets.
    assert m.levels[0][1] is DistanceLevel.PIX
    assert m.levels[0][2] is DistanceLevel.NODE
    assert m.levels[0][4] is DistanceLevel.SYS
    assert m.levels[6][7] is DistanceLevel.PIX
    assert inv.devices[0].numa_node == 0 and inv.devices[7].numa_node == 1
    assert inv.devices[0].cpu_affinity == "0-23,48-71"
    assert inv.devices[0].pci is not None and inv.devices[0].pci.pcie_root == "pci0000:15"
    assert [n.id for n in inv.host.numa_nodes] == [0, 1]
    assert inv.host.numa_nodes[0].memory_bytes == 256 * 2**30


def test_same_root_complex_different_ports_is_phb(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path)
    fs.add_device("0000:03:00.0", vendor="1002", bridges=["0000:00:01.0", "0000:01:00.0", "0000:02:00.0"], numa_node=0)
    fs.add_device("0000:13:00.0", vendor="1002", bridges=["0000:00:03.0", "0000:11:00.0", "0000:12:00.0"], numa_node=0)
    inv = HostInventory(
        host=Host(hostname="h"),
        devices=tuple(_devices(["0000:03:00.0", "0000:13:00.0"], "amd")),
        collected_at=datetime.now(UTC),
    )
    m = enrich_inventory(inv, tmp_path).distance_matrix()
    assert m.levels[0][1] is DistanceLevel.PHB


def test_scan_filters_vendor_and_class(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path)
    fs.add_device("0000:c1:00.0", vendor="19e5", device="d802", class_code="0x120000", numa_node=6)
    fs.add_device("0000:02:00.0", vendor="19e5", device="1711", class_code="0x030000")  # Huawei BMC VGA
    fs.add_device("0000:18:00.0", vendor="10de", class_code="0x030200")
    found = scan_pci(tmp_path, vendor_ids=["19e5"], class_prefixes=["12"])
    assert [f.bus_id for f in found] == ["0000:c1:00.0"]
    assert found[0].numa_node == 6 and found[0].class_code == "120000"
    assert len(scan_pci(tmp_path, vendor_ids=["0x19E5"])) == 2


def test_missing_or_unreadable_sysfs_is_empty(tmp_path: Path) -> None:
    assert scan_pci(tmp_path / "nope") == []
    assert numa_nodes(tmp_path / "nope") == ()
    assert pci_function("0000:01:00.0", tmp_path) is None


def test_negative_numa_and_garbage_files(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path)
    real = fs.add_device("0000:01:00.0", vendor="10de", numa_node=-1, cpulist="garbage!")
    (real / "vendor").write_text("not-hex\n")
    fn = pci_function("0000:01:00.0", tmp_path)
    assert fn is not None
    assert fn.numa_node is None and fn.cpu_affinity is None and fn.vendor_id is None


def test_virtual_function_parent(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path)
    fs.add_device("0000:3b:00.0", vendor="1e36")
    fs.add_device("0000:3b:00.1", vendor="1e36", physfn="0000:3b:00.0")
    fn = pci_function("0000:3b:00.1", tmp_path)
    assert fn is not None and fn.is_virtual_function and fn.parent_bus_id == "0000:3b:00.0"


def test_backend_values_win_over_sysfs(tmp_path: Path) -> None:
    fs = FakeSysfs(tmp_path)
    fs.add_device("0000:01:00.0", vendor="10de", numa_node=1, cpulist="8-15")
    d = Device(id="nvidia:x", vendor="nvidia", kind="gpu", model="X", pci=PciInfo(bus_id="0000:01:00.0"), numa_node=0)
    inv = HostInventory(host=Host(hostname="h"), devices=(d,), collected_at=datetime.now(UTC))
    out = enrich_inventory(inv, tmp_path)
    assert out.devices[0].numa_node == 0
    assert out.devices[0].cpu_affinity == "8-15"
