"""The supervisor of one ``local`` job: runs it, waits for it, writes how it ended.

Run as ``python -I -S .../_wrap.py LOG_DIR`` by :class:`accel.service.executors._local.LocalExecutor`
in a session of its own; it forks the supervisor and exits as soon as the job runs, so the
supervisor is never the service's child and outlives any restart of it: after a restart the job
is not the service's child either, and only a process that *is* its parent can read its exit
status.
Standard library only (it starts in a few tens of milliseconds and imports nothing of accel).

Files in ``LOG_DIR`` (names in :data:`LAUNCH`, :data:`RUN`, :data:`EXIT`):

- holds an exclusive ``flock`` on ``.accel-lock`` while it lives (a second supervisor for the
  same directory waits ``lock_wait_s`` for it, then exits; and one that finds the run file of
  its launch already written exits too: a job is never run twice);
- reads the launch file the executor wrote: ``argv``, ``env`` (the job's whole environment),
  ``cwd``, ``user`` (run as this account; ``null``: as the supervisor's own) and ``cgroup_root``;
- starts ``argv`` (never through a shell) in a new session, so that the job's processes form one
  process group the executor signals as a whole; stdout and stderr are appended to
  ``stdout.log`` / ``stderr.log`` (opened without following a symlink);
- writes the run file atomically: the supervisor's and the job's pid, the job's process group
  and the job's start time in clock ticks (``/proc/<pid>/stat`` field 22);
- forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 it receives itself to the job's group;
- when the job's leader ends, SIGKILLs whatever it left in its process group (a job's stray
  background processes must not hold its devices after it is recorded as ended), then writes
  the exit file atomically: ``exit_code`` or ``signal``, ``oom`` with the evidence (the
  memory cgroup's ``oom_kill`` counter before and after: cgroup v2 ``memory.events``, v1
  ``memory.oom_control``), ``ended_at``; or ``error`` when the job could not be started.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["EXIT", "LAUNCH", "LOCK", "RUN", "main", "read_start_ticks", "supervised", "write_json_atomic"]

LAUNCH = ".accel-launch.json"
RUN = ".accel-run.json"
EXIT = ".accel-exit.json"
#: Held (``flock``) by the supervisor for as long as it lives: one supervisor per log directory.
LOCK = ".accel-lock"

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def read_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or
    ``None`` when there is no such process or it is a zombie (it has ended)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: fields after it start after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    if len(rest) < 20 or rest[0] in ("Z", "X"):
        return None
    return int(rest[19])


def supervised(log_dir: Path) -> bool:
    """Whether a supervisor holds ``log_dir``'s lock now (it is alive, whatever its pid)."""
    fd = os.open(log_dir / LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the whole new one, never part,
    and the new one survives a power cut once this returns (file and directory fsynced)."""
    # A name no other writer uses (pid and a nanosecond clock), created exclusively, mode 0600;
    # not tempfile: the supervisor starts per job, and tempfile's imports cost it more than this.
    tmp = str(path.parent / f".tmp-{os.getpid()}-{time.monotonic_ns()}.json")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _memory_counter_file(pid: int, cgroup_root: Path) -> Path | None:
    """Where the kernel counts OOM kills for ``pid``'s memory cgroup (v2 or v1), if readable."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    v2: str | None = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = cgroup_root / "memory" / path.lstrip("/") / "memory.oom_control"
            if candidate.exists():
                return candidate
        if controllers == "":
            v2 = path
    if v2 is not None:
        for base in (cgroup_root, cgroup_root / "unified"):
            candidate = base / v2.lstrip("/") / "memory.events"
            if candidate.exists():
                return candidate
    return None


def _oom_kills(counter: Path | None) -> int | None:
    if counter is None:
        return None
    try:
        for line in counter.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _open_log(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)


def _user_args(name: str | None) -> dict[str, Any]:
    if name is None:
        return {}
    entry = pwd.getpwnam(name)
    groups = os.getgrouplist(name, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": groups}


def main(argv: list[str]) -> int:
    """Fork the supervisor and return once it has started the job (0) or failed to (1)."""
    if len(argv) != 1:
        print("usage: _wrap.py LOG_DIR", file=sys.stderr)
        return 2
    log_dir = Path(argv[0])
    # The supervisor is a grandchild of the service: its parent (this process) exits at once,
    # so the service never has a child to reap and the supervisor belongs to init from the
    # start (as it would after any restart of the service).  The pipe says when it is ready.
    ready_r, ready_w = os.pipe()
    if os.fork() > 0:
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as ready:
            return 0 if ready.read() == b"ok" else 1
    os.close(ready_r)
    try:
        _supervise(log_dir, ready_w)
    except Exception as exc:  # noqa: BLE001 - anything: the executor must learn why, not wait in vain
        with contextlib.suppress(OSError):
            write_json_atomic(log_dir / EXIT, {"error": f"the supervisor failed: {exc!r}", "ended_at": time.time()})
        os._exit(1)
    os._exit(0)


def _supervise(log_dir: Path, ready_w: int) -> None:
    # The lock lives as long as this process (the job does not inherit it: close_fds).
    launch = json.loads((log_dir / LAUNCH).read_text(encoding="utf-8"))
    lock = os.open(log_dir / LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    # The previous attempt's supervisor may still be exiting (it wrote its exit file, the
    # executor started the next attempt): wait for it a little.  One that still holds the lock
    # after that runs the job now, and this launch is refused.
    deadline = time.monotonic() + float(launch.get("lock_wait_s") or 10.0)
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                print(f"another supervisor runs the job of {log_dir}; not starting it twice", file=sys.stderr)
                os._exit(3)  # and leave that supervisor's files alone
            time.sleep(0.02)
    if (log_dir / RUN).exists():
        # The executor removes the run file before each launch: another supervisor already ran
        # this one (two launchers raced after a crash of the service).
        print(f"this launch of {log_dir} already ran; not starting it twice", file=sys.stderr)
        os._exit(3)
    cgroup_root = Path(launch.get("cgroup_root") or "/sys/fs/cgroup")
    counter = _memory_counter_file(os.getpid(), cgroup_root)
    before = _oom_kills(counter)
    out_fd = _open_log(log_dir / "stdout.log")
    err_fd = _open_log(log_dir / "stderr.log")
    try:
        user_kw = _user_args(launch.get("user"))
        proc = subprocess.Popen(
            list(launch["argv"]),
            env=dict(launch["env"]),
            cwd=launch.get("cwd"),
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=err_fd,
            start_new_session=True,
            close_fds=True,
            **user_kw,
        )
    except (OSError, KeyError, subprocess.SubprocessError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        write_json_atomic(
            log_dir / EXIT, {"error": f"{launch['argv'][0]!r} could not be started: {why}", "ended_at": time.time()}
        )
        os.close(ready_w)
        return
    finally:
        os.close(out_fd)
        os.close(err_fd)
    pgid = proc.pid  # the job leads a session, so its process group has its pid

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    write_json_atomic(
        log_dir / RUN,
        {
            "wrapper_pid": os.getpid(),
            "wrapper_start": read_start_ticks(os.getpid()),
            "pid": proc.pid,
            "pgid": pgid,
            "start": read_start_ticks(proc.pid),
            "started_at": time.time(),
        },
    )
    os.write(ready_w, b"ok")
    os.close(ready_w)
    status = proc.wait()
    # Stragglers of the job's group (its background children) end with it.
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)
    after = _oom_kills(counter)
    signum = -status if status < 0 else None
    oom = signum == signal.SIGKILL and before is not None and after is not None and after > before
    evidence = f"{counter}: oom_kill {before} -> {after}" if counter is not None else "no memory cgroup counter"
    write_json_atomic(
        log_dir / EXIT,
        {
            "exit_code": status if status >= 0 else None,
            "signal": signum,
            "oom": oom,
            "oom_evidence": evidence,
            "ended_at": time.time(),
        },
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
