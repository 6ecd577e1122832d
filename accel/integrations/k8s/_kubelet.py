"""A DRA kubelet plugin for one accel driver (``accel k8s kubelet-plugin``).

What the kubelet sees (``docs/kubernetes.md``, "The DRA kubelet plugin"):

- a registration socket ``<registry-dir>/<driver>-reg.sock`` serving ``pluginregistration``'s
  ``Registration`` (``GetInfo``: type ``DRAPlugin``, the driver name, the DRA socket, and the
  services ``v1.DRAPlugin`` and ``v1beta1.DRAPlugin``);
- the DRA socket ``<plugin-dir>/dra.sock`` serving ``DRAPlugin`` of
  ``k8s.io.kubelet.pkg.apis.dra.v1`` and of ``...v1beta1`` (same messages).

``NodePrepareResources``: for each claim, the ResourceClaim is read from the API server; the
allocation results of this driver must name devices this node publishes (pool = node name),
else that claim fails.  A CDI spec for the claim is written (:mod:`._kubelet_state`), the
checkpoint saved, and the CDI ids returned.  A claim already prepared (also before a restart)
gets the same answer without a second preparation.  A claim that fails carries its ``error``;
when *every* claim of a call fails the call itself fails with a gRPC status (``NOT_FOUND``: the
claim or a device of it is not on this node; ``FAILED_PRECONDITION``: the claim is not
allocated, or has no device of this driver, or a device cannot be described in CDI;
``DEADLINE_EXCEEDED`` / ``UNAVAILABLE``: the API server did not answer in time / failed;
``INTERNAL``: the spec or checkpoint could not be written), so a kubelet cannot mistake it for
success.  ``NodeUnprepareResources`` removes the claim's spec and checkpoint entry; an unknown
claim is success (the kubelet retries).

ResourceSlices: :func:`~accel.integrations.k8s.resource_slices` of the inventory, this driver's
pool only, created, replaced and deleted through the API (:meth:`KubeletPlugin.publish`); the
inventory is read again every poll interval and the pool re-published (generation + 1) when it
changed, health included: a device with an error-severity condition stays published with a
``NoSchedule`` taint (needs the DRADeviceTaints gate), a device that disappeared is withdrawn.
An inventory with a backend missing is not published (the last publication stays).

Dynamic partitions (``--dynamic-partitions``, opt-in as NVIDIA's DynamicMIG is; needs a backend
that declares partition actuation and DRAPartitionableDevices): a MIG-mode device is published as
every placement of its profiles with shared counters (:func:`~._dra.resource_slices`,
``dynamic=True``); ``NodePrepareResources`` of a claim allocated a placement creates that
partition, writes its CDI spec and completes the checkpoint; ``NodeUnprepareResources`` destroys
it.  The order and the restart are :mod:`._kubelet_dynamic`'s.  A partition refused by the
backend fails the claim with FAILED_PRECONDITION (the error names the cause), a busy one fails the
unprepare with FAILED_PRECONDITION until it is idle.
"""

from __future__ import annotations

import copy
import os
import socket
import stat
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import AccelError, ConfigError, PartitionError
from ...model import Device, HostInventory, Partition, ProblemKind
from ...plugin import SupportsPartitionActuation
from ._cdi import CDI_VERSION, SHARED_NODES, CdiProblem, device_edits
from ._dra import DEFAULT_DOMAIN, resource_slices
from ._kubeapi import KubeApi, KubeApiError, KubeApiTimeoutError
from ._kubelet_dynamic import DynamicPartitions, Target
from ._kubelet_state import ClaimStore, PluginInUseError, PreparedClaim, PreparedDevice

__all__ = ["MAX_CLAIMS_PER_CALL", "MAX_CONCURRENT_RPCS", "MAX_MESSAGE_BYTES", "PLUGIN_TYPE", "SERVICES",
           "ClaimFailure", "ClaimRef", "KubeletPlugin", "KubeletPluginServer", "PluginInUseError", "driver_for",
           "main"]

#: PluginInfo.type of a DRA driver.
PLUGIN_TYPE = "DRAPlugin"
#: PluginInfo.supported_versions: the gRPC services on the DRA socket, newest first.
SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
_MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the terminating NUL


@dataclass(frozen=True)
class ClaimFailure:
    """Why one claim could not be prepared or unprepared; ``status`` is a gRPC status name."""

    status: str
    message: str


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    uid: str
    name: str


MAX_CLAIMS_PER_CALL = 128
"""Most claims in one NodePrepareResources / NodeUnprepareResources call (the kubelet sends one
pod's claims per call); more is refused with INVALID_ARGUMENT before any work."""
MAX_MESSAGE_BYTES = 1024 * 1024
"""Largest gRPC request accepted (128 claims of the longest names are under 100 KiB)."""
MAX_CONCURRENT_RPCS = 64
"""Calls in progress or queued at once on the DRA socket; more get RESOURCE_EXHAUSTED at once."""
_CLAIM_FIELD_CHARS = {"namespace": 63, "name": 253, "uid": 128}  # DNS label, DNS subdomain, a UUID with room


@dataclass
class _View:
    """What this node publishes for the driver, from one inventory."""

    slices: list[dict[str, Any]]
    #: Published device name -> the accel device or partition, and its vendor.
    objects: dict[str, tuple[Device | Partition, str]] = field(default_factory=dict)
    #: Published placement (dynamic partitions) -> (parent id, profile, start), and its vendor.
    placements: dict[str, tuple[tuple[str, str, int], str]] = field(default_factory=dict)


def _view(inv: HostInventory, driver: str, node: str, domain: str, partitionable: bool,
          dynamic: bool = False, owned: frozenset[str] = frozenset()) -> _View:
    projection = resource_slices(inv, domain=domain, node_name=node, partitionable=partitionable, dynamic=dynamic,
                                 owned=owned)
    slices = [s for s in projection.slices if s["spec"]["driver"] == driver]
    by_id: dict[str, tuple[Device | Partition, str]] = {d.id: (d, d.vendor) for d in inv.devices}
    vendors = {d.id: d.vendor for d in inv.devices}
    for p in inv.partitions:
        by_id[p.id] = (p, vendors.get(p.parent_id, ""))
    view = _View(slices=slices)
    for s in slices:
        for dev in s["spec"].get("devices", []):
            accel_id = dev["attributes"].get(f"{domain}/id", {}).get("string")
            if accel_id in by_id:
                view.objects[dev["name"]] = by_id[accel_id]
            elif dev["name"] in projection.placements:
                where = projection.placements[dev["name"]]
                view.placements[dev["name"]] = (where, vendors.get(where[0], ""))
    return view


def _covers(have: Any, want: Any) -> bool:
    """Whether ``have`` (what the server holds) carries everything of ``want`` (what we publish);
    fields the server defaulted are not a change."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and _covers(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(
            _covers(h, w) for h, w in zip(have, want, strict=True))
    return bool(have == want)


def _without_generation(spec: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    out["pool"].pop("generation", None)
    return out


def driver_for(inv: HostInventory, driver: str | None, domain: str = DEFAULT_DOMAIN,
               log: Callable[[str], None] | None = None) -> str:
    """``driver``, or the one driver of the host's devices when it is None (else ConfigError)."""
    drivers = sorted({f"{d.vendor}.{domain}" for d in inv.devices})
    if driver is None:
        if len(drivers) != 1:
            raise ConfigError("--driver-name is needed: this host has devices of "
                              f"{', '.join(drivers) or 'no driver'} (one plugin serves one driver)")
        return drivers[0]
    if driver not in drivers and log is not None:
        log(f"warning: no device of driver {driver} on this host (drivers here: {', '.join(drivers) or 'none'}); "
            "nothing of it is published")
    return driver


class KubeletPlugin:
    """The DRA driver ``driver`` on ``node``: prepare, unprepare, publish (no gRPC here).

    ``inventory`` is called at start and at every :meth:`refresh`; ``api`` is the Kubernetes API
    (:class:`~._kubeapi.ClientApi`, or a fake); ``cdi_dir`` and ``state_dir`` hold the claims'
    CDI specs and the checkpoint (:class:`~._kubelet_state.ClaimStore`; reconciled here).
    ``cdi_env`` is :func:`~accel.integrations.k8s.cdi_specs`' ``env`` mode.  ``actuator`` (a
    backend that can create and destroy partitions) turns on dynamic partitions
    (:mod:`._kubelet_dynamic`); its unfinished intents are reconciled here, before any call.
    """

    def __init__(
        self,
        *,
        driver: str | None,
        node: str | None,
        inventory: Callable[[], HostInventory],
        api: KubeApi,
        cdi_dir: Path,
        state_dir: Path,
        domain: str = DEFAULT_DOMAIN,
        partitionable: bool = False,
        cdi_env: str = "stable",
        actuator: SupportsPartitionActuation | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._inventory = inventory
        self.api = api
        self.domain = domain
        self.partitionable = partitionable
        self.cdi_env = cdi_env
        self._log = log or (lambda line: print(f"accel: kubelet-plugin: {line}", file=sys.stderr, flush=True))
        inv = inventory()
        driver = driver_for(inv, driver, domain, self._log)
        self.driver = driver
        self.node = node or inv.host.hostname
        self._view_lock = threading.Lock()
        self._published: dict[str, dict[str, Any]] | None = None
        self._owner_ref: dict[str, Any] | None = None
        self._owner_warned = False
        self.store = ClaimStore(driver, state_dir, cdi_dir)
        try:
            removed, restored = self.store.reconcile()
        except BaseException:
            self.store.close()
            raise
        for path in removed:
            self._log(f"removed {path}: not a claim in the checkpoint")
        for path in restored:
            self._log(f"restored {path}: its claim is in the checkpoint")
        self.dynamic: DynamicPartitions | None = None
        if actuator is None and (self.store.owned() or self.store.pending()):
            # Unpreparing those claims without destroying their partitions would orphan them.
            self.store.close()
            raise ConfigError(f"the checkpoint {self.store.path} owns partitions made for claims: start the plugin "
                              "with --dynamic-partitions and a backend that can destroy them")
        if actuator is not None:
            self.dynamic = DynamicPartitions(actuator, self.store, self._log)
            try:
                lines = self.dynamic.reconcile()
            except BaseException:
                self.store.close()
                raise
            for line in lines:
                self._log(line)
            inv = inventory()  # after the reconcile: what it destroyed is gone
        self.view = self._make_view(inv)

    def _make_view(self, inv: HostInventory) -> _View:
        return _view(inv, self.driver, self.node, self.domain, self.partitionable, dynamic=self.dynamic is not None,
                     owned=self.store.owned() if self.dynamic is not None else frozenset())

    def close(self) -> None:
        """Release the state directory (another plugin may then take it)."""
        self.store.close()

    # -- prepare / unprepare ------------------------------------------------------------------

    def prepare(self, claims: Iterable[ClaimRef], *,
                time_left: Callable[[], float | None] | None = None) -> dict[str, PreparedClaim | ClaimFailure]:
        """Prepare each claim; every claim gets an entry (keyed by uid).  ``time_left`` (seconds,
        ``None``: no deadline) is the caller's deadline: once it has passed, the claims not yet
        prepared fail with DEADLINE_EXCEEDED instead of keeping the call (and a worker) busy."""
        out: dict[str, PreparedClaim | ClaimFailure] = {}
        for ref in claims:
            left = time_left() if time_left is not None else None
            if left is not None and left <= 0:
                out[ref.uid] = ClaimFailure("DEADLINE_EXCEEDED", f"claim {ref.namespace}/{ref.name}: not prepared: "
                                                                 "the call's deadline passed first")
                continue
            try:
                out[ref.uid] = self._prepare_one(ref)
            except _Failed as exc:
                out[ref.uid] = exc.failure
            except OSError as exc:
                out[ref.uid] = ClaimFailure("INTERNAL", f"claim {ref.namespace}/{ref.name}: cannot write its CDI "
                                                        f"spec or the checkpoint: {exc}")
            except ConfigError as exc:
                out[ref.uid] = ClaimFailure("INVALID_ARGUMENT", f"claim {ref.namespace}/{ref.name}: {exc}")
            except AccelError as exc:  # a partition's rollback refused (kept; finished by the next refresh)
                out[ref.uid] = ClaimFailure("INTERNAL", f"claim {ref.namespace}/{ref.name}: {exc}")
        return out

    def unprepare(self, claims: Iterable[ClaimRef]) -> dict[str, ClaimFailure | None]:
        """Unprepare each claim (None: done, also for a claim this plugin does not know)."""
        out: dict[str, ClaimFailure | None] = {}
        for ref in claims:
            try:
                if self.dynamic is not None:
                    self.store.spec_path(ref.uid)  # a uid that cannot name a file is refused first
                    self.dynamic.unprepare(ref.uid)
                self.store.remove(ref.uid)
                out[ref.uid] = None
            except PartitionError as exc:
                out[ref.uid] = ClaimFailure("FAILED_PRECONDITION", f"claim {ref.namespace}/{ref.name}: its partition "
                                                                   f"is not destroyed yet: {exc}")
            except AccelError as exc:
                if isinstance(exc, ConfigError):
                    out[ref.uid] = ClaimFailure("INVALID_ARGUMENT", f"claim {ref.namespace}/{ref.name}: {exc}")
                else:
                    out[ref.uid] = ClaimFailure("INTERNAL", f"claim {ref.namespace}/{ref.name}: {exc}")
            except OSError as exc:
                out[ref.uid] = ClaimFailure("INTERNAL", f"claim {ref.namespace}/{ref.name}: {exc}")
            except ConfigError as exc:
                out[ref.uid] = ClaimFailure("INVALID_ARGUMENT", f"claim {ref.namespace}/{ref.name}: {exc}")
        return out

    def _prepare_one(self, ref: ClaimRef) -> PreparedClaim:
        where = f"claim {ref.namespace}/{ref.name} ({ref.uid})"
        self.store.spec_path(ref.uid)  # a uid that cannot name a file is refused before any API call
        known = self.store.get(ref.uid)
        if known is not None:
            return known
        try:
            claim = self.api.read_claim(ref.namespace, ref.name)
        except KubeApiTimeoutError as exc:
            raise _Failed("DEADLINE_EXCEEDED", f"{where}: {exc}") from exc
        except KubeApiError as exc:
            raise _Failed("NOT_FOUND" if exc.status == 404 else "UNAVAILABLE", f"{where}: {exc}") from exc
        uid = (claim.get("metadata") or {}).get("uid")
        if uid != ref.uid:
            raise _Failed("NOT_FOUND", f"{where}: the API server's claim of that name has uid {uid!r}")
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            raise _Failed("FAILED_PRECONDITION", f"{where}: not allocated")
        results = [r for r in (allocation.get("devices") or {}).get("results") or []
                   if r.get("driver") == self.driver]
        if not results:
            raise _Failed("FAILED_PRECONDITION", f"{where}: no device of driver {self.driver} is allocated to it")
        view = self.view
        grouped: dict[tuple[str, str], list[str]] = {}
        for r in results:
            pool, device = str(r.get("pool")), str(r.get("device"))
            if pool != self.node or (device not in view.objects and device not in view.placements):
                raise _Failed("NOT_FOUND", f"{where}: device {pool}/{device} of driver {self.driver} is not "
                                           f"published by node {self.node}")
            requests = grouped.setdefault((pool, device), [])
            if r.get("request") and r["request"] not in requests:
                requests.append(str(r["request"]))
        targets: list[Target] = [(device, *view.placements[device][0]) for _, device in grouped
                                 if device not in view.objects]
        if not targets or self.dynamic is None:
            return self.store.add(self._claim_spec(ref, grouped, view, where))
        return self._prepare_dynamic(ref, grouped, view, where, targets)

    def _prepare_dynamic(self, ref: ClaimRef, grouped: dict[tuple[str, str], list[str]], view: _View, where: str,
                         targets: list[Target]) -> PreparedClaim:
        """A claim with placements to make: the intent, the creates, the spec, the checkpoint."""
        assert self.dynamic is not None
        with self.dynamic.lock:
            known = self.store.get(ref.uid)  # a concurrent call for the same claim finished first
            if known is not None:
                return known
            pending = self.store.pending().get(ref.uid)
            if pending is not None:  # an unprepare not finished (busy): the claim cannot come back yet
                raise _Failed("FAILED_PRECONDITION", f"{where}: its {pending.op} is not finished (a partition is busy)")
            try:
                intent, made = self.dynamic.create(ref.uid, ref.namespace, ref.name, targets)
            except PartitionError as exc:
                raise _Failed("FAILED_PRECONDITION", f"{where}: cannot make its partition: {exc}") from exc
            except AccelError as exc:
                raise _Failed("INTERNAL", f"{where}: cannot make its partition: {exc}") from exc
            try:
                objects = dict(view.objects) | {d: (made[d], view.placements[d][1]) for d in made}
                claim = self._claim_spec(ref, grouped, _View(view.slices, objects), where)
                claim = PreparedClaim(claim.uid, claim.namespace, claim.name, claim.devices, claim.spec,
                                      intent.partitions)
                return self.store.finish_prepare(claim)
            except BaseException:
                self.dynamic.rollback(ref.uid, intent)
                raise

    def _claim_spec(self, ref: ClaimRef, grouped: dict[tuple[str, str], list[str]], view: _View,
                    where: str) -> PreparedClaim:
        kind = f"{self.driver}/claim"
        entries: list[dict[str, Any]] = []
        shared_nodes: list[str] = []
        devices: list[PreparedDevice] = []
        env_users: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {}
        for (pool, device), requests in grouped.items():
            obj, vendor = view.objects[device]
            made = device_edits(obj, vendor, env=self.cdi_env, kind=kind)
            if isinstance(made, CdiProblem):
                raise _Failed("FAILED_PRECONDITION", f"{where}: {made.message}")
            edits, _ = made
            shared = SHARED_NODES.get(vendor, frozenset())
            shared_nodes.extend(n for n in obj.binding.device_nodes if n in shared and n not in shared_nodes)
            for var in edits.get("env", []):
                name, _, value = var.partition("=")
                env_users.setdefault(name, []).append((len(entries), value, tuple(sorted(requests))))
            name = f"{ref.uid}-{device}"
            entries.append({"name": name, "containerEdits": edits})
            devices.append(PreparedDevice(tuple(requests), pool, device, (f"{kind}={name}",)))
        # CDI applies env edits one device after another, the last one winning: a visibility
        # variable set per device would name only one of several.  Each device of the claim
        # that sets one gets the list of all of them, which is right for every container that
        # gets them together: the devices must then answer the same requests.  Otherwise the
        # variable is left out (the device nodes alone decide what the container sees).
        for name, users in env_users.items():
            joined = ",".join(value for _, value, _ in users)
            same = len({requests for _, _, requests in users}) == 1
            for index, _, _ in users:
                edits = entries[index]["containerEdits"]
                edits["env"] = [e for e in edits["env"] if not e.startswith(f"{name}=")]
                if same:
                    edits["env"].append(f"{name}={joined}")
                if not edits["env"]:
                    del edits["env"]
            if not same:
                self._log(f"{where}: {name} left out of its CDI edits: the devices setting it answer "
                          "different requests")
        spec: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": kind, "devices": entries}
        if shared_nodes:
            spec["containerEdits"] = {"deviceNodes": [{"path": n} for n in shared_nodes]}
        return PreparedClaim(ref.uid, ref.namespace, ref.name, tuple(devices), spec)

    # -- ResourceSlices -----------------------------------------------------------------------

    def publish(self) -> tuple[list[str], list[str], list[str]]:
        """Make this node's pool of the driver in the API what the inventory says.

        Returns (created, replaced, deleted) slice names; nothing when the API already holds
        it.  A change raises the pool generation by one on every slice of the pool.  Raises
        :class:`~._kubeapi.KubeApiError` when the API refuses or does not answer.
        """
        with self._view_lock:
            self._published = None  # until this publication is through: the next refresh retries it
            owner = self._owner()
            desired = {s["metadata"]["name"]: copy.deepcopy(s) for s in self.view.slices}
            for obj in desired.values():
                if owner is not None:
                    obj["metadata"]["ownerReferences"] = [owner]
            existing = {s["metadata"]["name"]: s for s in self.api.list_slices(self.driver, self.node)}
            same = set(existing) == set(desired) and all(
                _covers(_without_generation(existing[n]["spec"]), _without_generation(s["spec"]))
                and _covers(existing[n]["metadata"].get("ownerReferences"), s["metadata"].get("ownerReferences"))
                for n, s in desired.items())
            if same:
                self._published = desired
                return [], [], []
            generation = max([int(s["spec"]["pool"].get("generation") or 0) for s in existing.values()] + [0]) + 1
            created: list[str] = []
            replaced: list[str] = []
            for name, obj in desired.items():
                obj["spec"]["pool"]["generation"] = generation
                if name in existing:
                    obj["metadata"]["resourceVersion"] = existing[name]["metadata"].get("resourceVersion")
                    self.api.replace_slice(obj)
                    replaced.append(name)
                else:
                    self.api.create_slice(obj)
                    created.append(name)
            deleted = []
            for name in existing:
                if name not in desired:
                    self.api.delete_slice(name)
                    deleted.append(name)
            self._published = desired
            return created, replaced, deleted

    def _owner(self) -> dict[str, Any] | None:
        """The Node as the owner of its slices (deleted with it), once known; None when it cannot be read.

        A Node the API does not show (RBAC without ``get nodes``, or not registered yet) leaves
        the slices without an owner, said once in the log; a timeout is raised (tried again).
        """
        if self._owner_ref is None and not self._owner_warned:
            try:
                node = self.api.read_node(self.node)
            except KubeApiTimeoutError:
                raise
            except KubeApiError as exc:
                self._owner_warned = True
                self._log(f"warning: slices published without an owner (the Node is not readable: {exc})")
                return None
            uid = (node.get("metadata") or {}).get("uid")
            if uid:
                self._owner_ref = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": str(uid),
                                   "controller": True}
        return self._owner_ref

    def refresh(self) -> bool:
        """Read the inventory again; re-publish when what this node publishes changed.

        Returns whether it published.  An inventory with a backend missing keeps the last
        view (a device must not be withdrawn because its backend failed to answer once).
        """
        if self.dynamic is None:
            inv = self._inventory()
        else:
            # Not while a claim's partition is being made (it would look foreign until its id is recorded).
            with self.dynamic.lock:
                if self.store.pending():
                    for line in self.dynamic.reconcile():  # an unprepare refused while busy, tried again
                        self._log(line)
                inv = self._inventory()
                owned = self.store.owned()
        missing = [p for p in inv.problems if p.kind is ProblemKind.BACKEND]
        if missing:
            self._log(f"inventory incomplete ({missing[0].message}); keeping the last publication")
            return False
        view = self._make_view(inv) if self.dynamic is None else _view(
            inv, self.driver, self.node, self.domain, self.partitionable, dynamic=True, owned=owned)
        changed = [s["spec"] for s in view.slices] != [s["spec"] for s in self.view.slices]
        self.view = view
        if changed or self._published is None:
            created, replaced, deleted = self.publish()
            if created or replaced or deleted:
                self._log(f"published pool {self.node} of {self.driver}: created {len(created)}, "
                          f"replaced {len(replaced)}, deleted {len(deleted)} slice(s)")
            return True
        return False


class _Failed(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.failure = ClaimFailure(status, message)


# -- gRPC ---------------------------------------------------------------------------------------

def _take_socket(path: Path) -> None:
    """Refuse a path another process serves on; remove a stale socket a crash left."""
    if len(str(path).encode()) > _MAX_SOCKET_PATH:
        raise ConfigError(f"socket path {path} is longer than {_MAX_SOCKET_PATH} bytes")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"{path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        path.unlink(missing_ok=True)  # nobody listens: a socket left by a plugin that died
        return
    except OSError as exc:
        raise PluginInUseError(f"socket {path} cannot be checked: {exc.strerror or exc}") from exc
    finally:
        probe.close()
    raise PluginInUseError(f"socket {path} is in use by another process")


class _DraServicer:
    def __init__(self, plugin: KubeletPlugin, pb2: Any, grpc: Any) -> None:
        self.plugin = plugin
        self.pb2 = pb2
        self.grpc = grpc

    def _refs(self, request: Any, context: Any) -> list[ClaimRef]:
        """The call's claims, after its bounds: the count, then each name's length (the whole call
        is refused with INVALID_ARGUMENT naming the field; nothing is read or written first)."""
        claims = request.claims
        if len(claims) > MAX_CLAIMS_PER_CALL:
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT,
                          f"claims: {len(claims)} claims in one call; the limit is {MAX_CLAIMS_PER_CALL}")
        refs = []
        for i, c in enumerate(claims):
            for key, limit in _CLAIM_FIELD_CHARS.items():
                if len(getattr(c, key)) > limit:
                    context.abort(self.grpc.StatusCode.INVALID_ARGUMENT,
                                  f"claims[{i}].{key} is {len(getattr(c, key))} characters; the limit is {limit}")
            refs.append(ClaimRef(c.namespace, c.uid, c.name))
        return refs

    def _abort_if_all_failed(self, context: Any, failures: list[ClaimFailure], total: int) -> None:
        if total and len(failures) == total:
            status = getattr(self.grpc.StatusCode, failures[0].status, self.grpc.StatusCode.UNKNOWN)
            context.abort(status, "; ".join(f.message for f in failures))

    def NodePrepareResources(self, request: Any, context: Any) -> Any:  # the gRPC method name
        outcomes = self.plugin.prepare(self._refs(request, context), time_left=context.time_remaining)
        response = self.pb2.NodePrepareResourcesResponse()
        failures = []
        for uid, outcome in outcomes.items():
            entry = response.claims[uid]
            if isinstance(outcome, ClaimFailure):
                entry.error = outcome.message
                failures.append(outcome)
                continue
            for d in outcome.devices:
                entry.devices.add(request_names=list(d.requests), pool_name=d.pool, device_name=d.device,
                                  cdi_device_ids=list(d.cdi_ids))
        self._abort_if_all_failed(context, failures, len(outcomes))
        return response

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        outcomes = self.plugin.unprepare(self._refs(request, context))
        response = self.pb2.NodeUnprepareResourcesResponse()
        failures = []
        for uid, failure in outcomes.items():
            entry = response.claims[uid]
            if failure is not None:
                entry.error = failure.message
                failures.append(failure)
        self._abort_if_all_failed(context, failures, len(outcomes))
        return response


class _RegistrationServicer:
    def __init__(self, server: KubeletPluginServer, pb2: Any) -> None:
        self.server = server
        self.pb2 = pb2

    def GetInfo(self, request: Any, context: Any) -> Any:
        return self.pb2.PluginInfo(type=PLUGIN_TYPE, name=self.server.plugin.driver,
                                   endpoint=str(self.server.dra_socket), supported_versions=list(SERVICES))

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        self.server.registration = (request.plugin_registered, request.error)
        if request.plugin_registered:
            self.server.plugin._log(f"registered with the kubelet as {self.server.plugin.driver}")
        else:
            self.server.plugin._log(f"error: the kubelet refused the registration: {request.error or '(no reason)'}")
        self.server.registered.set()
        return self.pb2.RegistrationStatusResponse()


class KubeletPluginServer:
    """The plugin's two gRPC servers on unix sockets: DRA (v1 and v1beta1) and registration.

    :meth:`start` serves the DRA socket first, then the registration socket (the kubelet calls
    the endpoint as soon as it sees the registration socket); :meth:`stop` removes both.
    """

    def __init__(self, plugin: KubeletPlugin, *, plugin_dir: Path, registry_dir: Path, max_workers: int = 8) -> None:
        self.plugin = plugin
        self.dra_socket = plugin_dir / "dra.sock"
        self.registration_socket = registry_dir / f"{plugin.driver}-reg.sock"
        self.max_workers = max_workers
        self.registration: tuple[bool, str] | None = None
        self.registered = threading.Event()
        self._servers: list[Any] = []
        self._sockets: list[Path] = []

    def start(self) -> None:
        try:
            import grpc
        except ImportError as exc:
            raise ConfigError(f"gRPC is not installed ({exc}): pip install 'accel-sdk[kubernetes]'") from exc
        from ._proto import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc
        from ._proto import pluginregistration_v1_pb2 as reg_pb2
        from ._proto import pluginregistration_v1_pb2_grpc as reg_grpc

        for d in (self.dra_socket.parent, self.registration_socket.parent):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create {d}: {exc.strerror or exc}") from exc
        for path in (self.dra_socket, self.registration_socket):
            _take_socket(path)
        # Generated modules carry no types; the servicers below are checked by the tests instead.
        versions: list[tuple[Any, Any]] = [(dra_v1_pb2, dra_v1_pb2_grpc), (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc)]
        registration: Any = reg_grpc
        try:
            # A bounded pool, a bounded queue (more calls: RESOURCE_EXHAUSTED) and a bounded message size.
            dra = grpc.server(futures.ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="accel-dra"),
                              maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
                              options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
            for pb2, pb2_grpc in versions:
                pb2_grpc.add_DRAPluginServicer_to_server(_DraServicer(self.plugin, pb2, grpc), dra)
            self._serve(dra, self.dra_socket)
            reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="accel-reg"),
                              maximum_concurrent_rpcs=8, options=[("grpc.max_receive_message_length", 64 * 1024)])
            registration.add_RegistrationServicer_to_server(_RegistrationServicer(self, reg_pb2), reg)
            self._serve(reg, self.registration_socket)
        except BaseException:
            self.stop(grace=0)
            raise

    def _serve(self, server: Any, path: Path) -> None:
        try:
            server.add_insecure_port(f"unix://{path}")
        except RuntimeError as exc:
            raise ConfigError(f"cannot serve on {path}: {exc}") from exc
        server.start()
        self._servers.append(server)
        self._sockets.append(path)

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving (registration first) and remove the sockets this server made."""
        for server in reversed(self._servers):
            server.stop(grace).wait()
        self._servers = []
        for path in self._sockets:
            path.unlink(missing_ok=True)
        self._sockets = []


# -- the command --------------------------------------------------------------------------------

def main(args: Any, inventory: Callable[[], HostInventory],
         actuator: SupportsPartitionActuation | None = None) -> int:
    """Run ``accel k8s kubelet-plugin`` (options: ``_kubelet_args``) until SIGTERM or SIGINT.

    ``actuator`` is the backend that makes partitions; needed (and used) only with
    ``--dynamic-partitions``."""
    import signal

    from ._kubeapi import ClientApi

    if not args.poll_interval > 0:
        raise ConfigError(f"--poll-interval must be > 0 seconds, got {args.poll_interval!r}")
    if getattr(args, "dynamic_partitions", False):
        if actuator is None:
            raise ConfigError("--dynamic-partitions needs a backend that declares partition actuation "
                              "(see `accel plugins`); none of the selected backends does")
    else:
        actuator = None
    api = ClientApi(kubeconfig=args.kubeconfig, timeout_s=args.api_timeout)
    driver = driver_for(inventory(), args.driver_name, args.domain)
    plugin_dir = Path(args.plugin_dir or f"/var/lib/kubelet/plugins/{driver}")
    node = args.node_name or os.environ.get("NODE_NAME", "").strip() or None
    plugin = KubeletPlugin(driver=driver, node=node, inventory=inventory, api=api,
                           cdi_dir=Path(args.cdi_dir), state_dir=Path(args.state_dir) if args.state_dir else plugin_dir,
                           domain=args.domain, partitionable=args.partitionable, cdi_env=args.cdi_env,
                           actuator=actuator)
    server = KubeletPluginServer(plugin, plugin_dir=plugin_dir, registry_dir=Path(args.registry_dir))
    stop = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop.set()

    # SIGINT only when it is not ignored: a plugin started with SIGINT ignored (a shell's `&`
    # without job control, nohup) keeps it ignored, as accel's CLI does.
    stops = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else [])
    previous = {s: signal.signal(s, _stop) for s in stops}
    try:
        server.start()
        plugin._log(f"serving {plugin.driver} on node {plugin.node}: DRA {server.dra_socket}, registration "
                    f"{server.registration_socket}")
        while not stop.is_set():
            try:
                plugin.refresh()
            except AccelError as exc:
                plugin._log(f"error: {exc} (retrying in {args.poll_interval:g} s)")
            stop.wait(args.poll_interval)
    finally:
        server.stop()
        plugin.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
        api.close()
    plugin._log("stopped; sockets removed")
    return 0
