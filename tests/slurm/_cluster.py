"""A one-node Slurm (munged, slurmctld -D, slurmd -D) in a temporary directory, on loopback.

Nothing outside ``workdir`` is written: the configuration, state, spool, logs, pid files, the
munge key and socket, and the character devices (``mknod c 1 3``) that stand in for the
accelerators' device nodes (``accel slurm gres-conf --dev-root``).  Every daemon started here is
stopped by its pid (terminate, wait, kill), also when starting fails.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests._helpers import stop

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "sinfo", "scontrol")


def missing() -> str | None:
    """Why this machine cannot run the cluster (``None``: it can)."""
    if os.geteuid() != 0:
        return "the real-Slurm tests need root (mknod, SlurmUser=root)"
    lost = [b for b in (*DAEMONS, *CLIENTS) if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if lost:
        return f"Slurm/munge binaries missing: {', '.join(lost)} (apt-get install slurmctld slurmd slurm-client munge)"
    return None


def _bin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def accel_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "accel", *args]


@dataclass
class Cluster:
    workdir: Path
    node: str
    gres_conf: str
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, *argv: str, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} -> {res.returncode}\n{res.stdout}\n{res.stderr}\n{self.logs()}")
        return res

    def logs(self) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            p = self.workdir / name
            if p.exists():
                out.append(f"--- {name} (tail)\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:]))
        return "\n".join(out)

    def show_node(self) -> str:
        return self.run("scontrol", "show", "node", "-o", self.node).stdout

    def wait(self, what: str, probe: Callable[[], bool], limit_s: float) -> None:
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise AssertionError(f"{what}: {proc.args!r} exited ({proc.returncode})\n{self.logs()}")
            try:
                if probe():
                    return
            except (subprocess.SubprocessError, AssertionError, OSError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"{what}: not within {limit_s:g} s\n{self.logs()}")


def _wrapper(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@contextmanager
def cluster(workdir: Path, profile: str, *, health_interval: int = 5) -> Iterator[Cluster]:
    """Start the cluster for simulator ``profile``; yield it; stop every daemon it started."""
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o700)
    devroot = workdir / "devroot"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "ACCEL_"))}
    conf = workdir / "slurm.conf"
    env["SLURM_CONF"] = str(conf)
    # The generated gres.conf, its device nodes made as character devices under devroot.
    gen = subprocess.run(
        accel_cmd("slurm", "gres-conf", "--sim", profile, "--dev-root", str(devroot)),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if gen.returncode != 0:
        raise AssertionError(f"gres-conf: {gen.returncode}\n{gen.stderr}")
    gres_text = gen.stdout
    node = next(ln.split("NodeName=", 1)[1].split()[0] for ln in gres_text.splitlines() if "NodeName=" in ln)
    node_gres = next(ln.split(f"NodeName={node} ", 1)[1] for ln in gres_text.splitlines() if "NodeName=" in ln)
    for line in gres_text.splitlines():
        for word in line.split("#", 1)[0].split():
            if word.startswith(("File=", "MultipleFiles=")):
                for f in word.split("=", 1)[1].split(","):
                    p = Path(f)
                    p.parent.mkdir(parents=True, exist_ok=True)
                    if not p.exists():
                        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (workdir / "gres.conf").write_text(gres_text)
    # Accel's wrappers: the health check reads its simulator faults from a file the test writes.
    faults = workdir / "faults"
    faults.write_text("")
    py = shlex.quote(sys.executable)
    health = _wrapper(
        workdir / "healthcheck.sh",
        f"export ACCEL_SIM={profile}\nF=$(cat {shlex.quote(str(faults))})\n"
        f'exec {py} -m accel slurm healthcheck --node {node} --resume -o "faults=$F" '
        f"--slurm-conf {shlex.quote(str(conf))} "
        f">>{shlex.quote(str(workdir / 'healthcheck.log'))} 2>&1",
    )
    prolog = _wrapper(
        workdir / "taskprolog.sh",
        f"exec {py} -m accel slurm task-prolog --sim {profile} --dev-root {shlex.quote(str(devroot))} "
        f"--gres-conf {shlex.quote(str(workdir / 'gres.conf'))} --if-absent hide "
        f"2>>{shlex.quote(str(workdir / 'taskprolog.log'))}",
    )
    key = workdir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    msock = workdir / "munge.socket"
    ctld_port, d_port = free_port(), free_port()
    while d_port == ctld_port:
        d_port = free_port()
    cpus = _sim_cpus(profile, env)
    conf.write_text(
        "\n".join(
            [
                "ClusterName=accel-test",
                "SlurmctldHost=localhost(127.0.0.1)",
                f"SlurmctldPort={ctld_port}",
                f"SlurmdPort={d_port}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={msock}",
                f"StateSaveLocation={workdir / 'state'}",
                f"SlurmdSpoolDir={workdir / 'spool'}",
                f"SlurmctldPidFile={workdir / 'slurmctld.pid'}",
                f"SlurmdPidFile={workdir / 'slurmd.pid'}",
                f"SlurmctldLogFile={workdir / 'slurmctld.log'}",
                f"SlurmdLogFile={workdir / 'slurmd.log'}",
                "SlurmctldDebug=info",
                "SlurmdDebug=info",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "MpiDefault=none",
                "ReturnToService=2",
                "SlurmdParameters=config_overrides",
                "GresTypes=gpu",
                f"TaskProlog={prolog}",
                f"HealthCheckProgram={health}",
                f"HealthCheckInterval={health_interval}",
                "HealthCheckNodeState=ANY",
                "SlurmdTimeout=30",
                "InactiveLimit=0",
                "KillWait=2",
                f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} {node_gres} State=UNKNOWN",
                f"PartitionName=main Nodes={node} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    for d in ("state", "spool"):
        (workdir / d).mkdir(exist_ok=True)
    c = Cluster(workdir, node, gres_text, env)
    logs = []
    try:

        def start(argv: list[str], log: str) -> None:
            fh = open(workdir / log, "ab")  # noqa: SIM115 - closed below
            logs.append(fh)
            c.procs.append(subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=workdir))

        start(
            [
                _bin("munged"),
                "-F",
                "--force",
                f"--socket={msock}",
                f"--key-file={key}",
                f"--pid-file={workdir / 'munged.pid'}",
                f"--log-file={workdir / 'munged.log'}",
                f"--seed-file={workdir / 'munged.seed'}",
            ],
            "munged.out",
        )
        c.wait("munged socket", msock.exists, 20)
        start([_bin("slurmctld"), "-D", "-i", "-f", str(conf)], "slurmctld.out")
        c.wait("slurmctld", lambda: c.run("scontrol", "ping", timeout=10, check=False).returncode == 0, 30)
        start([_bin("slurmd"), "-D", "-N", node, "-f", str(conf)], "slurmd.out")
        c.wait("node registered", lambda: "State=IDLE" in c.show_node(), 60)
        yield c
    finally:
        for proc in reversed(c.procs):
            stop(proc)
        for fh in logs:
            fh.close()


def _sim_cpus(profile: str, env: dict[str, str]) -> int:
    import json

    out = subprocess.run(
        accel_cmd("ls", "--sim", profile, "--json"), capture_output=True, text=True, env=env, timeout=60
    )
    data = json.loads(out.stdout)
    host = data.get("host", {}) if isinstance(data, dict) else {}
    return int(host.get("cpu_count") or 1)
