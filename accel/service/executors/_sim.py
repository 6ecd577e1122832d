"""The ``sim`` executor: simulator profiles are the hosts, a job "runs" for its declared duration.

Each profile named by ``--sim`` (``dgx-h100,rtx4090-4``; a profile named twice is two hosts) is
opened through accel's discovery as the ``sim`` backend, so the hosts the scheduler places on
are exactly what ``accel ls --sim PROFILE`` shows.  A job holds its devices for its declared
duration (``LaunchSpec.duration_s``) on the service's clock, which runs ``--time-scale`` times
faster than the wall clock, from when the scheduler placed it (``LaunchSpec.placed_at``), and
says when it ended (``RunStatus.ended_at``), so a live run keeps the replay's times.  It ends
with exit code 0, or with the code its environment asks for in ``ACCEL_SIM_EXIT_CODE`` (so a
demo can show a failed job).  Device readings come from the simulator: a device that a job
holds is read from a copy of its host opened with the sim's
``load`` option at :data:`BUSY_LOAD`, an idle one from a copy at ``load`` 0.

The handle's ``ref`` is ``"<start>/<duration>/<exit code>"`` on the service's clock, so a
restarted service finds a job again from the handle alone (nothing outside the service holds
it, and relaunching a job whose launch a crash cut short cannot run it twice: ``relaunch_safe``).
"""

from __future__ import annotations

import math
import signal as _signal
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from accel.discovery import Session, open_session
from accel.errors import AccelError, ConfigError
from accel.model import HostInventory
from accel.plugin import BackendConfig

from .._executor import ExecutorError, ExitReason, Handle, JobLostError, LaunchSpec, PlacedDevice, RunStatus
from . import DeviceSample, ExecutorContext

__all__ = ["BUSY_LOAD", "EXIT_CODE_ENV", "SimExecutor", "build"]

#: The utilisation the simulator reports for a device a job holds.
BUSY_LOAD = 0.9
#: The environment name a sim job reads its exit code from (default 0).
EXIT_CODE_ENV = "ACCEL_SIM_EXIT_CODE"


def _open(profile: str, load: float) -> Session:
    config = BackendConfig(options={"profile": profile, "load": load})
    session = open_session({"sim": config}, backends=["sim"])
    if "sim" not in session.backends:
        entry = session.report.entry("sim")
        session.close()
        raise ConfigError(f"sim executor: profile {profile!r} cannot be opened: {entry.reason}")
    return session


class _SimHost:
    """One simulated host: its inventory, and an idle and a busy copy to read devices from."""

    def __init__(self, profile: str, hostname: str) -> None:
        self.profile = profile
        self.idle = _open(profile, 0.0)
        try:
            self.busy = _open(profile, BUSY_LOAD)
        except BaseException:
            self.idle.close()
            raise
        inv = self.idle.inventory()
        self.inventory: HostInventory = inv.model_copy(
            update={"host": inv.host.model_copy(update={"hostname": hostname})})
        self.device_ids = [d.id for d in inv.devices]
        #: A partition's device (the simulator reads devices, not partitions).
        self.parent_of = {p.id: p.parent_id for p in inv.partitions if p.parent_id in self.device_ids}

    def close(self) -> None:
        self.idle.close()
        self.busy.close()


def _parse_ref(handle: Handle) -> tuple[float, float, int]:
    try:
        start, duration, code = handle.ref.split("/")
        out = float(start), float(duration), int(code)
    except ValueError:
        raise JobLostError(f"job {handle.job_id}: sim handle {handle.ref!r} is not <start>/<duration>/<exit>") from None
    if not (math.isfinite(out[0]) and math.isfinite(out[1]) and out[1] >= 0):
        raise JobLostError(f"job {handle.job_id}: sim handle {handle.ref!r} has a bad time")
    return out


class SimExecutor:
    """Simulated hosts on the service's clock (see the module docstring)."""

    name = "sim"
    relaunch_safe = True

    def __init__(self, profiles: Sequence[str], context: ExecutorContext) -> None:
        if not profiles:
            raise ConfigError("sim executor: name at least one simulator profile (--sim dgx-h100,rtx4090-4)")
        self._clock = context.clock
        self._log_root = context.log_root
        self._hosts: dict[str, _SimHost] = {}
        seen: dict[str, int] = {}
        try:
            for profile in profiles:
                n = seen[profile] = seen.get(profile, 0) + 1
                hostname = f"sim-{profile}" if n == 1 else f"sim-{profile}-{n}"
                self._hosts[hostname] = _SimHost(profile, hostname)
        except BaseException:
            self.close()
            raise
        # signals delivered to jobs still running: job id -> (its start, the signal, when); it ends then
        self._stopped: dict[str, tuple[float, int, float]] = {}
        self._end_logged: set[str] = set()  # handles whose end is in their log already

    def close(self) -> None:
        for host in self._hosts.values():
            host.close()

    # -- the Executor protocol ----------------------------------------------------------------------
    def hosts(self) -> Sequence[HostInventory]:
        return [h.inventory for h in self._hosts.values()]

    def start(self, spec: LaunchSpec) -> Handle:
        for dev in spec.devices:
            if dev.host not in self._hosts:
                raise ExecutorError(f"job {spec.job_id}: host {dev.host!r} is not a sim host")
        env = dict(spec.env)
        try:
            code = int(env.get(EXIT_CODE_ENV, "0"))
        except ValueError:
            raise ExecutorError(f"job {spec.job_id}: {EXIT_CODE_ENV} must be an integer, "
                                f"not {env[EXIT_CODE_ENV]!r}") from None
        duration = spec.duration_s if spec.duration_s is not None else 0.0
        now = self._clock()
        # from its placement (its devices were its own from then): a live run keeps the replay's times
        start = min(now, spec.placed_at) if spec.placed_at is not None and math.isfinite(spec.placed_at) else now
        self._stopped.pop(spec.job_id, None)
        spec.log_dir.mkdir(parents=True, exist_ok=True)
        hosts = ", ".join(sorted({d.host for d in spec.devices}))
        with open(spec.log_dir / "stdout.log", "a", encoding="utf-8") as out:
            out.write(f"[sim] t={start:.1f} s: {' '.join(spec.argv)!s} on {hosts} for {duration:.0f} s\n")
        (spec.log_dir / "stderr.log").touch()
        return Handle(self.name, spec.job_id, f"{start!r}/{duration!r}/{code}")

    def poll(self, handle: Handle) -> RunStatus:
        start, duration, code = _parse_ref(handle)
        stopped = self._stopped.get(handle.job_id)
        if stopped is not None and stopped[0] >= start:
            return RunStatus(False, None, stopped[1], ExitReason.SIGNALED, f"signal {stopped[1]}", stopped[2])
        now = self._clock()
        end = start + duration
        if now < end:
            return RunStatus(True)
        self._log_end(handle, end, code)
        if code == 0:
            return RunStatus(False, 0, None, ExitReason.COMPLETED, "exit code 0", end)
        return RunStatus(False, code, None, ExitReason.FAILED, f"exit code {code}", end)

    def signal(self, handle: Handle, signum: int) -> None:
        start, duration, _code = _parse_ref(handle)
        now = self._clock()
        if now >= start + duration:
            return  # it has ended: nothing to signal
        if signum in (_signal.SIGTERM, _signal.SIGKILL, _signal.SIGINT):
            self._stopped[handle.job_id] = (start, signum, max(now, start))
            with open(self.log_path(handle, "stdout"), "a", encoding="utf-8") as out:
                out.write(f"[sim] t={self._clock():.1f} s: stopped by signal {signum}\n")
        else:
            # a checkpoint signal: the simulated job writes its checkpoint and keeps running
            with open(self.log_path(handle, "stdout"), "a", encoding="utf-8") as out:
                out.write(f"[sim] t={self._clock():.1f} s: signal {signum}: checkpoint written\n")

    def reattach(self, handle: Handle) -> RunStatus:
        return self.poll(handle)

    def log_path(self, handle: Handle, stream: Literal["stdout", "stderr"]) -> Path:
        return self._log_root / handle.job_id / f"{stream}.log"

    # -- DeviceSampler ---------------------------------------------------------------------------------
    def sample(self, devices: Sequence[PlacedDevice]) -> list[DeviceSample]:
        out: list[DeviceSample] = []
        by_host: dict[str, list[PlacedDevice]] = {}
        for dev in devices:
            by_host.setdefault(dev.host, []).append(dev)
        for hostname, devs in by_host.items():
            host = self._hosts.get(hostname)
            if host is None:
                continue
            # a placed partition reads as its device (the simulator has no per-partition readings)
            read_as: dict[str, list[str]] = {}
            for d in devs:
                real = host.parent_of.get(d.device_id) or (
                    host.device_ids[d.index] if 0 <= d.index < len(host.device_ids) else None)
                if real is not None:
                    read_as.setdefault(real, []).append(d.device_id)
            try:
                readings = host.busy.telemetry(list(read_as))
            except AccelError:
                continue  # an unreadable host is left out of this sample, never fatal
            for tel in readings:
                for placed in read_as.get(tel.device_id, [tel.device_id]):
                    out.append(DeviceSample(placed, tel.memory_used_bytes, tel.utilization_ratio, tel.power_watts))
        return out

    def _log_end(self, handle: Handle, t: float, code: int) -> None:
        if handle.ref in self._end_logged:
            return
        self._end_logged.add(handle.ref)
        path = self.log_path(handle, "stdout")
        if path.parent.is_dir():
            with open(path, "a", encoding="utf-8") as out:
                out.write(f"[sim] t={t:.1f} s: exited with code {code}\n")


def build(context: ExecutorContext) -> SimExecutor:
    """The registry's factory: ``options["profiles"]`` is the list of profile names."""
    raw = context.options.get("profiles", ())
    if isinstance(raw, str):
        profiles = [p.strip() for p in raw.split(",") if p.strip()]
    elif isinstance(raw, list | tuple):
        profiles = [str(p) for p in raw]
    else:
        raise ConfigError(f"sim executor: profiles must be names, not {raw!r}")
    return SimExecutor(profiles, context)
