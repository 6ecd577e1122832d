"""Serving groups: a named set of replica jobs that ``accel serve`` keeps at a wanted count.

A serving group (``POST /v1/serving``) is a tenant's name, a replica count and the job request
every replica is submitted with.  Each replica is an ordinary job of the service: quoted,
queued, placed by the scheduler, billed, shown on its page, cancelled like any other.  The
:class:`ServingManager` keeps the group at its count (each pass, every ``interval_s``):

- fewer live replica jobs than wanted: it submits more (a replica that ended, failed or was
  cancelled on its own is replaced); more than wanted (a scale down): it cancels the extra,
  queued ones first, then the newest running ones;
- a replica job that runs gets its engine.  Under ``--sim``: accel's fake vLLM engine as a process
  on a loopback port (:mod:`._replicas`), publishing vLLM's KV events on a second one; its address
  is the replica's once the engine serves.  Under real executors (``local``, ``slurm``): the replica
  job *is* the engine, the group's own command (``vllm serve MODEL --port {port}``), given the
  port the service chose for it (:mod:`._replica_cmd`: ``{port}`` / ``ACCEL_REPLICA_PORT``, and
  ``{kv_port}`` / ``ACCEL_REPLICA_KV_PORT`` when the group declares KV events); its address,
  ``http://<node address>:<port>``, is the replica's once ``GET /health`` answers 200;
- a replica job that stops running (cancelled, preempted, ended) has its engine stopped (SIGTERM,
  then SIGKILL after the grace period), by pid (under real executors the executor stops the job,
  as any job's).

``accel router --from-serve`` reads ``GET /v1/serving/{name}`` for the addresses (and KV-event
endpoints) of the ready replicas; ``POST /v1/serving/{name}/scale`` (the router's autoscaler, or a
person) sets the count.
A group is a tenant's: another tenant's group reads as not found (404).  Replicas that keep
failing before their engine is ready stop the group (``failed``) after :data:`MAX_FAILURES`.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from accel.errors import AccelError
from accel.scheduler import SchedulerStateError

from ._auth import Principal
from ._base import NotFoundError
from ._jobreq import NAME_RE, EnvAllowlist, JobRequest, RequestError, parse_request
from ._replica_cmd import (
    CHECK_TIMEOUT_S,
    KV_PORT_ENV,
    PORT_ENV,
    RECHECK_S,
    UNHEALTHY_AFTER,
    fill,
    healthy,
    parse_command_engine,
    pick_ports,
    replica_url,
)
from ._replicas import EngineProcs, engine_argv
from ._serving_store import GroupRow, ServingStore

__all__ = [
    "MAX_FAILURES",
    "MAX_GROUPS",
    "MAX_REPLICAS",
    "ServingManager",
    "parse_engine",
    "parse_replicas",
    "parse_serving",
]

#: The most replicas one group may ask for.
MAX_REPLICAS = 64
#: Active groups a tenant may hold at a time.
MAX_GROUPS = 32
#: Replica jobs of one group ending before their engine served, in a row, that stop the group.
MAX_FAILURES = 5
#: Restarts of one replica's engine that died under a running job, before the job is cancelled.
MAX_ENGINE_RESTARTS = 3
_NAME_CHARS = 48  # the replica jobs are named NAME-rK (a job name has at most 64 characters)
_LIVE = ("queued", "running", "preempting", "suspended")
_ENGINE_DEFAULTS: dict[str, Any] = {"model": "llama-2-70b", "cost_model": "llama-2-70b", "cost_device": "h100-80gb",
                                    "time_scale": 1.0, "max_num_seqs": 256, "kv_events": True}


def parse_replicas(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPLICAS:
        raise RequestError(f"replicas must be an integer from 0 to {MAX_REPLICAS}", "replicas")
    return value


def parse_engine(value: Any) -> dict[str, Any]:
    """The engine's options (the fake engine's: model served, cost profile, speed-up, batch, whether
    it publishes KV events)."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping) or set(value) - set(_ENGINE_DEFAULTS):
        raise RequestError(f"engine must be an object of {', '.join(sorted(_ENGINE_DEFAULTS))}", "engine")
    out = dict(_ENGINE_DEFAULTS)
    for key in ("model", "cost_model", "cost_device"):
        if key in value:
            v = value[key]
            if not isinstance(v, str) or not NAME_RE.match(v):
                raise RequestError(f"engine.{key} must be a name (A-Z, a-z, 0-9, '.', '_', '-')", f"engine.{key}")
            out[key] = v
    if "time_scale" in value:
        v = value["time_scale"]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 10_000:
            raise RequestError("engine.time_scale must be a number above 0, at most 10000", "engine.time_scale")
        out["time_scale"] = float(v)
    if "max_num_seqs" in value:
        v = value["max_num_seqs"]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 4096:
            raise RequestError("engine.max_num_seqs must be an integer from 1 to 4096", "engine.max_num_seqs")
        out["max_num_seqs"] = v
    if "kv_events" in value:
        if not isinstance(value["kv_events"], bool):
            raise RequestError("engine.kv_events must be true or false", "engine.kv_events")
        out["kv_events"] = value["kv_events"]
    from accel.scheduler.serving import load_catalog

    try:
        load_catalog().profile(out["cost_model"], out["cost_device"])
    except (AccelError, ValueError, LookupError) as exc:
        raise RequestError(f"engine: {exc}",
                           "engine.cost_model") from None
    return out


def parse_serving(body: Any, allow: EnvAllowlist, *, own_command: bool = False,
                  ) -> tuple[str, int, JobRequest, dict[str, Any]]:
    """``{"name", "replicas", "engine": {...}, <job fields>}`` -> (name, replicas, each replica's job
    request, engine options); :class:`RequestError` at the first wrong field.

    ``own_command`` (real executors): the group gives its engine's ``command`` (with ``{port}``;
    see :mod:`._replica_cmd`), checked as any job's command is (with a port in place of the token);
    else (``--sim``) the command is the fake engine's and the group may give none."""
    if not isinstance(body, Mapping):
        raise RequestError("the body must be a JSON object", "body")
    rest = dict(body)
    if "command" in rest and not own_command:
        raise RequestError("a serving group's command is its engine's (set engine, not command)", "command")
    if "command" not in rest and own_command:
        raise RequestError("a serving group on this service runs its engine command: give command (an argv with "
                           "{port}, or reading ACCEL_REPLICA_PORT), e.g. [\"vllm\", \"serve\", \"MODEL\", "
                           "\"--port\", \"{port}\"]", "command")
    if "checkpoint" in rest:
        raise RequestError("a serving replica does not checkpoint (it is replaced when it stops)", "checkpoint")
    name = rest.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > _NAME_CHARS:
        raise RequestError(f"name: 1 to {_NAME_CHARS} of A-Z, a-z, 0-9, '.', '_', '-', starting with a letter or "
                           "digit", "name")
    replicas = parse_replicas(rest.pop("replicas", 1))
    labels = rest.get("labels") or {}
    if isinstance(labels, Mapping) and {"serving", "replica"} & set(labels):
        raise RequestError("labels serving and replica are the service's", "labels")
    if isinstance(labels, Mapping) and len(labels) > 30:
        raise RequestError("labels: at most 30 names on a serving group", "labels")
    env = rest.get("env")
    if isinstance(env, Mapping) and {PORT_ENV, KV_PORT_ENV} & set(env):
        raise RequestError(f"env: {PORT_ENV} and {KV_PORT_ENV} are the service's (it chooses the ports)", "env")
    if not own_command:
        engine = parse_engine(rest.pop("engine", None))
        req = parse_request({**rest, "command": engine_argv(engine)}, allow)
        return name, replicas, req, engine
    command = rest["command"]
    engine = parse_command_engine(rest.pop("engine", None), command if isinstance(command, list) else [])
    # checked as any job's command, with ports in place of the tokens (the stored request keeps the tokens)
    parse_request({**rest, "command": fill(command, 1, 1) if isinstance(command, list) and all(
        isinstance(a, str) for a in command) else command}, allow)
    req = parse_request(rest, allow)
    return name, replicas, req, engine


class ServingManager:
    """Keeps serving groups at their count and their replicas' engines running (see the module doc).

    ``service``: the :class:`~._core.Service`; ``spawn``: whether replicas get fake engine
    processes (the service runs the ``sim`` executor); without, each group gives its engine command
    and the replica jobs run it (:mod:`._replica_cmd`).
    """

    def __init__(self, service: Any, *, spawn: bool = True, interval_s: float = 0.2,
                 stop_grace_s: float = 5.0) -> None:
        self.service = service
        self.spawn = spawn
        self.interval_s = interval_s
        self.store = ServingStore(service.state / "serving.sqlite")
        self.engines = EngineProcs(self.store, stop_grace_s=stop_grace_s)
        self.lock = threading.RLock()
        #: job id -> what its record shows of it as a replica (read without the lock: one dict store)
        self._info: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._probe_lock = threading.Lock()
        self._groups_cache: list[GroupRow] = []  # one round of health checks at a time
        with self.lock:
            self.engines.stop_leftovers()

    # -- the loop -------------------------------------------------------------------------------------
    def start(self) -> ServingManager:
        def loop() -> None:
            while not self._stop.is_set():
                self.step()
                if not self.spawn:
                    self.probe()  # outside the lock: a slow replica holds up no API call
                self._wake.wait(self.interval_s)
                self._wake.clear()

        self._thread = threading.Thread(target=loop, name="accel-serve-serving", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the loop and every engine (waited for: no process outlives the service)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self.lock:
            self.engines.stop_all()
            self.store.close()

    def wake(self) -> None:
        self._wake.set()

    def replica_info(self, job_id: str) -> dict[str, Any] | None:
        """What a replica job's record shows: its group, index, engine address (``None``: not a replica)."""
        info = self._info.get(job_id)
        if info is None or "group" not in info:
            return None
        ready = bool(info.get("ready"))
        return {"group": info["group"], "index": info.get("index"), "address": info.get("address"),
                "ready": ready, "kv_events": info.get("kv_events") if ready else None,
                "port": info.get("port"), "engine_pid": info.get("engine_pid"),
                "engine_restarts": info.get("engine_restarts", 0)}

    def step(self) -> None:
        """One pass (see the module docstring)."""
        with self.lock:
            died = self.engines.step()
            self._groups_cache = self.store.groups(active_only=True)
            for g in self._groups_cache:
                self._keep(g, died)
            # engines of jobs that are no replica of an active group any more (group cancelled)
            for job_id in self.engines.jobs():
                if not self._running(job_id):
                    self.engines.stop(job_id)
                    self._set_info(job_id, address=None, ready=False, engine_pid=None)

    def _state(self, job_id: str) -> str:
        view = self.service.views.get(job_id)
        return view.state if view is not None else "queued"

    def _running(self, job_id: str) -> bool:
        """Whether the job's current attempt runs on an executor (launched, not being stopped)."""
        view = self.service.views.get(job_id)
        run = self.service.runs.get(job_id)
        return (view is not None and view.state == "running" and run is not None and run.handle is not None
                and run.launch.attempt == view.attempts and run.stop_reason is None)

    def _keep(self, g: GroupRow, died: list[str]) -> None:
        live: list[tuple[str, int]] = []
        for job_id, idx in self.store.replicas(g.id):
            state = self._state(job_id)
            if state in _LIVE:
                live.append((job_id, idx))
                continue
            info = self._info.get(job_id)
            if info is not None and info.get("state") not in ("finished", "failed", "cancelled"):
                self._set_info(job_id, state=state, address=None, ready=False, engine_pid=None)
                if state != "finished" and not info.get("served") and state != "cancelled":
                    g = self._failed_once(g, job_id, state)
        if g.state != "active":
            return
        if g.engine.get("mode") == "command":
            for job_id, idx in live:
                self._keep_command(g, job_id, idx)
        else:
            self._keep_sim(g, live, died)
        self._count(g, live)

    def _keep_sim(self, g: GroupRow, live: list[tuple[str, int]], died: list[str]) -> None:
        # engines: running replicas get one, the others lose theirs
        for job_id, idx in live:
            row = self.engines.get(job_id)
            if self._running(job_id):
                view = self.service.views.get(job_id)
                if row is None or row.attempt != view.attempts:
                    restarts = 0
                    if job_id in died:
                        restarts = self._info.get(job_id, {}).get("engine_restarts", 0) + 1
                        if restarts > MAX_ENGINE_RESTARTS:
                            self._cancel_job(g, job_id, f"its engine died {restarts} times")
                            continue
                    if row is not None:
                        self.engines.stop(job_id)
                    row = self.engines.spawn(job_id, view.attempts, g.engine, self.service.log_root / job_id,
                                             restarts=restarts)
                    self._set_info(job_id, group=g.name, group_id=g.id, index=idx, state="running", address=None,
                                   ready=False, engine_pid=row.pid, engine_restarts=restarts)
                elif row.url is not None and not self._info.get(job_id, {}).get("ready"):
                    self._set_info(job_id, address=row.url, ready=True, served=True, kv_events=row.kv_events)
                else:
                    self._set_info(job_id, state="running")
            else:
                if row is not None:
                    self.engines.stop(job_id)
                self._set_info(job_id, group=g.name, group_id=g.id, index=idx, state=self._state(job_id),
                               address=None, ready=False, engine_pid=None)

    def _keep_command(self, g: GroupRow, job_id: str, idx: int) -> None:
        """A replica running the group's engine command: where it listens once it runs, cancelled (a
        failure) when not healthy in time; the health checks themselves are :meth:`probe`'s."""
        info = self._info.get(job_id, {})
        base = {"group": g.name, "group_id": g.id, "index": idx}
        if not self._running(job_id):
            if info.get("url") is not None or info.get("state") != self._state(job_id):
                self._set_info(job_id, **base, state=self._state(job_id), address=None, ready=False, url=None,
                               attempt=None, pending_attempt=None)
            return
        view = self.service.views.get(job_id)
        timeout_s = float(g.engine.get("ready_timeout_s", 600.0))
        if info.get("attempt") != view.attempts:
            if info.get("pending_attempt") != view.attempts:  # first seen running: its clock starts
                self._set_info(job_id, **base, state="running", pending_attempt=view.attempts, address=None,
                               ready=False, url=None, attempt_served=False, running_since=time.monotonic(),
                               engine_pid=None)
                info = self._info[job_id]
            port, kv_port = self.store.ports(job_id)
            run = self.service.runs[job_id]
            devices = run.launch.devices
            host = str(devices[0]["host"]) if devices else ""
            finder = getattr(run.executor, "node_address", None)
            if not callable(finder) or port is None:
                # an executor whose jobs cannot serve (the sim executor beside real ones), or a replica with no port
                g = self._failed_once(g, job_id, "not reachable")
                if g.state == "active":
                    self._cancel_job(g, job_id, f"executor {run.executor.name} does not say where its jobs listen")
                return
            addr = finder(host)
            if addr is not None:
                self._set_info(job_id, attempt=view.attempts, node=str(addr), port=port,
                               url=replica_url(str(addr), port), kv_events=None if kv_port is None else
                               replica_url(str(addr), kv_port, "tcp"), failed_checks=0, checked_at=0.0)
                return
            # the node's address is not known yet: asked again next pass (the timeout below still runs)
        if not info.get("attempt_served") and time.monotonic() - info.get("running_since", 0.0) > timeout_s:
            g = self._failed_once(g, job_id, "not healthy in time")
            if g.state == "active":
                self._cancel_job(g, job_id, f"not healthy {timeout_s:g} s after it started")
            return
        if info.get("state") != "running":
            self._set_info(job_id, state="running")

    def probe(self) -> None:
        """One round of health checks of the replicas that run their engine command (see
        :mod:`._replica_cmd`): a replica becomes ready at its first 200, stops being ready after
        :data:`~._replica_cmd.UNHEALTHY_AFTER` failures in a row."""
        if not self._probe_lock.acquire(blocking=False):
            return
        try:
            now = time.monotonic()
            todo = [(j, dict(i)) for j, i in list(self._info.items())
                    if i.get("url") and i.get("state") == "running"
                    and (not i.get("ready") or now - i.get("checked_at", 0.0) >= RECHECK_S)]
            checks = [(str(i["node"]), int(i["port"]), str(self._health_path(i))) for _j, i in todo]
            if len(checks) > 1:
                # at once: a node that drops packets costs one timeout a round, not one per replica
                with ThreadPoolExecutor(min(16, len(checks)), thread_name_prefix="accel-serve-health") as pool:
                    oks = list(pool.map(lambda c: healthy(c[0], c[1], c[2], CHECK_TIMEOUT_S), checks))
            else:
                oks = [healthy(c[0], c[1], c[2], CHECK_TIMEOUT_S) for c in checks]
            results = [(job_id, info, ok) for (job_id, info), ok in zip(todo, oks, strict=True)]
            with self.lock:
                for job_id, info, ok in results:
                    cur = self._info.get(job_id, {})
                    if cur.get("url") != info["url"] or cur.get("attempt") != info.get("attempt"):
                        continue  # changed meanwhile
                    if ok:
                        self._set_info(job_id, ready=True, served=True, attempt_served=True, address=info["url"],
                                       failed_checks=0, checked_at=time.monotonic())
                    else:
                        fails = int(cur.get("failed_checks", 0)) + 1
                        still = bool(cur.get("ready")) and fails < UNHEALTHY_AFTER
                        self._set_info(job_id, failed_checks=fails, checked_at=time.monotonic(), ready=still,
                                       address=info["url"] if still else None)
        finally:
            self._probe_lock.release()

    def _health_path(self, info: dict[str, Any]) -> str:
        gid = info.get("group_id")
        g = next((x for x in self._groups_cache if x.id == gid), None)
        return str(g.engine.get("health_path", "/health")) if g is not None else "/health"

    def _count(self, g: GroupRow, live: list[tuple[str, int]]) -> None:
        # the count
        if len(live) < g.desired:
            used = {idx for _j, idx in live}
            for _ in range(g.desired - len(live)):
                idx = min(i for i in range(len(used) + 1) if i not in used)
                used.add(idx)
                self._submit(g, idx)
        elif len(live) > g.desired:
            # those not running first, then the running ones; the highest index first in each
            order = sorted(live, key=lambda r: (self._running(r[0]), -r[1]))
            for job_id, _idx in order[:len(live) - g.desired]:
                self._cancel_job(g, job_id, f"scaled to {g.desired}")

    def _failed_once(self, g: GroupRow, job_id: str, state: str) -> GroupRow:
        failures = g.failures + 1
        self.store.set_group(g.id, failures=failures)
        g = replace(g, failures=failures)
        if failures >= MAX_FAILURES:
            reason = f"{failures} replica jobs in a row ended ({state}) before their engine served; last {job_id}"
            self.store.set_group(g.id, state="failed", reason=reason)
            g = replace(g, state="failed", reason=reason)
            self._cancel_all(g)
        return g

    def _principal(self, g: GroupRow) -> Principal:
        return Principal(g.token_id, g.tenant, False)

    def _submit(self, g: GroupRow, idx: int) -> None:
        base = dict(g.request)
        labels = {**base.get("labels", {}), "serving": g.name, "replica": str(idx)}
        base.update(name=f"{g.name}-r{idx}", labels=labels, tenant=g.tenant)
        port = kv_port = None
        if g.engine.get("mode") == "command":
            ports = pick_ports(2 if g.engine.get("kv_events") else 1, self.store.ports_in_use())
            port, kv_port = ports[0], (ports[1] if len(ports) > 1 else None)
            base["command"] = fill(base["command"], port, kv_port)
        # the same checks as any job's request (the filled command included)
        req = parse_request({k: v for k, v in base.items() if k in _REQUEST_FIELDS}, self.service.env_allow)
        if port is not None:
            extra = ((PORT_ENV, str(port)),) + (((KV_PORT_ENV, str(kv_port)),) if kv_port is not None else ())
            req = replace(req, env=req.env + extra)  # the service's own variables (names the user may not set)
        job_id = self.service.submit(self._principal(g), req)
        self.store.add_replica(job_id, g.id, idx, port, kv_port)
        self._set_info(job_id, group=g.name, group_id=g.id, index=idx, state="queued", address=None, ready=False,
                       engine_pid=None, port=port)

    def _cancel_job(self, g: GroupRow, job_id: str, why: str) -> None:
        with contextlib.suppress(SchedulerStateError, NotFoundError):  # ended meanwhile
            self.service.cancel(self._principal(g), job_id)
        if self.engines.get(job_id) is not None:
            self.engines.stop(job_id)
        self._set_info(job_id, state="cancelled", address=None, ready=False, engine_pid=None, why=why)

    def _cancel_all(self, g: GroupRow) -> None:
        for job_id, _idx in self.store.replicas(g.id):
            if self._state(job_id) in _LIVE:
                self._cancel_job(g, job_id, "the serving group ended")

    def _set_info(self, job_id: str, **values: Any) -> None:
        self._info[job_id] = {**self._info.get(job_id, {}), **values}  # one store of a new dict

    # -- the API --------------------------------------------------------------------------------------
    def _group(self, who: Principal, name: str) -> GroupRow:
        g = self.store.group_named(who.tenant, name) if NAME_RE.match(name) else None
        if g is None:
            raise NotFoundError(f"no serving group {name}")
        return g

    def create(self, who: Principal, body: Any) -> dict[str, Any]:
        name, replicas, req, engine = parse_serving(body, self.service.env_allow, own_command=not self.spawn)
        tenant = self.service._tenant(who, req)
        with self.lock:
            existing = self.store.group_named(tenant, name)
            if existing is not None and existing.state == "active":
                raise SchedulerStateError(f"serving group {name} exists (scale it, or cancel it first)")
            if len(self.store.groups(tenant, active_only=True)) >= MAX_GROUPS:
                raise SchedulerStateError(f"tenant {tenant} holds {MAX_GROUPS} serving groups, the most it may")
            # the quote: every pool that can take one replica (refused here, before anything is stored)
            self.service.quote(who, req)
            request = {k: v for k, v in req.as_dict().items() if k in _REQUEST_FIELDS}
            gid = f"s{secrets.token_hex(6)}"
            self.store.add_group(GroupRow(gid, tenant, name, replicas, "active", "", request, engine, who.token_id,
                                          self.service.now(), 0))
            self.step()
        return self.view(Principal(who.token_id, tenant, who.admin), name)

    def scale(self, who: Principal, name: str, replicas: Any) -> dict[str, Any]:
        n = parse_replicas(replicas)
        with self.lock:
            g = self._group(who, name)
            if g.state != "active":
                raise SchedulerStateError(f"serving group {name} is {g.state}; create it again")
            self.store.set_group(g.id, desired=n)
            self.step()
        return self.view(who, name)

    def cancel(self, who: Principal, name: str) -> dict[str, Any]:
        with self.lock:
            g = self._group(who, name)
            if g.state != "active":
                raise SchedulerStateError(f"serving group {name} is already {g.state}")
            self.store.set_group(g.id, state="cancelled", reason=f"cancelled by {who.actor}", desired=0)
            self._cancel_all(g)
            self.step()
        return self.view(who, name)

    def view(self, who: Principal, name: str) -> dict[str, Any]:
        """The group and its live replicas (``address``: set once the replica's engine serves)."""
        with self.lock:
            g = self._group(who, name)
            rows = self.store.replicas(g.id)
            ports = {job_id: self.store.ports(job_id)[0] for job_id, _i in rows} if g.engine.get("mode") == "command" \
                else {}
        replicas, ended = [], 0
        for job_id, idx in rows:
            state = self._state(job_id)
            if state not in _LIVE:
                ended += 1
                continue
            info = self._info.get(job_id, {})
            ready = bool(info.get("ready"))
            replicas.append({"job": job_id, "index": idx, "state": state, "ready": ready,
                             "address": info.get("address"), "kv_events": info.get("kv_events") if ready else None,
                             "port": ports.get(job_id), "engine_pid": info.get("engine_pid"), "role": "both"})
        return {"id": g.id, "name": g.name, "tenant": g.tenant, "state": g.state, "reason": g.reason,
                "replicas_wanted": g.desired, "replicas_ready": sum(1 for r in replicas if r["ready"]),
                "replicas": replicas, "replicas_ended": ended, "engine": g.engine, "request": g.request,
                "created_at": g.created_t}

    def groups(self, who: Principal) -> list[dict[str, Any]]:
        with self.lock:
            names = [g.name for g in self.store.groups(who.tenant)][-100:]
        return [self.view(who, n) for n in dict.fromkeys(names)]


_REQUEST_FIELDS = ("name", "command", "env", "devices", "model", "vendor", "partition", "share", "topology",
                   "same_host", "priority_class", "duration_s", "time_limit_s", "pool", "tenant", "labels")
