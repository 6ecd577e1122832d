"""accel.integrations.slurm without a Slurm: gres.conf goldens, --check, the TaskProlog mapping,
healthcheck decisions against a fake scontrol."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from accel.errors import ConfigError, ToolExitError, ToolTimeoutError
from accel.integrations.slurm import allocated, bad_devices, check, decide_and_act, generate, task_prolog_lines
from accel.model import Binding, Health, HostInventory
from accel.plugin import BackendConfig
from accel.sim import PLUGIN
from accel.tools import ToolResult

GOLDEN = Path(__file__).parent / "golden"


def inventory(profile: str, **options: str) -> HostInventory:
    with PLUGIN.open(BackendConfig(options={"profile": profile, **options})) as backend:
        return backend.inventory()


def accel(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "ACCEL_"))} | dict(env or {})
    return subprocess.run([sys.executable, "-m", "accel", *args], capture_output=True, text=True, env=full, timeout=60)


# ------------------------------------------------------------------------------- gres-conf
@pytest.mark.parametrize("profile", ["ascend-910b-8", "mlu370-x8", "mixed-nvidia-ascend", "a100-mig"])
def test_gres_conf_matches_its_golden_file(profile: str) -> None:
    res = accel("slurm", "gres-conf", "--sim", profile)
    assert res.returncode == 0, res.stderr
    assert res.stdout == (GOLDEN / f"{profile}.gres.conf").read_text()


def test_ascend_records_name_the_davinci_node_cores_links_and_no_slurm_variable() -> None:
    conf = generate(inventory("ascend-910b-8"))
    assert [r.file for r in conf.records] == [f"/dev/davinci{i}" for i in range(8)]
    assert {r.type for r in conf.records} == {"ascend_910b3"}
    assert conf.records[0].cores == "144-167"
    assert conf.records[0].links == (-1, 1, 1, 1, 1, 1, 1, 1)  # HCCS full mesh
    assert {r.flags for r in conf.records} == {"no_gpu_env"}
    assert conf.node_gres() == "Gres=gpu:ascend_910b3:8"


def test_nvidia_alone_keeps_slurms_cuda_variable_and_nvlink_counts() -> None:
    conf = generate(inventory("dgx-h100"))
    assert {r.flags for r in conf.records} == {"nvidia_gpu_env"}
    assert all(r.file.startswith("/dev/nvidia") for r in conf.records)


def test_amd_gets_amd_gpu_env_and_its_card_node_not_kfd() -> None:
    conf = generate(inventory("mi300x-8"))
    assert {r.flags for r in conf.records} == {"amd_gpu_env"}
    assert [r.file for r in conf.records][:2] == ["/dev/dri/card0", "/dev/dri/card1"]


def test_mixed_vendors_share_no_gpu_env_because_slurmd_refuses_differing_flags() -> None:
    conf = generate(inventory("mixed-nvidia-ascend"))
    assert {r.flags for r in conf.records} == {"no_gpu_env"}
    assert [r.type for r in conf.records] == ["ascend_910b3"] * 4 + ["nvidia_h100_pcie"] * 4
    assert conf.records[4].links == (0, 0, 0, 0, -1, 12, 0, 0)  # NVLink pairs, nothing to the NPUs


def test_dev_root_threads_and_shards() -> None:
    conf = generate(inventory("mlu370-x8"), dev_root="/tmp/x", threads_per_core=2, shards_per_device=4)
    assert conf.records[0].file == "/tmp/x/dev/cambricon_dev0"
    assert conf.records[0].cores == "0-31"  # CPUs 0-31,64-95 of 128 with 2 threads per core
    assert conf.node_gres() == "Gres=gpu:mlu370_x8:8,shard:32"
    assert "Name=shard Count=4 File=/tmp/x/dev/cambricon_dev0" in conf.render()
    assert conf.gres_types() == "GresTypes=gpu,shard"


def test_mig_instances_are_typed_records_on_the_parent_node() -> None:
    conf = generate(inventory("a100-mig"))
    assert all(r.multiple_files and r.file == "/dev/nvidia0" for r in conf.records)
    assert sorted({r.type for r in conf.records})[0] == "nvidia_a100_sxm4_80gb_1g_10gb"
    assert all(r.visible_id and r.visible_id.startswith("MIG-") for r in conf.records)


def test_a_device_without_a_node_is_a_comment_a_problem_and_exit_5(tmp_path: Path) -> None:
    inv = inventory("ascend-910b-8")
    devs = list(inv.devices)
    devs[2] = devs[2].model_copy(update={"binding": Binding(visible_env="ASCEND_RT_VISIBLE_DEVICES", visible_id="2")})
    conf = generate(inv.model_copy(update={"devices": devs}))
    assert len(conf.records) == 7
    assert [p.code for p in conf.problems] == ["slurm.no-device-node"]
    assert conf.problems[0].device_id == devs[2].id
    assert any(devs[2].id in c for c in conf.comments)
    assert f"# {devs[2].id}" in conf.render()


# --------------------------------------------------------------------------------- --check
def _broken(tmp_path: Path, old: str, new: str, *, count: int = 1) -> Path:
    text = (GOLDEN / "ascend-910b-8.gres.conf").read_text()
    assert old in text
    path = tmp_path / "gres.conf"
    path.write_text(text.replace(old, new, count))
    return path


def test_check_accepts_the_generated_file() -> None:
    res = accel("slurm", "gres-conf", "--sim", "ascend-910b-8", "--check", str(GOLDEN / "ascend-910b-8.gres.conf"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "matches the hardware (8 gpu records)" in res.stdout


@pytest.mark.parametrize(
    ("old", "new", "kinds", "needle"),
    [
        ("Name=gpu Type=ascend_910b3 File=/dev/davinci7", "# gone", {"count", "missing-file"}, "/dev/davinci7"),
        ("Type=ascend_910b3 File=/dev/davinci3", "Type=910b File=/dev/davinci3", {"type", "count"}, "Type=910b"),
        ("File=/dev/davinci5 Cores=0-23", "File=/dev/davinci5 Cores=24-47", {"cores"}, "Cores=24-47"),
        ("File=/dev/davinci6", "File=/dev/davinci9", {"missing-file", "extra-file"}, "/dev/davinci9"),
        ("Links=1,1,-1,1,1,1,1,1", "Links=0,0,-1,0,0,0,0,0", {"links"}, "Links=0,0,-1"),
        (
            "File=/dev/davinci0 Cores=144-167 Links=-1,1,1,1,1,1,1,1 Flags=no_gpu_env",
            "File=/dev/davinci0 Cores=144-167 Links=-1,1,1,1,1,1,1,1",
            {"flags"},
            "no_gpu_env",
        ),
    ],
    ids=["wrong-count-missing-file", "wrong-type", "wrong-cores", "extra-file", "wrong-links", "no-flags"],
)
def test_check_names_every_difference(tmp_path: Path, old: str, new: str, kinds: set[str], needle: str) -> None:
    path = _broken(tmp_path, old, new)
    diffs = check(path.read_text(), generate(inventory("ascend-910b-8")))
    assert {d.kind for d in diffs} == kinds, diffs
    assert any(needle in d.message for d in diffs)
    res = accel("slurm", "gres-conf", "--sim", "ascend-910b-8", "--check", str(path))
    assert res.returncode == 1
    assert needle in res.stdout


def test_check_a_hand_written_range_file(tmp_path: Path) -> None:
    # What an administrator writes by hand (the issue's measured file): four records in a range.
    path = tmp_path / "gres.conf"
    path.write_text("Name=gpu Type=910b File=/dev/davinci[0-3]\n")
    diffs = check(path.read_text(), generate(inventory("ascend-910b-8")))
    kinds = [d.kind for d in diffs]
    assert kinds.count("missing-file") == 4 and kinds.count("type") == 4 and kinds.count("cores") == 4
    assert "count" in kinds


def test_check_an_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    res = accel("slurm", "gres-conf", "--sim", "ascend-910b-8", "--check", str(tmp_path / "nope"))
    assert res.returncode == 2
    assert "cannot read" in res.stderr


# ------------------------------------------------------------------------------- task-prolog
def test_prolog_maps_positions_to_ascend_logic_ids_and_unsets_cuda() -> None:
    conf = generate(inventory("ascend-910b-8"))
    lines = task_prolog_lines(allocated({"SLURM_STEP_GPUS": "4,5"}, conf), conf)
    assert lines == [
        "export ASCEND_RT_VISIBLE_DEVICES=4,5",
        "unset CUDA_VISIBLE_DEVICES",
        "unset ROCR_VISIBLE_DEVICES",
        "unset ZE_AFFINITY_MASK",
        "unset GPU_DEVICE_ORDINAL",
    ]


def test_prolog_on_a_mixed_node_lists_each_vendors_own_devices() -> None:
    conf = generate(inventory("mixed-nvidia-ascend"))
    lines = task_prolog_lines(allocated({"SLURM_STEP_GPUS": "1,5"}, conf), conf)
    assert "export ASCEND_RT_VISIBLE_DEVICES=1" in lines
    assert "export CUDA_VISIBLE_DEVICES=GPU-1100ec01-2b3c-4d5e-8f90-000000000001" in lines
    assert "unset CUDA_VISIBLE_DEVICES" not in lines
    only_npu = task_prolog_lines(allocated({"SLURM_STEP_GPUS": "0,1"}, conf), conf)
    assert "export CUDA_VISIBLE_DEVICES=" in only_npu  # the GPUs are hidden, not all visible


def test_prolog_prefers_the_step_and_falls_back_to_the_job() -> None:
    conf = generate(inventory("mlu370-x8"))
    assert [r.visible_id for r in allocated({"SLURM_JOB_GPUS": "6"}, conf) or []] == ["6"]
    assert [r.visible_id for r in allocated({"SLURM_JOB_GPUS": "6", "SLURM_STEP_GPUS": "2"}, conf) or []] == ["2"]
    assert allocated({}, conf, if_absent="hide") == []
    assert allocated({}, conf, if_absent="keep") is None


@pytest.mark.parametrize(
    "env", [{}, {"SLURM_STEP_GPUS": ""}, {"SLURM_STEP_GPUS": "0,x"}, {"SLURM_STEP_GPUS": "8"}, {"SLURM_JOB_GPUS": "-1"}]
)
def test_bad_or_absent_slurm_values_are_typed_errors_exit_2(env: dict[str, str]) -> None:
    conf = generate(inventory("mlu370-x8"))
    with pytest.raises(ConfigError):
        allocated(env, conf)
    res = accel("slurm", "task-prolog", "--sim", "mlu370-x8", env=env)
    assert res.returncode == 2, res
    assert res.stderr.startswith("accel: error:")
    assert res.stdout == ""


def test_prolog_command_through_an_existing_gres_conf(tmp_path: Path) -> None:
    res = accel(
        "slurm",
        "task-prolog",
        "--sim",
        "mlu370-x8",
        "--gres-conf",
        str(GOLDEN / "mlu370-x8.gres.conf"),
        env={"SLURM_STEP_GPUS": "0,7"},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == "export MLU_VISIBLE_DEVICES=0,7"
    other = tmp_path / "gres.conf"
    other.write_text("Name=gpu Type=mlu370_x8 File=/dev/cambricon_dev9\n")
    res = accel("slurm", "task-prolog", "--sim", "mlu370-x8", "--gres-conf", str(other), env={"SLURM_STEP_GPUS": "0"})
    assert res.returncode == 2 and "no device here" in res.stderr


def test_job_prolog_refuses_a_lost_device_it_was_given_and_only_that() -> None:
    # Device 3 is lost (simulator fault): a job given 3 is refused (exit 1: Slurm drains and
    # requeues), a job given 0 and 1 starts, and a job with no GPU is not this prolog's business.
    argv = ("slurm", "prolog", "--sim", "mlu370-x8", "-o", "faults=device_lost:3")
    res = accel(*argv, env={"SLURM_JOB_GPUS": "2,3"})
    assert res.returncode == 1, res
    assert "device" in res.stderr and "lost" in res.stderr and res.stdout == ""
    assert accel(*argv, env={"SLURM_JOB_GPUS": "0,1"}).returncode == 0
    assert accel(*argv, env={}).returncode == 0
    assert accel(*argv, env={"SLURM_JOB_GPUS": "0,x"}).returncode == 2


def test_bad_devices_limited_to_a_job_never_counts_unknown() -> None:
    inv = inventory("mlu370-x8", faults="device_lost:3,not_supported=health")
    ids = [d.id for d in inv.devices]
    assert [c for _, c in bad_devices(inv, only={ids[3]})] == ["lost"]
    assert bad_devices(inv, only={ids[0], ids[1]}) == []  # unknown health: not bad


# ------------------------------------------------------------------------------- healthcheck
class FakeScontrol:
    """A stand-in for scontrol: answers ``show node`` from ``state``/``reason``, records updates."""

    def __init__(self, state: str = "IDLE", reason: str | None = None, *, fail: Exception | None = None) -> None:
        self.state, self.reason, self.fail = state, reason, fail
        self.calls: list[tuple[str, ...]] = []
        self.envs: list[Mapping[str, str] | None] = []

    def run(self, argv: Sequence[str], **kw: Any) -> ToolResult:
        self.calls.append(tuple(argv))
        self.envs.append(kw.get("env"))
        if self.fail is not None:
            raise self.fail
        if argv[1] == "show":
            reason = f" Reason={self.reason} [root@2026-12-03T10:00:00]" if self.reason else ""
            out = f"NodeName={argv[-1]} Arch=x86_64 State={self.state} ThreadsPerCore=1{reason} Comment=(null)\n"
            return ToolResult(tuple(argv), out, "", 0, 0.01)
        return ToolResult(tuple(argv), "", "", 0, 0.01)

    def which(self, name: str, search_path: Sequence[str] = ()) -> str | None:
        return "/usr/bin/scontrol"

    def updates(self) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[1] == "update"]


def test_a_lost_device_drains_with_a_reason_naming_it() -> None:
    inv = inventory("ascend-910b-8", faults="device_lost:3")
    fake = FakeScontrol()
    decision = decide_and_act(inv, "n1", fake, slurm_conf="/etc/slurm/test.conf")
    assert decision.action == "drain"
    (update,) = fake.updates()
    assert update[:4] == ("scontrol", "update", "NodeName=n1", "State=DRAIN")
    assert update[4] == f"Reason=accel: huawei3 {inv.devices[3].id} lost"
    assert fake.envs[0] == {"SLURM_CONF": "/etc/slurm/test.conf"}


def test_a_critical_condition_drains_and_several_are_counted() -> None:
    inv = inventory("mlu370-x8", faults="ecc_uncorrectable:2,ecc_uncorrectable:5")
    assert bad_devices(inv) == [
        (f"cambricon2 {inv.devices[2].id}", "UncorrectableMemoryError"),
        (f"cambricon5 {inv.devices[5].id}", "UncorrectableMemoryError"),
    ]
    fake = FakeScontrol()
    decision = decide_and_act(inv, "n1", fake)
    assert decision.action == "drain" and decision.reason is not None and decision.reason.endswith("(+1 more)")


def test_healthy_or_unknown_never_drains() -> None:
    inv = inventory("ascend-910b-8")
    assert all(d.health.state.value in ("healthy", "unknown") for d in inv.devices)
    unknown = inv.model_copy(
        update={"devices": [d.model_copy(update={"health": Health(monitored=False)}) for d in inv.devices]}
    )
    for x in (inv, unknown):
        fake = FakeScontrol()
        assert decide_and_act(x, "n1", fake).action == "none"
        assert fake.calls == []


def test_resume_only_a_node_accel_drained() -> None:
    inv = inventory("ascend-910b-8")
    ours = FakeScontrol("IDLE+DRAIN", "accel: huawei3 x lost")
    assert decide_and_act(inv, "n1", ours, resume=True).action == "resume"
    assert ours.updates() == [("scontrol", "update", "NodeName=n1", "State=RESUME")]
    theirs = FakeScontrol("IDLE+DRAIN", "bad DIMM (ops)")
    assert decide_and_act(inv, "n1", theirs, resume=True).action == "none"
    assert theirs.updates() == []


def test_a_node_drained_by_someone_else_keeps_their_reason() -> None:
    inv = inventory("ascend-910b-8", faults="device_lost:0")
    fake = FakeScontrol("DRAIN", "bad DIMM (ops)")
    assert decide_and_act(inv, "n1", fake).action == "none"
    assert fake.updates() == []


@pytest.mark.parametrize(
    "error",
    [ToolTimeoutError("scontrol timed out", tool="scontrol"), ToolExitError("scontrol failed", tool="scontrol")],
)
def test_a_hung_or_failed_scontrol_is_a_typed_error(error: Exception) -> None:
    inv = inventory("ascend-910b-8", faults="device_lost:0")
    with pytest.raises(type(error)):
        decide_and_act(inv, "n1", FakeScontrol(fail=error))


def test_healthcheck_command_exit_status_with_a_missing_scontrol(tmp_path: Path) -> None:
    # No scontrol on PATH: a typed tool error, exit 1, one line.
    res = accel(
        "slurm",
        "healthcheck",
        "--sim",
        "ascend-910b-8",
        "-o",
        "faults=device_lost:1",
        "--node",
        "n1",
        env={"PATH": str(tmp_path)},
    )
    assert res.returncode == 1
    assert "accel: error:" in res.stderr and "tool." in res.stderr
    ok = accel(
        "slurm", "healthcheck", "--sim", "ascend-910b-8", "--node", "n1", "--dry-run", env={"PATH": str(tmp_path)}
    )
    assert ok.returncode == 0, ok.stderr


def test_slurm_help_and_cheap_startup() -> None:
    res = accel("slurm", "--help")
    assert res.returncode == 0 and "gres-conf" in res.stdout
    code = "import sys, accel.cli._parser as p; p.parse(['ls']); print('accel.integrations.slurm._gres' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_cli_a_profile_without_device_nodes_exits_partial_with_one_warning_per_device(tmp_path: Path) -> None:
    import json

    src = Path(__file__).parents[2] / "accel" / "sim" / "profiles" / "mlu370-x8.json"
    data = json.loads(src.read_text())
    for template in data["templates"].values():
        template["binding"].pop("device_nodes", None)
    path = tmp_path / "no-nodes.json"
    path.write_text(json.dumps(data))
    res = accel("slurm", "gres-conf", "--sim", str(path))
    assert res.returncode == 5, res.stderr
    warnings = [ln for ln in res.stderr.splitlines() if "slurm.no-device-node" in ln]
    assert len(warnings) == 8
    assert res.stdout.count("no device node of its own") == 8
    assert "Name=gpu" not in res.stdout


@pytest.mark.parametrize(("option", "value"), [("--shards", "-1"), ("--threads-per-core", "0")])
def test_numeric_options_are_checked_first(option: str, value: str) -> None:
    res = accel("slurm", "gres-conf", "--sim", "mlu370-x8", option, value)
    assert res.returncode == 2 and option in res.stderr


def test_rtx4090_profile_lists_no_device_nodes_so_every_gpu_is_a_warning() -> None:
    # rtx4090-4 keeps no device nodes on purpose (the CDI tests use it the same way).
    res = accel("slurm", "gres-conf", "--sim", "rtx4090-4")
    assert res.returncode == 5
    assert sum("slurm.no-device-node" in ln for ln in res.stderr.splitlines()) == 4
