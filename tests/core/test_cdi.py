"""CDI specs (``accel cdi``), checked against the CDI JSON schema (cncf-tags/container-device-interface).

The schema and its own good and bad test data are fixtures (tests/fixtures/cdi, SOURCES.md): the
first tests prove the validator harness accepts every good file and rejects every bad one, so a
spec it accepts is one the upstream schema accepts.  No container runtime runs here.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from accel.cli import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, main
from accel.errors import ConfigError
from accel.integrations.k8s import (
    CDI_VERSION,
    ENV_MODES,
    CdiProjection,
    cdi_specs,
    resource_slices,
    spec_file_name,
    write_specs,
)
from accel.model import HostInventory
from accel.plugin import BackendConfig
from accel.sim import PLUGIN as SIM
from accel.sim import list_profiles

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cdi"
GOOD = sorted((FIXTURES / "testdata" / "good").glob("*.json"))
BAD = sorted((FIXTURES / "testdata" / "bad").glob("*.json"))
# CDI's name rules (pkg/parser): vendor A-Z a-z 0-9 . - _, class without '.', names add ':'.
KIND = re.compile(r"^[A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9]/[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=.+$")
VENDORS = ("nvidia", "amd", "ascend", "cambricon", "hygon", "mthreads", "iluvatar", "metax", "kunlunxin", "enflame")


def _validator() -> Any:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    schema = json.loads((FIXTURES / "schema.json").read_text())
    defs = json.loads((FIXTURES / "defs.json").read_text())
    registry = Registry().with_resource("defs.json", Resource.from_contents(defs, default_specification=DRAFT7))
    return jsonschema.Draft7Validator(schema, registry=registry)


VALIDATOR = _validator()


def schema_errors(spec: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(spec)]


# -- the harness ----------------------------------------------------------------------------------

def test_the_fixtures_are_all_there() -> None:
    assert len(GOOD) == 4 and len(BAD) == 5


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_the_schema_accepts_its_good_test_data(path: Path) -> None:
    assert schema_errors(json.loads(path.read_text())) == []


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_the_schema_rejects_its_bad_test_data(path: Path) -> None:
    assert schema_errors(json.loads(path.read_text())) != []


def test_the_refs_into_defs_json_are_followed() -> None:
    """A device node without ``path`` is only invalid through ``defs.json``'s DeviceNode."""
    spec = {"cdiVersion": CDI_VERSION, "kind": "vendor.com/device",
            "devices": [{"name": "d", "containerEdits": {"deviceNodes": [{"hostPath": "/dev/x"}]}}]}
    assert any("'path' is a required property" in e for e in schema_errors(spec))


# -- helpers --------------------------------------------------------------------------------------

def check(projection: CdiProjection, inv: HostInventory) -> None:
    """Every spec passes the schema and CDI's name rules; every device is in a spec or a problem."""
    # Every device's DRA name, partitioned parents included (the default DRA mode withholds them,
    # but their CDI entries still describe the whole device).
    dra_names = {d["name"] for d in resource_slices(inv, partitionable=True).devices}
    in_specs: set[str] = set()
    for kind, spec in projection.specs.items():
        assert schema_errors(spec) == [], kind
        assert spec["cdiVersion"] == CDI_VERSION
        assert KIND.match(kind) and spec["kind"] == kind
        assert kind.split("/")[0] in {s["spec"]["driver"] for s in resource_slices(inv).slices}
        names = [d["name"] for d in spec["devices"]]
        assert len(names) == len(set(names)), names
        for dev in spec["devices"]:
            assert NAME.match(dev["name"]), dev["name"]
            edits = dev["containerEdits"]
            assert edits["deviceNodes"], dev["name"]
            assert all(ENV.match(e) for e in edits.get("env", [])), edits
            if dev["name"] in dra_names:
                in_specs.add(dev["name"])
        if spec["devices"]:
            assert spec["devices"][-1]["name"] == "all"
    problem_ids = {p.device_id for p in projection.problems}
    for dev in inv.devices:
        from accel.integrations.k8s._dra import _device_name

        assert _device_name(dev) in in_specs or dev.id in problem_ids, dev.id
    assert projection.complete == (not projection.problems)


def entry(projection: CdiProjection, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(d["containerEdits"] for d in projection.specs[kind]["devices"] if d["name"] == name)
    return found


def nodes(edits: dict[str, Any]) -> list[str]:
    return [n["path"] for n in edits.get("deviceNodes", [])]


def scenario_inventory(vendor: str, name: str, tmp_path: Path) -> HostInventory:
    plugin = importlib.import_module(f"accel.plugins.{vendor}").PLUGIN
    scenario = importlib.import_module(f"accel.plugins.{vendor}.conformance").CONFORMANCE_SCENARIOS[name]
    config = scenario.config(tmp_path) if scenario.config is not None else BackendConfig(options=dict(scenario.options))
    with plugin.open(config) as backend:
        inv: HostInventory = backend.inventory()
    return inv


def all_scenarios() -> list[tuple[str, str]]:
    out = []
    for vendor in VENDORS:
        conf = importlib.import_module(f"accel.plugins.{vendor}.conformance")
        out.extend((vendor, name) for name in conf.CONFORMANCE_SCENARIOS)
    return out


# -- every profile and replayed vendor fixture ----------------------------------------------------

@pytest.mark.parametrize("profile", list_profiles())
def test_every_simulator_profile_gives_valid_specs(profile: str) -> None:
    inv = SIM.open(BackendConfig(options={"profile": profile})).inventory()
    projection = cdi_specs(inv)
    check(projection, inv)
    # A device with nodes of its own gets entries; one without (rtx4090-4 lists none, on purpose)
    # is reported, never dropped silently.
    nodeless = {d.id for d in inv.devices if not d.binding.device_nodes}
    assert {p.device_id for p in projection.problems if p.code == "no_device_nodes"} == nodeless
    named = {d["name"] for spec in projection.specs.values() for d in spec["devices"]}
    for dev in inv.devices:
        if dev.id not in nodeless and dev.index is not None:
            assert str(dev.index) in named, dev.id
    if profile == "rtx4090-4":
        assert nodeless == {d.id for d in inv.devices}


@pytest.mark.parametrize(("vendor", "scenario"), all_scenarios(), ids=lambda v: str(v))
def test_every_replayed_vendor_scenario_gives_valid_specs(vendor: str, scenario: str, tmp_path: Path) -> None:
    inv = scenario_inventory(vendor, scenario, tmp_path)
    for env in ENV_MODES:
        check(cdi_specs(inv, env=env), inv)
    for spec in cdi_specs(inv, env="none").specs.values():
        assert all("env" not in d["containerEdits"] for d in spec["devices"])


def test_nvidia_device_nodes_and_uuid_visibility(tmp_path: Path) -> None:
    inv = scenario_inventory("nvidia", "h100-nvswitch-8", tmp_path)
    p = cdi_specs(inv)
    assert p.complete and list(p.specs) == ["nvidia.accel.dev/gpu"]
    uuid = "GPU-7b1e0c00-1d2a-4c3b-9e4f-000000000000"
    for name in ("0", uuid, "gpu-0000-18-00-0"):
        assert entry(p, "nvidia.accel.dev/gpu", name) == {
            "deviceNodes": [{"path": "/dev/nvidia0"}], "env": [f"CUDA_VISIBLE_DEVICES={uuid}"]}
    everything = entry(p, "nvidia.accel.dev/gpu", "all")
    assert nodes(everything) == [f"/dev/nvidia{i}" for i in range(8)]
    assert everything["env"][0].startswith(f"CUDA_VISIBLE_DEVICES={uuid},GPU-7b1e0c01")
    # The model does not list /dev/nvidiactl or /dev/nvidia-uvm: none is invented.
    assert "containerEdits" not in p.specs["nvidia.accel.dev/gpu"]
    assert len(p.specs["nvidia.accel.dev/gpu"]["devices"]) == 8 * 3 + 1


def test_amd_dri_nodes_and_kfd_once(tmp_path: Path) -> None:
    inv = scenario_inventory("amd", "mi300x-8", tmp_path)
    p = cdi_specs(inv)
    assert p.complete
    spec = p.specs["amd.accel.dev/gpu"]
    assert spec["containerEdits"] == {"deviceNodes": [{"path": "/dev/kfd"}]}
    # HIP_VISIBLE_DEVICES takes a host index: re-based inside the container, so left out by default.
    assert entry(p, "amd.accel.dev/gpu", "0") == {
        "deviceNodes": [{"path": "/dev/dri/card0"}, {"path": "/dev/dri/renderD128"}]}
    host = cdi_specs(inv, env="host")
    assert entry(host, "amd.accel.dev/gpu", "0")["env"] == ["HIP_VISIBLE_DEVICES=0"]
    assert entry(host, "amd.accel.dev/gpu", "all")["env"] == ["HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"]
    assert schema_errors(host.specs["amd.accel.dev/gpu"]) == []


def test_ascend_davinci_nodes_and_shared_control_nodes(tmp_path: Path) -> None:
    inv = scenario_inventory("ascend", "910b-8", tmp_path)
    p = cdi_specs(inv)
    assert p.complete and list(p.specs) == ["huawei.accel.dev/npu"]
    spec = p.specs["huawei.accel.dev/npu"]
    assert nodes(spec["containerEdits"]) == ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    # ASCEND_RT_VISIBLE_DEVICES is re-based inside a container (vendors.md): no env by default.
    assert entry(p, "huawei.accel.dev/npu", "3") == {"deviceNodes": [{"path": "/dev/davinci3"}]}
    assert nodes(entry(p, "huawei.accel.dev/npu", "all")) == [f"/dev/davinci{i}" for i in range(8)]
    host = cdi_specs(inv, env="host")
    assert entry(host, "huawei.accel.dev/npu", "3") == {
        "deviceNodes": [{"path": "/dev/davinci3"}], "env": ["ASCEND_RT_VISIBLE_DEVICES=3"]}
    assert entry(host, "huawei.accel.dev/npu", "all")["env"] == ["ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"]


def test_cambricon_dev_and_ctl_nodes(tmp_path: Path) -> None:
    p = cdi_specs(scenario_inventory("cambricon", "mlu370-x8", tmp_path))
    assert p.complete
    spec = p.specs["cambricon.accel.dev/mlu"]
    assert spec["containerEdits"] == {"deviceNodes": [{"path": "/dev/cambricon_ctl"}]}
    assert entry(p, "cambricon.accel.dev/mlu", "1") == {"deviceNodes": [{"path": "/dev/cambricon_dev1"}]}
    host = cdi_specs(scenario_inventory("cambricon", "mlu370-x8", tmp_path / "h"), env="host")
    assert entry(host, "cambricon.accel.dev/mlu", "1") == {
        "deviceNodes": [{"path": "/dev/cambricon_dev1"}], "env": ["MLU_VISIBLE_DEVICES=1"]}


def test_kunlunxin_xpu_nodes(tmp_path: Path) -> None:
    p = cdi_specs(scenario_inventory("kunlunxin", "r300-2", tmp_path), env="host")
    assert p.complete
    assert entry(p, "kunlunxin.accel.dev/xpu", "1") == {
        "deviceNodes": [{"path": "/dev/xpu1"}], "env": ["XPU_VISIBLE_DEVICES=1"]}


def test_a_hygon_dcu_with_only_kfd_is_reported(tmp_path: Path) -> None:
    """Without sysfs the DCU's DRI nodes are unknown: /dev/kfd alone is shared, not the device."""
    inv = scenario_inventory("hygon", "k100ai-1dcu-bare", tmp_path)
    p = cdi_specs(inv)
    assert [(x.device_id, x.code) for x in p.problems] == [("hygon:0x7100fa8866904061", "no_device_nodes")]
    assert "/dev/kfd" in p.problems[0].message
    assert p.specs["hygon.accel.dev/dcu"]["devices"] == []


@pytest.mark.parametrize(("vendor", "scenario"), [("mthreads", "s5000-8"), ("metax", "c550-8"),
                                                  ("iluvatar", "bi-v150-16"), ("enflame", "s60-2dev")])
def test_vendors_whose_bindings_list_no_nodes_are_reported(vendor: str, scenario: str, tmp_path: Path) -> None:
    inv = scenario_inventory(vendor, scenario, tmp_path)
    p = cdi_specs(inv)
    assert [(x.device_id, x.code) for x in p.problems] == [(d.id, "no_device_nodes") for d in inv.devices]


# -- bad cases ------------------------------------------------------------------------------------

def test_duplicate_names_are_reported_and_left_out(tmp_path: Path) -> None:
    inv = scenario_inventory("kunlunxin", "r300-2", tmp_path)
    first, second = inv.devices
    clash = second.model_copy(update={"index": first.index})
    p = cdi_specs(inv.model_copy(update={"devices": (first, clash)}), env="host")
    assert [(x.device_id, x.code) for x in p.problems] == [(second.id, "duplicate_name")]
    assert "'0'" in p.problems[0].message
    names = [d["name"] for d in p.specs["kunlunxin.accel.dev/xpu"]["devices"]]
    assert names.count("0") == 1 and entry(p, "kunlunxin.accel.dev/xpu", "0")["env"] == ["XPU_VISIBLE_DEVICES=0"]
    assert schema_errors(p.specs["kunlunxin.accel.dev/xpu"]) == []


def test_a_device_whose_every_name_is_taken_is_reported(tmp_path: Path) -> None:
    inv = scenario_inventory("kunlunxin", "r300-2", tmp_path)
    first = inv.devices[0]
    twin = first.model_copy(update={"id": "kunlunxin:twin"})
    p = cdi_specs(inv.model_copy(update={"devices": (first, twin)}))
    codes = [(x.device_id, x.code) for x in p.problems]
    assert codes[-1] == ("kunlunxin:twin", "invalid_name")
    assert all(c == ("kunlunxin:twin", "duplicate_name") for c in codes[:-1]) and len(codes) >= 2


def test_a_visibility_variable_without_a_value_is_reported(tmp_path: Path) -> None:
    inv = scenario_inventory("kunlunxin", "r300-2", tmp_path)
    dev = inv.devices[0]
    blind = dev.model_copy(update={"binding": dev.binding.model_copy(update={"visible_id": None})})
    p = cdi_specs(inv.model_copy(update={"devices": (blind,)}))
    assert [(x.device_id, x.code) for x in p.problems] == [(dev.id, "no_visible_id")]
    assert "env" not in entry(p, "kunlunxin.accel.dev/xpu", "0")


def test_a_bad_domain_is_refused() -> None:
    inv = SIM.open(BackendConfig(options={"profile": "rtx4090-4"})).inventory()
    with pytest.raises(ConfigError):
        cdi_specs(inv, domain="bad domain")


# -- files and the command ------------------------------------------------------------------------

def test_spec_file_names_follow_cdi() -> None:
    assert spec_file_name("nvidia.accel.dev/gpu") == "nvidia.accel.dev-gpu.json"


def test_write_specs_is_atomic_and_refuses_to_overwrite(tmp_path: Path) -> None:
    p = cdi_specs(scenario_inventory("ascend", "910b-8", tmp_path / "x"))
    out = tmp_path / "cdi"
    out.mkdir()
    (written,) = write_specs(p.specs, out)
    assert written == out / "huawei.accel.dev-npu.json"
    assert json.loads(written.read_text()) == p.specs["huawei.accel.dev/npu"]
    written.write_text("{}")
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        write_specs(p.specs, out)
    assert written.read_text() == "{}"
    write_specs(p.specs, out, force=True)
    assert schema_errors(json.loads(written.read_text())) == []
    assert sorted(x.name for x in out.iterdir()) == ["huawei.accel.dev-npu.json"]  # no temporary left
    with pytest.raises(ConfigError, match="not a directory"):
        write_specs(p.specs, tmp_path / "missing")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_accel_cdi_prints_one_spec_per_file_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "cdi", "--backend", "ascend", "--option", "scenario=910b-8")
    assert code == EXIT_OK and err == ""
    specs = json.loads(out)
    assert list(specs) == ["huawei.accel.dev-npu.json"]
    assert schema_errors(specs["huawei.accel.dev-npu.json"]) == []


def test_accel_cdi_is_partial_and_names_devices_without_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "cdi", "--sim", "rtx4090-4")
    assert code == EXIT_PARTIAL
    lines = err.strip().splitlines()
    assert len(lines) == 4 and all("no_device_nodes" in line and "nvidia:GPU-4090c00" in line for line in lines)
    assert json.loads(out)["nvidia.accel.dev-gpu.json"]["devices"] == []


def test_accel_cdi_out_writes_and_refuses_without_force(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ("cdi", "--backend", "ascend", "--option", "scenario=310p3-2", "--out", str(tmp_path))
    code, out, _ = run(capsys, *argv)
    target = tmp_path / "huawei.accel.dev-npu.json"
    assert code == EXIT_OK and out.strip() == str(target)
    before = target.read_text()
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USAGE and "refusing to overwrite" in err
    code, _, _ = run(capsys, *argv, "--force")
    assert code == EXIT_OK and target.read_text() == before


def test_accel_cdi_out_writes_no_file_for_a_spec_without_devices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "cdi", "--sim", "rtx4090-4", "--out", str(tmp_path))
    assert code == EXIT_PARTIAL and out == "" and err.count("no_device_nodes") == 4
    assert list(tmp_path.iterdir()) == []


def test_a_bad_env_mode_is_refused() -> None:
    inv = SIM.open(BackendConfig(options={"profile": "rtx4090-4"})).inventory()
    with pytest.raises(ConfigError, match="env mode"):
        cdi_specs(inv, env="all")


def test_accel_cdi_env_host_writes_host_indexes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cdi", "--backend", "ascend", "--option", "scenario=910b-8", "--env", "host")
    assert code == EXIT_OK
    devices = json.loads(out)["huawei.accel.dev-npu.json"]["devices"]
    assert devices[0]["containerEdits"]["env"] == ["ASCEND_RT_VISIBLE_DEVICES=0"]
