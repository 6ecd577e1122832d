"""DeviceClasses, example claims and the NFD feature file."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from accel.cli import main
from accel.errors import ConfigError
from accel.integrations.k8s import FEATURES_DIR, claim_templates, device_classes, nfd_features, valid_label
from accel.model import HostInventory
from accel.plugin import BackendConfig
from accel.sim import PLUGIN, list_profiles

NOW = datetime(2026, 12, 3, 17, 0, 0, tzinfo=UTC)


def inventory(profile: str) -> HostInventory:
    return PLUGIN.open(BackendConfig(options={"profile": profile})).inventory()


def test_one_class_per_vendor_kind_and_type() -> None:
    classes = device_classes(inventory("mixed-nvidia-ascend"))
    assert [c["metadata"]["name"] for c in classes] == ["npu.huawei.accel.dev", "gpu.nvidia.accel.dev"]
    (sel,) = classes[1]["spec"]["selectors"]
    assert sel["cel"]["expression"] == (
        'device.driver == "nvidia.accel.dev" && device.attributes["accel.dev"].kind == "gpu" && '
        'device.attributes["accel.dev"].type == "device"'
    )
    mig = [c["metadata"]["name"] for c in device_classes(inventory("a100-mig"))]
    assert mig == ["gpu-partition.nvidia.accel.dev"]  # MIG on: no whole-GPU class by default
    both = [c["metadata"]["name"] for c in device_classes(inventory("a100-mig"), partitionable=True)]
    assert both == ["gpu.nvidia.accel.dev", "gpu-partition.nvidia.accel.dev"]


@pytest.mark.parametrize("profile", list_profiles())
def test_every_profile_has_an_example_claim_naming_a_class_it_has(profile: str) -> None:
    inv = inventory(profile)
    names = {c["metadata"]["name"] for c in device_classes(inv)}
    templates = claim_templates(inv)
    assert templates
    for t in templates:
        (req,) = t["spec"]["spec"]["devices"]["requests"]
        assert req["exactly"]["deviceClassName"] in names and req["exactly"]["count"] == 1
        cel = req["exactly"]["selectors"][0]["cel"]["expression"]
        assert re.match(r'^device\.attributes\["accel\.dev"\]\.model == "[^"]+"', cel)


def test_partition_claim_selects_the_profile() -> None:
    (t,) = claim_templates(inventory("a100-mig"))
    cel = t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert cel.endswith('device.attributes["accel.dev"].partitionProfile == "3g.40gb"')


def test_nfd_feature_file() -> None:
    text = nfd_features(inventory("dgx-h100"), now=NOW, ttl=timedelta(minutes=90))
    lines = text.splitlines()
    assert lines[0] == "# +expiry-time=2026-12-03T18:30:00Z"
    labels = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    assert labels == {
        "accel.dev/present": "true",
        "accel.dev/nvidia.count": "8",
        "accel.dev/nvidia.model": "NVIDIA-H100-80GB-HBM3",
        "accel.dev/nvidia.memory": "85520809984",
        "accel.dev/nvidia.link-domains": "1",
        "accel.dev/nvidia.link-domain-size": "8",
        "accel.dev/nvidia.link-type": "nvlink_island",
    }
    assert FEATURES_DIR == "/etc/kubernetes/node-feature-discovery/features.d/"


@pytest.mark.parametrize("profile", list_profiles())
def test_nfd_labels_follow_the_kubernetes_syntax(profile: str) -> None:
    text = nfd_features(inventory(profile), now=NOW)
    header = re.compile(r"^# \+expiry-time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
    assert header.match(text.splitlines()[0])
    assert datetime.fromisoformat(text.splitlines()[0].split("=", 1)[1]) == NOW + timedelta(hours=1)
    for line in text.splitlines()[1:]:
        if line.startswith("#"):
            continue
        key, value = line.split("=", 1)
        assert valid_label(key, value), line
        prefix, name = key.split("/")
        assert prefix == "accel.dev" and len(name) <= 63 and len(value) <= 63


def test_partition_count_label() -> None:
    assert "accel.dev/nvidia.partitions=4\n" in nfd_features(inventory("a100-mig"), now=NOW)


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("accel.dev/nvidia.count", "8", True),
        ("nvidia.count", "", True),
        ("accel.dev/" + "a" * 63, "x", True),
        ("accel.dev/" + "a" * 64, "x", False),
        ("accel.dev/-bad", "x", False),
        ("accel.dev/bad-", "x", False),
        ("Accel.dev/x", "x", False),
        ("accel.dev/x", "NVIDIA H100", False),
        ("accel.dev/x", "v" * 64, False),
        ("accel.dev/x", "-lead", False),
        ("a/b/c", "x", False),
    ],
)
def test_label_syntax_rules(key: str, value: str, ok: bool) -> None:
    assert valid_label(key, value) is ok


def test_nfd_refuses_a_past_expiry() -> None:
    with pytest.raises(ConfigError, match="future"):
        nfd_features(inventory("rtx4090-4"), ttl=timedelta(0))


@pytest.mark.parametrize("flag", ["--device-classes", "--claim-templates", "--partitionable"])
def test_cli_prints_lists(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    assert main(["dra", "--sim", "a100-mig", flag]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "List" and doc["items"]


def test_cli_nfd(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dra", "--sim", "mlu370-x8", "--nfd"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# +expiry-time=") and "accel.dev/cambricon.count=8\n" in out


def _cel_view(driver: str, dev: dict[str, object]) -> dict[str, object]:
    """The `device` variable DRA's CEL sees: attributes by domain, then by name, typed values."""
    attrs: dict[str, dict[str, object]] = {}
    for key, typed in dev["attributes"].items():  # type: ignore[attr-defined]
        domain, name = key.split("/")
        attrs.setdefault(domain, {})[name] = next(iter(typed.values()))
    return {"driver": driver, "attributes": attrs}


@pytest.mark.parametrize("partitionable", [False, True], ids=["default", "partitionable"])
@pytest.mark.parametrize("profile", list_profiles())
def test_cel_selectors_pick_exactly_the_published_devices(profile: str, partitionable: bool) -> None:
    """Evaluate the selectors with a real CEL implementation (cel-python) over the slices."""
    celpy = pytest.importorskip("celpy")
    from accel.integrations.k8s import resource_slices

    env = celpy.Environment()

    def run(expr: str, view: dict[str, object]) -> bool:
        return bool(env.program(env.compile(expr)).evaluate({"device": celpy.json_to_cel(view)}))

    inv = inventory(profile)
    classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
               for c in device_classes(inv, partitionable=partitionable)}
    views = [_cel_view(s["spec"]["driver"], d) for s in resource_slices(inv, partitionable=partitionable).slices
             for d in s["spec"].get("devices", [])]
    for view in views:
        assert sum(run(expr, view) for expr in classes.values()) == 1, view
    for t in claim_templates(inv, partitionable=partitionable):
        exactly = t["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        cls = classes[exactly["deviceClassName"]]
        sel = exactly["selectors"][0]["cel"]["expression"]
        assert any(run(cls, v) and run(sel, v) for v in views)


def test_cli_says_which_parents_it_withholds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dra", "--sim", "a100-mig"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert sum(len(s["spec"].get("devices", [])) for s in doc["items"]) == 4
    assert captured.err.count("\n") == 1 and "not published as a device: partitioned (4 partition(s)" in captured.err
    assert main(["dra", "--sim", "a100-mig", "--partitionable"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert sum(len(s["spec"].get("devices", [])) for s in json.loads(captured.out)["items"]) == 5
