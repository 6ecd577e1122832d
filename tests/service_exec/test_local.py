"""The ``local`` executor on real processes: exit codes, logs, the environment a job sees,
signals to its whole process group, reattach after the service is recreated or SIGKILLed, a
recycled pid, injection attempts and run-as.  Devices come from a simulated host (the sim
profile ``mixed-nvidia-ascend``), so the visibility variables are real values of the model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.model import HostInventory
from accel.service import Executor, ExecutorError, ExitReason, Handle, JobLostError
from accel.service.executors._local import LocalExecutor, classify_exit
from accel.service.executors._wrap import EXIT, RUN, read_start_ticks, supervised
from tests.slurm._cluster import missing as slurm_missing

from ._common import crash_jobs, crash_test, host, spec, wait_end, wait_for

ROOT = os.geteuid() == 0
PY = sys.executable


@pytest.fixture(scope="module")
def inv() -> HostInventory:
    return host()


@pytest.fixture
def ex(tmp_path: Path, inv: HostInventory) -> LocalExecutor:
    return LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True)


def _py(code: str) -> tuple[str, ...]:
    return (PY, "-I", "-c", textwrap.dedent(code))


def _gone(pid: int) -> bool:
    return read_start_ticks(pid) is None  # no such process, or a zombie: it has ended


def _wait_gone(pid: int, limit_s: float = 10.0) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return False


# ------------------------------------------------------------------------------------ basics
def test_it_is_an_executor(ex: LocalExecutor, inv: HostInventory) -> None:
    assert isinstance(ex, Executor)
    assert [h.host.hostname for h in ex.hosts()] == [inv.host.hostname]


def test_exit_codes_and_logs(ex: LocalExecutor, inv: HostInventory, tmp_path: Path) -> None:
    ok = ex.start(spec(inv, tmp_path / "ok", ("sh", "-c", "echo out; echo err >&2"), job_id="ok"))
    bad = ex.start(spec(inv, tmp_path / "bad", ("sh", "-c", "exit 3"), job_id="bad"))
    assert ok.executor == "local" and ok.job_id == "ok"
    done, failed = wait_end(ex, ok), wait_end(ex, bad)
    assert (done.reason, done.exit_code, done.signal) == (ExitReason.COMPLETED, 0, None)
    assert (failed.reason, failed.exit_code) == (ExitReason.FAILED, 3)
    assert ex.log_path(ok, "stdout").read_text() == "out\n"
    assert ex.log_path(ok, "stderr").read_text() == "err\n"
    assert ex.log_path(ok, "stdout") == (tmp_path / "ok" / "stdout.log").resolve()
    # Polling an ended job again gives the same answer; signalling it is a no-op.
    assert ex.poll(ok) == done
    ex.signal(ok, signal.SIGTERM)


def test_a_command_that_cannot_start_is_an_executor_error(
    ex: LocalExecutor, inv: HostInventory, tmp_path: Path
) -> None:
    with pytest.raises(ExecutorError, match=r"no-such-tool-xyz.*could not be started"):
        ex.start(spec(inv, tmp_path / "j", ("no-such-tool-xyz", "--help")))
    with pytest.raises(ExecutorError, match="job id"):
        ex.start(spec(inv, tmp_path / "k", ("true",), job_id="../../etc"))


# ------------------------------------------------------------------------------ environment
def test_the_job_sees_its_devices_and_nothing_of_the_service(
    ex: LocalExecutor, inv: HostInventory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCEL_TOKEN", "service-secret")
    nvidia = [d for d in inv.devices if d.vendor == "nvidia"][:2]
    assert len(nvidia) == 2
    s = spec(
        inv,
        tmp_path / "j",
        ("env",),
        devices=2,
        env=(("EPOCHS", "3"), ("CUDA_VISIBLE_DEVICES", "all-of-them")),
    )
    assert [d.device_id for d in s.devices] == [d.id for d in nvidia]
    h = ex.start(s)
    assert wait_end(ex, h).reason is ExitReason.COMPLETED
    env = dict(line.split("=", 1) for line in ex.log_path(h, "stdout").read_text().splitlines())
    # The placed GPUs by UUID (their binding's visible_id), the node's Ascend NPUs hidden;
    # a user variable cannot widen the visibility.
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(d.binding.visible_id or "" for d in nvidia)
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == ""
    assert env["EPOCHS"] == "3"
    assert env["ACCEL_JOB_ID"] == "job-1"
    assert "ACCEL_TOKEN" not in env
    assert set(env) == {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "EPOCHS",
        "ACCEL_JOB_ID",
        "CUDA_VISIBLE_DEVICES",
        "ASCEND_RT_VISIBLE_DEVICES",
    }


def test_injection_attempts_stay_data(ex: LocalExecutor, inv: HostInventory, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    hostile = ("; rm -rf /tmp/nothing", f"$(touch {canary})", f"`touch {canary}`", "a b\nc", "'\"")
    argv = _py("import sys, os; print(repr(sys.argv[1:])); print(repr(os.environ['NOTE']))") + hostile
    h = ex.start(spec(inv, tmp_path / "j", argv, env=(("NOTE", f"x; touch {canary} && $(id)"),)))
    assert wait_end(ex, h).reason is ExitReason.COMPLETED
    lines = ex.log_path(h, "stdout").read_text().splitlines()
    assert lines[0] == repr(list(hostile))
    assert lines[1] == repr(f"x; touch {canary} && $(id)")
    assert not canary.exists()
    for name, value in (("BAD NAME", "x"), ("LD_X=Y", "x"), ("OK", "nul\0")):
        with pytest.raises(ExecutorError):
            ex.start(spec(inv, tmp_path / "e", ("true",), job_id="e", env=((name, value),)))


# ---------------------------------------------------------------------------------- signals
def test_a_signal_reaches_the_whole_process_group(ex: LocalExecutor, inv: HostInventory, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    argv = _py(f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        time.sleep(300)
    """)
    h = ex.start(spec(inv, tmp_path / "j", argv))
    child = int(wait_for(pidfile))
    assert ex.poll(h).running
    ex.signal(h, signal.SIGTERM)
    status = wait_end(ex, h)
    assert (status.reason, status.signal) == (ExitReason.SIGNALED, signal.SIGTERM)
    assert "SIGTERM" in status.detail
    assert _wait_gone(child), "the job's child outlived the signal to the group"


def test_a_checkpoint_signal_is_delivered_without_ending_the_job(
    ex: LocalExecutor, inv: HostInventory, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    argv = _py(f"""
        import signal, sys, time
        def ckpt(signum, frame):
            print("checkpointed", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGUSR1, ckpt)
        open({str(ready)!r}, "w").write("1")
        time.sleep(300)
    """)
    h = ex.start(spec(inv, tmp_path / "j", argv))
    wait_for(ready)
    ex.signal(h, signal.SIGUSR1)
    assert wait_end(ex, h).reason is ExitReason.COMPLETED
    assert ex.log_path(h, "stdout").read_text() == "checkpointed\n"


def test_stragglers_die_with_the_job(ex: LocalExecutor, inv: HostInventory, tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    h = ex.start(spec(inv, tmp_path / "j", ("sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 0")))
    assert wait_end(ex, h).reason is ExitReason.COMPLETED
    assert _wait_gone(int(wait_for(pidfile)))


def test_oom_kill_is_told_apart_from_another_sigkill(inv: HostInventory, tmp_path: Path) -> None:
    # A fake cgroup tree where the supervisor looks for the job's memory cgroup: the job itself
    # raises the kernel's oom_kill counter there and dies by SIGKILL, as the OOM killer does.
    fake = tmp_path / "cgroup"
    counters: list[Path] = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            counters.append(fake / "memory" / path.lstrip("/") / "memory.oom_control")
        if controllers == "":
            counters.append(fake / path.lstrip("/") / "memory.events")
    for c in counters:
        c.parent.mkdir(parents=True, exist_ok=True)
        c.write_text("oom 0\noom_kill 0\n")
    ex = LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True, cgroup_root=fake)
    bump = "".join(f"open({str(c)!r}, 'w').write('oom 1\\noom_kill 1\\n'); " for c in counters)
    oom = ex.start(spec(inv, tmp_path / "a", _py(bump + "import os; os.kill(os.getpid(), 9)"), job_id="a"))
    status = wait_end(ex, oom)
    assert (status.reason, status.signal) == (ExitReason.OOM_KILLED, signal.SIGKILL)
    assert "oom_kill 0 -> 1" in status.detail
    plain = ex.start(spec(inv, tmp_path / "b", _py("import os; os.kill(os.getpid(), 9)"), job_id="b"))
    assert wait_end(ex, plain).reason is ExitReason.SIGNALED


def test_classify_exit() -> None:
    assert classify_exit({"exit_code": 0}).reason is ExitReason.COMPLETED
    assert classify_exit({"exit_code": 137}).reason is ExitReason.FAILED
    assert classify_exit({"signal": 9, "oom": True, "oom_evidence": "x"}).reason is ExitReason.OOM_KILLED
    assert classify_exit({"signal": 9, "oom": False}).reason is ExitReason.SIGNALED
    assert classify_exit({"error": "nope"}).reason is ExitReason.FAILED


# --------------------------------------------------------------------------- restart, reattach
def test_reattach_from_a_new_executor_and_start_is_idempotent(inv: HostInventory, tmp_path: Path) -> None:
    state, go = tmp_path / "state", tmp_path / "go"
    first = LocalExecutor(state, inventory=lambda: inv, allow_root=True)
    argv = ("sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; echo $$; exit 7")
    s = spec(inv, tmp_path / "j", argv)
    h = first.start(s)
    second = LocalExecutor(state, inventory=lambda: inv, allow_root=True)
    assert second.reattach(h).running
    # Starting the same job again while it runs gives back the same run, not a second one,
    # also where the executor's record was never written (the service died just after the start).
    assert second.start(s) == h
    unrecorded = LocalExecutor(tmp_path / "fresh-state", inventory=lambda: inv, allow_root=True)
    assert unrecorded.start(s) == h
    go.touch()
    status = wait_end(second, h)
    assert (status.reason, status.exit_code) == (ExitReason.FAILED, 7)
    assert len(second.log_path(h, "stdout").read_text().split()) == 1
    wait_end(first, h)  # reaps the supervisor, the first executor's child


def test_the_job_survives_a_sigkilled_service_and_its_exit_code_is_kept(inv: HostInventory, tmp_path: Path) -> None:
    state, go, out = tmp_path / "state", tmp_path / "go", tmp_path / "handle.json"
    (tmp_path / "j").mkdir()
    service = textwrap.dedent(f"""
        import json, time
        from pathlib import Path
        from accel.service import LaunchSpec
        from accel.service.executors._local import LocalExecutor
        from tests.service_exec._common import host
        inv = host()
        ex = LocalExecutor(Path({str(state)!r}), inventory=lambda: inv, allow_root=True)
        argv = ("sh", "-c", "while [ ! -e {go} ]; do sleep 0.05; done; exit 5")
        h = ex.start(LaunchSpec(job_id="j", tenant="t", argv=argv, devices=(), log_dir=Path({str(tmp_path / "j")!r})))
        Path({str(out)!r}).write_text(json.dumps([h.executor, h.job_id, h.ref]))
        time.sleep(300)
    """)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([PY, "-c", service], cwd=root)
    try:
        handle = Handle(*json.loads(wait_for(out, 60)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        ex = LocalExecutor(state, inventory=lambda: inv, allow_root=True)
        assert ex.reattach(handle).running
        go.touch()
        status = wait_end(ex, handle)
        assert (status.reason, status.exit_code) == (ExitReason.FAILED, 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_run_the_service_never_recorded_is_adopted_not_repeated(inv: HostInventory, tmp_path: Path) -> None:
    # The service died after the supervisor started the job, before either record was written;
    # the job ended while it was down.  Starting it again reports that run.
    s = spec(inv, tmp_path / "j", ("sh", "-c", "echo ran; exit 6"))
    first = LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True)
    h = first.start(s)
    wait_end(first, h)
    (tmp_path / "state" / "job-1.json").unlink()
    again = LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True)
    assert again.start(s) == h
    assert wait_end(again, h).exit_code == 6
    assert first.log_path(h, "stdout").read_text() == "ran\n"
    # Recorded and ended, it is a finished attempt: starting it again runs it again (re-placed).
    h2 = again.start(s)
    assert h2 != h and wait_end(again, h2).exit_code == 6
    assert first.log_path(h, "stdout").read_text() == "ran\nran\n"


def test_one_supervisor_per_job(inv: HostInventory, tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True, start_timeout_s=1.0)
    go = tmp_path / "go"
    log_dir = tmp_path / "j"
    h = ex.start(spec(inv, log_dir, ("sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done")))
    assert supervised(log_dir)
    run = (log_dir / RUN).read_text()
    wrap = Path(__file__).resolve().parents[2] / "accel" / "service" / "executors" / "_wrap.py"
    second = subprocess.run([PY, "-I", str(wrap), str(log_dir)], capture_output=True, text=True, timeout=30)
    assert second.returncode == 1  # the second supervisor refused: the job is not run twice
    assert (log_dir / RUN).read_text() == run
    assert "another supervisor" in (log_dir / ".accel-wrap.log").read_text() + second.stderr
    go.touch()
    assert wait_end(ex, h).reason is ExitReason.COMPLETED
    end = time.monotonic() + 10
    while supervised(log_dir) and time.monotonic() < end:
        time.sleep(0.02)  # the supervisor exits just after writing the exit record
    assert not supervised(log_dir)
    # Started again at once (re-placed), the next attempt waits for the last supervisor to go.
    h2 = ex.start(spec(inv, log_dir, ("true",)))
    assert h2 != h and wait_end(ex, h2).reason is ExitReason.COMPLETED


def test_a_job_whose_supervisor_was_killed(ex: LocalExecutor, inv: HostInventory, tmp_path: Path) -> None:
    # Someone SIGKILLs the supervisor: the job runs on and can still be signalled, but once it
    # ends nobody recorded how, so it is lost rather than guessed at.
    ready = tmp_path / "ready"
    h = ex.start(spec(inv, tmp_path / "j", ("sh", "-c", f"echo 1 > {ready}; exec sleep 300")))
    wait_for(ready)
    os.kill(int(h.ref.split(":")[0]), signal.SIGKILL)
    assert _wait_gone(int(h.ref.split(":")[0]))
    status = ex.poll(h)
    assert status.running and "supervisor is gone" in status.detail
    ex.signal(h, signal.SIGTERM)
    end = time.monotonic() + 10
    while _running(ex, h) and time.monotonic() < end:
        time.sleep(0.02)
    with pytest.raises(JobLostError, match="no exit was recorded"):
        ex.poll(h)


def _running(ex: LocalExecutor, h: Handle) -> bool:
    try:
        return ex.poll(h).running
    except JobLostError:
        return False


def test_a_lost_or_recycled_process_is_job_lost(ex: LocalExecutor, inv: HostInventory, tmp_path: Path) -> None:
    with pytest.raises(JobLostError, match="no record"):
        ex.poll(Handle("local", "never-started", "1:1"))
    h = ex.start(spec(inv, tmp_path / "j", ("true",)))
    wait_end(ex, h)
    # The job ended but its exit record is gone (a lost disk, say): it is lost, not re-run.
    (tmp_path / "j" / EXIT).unlink()
    with pytest.raises(JobLostError, match="no exit was recorded"):
        LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True).reattach(h)
    # A pid that runs, but is another process than the one recorded (start time differs).
    me = os.getpid()
    ticks = read_start_ticks(me)
    assert ticks is not None
    record = {"ref": f"{me}:{ticks + 1}", "log_dir": str(tmp_path / "j"), "pid": me, "pgid": me, "start": ticks + 1}
    (tmp_path / "state" / "recycled.json").write_text(json.dumps(record))
    recycled = Handle("local", "recycled", f"{me}:{ticks + 1}")
    with pytest.raises(JobLostError):
        ex.reattach(recycled)
    with pytest.raises(JobLostError):
        ex.signal(recycled, signal.SIGTERM)  # and it is never signalled
    with pytest.raises(JobLostError, match="not its last run"):
        ex.poll(Handle("local", "recycled", f"{me}:{ticks}"))


# ----------------------------------------------------------------------------------- run-as
def test_root_needs_a_run_as_account_or_an_explicit_yes(tmp_path: Path, inv: HostInventory) -> None:
    with pytest.raises(ExecutorError, match="does not exist"):
        LocalExecutor(tmp_path / "s", inventory=lambda: inv, run_as=f"nobody-{uuid.uuid4().hex[:8]}")
    if not ROOT:
        with pytest.raises(ExecutorError, match="cannot run jobs as"):
            LocalExecutor(tmp_path / "s", inventory=lambda: inv, run_as="root")
        return
    with pytest.raises(ExecutorError, match="--run-as"):
        LocalExecutor(tmp_path / "s", inventory=lambda: inv)
    with pytest.raises(ExecutorError, match="is root"):
        LocalExecutor(tmp_path / "s", inventory=lambda: inv, run_as="root")


@pytest.fixture
def account() -> Iterator[str]:
    if not ROOT:
        pytest.skip("run-as needs the service to run as root")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not installed")
    name = f"accelt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


def test_jobs_run_as_the_named_account(account: str, inv: HostInventory, tmp_path: Path) -> None:
    import pwd

    entry = pwd.getpwnam(account)
    ex = LocalExecutor(tmp_path / "state", inventory=lambda: inv, run_as=account)
    h = ex.start(spec(inv, tmp_path / "j", ("sh", "-c", 'id -u; id -g; echo "$USER $HOME"')))
    assert wait_end(ex, h).reason is ExitReason.COMPLETED
    uid, gid, who = ex.log_path(h, "stdout").read_text().splitlines()
    assert (int(uid), int(gid)) == (entry.pw_uid, entry.pw_gid)
    assert who == f"{account} {entry.pw_dir}"


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    """A cgroup v1 memory cgroup limited to 128 MiB (skipped where none can be made)."""
    base = Path("/sys/fs/cgroup/memory")
    if not ROOT or not (base / "cgroup.procs").exists():
        pytest.skip("needs root and a cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
    group = base / f"accel-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(128 << 20))
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup: {exc}")
    try:
        yield group
    finally:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)  # its last process is still leaving


def test_a_real_oom_kill_is_oom_killed(memory_cgroup: Path, inv: HostInventory, tmp_path: Path) -> None:
    # The "service" moves itself into the limited cgroup after its imports (their memory stays
    # charged where it was), so the supervisor and the job it starts live there.
    state, out, log_dir = tmp_path / "state", tmp_path / "handle.json", tmp_path / "j"
    log_dir.mkdir()
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"
    service = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from accel.service import LaunchSpec
        from accel.service.executors._local import LocalExecutor
        from tests.service_exec._common import host
        inv = host()
        ex = LocalExecutor(Path({str(state)!r}), inventory=lambda: inv, allow_root=True)
        Path({str(memory_cgroup / "cgroup.procs")!r}).write_text("0")
        h = ex.start(LaunchSpec(job_id="hog", tenant="t", argv=({PY!r}, "-I", "-c", {hog!r}),
                                devices=(), log_dir=Path({str(log_dir)!r})))
        Path({str(out)!r}).write_text(json.dumps([h.executor, h.job_id, h.ref]))
    """)
    root = Path(__file__).resolve().parents[2]
    subprocess.run([PY, "-c", service], cwd=root, check=True, timeout=60)
    handle = Handle(*json.loads(out.read_text()))
    ex = LocalExecutor(state, inventory=lambda: inv, allow_root=True)
    status = wait_end(ex, handle, 60)
    assert (status.reason, status.signal) == (ExitReason.OOM_KILLED, signal.SIGKILL), status
    assert "memory.oom_control: oom_kill 0 -> 1" in status.detail


@pytest.mark.skipif(
    slurm_missing() is None and "CRASH_KILLS" not in os.environ,
    reason="where the real Slurm runs, test_slurm.py's chain over accel serve with local and slurm jobs covers "
    "local jobs (CI's time); tox -e crash runs this one too",
)
def test_a_sigkill_chain_over_accel_serve_loses_no_job_and_runs_none_twice(tmp_path: Path) -> None:
    # `accel serve --executor local` is SIGKILLed at seeded random moments and started again on
    # the same state: every job's outcome and bill is the uninterrupted run's (CRASH_KILLS kills;
    # `tox -e crash` runs a long chain).
    inventory = tmp_path / "local.json"
    inventory.write_text(host("rtx4090-4", name="local").model_dump_json())
    args = [
        "--executor",
        "local",
        "--executor-option",
        f"inventory={inventory}",
        "--allow-root",
        "--price",
        "NVIDIA GeForce RTX 4090=0.5",
    ]
    jobs = crash_jobs(["RTX 4090"], 6)  # 6 jobs of one device on 4 devices: two wait in the queue
    chain = crash_test(tmp_path, args, jobs)
    assert chain.kills >= 1


def test_the_end_time_comes_from_the_exit_record_on_the_service_clock(inv: HostInventory, tmp_path: Path) -> None:
    # the service's clock here: 10x the wall clock from an origin; the exit record's Unix time maps onto it
    origin = time.time()
    ex = LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True,
                       wall_to_clock=lambda w: (w - origin) * 10.0)
    before = time.time()
    handle = ex.start(spec(inv, tmp_path / "j", ("sh", "-c", "exit 0"), job_id="timed"))
    status = wait_end(ex, handle)
    after = time.time()
    assert status.ended_at is not None
    assert (before - origin) * 10.0 <= status.ended_at <= (after - origin) * 10.0
    # without the map the executor says nothing of the end time (the service takes its poll's)
    assert LocalExecutor(tmp_path / "state", inventory=lambda: inv, allow_root=True).poll(handle).ended_at is None
