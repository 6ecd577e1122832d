"""DRA ResourceSlice projection, checked against the real Kubernetes client's object schema."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from accel.errors import ConfigError
from accel.integrations.k8s import MAX_ATTRIBUTES, MAX_DEVICES, MAX_DEVICES_WITH_TAINTS, resource_slices
from accel.model import HostInventory, validate
from accel.plugin import BackendConfig
from accel.sim import PLUGIN, generate_cluster, list_profiles

k8s = pytest.importorskip("kubernetes.client")

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def inventory(profile: str, **options: str) -> HostInventory:
    return PLUGIN.open(BackendConfig(options={"profile": profile, **options})).inventory()


def round_trip(obj: dict[str, Any]) -> dict[str, Any]:
    """Deserialize into the client's V1ResourceSlice and back: unknown keys would be dropped."""
    api = k8s.ApiClient()
    model = api.deserialize(json.dumps(obj), "V1ResourceSlice", "application/json")
    back: dict[str, Any] = api.sanitize_for_serialization(model)
    return back


@pytest.mark.parametrize("partitionable", [False, True], ids=["default", "partitionable"])
@pytest.mark.parametrize("profile", list_profiles())
def test_every_profile_projects_onto_the_real_schema(profile: str, partitionable: bool) -> None:
    inv = inventory(profile)
    projection = resource_slices(inv, partitionable=partitionable)
    assert projection.omitted == {}
    # Safe publication: a parent with live partitions is published only with counters (see
    # test_dra_safety.py); by default its partitions stand in for it.
    parents = {p.parent_id for p in inv.partitions}
    expected = len(inv.devices) + len(inv.partitions) - (0 if partitionable else len(parents))
    assert sum(1 for _ in projection.devices) == expected
    for obj in projection.slices:
        assert round_trip(obj) == obj
        spec = obj["spec"]
        assert len(spec.get("devices", [])) <= MAX_DEVICES
        assert spec["driver"].endswith(".accel.dev") and len(spec["driver"]) <= 63
        for dev in spec.get("devices", []):
            assert DNS_LABEL.match(dev["name"]), dev["name"]
            assert len(dev["attributes"]) + len(dev.get("capacity", {})) <= MAX_ATTRIBUTES
            for key, value in dev["attributes"].items():
                assert re.match(r"^[a-z0-9.-]+/[A-Za-z_][A-Za-z0-9_]{0,31}$", key), key
                assert len(value) == 1
                if "string" in value:
                    assert len(value["string"]) <= 64


def test_values_a_scheduler_selects_on() -> None:
    inv = inventory("dgx-h100")
    dev = next(resource_slices(inv).devices)
    attrs = dev["attributes"]
    assert dev["name"] == "gpu-0000-18-00-0"
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": "0000:18:00.0"}
    # upstream standardises only pciBusID and pcieRoot: NUMA lives under accel's domain
    assert attrs["accel.dev/numaNode"] == {"int": 0}
    assert not any(k.startswith("resource.kubernetes.io/") for k in attrs if not k.endswith(("pciBusID", "pcieRoot")))
    assert attrs["accel.dev/computeCapability"] == {"version": "9.0.0"}
    assert attrs["accel.dev/linkDomainSize"] == {"int": 8}
    assert dev["capacity"]["accel.dev/memory"] == {"value": str(81559 * 2**20)}


def test_mixed_host_gets_one_pool_per_vendor_driver() -> None:
    slices = resource_slices(inventory("mixed-nvidia-ascend"), node_name="node-7").slices
    assert sorted(s["spec"]["driver"] for s in slices) == ["huawei.accel.dev", "nvidia.accel.dev"]
    asc = next(s for s in slices if s["spec"]["driver"] == "huawei.accel.dev")["spec"]["devices"][0]
    # a vendor extra goes under the driver's own name, never a domain accel does not own
    assert asc["attributes"]["huawei.accel.dev/chipName"] == {"string": "910B3"}
    assert not any(k.startswith("huawei.com/") for k in asc["attributes"])
    assert all(s["spec"]["nodeName"] == "node-7" and s["spec"]["pool"]["name"] == "node-7" for s in slices)


def test_mig_partitions_are_devices_of_type_partition() -> None:
    devices = list(resource_slices(inventory("a100-mig")).devices)
    parts = [d for d in devices if d["attributes"]["accel.dev/type"] == {"string": "partition"}]
    assert len(parts) == 4 == len(devices)  # MIG on: the full GPU is not published beside them
    first = next(p for p in parts if p["attributes"]["accel.dev/partitionProfile"] == {"string": "3g.40gb"})
    assert first["name"] == "gpu-0000-07-00-0-3g40gb-4"
    assert first["attributes"]["accel.dev/parentUUID"]["string"].startswith("GPU-a100c000")


def test_unhealthy_devices_are_tainted() -> None:
    projection = resource_slices(inventory("dgx-h100", faults="ecc_uncorrectable:2,device_lost:5@0"))
    tainted = {d["name"]: d["taints"] for d in projection.devices if "taints" in d}
    assert set(tainted) == {"gpu-0000-3a-00-0", "gpu-0000-ab-00-0"}
    assert tainted["gpu-0000-3a-00-0"] == [
        {"key": "accel.dev/uncorrectable-memory-error", "effect": "NoSchedule", "value": "nvidia.xid_48"}
    ]
    assert tainted["gpu-0000-ab-00-0"] == [
        {"key": "accel.dev/device-lost", "effect": "NoSchedule", "value": "nvidia.xid_79"}
    ]
    for obj in projection.slices:
        assert round_trip(obj) == obj


def test_large_pools_are_split_within_the_limit() -> None:
    hosts = generate_cluster(40, "dgx-h100")
    data = hosts[0].model_dump()
    data["devices"] = [d.model_dump() for h in hosts for d in h.devices]
    for i, dev in enumerate(data["devices"]):
        dev["pci"]["bus_id"] = f"0000:{i // 256:02x}:{(i % 256) // 8:02x}.{i % 8}"
    data["links"], data["domains"] = [], []
    big = validate(HostInventory, data)
    slices = resource_slices(big).slices
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 128, 64]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    assert MAX_DEVICES_WITH_TAINTS == 64


def test_what_does_not_fit_is_reported_not_dropped() -> None:
    inv = inventory("ascend-910b-8")
    data = inv.model_dump()
    data["devices"][0]["extras"] = {f"example.com/k{i}": i for i in range(40)} | {"example.com/bad-name": "x"}
    data["devices"][0]["extras"] |= {"huawei.com/k1": "twice"}
    projection = resource_slices(validate(HostInventory, data))
    notes = projection.omitted["npu-0000-c1-00-0"]
    assert any("bad-name" in n and "C identifier" in n for n in notes)
    assert any("over the 32" in n for n in notes)
    assert any("huawei.accel.dev/k1" in n and "twice" in n for n in notes)


def test_bad_domain() -> None:
    with pytest.raises(ConfigError, match="DNS subdomain"):
        resource_slices(inventory("rtx4090-4"), domain="Not A Domain")
