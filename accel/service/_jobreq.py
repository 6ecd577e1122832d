"""What a user may submit, checked field by field before anything reaches the engine.

The body of ``POST /v1/jobs`` and ``POST /v1/quotes`` becomes a :class:`JobRequest`; every
refusal is a :class:`RequestError` naming the field.  The command is an argv list (never given
to a shell); environment names must match the service's allowlist (a visibility variable such
as ``CUDA_VISIBLE_DEVICES`` is the service's to set, never the user's); no string may carry a
NUL byte, and every string and list is bounded.
"""

from __future__ import annotations

import math
import re
import signal as _signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["DEFAULT_ENV_ALLOW", "EnvAllowlist", "JobRequest", "RequestError", "parse_request"]

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SELECTOR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()+/-]{0,127}$")
MAX_ARGS, MAX_ARG_CHARS, MAX_ENV, MAX_ENV_CHARS = 256, 4096, 64, 4096
TOPOLOGY_LEVELS = ("link_domain", "pcie_switch", "numa", "host", "rack", "switch_group")

#: Names a job may set unless the service is told otherwise (``--env-allow``); ``*`` ends a prefix.
DEFAULT_ENV_ALLOW = ("ACCEL_JOB_*", "ACCEL_SIM_EXIT_CODE", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "OMP_NUM_THREADS",
                     "NCCL_DEBUG", "TORCH_DISTRIBUTED_DEBUG", "HF_HUB_OFFLINE", "WANDB_MODE", "TZ", "LANG", "LC_ALL")
#: Never a job's to set, whatever the allowlist says: the loader, the search path, the devices.
_ENV_NEVER = re.compile(r"^(LD_.*|PATH|HOME|USER|SHELL|IFS|PYTHONPATH|PYTHONSTARTUP|BASH_ENV|ENV|"
                        r"CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|"
                        r".*_VISIBLE_DEVICES|ASCEND_RT_VISIBLE_DEVICES)$")


class RequestError(ValueError):
    """A field of a job request is missing or wrong (``field`` names it)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class EnvAllowlist:
    """Exact names and ``PREFIX*`` patterns a job may set."""

    patterns: tuple[str, ...] = DEFAULT_ENV_ALLOW

    def allows(self, name: str) -> bool:
        if _ENV_NEVER.match(name):
            return False
        return any((p.endswith("*") and name.startswith(p[:-1])) or p == name for p in self.patterns)


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A checked job request (the JSON form is :meth:`as_dict`, stored with the job)."""

    name: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    devices: int = 1
    model: str = ""
    vendor: str = ""
    share: dict[str, int] | None = None
    topology: dict[str, Any] | None = None
    same_host: bool = False
    priority_class: str = ""
    duration_s: float | None = None
    time_limit_s: float | None = None
    checkpoint_signal: int | None = None
    checkpoint_interval_s: float | None = None
    pool: str = ""
    tenant: str = ""
    labels: tuple[tuple[str, str], ...] = field(default=())
    #: A hardware partition profile (``1g.10gb``): ``devices`` partitions of it, not whole devices.
    partition: str = ""

    def as_dict(self) -> dict[str, Any]:
        # shallow, field by field (``dataclasses.asdict`` deep-copies recursively: several times slower)
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["share"] = dict(self.share) if self.share is not None else None
        out["topology"] = dict(self.topology) if self.topology is not None else None
        out["command"] = list(self.command)
        out["env"] = dict(self.env)
        out["labels"] = dict(self.labels)
        return out


_FIELDS = {"name", "command", "env", "devices", "model", "vendor", "partition", "share", "topology", "same_host",
           "priority_class", "duration_s", "time_limit_s", "checkpoint", "pool", "tenant", "labels"}


def _text(v: Any, field: str, limit: int = MAX_ARG_CHARS) -> str:
    if not isinstance(v, str):
        raise RequestError(f"{field} must be a string", field)
    if "\x00" in v:
        raise RequestError(f"{field} contains a NUL byte", field)
    if len(v) > limit:
        raise RequestError(f"{field} is longer than {limit} characters", field)
    return v


def _number(v: Any, field: str, *, positive: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise RequestError(f"{field} must be a finite number", field)
    if positive and not v > 0:
        raise RequestError(f"{field} must be > 0", field)
    return float(v)


def _int(v: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise RequestError(f"{field} must be an integer from {lo} to {hi}", field)
    return v


def _signal_number(v: Any) -> int:
    if isinstance(v, str):
        name = v.upper() if v.upper().startswith("SIG") else "SIG" + v.upper()
        sig = getattr(_signal.Signals, name, None) if name.isidentifier() else None
        if sig is None:
            raise RequestError(f"checkpoint.signal {v!r} is not a signal name", "checkpoint.signal")
        n = int(sig)
    else:
        n = _int(v, "checkpoint.signal", 1, 64)
    if n in (_signal.SIGKILL, _signal.SIGSTOP):
        raise RequestError("checkpoint.signal cannot be SIGKILL or SIGSTOP", "checkpoint.signal")
    return n


def parse_request(body: Any, allow: EnvAllowlist, *, need_command: bool = True) -> JobRequest:
    """Check a decoded JSON body; :class:`RequestError` at the first wrong field."""
    if not isinstance(body, Mapping):
        raise RequestError("the body must be a JSON object", "body")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise RequestError(f"unknown field(s): {', '.join(unknown)}", unknown[0])
    name = _text(body.get("name", "job"), "name", 64)
    if not NAME_RE.match(name):
        raise RequestError("name: 1 to 64 of A-Z, a-z, 0-9, '.', '_', '-', starting with a letter or digit", "name")
    raw_cmd = body.get("command", [])
    if not isinstance(raw_cmd, list) or any(not isinstance(a, str) for a in raw_cmd):
        raise RequestError("command must be a list of strings (an argv; it is never given to a shell)", "command")
    if len(raw_cmd) > MAX_ARGS:
        raise RequestError(f"command has more than {MAX_ARGS} arguments", "command")
    command = tuple(_text(a, f"command[{i}]") for i, a in enumerate(raw_cmd))
    if need_command and (not command or not command[0]):
        raise RequestError("command must name a program (a non-empty first argument)", "command")
    raw_env = body.get("env", {})
    if not isinstance(raw_env, Mapping) or len(raw_env) > MAX_ENV:
        raise RequestError(f"env must be an object of at most {MAX_ENV} names", "env")
    env: list[tuple[str, str]] = []
    for k, v in sorted(raw_env.items()):
        if not ENV_NAME_RE.match(k):
            raise RequestError(f"env name {k[:40]!r} is not a variable name", "env")
        if not allow.allows(k):
            raise RequestError(f"env name {k} is not on this service's allowlist", "env")
        env.append((k, _text(v, f"env.{k}", MAX_ENV_CHARS)))
    devices = _int(body.get("devices", 1), "devices", 1, 4096)
    sel: dict[str, str] = {}
    for key in ("model", "vendor", "pool"):
        v = body.get(key) or ""
        if v:
            v = _text(v, key, 128)
            if not SELECTOR_RE.match(v):
                raise RequestError(f"{key} {v[:40]!r} has characters a device model never has", key)
        sel[key] = v
    partition = body.get("partition") or ""
    if partition:
        partition = _text(partition, "partition", 64)
        if not NAME_RE.match(partition):
            raise RequestError(f"partition {partition[:40]!r} is not a partition profile name (1g.10gb)", "partition")
    share = body.get("share")
    if share is not None and partition:
        raise RequestError("a job asks for partitions or a share of a device, not both", "share")
    if share is not None:
        if not isinstance(share, Mapping) or set(share) - {"compute_milli", "memory_bytes"}:
            raise RequestError("share must be {compute_milli, memory_bytes}", "share")
        share = {"compute_milli": _int(share.get("compute_milli", 0), "share.compute_milli", 1, 1000),
                 "memory_bytes": _int(share.get("memory_bytes", 0), "share.memory_bytes", 0, 2**50)}
        if devices != 1:
            raise RequestError("a share asks for devices=1", "devices")
    topo = body.get("topology")
    if topo is not None:
        if not isinstance(topo, Mapping) or set(topo) - {"level", "required"} or topo.get("level") not in \
                TOPOLOGY_LEVELS:
            raise RequestError(f"topology must be {{level: one of {', '.join(TOPOLOGY_LEVELS)}, required: bool}}",
                               "topology")
        required = topo.get("required", False)
        if not isinstance(required, bool):
            raise RequestError("topology.required must be true or false", "topology.required")
        topo = {"level": topo["level"], "required": required}
    same_host = body.get("same_host", False)
    if not isinstance(same_host, bool):
        raise RequestError("same_host must be true or false", "same_host")
    pclass = _text(body.get("priority_class", "") or "", "priority_class", 64)
    if pclass and not NAME_RE.match(pclass):
        raise RequestError("priority_class is not a class name", "priority_class")
    duration = body.get("duration_s")
    duration = None if duration is None else _number(duration, "duration_s")
    limit = body.get("time_limit_s")
    limit = None if limit is None else _number(limit, "time_limit_s")
    ck_sig = ck_int = None
    ck = body.get("checkpoint")
    if ck is not None:
        if not isinstance(ck, Mapping) or set(ck) - {"signal", "interval_s"}:
            raise RequestError("checkpoint must be {signal, interval_s}", "checkpoint")
        if "signal" in ck:
            ck_sig = _signal_number(ck["signal"])
        if "interval_s" in ck:
            ck_int = _number(ck["interval_s"], "checkpoint.interval_s")
    tenant = _text(body.get("tenant", "") or "", "tenant", 63)
    raw_labels = body.get("labels", {})
    if not isinstance(raw_labels, Mapping) or len(raw_labels) > 32:
        raise RequestError("labels must be an object of at most 32 names", "labels")
    labels = tuple(sorted((_text(k, "labels", 63), _text(v, f"labels.{k}", 256)) for k, v in raw_labels.items()))
    for k, _v in labels:
        if not NAME_RE.match(k):
            raise RequestError(f"label name {k[:40]!r} is not a name", "labels")
    return JobRequest(name, command, tuple(env), devices, sel["model"], sel["vendor"], share, topo, same_host,
                      pclass, duration, limit, ck_sig, ck_int, sel["pool"], tenant, labels, partition)


def request_from_dict(data: Mapping[str, Any]) -> JobRequest:
    """Read :meth:`JobRequest.as_dict`'s form back (what the store keeps)."""
    d = dict(data)
    d["command"] = tuple(d["command"])
    d["env"] = tuple(sorted(d["env"].items()))
    d["labels"] = tuple(sorted(d.get("labels", {}).items()))
    return JobRequest(**d)


def env_names(req: JobRequest) -> Iterable[str]:
    return (k for k, _v in req.env)
