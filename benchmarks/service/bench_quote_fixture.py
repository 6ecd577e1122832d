"""A service over many hosts with a long queue, for the quote benchmark (bench_api.py --quote).

:class:`HeldExecutor` is a cluster of ``n`` copies of one simulator host (renamed ``q00000``...)
whose jobs run until told otherwise: the service places and launches on it exactly as on the
``sim`` executor, without opening ``n`` simulator sessions.  :func:`quote_service` fills every
host with one whole-host job and queues ``queued`` more behind them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from accel.model import HostInventory
from accel.service._auth import Principal
from accel.service._core import Service, default_policy
from accel.service._executor import Handle, LaunchSpec, RunStatus
from accel.service._jobreq import EnvAllowlist, JobRequest, parse_request
from accel.service._store import StoredJob


class HeldExecutor:
    """``n`` hosts; a started job runs until :meth:`signal` (see the module docstring)."""

    name = "held"
    relaunch_safe = True

    def __init__(self, n: int, log_root: Path, profile: str = "dgx-h100") -> None:
        from accel.sim.cluster import generate_cluster

        base = generate_cluster(1, profile, hostname_prefix="q")[0]
        self._hosts = [base.model_copy(update={"host": base.host.model_copy(update={"hostname": f"q{i:05d}"})})
                       for i in range(n)]
        self._log_root = log_root
        self._stopped: set[str] = set()

    def hosts(self) -> Sequence[HostInventory]:
        return self._hosts

    def start(self, spec: LaunchSpec) -> Handle:
        return Handle(self.name, spec.job_id, secrets.token_hex(4))

    def poll(self, handle: Handle) -> RunStatus:
        return RunStatus(handle.ref not in self._stopped)

    def signal(self, handle: Handle, signum: int) -> None:
        self._stopped.add(handle.ref)

    def reattach(self, handle: Handle) -> RunStatus:
        return self.poll(handle)

    def log_path(self, handle: Handle, stream: Literal["stdout", "stderr"]) -> Path:
        return self._log_root / handle.job_id / f"{stream}.log"


def quote_service(state: Path, hosts: int, queued: int) -> tuple[Service, Principal, JobRequest]:
    """A service of ``hosts`` 8-device hosts, each running one whole-host job, with ``queued`` jobs
    queued behind them; returns it, a tenant principal and a 1-device request to quote."""
    ex = HeldExecutor(hosts, state / "logs")
    svc = Service.open(state, [ex], time_scale=1.0, policy=default_policy(30.0))
    who = Principal("bench", "team-a", False)
    env = EnvAllowlist()
    whole = parse_request({"command": ["train"], "devices": 8, "duration_s": 7200}, env)
    small = parse_request({"command": ["train"], "devices": 1, "duration_s": 600}, env)
    now = svc.now()
    # the fill is not what is measured: stored and queued directly (no quote per job)
    with svc.lock, svc.store.transaction():
        for i in range(hosts + queued):
            req = whole if i < hosts or i % 3 == 0 else small
            seq = svc.store.next_seq()
            job_id = f"j{seq:06d}-{secrets.token_hex(3)}"
            stored = StoredJob(job_id, seq, who.tenant, req.name, {**req.as_dict(), "tenant": who.tenant, "pool": ""},
                               now, svc.clock.wall(now), who.actor, None)
            svc.store.add_job(stored)
            svc._engine_submit(stored, now)
            if i == hosts - 1:
                svc.engine.cycle(now)  # every host busy with one whole-host job
    svc.tick()
    return svc, who, small
