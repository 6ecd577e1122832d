"""The ``slurm`` executor: accel admits and places, Slurm runs the job where accel placed it.

Hosts are Slurm's nodes (``sinfo``), each with its devices as accel's model has them: the
``node_inventory`` callable gives a node's :class:`~accel.model.HostInventory` (what
``accel ls --json`` reads on that node, or a simulator profile), and the node's ``Gres=`` is
checked against the ``gres.conf`` records :func:`accel.integrations.slurm.generate` makes of
it (a difference is a :class:`~accel.model.Problem` on the host, never a silent mismatch).
A node Slurm does not offer (down, drained, draining, not responding, in maintenance) has its
devices marked with that operational state.

A job is one ``sbatch`` of a generated batch script that ``exec``\\ s the job's argv, every
argument through :func:`shlex.join` and every user variable through :func:`shlex.quote` (a
value never becomes shell syntax), with ``--nodelist`` the placed nodes, ``--gres=gpu:<type>:<n>``
per node (the Slurm type of the placed devices' ``gres.conf`` records), ``--output`` /
``--error`` the job's log files, ``--job-name=accel-<job id>``, ``--comment=accel:<nonce>`` (a
random value written to the executor's record *before* ``sbatch`` runs, so that after a crash
between ``sbatch`` and the record the submitted job is found, not submitted again) and
``--no-requeue`` (Slurm must not run a job a second time behind accel's back).  Slurm chooses *which* devices of a type
a job gets; accel's TaskProlog (``accel slurm task-prolog``) sets each vendor's visibility
variable from that allocation, so the batch script sets none (a user variable of such a name, or
one starting ``SLURM_``, is left out).

State comes from ``squeue`` (is it still there, and is it still the job named
``accel-<job id>``: a Slurm job id that names another job is a lost job, not ours), then
``scontrol show job`` for the exit code and the end state, then ``sacct`` once the controller
has forgotten the job (``MinJobAge``).  ``scancel --full --signal=<SIG>`` delivers a signal to
every process of the job, the batch step included; SIGKILL is ``scancel`` (Slurm's own kill:
SIGTERM, then SIGKILL after ``KillWait``).  Every command runs through :mod:`accel.tools` (no
shell, a timeout, an output cap).

Multi-node jobs: the batch script runs on the first node (Slurm's rule); a command that
should run on every node starts its own ``srun``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import shlex
import signal as _signal
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from accel.errors import AccelError, ConfigError, ToolError
from accel.integrations.slurm._gres import GRES_NAME, GresConf, generate
from accel.integrations.slurm._prolog import SLURM_SET
from accel.model import Host, HostInventory, Problem, ProblemKind
from accel.model.health import Operational
from accel.tools import Runner, SubprocessRunner

from .._executor import ExecutorError, ExitReason, Handle, JobLostError, LaunchSpec, RunStatus
from ._sources import ExecutorContextLike, node_inventory_source, option_str, state_dir, wall_to_clock
from ._wrap import write_json_atomic

__all__ = ["SlurmExecutor", "build", "classify_state", "parse_gres"]

_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SLURM_ID = re.compile(r"^[0-9]+$")
_GRES_ITEM = re.compile(r"(?P<name>[^:,()]+)(?::(?P<type>[^:,()]+))?:(?P<count>[0-9]+)(?:\([^)]*\))?")

#: Slurm job states in which the job has not ended yet (``squeue --states=all`` long names).
RUNNING_STATES = frozenset(
    {
        "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING",
        "STAGE_OUT", "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
    }
)  # fmt: skip

#: Ended states and what a user reads (FAILED, COMPLETED: from the exit code and signal).
_END_REASON = {
    "CANCELLED": ExitReason.CANCELLED,
    "TIMEOUT": ExitReason.TIME_LIMIT,
    "DEADLINE": ExitReason.TIME_LIMIT,
    "OUT_OF_MEMORY": ExitReason.OOM_KILLED,
    "NODE_FAIL": ExitReason.NODE_LOST,
    "BOOT_FAIL": ExitReason.NODE_LOST,
    "PREEMPTED": ExitReason.PREEMPTED,
}

#: ``sinfo %T`` node states that take no new job, and the devices' operational state then.
_NODE_STATE = {
    "down": Operational.OFFLINE,
    "drained": Operational.OFFLINE,
    "fail": Operational.OFFLINE,
    "failing": Operational.DRAINING,
    "draining": Operational.DRAINING,
    "maint": Operational.MAINTENANCE,
    "reboot_issued": Operational.RESETTING,
    "reboot_requested": Operational.RESETTING,
    "unknown": Operational.OFFLINE,
    "future": Operational.OFFLINE,
    "inval": Operational.OFFLINE,
}


def parse_gres(text: str) -> dict[str, int]:
    """``Gres=`` (``gpu:h100:4(S:0-1),gpu:a100:2``) as ``{type: count}`` of ``gpu`` records
    (an untyped ``gpu:4`` counts under ``""``; other GRES names are left out)."""
    out: dict[str, int] = {}
    for m in _GRES_ITEM.finditer(text or ""):
        if m.group("name").strip() != GRES_NAME:
            continue
        key = m.group("type") or ""
        out[key] = out.get(key, 0) + int(m.group("count"))
    return out


def _exit_pair(text: str) -> tuple[int | None, int | None]:
    code, _, sig = (text or "").partition(":")
    try:
        return int(code), int(sig or 0)
    except ValueError:
        return None, None


def classify_state(state: str, exit_code: str, reason: str = "") -> RunStatus:
    """A :class:`RunStatus` from a Slurm job state (``COMPLETED``, ``FAILED``, ``CANCELLED by 0``,
    ``OUT_OF_MEMORY``...) and its ``ExitCode`` (``<code>:<signal>``)."""
    word = state.split()[0].rstrip("+") if state.strip() else "UNKNOWN"
    if word in RUNNING_STATES:
        detail = word if not reason or reason == "None" else f"{word} ({reason})"
        return RunStatus(running=True, detail=detail)
    code, sig = _exit_pair(exit_code)
    signum = sig if sig else None
    detail = f"Slurm state {word}, exit code {exit_code or '?'}" + (
        f", reason {reason}" if reason and reason != "None" else ""
    )
    if word in _END_REASON:
        return RunStatus(running=False, exit_code=code, signal=signum, reason=_END_REASON[word], detail=detail)
    if signum is not None:
        return RunStatus(running=False, exit_code=code, signal=signum, reason=ExitReason.SIGNALED, detail=detail)
    if word == "COMPLETED" and code == 0:
        return RunStatus(running=False, exit_code=0, reason=ExitReason.COMPLETED, detail=detail)
    return RunStatus(running=False, exit_code=code, reason=ExitReason.FAILED, detail=detail)


_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ADDR = re.compile(r"^[A-Za-z0-9.:_-]{1,253}$")  # an IPv4 / IPv6 address or a host name, nothing else


def _fields(line: str) -> dict[str, str]:
    """``scontrol show job -o``: ``Key=value`` words (values hold no spaces in the keys read here)."""
    out: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


class SlurmExecutor:
    """Runs placed jobs through Slurm (see the module docstring).

    :param state_dir: where the executor keeps one record and one batch script per job.
    :param node_inventory: a node's inventory by node name
        (:func:`~accel.service.executors._sources.node_inventory_source` makes one from a name).
    :param runner: runs the Slurm commands (default: :class:`accel.tools.SubprocessRunner`).
    :param env: variables the Slurm commands need (``SLURM_CONF``...).
    :param partition: the Slurm partition jobs go to (default: the cluster's default).
    :param timeout_s: the limit for one Slurm command.
    """

    name = "slurm"
    #: Starting a job again after a crash cut its launch short never submits it twice (see
    #: :meth:`start`): the service may simply call :meth:`start` again.
    relaunch_safe = True

    def __init__(
        self,
        state_dir: Path,
        *,
        node_inventory: Callable[[str], HostInventory],
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
        partition: str | None = None,
        timeout_s: float = 10.0,
        wall_to_clock: Callable[[float], float] | None = None,
    ) -> None:
        self._state = Path(state_dir)
        self._state.mkdir(parents=True, exist_ok=True)
        self._state.chmod(0o700)
        self._node_inventory = node_inventory
        self._runner: Runner = runner or SubprocessRunner()
        self._env = dict(env or {})
        self._partition = partition
        self._timeout_s = timeout_s
        self._wall_to_clock = wall_to_clock  # EndTime / End (Unix time) on the service's clock
        self._confs: dict[str, tuple[HostInventory, GresConf]] = {}
        self._addrs: dict[str, str] = {}

    # ------------------------------------------------------------------ commands
    def _run(self, *argv: str, check: bool = True) -> tuple[int, str, str]:
        try:
            res = self._runner.run(list(argv), env=self._env, timeout_s=self._timeout_s, check=False)
        except ToolError as exc:
            raise ExecutorError(str(exc)) from exc
        if check and res.returncode != 0:
            raise ExecutorError(f"{shlex.join(argv)} exited {res.returncode}: {res.stderr.strip()[-500:]}")
        return res.returncode, res.stdout, res.stderr

    # ------------------------------------------------------------------ hosts
    def _conf(self, node: str) -> tuple[HostInventory, GresConf]:
        inv = self._node_inventory(node)
        if inv.host.hostname != node:
            inv = inv.model_copy(update={"host": inv.host.model_copy(update={"hostname": node})})
        pair = (inv, generate(inv))
        self._confs[node] = pair
        return pair

    def node_address(self, host: str) -> str | None:
        """The node's ``NodeAddr`` (``scontrol show node --oneliner NODE``; kept once read): where a
        serving replica placed on it is reached.  ``None`` when Slurm does not say (read again next time)."""
        if host in self._addrs:
            return self._addrs[host]
        if not _NODE.match(host):
            return None
        try:
            rc, out, _ = self._run("scontrol", "show", "node", "--oneliner", host, check=False)
        except ExecutorError:
            return None
        addr = _fields(out).get("NodeAddr", "") if rc == 0 else ""
        if not addr or not _ADDR.match(addr):
            return None
        self._addrs[host] = addr
        return addr

    def hosts(self) -> Sequence[HostInventory]:
        """Every node Slurm lists, with its devices and, where it takes no job, their state."""
        _, out, _ = self._run("sinfo", "--Node", "--noheader", "--format=%N|%T|%G")
        seen: dict[str, tuple[str, str]] = {}
        for line in out.splitlines():
            parts = line.strip().split("|", 2)
            if len(parts) == 3 and parts[0] not in seen:
                seen[parts[0]] = (parts[1], parts[2])
        hosts: list[HostInventory] = []
        for node, (state, gres) in seen.items():
            try:
                inv, conf = self._conf(node)
            except AccelError as exc:
                problem = Problem(kind=ProblemKind.BACKEND, backend="slurm", message=f"node {node}: {exc}")
                hosts.append(
                    HostInventory(host=Host(hostname=node), collected_at=datetime.now(UTC), problems=(problem,))
                )
                continue
            hosts.append(self._with_state(inv, conf, state, gres))
        return hosts

    @staticmethod
    def _with_state(inv: HostInventory, conf: GresConf, state: str, gres: str) -> HostInventory:
        problems = list(inv.problems)
        want: dict[str, int] = {}
        for r in conf.records:
            want[r.type] = want.get(r.type, 0) + 1
        have = parse_gres(gres)
        if want != have:
            problems.append(
                Problem(
                    kind=ProblemKind.RECORD,
                    backend="slurm",
                    code="slurm.gres-mismatch",
                    message=f"node {inv.host.hostname}: Slurm has Gres={gres or '(none)'}, accel's model "
                    f"makes {conf.node_gres()}: regenerate gres.conf (accel slurm gres-conf)",
                )
            )
        # sinfo's state: "idle", "mixed", "drained", "idle*" (not responding), "mixed+drain"...
        words = state.rstrip("*$#~!%@^-").replace("+", " ").split()
        op = next((_NODE_STATE[w] for w in words if w in _NODE_STATE), None)
        if op is None and "drain" in words:
            op = Operational.DRAINING
        if state.endswith("*"):
            op = Operational.OFFLINE
        devices = inv.devices
        if op is not None:
            devices = tuple(
                d.model_copy(update={"health": d.health.model_copy(update={"operational": op})}) for d in devices
            )
        return inv.model_copy(update={"devices": devices, "problems": tuple(problems)})

    # ------------------------------------------------------------------ start
    def _gres(self, spec: LaunchSpec) -> tuple[list[str], str | None, set[str]]:
        """The nodes in placement order, the one ``--gres`` every node gets, the variable names
        the TaskProlog owns."""
        nodes: list[str] = []
        per_node: dict[str, dict[str, int]] = {}
        reserved = set(SLURM_SET)
        for d in spec.devices:
            if d.host not in per_node:
                nodes.append(d.host)
                per_node[d.host] = {}
            conf = self._confs.get(d.host) or self._conf(d.host)
            record = next((r for r in conf[1].records if r.device_id == d.device_id), None)
            if record is None:
                raise ExecutorError(
                    f"job {spec.job_id}: device {d.device_id} on {d.host} is not a Slurm GPU of that node"
                )
            per_node[d.host][record.type] = per_node[d.host].get(record.type, 0) + 1
            reserved |= {r.visible_env for r in conf[1].records if r.visible_env}
        shapes = {tuple(sorted(c.items())) for c in per_node.values()}
        if len(shapes) > 1:
            raise ExecutorError(
                f"job {spec.job_id}: Slurm's --gres is per node, but the placement differs by node: {per_node}"
            )
        gres = ",".join(f"{GRES_NAME}:{t}:{n}" for t, n in sorted(next(iter(shapes)))) if shapes else None
        return nodes, gres, reserved

    def _script(self, spec: LaunchSpec, reserved: set[str]) -> str:
        lines = ["#!/bin/sh", f"# accel serve job {spec.job_id}: generated, every user value quoted"]
        for name, value in spec.env:
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ExecutorError(f"job {spec.job_id}: environment name {name!r} is not a variable name")
            if not isinstance(value, str) or "\0" in value:
                raise ExecutorError(f"job {spec.job_id}: environment value of {name} is not a string without NUL")
            if name in reserved or name.startswith("SLURM_"):
                continue  # the TaskProlog's and Slurm's own: a user value must not change what the job sees
            lines.append(f"export {name}={shlex.quote(value)}")
        lines.append(f"export ACCEL_JOB_ID={shlex.quote(spec.job_id)}")
        lines.append("exec " + shlex.join(spec.argv))
        return "\n".join(lines) + "\n"

    def _check_spec(self, spec: LaunchSpec) -> None:
        if not _JOB_ID.match(spec.job_id):
            raise ExecutorError(f"job id {spec.job_id!r} is not 1-128 of [A-Za-z0-9._-]")
        if isinstance(spec.argv, str) or not spec.argv:
            raise ExecutorError(f"job {spec.job_id}: argv must be a non-empty list of arguments")
        for i, arg in enumerate(spec.argv):
            if not isinstance(arg, str) or "\0" in arg:
                raise ExecutorError(f"job {spec.job_id}: argv[{i}] is not a string without NUL")
        if "%" in str(spec.log_dir) or "\\" in str(spec.log_dir):
            # sbatch expands %j, %u... in --output; a path with them would name another file.
            raise ExecutorError(f"job {spec.job_id}: log directory {str(spec.log_dir)!r} holds '%' or '\\'")
        if not spec.log_dir.is_absolute() or not spec.log_dir.is_dir():
            raise ExecutorError(
                f"job {spec.job_id}: log directory {str(spec.log_dir)!r} is not an existing absolute path"
            )

    def _job_name(self, job_id: str) -> str:
        return f"accel-{job_id}"

    def _by_name(self, job_id: str) -> list[tuple[str, str, str]]:
        """``(Slurm id, state, comment)`` of every job the controller knows by this job's name."""
        _, out, _ = self._run(
            "squeue", "--noheader", "--states=all", f"--name={self._job_name(job_id)}", "--format=%i|%T|%k"
        )
        rows = []
        for line in out.splitlines():
            parts = line.strip().split("|", 2)
            if len(parts) == 3 and _SLURM_ID.match(parts[0]):
                rows.append((parts[0], parts[1], parts[2]))
        return rows

    def _existing(self, job_id: str, log_dir: Path) -> str | None:
        """The Slurm job this start must not duplicate, if any.

        - a submission the record announced (its nonce, in the job's ``--comment``) whose id the
          crash kept from the record: that job, queued, running or ended;
        - the recorded job, while it is queued or running;
        - without any record (the state directory was lost), a queued or running job of this name.
        """
        rec = self._record(job_id) or {}
        rows = self._by_name(job_id)
        nonce = rec.get("pending_nonce")
        if nonce:
            mine = [sid for sid, _state, comment in rows if comment == f"accel:{nonce}"]
            if mine:
                self._remember(job_id, log_dir, mine[-1], str(nonce))
                return mine[-1]
        known = rec.get("slurm_job_id")
        live = [sid for sid, state, _ in rows if state in RUNNING_STATES]
        if known in live:
            return str(known)
        if not rec and live:
            self._remember(job_id, log_dir, live[-1], None)
            return live[-1]
        return None

    def start(self, spec: LaunchSpec) -> Handle:
        """``sbatch`` the job, once: if a Slurm job of this start already exists (see
        :meth:`_existing`), its handle is returned and nothing is submitted.  A recorded job
        that has ended is a finished attempt: the job is submitted anew (re-placed)."""
        self._check_spec(spec)
        log_dir = spec.log_dir.resolve()
        existing = self._existing(spec.job_id, log_dir)
        if existing is not None:
            return Handle(self.name, spec.job_id, existing)
        nodes, gres, reserved = self._gres(spec)
        script = self._state / f"{spec.job_id}.sh"
        script.write_text(self._script(spec, reserved))
        script.chmod(0o700)
        nonce = secrets.token_hex(8)
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={self._job_name(spec.job_id)}",
            f"--comment=accel:{nonce}",
            f"--output={log_dir / 'stdout.log'}",
            f"--error={log_dir / 'stderr.log'}",
            "--open-mode=append",
            f"--chdir={log_dir}",
            "--no-requeue",
        ]
        if nodes:
            argv += [f"--nodelist={','.join(nodes)}", f"--nodes={len(nodes)}"]
        if gres:
            argv.append(f"--gres={gres}")
        if self._partition:
            argv.append(f"--partition={self._partition}")
        argv.append(str(script))
        # The nonce is on disk before sbatch runs: a crash between sbatch and the record below
        # leaves a way to find the submitted job (its comment) instead of submitting it again.
        previous = (self._record(spec.job_id) or {}).get("slurm_job_id")
        self._remember(spec.job_id, log_dir, previous, None, pending=nonce)
        _, out, _ = self._run(*argv)
        sid = out.strip().split(";", 1)[0]
        if not _SLURM_ID.match(sid):
            raise ExecutorError(f"job {spec.job_id}: sbatch printed {out.strip()!r}, not a job id")
        self._remember(spec.job_id, log_dir, sid, nonce)
        return Handle(self.name, spec.job_id, sid)

    def _remember(
        self, job_id: str, log_dir: Path, sid: str | None, nonce: str | None, *, pending: str | None = None
    ) -> None:
        record = {"slurm_job_id": sid, "log_dir": str(log_dir), "nonce": nonce, "pending_nonce": pending}
        write_json_atomic(self._state / f"{job_id}.json", record)

    # ------------------------------------------------------------------ state
    def _sid(self, handle: Handle) -> str:
        if handle.executor != self.name or not _SLURM_ID.match(handle.ref):
            raise JobLostError(f"job {handle.job_id}: {handle.executor}:{handle.ref!r} is not a Slurm job id")
        return handle.ref

    def _scontrol(self, sid: str) -> dict[str, str] | None:
        rc, out, err = self._run("scontrol", "show", "job", "--oneliner", sid, check=False)
        if rc != 0:
            if "Invalid job id" in err:
                return None
            raise ExecutorError(f"scontrol show job {sid} exited {rc}: {err.strip()[-500:]}")
        line = next((ln for ln in out.splitlines() if ln.startswith(f"JobId={sid} ")), "")
        return _fields(line) if line else None

    def _sacct(self, handle: Handle, sid: str) -> RunStatus:
        rc, out, err = self._run(
            "sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={sid}",
            "--format=JobID,JobName,State,ExitCode,End", check=False,
        )  # fmt: skip
        rows = [ln.split("|") for ln in out.splitlines() if ln.startswith(f"{sid}|")]
        if rc != 0 or not rows:
            why = err.strip() or "no record"
            raise JobLostError(f"job {handle.job_id}: Slurm job {sid} is gone from the controller and sacct has {why}")
        _, name, state, code, end = (rows[0] + ["", "", "", "", ""])[:5]
        if name != self._job_name(handle.job_id):
            raise JobLostError(f"job {handle.job_id}: Slurm job {sid} is {name!r}, not this job")
        return self._with_end(classify_state(state, code), end)

    def _with_end(self, status: RunStatus, end: str) -> RunStatus:
        """``status`` with Slurm's end time (``2026-12-07T13:40:05``, the controller's local time,
        as ``scontrol`` and ``sacct`` print it) on the service's clock; unknown: left ``None``."""
        if status.running or self._wall_to_clock is None:
            return status
        try:
            wall = datetime.fromisoformat(end.strip()).timestamp()
        except ValueError:
            return status  # "Unknown", "None" or empty: the service takes the poll's time
        return dataclasses.replace(status, ended_at=self._wall_to_clock(wall))

    def poll(self, handle: Handle) -> RunStatus:
        """Queued or running per ``squeue``; the end from ``scontrol show job``, then ``sacct``."""
        sid = self._sid(handle)
        rc, out, err = self._run(
            "squeue", "--noheader", "--states=all", f"--jobs={sid}", "--format=%i|%j|%T|%r", check=False
        )
        if rc != 0 and "Invalid job id" not in err:
            raise ExecutorError(f"squeue --jobs={sid} exited {rc}: {err.strip()[-500:]}")
        row = next((ln.split("|", 3) for ln in out.splitlines() if ln.startswith(f"{sid}|")), None)
        if row is not None and len(row) == 4:
            _, name, state, reason = row
            if name != self._job_name(handle.job_id):
                raise JobLostError(f"job {handle.job_id}: Slurm job {sid} is {name!r}, not this job")
            if state in RUNNING_STATES:
                return classify_state(state, "", reason)
        fields = self._scontrol(sid)
        if fields is None:
            return self._sacct(handle, sid)
        if fields.get("JobName") != self._job_name(handle.job_id):
            raise JobLostError(f"job {handle.job_id}: Slurm job {sid} is {fields.get('JobName')!r}, not this job")
        return self._with_end(classify_state(fields.get("JobState", ""), fields.get("ExitCode", ""),
                                             fields.get("Reason", "")), fields.get("EndTime", ""))

    def reattach(self, handle: Handle) -> RunStatus:
        """The job again, by its Slurm job id (and its name, so a reused id is not taken for it)."""
        return self.poll(handle)

    def signal(self, handle: Handle, signum: int) -> None:
        """``scancel --full --signal``; SIGKILL (and SIGTERM / SIGINT to a job still queued) is
        ``scancel``; a no-op once the job has ended, or for a checkpoint signal while queued."""
        status = self.poll(handle)
        if not status.running:
            return
        sid = handle.ref
        queued = status.detail.startswith("PENDING")
        if signum == _signal.SIGKILL or (queued and signum in (_signal.SIGTERM, _signal.SIGINT)):
            self._run("scancel", sid)
            return
        if queued:
            return
        try:
            name = _signal.Signals(signum).name.removeprefix("SIG")
        except ValueError:
            name = str(signum)
        self._run("scancel", "--full", f"--signal={name}", sid)

    def log_path(self, handle: Handle, stream: Literal["stdout", "stderr"]) -> Path:
        """The ``--output`` / ``--error`` file of the job."""
        if stream not in ("stdout", "stderr"):
            raise ExecutorError(f"job {handle.job_id}: no log stream {stream!r} (stdout or stderr)")
        rec = self._record(handle.job_id)
        if rec is not None:  # the job's logs: every attempt appends to the same files
            return Path(rec["log_dir"]) / f"{stream}.log"
        fields = self._scontrol(self._sid(handle)) or {}
        path = fields.get("StdOut" if stream == "stdout" else "StdErr")
        if not path:
            raise JobLostError(f"job {handle.job_id}: no record of its log files")
        return Path(path)

    def _record(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID.match(job_id):
            return None
        path = self._state / f"{job_id}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ExecutorError(f"{path}: unreadable ({exc})") from exc
        return data if isinstance(data, dict) else None


def build(context: ExecutorContextLike) -> SlurmExecutor:
    """The ``slurm`` executor from the service's context.  Options: ``nodes`` (required:
    ``sim:<profile>`` or a directory of ``<node>.json``), ``slurm_conf`` (the ``SLURM_CONF`` of
    the Slurm commands; default the service's own), ``partition``, ``state_dir``."""
    nodes = option_str(context, "slurm", "nodes")
    if not nodes:
        raise ConfigError(
            "executor slurm: say where the nodes' devices are read: option nodes = sim:<profile> or a "
            "directory of <node>.json (accel ls --json of each node)"
        )
    # The Slurm commands run in a clean environment (accel.tools): the service's SLURM_CONF is
    # passed on explicitly.
    conf = option_str(context, "slurm", "slurm_conf") or os.environ.get("SLURM_CONF")
    return SlurmExecutor(
        state_dir(context, "slurm"),
        node_inventory=node_inventory_source(nodes),
        env={"SLURM_CONF": conf} if conf else None,
        partition=option_str(context, "slurm", "partition"),
        wall_to_clock=wall_to_clock(context),
    )
