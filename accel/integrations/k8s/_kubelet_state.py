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

__all__ = ["CHECKPOINT_VERSION", "ClaimStore", "PluginInUseError", "PreparedClaim", "PreparedDevice"]

CHECKPOINT_VERSION = 1
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
class PreparedClaim:
    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    #: The CDI spec written for the claim (kept so that a missing file can be restored).
    spec: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "devices": [{"requests": list(d.requests), "pool": d.pool, "device": d.device,
                         "cdiIds": list(d.cdi_ids)} for d in self.devices],
            "spec": self.spec,
        }

    @classmethod
    def from_json(cls, uid: str, data: dict[str, Any]) -> PreparedClaim:
        return cls(uid=uid, namespace=str(data["namespace"]), name=str(data["name"]), devices=tuple(
            PreparedDevice(tuple(d["requests"]), str(d["pool"]), str(d["device"]), tuple(d["cdiIds"]))
            for d in data["devices"]), spec=dict(data["spec"]))


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
            if data.get("version") != CHECKPOINT_VERSION:
                raise ConfigError(f"checkpoint {self.path}: version {data.get('version')!r}, "
                                  f"this plugin reads version {CHECKPOINT_VERSION}")
            if data.get("driver") != self.driver:
                raise ConfigError(f"checkpoint {self.path} belongs to driver {data.get('driver')!r}, "
                                  f"not {self.driver!r}: give each driver its own state directory")
            return {uid: PreparedClaim.from_json(uid, c) for uid, c in data["claims"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Never start over silently: the claims it names would leak their specs, or be
            # prepared a second time.
            raise ConfigError(f"checkpoint {self.path} cannot be read ({type(exc).__name__}: {exc}); "
                              "move it away only once no pod on this node uses a claim of this driver") from exc

    def _save(self, claims: dict[str, PreparedClaim]) -> None:
        _write_atomic(self.path, {"version": CHECKPOINT_VERSION, "driver": self.driver,
                                  "claims": {uid: c.as_json() for uid, c in sorted(claims.items())}})

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
