"""Shared pieces of the executor tests: a simulated host, specs, waiting for a job to end, and a
SIGKILL chain over a real ``accel serve`` (:func:`sigkill_chain`, checked by :func:`check_chain`)."""

from __future__ import annotations

import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from accel.model import HostInventory
from accel.service import Executor, Handle, LaunchSpec, RunStatus
from accel.service.executors._visibility import placed_devices
from accel.sim.cluster import generate_cluster

__all__ = [
    "ChainRun",
    "CrashJob",
    "Serve",
    "check_chain",
    "crash_jobs",
    "host",
    "sigkill_chain",
    "spec",
    "start_serve",
    "wait_end",
    "wait_for",
]

ROOT = Path(__file__).resolve().parents[2]


def host(profile: str = "mixed-nvidia-ascend", name: str = "h") -> HostInventory:
    """One simulated host (a mixed NVIDIA + Ascend node unless told otherwise)."""
    return generate_cluster(1, profile, hostname_prefix=name)[0]


def spec(
    inv: HostInventory,
    log_dir: Path,
    argv: tuple[str, ...],
    *,
    job_id: str = "job-1",
    devices: int = 0,
    env: tuple[tuple[str, str], ...] = (),
) -> LaunchSpec:
    """A launch of ``argv`` on the first ``devices`` devices of ``inv``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    ids = [d.id for d in inv.devices[:devices]]
    return LaunchSpec(
        job_id=job_id,
        tenant="t1",
        argv=argv,
        devices=placed_devices(inv, ids),
        env=env,
        log_dir=log_dir,
    )


def wait_end(executor: Executor, handle: Handle, limit_s: float = 20.0, every_s: float = 0.02) -> RunStatus:
    """Poll until the job has ended; fail the test if it runs past ``limit_s``."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        status = executor.poll(handle)
        if not status.running:
            return status
        time.sleep(every_s)
    raise AssertionError(f"{handle} still running after {limit_s:g} s")


def wait_for(path: Path, limit_s: float = 20.0) -> str:
    """The content of ``path`` once it exists and is non-empty."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear within {limit_s:g} s")


# ------------------------------------------------------------ a SIGKILL chain over `accel serve`
#: The chain's size: ``CRASH_KILLS`` kills (CI: a few; ``tox -e crash``: many), jobs stretched by
#: ``CRASH_JOB_SCALE``, kill moments drawn from ``CRASH_SEED``.
CRASH_KILLS = int(os.environ.get("CRASH_KILLS", "2"))
CRASH_JOB_SCALE = float(os.environ.get("CRASH_JOB_SCALE", "1"))
CRASH_SEED = int(os.environ.get("CRASH_SEED", "33"))
#: What one job's billed device-seconds may fall short of its own run time, or exceed the reference
#: run's excess by besides the service's down time: clock stamps (Slurm's end time has a resolution
#: of 1 s), the live loop's tick (0.2 s), on a loaded machine.
BILL_SLACK_S = 2.0


@dataclass(frozen=True)
class CrashJob:
    """A job of the chain: it appends its name to ``runs.log`` as it starts, sleeps, exits with ``code``."""

    name: str
    model: str
    sleep_s: float
    code: int

    def body(self, runs: Path) -> dict[str, Any]:
        # The job stamps its own start and end, so that its bill is checked against the time it
        # really ran rather than against another run's (which a loaded machine slows unevenly).
        times = shlex.quote(str(times_log(runs)))
        script = (
            f"echo {self.name} >> {shlex.quote(str(runs))}; t0=$(date +%s.%N); sleep {self.sleep_s:g}; "
            f'echo "{self.name} $t0 $(date +%s.%N)" >> {times}; exit {self.code}'
        )
        return {
            "name": self.name,
            "command": ["sh", "-c", script],
            "devices": 1,
            "model": self.model,
            "duration_s": self.sleep_s,
        }


def times_log(runs: Path) -> Path:
    """Where the jobs that append to ``runs`` stamp their own start and end (``NAME T0 T1``)."""
    return runs.with_name(runs.stem + "-times.log")


def ran_s(runs: Path) -> dict[str, float]:
    """Each job's own run time, from :func:`times_log`."""
    out = {}
    for line in times_log(runs).read_text().splitlines():
        name, t0, t1 = line.split()
        out[name] = float(t1) - float(t0)
    return out


def crash_jobs(models: Sequence[str], per_model: int) -> list[CrashJob]:
    """``per_model`` jobs on each of ``models``, of varied lengths and exit codes."""
    out = []
    for m, model in enumerate(models):
        for i in range(per_model):
            k = m * per_model + i
            out.append(CrashJob(f"c{k:02d}", model, round(CRASH_JOB_SCALE * (0.4 + 0.5 * (k % 4)), 3), k % 3))
    return out


@dataclass
class Serve:
    """One ``accel serve`` process (started by :func:`start_serve`; stopped by its pid)."""

    proc: subprocess.Popen[bytes]
    url: str
    state: Path

    def token(self) -> str:
        return (self.state / "admin.token").read_text().strip()

    def get(self, path: str) -> Any:
        r = httpx.get(self.url + path, headers={"Authorization": f"Bearer {self.token()}"}, timeout=30)
        assert r.status_code == 200, (path, r.status_code, r.text)
        return r.json()

    def submit(self, body: dict[str, Any]) -> str:
        r = httpx.post(
            self.url + "/v1/jobs", json=body, headers={"Authorization": f"Bearer {self.token()}"}, timeout=30
        )
        assert r.status_code == 201, r.text
        job_id: str = r.json()["id"]
        return job_id

    def records(self) -> dict[str, dict[str, Any]]:
        """Every job's whole record, by job name."""
        listed = self.get("/v1/jobs?limit=1000")["jobs"]
        return {j["name"]: self.get(f"/v1/jobs/{j['id']}") for j in listed}

    def all_ended(self) -> bool:
        listed = self.get("/v1/jobs?limit=1000")["jobs"]
        return bool(listed) and all(j["state"] in ("finished", "failed", "cancelled") for j in listed)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_serve(state: Path, args: Sequence[str], env: Mapping[str, str] | None = None, limit_s: float = 90.0) -> Serve:
    """``accel serve --state STATE ARGS`` on a free loopback port, once it answers ``/healthz``."""
    port = _free_port()
    argv = [sys.executable, "-m", "accel", "serve", "--state", str(state), "--listen", f"127.0.0.1:{port}", *args]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=dict(env or os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    serve = Serve(proc, f"http://127.0.0.1:{port}", state)
    end = time.monotonic() + limit_s
    while True:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise AssertionError(f"accel serve exited ({proc.returncode}):\n{out[-3000:]}")
        try:
            if httpx.get(serve.url + "/healthz", timeout=2).status_code == 200:
                return serve
        except httpx.HTTPError:
            pass
        if time.monotonic() > end:
            serve.stop()
            raise AssertionError(f"accel serve did not answer within {limit_s:g} s")
        time.sleep(0.05)


@dataclass
class ChainRun:
    """What a SIGKILL chain left: the records by job name, how often it was killed, and for how
    long no service ran (from each SIGKILL until the next process answered, wall seconds)."""

    records: dict[str, dict[str, Any]]
    kills: int
    down_s: float


def sigkill_chain(
    state: Path,
    args: Sequence[str],
    jobs: Sequence[CrashJob],
    runs: Path,
    *,
    kills: int,
    seed: int,
    env: Mapping[str, str] | None = None,
    limit_s: float = 240.0,
) -> ChainRun:
    """Submit ``jobs`` to ``accel serve``, SIGKILL it ``kills`` times at seeded random moments
    (each after the service answered again), start it again on the same state each time, and
    return once every job has ended (``kills=0``: the uninterrupted run)."""
    rng = random.Random(seed)
    serve = start_serve(state, args, env)
    done = 0
    down = 0.0
    end = time.monotonic() + limit_s
    try:
        for job in jobs:
            serve.submit(job.body(runs))
        while done < kills:
            time.sleep(rng.uniform(0.05, 1.5 * CRASH_JOB_SCALE))
            os.kill(serve.proc.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            serve.proc.wait(10)
            serve.stop()
            done += 1
            serve = start_serve(state, args, env)
            down += time.monotonic() - killed_at
        while not serve.all_ended():
            if time.monotonic() > end:
                raise AssertionError(f"jobs still not ended after {limit_s:g} s: {serve.get('/v1/jobs')}")
            time.sleep(0.1)
        return ChainRun(serve.records(), done, down)
    finally:
        serve.stop()


def billed_device_s(record: Mapping[str, Any]) -> float:
    """The device-seconds a job's bill lines count."""
    return sum(float(line["device_hours"]) * 3600.0 for line in record["bill"]["lines"])


def check_chain(chain: ChainRun, reference: ChainRun, jobs: Sequence[CrashJob], runs: Path, ref_runs: Path) -> None:
    """The chain's outcome is the uninterrupted run's: every job there, each ran (and started)
    once, with its exit code and reason; its bill covers the job's own run and exceeds the
    reference's by no more than the down time."""
    names = sorted(j.name for j in jobs)
    assert sorted(chain.records) == names, f"jobs lost or added: {sorted(chain.records)}"
    assert sorted(reference.records) == names
    assert sorted(runs.read_text().split()) == names, f"runs: {sorted(runs.read_text().split())} ({chain.kills} kills)"
    assert sorted(ref_runs.read_text().split()) == names
    ran, ref_ran = ran_s(runs), ran_s(ref_runs)
    for job in jobs:
        got, ref = chain.records[job.name], reference.records[job.name]
        want = ("finished", 0, "completed") if job.code == 0 else ("failed", job.code, "failed")
        for rec in (got, ref):
            assert (rec["state"], rec["exit"]["exit_code"], rec["exit"]["reason"]) == want, (job, rec["exit"])
        assert len(got["launches"]) == 1 and [e["kind"] for e in got["timeline"]].count("started") == 1, got
        assert got["pool"] == ref["pool"]
        # A bill counts the devices from placement to the end the executor reports, so it covers
        # the job's own run (stamped by the job) whatever the load; it may exceed it by the launch
        # time, which a loaded machine stretches unevenly between the two runs, and by the time the
        # service was down.  So the floor is the job's own run, and the ceiling the reference's
        # excess plus the down time.
        over, ref_over = billed_device_s(got) - ran[job.name], billed_device_s(ref) - ref_ran[job.name]
        assert over >= -BILL_SLACK_S and ref_over >= -BILL_SLACK_S, (job.name, over, ref_over)
        assert over <= max(ref_over, 0.0) + chain.down_s + BILL_SLACK_S, (job.name, over, ref_over, chain.down_s)


def crash_test(
    tmp: Path,
    args: Sequence[str],
    jobs: Sequence[CrashJob],
    env: Mapping[str, str] | None = None,
    *,
    kills: int = CRASH_KILLS,
    seed: int = CRASH_SEED,
) -> ChainRun:
    """The SIGKILL chain and the uninterrupted run of the same ``jobs`` on ``accel serve ARGS``
    (side by side, on separate states), checked against each other by :func:`check_chain`."""
    from concurrent.futures import ThreadPoolExecutor

    runs, ref_runs = tmp / "runs.log", tmp / "ref-runs.log"
    with ThreadPoolExecutor(1) as pool:
        ref = pool.submit(sigkill_chain, tmp / "ref-state", args, jobs, ref_runs, kills=0, seed=seed, env=env)
        chain = sigkill_chain(tmp / "state", args, jobs, runs, kills=kills, seed=seed, env=env)
        reference = ref.result()
    assert chain.kills == kills
    check_chain(chain, reference, jobs, runs, ref_runs)
    return chain
