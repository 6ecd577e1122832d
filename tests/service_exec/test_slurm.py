"""The ``slurm`` executor on a real one-node Slurm (Debian's slurmctld / slurmd / munge, started
by ``tests/slurm``'s fixture with accel's gres.conf and TaskProlog for the simulator profile
``mixed-nvidia-ascend``: four NVIDIA H100 and four Ascend 910B, whose device nodes are character
devices under the test's directory).

What is real: sbatch / squeue / scontrol / scancel, the batch script, the TaskProlog setting the
visibility variables from Slurm's allocation, the exit codes and signals.  What is not: the
devices (Slurm allocates ``/dev/null``-like nodes), and ``sacct`` (the test cluster keeps no
accounting, so a job the controller forgot is a lost job here; the sacct parsing is tested on
a replayed answer)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from accel.discovery import open_session
from accel.model import HostInventory
from accel.model.health import Operational
from accel.plugin import BackendConfig
from accel.service import Executor, ExecutorError, ExitReason, Handle, JobLostError, LaunchSpec
from accel.service.executors._slurm import SlurmExecutor, classify_state, parse_gres
from accel.service.executors._visibility import placed_devices
from accel.tools import ReplayRunner
from tests.slurm._cluster import Cluster, cluster, missing

from ._common import crash_jobs, crash_test, host, start_serve, wait_end, wait_for

PROFILE = "mixed-nvidia-ascend"


def _sim(profile: str) -> HostInventory:
    with open_session({"sim": BackendConfig(options={"profile": profile})}, backends=["sim"]) as s:
        return s.inventory()


# --------------------------------------------------------------------- without a cluster
def test_parse_gres() -> None:
    assert parse_gres("gpu:ascend_910b3:4(S:32-63,96-127),gpu:nvidia_h100_pcie:4(S:0-31,64-95)") == {
        "ascend_910b3": 4,
        "nvidia_h100_pcie": 4,
    }
    assert parse_gres("gpu:2,shard:8") == {"": 2}
    assert parse_gres("(null)") == {}


@pytest.mark.parametrize(
    ("state", "code", "reason", "signum"),
    [
        ("COMPLETED", "0:0", ExitReason.COMPLETED, None),
        ("FAILED", "3:0", ExitReason.FAILED, None),
        ("FAILED", "0:15", ExitReason.SIGNALED, 15),
        ("CANCELLED by 0", "0:15", ExitReason.CANCELLED, 15),
        ("OUT_OF_MEMORY", "0:125", ExitReason.OOM_KILLED, 125),
        ("TIMEOUT", "0:0", ExitReason.TIME_LIMIT, None),
        ("NODE_FAIL", "0:0", ExitReason.NODE_LOST, None),
        ("PREEMPTED", "0:0", ExitReason.PREEMPTED, None),
    ],
)
def test_classify_state(state: str, code: str, reason: ExitReason, signum: int | None) -> None:
    status = classify_state(state, code)
    assert not status.running
    assert (status.reason, status.signal) == (reason, signum)
    assert classify_state("PENDING", "", "Resources").detail == "PENDING (Resources)"
    assert classify_state("RUNNING", "0:0").running


def test_a_job_the_controller_forgot_is_read_from_sacct(tmp_path: Path) -> None:
    runner = ReplayRunner.from_mapping(
        {
            "squeue --noheader --states=all --jobs=42 --format=%i|%j|%T|%r": {
                "returncode": 1,
                "stderr": "slurm_load_jobs error: Invalid job id specified\n",
            },
            "scontrol show job --oneliner 42": {
                "returncode": 1,
                "stderr": "slurm_load_jobs error: Invalid job id specified\n",
            },
            "sacct --noheader --parsable2 --allocations --jobs=42 --format=JobID,JobName,State,ExitCode,End": (
                "42|accel-j|OUT_OF_MEMORY|0:125|2026-12-07T13:40:05\n"
            ),
            "sacct --noheader --parsable2 --allocations --jobs=43 --format=JobID,JobName,State,ExitCode,End": (
                "43|someone-else|COMPLETED|0:0|2026-12-07T13:41:00\n"
            ),
            "squeue --noheader --states=all --jobs=43 --format=%i|%j|%T|%r": {
                "returncode": 1,
                "stderr": "Invalid job id",
            },
            "scontrol show job --oneliner 43": {"returncode": 1, "stderr": "Invalid job id specified"},
        }
    )
    ex = SlurmExecutor(tmp_path, node_inventory=_sim, runner=runner)
    assert ex.poll(Handle("slurm", "j", "42")).reason is ExitReason.OOM_KILLED
    assert ex.poll(Handle("slurm", "j", "42")).ended_at is None  # no clock map: the end time is not said
    # sacct's End (the controller's local time) on the service's clock
    timed = SlurmExecutor(tmp_path, node_inventory=_sim, runner=runner, wall_to_clock=lambda w: w - 1000.0)
    assert timed.poll(Handle("slurm", "j", "42")).ended_at == datetime(2026, 12, 7, 13, 40, 5).timestamp() - 1000.0
    with pytest.raises(JobLostError, match="not this job"):
        ex.poll(Handle("slurm", "j", "43"))
    with pytest.raises(JobLostError, match="not a Slurm job id"):
        ex.poll(Handle("slurm", "j", "42; scancel 1"))


def test_a_nodes_address_is_its_nodeaddr(tmp_path: Path) -> None:
    # where a serving replica placed on a node is reached: scontrol's NodeAddr (read once), nothing else
    line = ("NodeName=gpu01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 NodeAddr=10.1.2.3 NodeHostName=gpu01 "
            "Version=23.11.4 OS=Linux State=IDLE\n")
    runner = ReplayRunner.from_mapping({
        "scontrol show node --oneliner gpu01": {"returncode": 0, "stdout": line},
        "scontrol show node --oneliner gpu02": {"returncode": 1, "stderr": "Node gpu02 not found\n"},
        "scontrol show node --oneliner gpu03": {"returncode": 0, "stdout": "NodeName=gpu03 NodeAddr=$(id) x\n"},
    })
    ex = SlurmExecutor(tmp_path, node_inventory=_sim, runner=runner)
    assert ex.node_address("gpu01") == "10.1.2.3" and ex.node_address("gpu01") == "10.1.2.3"
    assert ex.node_address("gpu02") is None and ex.node_address("gpu03") is None
    assert ex.node_address("a b;c") is None  # not a node name: no command runs


# ------------------------------------------------------------------------ on real Slurm
needs_slurm = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if missing() is not None:
        pytest.skip(missing() or "")
    with cluster(tmp_path_factory.mktemp("slurm-exec"), PROFILE) as c:
        yield c


@pytest.fixture(scope="module")
def node_inv() -> HostInventory:
    return _sim(PROFILE)


@pytest.fixture
def ex(slurm: Cluster, node_inv: HostInventory, tmp_path: Path) -> SlurmExecutor:
    return _executor(slurm, node_inv, tmp_path / "state")


def _executor(c: Cluster, inv: HostInventory, state: Path) -> SlurmExecutor:
    assert inv.host.hostname == c.node
    return SlurmExecutor(state, node_inventory=lambda _node: inv, env={"SLURM_CONF": c.env["SLURM_CONF"]})


def _spec(
    inv: HostInventory,
    log_dir: Path,
    argv: tuple[str, ...],
    *,
    job_id: str = "j1",
    vendor: str = "nvidia",
    devices: int = 0,
    env: tuple[tuple[str, str], ...] = (),
) -> LaunchSpec:
    log_dir.mkdir(parents=True, exist_ok=True)
    ids = [d.id for d in inv.devices if d.vendor == vendor][:devices]
    return LaunchSpec(job_id, "t1", argv, placed_devices(inv, ids), env=env, log_dir=log_dir)


def _wait_running(ex: SlurmExecutor, h: Handle, limit_s: float = 30.0) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        status = ex.poll(h)
        if status.detail.startswith("RUNNING"):
            return
        assert status.running, status
        time.sleep(0.1)
    raise AssertionError(f"{h} did not start within {limit_s:g} s")


@needs_slurm
def test_hosts_are_the_slurm_nodes_with_accels_devices(ex: SlurmExecutor, slurm: Cluster, tmp_path: Path) -> None:
    assert isinstance(ex, Executor)
    (inv,) = ex.hosts()
    assert inv.host.hostname == slurm.node
    assert len(inv.devices) == 8
    assert not inv.problems
    assert {d.health.operational for d in inv.devices} == {Operational.ONLINE}
    # A drained node offers no device: they carry the node's state.
    slurm.run("scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN", "Reason=accel-test")
    try:
        (drained,) = ex.hosts()
        assert {d.health.operational for d in drained.devices} == {Operational.OFFLINE}
    finally:
        slurm.run("scontrol", "update", f"NodeName={slurm.node}", "State=RESUME")
    # Resumed, the node is "idle*" (not responding) until slurmd answers again, then online.
    slurm.wait("node back", lambda: {d.health.operational for d in ex.hosts()[0].devices} == {Operational.ONLINE}, 30)
    # A node whose Slurm GRES is not what accel's model of it makes is a problem, not a silence.
    other = _sim("rtx4090-4")
    wrong = SlurmExecutor(
        tmp_path / "w", node_inventory=lambda _n: other, env={"SLURM_CONF": slurm.env["SLURM_CONF"]}
    ).hosts()[0]
    assert [p.code for p in wrong.problems] == ["slurm.gres-mismatch"]


@needs_slurm
def test_a_job_runs_with_its_devices_and_its_exit_code(
    ex: SlurmExecutor, node_inv: HostInventory, tmp_path: Path
) -> None:
    script = 'echo "CUDA=$CUDA_VISIBLE_DEVICES"; echo "ASCEND=$ASCEND_RT_VISIBLE_DEVICES"; echo oops >&2; exit 3'
    h = ex.start(_spec(node_inv, tmp_path / "j", ("sh", "-c", script), devices=2))
    ok = ex.start(_spec(node_inv, tmp_path / "k", ("true",), job_id="j2", vendor="huawei", devices=1))
    assert h.executor == "slurm" and h.ref.isdigit()
    status = wait_end(ex, h, 60, 0.25)
    assert (status.reason, status.exit_code) == (ExitReason.FAILED, 3), status
    out = dict(line.split("=", 1) for line in ex.log_path(h, "stdout").read_text().splitlines())
    gpus = [v for v in out["CUDA"].split(",") if v]
    nvidia = {d.binding.visible_id for d in node_inv.devices if d.vendor == "nvidia"}
    assert len(gpus) == 2 and set(gpus) <= nvidia  # Slurm chose two of the node's H100s
    assert out["ASCEND"] == ""  # and the TaskProlog hid the NPUs
    assert ex.log_path(h, "stderr").read_text() == "oops\n"
    assert wait_end(ex, ok, 60, 0.25).reason is ExitReason.COMPLETED
    # A Slurm id that names another accel job's Slurm job is not this job's.
    with pytest.raises(JobLostError, match="not this job"):
        ex.reattach(Handle("slurm", "someone-else", h.ref))


@needs_slurm
def test_injection_attempts_stay_data(ex: SlurmExecutor, node_inv: HostInventory, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    hostile = ("; touch " + str(canary), f"$(touch {canary})", f"'; touch {canary}; '", "a b\nc", "\\")
    note = f"x'; touch {canary}; echo '$(id)\n`id`"
    show = 'printf "[%s]\\n" "$@"; printf "%s|%s" "$CUDA_VISIBLE_DEVICES" "$NOTE"'
    argv = ("sh", "-c", show, "sh", *hostile)
    h = ex.start(_spec(node_inv, tmp_path / "j", argv, env=(("NOTE", note), ("CUDA_VISIBLE_DEVICES", "0,1,2,3"))))
    assert wait_end(ex, h, 60, 0.25).reason is ExitReason.COMPLETED
    # Every argument arrives as one argument, the value as it was; a user's visibility
    # variable does not reach the job (the TaskProlog's does: no device, nothing visible).
    assert ex.log_path(h, "stdout").read_text() == "".join(f"[{a}]\n" for a in hostile) + "|" + note
    assert not canary.exists()
    with pytest.raises(ExecutorError):
        ex.start(_spec(node_inv, tmp_path / "e", ("true",), job_id="e", env=(("A;B", "x"),)))


@needs_slurm
def test_signals_reach_the_whole_job_and_kill_cancels(
    ex: SlurmExecutor, node_inv: HostInventory, tmp_path: Path, slurm: Cluster
) -> None:
    pidfile = tmp_path / "child.pid"
    h = ex.start(_spec(node_inv, tmp_path / "j", ("sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait")))
    child = int(wait_for(pidfile, 60))
    ex.signal(h, signal.SIGTERM)
    status = wait_end(ex, h, 60, 0.25)
    assert (status.reason, status.signal) == (ExitReason.SIGNALED, signal.SIGTERM), status
    end = time.monotonic() + 20
    while Path(f"/proc/{child}").exists() and time.monotonic() < end:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists(), "the job's child outlived the signal"
    ex.signal(h, signal.SIGTERM)  # ended: a no-op
    k = ex.start(_spec(node_inv, tmp_path / "k", ("sleep", "300"), job_id="j2"))
    _wait_running(ex, k)
    ex.signal(k, signal.SIGKILL)
    assert wait_end(ex, k, 60, 0.25).reason is ExitReason.CANCELLED


@needs_slurm
def test_a_queued_job_and_reattach_after_a_restart(slurm: Cluster, node_inv: HostInventory, tmp_path: Path) -> None:
    state, go = tmp_path / "state", tmp_path / "go"
    first = _executor(slurm, node_inv, state)
    wait = ("sh", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done; exit 4")
    holder = first.start(_spec(node_inv, tmp_path / "a", wait, job_id="holder", devices=4))
    _wait_running(first, holder)
    queued = first.start(_spec(node_inv, tmp_path / "b", ("true",), job_id="queued", devices=4))
    status = first.poll(queued)
    assert status.running and status.detail.startswith("PENDING"), status
    first.signal(queued, signal.SIGUSR1)  # a checkpoint signal to a queued job: nothing to do
    assert first.poll(queued).running
    # The service restarts: a new executor finds both jobs by their Slurm ids ...
    second = _executor(slurm, node_inv, state)
    assert second.reattach(holder).running
    # ... and one that lost even its state directory does not submit a running job again.
    third = _executor(slurm, node_inv, tmp_path / "empty-state")
    assert third.start(_spec(node_inv, tmp_path / "a", wait, job_id="holder", devices=4)) == holder
    second.signal(queued, signal.SIGTERM)  # queued: cancelled outright
    assert wait_end(second, queued, 60, 0.25).reason is ExitReason.CANCELLED
    go.touch()
    status = wait_end(second, holder, 60, 0.25)
    assert (status.reason, status.exit_code) == (ExitReason.FAILED, 4)
    assert second.log_path(holder, "stdout") == (tmp_path / "a" / "stdout.log").resolve()


@needs_slurm
def test_an_unknown_slurm_id_is_lost(ex: SlurmExecutor) -> None:
    with pytest.raises(JobLostError, match="sacct"):
        ex.reattach(Handle("slurm", "j1", "999999"))


@needs_slurm
def test_a_submission_the_record_missed_is_found_not_repeated(
    slurm: Cluster, node_inv: HostInventory, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    ex = _executor(slurm, node_inv, state)
    s = _spec(node_inv, tmp_path / "j", ("sh", "-c", "echo ran"), job_id="once")
    h = ex.start(s)
    assert wait_end(ex, h, 60, 0.25).reason is ExitReason.COMPLETED
    # The record as it stood while sbatch ran (the service died before writing the job id):
    rec = json.loads((state / "once.json").read_text())
    pending = {"slurm_job_id": None, "log_dir": rec["log_dir"], "nonce": None, "pending_nonce": rec["nonce"]}
    (state / "once.json").write_text(json.dumps(pending))
    again = _executor(slurm, node_inv, state)
    assert again.start(s) == h  # found by its nonce, ended as it is: not submitted again
    assert again.poll(h).reason is ExitReason.COMPLETED
    assert again.log_path(h, "stdout").read_text() == "ran\n"
    # A recorded attempt that ended is a finished one: starting the job again submits it anew.
    h2 = again.start(s)
    assert h2.ref != h.ref
    assert wait_end(again, h2, 60, 0.25).reason is ExitReason.COMPLETED
    assert again.log_path(h2, "stdout").read_text() == "ran\nran\n"


@needs_slurm
def test_a_sigkill_chain_over_accel_serve_with_local_and_slurm_jobs(slurm: Cluster, tmp_path: Path) -> None:
    # One `accel serve` with two clusters (a local host and this Slurm node) is SIGKILLed at
    # seeded random moments and started again on the same state: every job's outcome and bill is
    # the uninterrupted run's, none lost, none submitted twice (`tox -e crash`: a long chain).
    inventory = tmp_path / "local.json"
    inventory.write_text(host("rtx4090-4", name="local").model_dump_json())
    args = ["--executor", "local", "--executor", "slurm", "--allow-root",
            "--executor-option", f"inventory={inventory}",
            "--executor-option", f"nodes=sim:{PROFILE}",
            "--executor-option", f"slurm_conf={slurm.env['SLURM_CONF']}",
            "--price", "NVIDIA GeForce RTX 4090=0.5", "--price", "NVIDIA H100 PCIe=4"]
    # Two H100 jobs each for the chain and the uninterrupted run beside it: the node's four H100s.
    jobs = crash_jobs(["RTX 4090", "H100"], 2)
    chain = crash_test(tmp_path, args, jobs)
    assert chain.kills >= 1
    models = {r["allocation"]["devices"][0]["model"] for r in chain.records.values()}
    assert models == {"NVIDIA GeForce RTX 4090", "NVIDIA H100 PCIe"}
    assert {r["launches"][0]["executor"] for r in chain.records.values()} == {"local", "slurm"}


@needs_slurm
def test_a_serving_group_of_engine_commands_on_slurm(slurm: Cluster, tmp_path: Path) -> None:
    # accel serve --executor slurm: each replica job is an sbatch of the group's engine command (accel's fake vLLM
    # engine), on the ports the service chose, reached at the node's NodeAddr; the router follows the group and
    # consumes its KV events; scale and cancel stop the engines (scancel), none is left (by pid).
    pytest.importorskip("zmq")
    from ._serving_e2e import run_group

    state, ready = tmp_path / "state", tmp_path / "ready"
    ready.mkdir()
    served = start_serve(state, ["--executor", "slurm", "--executor-option", f"nodes=sim:{PROFILE}",
                                 "--executor-option", f"slurm_conf={slurm.env['SLURM_CONF']}"])
    try:
        run_group(served, state, ready, replicas=1, scale_to=0)  # two replicas and a scale to one: the local test's
    finally:
        served.stop()
