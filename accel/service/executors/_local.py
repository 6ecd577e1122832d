"""The ``local`` executor: this host's devices, each job a process group under a supervisor.

Hosts: one, this machine, as accel's discovery reads it (a :class:`~accel.discovery.Session`
kept open), or as an injected ``inventory`` callable returns it (a simulator profile, a replay
scenario: how tests and a machine without accelerators run it).

A job runs as ``argv`` (never through a shell) in a session of its own, with a clean
environment: ``PATH``, ``HOME``, ``USER``, ``LOGNAME``, ``LANG``, the user's allowlisted
variables, ``ACCEL_JOB_ID`` and every vendor's visibility variable for the placed devices
(:func:`~accel.service.executors._visibility.job_visibility_env`; these win over a user variable of
the same name).  Between the service and the job sits a supervisor (``_wrap.py``, started
by a launcher that exits at once, so it is never the service's child) that outlives a restart
of the service, waits for the job and writes how
it ended to ``.accel-exit.json`` in the job's log directory; see :mod:`._wrap`.

``Handle.ref`` is ``"<supervisor pid>:<its start time in clock ticks>"``; the executor also keeps
``<state_dir>/<job id>.json`` (log directory, the job's pid, process group and start time), so a
new executor over the same state directory (the service restarted) finds every job again.  A
pid whose start time differs is another process (the pid was recycled): unless the exit file
says how the job ended, the job is lost (:class:`~accel.service.JobLostError`), never run again.

When the service runs as root, jobs run as ``run_as`` (an unprivileged account); the executor
refuses to run them as root unless ``allow_root`` is set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pwd
import re
import select
import signal as _signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from accel.errors import AccelError
from accel.model import HostInventory, Telemetry

from .._executor import ExecutorError, ExitReason, Handle, JobLostError, LaunchSpec, PlacedDevice, RunStatus
from ._sources import ExecutorContextLike, inventory_source, option_bool, option_str, state_dir, wall_to_clock
from ._visibility import job_visibility_env
from ._wrap import EXIT, LAUNCH, RUN, read_start_ticks, supervised, write_json_atomic

__all__ = ["LocalExecutor", "build", "classify_exit"]

_WRAP = Path(__file__).with_name("_wrap.py")
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REF = re.compile(r"^([0-9]+):([0-9]+)$")
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def classify_exit(data: Mapping[str, Any]) -> RunStatus:
    """The :class:`RunStatus` of a supervisor's exit record: exit code 0 completed, another
    code failed, SIGKILL with the memory cgroup's OOM-kill counter risen OOM-killed, any other
    signal signaled (the service turns its own signals into preempted / cancelled / time limit)."""
    error = data.get("error")
    if error:
        return RunStatus(running=False, reason=ExitReason.FAILED, detail=str(error))
    code = data.get("exit_code")
    sig = data.get("signal")
    if isinstance(sig, int):
        try:
            name = _signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if data.get("oom"):
            detail = f"killed by {name} from the out-of-memory killer ({data.get('oom_evidence')})"
            return RunStatus(running=False, signal=sig, reason=ExitReason.OOM_KILLED, detail=detail)
        return RunStatus(running=False, signal=sig, reason=ExitReason.SIGNALED, detail=f"killed by {name}")
    if isinstance(code, int):
        reason = ExitReason.COMPLETED if code == 0 else ExitReason.FAILED
        return RunStatus(running=False, exit_code=code, reason=reason, detail=f"exit code {code}")
    return RunStatus(running=False, reason=ExitReason.NODE_LOST, detail="the exit record names no exit code")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ExecutorError(f"{path}: unreadable ({exc})") from exc
    return data if isinstance(data, dict) else None


def _alive(pid: object, start: object) -> bool:
    """``pid`` is running and is the process that started at ``start`` (not a recycled pid)."""
    if not isinstance(pid, int) or not isinstance(start, int):
        return False
    return read_start_ticks(pid) == start


def _wait_child(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """``proc.wait(timeout)`` without its polling (sleeps of up to 50 ms): a pidfd becomes
    readable the moment the child exits (Linux 5.3); elsewhere, ``Popen.wait``."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout_s)
    return proc.wait()


class LocalExecutor:
    """Runs placed jobs on this host (see the module docstring).

    :param state_dir: where the executor keeps one small record per job (created, mode 0700).
    :param inventory: returns this host's inventory; default: accel's discovery
        (:func:`~accel.service.executors._sources.inventory_source` makes one from a name).
    :param telemetry: readings of devices by id (memory used, utilization, power); default: the
        discovery session's, none when ``inventory`` is given without it.
    :param run_as: the account jobs run as (needed when the service runs as root).
    :param allow_root: run jobs as root when the service is root and ``run_as`` is not given.
    :param path: the jobs' ``PATH`` (default ``/usr/local/bin:/usr/bin:/bin``).
    :param cgroup_root: where the supervisor reads OOM-kill counters (tests point it at a fake).
    :param start_timeout_s: how long :meth:`start` waits for the supervisor to report the job.
    """

    name = "local"
    #: Starting a job again after a crash cut its launch short never runs it twice (see
    #: :meth:`start`): the service may simply call :meth:`start` again.
    relaunch_safe = True

    def __init__(
        self,
        state_dir: Path,
        *,
        inventory: Callable[[], HostInventory] | None = None,
        telemetry: Callable[[Sequence[str]], Sequence[Telemetry]] | None = None,
        run_as: str | None = None,
        allow_root: bool = False,
        path: str = _SAFE_PATH,
        cgroup_root: Path | None = None,
        start_timeout_s: float = 10.0,
        wall_to_clock: Callable[[float], float] | None = None,
    ) -> None:
        self._state = Path(state_dir)
        self._state.mkdir(parents=True, exist_ok=True)
        self._state.chmod(0o700)
        if inventory is None:
            source = inventory_source(None)
            inventory, telemetry = source.inventory, source.telemetry
        self._inventory = inventory
        self._telemetry = telemetry
        self._path = path
        self._cgroup_root = cgroup_root
        self._start_timeout_s = start_timeout_s
        self._wall_to_clock = wall_to_clock  # the exit record's Unix time on the service's clock
        self._last: HostInventory | None = None
        self._user = self._check_user(run_as, allow_root)

    # ------------------------------------------------------------------ who jobs run as
    @staticmethod
    def _check_user(run_as: str | None, allow_root: bool) -> pwd.struct_passwd | None:
        euid = os.geteuid()
        if run_as is None:
            if euid == 0 and not allow_root:
                raise ExecutorError(
                    "the service runs as root: name the unprivileged account jobs run as (--run-as), "
                    "or allow jobs to run as root explicitly"
                )
            return None
        try:
            entry = pwd.getpwnam(run_as)
        except KeyError:
            raise ExecutorError(f"run-as account {run_as!r} does not exist on this host") from None
        if entry.pw_uid == 0 and not allow_root:
            raise ExecutorError(f"run-as account {run_as!r} is root (uid 0); allow root explicitly to use it")
        if euid != 0 and entry.pw_uid != euid:
            raise ExecutorError(
                f"the service runs as uid {euid}, not root: it cannot run jobs as {run_as!r} (uid {entry.pw_uid})"
            )
        return entry if entry.pw_uid != euid else None

    # ------------------------------------------------------------------ hosts
    def node_address(self, host: str) -> str:
        """Jobs run on this host: a serving replica is reached on loopback (its engine listens there)."""
        return "127.0.0.1"

    def hosts(self) -> Sequence[HostInventory]:
        """This host, read now."""
        self._last = self._inventory()
        return [self._last]

    def telemetry(self, devices: Sequence[PlacedDevice]) -> list[Telemetry]:
        """Readings of a job's ``devices`` now, for its page's charts; a device (or a whole
        source) that cannot be read is left out of this reading, never an error."""
        if self._telemetry is None or not devices:
            return []
        ids = [d.device_id for d in devices]
        try:
            readings = self._telemetry(ids)
        except AccelError:
            return []
        wanted = set(ids)
        return [t for t in readings if t.device_id in wanted]

    # ------------------------------------------------------------------ start
    def _environment(self, spec: LaunchSpec) -> dict[str, str]:
        user = self._user
        env: dict[str, str] = {"PATH": self._path, "LANG": "C.UTF-8"}
        if user is not None:
            env.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name)
        else:
            me = pwd.getpwuid(os.geteuid())
            env.update(HOME=os.environ.get("HOME", me.pw_dir), USER=me.pw_name, LOGNAME=me.pw_name)
        for name, value in spec.env:
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ExecutorError(f"job {spec.job_id}: environment name {name!r} is not a variable name")
            if not isinstance(value, str) or "\0" in value:
                raise ExecutorError(f"job {spec.job_id}: environment value of {name} is not a string without NUL")
            env[name] = value
        env["ACCEL_JOB_ID"] = spec.job_id
        env.update(self._visibility(spec))
        return env

    def _visibility(self, spec: LaunchSpec) -> dict[str, str]:
        inv = self._last if self._last is not None else self.hosts()[0]
        ids = [d.device_id for d in spec.devices]
        stray = sorted({d.host for d in spec.devices if d.host != inv.host.hostname})
        if stray:
            raise ExecutorError(f"job {spec.job_id}: placed on {stray}, but this executor runs {inv.host.hostname!r}")
        known = {d.id for d in inv.devices} | {p.id for p in inv.partitions}
        if any(i not in known for i in ids):
            inv = self.hosts()[0]  # the picture may be older than the placement
        try:
            return job_visibility_env(inv, ids)
        except AccelError as exc:
            raise ExecutorError(f"job {spec.job_id}: {exc}") from exc

    @staticmethod
    def _check_spec(spec: LaunchSpec) -> None:
        if not _JOB_ID.match(spec.job_id):
            raise ExecutorError(f"job id {spec.job_id!r} is not 1-128 of [A-Za-z0-9._-]")
        if isinstance(spec.argv, str) or not spec.argv:
            raise ExecutorError(f"job {spec.job_id}: argv must be a non-empty list of arguments")
        for i, arg in enumerate(spec.argv):
            if not isinstance(arg, str) or "\0" in arg:
                raise ExecutorError(f"job {spec.job_id}: argv[{i}] is not a string without NUL")
        if not spec.log_dir.is_absolute() or not spec.log_dir.is_dir():
            raise ExecutorError(
                f"job {spec.job_id}: log directory {str(spec.log_dir)!r} is not an existing absolute path"
            )

    def start(self, spec: LaunchSpec) -> Handle:
        """Launch ``spec`` under a supervisor.

        Idempotent across crashes: if this job's recorded run is still alive, or its log directory
        shows a run this executor never recorded (running or ended), that run's handle is
        returned and nothing is started.  A recorded run that has ended is a finished attempt:
        the job starts anew (re-placed after preemption), its logs appended to.
        """
        self._check_spec(spec)
        previous = self._index(spec.job_id)
        if previous is not None:
            handle = Handle(self.name, spec.job_id, str(previous["ref"]))
            with contextlib.suppress(JobLostError):
                if self.poll(handle).running:
                    return handle
        env = self._environment(spec)
        log_dir = spec.log_dir.resolve()
        adopted = self._adopt(spec.job_id, log_dir, previous)
        if adopted is not None:
            return adopted
        for stale in (RUN, EXIT):
            with contextlib.suppress(FileNotFoundError):
                (log_dir / stale).unlink()
        launch = {
            "argv": list(spec.argv),
            "env": env,
            "cwd": str(log_dir),
            "user": self._user.pw_name if self._user is not None else None,
            "cgroup_root": str(self._cgroup_root) if self._cgroup_root is not None else None,
            "lock_wait_s": self._start_timeout_s,
        }
        write_json_atomic(log_dir / LAUNCH, launch)
        (log_dir / LAUNCH).chmod(0o600)
        # -I -S: the supervisor is standard library only, so neither the environment nor
        # site-packages (their .pth hooks) touch it, and it starts faster.
        with open(log_dir / ".accel-wrap.log", "ab") as wrap_log:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WRAP), str(log_dir)],
                env={"PATH": _SAFE_PATH, "LANG": "C.UTF-8"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=wrap_log,
                start_new_session=True,
                close_fds=True,
            )
        try:
            rc = _wait_child(proc, self._start_timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, _signal.SIGKILL)
            proc.wait()
            raise ExecutorError(
                f"job {spec.job_id}: the supervisor did not start it within {self._start_timeout_s:g} s"
            ) from None
        run = _read_json(log_dir / RUN) if rc == 0 else None
        if run is None:
            # Our supervisor may have stood back for another one that ran this launch (two
            # launches raced after a crash of the service): that run is the job's.
            adopted = self._adopt(spec.job_id, log_dir, previous)
            if adopted is not None:
                return adopted
            ended = _read_json(log_dir / EXIT) or {}
            tail = (log_dir / ".accel-wrap.log").read_text(errors="replace")[-500:].strip()
            raise ExecutorError(f"job {spec.job_id}: {ended.get('error') or 'the supervisor failed: ' + tail}")
        return self._remember(spec.job_id, log_dir, run)

    def _adopt(self, job_id: str, log_dir: Path, recorded: Mapping[str, Any] | None) -> Handle | None:
        """A run of this job that its log directory shows but this executor has not recorded
        (the service died after the supervisor started, before the record was written): take it
        over, running or ended, rather than run the job a second time.  A supervisor that holds
        the directory's lock but has not written its run file yet is waited for."""
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            run = _read_json(log_dir / RUN)
            if run is not None:
                ref = f"{run.get('wrapper_pid')}:{run.get('wrapper_start')}"
                if recorded is not None and recorded.get("ref") == ref:
                    return None  # the run we know of: it has ended, so this is a new attempt
                return self._remember(job_id, log_dir, run)
            if not supervised(log_dir):
                return None
            if time.monotonic() > deadline:
                raise ExecutorError(f"job {job_id}: a supervisor holds {log_dir} but reports no run")
            time.sleep(0.01)

    def _remember(self, job_id: str, log_dir: Path, run: Mapping[str, Any]) -> Handle:
        ref = f"{run['wrapper_pid']}:{run['wrapper_start']}"
        record = {"ref": ref, "log_dir": str(log_dir), "pid": run["pid"], "pgid": run["pgid"], "start": run["start"]}
        write_json_atomic(self._state / f"{job_id}.json", record)
        return Handle(self.name, job_id, ref)

    # ------------------------------------------------------------------ find, poll, signal
    def _index(self, job_id: str) -> dict[str, Any] | None:
        if not _JOB_ID.match(job_id):
            return None
        return _read_json(self._state / f"{job_id}.json")

    def _record(self, handle: Handle) -> dict[str, Any]:
        rec = self._index(handle.job_id)
        if rec is None:
            raise JobLostError(f"job {handle.job_id}: this executor has no record of it ({self._state})")
        if rec.get("ref") != handle.ref:
            raise JobLostError(f"job {handle.job_id}: handle {handle.ref!r} is not its last run ({rec.get('ref')!r})")
        return rec

    def _supervisor_alive(self, handle: Handle) -> bool:
        m = _REF.match(handle.ref)
        return m is not None and _alive(int(m.group(1)), int(m.group(2)))

    def poll(self, handle: Handle) -> RunStatus:
        """Running while the supervisor or the job's leader lives; then the exit record."""
        rec = self._record(handle)
        exit_file = Path(rec["log_dir"]) / EXIT
        ended = _read_json(exit_file)
        if ended is not None:
            return self._ended(ended)
        if self._supervisor_alive(handle):
            return RunStatus(running=True)
        if _alive(rec.get("pid"), rec.get("start")):
            return RunStatus(running=True, detail="its supervisor is gone: the exit code will be unknown")
        ended = _read_json(exit_file)  # the supervisor may have written it and exited just now
        if ended is not None:
            return self._ended(ended)
        raise JobLostError(
            f"job {handle.job_id}: neither its supervisor ({handle.ref}) nor its process ({rec.get('pid')}) "
            "runs any more, and no exit was recorded"
        )

    def _ended(self, data: Mapping[str, Any]) -> RunStatus:
        """The exit record's status, with its ``ended_at`` (Unix time) on the service's clock."""
        status = classify_exit(data)
        wall = data.get("ended_at")
        if self._wall_to_clock is None or isinstance(wall, bool) or not isinstance(wall, int | float):
            return status
        return dataclasses.replace(status, ended_at=self._wall_to_clock(float(wall)))

    def reattach(self, handle: Handle) -> RunStatus:
        """Find the job again from its handle and this executor's state directory."""
        if handle.executor != self.name or not _REF.match(handle.ref):
            raise JobLostError(f"job {handle.job_id}: {handle.executor}:{handle.ref!r} is not a local handle")
        return self.poll(handle)

    def signal(self, handle: Handle, signum: int) -> None:
        """Send ``signum`` to the job's whole process group (a no-op once it has ended)."""
        status = self.poll(handle)
        if not status.running:
            return
        rec = self._record(handle)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(rec["pgid"]), signum)

    def log_path(self, handle: Handle, stream: Literal["stdout", "stderr"]) -> Path:
        """``stdout.log`` or ``stderr.log`` in the job's log directory (every attempt's output)."""
        if stream not in ("stdout", "stderr"):
            raise ExecutorError(f"job {handle.job_id}: no log stream {stream!r} (stdout or stderr)")
        rec = self._index(handle.job_id)  # the job's logs: every attempt appends to the same files
        if rec is None:
            raise JobLostError(f"job {handle.job_id}: this executor has no record of it ({self._state})")
        return Path(rec["log_dir"]) / f"{stream}.log"


def build(context: ExecutorContextLike) -> LocalExecutor:
    """The ``local`` executor from the service's context.  Options: ``inventory``
    (``discover``, ``sim:<profile>`` or an inventory ``.json``; default ``discover``),
    ``run_as`` (an account), ``allow_root`` (bool), ``path`` (the jobs' ``PATH``), ``state_dir``."""
    source = inventory_source(option_str(context, "local", "inventory"))
    return LocalExecutor(
        state_dir(context, "local"),
        inventory=source.inventory,
        telemetry=source.telemetry,
        run_as=option_str(context, "local", "run_as"),
        allow_root=option_bool(context, "local", "allow_root"),
        path=option_str(context, "local", "path") or _SAFE_PATH,
        wall_to_clock=wall_to_clock(context),
    )
