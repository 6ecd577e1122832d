"""The kubelet plugin's prepared claims: a checkpoint file and one CDI spec file per claim.

The checkpoint (``<state-dir>/checkpoint.json``) is replaced atomically (temporary file, fsync,
rename, fsync of the directory) before any answer leaves the plugin, so what the kubelet was told
is on disk.  Each prepared claim has a CDI spec ``<cdi-dir>/<driver>-claim-<uid>.json`` (kind
``<driver>/claim``, one device ``<uid>-<device>`` per allocated device); the checkpoint keeps a
copy, so a spec deleted behind the plugin's back is written again.

Order, so that a crash at any point neither leaks nor double-prepares: prepare writes the CDI
spec, then the checkpoint; unprepare drops the claim from the checkpoint, then removes the spec.
:meth:`ClaimStore.reconcile` (at start) removes this driver's claim specs that the checkpoint
does not name (a prepare that crashed before its checkpoint, an unprepare after its checkpoint)
and restores missing ones of claims it does name.

Dynamic partitions (version 2): a claim whose devices are made on prepare owns them
(:class:`OwnedPartition`, kept with the claim).  Before anything is made or destroyed the
checkpoint records the *intent* (:class:`Pending`: ``prepare`` or ``unprepare``, the placements,
and each partition's id once it is known); the claim is in ``claims`` only while all its
partitions exist, and leaves ``claims`` (into an ``unprepare`` intent) before the first destroy,
so no prepared claim ever names a destroyed partition.  What a restart does with an intent is
:mod:`._kubelet_dynamic`'s.  Version 1 checkpoints (no partitions) are read as they are.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError

__all__ = ["CHECKPOINT_VERSION", "ClaimStore", "OwnedPartition", "Pending", "PluginInUseError", "PreparedClaim",
           "PreparedDevice"]

CHECKPOINT_VERSION = 2
_READS = (1, 2)
_UID = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$")


class PluginInUseError(ConfigError):
    """Another plugin serves on a socket path, or holds the state directory, this plugin was given."""

    code = "k8s.plugin-in-use"


@dataclass(frozen=True)
class PreparedDevice:
    """One device of a prepared claim, as the kubelet is told about it."""

    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@dataclass(frozen=True)
class OwnedPartition:
    """A partition made for a claim: the published placement device it answers, and once made its id."""

    device: str
    parent_id: str
    profile: str
    start: int
    partition_id: str | None = None
    #: The parent's live partition ids before the create (a partition at the placement that is
    #: not among them was made by this create, even when a crash lost its id).
    before: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"device": self.device, "parentId": self.parent_id, "profile": self.profile, "start": self.start,
                "partitionId": self.partition_id, "before": list(self.before)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OwnedPartition:
        pid = data.get("partitionId")
        return cls(str(data["device"]), str(data["parentId"]), str(data["profile"]), int(data["start"]),
                   None if pid is None else str(pid), tuple(str(x) for x in data.get("before", ())))


@dataclass(frozen=True)
class Pending:
    """An intent in the checkpoint: a prepare or unprepare of ``partitions`` not yet finished."""

    op: str  # "prepare" | "unprepare"
    namespace: str
    name: str
    partitions: tuple[OwnedPartition, ...]

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "namespace": self.namespace, "name": self.name,
                "partitions": [p.as_json() for p in self.partitions]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pending:
        op = str(data["op"])
        if op not in ("prepare", "unprepare"):
            raise ValueError(f"intent op {op!r}")
        return cls(op, str(data["namespace"]), str(data["name"]),
                   tuple(OwnedPartition.from_json(p) for p in data["partitions"]))


@dataclass(frozen=True)
class PreparedClaim:
    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    #: The CDI spec written for the claim (kept so that a missing file can be restored).
    spec: dict[str, Any]
    #: Partitions made for this claim (``--dynamic-partitions``), destroyed when it is unprepared.
    partitions: tuple[OwnedPartition, ...] = ()

    def as_json(self) -> dict[str, Any]:
        out = {
            "namespace": self.namespace,
            "name": self.name,
            "devices": [{"requests": list(d.requests), "pool": d.pool, "device": d.device,
                         "cdiIds": list(d.cdi_ids)} for d in self.devices],
            "spec": self.spec,
        }
        if self.partitions:
            out["partitions"] = [p.as_json() for p in self.partitions]
        return out

    @classmethod
    def from_json(cls, uid: str, data: dict[str, Any]) -> PreparedClaim:
        return cls(uid=uid, namespace=str(data["namespace"]), name=str(data["name"]), devices=tuple(
            PreparedDevice(tuple(d["requests"]), str(d["pool"]), str(d["device"]), tuple(d["cdiIds"]))
            for d in data["devices"]), spec=dict(data["spec"]),
            partitions=tuple(OwnedPartition.from_json(p) for p in data.get("partitions", ())))


def _write_atomic(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class ClaimStore:
    """Prepared claims of one driver: the checkpoint in ``state_dir``, the specs in ``cdi_dir``.

    Thread-safe: every change holds one lock, so concurrent prepares of different claims each
    land in the checkpoint, and two prepares of one claim write it once.
    """

    def __init__(self, driver: str, state_dir: Path, cdi_dir: Path) -> None:
        for what, d in (("state", state_dir), ("CDI", cdi_dir)):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the {what} directory {d}: {exc.strerror or exc}") from exc
            if not d.is_dir():
                raise ConfigError(f"the {what} directory {d} is not a directory")
        self.driver = driver
        self.state_dir = state_dir
        self.cdi_dir = cdi_dir
        self.path = state_dir / "checkpoint.json"
        self.lock = threading.RLock()
        # One plugin per state directory: a second one would reconcile away the first one's specs.
        self._lock_fd: int | None = os.open(state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise PluginInUseError(f"the state directory {state_dir} is in use by another plugin") from exc
        self._pending: dict[str, Pending] = {}
        try:
            self._claims: dict[str, PreparedClaim] = self._load()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the state directory's lock."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load(self) -> dict[str, PreparedClaim]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") not in _READS:
                raise ConfigError(f"checkpoint {self.path}: version {data.get('version')!r}, "
                                  f"this plugin reads versions {', '.join(map(str, _READS))}")
            if data.get("driver") != self.driver:
                raise ConfigError(f"checkpoint {self.path} belongs to driver {data.get('driver')!r}, "
                                  f"not {self.driver!r}: give each driver its own state directory")
            self._pending = {uid: Pending.from_json(p) for uid, p in (data.get("pending") or {}).items()}
            return {uid: PreparedClaim.from_json(uid, c) for uid, c in data["claims"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Never start over silently: the claims it names would leak their specs, or be
            # prepared a second time.
            raise ConfigError(f"checkpoint {self.path} cannot be read ({type(exc).__name__}: {exc}); "
                              "move it away only once no pod on this node uses a claim of this driver") from exc

    def _save(self, claims: dict[str, PreparedClaim], pending: dict[str, Pending] | None = None) -> None:
        pending = self._pending if pending is None else pending
        data: dict[str, Any] = {"version": CHECKPOINT_VERSION, "driver": self.driver,
                                "claims": {uid: c.as_json() for uid, c in sorted(claims.items())}}
        if pending:
            data["pending"] = {uid: p.as_json() for uid, p in sorted(pending.items())}
        _write_atomic(self.path, data)

    # -- intents (dynamic partitions) --------------------------------------------------------------

    def pending(self) -> dict[str, Pending]:
        with self.lock:
            return dict(self._pending)

    def owned(self) -> frozenset[str]:
        """Ids of the partitions the checkpoint owns (prepared claims and intents)."""
        with self.lock:
            ids = {p.partition_id for c in self._claims.values() for p in c.partitions}
            ids |= {p.partition_id for i in self._pending.values() for p in i.partitions}
            return frozenset(i for i in ids if i is not None)

    def set_pending(self, uid: str, intent: Pending) -> None:
        """Record (or update) the intent of claim ``uid`` in the checkpoint."""
        with self.lock:
            self.spec_path(uid)
            pending = {**self._pending, uid: intent}
            self._save(self._claims, pending)
            self._pending = pending

    def drop_pending(self, uid: str) -> None:
        with self.lock:
            if uid in self._pending:
                pending = {k: v for k, v in self._pending.items() if k != uid}
                self._save(self._claims, pending)
                self._pending = pending

    def finish_prepare(self, claim: PreparedClaim) -> PreparedClaim:
        """Write the claim's CDI spec, then, in one checkpoint write, the claim in and its intent out."""
        with self.lock:
            path = self.spec_path(claim.uid)
            _write_atomic(path, claim.spec)
            claims = {**self._claims, claim.uid: claim}
            pending = {k: v for k, v in self._pending.items() if k != claim.uid}
            try:
                self._save(claims, pending)
            except OSError:
                path.unlink(missing_ok=True)
                raise
            self._claims, self._pending = claims, pending
            return claim

    def begin_unprepare(self, uid: str) -> Pending | None:
        """Move a prepared claim that owns partitions into an ``unprepare`` intent (one checkpoint
        write), then remove its spec; returns the intent (None: the claim owns no partition or is
        not here).  An ``unprepare`` intent already recorded is returned as it is."""
        with self.lock:
            known = self._pending.get(uid)
            if known is not None and known.op == "unprepare":
                return known
            claim = self._claims.get(uid)
            if claim is None or not claim.partitions:
                return None
            intent = Pending("unprepare", claim.namespace, claim.name, claim.partitions)
            claims = {k: v for k, v in self._claims.items() if k != uid}
            pending = {**self._pending, uid: intent}
            self._save(claims, pending)
            self._claims, self._pending = claims, pending
            self.spec_path(uid).unlink(missing_ok=True)
            return intent

    def spec_path(self, uid: str) -> Path:
        if not _UID.match(uid) or len(uid) > 128:
            raise ConfigError(f"not a claim uid: {uid!r}")
        return self.cdi_dir / f"{self.driver}-claim-{uid}.json"

    def get(self, uid: str) -> PreparedClaim | None:
        with self.lock:
            claim = self._claims.get(uid)
            if claim is not None and not self.spec_path(uid).exists():
                _write_atomic(self.spec_path(uid), claim.spec)  # removed behind our back: restore
            return claim

    def claims(self) -> dict[str, PreparedClaim]:
        with self.lock:
            return dict(self._claims)

    def add(self, claim: PreparedClaim) -> PreparedClaim:
        """Write the claim's CDI spec, then the checkpoint; a claim already here is returned as it is."""
        with self.lock:
            known = self.get(claim.uid)
            if known is not None:
                return known
            path = self.spec_path(claim.uid)
            _write_atomic(path, claim.spec)
            claims = {**self._claims, claim.uid: claim}
            try:
                self._save(claims)
            except OSError:
                path.unlink(missing_ok=True)
                raise
            self._claims = claims
            return claim

    def remove(self, uid: str) -> bool:
        """Drop the claim from the checkpoint, then remove its spec; False when it was not here."""
        with self.lock:
            path = self.spec_path(uid)
            if uid in self._claims:
                claims = {k: v for k, v in self._claims.items() if k != uid}
                self._save(claims)
                self._claims = claims
                path.unlink(missing_ok=True)
                return True
            path.unlink(missing_ok=True)  # a spec a crash left behind
            return False

    def reconcile(self) -> tuple[list[Path], list[Path]]:
        """Remove this driver's claim specs the checkpoint does not name; restore missing ones.

        Returns (removed, restored).  Files of other drivers and other tools are left alone.
        """
        removed: list[Path] = []
        restored: list[Path] = []
        prefix = f"{self.driver}-claim-"
        with self.lock:
            for path in sorted(self.cdi_dir.iterdir()):
                name = path.name
                leftover_tmp = name.startswith(f".{prefix}") and name.endswith(".tmp")
                ours = name.startswith(prefix) and name.endswith(".json")
                if leftover_tmp or (ours and name[len(prefix):-len(".json")] not in self._claims):
                    path.unlink(missing_ok=True)
                    removed.append(path)
            for uid, claim in self._claims.items():
                path = self.spec_path(uid)
                if not path.exists():
                    _write_atomic(path, claim.spec)
                    restored.append(path)
        return removed, restored
